//! A 2026-07-28 request about something another instance holds (SPEC §25 "Calls that wait,
//! and tasks"): the retry of a call waiting for input under a sealed `requestState`, or a
//! `tasks/*` request of a task created there. It is forwarded to that instance whole (the same
//! headers, the credential included) and its answer relayed as it comes; when that instance
//! does not answer, a retry is made here from the start and says so, and a task is reported
//! lost with it.

use bytes::Bytes;
use futures::StreamExt as _;
use http::{HeaderMap, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use serde_json::Value;

use super::Body;
use super::stateless::member_text;
use crate::cluster::Cluster;
use crate::cluster::handoff::{SealedState, call_digest, looks_sealed};

/// The header a forwarded request carries (the forwarding instance's id): its receiver answers
/// it itself, never forwards it again.
pub(super) const FORWARDED_HEADER: &str = "loom-forwarded";

/// The `_meta` member of a result that loom had to make again from the start.
pub(super) const RETRIED_META: &str = "io.loom/retried";

/// Where a request is answered.
pub(super) enum Placement {
    /// By this instance, as it came.
    Here,
    /// By this instance, as a new call (the body without `requestState`/`inputResponses`),
    /// its result saying why under `_meta["io.loom/retried"]`.
    Again { body: Bytes, note: String },
    /// Already answered (forwarded, or refused).
    Answered(Response<Body>),
}

/// What the request concerns that an instance may hold.
enum Held {
    State(String),
    Task(String),
}

fn held_of(method: &str, body: &[u8]) -> Option<Held> {
    // Most calls carry no state: a scan for the member's name spares them a second parse.
    let text = |member: &str| {
        memchr::memmem::find(body, member.as_bytes())?;
        member_text(body, &["params", member])
            .and_then(|raw| serde_json::from_str::<String>(&raw).ok())
    };
    match method {
        "tools/call" | "prompts/get" | "resources/read" => text("requestState").map(Held::State),
        "tasks/get" | "tasks/update" | "tasks/cancel" => text("taskId").map(Held::Task),
        _ => None,
    }
}

/// The instance's side of it: what the session of the request's scope holds.
pub(super) struct Local<'a> {
    pub cluster: &'a Cluster,
    pub scope: &'a str,
    pub holds_state: &'a (dyn Fn(&str) -> bool + Sync),
    pub holds_task: &'a (dyn Fn(&str) -> bool + Sync),
}

/// Decide where `body` (a 2026-07-28 request of `method`) is answered, forwarding it with
/// `client` when another instance holds what it concerns.
pub(super) async fn place(
    local: Local<'_>,
    client: &reqwest::Client,
    method: &str,
    headers: &HeaderMap,
    body: &Bytes,
    id: Option<&str>,
) -> Placement {
    let Some(held) = held_of(method, body) else {
        return Placement::Here;
    };
    // Forwarded by an instance of this cluster to this one (sealed for it), or not: a header
    // that is not, or one meant for an instance that was at this address before, is 421.
    let forwarded = match headers.get(FORWARDED_HEADER) {
        None => false,
        Some(token) => match token.to_str() {
            Ok(token) if local.cluster.forwarded_here(token) => true,
            _ => return Placement::Answered(misdirected()),
        },
    };
    match held {
        Held::State(state) => {
            if !looks_sealed(&state) || (local.holds_state)(&state) {
                return Placement::Here;
            }
            // Forged, altered, expired, of another scope or of this instance (used already):
            // the session answers it as a state it does not hold.
            let Some(sealed) = local.cluster.open_state(&state) else {
                return Placement::Here;
            };
            if sealed.scope != local.scope || sealed.expired() {
                return Placement::Here;
            }
            if sealed.instance == local.cluster.instance() {
                return Placement::Here;
            }
            if forwarded {
                // Sent here for an instance that was at this address before (restarted).
                return Placement::Answered(misdirected());
            }
            let url = match local.cluster.instance_url(&sealed.instance).await {
                Ok(url) => url,
                // Whether its instance lives is unknown: not made again while it may.
                Err(error) => {
                    return Placement::Answered(refused(
                        id,
                        &format!(
                            "loom: the call waiting under this `requestState` is on another \
                             loom instance, and the cluster store cannot say where ({error}); \
                             retry in a moment"
                        ),
                    ));
                }
            };
            if let Some(url) = &url
                && let Some(answer) =
                    forward(client, url, &sealed.instance, headers, body, local.cluster).await
            {
                return Placement::Answered(answer);
            }
            again(local, &sealed, method, body, id).await
        }
        Held::Task(task) => {
            if (local.holds_task)(&task) {
                return Placement::Here;
            }
            let instance = match local.cluster.task_instance(local.scope, &task).await {
                Ok(Some(instance)) if instance != local.cluster.instance() => instance,
                // Unknown to the store, or this instance's (ended here): the session answers.
                Ok(_) => return Placement::Here,
                Err(error) => {
                    return Placement::Answered(refused(
                        id,
                        &format!(
                            "unknown task `{task}` here, and the cluster store cannot say which \
                             instance holds it: {error}"
                        ),
                    ));
                }
            };
            if forwarded {
                return Placement::Answered(misdirected());
            }
            if let Ok(Some(url)) = local.cluster.instance_url(&instance).await
                && let Some(answer) =
                    forward(client, &url, &instance, headers, body, local.cluster).await
            {
                return Placement::Answered(answer);
            }
            Placement::Answered(refused(
                id,
                &format!(
                    "unknown task `{task}`: the loom instance that created it does not answer any \
                     more, and the task ended with it; call the tool again"
                ),
            ))
        }
    }
}

