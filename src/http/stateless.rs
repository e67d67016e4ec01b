//! Protocol 2026-07-28 over HTTP: no sessions (SPEC §22 "Without a session").
//!
//! A 2026-07-28 client sends every request as a POST of its own, carrying the per-request
//! envelope in `_meta` and the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers, and
//! never an `Mcp-Session-Id`. Its datasets, documents, waiting calls and tasks still have to
//! live somewhere between requests: in the **scope** of its credential. Each bearer token loom
//! accepts (`http.token`, `http.tokens`) is one scope, named by a digest of the token; without
//! tokens every client shares one scope. A scope is a loom session like any other (its own
//! store, catalog, joined tools, report), opened by its first request and closed after
//! `http.sessionIdleSecs` without one.
//!
//! Several clients of one scope may use the same request ids and progress tokens at once (each
//! starts at 1), so a request is handed to the scope's session under an id and token of loom's
//! own, and what comes back is given the client's again ([`Rewrite`]).

use std::borrow::Cow;
use std::collections::BTreeMap;

use http::StatusCode;
use serde::Deserialize;
use serde_json::value::RawValue;

/// `_meta` member naming a listen stream on its notifications.
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The ids and token a stateless request had, to be given back on what loom sends for it.
#[derive(Debug, Clone)]
pub(crate) struct Rewrite {
    /// The client's request id, as it wrote it.
    pub id: String,
    /// The client's progress token, as it wrote it.
    pub token: Option<String>,
    /// Why the call was made again from the start (a cluster's instance gone, SPEC §25): put
    /// under the result's `_meta`.
    pub note: Option<String>,
}

/// An object's members, their values as text borrowed from it (member order does not matter
/// to JSON-RPC; every value keeps its bytes).
type Members<'a> = BTreeMap<String, &'a RawValue>;

/// The request `body` with `id` and, when it had one, its progress token replaced by loom's
/// (both JSON text). Everything else keeps its bytes (arguments included).
pub(super) fn rewrite_request(body: &str, id: &str, token: Option<&str>) -> Result<String, String> {
    let top: Members<'_> = serde_json::from_str(body)
        .map_err(|e| format!("the body is not a JSON-RPC message: {e}"))?;
    let mut out = String::with_capacity(body.len() + 32);
    out.push('{');
    let mut first = true;
    for (name, value) in &top {
        if !first {
            out.push(',');
        }
        first = false;
        push_key(&mut out, name);
        match name.as_str() {
            "id" => out.push_str(id),
            "params" => match token {
                Some(token) => push_params(&mut out, value, token)?,
                None => out.push_str(value.get()),
            },
            _ => out.push_str(value.get()),
        }
    }
    out.push('}');
    Ok(out)
}

fn push_key(out: &mut String, key: &str) {
    out.push_str(&serde_json::to_string(key).unwrap_or_default());
    out.push(':');
}

/// `params` with `_meta.progressToken` replaced by `token`.
fn push_params(out: &mut String, params: &RawValue, token: &str) -> Result<(), String> {
    let params: Members<'_> = serde_json::from_str(params.get())
        .map_err(|e| format!("`params` is not an object: {e}"))?;
    out.push('{');
    let mut first = true;
    for (name, value) in &params {
        if !first {
            out.push(',');
        }
        first = false;
        push_key(out, name);
        if name == "_meta" {
            let meta: Members<'_> = serde_json::from_str(value.get())
                .map_err(|e| format!("`params._meta` is not an object: {e}"))?;
            out.push('{');
            let mut first_member = true;
            for (key, member) in &meta {
                if !first_member {
                    out.push(',');
                }
                first_member = false;
                push_key(out, key);
                out.push_str(if key == "progressToken" {
                    token
                } else {
                    member.get()
                });
            }
            out.push('}');
        } else {
            out.push_str(value.get());
        }
    }
    out.push('}');
    Ok(())
}

/// A line loom wrote, with the value at `path` (member names from the top) replaced by
/// `replacement`; the rest of its bytes kept. `None` when the line has no such member.
pub(super) fn replace_member(line: &[u8], path: &[&str], replacement: &str) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(line).ok()?;
    let (start, end) = locate(text, path)?;
    let mut out = Vec::with_capacity(line.len() + replacement.len());
    out.extend_from_slice(&line[..start]);
    out.extend_from_slice(replacement.as_bytes());
    out.extend_from_slice(&line[end..]);
    Some(out)
}

