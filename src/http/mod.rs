//! `loom serve --http ADDR`: the same catalog over Streamable HTTP at `/mcp` (SPEC §22).
//!
//! hyper carries HTTP; each HTTP session is a [`Gateway`] session served by rmcp over loom's own
//! line transport through an in-memory pipe ([`session`]). That is why loom does not use rmcp's
//! Streamable HTTP server: it serialises results from rmcp's typed model (which re-encodes them)
//! and needs a typed `ServerHandler`, while loom's results that pass through are spliced in as
//! the bytes the server sent (SPEC §5.7) — over HTTP as over stdio.
//!
//! What this layer adds: sessions (`Mcp-Session-Id`), routing of each message loom writes to the
//! POST it answers, the standing GET stream or a backlog, `application/json` answers where the
//! client accepts them (no SSE event size limit for large results), `Origin` and `Host` checks
//! against DNS rebinding, the bearer token, idle sessions closed, graceful shutdown.

// The `Err` of these helpers is the HTTP answer itself, built once per refused request.
#![allow(clippy::result_large_err)]

mod auth;
mod handoff;
mod metrics;
mod session;
mod stateless;

pub(crate) use metrics::{METRICS_PATH, refusal as metrics_refusal, serve as serve_metrics};

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, ALLOW, AUTHORIZATION, CONTENT_TYPE, HOST, ORIGIN, WWW_AUTHENTICATE};
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::HttpConfig;
use crate::gateway::Hub;
use crate::wire::MAX_MESSAGE_BYTES;

pub(crate) use session::Session;

/// The largest body of a POST without `Mcp-Session-Id` (SPEC §22).
const SESSIONLESS_BODY_BYTES: usize = 1024 * 1024;

/// The one path loom serves MCP at.
pub(crate) const MCP_PATH: &str = "/mcp";

/// Where a balancer checks that this loom serves (SPEC §22).
pub(crate) const HEALTH_PATH: &str = "/healthz";
const SESSION_HEADER: &str = "mcp-session-id";
const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";
/// How long a connection may take to send a request's headers (also an idle keep-alive
/// connection's wait for its next request). hyper has such a timeout but only runs it with a
/// timer; without one, a client that sends half a request and goes quiet holds its socket and
/// task for ever.
pub(crate) const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections one peer address may hold open at once. Past it, a new connection takes the
/// place of that address's oldest one that has not sent a request yet (or, when every one has,
/// is closed at once). Loopback needs no token, and 1,100 idle connections from one client used
/// up the process's file descriptors: a legitimate request then waited 9.5 s for their header
/// timeouts. Sharing loopback, the legitimate client still gets in.
pub(crate) const MAX_CONNECTIONS_PER_ADDRESS: usize = 512;

pub(crate) type Body = UnsyncBoxBody<Bytes, Infallible>;

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

/// `body` as `content_type` with `status`, never to be cached (a login page, a health answer).
fn uncached(status: StatusCode, content_type: &'static str, body: String) -> Response<Body> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, http::HeaderValue::from_static(content_type));
    headers.insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    response
}

/// An answer of loom's own: plain text when it succeeds; a refusal as a JSON-RPC error body
/// (`application/json`), because that is what clients show their user (the SDKs print the
/// `message` of a JSON error body and only the status of a text one).
fn plain(status: StatusCode, text: impl Into<String>) -> Response<Body> {
    let text = text.into();
    if status.is_client_error() || status.is_server_error() {
        let code = if status.is_server_error() {
            -32603
        } else {
            -32600
        };
        return rpc_error(status, None, code, &text);
    }
    let mut response = Response::new(full(text));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// The client requests are forwarded to other instances with: no redirects (the credential
/// goes to the instance named and nowhere else), a short connect timeout (an instance that
/// is gone is found out quickly), no timeout on the answer (a call may run long).
fn forwarder() -> Option<reqwest::Client> {
    crate::common::tls::install_crypto_provider();
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(3))
        .redirect(reqwest::redirect::Policy::none())
        // Straight to the instance: a proxy of the environment would see clients' credentials.
        .no_proxy()
        .build()
        .map_err(|error| {
            tracing::error!("requests cannot be forwarded to other instances: {error}");
        })
        .ok()
}

