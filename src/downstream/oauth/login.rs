//! A person's login to a remote server (`loom auth login`, SPEC §4.7): find where the server
//! sends people to log in, open the page in their browser, receive the authorization code on a
//! loopback redirect (`http://127.0.0.1:PORT/callback`, RFC 8252), exchange it and keep the
//! tokens. Also what `loom auth status` reports of a login, and `loom auth logout`.

use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, WWW_AUTHENTICATE};
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadata, AuthorizationRequest,
    AuthorizationSession, StoredCredentials,
};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::describe;
use super::redirects::{Redirects, query_value};
use super::store::{Registration, TokenStore};
use crate::config::{OAuthSettings, mask_url};

/// How long `loom auth login` waits for the browser to come back.
pub(crate) const LOGIN_WAIT: Duration = Duration::from_secs(300);

/// How long probing a server (is it protected?) may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

/// What is needed to log in to one server.
pub(crate) struct LoginTarget<'a> {
    pub server: &'a str,
    pub url: &'a str,
    pub settings: &'a OAuthSettings,
    pub store: &'a TokenStore,
    /// The loom subject the login is for (HTTP face); none for a person at a terminal.
    pub subject: Option<&'a str>,
    /// Where the browser comes back when it is not this machine's loopback: loom's HTTP face
    /// (a subject's login).
    pub face: Option<FaceRedirect<'a>>,
}

/// A login's redirect to loom's HTTP face (`…/oauth/callback`), handed over by [`Redirects`].
#[derive(Clone, Copy)]
pub(crate) struct FaceRedirect<'a> {
    pub uri: &'a str,
    pub redirects: &'a Redirects,
}

/// A finished login, for the line `loom auth login` prints.
#[derive(Debug)]
pub(crate) struct LoggedIn {
    pub issuer: Option<String>,
    pub scopes: Vec<String>,
    pub expires_in: Option<Duration>,
}

/// What a probe of the server's MCP endpoint found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Probe {
    /// The server answered without a token.
    Open,
    /// 401 (or 403) with the server's `WWW-Authenticate` value, if any.
    Protected(Option<String>),
}

/// POSTs an `initialize` without a token: a protected server answers 401 and says where its
/// metadata is (`WWW-Authenticate: Bearer resource_metadata="…"`). A server that lets anyone
/// initialize may want a login for its tools: then `tools/list` is asked too, in the session
/// the `initialize` opened.
pub(crate) async fn probe(url: &str) -> Result<Probe, String> {
    crate::common::tls::install_crypto_provider();
    let http = reqwest::Client::builder()
        .timeout(PROBE_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("cannot set up the HTTP client: {e}"))?;
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "loom", "version": env!("CARGO_PKG_VERSION")}}
    });
    let response = http
        .post(url)
        .header(ACCEPT, "application/json, text/event-stream")
        .header(CONTENT_TYPE, "application/json")
        .json(&body)
        .send()
        .await
        .map_err(|e| {
            format!(
                "cannot reach {}: {}",
                mask_url(url),
                crate::common::text::error_chain(&e)
            )
        })?;
    if let Some(protected) = protected(&response) {
        return Ok(protected);
    }
    if !response.status().is_success() {
        return Ok(Probe::Open);
    }
    let session = response.headers().get("mcp-session-id").cloned();
    let version = response
        .text()
        .await
        .ok()
        .and_then(|body| negotiated_version(&body))
        .unwrap_or_else(|| "2025-11-25".to_owned());
    let post = |body: serde_json::Value| {
        let mut request = http
            .post(url)
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .header("mcp-protocol-version", version.as_str())
            .json(&body);
        if let Some(session) = &session {
            request = request.header("mcp-session-id", session.clone());
        }
        request.send()
    };
    let _ =
        post(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    let listed = post(serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).await;
    // The sessions the probe opened are not used again; the server forgets them on its own.
    Ok(listed
        .ok()
        .and_then(|response| protected(&response))
        .unwrap_or(Probe::Open))
}