/// Where the value at `path` lies in `text` (byte range).
fn locate(text: &str, path: &[&str]) -> Option<(usize, usize)> {
    let (first, rest) = path.split_first()?;
    let top: Members<'_> = serde_json::from_str(text).ok()?;
    let value = top.get(*first)?;
    let offset = (value.get().as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
    if rest.is_empty() {
        return Some((offset, offset + value.get().len()));
    }
    let (start, end) = locate(value.get(), rest)?;
    Some((offset + start, offset + end))
}

/// The text of the member at `path` in `body`, as written.
pub(super) fn member_text(body: &[u8], path: &[&str]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    let (start, end) = locate(text, path)?;
    Some(text[start..end].to_string())
}

/// Whether an `MCP-Protocol-Version` header names a revision without sessions: any version but
/// the four that have the `initialize` handshake (an unknown one is refused by the session in
/// JSON-RPC's words, -32022).
pub(super) fn is_sessionless_version(version: &str) -> bool {
    !matches!(
        version,
        "2024-11-05" | "2025-03-26" | "2025-06-18" | "2025-11-25"
    )
}

/// The subscription id a listen stream's notification carries, as written.
pub(super) fn subscription_of(line: &[u8]) -> Option<String> {
    // Only notifications carry one; a cheap test first, as most lines are answers.
    memchr::memmem::find(line, SUBSCRIPTION_ID.as_bytes())?;
    let id = member_text(line, &SUBSCRIPTION_PATH)?;
    // Keyed as routes key ids: as rmcp reads and writes them.
    let id: rmcp::model::RequestId = serde_json::from_str(&id).ok()?;
    serde_json::to_string(&id).ok()
}

/// Where the subscription id sits in a listen stream's notification.
pub(super) const SUBSCRIPTION_PATH: [&str; 3] = ["params", "_meta", SUBSCRIPTION_ID];

/// The HTTP status of a stateless answer: a refusal of the request itself is 400 (malformed,
/// wrong envelope or headers, unsupported version, a capability the client lacks), an unknown
/// method 404, anything else 200 (as 2026-07-28 asks).
pub(super) fn status_of(line: &[u8]) -> StatusCode {
    #[derive(Deserialize)]
    struct Answer {
        #[serde(default)]
        error: Option<ErrorCode>,
    }
    #[derive(Deserialize)]
    struct ErrorCode {
        code: i64,
    }
    let code = serde_json::from_slice::<Answer>(line)
        .ok()
        .and_then(|a| a.error)
        .map(|e| e.code);
    match code {
        Some(-32700 | -32600 | -32602 | -32020 | -32021 | -32022) => StatusCode::BAD_REQUEST,
        Some(-32601) => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// What the headers of a 2026-07-28 request must agree with in its body.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<EnvelopeParams<'a>>,
}

#[derive(Deserialize)]
struct EnvelopeParams<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    uri: Option<Cow<'a, str>>,
    #[serde(borrow, rename = "taskId", default)]
    task_id: Option<Cow<'a, str>>,
    #[serde(borrow, rename = "_meta", default)]
    meta: Option<EnvelopeMeta<'a>>,
}

#[derive(Deserialize)]
struct EnvelopeMeta<'a> {
    #[serde(borrow, rename = "io.modelcontextprotocol/protocolVersion", default)]
    protocol_version: Option<Cow<'a, str>>,
}

/// The standard headers of a 2026-07-28 POST.
pub(super) struct Headers<'a> {
    pub version: Option<&'a str>,
    pub method: Option<&'a str>,
    pub name: Option<&'a str>,
}