/// A JSON-RPC error answer (for messages that cannot reach a session).
fn rpc_error(status: StatusCode, id: Option<&str>, code: i64, message: &str) -> Response<Body> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id.and_then(|raw| serde_json::from_str::<serde_json::Value>(raw).ok()),
        "error": {"code": code, "message": message},
    });
    let mut response = Response::new(full(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// The HTTP face: its settings and the sessions it holds.
pub(crate) struct Server {
    hub: Arc<Hub>,
    settings: HttpConfig,
    /// `http.auth`: OAuth access tokens of one issuer are accepted (SPEC §22.1).
    resource_server: Option<auth::ResourceServer>,
    /// Bound to a loopback address: `Host` must name a loopback host too.
    loopback: bool,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// The scopes of 2026-07-28 clients, by credential digest (src/http/stateless.rs).
    scopes: Mutex<HashMap<String, Arc<Session>>>,
    /// Numbers loom's ids for stateless requests.
    stateless_requests: std::sync::atomic::AtomicU64,
    /// Sessions being opened (their `initialize` is under way): they count against
    /// `maxSessions` from the moment they are admitted, so initializes that arrive together
    /// cannot together pass the limit.
    opening: std::sync::atomic::AtomicUsize,
    /// Open connections per peer address, oldest first (bounded, [`MAX_CONNECTIONS_PER_ADDRESS`]).
    connections: Connections,
    /// Numbers connections.
    connections_opened: std::sync::atomic::AtomicU64,
    /// Connections closed at once for that bound.
    refused_connections: std::sync::atomic::AtomicU64,
    shutdown: CancellationToken,
    /// Sends a request on to the instance of a cluster that holds what it concerns (§25).
    forwarder: Option<reqwest::Client>,
}

/// The open connections of each peer address, oldest first.
type Connections =
    Arc<Mutex<HashMap<std::net::IpAddr, std::collections::VecDeque<OpenConnection>>>>;

struct OpenConnection {
    number: u64,
    /// Set by its first request.
    served: Arc<std::sync::atomic::AtomicBool>,
    /// Cancelled to close it for a newer connection of its address.
    evict: CancellationToken,
}

/// One open connection of a peer address; gives its place back when dropped.
struct ConnectionSlot {
    connections: Connections,
    address: std::net::IpAddr,
    number: u64,
    served: Arc<std::sync::atomic::AtomicBool>,
    evicted: CancellationToken,
}

impl ConnectionSlot {
    /// A place for connection `number` of `address`: free, or the place of the address's oldest
    /// connection that never sent a request (closed for it); `None` when every place is taken
    /// by a connection that did.
    fn take(connections: &Connections, address: std::net::IpAddr, number: u64) -> Option<Self> {
        use std::sync::atomic::Ordering;
        let mut held = connections.lock().unwrap_or_else(PoisonError::into_inner);
        let open = held.entry(address).or_default();
        if open.len() >= MAX_CONNECTIONS_PER_ADDRESS {
            let idle = open
                .iter()
                .position(|c| !c.served.load(Ordering::Acquire))?;
            if let Some(oldest) = open.remove(idle) {
                oldest.evict.cancel();
            }
        }
        let served = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let evicted = CancellationToken::new();
        open.push_back(OpenConnection {
            number,
            served: served.clone(),
            evict: evicted.clone(),
        });
        Some(ConnectionSlot {
            connections: connections.clone(),
            address,
            number,
            served,
            evicted,
        })
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut held = self
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(open) = held.get_mut(&self.address) {
            open.retain(|c| c.number != self.number);
            if open.is_empty() {
                held.remove(&self.address);
            }
        }
    }
}

/// One admitted session still being opened; gives its place back when dropped.
struct OpeningSlot<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for OpeningSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Server {
    pub(crate) fn new(hub: Arc<Hub>, local: SocketAddr) -> Arc<Server> {
        let settings = hub.config().http.clone();
        let own_url = format!("http://{local}{MCP_PATH}");
        let resource_server = settings.auth.clone().and_then(|auth| {
            auth::ResourceServer::new(auth, &own_url)
                .map_err(|error| tracing::error!("http.auth is off: {error}"))
                .ok()
        });
        if let Some(resource_server) = &resource_server {
            hub.set_callback_url(resource_server.callback_url(&own_url));
        }
        Arc::new(Server {
            hub,
            settings,
            resource_server,
            loopback: local.ip().is_loopback(),
            sessions: Mutex::new(HashMap::new()),
            scopes: Mutex::new(HashMap::new()),
            stateless_requests: std::sync::atomic::AtomicU64::new(0),
            opening: std::sync::atomic::AtomicUsize::new(0),
            connections: Arc::default(),
            connections_opened: std::sync::atomic::AtomicU64::new(0),
            refused_connections: std::sync::atomic::AtomicU64::new(0),
            shutdown: CancellationToken::new(),
            forwarder: forwarder(),
        })
    }

    /// A subject's browser back from a remote server's authorization page: handed to the login
    /// that sent its `state`; the person reads the outcome in their client.
    async fn login_redirected(&self, query: &str, headers: &http::HeaderMap) -> Response<Body> {
        use crate::downstream::oauth::login::{PAGE_DONE, PAGE_LOST, PAGE_REFUSED};
        use crate::downstream::oauth::redirects::{Undelivered, query_value};
        let (status, page) = match self.hub.login_redirected(query) {
            Ok(()) if query_value(query, "error").is_some() => (StatusCode::OK, PAGE_REFUSED),
            Ok(()) => (StatusCode::OK, PAGE_DONE),
            Err(Undelivered::Unknown) => {
                // In a cluster the login may wait on another instance (SPEC §25).
                if let (Some(cluster), Some(forwarder)) = (self.hub.cluster(), &self.forwarder)
                    && let Some(answer) =
                        handoff::forward_redirect(cluster, forwarder, query, headers).await
                {
                    return answer;
                }
                (StatusCode::BAD_REQUEST, PAGE_LOST)
            }
            Err(_) => (StatusCode::BAD_REQUEST, PAGE_LOST),
        };
        uncached(status, "text/html; charset=utf-8", page.to_owned())
    }

    fn lock_sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_scopes(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.scopes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Accept connections until [`Server::stop`], then close every session.
    pub(crate) async fn run(self: Arc<Self>, listener: TcpListener) {
        let reaper = tokio::spawn(self.clone().reap_idle());
        loop {
            let accepted = tokio::select! {
                _ = self.shutdown.cancelled() => break,
                accepted = listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(connection) => connection,
                Err(error) => {
                    // Out of file descriptors and the like: wait a moment instead of spinning.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let number = self
                .connections_opened
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(slot) = ConnectionSlot::take(&self.connections, peer.ip(), number) else {
                // Closed at once (dropped): its descriptor goes back before the next accept.
                let refused = self
                    .refused_connections
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                    + 1;
                if refused == 10u64.pow(refused.ilog10()) {
                    tracing::warn!(
                        "{} holds {MAX_CONNECTIONS_PER_ADDRESS} connections that all sent \
                         requests: newer ones are closed ({refused} so far)",
                        peer.ip()
                    );
                }
                continue;
            };
            // Answers are written whole at once; waiting to coalesce them only adds latency.
            let _ = stream.set_nodelay(true);
            let server = self.clone();
            let shutdown = self.shutdown.clone();
            tokio::spawn(async move {
                let served = slot.served.clone();
                let evicted = slot.evicted.clone();
                let service = hyper::service::service_fn(move |request| {
                    served.store(true, std::sync::atomic::Ordering::Release);
                    let server = server.clone();
                    async move { Ok::<_, Infallible>(server.handle(request).await) }
                });
                let connection =
                    http1_server().serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                tokio::pin!(connection);
                tokio::select! {
                    _ = &mut connection => {}
                    // A newer connection of its address took its place (it never sent a
                    // request): dropped, its descriptor goes back.
                    _ = evicted.cancelled() => {}
                    _ = shutdown.cancelled() => {
                        connection.as_mut().graceful_shutdown();
                        let _ = tokio::time::timeout(Duration::from_secs(1), connection).await;
                    }
                }
                drop(slot);
            });
        }
        reaper.abort();
        let mut sessions: Vec<Arc<Session>> =
            self.lock_sessions().drain().map(|(_, s)| s).collect();
        sessions.extend(self.lock_scopes().drain().map(|(_, s)| s));
        futures::future::join_all(sessions.iter().map(|s| s.close())).await;
    }

    /// `GET /healthz` for balancers: 200 while loom serves, 503 once it is stopping, with each
    /// server's state. No token and no `Host`/`Origin` check (health checks carry neither); it
    /// says nothing but server names and the kinds of their states.
    fn health(&self, method: &Method) -> Response<Body> {
        if method != Method::GET && method != Method::HEAD {
            let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "the health check takes GET");
            response
                .headers_mut()
                .insert(ALLOW, http::HeaderValue::from_static("GET, HEAD"));
            return response;
        }
        let stopping = self.shutdown.is_cancelled();
        let servers: serde_json::Map<String, serde_json::Value> = self
            .hub
            .server_states()
            .into_iter()
            .map(|(name, state)| (name, state.into()))
            .collect();
        let body = serde_json::json!({
            "status": if stopping { "stopping" } else { "serving" },
            "servers": servers,
        });
        let status = match stopping {
            true => StatusCode::SERVICE_UNAVAILABLE,
            false => StatusCode::OK,
        };
        uncached(status, "application/json", body.to_string())
    }

    /// Stop accepting; [`Server::run`] then closes the sessions.
    pub(crate) fn stop(&self) {
        self.shutdown.cancel();
    }

    async fn reap_idle(self: Arc<Self>) {
        let idle = Duration::from_secs(self.settings.session_idle_secs);
        let every = (idle / 4).clamp(Duration::from_millis(250), Duration::from_secs(60));
        loop {
            tokio::time::sleep(every).await;
            let expire = |sessions: &mut HashMap<String, Arc<Session>>| -> Vec<Arc<Session>> {
                let ids: Vec<String> = sessions
                    .iter()
                    .filter(|(_, s)| s.idle_for() >= idle)
                    .map(|(id, _)| id.clone())
                    .collect();
                ids.iter().filter_map(|id| sessions.remove(id)).collect()
            };
            let mut expired = expire(&mut self.lock_sessions());
            expired.extend(expire(&mut self.lock_scopes()));
            for session in expired {
                tracing::info!(session = %session.id(), "closing an idle HTTP session");
                session.close().await;
            }
        }
    }

    async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Response<Body> {
        if request.uri().path() == HEALTH_PATH {
            return self.health(request.method());
        }
        if let Some(resource_server) = &self.resource_server
            && auth::METADATA_PATHS.contains(&request.uri().path())
        {
            if let Some(refusal) = self.refuse_origin(&request) {
                return refusal;
            }
            let mut response = Response::new(full(resource_server.metadata().to_string()));
            response.headers_mut().insert(
                CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
            return response;
        }
        if self.resource_server.is_some()
            && request.uri().path() == crate::downstream::oauth::redirects::CALLBACK_PATH
        {
            if let Some(refusal) = self.refuse_origin(&request) {
                return refusal;
            }
            // A browser comes back with a GET; nothing else is a redirect.
            if request.method() != Method::GET {
                let mut response = plain(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "the login redirect takes GET only",
                );
                response
                    .headers_mut()
                    .insert(ALLOW, http::HeaderValue::from_static("GET"));
                return response;
            }
            let query = request.uri().query().unwrap_or("");
            return self.login_redirected(query, request.headers()).await;
        }
        if request.uri().path() != MCP_PATH {
            return plain(
                StatusCode::NOT_FOUND,
                format!("loom serves MCP at {MCP_PATH}"),
            );
        }
        let scope = match self.refuse(&request).await {
            Ok(scope) => scope,
            Err(refusal) => return refusal,
        };
        let sessionless = request
            .headers()
            .get(PROTOCOL_VERSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(stateless::is_sessionless_version);
        match *request.method() {
            Method::POST => self.post(request, scope).await,
            Method::GET | Method::DELETE if sessionless => {
                let mut response = plain(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "protocol 2026-07-28 has no sessions and no GET stream: every request is a POST \
                     of its own (list changes and resource updates come through \
                     subscriptions/listen)",
                );
                response
                    .headers_mut()
                    .insert(ALLOW, http::HeaderValue::from_static("POST"));
                response
            }
            Method::GET => self.get(&request, &scope),
            Method::DELETE => self.delete(&request, &scope).await,
            _ => {
                let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "use POST, GET or DELETE");
                response
                    .headers_mut()
                    .insert(ALLOW, http::HeaderValue::from_static("GET, POST, DELETE"));
                response
            }
        }
    }

    /// `Host`, `Origin` and the bearer token, checked on every request. Gives the scope of the
    /// request's credential (a digest of its token; one scope for all without tokens).
    async fn refuse(&self, request: &Request<Incoming>) -> Result<String, Response<Body>> {
        if let Some(refusal) = self.refuse_origin(request) {
            return Err(refusal);
        }
        if !self.settings.wants_token() {
            return Ok("anonymous".into());
        }
        let given = bearer_token(request);
        match matched_credential(given, self.settings.credentials()) {
            Some(token) => Ok(crate::token::digest_hex(
                "loom/http-scope",
                token.as_bytes(),
            )),
            None if self.resource_server.is_some() => self.refuse_oauth(given).await,
            None => {
                let mut response = plain(
                    StatusCode::UNAUTHORIZED,
                    if given.is_some() {
                        "the bearer token was refused (it is not one of this loom's `http.token` / \
                         `http.tokens`)"
                    } else {
                        "the bearer token is missing: this loom wants `Authorization: Bearer \
                         <token>` (its `http.token` or one of `http.tokens`)"
                    },
                );
                response.headers_mut().insert(
                    WWW_AUTHENTICATE,
                    http::HeaderValue::from_static("Bearer realm=\"loom\""),
                );
                Err(response)
            }
        }
    }

    /// A token that is none of the static ones, checked as an OAuth access token: its subject's
    /// scope, or the 401/403 that says where to log in.
    async fn refuse_oauth(&self, given: Option<&str>) -> Result<String, Response<Body>> {
        let Some(resource_server) = &self.resource_server else {
            return Err(plain(StatusCode::UNAUTHORIZED, "no token is accepted"));
        };
        let metadata_url = resource_server.metadata_url();
        let refusal = match given {
            Some(token) => match resource_server.verify(token).await {
                Ok(subject) => {
                    let scope = crate::token::digest_hex("loom/http-subject", subject.as_bytes());
                    // The audit log names the person, not the digest (SPEC §24.3).
                    crate::telemetry::audit::name_subject(&scope, &subject);
                    return Ok(scope);
                }
                Err(refusal) => Some(refusal),
            },
            None => None,
        };
        let (status, message) = match &refusal {
            None => (
                StatusCode::UNAUTHORIZED,
                "the bearer token is missing: log in at the authorization server this loom's \
                 protected resource metadata names"
                    .to_owned(),
            ),
            Some(auth::Refusal::Invalid(why)) => (StatusCode::UNAUTHORIZED, why.clone()),
            Some(auth::Refusal::InsufficientScope(missing)) => (
                StatusCode::FORBIDDEN,
                format!("the token lacks the scope(s) {}", missing.join(" ")),
            ),
        };
        let mut response = plain(status, message);
        if let Ok(value) =
            http::HeaderValue::from_str(&resource_server.challenge(refusal.as_ref(), &metadata_url))
        {
            response.headers_mut().insert(WWW_AUTHENTICATE, value);
        }
        Err(response)
    }

    /// `Host` and `Origin` (against DNS rebinding and foreign pages).
    fn refuse_origin(&self, request: &Request<Incoming>) -> Option<Response<Body>> {
        let headers = request.headers();
        if self.loopback {
            let host = headers
                .get(HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or_default();
            if !is_loopback_authority(host) {
                return Some(plain(
                    StatusCode::FORBIDDEN,
                    format!(
                        "loom listens on loopback and answers requests for a loopback host only; \
                         this one was for {host:?}"
                    ),
                ));
            }
        }
        if let Some(origin) = headers.get(ORIGIN) {
            let origin = origin.to_str().unwrap_or_default();
            if !self.origin_allowed(origin) {
                return Some(plain(
                    StatusCode::FORBIDDEN,
                    format!(
                        "origin {origin:?} is not allowed (loopback origins are; add others to \
                         `http.allowedOrigins`)"
                    ),
                ));
            }
        }
        None
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        let Ok(url) = reqwest::Url::parse(origin) else {
            return false;
        };
        let loopback = url.host_str().is_some_and(is_loopback_authority);
        loopback
            || self.settings.allowed_origins.iter().any(|allowed| {
                reqwest::Url::parse(allowed).is_ok_and(|a| a.origin() == url.origin())
            })
    }

    /// The session a request names, if the request's credential opened it (a session of
    /// another credential is as unknown as one that ended).
    fn session_of(
        &self,
        request: &Request<Incoming>,
        credential: &str,
    ) -> Result<Arc<Session>, Response<Body>> {
        let Some(id) = request
            .headers()
            .get(SESSION_HEADER)
            .and_then(|h| h.to_str().ok())
        else {
            return Err(plain(
                StatusCode::BAD_REQUEST,
                "the Mcp-Session-Id header is missing: send `initialize` first and then the \
                 session id it answered with",
            ));
        };
        match self.lock_sessions().get(id) {
            Some(session) if session.credential() == credential => Ok(session.clone()),
            // Another credential's session is as unknown as one that ended.
            _ => Err(plain(
                StatusCode::NOT_FOUND,
                "no such session (it ended, or was closed after being idle): initialize again",
            )),
        }
    }

    async fn post(self: Arc<Self>, request: Request<Incoming>, scope: String) -> Response<Body> {
        let accept = header_text(&request, ACCEPT);
        let wants_json = accepts(&accept, "application/json");
        let wants_sse = accepts(&accept, "text/event-stream");
        if !wants_json && !wants_sse {
            return plain(
                StatusCode::NOT_ACCEPTABLE,
                "Accept must include application/json or text/event-stream",
            );
        }
        if !header_text(&request, CONTENT_TYPE)
            .to_ascii_lowercase()
            .starts_with("application/json")
        {
            return plain(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Content-Type must be application/json",
            );
        }
        let version = request
            .headers()
            .get(PROTOCOL_VERSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        // A request of a revision without sessions (2026-07-28) is served in its credential's
        // scope, whatever session header it may carry.
        let sessionless = version
            .as_deref()
            .is_some_and(stateless::is_sessionless_version);
        let session = match request.headers().get(SESSION_HEADER) {
            Some(_) if !sessionless => match self.session_of(&request, &scope) {
                Ok(session) => Some(session),
                Err(response) => return response,
            },
            _ => None,
        };
        // Without a session and without a 2026-07-28 header the only requests served are
        // `initialize` and `server/discover` (a few KiB): anyone who can reach the port must not
        // make loom buffer a full-size message to be refused.
        let limit = match (&session, sessionless) {
            (None, false) => SESSIONLESS_BODY_BYTES,
            _ => MAX_MESSAGE_BYTES,
        };
        let headers = request.headers().clone();
        // A client that sends its headers and then stalls (or trickles) its body would hold
        // the connection and its task for ever: the whole body has `http.bodyTimeoutSecs`.
        let within = Duration::from_secs(self.settings.body_timeout_secs);
        let collected = tokio::time::timeout(
            within,
            http_body_util::Limited::new(request.into_body(), limit).collect(),
        )
        .await;
        let Ok(collected) = collected else {
            let mut response = plain(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive whole within {} s (http.bodyTimeoutSecs); \
                     send the whole message at once",
                    within.as_secs()
                ),
            );
            response.headers_mut().insert(
                http::header::CONNECTION,
                http::HeaderValue::from_static("close"),
            );
            return response;
        };
        let body = match collected {
            Ok(body) => body.to_bytes(),
            Err(error) if limit == SESSIONLESS_BODY_BYTES => {
                return plain(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "a request without an Mcp-Session-Id can only be `initialize`, at most \
                         {} KiB ({error}); send `initialize` first and then the session id it \
                         answered with (or speak 2026-07-28, with its MCP-Protocol-Version header)",
                        SESSIONLESS_BODY_BYTES / 1024
                    ),
                );
            }
            Err(error) => {
                return plain(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the request body could not be read whole: {error}"),
                );
            }
        };
        let message = match session::Message::read(&body) {
            Ok(message) => message,
            Err(why) => {
                let code = if why.contains("batches") {
                    -32600
                } else {
                    -32700
                };
                return rpc_error(StatusCode::BAD_REQUEST, None, code, &why);
            }
        };
        let session = match (session, message.method.as_deref()) {
            (Some(_), Some("initialize")) => {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    message.id.as_deref(),
                    -32600,
                    "this session is initialized already; to start another, send `initialize` \
                     without an Mcp-Session-Id",
                );
            }
            (Some(session), _) => session,
            (None, Some("initialize")) if !sessionless => match self.open_session(&scope).await {
                Ok(session) => session,
                Err(response) => return response,
            },
            // 2026-07-28: discovery, and every request of that revision, without a session.
            (None, Some("server/discover")) => {
                return self
                    .stateless(
                        scope,
                        &headers,
                        version.as_deref(),
                        message,
                        body,
                        wants_json,
                        wants_sse,
                    )
                    .await;
            }
            (None, _) if sessionless => {
                return self
                    .stateless(
                        scope,
                        &headers,
                        version.as_deref(),
                        message,
                        body,
                        wants_json,
                        wants_sse,
                    )
                    .await;
            }
            (None, _) => {
                return plain(
                    StatusCode::BAD_REQUEST,
                    "the Mcp-Session-Id header is missing: send `initialize` first and then the \
                     session id it answered with (or speak 2026-07-28, with its \
                     MCP-Protocol-Version header)",
                );
            }
        };
        session
            .post(message, body, wants_json, wants_sse, None)
            .await
    }

    /// A request of protocol 2026-07-28: checked against its headers, then answered by the
    /// session of its credential's scope under an id of loom's own (SPEC §22).
    #[allow(clippy::too_many_arguments)]
    async fn stateless(
        &self,
        scope: String,
        headers: &http::HeaderMap,
        version: Option<&str>,
        message: session::Message,
        body: bytes::Bytes,
        wants_json: bool,
        wants_sse: bool,
    ) -> Response<Body> {
        let text = String::from_utf8_lossy(&body);
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let standard = stateless::Headers {
            version,
            method: header("mcp-method"),
            name: header("mcp-name"),
        };
        if let Err(why) = stateless::check_headers(&text, &standard) {
            return rpc_error(StatusCode::BAD_REQUEST, message.id.as_deref(), -32020, &why);
        }
        if message.method.is_none() {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                message.id.as_deref(),
                -32600,
                "a 2026-07-28 client sends loom no responses (loom sends it no requests)",
            );
        }
        if message.method.as_deref() == Some("initialize") {
            return rpc_error(
                StatusCode::NOT_FOUND,
                message.id.as_deref(),
                -32601,
                "`initialize` does not exist in protocol 2026-07-28 (drop the MCP-Protocol-Version \
                 header to open a session with it)",
            );
        }
        let Some(id_text) = stateless::member_text(&body, &["id"]) else {
            // A notification: 2026-07-28 defines none that loom acts on over HTTP (a client
            // cancels a request by closing its stream).
            return plain(StatusCode::ACCEPTED, "");
        };
        let session = match self.scope(&scope).await {
            Ok(session) => session,
            Err(response) => return response,
        };
        if message.method.as_deref() == Some("tools/call")
            && let Err(why) = session.check_param_headers(&text, headers)
        {
            return rpc_error(StatusCode::BAD_REQUEST, message.id.as_deref(), -32020, &why);
        }
        // In a cluster, a retry or task request of what another instance holds goes there.
        let mut note = None;
        let mut body = body;
        if let (Some(cluster), Some(member), Some(method), Some(forwarder)) = (
            self.hub.cluster(),
            session.gateway().cluster_member(),
            message.method.as_deref(),
            &self.forwarder,
        ) {
            let protocol = session.gateway().protocol_state();
            let holds_state = |state: &str| protocol.holds_request_state(state);
            let holds_task = |task: &str| protocol.holds_task(task);
            let local = handoff::Local {
                cluster,
                scope: member.scope(),
                holds_state: &holds_state,
                holds_task: &holds_task,
            };
            match handoff::place(
                local,
                forwarder,
                method,
                headers,
                &body,
                message.id.as_deref(),
            )
            .await
            {
                handoff::Placement::Here => {}
                handoff::Placement::Again {
                    body: new,
                    note: why,
                } => {
                    body = new;
                    note = Some(why);
                }
                handoff::Placement::Answered(response) => return response,
            }
        }
        let text = String::from_utf8_lossy(&body);
        let n = self
            .stateless_requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("\"loom-h{n}\"");
        let token = message
            .progress_token
            .as_ref()
            .map(|_| format!("\"loom-hp{n}\""));
        let client_token = match &token {
            Some(_) => stateless::member_text(&body, &["params", "_meta", "progressToken"]),
            None => None,
        };
        let rewritten = match stateless::rewrite_request(&text, &id, token.as_deref()) {
            Ok(rewritten) => rewritten,
            Err(why) => {
                return rpc_error(StatusCode::BAD_REQUEST, message.id.as_deref(), -32600, &why);
            }
        };
        let inner = session::Message {
            id: Some(id),
            method: message.method,
            progress_token: token,
            cancels: None,
        };
        let rewrite = stateless::Rewrite {
            id: id_text,
            token: client_token,
            note,
        };
        session
            .post(
                inner,
                bytes::Bytes::from(rewritten),
                wants_json,
                wants_sse,
                Some(rewrite),
            )
            .await
    }

    /// The session of a credential's scope, opened by its first request.
    async fn scope(&self, key: &str) -> Result<Arc<Session>, Response<Body>> {
        if let Some(session) = self.lock_scopes().get(key) {
            return Ok(session.clone());
        }
        let opened = Session::open_scope(self.hub.clone(), key)
            .await
            .map_err(|error| {
                plain(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("loom could not open a scope for this credential: {error}"),
                )
            })?;
        let (session, extra) = {
            let mut scopes = self.lock_scopes();
            match scopes.get(key) {
                // Two first requests at once: the first one in keeps its scope.
                Some(existing) => (existing.clone(), Some(opened)),
                None => {
                    scopes.insert(key.to_string(), opened.clone());
                    (opened, None)
                }
            }
        };
        if let Some(extra) = extra {
            extra.close().await;
        } else {
            tracing::info!("HTTP scope opened for a 2026-07-28 credential");
        }
        Ok(session)
    }

    async fn open_session(&self, credential: &str) -> Result<Arc<Session>, Response<Body>> {
        let admitted = {
            // Checked and counted under the sessions' lock, where opened sessions are added.
            let sessions = self.lock_sessions();
            let opening = self.opening.load(std::sync::atomic::Ordering::SeqCst);
            (sessions.len() + opening < self.settings.max_sessions).then(|| {
                self.opening
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                OpeningSlot(&self.opening)
            })
        };
        let Some(_slot) = admitted else {
            return Err(plain(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "loom holds {} sessions already (`http.maxSessions`); close one or retry later",
                    self.settings.max_sessions
                ),
            ));
        };
        match Session::open(self.hub.clone(), credential).await {
            Ok(session) => {
                self.lock_sessions()
                    .insert(session.id().to_string(), session.clone());
                tracing::info!(session = %session.id(), "HTTP session opened");
                Ok(session)
            }
            Err(error) => Err(plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("loom could not open a session: {error}"),
            )),
        }
    }

    fn get(&self, request: &Request<Incoming>, credential: &str) -> Response<Body> {
        if !accepts(&header_text(request, ACCEPT), "text/event-stream") {
            return plain(
                StatusCode::NOT_ACCEPTABLE,
                "the GET stream is text/event-stream; Accept must include it",
            );
        }
        match self.session_of(request, credential) {
            Ok(session) => session.standing_stream(),
            Err(response) => response,
        }
    }

    async fn delete(&self, request: &Request<Incoming>, credential: &str) -> Response<Body> {
        let session = match self.session_of(request, credential) {
            Ok(session) => session,
            Err(response) => return response,
        };
        self.lock_sessions().remove(session.id());
        session.close().await;
        tracing::info!(session = %session.id(), "HTTP session ended by the client");
        plain(StatusCode::OK, "session closed")
    }
}

fn header_text(request: &Request<Incoming>, name: http::header::HeaderName) -> String {
    request
        .headers()
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether an `Accept` value takes `mime` (also through `*/*` or `type/*`).
fn accepts(accept: &str, mime: &str) -> bool {
    let kind = mime.split('/').next().unwrap_or_default();
    accept.split(',').any(|part| {
        let range = part.split(';').next().unwrap_or_default().trim();
        range.eq_ignore_ascii_case(mime)
            || range == "*/*"
            || range.eq_ignore_ascii_case(&format!("{kind}/*"))
    })
}

/// `localhost`, `127.0.0.1`, `[::1]`, with or without a port.
fn is_loopback_authority(host: &str) -> bool {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// hyper's HTTP/1.1 server side as loom runs it: with a timer, so that the header read timeout
/// ([`HEADER_READ_TIMEOUT`]) runs at all.
fn http1_server() -> hyper::server::conn::http1::Builder {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    builder
}

/// The token of an `Authorization: Bearer` header (the scheme ignores case, RFC 7235).
fn bearer_token<B>(request: &Request<B>) -> Option<&str> {
    request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
}

/// The credential `given` is, among `credentials`. Every one is compared, whichever matches,
/// so the time taken tells nothing.
fn matched_credential<'a>(
    given: Option<&str>,
    credentials: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    let mut matched = None;
    for credential in credentials {
        if given.is_some_and(|given| same_secret(given, credential)) {
            matched = Some(credential);
        }
    }
    matched
}

/// Compares a secret without stopping at the first difference.
fn same_secret(given: &str, expected: &str) -> bool {
    let (a, b) = (given.as_bytes(), expected.as_bytes());
    let mut difference = a.len() ^ b.len();
    for (i, byte) in b.iter().enumerate() {
        difference |= usize::from(a.get(i).copied().unwrap_or(0) ^ byte);
    }
    difference == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_ranges() {
        assert!(accepts(
            "application/json, text/event-stream",
            "application/json"
        ));
        assert!(accepts("text/event-stream;q=0.9", "text/event-stream"));
        assert!(accepts("*/*", "application/json"));
        assert!(accepts("application/*", "application/json"));
        assert!(!accepts("text/html", "application/json"));
    }

    #[test]
    fn loopback_hosts() {
        for host in [
            "localhost",
            "localhost:8808",
            "127.0.0.1:1",
            "[::1]:80",
            "LOCALHOST",
        ] {
            assert!(is_loopback_authority(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:8808",
            "10.0.0.1",
            "",
            "localhost.evil",
        ] {
            assert!(!is_loopback_authority(host), "{host}");
        }
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abd", "abc"));
        assert!(!same_secret("ab", "abc"));
        assert!(!same_secret("abcd", "abc"));
        assert!(!same_secret("", "abc"));
    }
}