/// The call waiting under `sealed` was on an instance that does not answer: it is made again
/// here from the start, once in the cluster (the state's claim), if the retry is the same call.
async fn again(
    local: Local<'_>,
    sealed: &SealedState,
    method: &str,
    body: &Bytes,
    id: Option<&str>,
) -> Placement {
    let Ok(Value::Object(mut request)) = serde_json::from_slice::<Value>(body) else {
        return Placement::Here;
    };
    let Some(Value::Object(params)) = request.get_mut("params") else {
        return Placement::Here;
    };
    let target = match method {
        "resources/read" => params.get("uri"),
        _ => params.get("name"),
    }
    .and_then(Value::as_str)
    .unwrap_or_default()
    .to_string();
    // As the handler reads a call: `"arguments": null` is no arguments.
    let arguments = match method {
        "resources/read" => None,
        _ => params.get("arguments").filter(|a| !a.is_null()),
    };
    if call_digest(method, &target, arguments) != sealed.call {
        return Placement::Answered(refused(
            id,
            &format!(
                "loom: this `requestState` belongs to another call than `{method}` of `{target}` \
                 with these arguments; a retry repeats the call it continues"
            ),
        ));
    }
    match local.cluster.claim_state(local.scope, &sealed.key).await {
        Ok(true) => {}
        // Taken up before: the session answers it as unknown.
        Ok(false) => return Placement::Here,
        Err(error) => {
            return Placement::Answered(refused(
                id,
                &format!(
                    "loom: the call waiting under this `requestState` was on a loom instance that \
                     does not answer, and the cluster store cannot say whether the state was \
                     used already ({error}); call again without `requestState` and \
                     `inputResponses` to start over"
                ),
            ));
        }
    }
    params.remove("requestState");
    params.remove("inputResponses");
    let note = format!(
        "the loom instance that held this call while it waited for input does not answer any \
         more; loom made the call again from the start (`{target}`), and any question the \
         server asked before is asked again"
    );
    tracing::warn!(target = %target, "a waiting call's instance is gone: made again from the start");
    match serde_json::to_vec(&Value::Object(request)) {
        Ok(body) => Placement::Again {
            body: Bytes::from(body),
            note,
        },
        Err(_) => Placement::Here,
    }
}

/// Headers not sent on: the connection's own, and what the client computes from the body.
fn hop_by_hop(name: &http::HeaderName) -> bool {
    matches!(
        name.as_str(),
        "host"
            | "content-length"
            | "connection"
            | "keep-alive"
            | "transfer-encoding"
            | "te"
            | "trailer"
            | "upgrade"
            | "proxy-authorization"
            | "proxy-connection"
    )
}

/// Send the request to the instance at `url` and relay its answer as it streams. `None` when
/// the instance cannot be reached, or says it is not the one (421: another process is at its
/// address now).
async fn forward(
    client: &reqwest::Client,
    url: &str,
    to: &str,
    headers: &HeaderMap,
    body: &Bytes,
    cluster: &Cluster,
) -> Option<Response<Body>> {
    relay(
        client.post(url).body(body.clone()),
        url,
        to,
        headers,
        cluster,
    )
    .await
}