/// Checks the standard headers against the body (2026-07-28 "Standard headers"): the protocol
/// version the header names is the one in `_meta`, `Mcp-Method` is the method, `Mcp-Name` is
/// the tool or prompt name, resource URI or task id. A mismatch is -32020 (HTTP 400), in words
/// that name the header.
pub(super) fn check_headers(body: &str, headers: &Headers<'_>) -> Result<(), String> {
    // A member named twice is read as its first by one parser and its last by another: the
    // header could agree with one while the request is served by the other (a protocol version
    // passed the check and the request was served as another revision).
    if let Some(name) = duplicate_member(body) {
        return Err(format!(
            "the request names the member `{}` twice in one object; name each member once (the \
             standard headers must agree with the body)",
            crate::common::text::cut(&name, 100)
        ));
    }
    let Ok(envelope) = serde_json::from_str::<Envelope<'_>>(body) else {
        // The body's own problems are reported by the session in JSON-RPC's words.
        return Ok(());
    };
    // A method the revision does not have is -32601 whatever its headers say (what a
    // server checks first, as the conformance suite expects).
    if envelope
        .method
        .as_deref()
        .is_some_and(crate::gateway::protocol::era::absent_in_2026)
    {
        return Ok(());
    }
    let params = envelope.params.as_ref();
    let in_meta = params
        .and_then(|p| p.meta.as_ref())
        .and_then(|m| m.protocol_version.as_deref());
    match (headers.version, in_meta) {
        (Some(header), Some(meta)) if header != meta => {
            return Err(format!(
                "the MCP-Protocol-Version header ({header}) is not the protocolVersion in the \
                 request's _meta ({meta})"
            ));
        }
        (None, Some(meta)) => {
            return Err(format!(
                "the request's _meta names protocol {meta}, but the MCP-Protocol-Version header \
                 is missing"
            ));
        }
        _ => {}
    }
    let method = envelope.method.as_deref();
    if let Some(header) = headers.method
        && Some(header) != method
    {
        return Err(format!(
            "the Mcp-Method header ({header}) is not the request's method ({})",
            method.unwrap_or("none")
        ));
    }
    if headers.method.is_none() && headers.version.is_some() && method.is_some() {
        return Err("the Mcp-Method header is missing (2026-07-28 requests carry it)".into());
    }
    let named = params.and_then(|p| match method {
        Some("tools/call" | "prompts/get") => p.name.as_deref(),
        Some("resources/read") => p.uri.as_deref(),
        Some(m) if m.starts_with("tasks/") => p.task_id.as_deref(),
        _ => None,
    });
    match (headers.name, named) {
        (Some(header), Some(named)) => {
            let decoded = decode_header_value(header);
            if decoded.as_deref() != Some(named) {
                return Err(format!(
                    "the Mcp-Name header ({header}) is not the name the request's params give \
                     ({named})"
                ));
            }
        }
        (None, Some(named)) if headers.version.is_some() => {
            return Err(format!(
                "the Mcp-Name header is missing (2026-07-28 requests for {named} carry it)"
            ));
        }
        _ => {}
    }
    Ok(())
}

/// The first member name that appears twice in one object of the JSON text `body`, at any
/// depth (`None` when every object names each member once, or when `body` is not JSON).
fn duplicate_member(body: &str) -> Option<String> {
    use serde::de::{DeserializeSeed, Deserializer, Error, MapAccess, SeqAccess, Visitor};
    use std::cell::RefCell;
    use std::collections::HashSet;

    /// Walks one value; the first duplicate found is written to `found` and ends the walk.
    #[derive(Clone, Copy)]
    struct Walk<'f>(&'f RefCell<Option<String>>);

    impl<'de> DeserializeSeed<'de> for Walk<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Walk<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element_seed(self)?.is_some() {}
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut seen: HashSet<Cow<'de, str>> = HashSet::new();
            while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                if seen.contains(&key) {
                    *self.0.borrow_mut() = Some(key.into_owned());
                    return Err(A::Error::custom("duplicate member"));
                }
                map.next_value_seed(self)?;
                seen.insert(key);
            }
            Ok(())
        }
    }

    let found = RefCell::new(None);
    let mut reader = serde_json::Deserializer::from_str(body);
    let _ = Walk(&found).deserialize(&mut reader);
    found.into_inner()
}

/// One `x-mcp-header` annotation of a tool's `inputSchema`: the argument's path of `properties`
/// keys, the header token, and the property's type.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ParamHeader {
    pub path: Vec<String>,
    pub token: String,
    pub kind: String,
}

