//! OAuth 2.1 for remote servers that ask for a login (SPEC §4.7). rmcp's client does the
//! protocol — metadata discovery (RFC 9728, RFC 8414, OpenID), PKCE, `resource` (RFC 8707),
//! client registration (RFC 7591) or a metadata document, the code exchange with the `iss`
//! check (RFC 9207), refresh; loom adds where logins are kept ([`store`]), the person's side of
//! a login ([`login`]: `loom auth login`), and the token each request to the server carries
//! while loom serves ([`ServerLogin`]).

pub(crate) mod login;
pub(crate) mod redirects;
pub(crate) mod store;

use rmcp::transport::auth::{AuthError, AuthorizationManager, OAuthClientConfig};
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Mutex;

use crate::config::OAuthSettings;
use store::TokenStore;

/// Why a request to a server that needs a login could not carry a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenError {
    /// Nobody logged in, the login was given up (logout, revoked refresh token), or the server
    /// refused the token and a refresh did not help: a person has to log in.
    NeedsLogin,
    /// The token could not be had for another reason (the store, the network): said as is.
    Failed(String),
}

/// One remote server's login while loom serves: the stored tokens and what refreshes them.
pub struct ServerLogin {
    /// The server's name in the config (for messages).
    server: String,
    url: String,
    settings: OAuthSettings,
    store: TokenStore,
    /// The loom subject whose login this is (HTTP face); none over stdio.
    subject: Option<String>,
    /// Built from the stored login on first use; dropped when a login is needed again, so a
    /// login made meanwhile (by `loom auth login` in another process) is read afresh.
    manager: Mutex<Option<AuthorizationManager>>,
    /// Set when the server refused this client and no token could be had: a person has to log
    /// in. Cleared when a token is had again.
    needed: AtomicBool,
    /// A login offered to a client (URL elicitation) is under way.
    offering: AtomicBool,
    /// Told when a login offered to a client was kept: the connection waiting for it goes on
    /// at once.
    login_kept: tokio::sync::Notify,
    /// The authorization page of the login under way, once known.
    offered_page: std::sync::Mutex<Option<String>>,
    /// Scopes the server said it needs beyond the login's (403 `insufficient_scope`).
    more_scopes: std::sync::Mutex<Vec<String>>,
    /// Whose login this is.
    holder: Holder,
    /// The server refused, for want of scopes, a token granted those very scopes.
    futile: AtomicBool,
}

/// Whose login a [`ServerLogin`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// The person at this machine (`loom auth login`): the stdio face, and the HTTP face when
    /// its clients share loom's logins.
    Machine,
    /// Nobody's: the HTTP face's shared connection when every subject logs in for itself. It
    /// sends no token, so it only learns whether the server wants one.
    Nobody,
    /// One subject of the HTTP face, who logs in through its client (SPEC §4.7).
    Subject,
}

