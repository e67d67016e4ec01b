//! A login offered through the client (SPEC §4.7): a call to a tool of a server that waits for
//! an OAuth login, from a client that declared URL-mode elicitation, asks the person to open the
//! server's authorization page (`elicitation/create`, `mode: "url"`); loom receives the redirect
//! itself and keeps the tokens, and the server's tools come back.

use std::time::Duration;

use rmcp::model::{CallToolResult, ElicitationAction};
use rmcp::service::{Peer, RoleServer};

use super::Gateway;
use crate::downstream::ServerState;
use crate::downstream::oauth::login::{self, LoginTarget};
use crate::tools::error_result;

/// How long a call waits for the person to finish a login it offered.
pub(super) const OFFERED_LOGIN_WAIT: Duration = Duration::from_secs(300);

/// Holds a server's one offered login; releases it when dropped.
struct OfferGuard(Option<std::sync::Arc<crate::downstream::oauth::ServerLogin>>);

impl Drop for OfferGuard {
    fn drop(&mut self) {
        if let Some(login) = self.0.take() {
            login.end_offer();
        }
    }
}

impl Gateway {
    /// `Some(answer)` when the call to `tool` went to a server waiting for a login and the
    /// client was offered one: the person logged in (the answer says to call again), declined,
    /// or the login failed. `None`: no login can be offered (the caller answers with the
    /// `loom auth login` message).
    pub(crate) async fn offer_login(
        &self,
        tool: &str,
        peer: &Peer<RoleServer>,
    ) -> Option<CallToolResult> {
        let server = self.hub.servers.iter().find(|server| {
            matches!(server.state(), ServerState::NeedsLogin { .. })
                && tool
                    .strip_prefix(server.name())
                    .is_some_and(|rest| rest.starts_with('_'))
        })?;
        let login = server.login.clone()?;
        // Only the stdio face: the login is loom's own, shared by every client of loom's HTTP
        // face, and the redirect goes to this machine's loopback, which a remote person's
        // browser cannot reach.
        if !self.owns_hub {
            return None;
        }
        if !peer
            .supported_elicitation_modes()
            .contains(&rmcp::service::ElicitationMode::Url)
        {
            return None;
        }
        let name = server.name().to_owned();
        if !login.begin_offer() {
            return Some(error_result(format!(
                "loom: a login to `{name}` is under way in a browser; call again once it is done"
            )));
        }
        // Released however this call ends (a client that goes away mid-discovery too), unless
        // the task that finishes the login takes it over.
        let mut offer = OfferGuard(Some(login.clone()));
        let target = LoginTarget {
            server: &name,
            url: login.url(),
            settings: login.settings(),
            store: login.store(),
            subject: None,
        };
        let pending = match login::begin(&target).await {
            Ok(pending) => pending,
            Err(error) => {
                return Some(error_result(format!(
                    "loom: cannot start the login to `{name}`: {error}"
                )));
            }
        };
        let Ok(url) = reqwest::Url::parse(&pending.url) else {
            return None;
        };
        // The redirect may come while the client still considers the question: the login is
        // finished on a task of its own, which this call then waits for.
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let finishing = OfferGuard(offer.0.take());
        let finisher = tokio::spawn(async move {
            let outcome = pending.finish(OFFERED_LOGIN_WAIT).await;
            drop(finishing);
            let _ = done_tx.send(outcome);
        });
        let id = crate::token::random_hex().unwrap_or_else(|| format!("login-{name}"));
        let asked = peer
            .elicit_url(
                format!("Log in to `{name}` so that loom can call its tools."),
                url,
                id,
            )
            .await;
        if !matches!(asked, Ok(ElicitationAction::Accept)) {
            // Nobody will come to the redirect: the listener and the login go (the aborted
            // task's guard releases the offer).
            finisher.abort();
        }
        match asked {
            Ok(ElicitationAction::Accept) => {}
            Ok(_) => {
                return Some(error_result(format!(
                    "loom: the login to `{name}` was declined; its tools stay unavailable (log in \
                     with `loom auth login {name}`)"
                )));
            }
            Err(error) => {
                tracing::warn!(server = %name, "the client was not asked to log in: {error}");
                return None;
            }
        }
        let finished = tokio::time::timeout(OFFERED_LOGIN_WAIT, done_rx).await;
        let answer = match finished {
            Ok(Ok(Ok(done))) => {
                tracing::info!(server = %name, scopes = ?done.scopes, "logged in through the client");
                format!(
                    "loom: logged in to `{name}`; its tools are listed again in a moment: call \
                     `{tool}` again"
                )
            }
            Ok(Ok(Err(error))) => format!("loom: the login to `{name}` failed: {error}"),
            _ => format!("loom: the login to `{name}` did not finish; call again to retry"),
        };
        Some(error_result(answer))
    }
}