/// A 401 or 403, with the server's `WWW-Authenticate` value if any.
fn protected(response: &reqwest::Response) -> Option<Probe> {
    matches!(response.status().as_u16(), 401 | 403).then(|| {
        Probe::Protected(
            response
                .headers()
                .get(WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
        )
    })
}

/// The `protocolVersion` an `initialize` answer (JSON, or one SSE event) agreed on.
fn negotiated_version(body: &str) -> Option<String> {
    let json = body
        .lines()
        .find_map(|line| line.strip_prefix("data:"))
        .unwrap_or(body)
        .trim();
    let answer: serde_json::Value = serde_json::from_str(json).ok()?;
    answer
        .pointer("/result/protocolVersion")?
        .as_str()
        .map(str::to_owned)
}

/// Whether something answers at `url` (a default endpoint of protocol 2025-03-26): anything
/// but 404 or 410, or no answer at all.
async fn answers_at(url: &str) -> bool {
    probe_get(url)
        .await
        .is_some_and(|response| !matches!(response.status().as_u16(), 404 | 410))
}

/// `GET url` without following redirects, within [`PROBE_TIMEOUT`]; `None` without an answer.
async fn probe_get(url: &str) -> Option<reqwest::Response> {
    let http = reqwest::Client::builder()
        .timeout(PROBE_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .ok()?;
    http.get(url).send().await.ok()
}

/// Logs in to `target` as a person would: the authorization URL on stderr and in `$BROWSER`
/// (else the platform's opener), the code on the loopback redirect, the tokens kept.
pub(crate) async fn login(target: &LoginTarget<'_>, wait: Duration) -> Result<LoggedIn, String> {
    let pending = begin(target).await?;
    eprintln!(
        "loom: to log in to `{}`, open this page in a browser:\n\n  {}\n",
        target.server, pending.url
    );
    open_browser(&pending.url);
    pending.finish(wait).await
}

/// A login started: its authorization URL, for a person to open; [`PendingLogin::finish`]
/// waits for the redirect and keeps the tokens.
pub(crate) struct PendingLogin {
    pub(crate) url: String,
    /// The `state` the authorization URL carries: a redirect without it is not this login's.
    state: String,
    session: AuthorizationSession,
    inbound: Inbound,
    registered: Identity,
    issuer: Option<String>,
    /// What a client registered now is remembered under (see [`registration_key`]).
    registration_key: Option<String>,
    server_url: String,
    subject: Option<String>,
    store: TokenStore,
}

/// Everything of a login up to the authorization URL: the server's metadata, who loom is to
/// its authorization server, the loopback listener for the redirect. A client loom registered
/// before that the authorization server no longer knows (it answers its authorization URL
/// `invalid_client`, e.g. after a restart that lost its registrations) is forgotten and a new
/// one registered, instead of sending the person to an error page.
pub(crate) async fn begin(target: &LoginTarget<'_>) -> Result<PendingLogin, String> {
    let pending = begin_once(target).await?;
    if !matches!(pending.registered, Identity::Remembered(_))
        || !client_unknown_at(&pending.url).await
    {
        return Ok(pending);
    }
    if let Some(key) = &pending.registration_key {
        tracing::info!(
            "the authorization server no longer knows the client loom registered; registering anew"
        );
        target.store.remove_registration(key).map_err(|e| e.0)?;
    }
    drop(pending);
    begin_once(target).await
}

/// Whether the authorization server refuses `authorization_url` for its client: 400 naming
/// `invalid_client` (asked without following redirects; anything else counts as known).
async fn client_unknown_at(authorization_url: &str) -> bool {
    let Some(response) = probe_get(authorization_url).await else {
        return false;
    };
    if response.status().as_u16() != 400 {
        return false;
    }
    response
        .text()
        .await
        .is_ok_and(|body| body.contains("invalid_client"))
}

async fn begin_once(target: &LoginTarget<'_>) -> Result<PendingLogin, String> {
    let shown = mask_url(target.url);
    let challenge = match probe(target.url).await? {
        Probe::Protected(challenge) => challenge,
        // Some servers answer initialize openly and ask for a login only for their tools:
        // discovery then goes by the well-known URLs.
        Probe::Open => None,
    };
    let mut manager = AuthorizationManager::new(target.url)
        .await
        .map_err(|e| describe(&e))?;
    manager.set_credential_store(target.store.credential_store(target.url, target.subject));
    let resolution = manager
        .resolve_metadata_from_challenge(challenge.as_deref())
        .await
        .map_err(|e| format!("cannot find where {shown} logs people in: {}", describe(&e)))?;
    // Nothing published: protocol 2025-03-26 has its servers take logins at the default
    // endpoints of their origin (/authorize, /token, /register), when there is one.
    if !resolution.source.is_discovered()
        && !answers_at(&resolution.metadata.authorization_endpoint).await
    {
        return Err(format!(
            "{shown} does not say where to log in: it publishes no protected resource metadata \
             (RFC 9728), no authorization server metadata (RFC 8414 / OpenID discovery), and \
             has no authorization endpoint at the default path of protocol 2025-03-26"
        ));
    }
    let metadata = resolution.metadata;
    let issuer = metadata.issuer.clone();
    let (loopback, redirect_uri) = match &target.face {
        Some(face) => (None, face.uri.to_owned()),
        None => {
            let listener =
                TcpListener::bind(("127.0.0.1", target.settings.redirect_port.unwrap_or(0)))
                    .await
                    .map_err(|e| match target.settings.redirect_port {
                        Some(port) => format!(
                            "cannot listen on 127.0.0.1:{port} for the login's redirect ({e}); \
                             free the port or change `oauth.redirectPort`"
                        ),
                        None => format!("cannot listen on 127.0.0.1 for the login's redirect: {e}"),
                    })?;
            let port = listener
                .local_addr()
                .map_err(|e| format!("cannot read the redirect's port: {e}"))?
                .port();
            (
                Some((listener, port)),
                format!("http://127.0.0.1:{port}/callback"),
            )
        }
    };
    let registration_key = issuer
        .as_deref()
        .map(|issuer| registration_key(issuer, target.face.as_ref()));
    let registered = client_identity(target, &metadata, registration_key.as_deref())?;
    manager.set_metadata(metadata);
    // A redirect to this machine's loopback is a native app's (RFC 8252); one to loom's HTTP
    // face is a web server's.
    let mut request = AuthorizationRequest::new(redirect_uri.clone())
        .with_client_name("loom")
        .with_application_type(if target.face.is_some() {
            "web"
        } else {
            "native"
        });
    if let Some(challenge) = &challenge {
        request = request.with_challenge(challenge.clone());
    }
    let scopes = scopes_to_ask(target);
    request = if scopes.is_empty() {
        request.with_initial_scope_selection()
    } else {
        request.with_scopes(scopes)
    };
    match &registered {
        Identity::Configured { id, secret } => {
            request = request.with_preregistered_client(id.clone());
            if let Some(secret) = secret {
                request = request.with_client_secret(secret.clone());
            }
        }
        Identity::Remembered(registration) => {
            request = request.with_preregistered_client(registration.client_id.clone());
        }
        Identity::MetadataDocument(url) => {
            request = request.with_client_metadata_url(url.clone());
        }
        Identity::Register => {}
    }
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| format!("cannot start the login to {shown}: {}", describe(&e)))?;
    let url = session.get_authorization_url().to_owned();
    let state = reqwest::Url::parse(&url)
        .ok()
        .and_then(|url| url.query().and_then(|q| query_value(q, "state")))
        .ok_or_else(|| {
            format!("cannot start the login to {shown}: its authorization URL has no state")
        })?;
    let inbound = match (loopback, &target.face) {
        (Some((listener, port)), _) => Inbound::Loopback { listener, port },
        (None, Some(face)) => {
            let queries = face.redirects.expect(&state).ok_or_else(|| {
                "too many logins wait for their browser; try again in a few minutes".to_owned()
            })?;
            Inbound::Face {
                uri: redirect_uri,
                queries,
            }
        }
        (None, None) => return Err("the login has no redirect".to_owned()),
    };
    Ok(PendingLogin {
        url,
        state,
        session,
        inbound,
        registered,
        issuer,
        registration_key,
        server_url: target.url.to_owned(),
        subject: target.subject.map(str::to_owned),
        store: target.store.clone(),
    })
}

impl PendingLogin {
    /// Waits (up to `wait`) for the browser to come back to the redirect, then exchanges the
    /// code (state and issuer checked) and keeps the tokens.
    pub(crate) async fn finish(self, wait: Duration) -> Result<LoggedIn, String> {
        let PendingLogin {
            state,
            session,
            inbound,
            registered,
            issuer,
            registration_key,
            server_url,
            subject,
            store,
            ..
        } = self;
        let callback = match inbound {
            Inbound::Loopback { listener, port } => wait_for_callback(listener, port, wait).await?,
            Inbound::Face { uri, queries } => wait_for_face(uri, queries, wait).await?,
        };
        // A redirect that is not this login's says nothing about it, an `error` included.
        if callback.state.as_deref() != Some(state.as_str()) {
            return Err(explain_callback_error(&AuthError::InternalError(
                "state not found".to_owned(),
            )));
        }
        // A client loom registered before that the server no longer knows: forgotten, so the
        // next login registers anew instead of meeting the same refusal forever.
        let forget_client = |why: &str| {
            if matches!(registered, Identity::Remembered(_))
                && why.contains("invalid_client")
                && let Some(key) = &registration_key
                && store.remove_registration(key).is_ok()
            {
                return "; the client loom had registered is unknown to the server now and is \
                        forgotten: log in again to register anew"
                    .to_owned();
            }
            String::new()
        };
        if let Some(error) = callback.error {
            let forgotten = forget_client(&error);
            return Err(format!(
                "the authorization server did not authorize loom: {error}{}{forgotten}",
                callback
                    .error_description
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            ));
        }
        if let Err(error) = session.handle_callback_url(&callback.url).await {
            let explained = explain_callback_error(&error);
            let forgotten = forget_client(&explained);
            return Err(format!("{explained}{forgotten}"));
        }
        let stored = store
            .load(&server_url, subject.as_deref())
            .map_err(|e| e.0)?
            .ok_or_else(|| "the tokens were not kept (the login file is missing)".to_owned())?;
        // A client registered just now is used again next time (one registration per server).
        if matches!(registered, Identity::Register)
            && let Some(key) = &registration_key
        {
            let registration = Registration {
                issuer: key.clone(),
                client_id: stored.client_id.clone(),
            };
            if let Err(error) = store.save_registration(&registration) {
                tracing::warn!("the client registration was not kept: {}", error.0);
            }
        }
        Ok(LoggedIn {
            issuer,
            scopes: stored.granted_scopes.clone(),
            expires_in: remaining(&stored),
        })
    }
}

/// `oauth.scopes`; after the server asked for more (403 `insufficient_scope`), those joined by
/// what the last login was granted and what the server asked for (a step-up keeps the old
/// grant). Empty: the challenge's or the metadata's scopes (rmcp chooses).
fn scopes_to_ask(target: &LoginTarget<'_>) -> Vec<String> {
    let mut scopes = target.settings.scopes.clone();
    let wanted = target.store.wanted_scopes(target.url, target.subject);
    if !wanted.is_empty() {
        let granted = target
            .store
            .load(target.url, target.subject)
            .ok()
            .flatten()
            .map(|c| c.granted_scopes)
            .unwrap_or_default();
        for scope in granted.into_iter().chain(wanted) {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
    }
    scopes
}

/// Who loom is to the authorization server.
enum Identity {
    /// `oauth.clientId` (+ `clientSecret`).
    Configured { id: String, secret: Option<String> },
    /// A client loom registered with this server before.
    Remembered(Registration),
    /// `oauth.clientMetadataUrl`, which the server takes.
    MetadataDocument(String),
    /// Dynamic Client Registration.
    Register,
}

/// What loom's registration with `issuer` is remembered under: the issuer for logins that come
/// back to the loopback, the issuer and loom's redirect for its HTTP face (a client registered
/// for one redirect cannot use another).
fn registration_key(issuer: &str, face: Option<&FaceRedirect<'_>>) -> String {
    match face {
        Some(face) => format!("{issuer} {}", face.uri),
        None => issuer.to_owned(),
    }
}

fn client_identity(
    target: &LoginTarget<'_>,
    metadata: &AuthorizationMetadata,
    registration_key: Option<&str>,
) -> Result<Identity, String> {
    if let Some(id) = &target.settings.client_id {
        return Ok(Identity::Configured {
            id: id.clone(),
            secret: target
                .settings
                .client_secret
                .as_ref()
                .map(|s| s.expose().to_owned()),
        });
    }
    let takes_documents = metadata
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(serde_json::Value::as_bool)
        == Some(true);
    if let Some(url) = &target.settings.client_metadata_url
        && takes_documents
    {
        return Ok(Identity::MetadataDocument(url.clone()));
    }
    // A client registered for fewer scopes may not be granted more: a step-up registers anew
    // (and remembers that client instead).
    let stepping_up = !target
        .store
        .wanted_scopes(target.url, target.subject)
        .is_empty();
    if let Some(key) = registration_key
        && !stepping_up
        && let Some(registration) = target.store.registration(key).map_err(|e| e.0)?
    {
        return Ok(Identity::Remembered(registration));
    }
    if metadata.registration_endpoint.is_some() {
        return Ok(Identity::Register);
    }
    let issuer = metadata.issuer.as_deref().unwrap_or("(no issuer)");
    Err(format!(
        "the authorization server `{issuer}` offers neither dynamic client registration nor \
         client metadata documents{}: register a client with it (redirect URI \
         http://127.0.0.1/callback, or with a fixed port and `oauth.redirectPort`) and set \
         `oauth.clientId` (and `oauth.clientSecret`) in the entry of `{}`",
        if target.settings.client_metadata_url.is_some() {
            " (it does not take `oauth.clientMetadataUrl`)"
        } else {
            ""
        },
        target.server
    ))
}

fn explain_callback_error(error: &AuthError) -> String {
    match error {
        AuthError::InternalError(message) if message.contains("state not found") => {
            "the redirect's `state` is not the one this login sent (a stale or forged \
             redirect); nothing was kept: run the login again"
                .to_owned()
        }
        AuthError::AuthorizationServerMissingIssuer { expected_issuer } => format!(
            "the redirect has no `iss` although `{expected_issuer}` promises one (RFC 9207); \
             nothing was kept"
        ),
        other => format!("the login failed: {}; nothing was kept", describe(other)),
    }
}

impl Callback {
    /// The redirect to `uri` with `query`.
    fn of(uri: &str, query: &str) -> Self {
        Callback {
            url: format!("{uri}?{query}"),
            state: query_value(query, "state"),
            error: query_value(query, "error"),
            error_description: query_value(query, "error_description"),
        }
    }
}

/// Where the browser comes back to.
enum Inbound {
    /// This machine's loopback, served by the login itself.
    Loopback { listener: TcpListener, port: u16 },
    /// loom's HTTP face at `uri`, which hands the redirect's query over.
    Face {
        uri: String,
        queries: mpsc::Receiver<String>,
    },
}

/// What the browser brought back to the redirect.
struct Callback {
    /// The whole redirect URL, as rmcp reads it (code, state, iss).
    url: String,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// Serves `http://127.0.0.1:PORT/callback` until the browser arrives there (or `wait` runs out).
async fn wait_for_callback(
    listener: TcpListener,
    port: u16,
    wait: Duration,
) -> Result<Callback, String> {
    let (sender, mut received) = mpsc::channel::<String>(1);
    let server = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let sender = sender.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request: hyper::Request<_>| {
                    let sender = sender.clone();
                    async move {
                        let is_callback = request.uri().path() == "/callback";
                        let query = request.uri().query().unwrap_or("").to_owned();
                        let (status, page) = if is_callback && !query.is_empty() {
                            let _ = sender.try_send(query.clone());
                            let failed = query_value(&query, "error").is_some();
                            (200, if failed { PAGE_REFUSED } else { PAGE_DONE })
                        } else {
                            (404, PAGE_NOT_HERE)
                        };
                        hyper::Response::builder()
                            .status(status)
                            .header("content-type", "text/html; charset=utf-8")
                            .header("cache-control", "no-store")
                            .body(http_body_util::Full::new(bytes::Bytes::from_static(
                                page.as_bytes(),
                            )))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    let query = tokio::time::timeout(wait, received.recv()).await;
    server.abort();
    let query = match query {
        Ok(Some(query)) => query,
        Ok(None) | Err(_) => {
            return Err(format!(
                "no browser came back to http://127.0.0.1:{port}/callback within {} s; run the \
                 login again",
                wait.as_secs()
            ));
        }
    };
    Ok(Callback::of(
        &format!("http://127.0.0.1:{port}/callback"),
        &query,
    ))
}

/// Waits (up to `wait`) for loom's HTTP face to hand over the redirect.
async fn wait_for_face(
    uri: String,
    mut queries: mpsc::Receiver<String>,
    wait: Duration,
) -> Result<Callback, String> {
    let query = match tokio::time::timeout(wait, queries.recv()).await {
        Ok(Some(query)) => query,
        Ok(None) | Err(_) => {
            return Err(format!(
                "no browser came back to {uri} within {} s; call again to log in anew",
                wait.as_secs()
            ));
        }
    };
    Ok(Callback::of(&uri, &query))
}

/// The pages a browser sees at a redirect.
pub(crate) const PAGE_DONE: &str = "<!doctype html><title>loom</title><p>loom is logged in. You can close \
                         this tab.</p>";
pub(crate) const PAGE_REFUSED: &str = "<!doctype html><title>loom</title><p>The login was refused; loom \
                            says why where you asked for it.</p>";
pub(crate) const PAGE_LOST: &str = "<!doctype html><title>loom</title><p>No login of loom's waits for \
                         this page (it finished, timed out, or was not started here): call the \
                         tool again for a new one.</p>";
pub(crate) const PAGE_NOT_HERE: &str = "<!doctype html><title>loom</title><p>Not found.</p>";

/// Opens `url` with `$BROWSER` (a command, run with the URL as its argument), else the
/// platform's opener; a failure only means the person opens the printed URL themselves.
fn open_browser(url: &str) {
    let command = match std::env::var("BROWSER") {
        Ok(browser) if !browser.trim().is_empty() => browser,
        _ if cfg!(target_os = "macos") => "open".to_owned(),
        _ => "xdg-open".to_owned(),
    };
    let spawned = std::process::Command::new(&command)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn();
    match spawned {
        // Reaped in the background: the browser may outlive the login.
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        Err(error) => {
            tracing::info!("could not start `{command}` ({error}); open the URL by hand");
        }
    }
}

/// The token answer's member `name`, read through its JSON form (the token type is the
/// oauth2 crate's, which loom does not name).
fn token_member(credentials: &StoredCredentials, name: &str) -> Option<serde_json::Value> {
    let token = serde_json::to_value(credentials.token_response.as_ref()?).ok()?;
    token.get(name).cloned()
}

/// How long the stored access token has left, when the server said.
pub(crate) fn remaining(credentials: &StoredCredentials) -> Option<Duration> {
    let lifetime = token_member(credentials, "expires_in")?.as_u64()?;
    let received = credentials.token_received_at?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs();
    Some(Duration::from_secs(
        received.saturating_add(lifetime).saturating_sub(now),
    ))
}

/// Whether the stored login can still get tokens on its own (a refresh token).
pub(crate) fn can_refresh(credentials: &StoredCredentials) -> bool {
    token_member(credentials, "refresh_token").is_some_and(|t| t.is_string())
}
