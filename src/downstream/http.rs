//! Remote servers over Streamable HTTP.
//!
//! rmcp's client transport does the protocol: sessions (`Mcp-Session-Id`), the
//! `MCP-Protocol-Version` header, the GET stream and its resumption with `Last-Event-Id`,
//! re-initialising an expired session. loom adds what a proxy needs on top, in the HTTP client
//! the transport is built on:
//!
//! * **Exact bytes.** rmcp decodes every response into typed structs; for the requests whose
//!   answers loom passes on (`tools/call`, `resources/read`, …) [`CapturingClient`] sends the
//!   POST itself and keeps the raw `result` text in the connection's [`RawResults`] — from a
//!   JSON body or from an SSE event's data — handing rmcp a placeholder, exactly as the stdio
//!   transport does. Every other message (the handshake, lists, notifications) goes through
//!   rmcp's own reqwest client unchanged.
//! * **Outages.** A refused connection or a 5xx answer marks the connection broken, so the
//!   supervisor reconnects with the same backoff and delisting rules as for a crashed child.
//! * **Errors a user can act on.** 401/403, an HTML page, a redirect, an unreachable host or a
//!   TLS failure are described in words that name the URL and the header to fix.

use std::borrow::Cow;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER};
use rmcp::model::{
    ClientJsonRpcMessage, JsonRpcMessage, JsonRpcResponse, JsonRpcVersion2_0, ServerJsonRpcMessage,
    ServerResult,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, StreamableHttpClient,
    StreamableHttpClientTransportConfig, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse, SseStream};
use tokio_util::sync::CancellationToken;

use super::oauth::{ServerLogin, TokenError};
use crate::config::{RemoteServer, mask_url};
use crate::wire::{MAX_MESSAGE_BYTES, ProgressLedger, RawParams, RawResults, capture_incoming};

/// How long connecting (TCP and TLS) to a remote server may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

type HttpError = StreamableHttpError<reqwest::Error>;

/// Why a remote connection was given up, shared between the HTTP client (which sees the
/// failure) and the supervisor (which reconnects).
#[derive(Clone, Default)]
pub struct Outage {
    broken: CancellationToken,
    reason: Arc<Mutex<Option<String>>>,
    /// The last failure described by [`CapturingClient::explain`]: rmcp wraps it in its own
    /// words and type names, so the supervisor takes it from here.
    last_failure: Arc<Mutex<Option<String>>>,
    /// 5xx answers since the last good one.
    server_errors: Arc<std::sync::atomic::AtomicU32>,
}

/// After this many 5xx answers in a row (and no good one between) a remote server counts as
/// down, and is reconnected with the restart backoff. One 5xx fails only its own request.
pub const SERVER_ERRORS_FOR_OUTAGE: u32 = 3;

impl Outage {
    fn server_error(&self, message: &str) {
        use std::sync::atomic::Ordering;
        let count = self.server_errors.fetch_add(1, Ordering::Relaxed) + 1;
        if count >= SERVER_ERRORS_FOR_OUTAGE {
            self.report(format!("{message} ({count} times in a row)"));
        }
    }

    fn answered(&self) {
        self.server_errors
            .store(0, std::sync::atomic::Ordering::Relaxed);
    }

    /// The last failure a request met, in loom's words, taken (a later request that fails
    /// for another reason must not be told this one).
    pub fn take_failure(&self) -> Option<String> {
        self.last_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    fn failed(&self, message: &str) {
        *self
            .last_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(message.to_owned());
    }

    /// The last failure a request met, in loom's words.
    pub fn last_failure(&self) -> Option<String> {
        self.last_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn report(&self, reason: String) {
        let mut slot = self.reason.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(reason);
        }
        self.broken.cancel();
    }

    /// Resolves when the connection was found broken.
    pub async fn happened(&self) {
        self.broken.cancelled().await
    }

    pub fn reason(&self) -> String {
        self.reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| "the connection broke".to_owned())
    }
}

/// The HTTP client under rmcp's Streamable HTTP transport for one server connection.
#[derive(Clone)]
pub struct CapturingClient {
    http: reqwest::Client,
    url: Arc<str>,
    raw: RawResults,
    progress: ProgressLedger,
    /// The params of the server's own requests, kept as written.
    params: RawParams,
    outage: Outage,
    /// Names of the configured headers, to say which one a 401/403 is about.
    header_names: Arc<[String]>,
    /// The server's OAuth login, whose access token each request carries (SPEC §4.7).
    login: Option<Arc<ServerLogin>>,
    /// The entry may log in with OAuth, but loom has nowhere to keep logins (no HOME).
    logins_homeless: bool,
}