/// A browser back from a subject's login (`GET /oauth/callback?QUERY`) whose login does not
/// wait here: sent on to the instance whose login sent its `state` (the browser may come back
/// to any instance behind the balancer). `None` when no other instance has it.
pub(super) async fn forward_redirect(
    cluster: &Cluster,
    client: &reqwest::Client,
    query: &str,
    headers: &HeaderMap,
) -> Option<Response<Body>> {
    if headers.contains_key(FORWARDED_HEADER) {
        return None;
    }
    let state = crate::downstream::oauth::redirects::query_value(query, "state")?;
    // Anyone may send a browser here: only a state of the shape logins send is looked up.
    let shaped = (16..=256).contains(&state.len())
        && state
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~'));
    if !shaped {
        return None;
    }
    let instance = cluster.login_instance(&state).await.ok()??;
    if instance == cluster.instance() {
        return None;
    }
    let mcp = cluster.instance_url(&instance).await.ok()??;
    let mut url = reqwest::Url::parse(&mcp).ok()?;
    url.set_path(crate::downstream::oauth::redirects::CALLBACK_PATH);
    url.set_query(Some(query));
    relay(
        client.get(url.as_str()),
        url.as_str(),
        &instance,
        headers,
        cluster,
    )
    .await
}

/// Send `request` with the client's headers and relay the answer as it streams.
async fn relay(
    mut request: reqwest::RequestBuilder,
    url: &str,
    to: &str,
    headers: &HeaderMap,
    cluster: &Cluster,
) -> Option<Response<Body>> {
    for (name, value) in headers {
        if !hop_by_hop(name) && name.as_str() != FORWARDED_HEADER {
            request = request.header(name, value);
        }
    }
    request = request.header(FORWARDED_HEADER, cluster.forwarding_token(to)?);
    let answer = match request.send().await {
        Ok(answer) => answer,
        Err(error) => {
            tracing::info!(%url, "the instance holding a request's state does not answer: {error}");
            return None;
        }
    };
    if answer.status() == StatusCode::MISDIRECTED_REQUEST {
        tracing::warn!(
            %url,
            "the loom at {url} is not the instance that holds this request's state (it restarted, \
             or cluster.advertise names another host, such as the balancer)"
        );
        return None;
    }
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if !hop_by_hop(name) {
            response = response.header(name, value);
        }
    }
    // A connection that breaks mid-answer ends the relayed one there: the client sees the
    // stream end as it would connected to that instance.
    let frames = answer
        .bytes_stream()
        .take_while(|chunk| std::future::ready(chunk.is_ok()))
        .filter_map(|chunk| std::future::ready(chunk.ok()))
        .map(|chunk| Ok::<_, std::convert::Infallible>(hyper::body::Frame::data(chunk)));
    response
        .body(BodyExt::boxed_unsync(StreamBody::new(frames)))
        .ok()
}

/// This instance is not the one a forwarded request was meant for.
fn misdirected() -> Response<Body> {
    super::plain(
        StatusCode::MISDIRECTED_REQUEST,
        "this loom instance does not hold what the forwarded request concerns",
    )
}

/// A -32602 answer, with the HTTP status 2026-07-28 gives it (400).
fn refused(id: Option<&str>, message: &str) -> Response<Body> {
    let status = super::stateless::status_of(br#"{"error":{"code":-32602}}"#);
    super::rpc_error(status, id, -32602, message)
}

/// `line` (a JSON-RPC answer) with `note` under its result's `_meta["io.loom/retried"]`.
pub(super) fn noted(line: Bytes, note: &str) -> Bytes {
    let Ok(Value::Object(mut answer)) = serde_json::from_slice::<Value>(&line) else {
        return line;
    };
    let Some(Value::Object(result)) = answer.get_mut("result") else {
        return line;
    };
    let meta = result
        .entry("_meta")
        .or_insert_with(|| Value::Object(Default::default()));
    if let Value::Object(meta) = meta {
        meta.insert(RETRIED_META.into(), Value::String(note.to_string()));
    }
    serde_json::to_vec(&Value::Object(answer))
        .map(Bytes::from)
        .unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_lands_in_the_result_s_meta() {
        let line = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#);
        let noted: Value = serde_json::from_slice(&noted(line, "again")).expect("json");
        assert_eq!(noted["result"]["_meta"][RETRIED_META], "again");
        let error = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"error":{"code":1}}"#);
        assert_eq!(noted_text(error.clone()), error);
    }

    fn noted_text(line: Bytes) -> Bytes {
        noted(line, "x")
    }

    #[test]
    fn only_states_and_task_ids_are_looked_at() {
        let call = br#"{"params":{"name":"a","requestState":"loom1.x"}}"#;
        assert!(matches!(held_of("tools/call", call), Some(Held::State(s)) if s == "loom1.x"));
        assert!(held_of("tools/list", call).is_none());
        let get = br#"{"params":{"taskId":"t1"}}"#;
        assert!(matches!(held_of("tasks/get", get), Some(Held::Task(t)) if t == "t1"));
        assert!(held_of("tools/call", br#"{"params":{"name":"a"}}"#).is_none());
    }
}