/// The `x-mcp-header` annotations of `schema` (on properties reachable from the root through
/// `properties` alone). A schema with an invalid one (not a token, not on a string, integer or
/// boolean property, or named twice) has none: 2026-07-28 clients drop such a tool and send no
/// headers for it.
pub(super) fn param_headers(schema: &serde_json::Value) -> Vec<ParamHeader> {
    fn walk(
        schema: &serde_json::Value,
        path: &mut Vec<String>,
        out: &mut Vec<ParamHeader>,
        valid: &mut bool,
    ) {
        let Some(properties) = schema.get("properties").and_then(|p| p.as_object()) else {
            return;
        };
        for (name, property) in properties {
            path.push(name.clone());
            if let Some(token) = property.get("x-mcp-header") {
                let kind = property.get("type").and_then(|t| t.as_str()).unwrap_or("");
                match token.as_str() {
                    Some(token)
                        if is_token(token) && matches!(kind, "string" | "integer" | "boolean") =>
                    {
                        out.push(ParamHeader {
                            path: path.clone(),
                            token: token.to_string(),
                            kind: kind.to_string(),
                        });
                    }
                    _ => *valid = false,
                }
            }
            walk(property, path, out, valid);
            path.pop();
        }
    }
    let mut out = Vec::new();
    let mut valid = true;
    walk(schema, &mut Vec::new(), &mut out, &mut valid);
    let mut seen: Vec<String> = Vec::new();
    for header in &out {
        let lower = header.token.to_ascii_lowercase();
        if seen.contains(&lower) {
            valid = false;
        }
        seen.push(lower);
    }
    if valid { out } else { Vec::new() }
}

/// An RFC 9110 token: the characters of an HTTP field name.
fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Checks the `Mcp-Param-*` headers of a `tools/call` against its arguments (2026-07-28): every
/// annotated argument present is mirrored by its header, equal after decoding (an integer
/// numerically), and no header stands for an absent argument. `headers` are every
/// `Mcp-Param-*` header as (lowercase name, value; `None` for a value that is not visible
/// ASCII).
pub(super) fn check_param_headers(
    annotations: &[ParamHeader],
    arguments: Option<&serde_json::Map<String, serde_json::Value>>,
    headers: &[(String, Option<String>)],
) -> Result<(), String> {
    for (name, value) in headers {
        if value.is_none() {
            return Err(format!(
                "the {name} header carries characters a header value cannot (send it as =?base64?…?=)"
            ));
        }
    }
    for annotation in annotations {
        let name = format!("Mcp-Param-{}", annotation.token);
        let lower = name.to_ascii_lowercase();
        let mut given = headers.iter().filter(|(n, _)| *n == lower);
        let raw = given.next().and_then(|(_, v)| v.clone());
        if given.next().is_some() {
            return Err(format!("the {name} header appears more than once"));
        }
        let argument = annotation.path.join(".");
        let mut value = arguments.map(|a| serde_json::Value::Object(a.clone()));
        for key in &annotation.path {
            value = value.and_then(|v| v.get(key).cloned());
        }
        let value = value.filter(|v| !v.is_null());
        let Some(value) = value else {
            if raw.is_some() {
                return Err(format!(
                    "the {name} header is present but the request's `{argument}` argument is absent"
                ));
            }
            continue;
        };
        let rendered = match &value {
            serde_json::Value::Bool(b) => Some(b.to_string()),
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        };
        let Some(rendered) = rendered else {
            if raw.is_some() {
                return Err(format!(
                    "the {name} header does not match the request's `{argument}` argument"
                ));
            }
            continue;
        };
        let Some(raw) = raw else {
            return Err(format!(
                "the {name} header is missing but the request's `{argument}` argument is present"
            ));
        };
        let Some(decoded) = decode_header_value(&raw) else {
            return Err(format!(
                "the {name} header carries a malformed base64 value"
            ));
        };
        let matches = match (&annotation.kind[..], &value) {
            ("integer", serde_json::Value::Number(n)) if is_decimal(&decoded) => {
                let (whole, fraction) = decoded.split_once('.').unwrap_or((&decoded, ""));
                fraction.bytes().all(|b| b == b'0')
                    && match (whole.parse::<i128>(), n.as_i64(), n.as_u64(), n.as_f64()) {
                        (Ok(w), Some(v), _, _) => w == i128::from(v),
                        (Ok(w), None, Some(v), _) => w == i128::from(v),
                        (Ok(w), None, None, Some(v)) => v.fract() == 0.0 && (w as f64) == v,
                        _ => false,
                    }
            }
            _ => decoded == rendered,
        };
        if !matches {
            return Err(format!(
                "the {name} header does not match the request's `{argument}` argument"
            ));
        }
    }
    Ok(())
}