/// rmcp's transport over [`CapturingClient`] for `remote`, and what tells of an outage.
pub fn transport(
    remote: &RemoteServer,
    raw: RawResults,
    progress: ProgressLedger,
    params: RawParams,
    login: Option<Arc<ServerLogin>>,
) -> Result<(StreamableHttpClientTransport<CapturingClient>, Outage), String> {
    install_crypto_provider();
    let http = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        // A redirect could carry the configured credentials to another host; the user is told
        // the final URL instead (see `explain`).
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| {
            format!(
                "cannot set up the HTTP client: {}",
                crate::common::text::error_chain(&e)
            )
        })?;
    let mut headers = HashMap::new();
    for (name, value) in &remote.headers {
        // Validated with the config; checked again because this is where they are used.
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("header `{name}` has an invalid name"))?;
        let mut value = HeaderValue::from_str(value)
            .map_err(|_| format!("header `{name}` has an invalid value"))?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    let outage = Outage::default();
    let client = CapturingClient {
        http,
        url: Arc::from(remote.url.as_str()),
        raw,
        progress,
        params,
        outage: outage.clone(),
        header_names: remote.headers.iter().map(|(k, _)| k.clone()).collect(),
        logins_homeless: login.is_none() && remote.oauth.is_some(),
        login,
    };
    let mut config = StreamableHttpClientTransportConfig::default();
    config.uri = Arc::from(remote.url.as_str());
    config.custom_headers = headers;
    // The same ceiling as one line on stdio: a large result is what loom exists for.
    config.max_sse_event_size = MAX_MESSAGE_BYTES;
    config.max_json_response_size = MAX_MESSAGE_BYTES;
    Ok((
        StreamableHttpClientTransport::with_client(client, config),
        outage,
    ))
}

pub use crate::common::tls::install_crypto_provider;

impl CapturingClient {
    fn shown_url(&self) -> String {
        mask_url(&self.url)
    }

    /// The access token the next request carries: none without an OAuth login (or before one).
    async fn token(&self) -> Result<Option<String>, HttpError> {
        match &self.login {
            None => Ok(None),
            Some(login) => login.bearer().await.map_err(|e| self.token_error(e)),
        }
    }

    /// Why no token could be had, as the request's error (and the failure the supervisor
    /// reports).
    fn token_error(&self, error: TokenError) -> HttpError {
        let message = match (error, &self.login) {
            (TokenError::NeedsLogin, Some(login)) => {
                login.mark_needed();
                let message = login.needs_login_message();
                // The connection is given up: the supervisor lists the server as waiting for a
                // login (its tools leave the catalog) until one is made.
                self.outage.report(message.clone());
                message
            }
            (TokenError::NeedsLogin, None) => self.refused(401),
            (TokenError::Failed(why), _) => {
                format!("cannot get an access token for {}: {why}", self.shown_url())
            }
        };
        self.failure(message)
    }

    /// `message` as the request's error, remembered as the last failure.
    fn failure(&self, message: String) -> HttpError {
        self.outage.failed(&message);
        StreamableHttpError::UnexpectedServerResponse(Cow::Owned(message))
    }