impl ServerLogin {
    pub fn new(
        server: &str,
        url: &str,
        settings: OAuthSettings,
        store: TokenStore,
        subject: Option<String>,
    ) -> Self {
        ServerLogin {
            holder: if subject.is_some() {
                Holder::Subject
            } else {
                Holder::Machine
            },
            server: server.to_owned(),
            url: url.to_owned(),
            settings,
            store,
            subject,
            manager: Mutex::new(None),
            needed: AtomicBool::new(false),
            offering: AtomicBool::new(false),
            offered_page: std::sync::Mutex::new(None),
            login_kept: tokio::sync::Notify::new(),
            futile: AtomicBool::new(false),
            more_scopes: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The login of nobody: the shared connection of an HTTP face whose subjects log in each
    /// for themselves. It never carries a token.
    pub fn nobody(server: &str, url: &str, settings: OAuthSettings, store: TokenStore) -> Self {
        ServerLogin {
            holder: Holder::Nobody,
            ..Self::new(server, url, settings, store, None)
        }
    }

    pub fn holder(&self) -> Holder {
        self.holder
    }

    /// The loom subject whose login this is (HTTP face).
    pub fn subject(&self) -> Option<&str> {
        self.subject.as_deref()
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn settings(&self) -> &OAuthSettings {
        &self.settings
    }

    pub fn store(&self) -> &TokenStore {
        &self.store
    }

    /// Claims the one login a client may be offered at a time; false while one is under way.
    pub fn begin_offer(&self) -> bool {
        !self.offering.swap(true, Ordering::AcqRel)
    }

    /// Whether a login offered to a client is under way (its browser not back yet, or its
    /// code being exchanged).
    pub fn offer_under_way(&self) -> bool {
        self.offering.load(Ordering::Acquire)
    }

    pub fn end_offer(&self) {
        *self
            .offered_page
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        self.offering.store(false, Ordering::Release);
    }

    /// A login offered to a client was kept.
    pub fn logged_in(&self) {
        self.login_kept.notify_waiters();
    }

    /// Resolves at the next [`Self::logged_in`].
    pub async fn kept(&self) {
        self.login_kept.notified().await;
    }

    /// The authorization page of the offered login under way.
    pub fn set_offered_page(&self, page: &str) {
        *self
            .offered_page
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(page.to_owned());
    }

    pub fn offered_page(&self) -> Option<String> {
        self.offered_page
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Whether the last attempt ended in [`TokenError::NeedsLogin`].
    pub fn login_needed(&self) -> bool {
        self.needed.load(Ordering::Acquire)
    }

    /// Forgets that a login was needed: the next attempt decides again.
    pub fn reset_needed(&self) {
        self.needed.store(false, Ordering::Release);
        self.futile.store(false, Ordering::Release);
    }

    /// Whether the server refused scopes the last login was granted (a login would not help,
    /// so none is offered).
    pub fn futile(&self) -> bool {
        self.futile.load(Ordering::Acquire)
    }

    /// The server answered 401 and no token can be had: remembered until one can.
    pub fn mark_needed(&self) {
        self.needed.store(true, Ordering::Release);
    }

    /// Take a subject's login another instance of a cluster made or refreshed (SPEC §25):
    /// true when the file here changed.
    pub async fn pull_shared(&self) -> bool {
        self.store
            .pull_shared(&self.url, self.subject.as_deref())
            .await
    }

    /// Changes when the stored login changes (written, replaced, removed): its file's size and
    /// modification time.
    pub fn stored_version(&self) -> Option<(u64, std::time::SystemTime)> {
        if self.holder == Holder::Nobody {
            return None;
        }
        let path = self.store.login_path(&self.url, self.subject.as_deref());
        let meta = std::fs::metadata(path).ok()?;
        Some((meta.len(), meta.modified().ok()?))
    }

    /// What a person does about [`TokenError::NeedsLogin`].
    pub fn needs_login_message(&self) -> String {
        let more = self
            .more_scopes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .join(" ");
        let what = if more.is_empty() {
            "a login".to_owned()
        } else {
            format!("a login with more scopes ({more})")
        };
        if self.futile() {
            return format!(
                "server `{}` refuses loom for want of scopes ({more}) that its last login was \
                 granted, so logging in again would not help: the server or its authorization \
                 server has to change (then log in again)",
                self.server
            );
        }
        if self.holder != Holder::Machine {
            // Each user of the HTTP face logs in for themselves, through their client.
            return format!(
                "server `{}` needs {what} of yours: call one of its tools (`{}_…`) to be given \
                 the page where you log in, then call again",
                self.server, self.server
            );
        }
        format!(
            "server `{}` needs {what}: run `loom auth login {}` (with the same --config), then \
             call again",
            self.server, self.server
        )
    }

    /// The server refused the token for want of `scopes` (403 `insufficient_scope`): the login
    /// has to be made again, asking for them too (kept with the login for `loom auth login`).
    pub fn step_up(&self, scopes: &[String]) {
        if self.holder == Holder::Nobody {
            return;
        }
        // Scopes the last login was granted already: another login would get the same refusal
        // (a client that logs in again and again would loop).
        let granted = self
            .store
            .load(&self.url, self.subject.as_deref())
            .ok()
            .flatten()
            .map(|login| login.granted_scopes)
            .unwrap_or_default();
        let futile = !scopes.is_empty() && scopes.iter().all(|scope| granted.contains(scope));
        self.futile.store(futile, Ordering::Release);
        {
            let mut more = self
                .more_scopes
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for scope in scopes {
                if !more.contains(scope) {
                    more.push(scope.clone());
                }
            }
        }
        if let Err(error) = self
            .store
            .want_scopes(&self.url, self.subject.as_deref(), scopes)
        {
            tracing::warn!("the scopes the server wants were not kept: {}", error.0);
        }
        self.needed.store(true, Ordering::Release);
    }

    /// The access token for the next request: `None` when nobody logged in (the request goes
    /// without one; a server that needs one answers 401). Refreshed first when it is about to
    /// expire.
    pub async fn bearer(&self) -> Result<Option<String>, TokenError> {
        if self.holder == Holder::Nobody {
            return Ok(None);
        }
        let mut slot = self.manager.lock().await;
        if slot.is_none() {
            match self.store.load(&self.url, self.subject.as_deref()) {
                Ok(Some(_)) => {}
                Ok(None) => return Ok(None),
                Err(error) => return Err(TokenError::Failed(error.0)),
            }
            *slot = Some(self.manager_from_store().await?);
        }
        let Some(manager) = slot.as_ref() else {
            return Ok(None);
        };
        let mut had = manager.get_access_token().await;
        if matches!(had, Err(AuthError::TokenRefreshFailed(_))) {
            // The refresh's request failed on the way (an authorization server that closed an
            // idle kept-alive connection as it was reused): once more, on a new one.
            tokio::time::sleep(REFRESH_RETRY_AFTER).await;
            had = manager.get_access_token().await;
        }
        match had {
            Ok(token) => {
                self.needed.store(false, Ordering::Release);
                self.more_scopes
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clear();
                Ok(Some(token))
            }
            Err(AuthError::AuthorizationRequired) => {
                *slot = None;
                Err(TokenError::NeedsLogin)
            }
            Err(error) => Err(TokenError::Failed(describe(&error))),
        }
    }

    /// The server refused `refused` (401): one refresh, whose new token the request is sent
    /// again with. [`TokenError::NeedsLogin`] when the refresh is refused too, or there was no
    /// login to refresh.
    pub async fn refresh_after_refusal(&self, refused: Option<&str>) -> Result<String, TokenError> {
        let mut slot = self.manager.lock().await;
        let Some(manager) = slot.as_ref() else {
            return Err(TokenError::NeedsLogin);
        };
        // Another request may have refreshed while this one waited for the lock.
        if let Ok(token) = manager.get_access_token().await
            && Some(token.as_str()) != refused
        {
            return Ok(token);
        }
        let mut refreshed = manager.refresh_token().await;
        if matches!(refreshed, Err(AuthError::TokenRefreshFailed(_))) {
            tokio::time::sleep(REFRESH_RETRY_AFTER).await;
            refreshed = manager.refresh_token().await;
        }
        match refreshed {
            Ok(_) => match manager.get_access_token().await {
                Ok(token) if Some(token.as_str()) != refused => Ok(token),
                Ok(_) | Err(AuthError::AuthorizationRequired) => {
                    *slot = None;
                    Err(TokenError::NeedsLogin)
                }
                Err(error) => Err(TokenError::Failed(describe(&error))),
            },
            Err(AuthError::TokenRefreshRejected(_) | AuthError::AuthorizationRequired) => {
                *slot = None;
                Err(TokenError::NeedsLogin)
            }
            Err(error) => Err(TokenError::Failed(describe(&error))),
        }
    }

    async fn manager_from_store(&self) -> Result<AuthorizationManager, TokenError> {
        crate::common::tls::install_crypto_provider();
        let failed = |error: AuthError| TokenError::Failed(describe(&error));
        let mut manager = AuthorizationManager::new(self.url.as_str())
            .await
            .map_err(failed)?;
        manager.set_credential_store(
            self.store
                .credential_store(&self.url, self.subject.as_deref()),
        );
        if !manager.initialize_from_store().await.map_err(failed)? {
            // The authorization server changed since the login: its tokens were dropped.
            return Err(TokenError::NeedsLogin);
        }
        // rmcp restores only the client id; a registered client's secret authenticates its
        // refreshes.
        if let (Some(id), Some(secret)) = (&self.settings.client_id, &self.settings.client_secret) {
            let config = OAuthClientConfig::new(id.clone(), self.url.clone())
                .with_client_secret(secret.expose().to_owned());
            manager.configure_client(config).map_err(failed)?;
        }
        Ok(manager)
    }
}

/// How long a refresh whose request failed waits before it is made once more.
const REFRESH_RETRY_AFTER: std::time::Duration = std::time::Duration::from_millis(250);

/// rmcp's error in words (its `Display` says what failed; the variant names say nothing to a
/// user).
pub(crate) fn describe(error: &AuthError) -> String {
    match error {
        AuthError::AuthorizationRequired => "a login is needed".to_owned(),
        AuthError::AuthorizationServerMismatch {
            expected_issuer,
            received_issuer,
        } => format!(
            "the answer came from issuer `{received_issuer}`, but this login is with \
             `{expected_issuer}` (RFC 9207 issuer check; a mix-up or a forged redirect)"
        ),
        other => other.to_string(),
    }
}