/// `-?[0-9]+(\.[0-9]+)?`: the header values that compare numerically.
fn is_decimal(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let (whole, fraction) = match digits.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (digits, None),
    };
    !whole.is_empty()
        && whole.bytes().all(|b| b.is_ascii_digit())
        && fraction.is_none_or(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()))
}

/// A header value as 2026-07-28 encodes values that are not plain ASCII:
/// `=?base64?<base64 of the UTF-8>?=`; any other value is itself.
fn decode_header_value(value: &str) -> Option<String> {
    use base64::Engine;
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(encoded) => {
            let engine = base64::engine::general_purpose::STANDARD;
            let bytes = engine.decode(encoded).ok()?;
            // Only the canonical encoding of the bytes (what a sender writes) is accepted.
            if engine.encode(&bytes) != encoded {
                return None;
            }
            String::from_utf8(bytes).ok()
        }
        None => Some(value.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_get_loom_s_id_and_token_and_keep_their_arguments() {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a": 2.50},"_meta":{"progressToken":1,"x":"y"}}}"#;
        let out = rewrite_request(body, r#""h-7""#, Some(r#""hp-7""#)).expect("rewritten");
        let value: serde_json::Value = serde_json::from_str(&out).expect("json");
        assert_eq!(value["id"], "h-7");
        assert_eq!(value["params"]["_meta"]["progressToken"], "hp-7");
        assert_eq!(value["params"]["_meta"]["x"], "y");
        assert!(out.contains(r#""arguments":{"a": 2.50}"#), "{out}");
        let bare = rewrite_request(
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{}}"#,
            "9",
            None,
        )
        .expect("rewritten");
        assert!(bare.contains(r#""id":9"#), "{bare}");
    }

    #[test]
    fn answers_get_the_client_s_id_back() {
        let line = br#"{"jsonrpc":"2.0","id":"h-7","result":{"content":[],"v":1.50}}"#;
        let out = replace_member(line, &["id"], "1").expect("replaced");
        assert_eq!(
            std::str::from_utf8(&out).expect("utf-8"),
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"v":1.50}}"#
        );
        let progress = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"hp-7","progress":1}}"#;
        let out =
            replace_member(progress, &["params", "progressToken"], "\"t\"").expect("replaced");
        assert!(
            std::str::from_utf8(&out)
                .expect("utf-8")
                .contains(r#""progressToken":"t""#)
        );
        let ack = br#"{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"h-3"},"notifications":{}}}"#;
        assert_eq!(subscription_of(ack).as_deref(), Some(r#""h-3""#));
        assert_eq!(subscription_of(line), None);
    }

    #[test]
    fn headers_must_agree_with_the_body() {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a_b","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        let ok = Headers {
            version: Some("2026-07-28"),
            method: Some("tools/call"),
            name: Some("a_b"),
        };
        assert!(check_headers(body, &ok).is_ok());
        let encoded = Headers {
            name: Some("=?base64?YV9i?="),
            ..ok
        };
        assert!(check_headers(body, &encoded).is_ok());
        let wrong_method = Headers {
            method: Some("tools/list"),
            ..ok
        };
        assert!(check_headers(body, &wrong_method).is_err_and(|e| e.contains("Mcp-Method")));
        let wrong_name = Headers {
            name: Some("other"),
            ..ok
        };
        assert!(check_headers(body, &wrong_name).is_err_and(|e| e.contains("Mcp-Name")));
        let wrong_version = Headers {
            version: Some("2099-01-01"),
            ..ok
        };
        assert!(check_headers(body, &wrong_version).is_err());
        let no_header = Headers {
            version: None,
            method: None,
            name: None,
        };
        assert!(check_headers(body, &no_header).is_err());

        // The protocol version named twice: the header agrees with the first, a reader that
        // keeps the last would serve another revision.
        let twice = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a_b","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}"#;
        assert!(check_headers(twice, &ok).is_err_and(|e| {
            e.contains("names the member `io.modelcontextprotocol/protocolVersion` twice")
        }));
        let method_twice = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/list","params":{"name":"a_b","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert!(check_headers(method_twice, &ok).is_err_and(|e| e.contains("`method` twice")));
        let argument_twice = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a_b","arguments":{"q":[{"x":1,"x":2}]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert!(check_headers(argument_twice, &ok).is_err_and(|e| e.contains("`x` twice")));
        // The same name in different objects is fine; escapes are compared decoded.
        let apart = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a_b","arguments":{"name":{"name":1},"a\u0062":1,"ab2":2},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert!(check_headers(apart, &ok).is_ok());
        // A method 2026-07-28 does not have is left to dispatch (-32601), headers or not.
        let removed = r#"{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"t1","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        let no_name = Headers {
            version: Some("2026-07-28"),
            method: Some("tasks/result"),
            name: None,
        };
        assert!(check_headers(removed, &no_name).is_ok());
        let tasks_get = removed.replace("tasks/result", "tasks/get");
        let get = Headers {
            method: Some("tasks/get"),
            ..no_name
        };
        assert!(check_headers(&tasks_get, &get).is_err_and(|e| e.contains("Mcp-Name")));
        let escaped_twice = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a_b","arguments":{"ab":1,"a\u0062":2},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert!(check_headers(escaped_twice, &ok).is_err_and(|e| e.contains("`ab` twice")));
    }

    #[test]
    fn param_headers_mirror_annotated_arguments() {
        let schema = serde_json::json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "limit": {"type": "integer", "x-mcp-header": "Limit"},
            "nested": {"type": "object", "properties": {"on": {"type": "boolean", "x-mcp-header": "On"}}},
            "free": {"type": "string"}
        }});
        let annotations = param_headers(&schema);
        assert_eq!(annotations.len(), 3, "{annotations:?}");
        let arguments = serde_json::json!({"region": "eu", "limit": 42, "nested": {"on": true}});
        let arguments = arguments.as_object();
        let header = |n: &str, v: &str| (n.to_ascii_lowercase(), Some(v.to_string()));
        let all = [
            header("Mcp-Param-Region", "eu"),
            header("Mcp-Param-Limit", "42.0"),
            header("Mcp-Param-On", "true"),
        ];
        assert!(check_param_headers(&annotations, arguments, &all).is_ok());
        let encoded = [
            header("Mcp-Param-Region", "=?base64?ZXU=?="),
            header("Mcp-Param-Limit", "42"),
            header("Mcp-Param-On", "true"),
        ];
        assert!(check_param_headers(&annotations, arguments, &encoded).is_ok());
        let missing = [
            header("Mcp-Param-Region", "eu"),
            header("Mcp-Param-On", "true"),
        ];
        assert!(
            check_param_headers(&annotations, arguments, &missing)
                .is_err_and(|e| e.contains("Mcp-Param-Limit header is missing"))
        );
        let wrong = [
            header("Mcp-Param-Region", "us"),
            header("Mcp-Param-Limit", "42"),
            header("Mcp-Param-On", "true"),
        ];
        assert!(
            check_param_headers(&annotations, arguments, &wrong)
                .is_err_and(|e| e.contains("does not match"))
        );
        let stray = [header("Mcp-Param-Region", "eu")];
        let only_region = serde_json::json!({"region": "eu", "limit": null});
        assert!(check_param_headers(&annotations, only_region.as_object(), &stray).is_ok());
        let absent = serde_json::json!({});
        assert!(
            check_param_headers(&annotations, absent.as_object(), &stray)
                .is_err_and(|e| e.contains("absent"))
        );
        let garbled = [("mcp-param-region".to_string(), None)];
        assert!(check_param_headers(&annotations, arguments, &garbled).is_err());
        let not_canonical = [
            header("Mcp-Param-Region", "=?base64?ZXV=?="),
            header("Mcp-Param-Limit", "42"),
            header("Mcp-Param-On", "true"),
        ];
        assert!(
            check_param_headers(&annotations, arguments, &not_canonical)
                .is_err_and(|e| e.contains("malformed"))
        );
        // An invalid annotation anywhere: nothing is checked.
        let invalid = serde_json::json!({"properties": {"a": {"type": "array", "x-mcp-header": "A"}, "b": {"type": "string", "x-mcp-header": "B"}}});
        assert!(param_headers(&invalid).is_empty());
    }

    #[test]
    fn refusals_have_their_http_status() {
        assert_eq!(
            status_of(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x"}}"#),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            status_of(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"x"}}"#),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            status_of(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"x"}}"#),
            StatusCode::OK
        );
        assert_eq!(
            status_of(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            StatusCode::OK
        );
    }
}