    /// A POST, on the path that keeps the answer's bytes when loom passes the answer on.
    async fn send(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        if super::supervisor::passes_through(&message) {
            self.post_captured(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await
        } else {
            self.http
                .post_message_with_response_limits(
                    uri,
                    message,
                    session_id,
                    auth_header,
                    custom_headers,
                    limits,
                )
                .await
        }
    }

    /// Which configured header a refusal is about, for the message.
    fn credential_header(&self) -> Option<&str> {
        self.header_names
            .iter()
            .find(|h| h.eq_ignore_ascii_case("authorization"))
            .or_else(|| self.header_names.iter().find(|h| is_credential_header(h)))
            .map(String::as_str)
    }

    fn refused(&self, status: u16) -> String {
        let what = if status == 401 {
            "401 Unauthorized"
        } else {
            "403 Forbidden"
        };
        match self.credential_header() {
            None if self.logins_homeless => format!(
                "{} answered HTTP {what}: it asks for a login, and loom keeps OAuth logins under \
                 $XDG_STATE_HOME/loom/oauth or ~/.local/state/loom/oauth, but neither \
                 XDG_STATE_HOME nor HOME is set (as an absolute path) in loom's environment: set \
                 one, or give a token in the entry's `headers`",
                self.shown_url()
            ),
            Some(header) => format!(
                "{} answered HTTP {what}: the credentials in header `{header}` were refused \
                 (check the token `{header}` carries, e.g. \"{header}\": \"Bearer ${{TOKEN}}\")",
                self.shown_url()
            ),
            None => format!(
                "{} answered HTTP {what}: the token is missing; this server needs credentials \
                 (set them in the entry's `headers`, e.g. \"Authorization\": \"Bearer ${{TOKEN}}\")",
                self.shown_url()
            ),
        }
    }

    /// `error` in words that say what to fix; marks an outage when the server is down.
    fn explain(&self, error: HttpError) -> HttpError {
        let url = self.shown_url();
        let message = match &error {
            StreamableHttpError::AuthRequired(_) => self.refused(401),
            StreamableHttpError::InsufficientScope(_) => self.refused(403),
            StreamableHttpError::UnexpectedServerResponse(text)
                if text.starts_with("HTTP 401") || text.starts_with("HTTP 403") =>
            {
                self.refused(if text.starts_with("HTTP 401") {
                    401
                } else {
                    403
                })
            }
            StreamableHttpError::UnexpectedServerResponse(text) if text.starts_with("HTTP 3") => {
                format!(
                    "{url} answered with a redirect ({}); loom does not follow redirects \
                     (they could carry the headers elsewhere): put the final URL in `url`",
                    first_line(text)
                )
            }
            StreamableHttpError::UnexpectedContentType(Some(kind))
                if kind.to_ascii_lowercase().contains("html") =>
            {
                format!(
                    "{url} answered with an HTML page ({kind}), not MCP: is `url` the server's \
                     MCP endpoint? (it often ends in `/mcp`)"
                )
            }
            StreamableHttpError::UnexpectedContentType(kind) => format!(
                "{url} answered with content type {}, not MCP (expected application/json or \
                 text/event-stream)",
                kind.as_deref().unwrap_or("(none)")
            ),
            StreamableHttpError::HttpStatus(status) => {
                let message = format!("{url} answered HTTP {}", status.status);
                self.outage.server_error(&message);
                message
            }
            StreamableHttpError::Client(e) if e.is_connect() || e.is_timeout() => {
                let detail = crate::common::text::error_chain(e);
                let tls = if self.url.starts_with("https:") && !detail.contains("refused") {
                    " (a TLS failure: check that the server speaks HTTPS on this port and that \
                     its certificate is trusted here)"
                } else {
                    ""
                };
                let message = format!("cannot reach {url}: {detail}{tls}");
                self.outage.report(message.clone());
                message
            }
            StreamableHttpError::Client(e) => format!(
                "request to {url} failed: {}",
                crate::common::text::error_chain(e)
            ),
            StreamableHttpError::UnexpectedServerResponse(text) if text.starts_with("HTTP 5") => {
                let message = format!("{url} answered {}", first_line(text));
                self.outage.server_error(&message);
                message
            }
            StreamableHttpError::Sse(e) => format!("the event stream from {url} broke: {e}"),
            _ => return error,
        };
        self.failure(message)
    }

    /// POST a request whose answer loom passes on, keeping the answer's bytes.
    async fn post_captured(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let JsonRpcMessage::Request(request) = &message else {
            return Err(StreamableHttpError::UnexpectedServerResponse(
                "only requests are captured".into(),
            ));
        };
        self.raw.want(request.id.clone());
        let body = serde_json::to_vec(&message)?;
        let mut builder = self
            .http
            .post(uri.as_ref())
            .header(
                ACCEPT,
                format!("{EVENT_STREAM_MIME_TYPE}, {JSON_MIME_TYPE}"),
            )
            .header(CONTENT_TYPE, JSON_MIME_TYPE);
        for (name, value) in custom_headers {
            builder = builder.header(name, value);
        }
        if let Some(token) = auth_header {
            builder = builder.bearer_auth(token);
        }
        let had_session = session_id.is_some();
        if let Some(session) = session_id {
            builder = builder.header(HEADER_SESSION_ID, session.as_ref());
        }
        let response = builder
            .body(body)
            .send()
            .await
            .map_err(StreamableHttpError::Client)?;
        let status = response.status();
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let new_session = response
            .headers()
            .get(HEADER_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let is = |mime: &str| {
            content_type
                .as_deref()
                .is_some_and(|ct| ct.trim_start().to_ascii_lowercase().starts_with(mime))
        };
        if status == StatusCode::NOT_FOUND && had_session {
            return Err(StreamableHttpError::SessionExpired);
        }
        // A Bearer challenge is the start of an OAuth login (as rmcp's own path reports it).
        let challenge = response
            .headers()
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .filter(|v| is_bearer_challenge(v));
        if status == StatusCode::UNAUTHORIZED
            && let Some(challenge) = challenge
        {
            return Err(StreamableHttpError::AuthRequired(AuthRequiredError::new(
                challenge.to_owned(),
            )));
        }
        if status == StatusCode::FORBIDDEN
            && let Some(challenge) = challenge
            && challenge.contains("insufficient_scope")
        {
            return Err(StreamableHttpError::InsufficientScope(
                InsufficientScopeError::new(challenge.to_owned(), challenge_scope(challenge)),
            ));
        }
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("HTTP {status}"),
            )));
        }
        if status.is_redirection() {
            let to = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(mask_url)
                .unwrap_or_else(|| "no Location".to_owned());
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("HTTP {status} to {to}"),
            )));
        }
        if !status.is_success() && !is(JSON_MIME_TYPE) {
            let retry_after = response
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            return Err(StreamableHttpError::HttpStatus(HttpStatusError::new(
                status.as_u16(),
                retry_after,
            )));
        }
        if status == StatusCode::ACCEPTED || status == StatusCode::NO_CONTENT {
            // The answer will come on the GET stream, where it is captured the same way (a
            // request that never gets one is forgotten by its timeout).
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if is(EVENT_STREAM_MIME_TYPE) {
            let raw = self.raw.clone();
            let progress = self.progress.clone();
            let params = self.params.clone();
            let events = SseStream::from_bytes_stream(EventSizeLimit::new(
                response.bytes_stream(),
                limits.max_sse_event_size,
            ))
            .map(move |event| event.map(|event| capture_event(event, &raw, &progress, &params)));
            return Ok(StreamableHttpPostResponse::Sse(events.boxed(), new_session));
        }
        if is(JSON_MIME_TYPE) {
            let body = read_limited(response, limits.max_json_response_size).await?;
            let text = String::from_utf8(body).map_err(|_| {
                StreamableHttpError::UnexpectedServerResponse(
                    "the JSON response is not UTF-8".into(),
                )
            })?;
            let message = match capture_incoming(
                &text,
                &self.raw,
                Some(&self.progress),
                Some(&self.params),
            ) {
                Some(id) => placeholder_response(id),
                None => serde_json::from_str::<ServerJsonRpcMessage>(&text)?,
            };
            if !status.is_success() && !matches!(message, JsonRpcMessage::Error(_)) {
                return Err(StreamableHttpError::HttpStatus(HttpStatusError::new(
                    status.as_u16(),
                    None,
                )));
            }
            return Ok(StreamableHttpPostResponse::Json(message, new_session));
        }
        Err(StreamableHttpError::UnexpectedContentType(content_type))
    }
}

/// Whether the server asked for an OAuth login: a 401 whose `WWW-Authenticate: Bearer`
/// challenge names its `resource_metadata` (RFC 9728), as MCP servers that take logins say.
/// Another 401 is a server that wants other credentials (a configured header), which SPEC §4.5
/// says in its own words.
fn is_unauthorized(outcome: &Result<StreamableHttpPostResponse, HttpError>) -> bool {
    matches!(
        outcome,
        Err(StreamableHttpError::AuthRequired(required))
            if is_bearer_challenge(&required.www_authenticate_header)
                && required
                    .www_authenticate_header
                    .to_ascii_lowercase()
                    .contains("resource_metadata=")
    )
}

/// The scopes a 403 `insufficient_scope` challenge asks for: its `scope="…"` (RFC 6750 §3),
/// else what its `error_description` names after "scope:" (the official Python SDK writes
/// `error_description="Required scope: X"` and no `scope`).
fn challenge_scope(challenge: &str) -> Option<String> {
    let quoted = |name: &str| {
        let start = challenge.find(&format!("{name}=\""))? + name.len() + 2;
        let rest = &challenge[start..];
        Some(rest[..rest.find('"')?].to_owned())
    };
    quoted(" scope")
        .or_else(|| quoted(",scope"))
        .or_else(|| {
            challenge
                .strip_prefix("Bearer scope=\"")
                .and(quoted("scope"))
        })
        .or_else(|| {
            let description = quoted("error_description")?;
            let at = description.to_ascii_lowercase().find("scope:")? + "scope:".len();
            Some(description[at..].trim().to_owned())
        })
        .filter(|scopes| !scopes.trim().is_empty())
}

/// A 401 with any `WWW-Authenticate: Bearer` challenge.
fn is_bearer_refusal(outcome: &Result<StreamableHttpPostResponse, HttpError>) -> bool {
    matches!(
        outcome,
        Err(StreamableHttpError::AuthRequired(required))
            if is_bearer_challenge(&required.www_authenticate_header)
    )
}

fn is_bearer_challenge(value: &str) -> bool {
    value
        .trim_start()
        .get(..6)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("bearer"))
}

/// Header names that usually carry a credential.
fn is_credential_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    ["key", "token", "auth", "secret", "cookie"]
        .iter()
        .any(|w| lower.contains(w))
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

/// What rmcp gets in place of a captured result (see `crate::wire`).
fn placeholder_response(id: rmcp::model::RequestId) -> ServerJsonRpcMessage {
    JsonRpcMessage::Response(JsonRpcResponse {
        jsonrpc: JsonRpcVersion2_0,
        id,
        result: ServerResult::CustomResult(crate::wire::placeholder_result()),
    })
}

/// An SSE event with a captured result replaced by the placeholder, which rmcp reads as a
/// custom result.
fn capture_event(
    mut event: Sse,
    raw: &RawResults,
    progress: &ProgressLedger,
    params: &RawParams,
) -> Sse {
    if let Some(data) = &event.data
        && let Some(id) = capture_incoming(data, raw, Some(progress), Some(params))
        && let Ok(id) = serde_json::to_string(&id)
    {
        event.data = Some(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":null}}"#));
    }
    event
}

/// A JSON body read whole, refused past `limit` bytes.
async fn read_limited(response: reqwest::Response, limit: usize) -> Result<Vec<u8>, HttpError> {
    if response
        .content_length()
        .is_some_and(|n| usize::try_from(n).map_or(true, |n| n > limit))
    {
        return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: limit });
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(StreamableHttpError::Client)?;
        if body.len() + chunk.len() > limit {
            return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Ends an SSE byte stream with an error when one event grows past `limit` bytes, so a server
/// that never ends an event cannot grow loom's memory without bound.
struct EventSizeLimit<S> {
    inner: S,
    limit: usize,
    /// Bytes since the last blank line (the end of an event).
    run: usize,
    /// The previous byte ended a line (ignoring `\r`).
    after_newline: bool,
    failed: bool,
}

impl<S> EventSizeLimit<S> {
    fn new(inner: S, limit: usize) -> Self {
        Self {
            inner,
            limit,
            run: 0,
            after_newline: false,
            failed: false,
        }
    }

    fn take_chunk(&mut self, chunk: &[u8]) -> bool {
        for &b in chunk {
            match b {
                b'\n' if self.after_newline => {
                    self.run = 0;
                    self.after_newline = false;
                }
                b'\n' => self.after_newline = true,
                b'\r' => {}
                _ => {
                    self.after_newline = false;
                    self.run += 1;
                }
            }
            if self.run > self.limit {
                return false;
            }
        }
        true
    }
}

#[derive(Debug, thiserror::Error)]
enum EventStreamError {
    #[error("one server-sent event is larger than {0} bytes")]
    TooLarge(usize),
    #[error(transparent)]
    Http(#[from] reqwest::Error),
}

impl<S> Stream for EventSizeLimit<S>
where
    S: Stream<Item = Result<Bytes, reqwest::Error>> + Unpin,
{
    type Item = Result<Bytes, EventStreamError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.failed {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                if this.take_chunk(&chunk) {
                    Poll::Ready(Some(Ok(chunk)))
                } else {
                    this.failed = true;
                    Poll::Ready(Some(Err(EventStreamError::TooLarge(this.limit))))
                }
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl StreamableHttpClient for CapturingClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let token = self.token().await?;
        let auth = auth_header.or_else(|| token.clone());
        // Kept for one more try with a refreshed token, when a token went with it.
        let again = token
            .is_some()
            .then(|| (message.clone(), session_id.clone(), custom_headers.clone()));
        let mut outcome = self
            .send(
                uri.clone(),
                message,
                session_id,
                auth,
                custom_headers,
                limits,
            )
            .await;
        if let Some(login) = &self.login
            && let Err(StreamableHttpError::InsufficientScope(refused)) = &outcome
            // rmcp reports any 403 with a challenge this way; a step-up is only this error.
            && refused
                .www_authenticate_header
                .contains("insufficient_scope")
        {
            let scopes: Vec<String> = refused
                .required_scope
                .clone()
                .or_else(|| challenge_scope(&refused.www_authenticate_header))
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_owned)
                .collect();
            login.step_up(&scopes);
            return Err(self.token_error(TokenError::NeedsLogin));
        }
        // With a token sent, any Bearer 401 is worth one refresh (a revoked or rotated token);
        // without one, only a challenge that says where to log in means a login is needed.
        let refused = if token.is_some() {
            is_bearer_refusal(&outcome)
        } else {
            is_unauthorized(&outcome)
        };
        if let Some(login) = &self.login
            && refused
        {
            let Some((message, session_id, custom_headers)) = again else {
                return Err(self.token_error(TokenError::NeedsLogin));
            };
            match login.refresh_after_refusal(token.as_deref()).await {
                Ok(fresh) => {
                    outcome = self
                        .send(
                            uri,
                            message,
                            session_id,
                            Some(fresh),
                            custom_headers,
                            limits,
                        )
                        .await;
                    if is_bearer_refusal(&outcome) {
                        login.mark_needed();
                        return Err(self.token_error(TokenError::NeedsLogin));
                    }
                }
                Err(error) => return Err(self.token_error(error)),
            }
        }
        match outcome {
            Ok(response) => {
                self.outage.answered();
                Ok(response)
            }
            Err(e) => Err(self.explain(e)),
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        let auth = match auth_header {
            Some(header) => Some(header),
            None => self.token().await.ok().flatten(),
        };
        self.http
            .delete_session(uri, session_id, auth, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<futures::stream::BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            MAX_MESSAGE_BYTES,
        )
        .await
    }

    /// The standing GET stream (and a resumed one) may carry answers too: captured the same way.
    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<futures::stream::BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        let auth_header = match auth_header {
            Some(header) => Some(header),
            None => self.token().await?,
        };
        let stream = self
            .http
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
            .map_err(|e| self.explain(e))?;
        let raw = self.raw.clone();
        let progress = self.progress.clone();
        let params = self.params.clone();
        Ok(stream
            .map(move |event| event.map(|event| capture_event(event, &raw, &progress, &params)))
            .boxed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_null_result_reads_as_the_placeholder() {
        let message: ServerJsonRpcMessage =
            serde_json::from_str(r#"{"jsonrpc":"2.0","id":7,"result":null}"#).unwrap();
        let JsonRpcMessage::Response(response) = message else {
            panic!("not a response")
        };
        assert!(matches!(response.result, ServerResult::CustomResult(_)));
    }

    #[test]
    fn event_size_is_counted_between_blank_lines() {
        let mut limit =
            EventSizeLimit::new(futures::stream::empty::<Result<Bytes, reqwest::Error>>(), 8);
        assert!(limit.take_chunk(b"data: 12\n\n"));
        assert!(limit.take_chunk(b"data: 12\r\n\r\n"));
        assert!(limit.take_chunk(b"data: 1"));
        assert!(!limit.take_chunk(b"23456789"));
    }

    #[test]
    fn the_scopes_a_step_up_asks_for_are_read_from_the_challenge() {
        assert_eq!(
            challenge_scope(
                r#"Bearer error="insufficient_scope", scope="a b", resource_metadata="x""#
            ),
            Some("a b".into())
        );
        assert_eq!(challenge_scope(r#"Bearer scope="a""#), Some("a".into()));
        assert_eq!(
            challenge_scope(
                r#"Bearer error="insufficient_scope", error_description="Required scope: mcp:write""#
            ),
            Some("mcp:write".into())
        );
        assert_eq!(
            challenge_scope(r#"Bearer error="insufficient_scope""#),
            None
        );
    }

    #[test]
    fn credential_headers_are_recognised() {
        assert!(is_credential_header("X-Api-Key"));
        assert!(is_credential_header("Authorization"));
        assert!(!is_credential_header("Accept-Language"));
    }
}
