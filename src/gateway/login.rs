//! A login offered through the client (SPEC §4.7): a call to a tool of a server that waits for
//! an OAuth login, from a client that declared URL-mode elicitation, asks the person to open the
//! server's authorization page (`elicitation/create`, `mode: "url"`); loom receives the redirect
//! itself and keeps the tokens, and the server's tools come back. A subject of the HTTP face
//! logs in for itself: its browser comes back to loom's HTTP face, and a client that takes no
//! URL elicitation is given the page in the call's answer.

use std::time::Duration;

use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, CallToolResult, ElicitationAction, ServerResult};
use rmcp::service::{Peer, RequestContext, RoleServer};

use super::Gateway;
use super::catalog::Route;
use super::input::Call;
use crate::downstream::Downstream;
use crate::downstream::ServerState;
use crate::downstream::callers::{AskKind, declares};
use crate::downstream::oauth::login::{self, FaceRedirect, LoggedIn, LoginTarget, PendingLogin};
use crate::downstream::oauth::{Holder, ServerLogin};
use crate::tools::error_result;

/// How long a call waits for the person to finish a login it offered.
pub(super) const OFFERED_LOGIN_WAIT: Duration = Duration::from_secs(300);

/// Holds a server's one offered login; releases it when dropped.
struct OfferGuard(Option<Arc<ServerLogin>>);

impl Drop for OfferGuard {
    fn drop(&mut self) {
        if let Some(login) = self.0.take() {
            login.end_offer();
        }
    }
}

/// A login that can be offered for a call: the server, its login, and where the browser comes
/// back (loom's HTTP face for a subject; none: this machine's loopback).
struct Offer {
    server: Arc<Downstream>,
    login: Arc<ServerLogin>,
    callback_url: Option<String>,
}

/// A login started for a call: the page to open, and the task that waits for the browser.
struct Started {
    page: String,
    done: tokio::sync::oneshot::Receiver<Result<LoggedIn, String>>,
    finisher: tokio::task::JoinHandle<()>,
}

impl Gateway {
    /// The login a call to `tool` may be offered: its server waits for one, and the login is
    /// this session's to make (a subject's own; the machine's only for the person at this
    /// machine — clients of an HTTP face that share it must not log it in or out, and its
    /// redirect goes to this machine's loopback, which a remote browser cannot reach).
    fn login_offer(&self, tool: &str) -> Option<Offer> {
        self.offer_for(self.server_named_in(tool)?)
    }

    /// `server`'s login, when it waits for one this session may be offered.
    fn offer_for(&self, server: Arc<Downstream>) -> Option<Offer> {
        if !matches!(server.state(), ServerState::NeedsLogin { .. }) {
            return None;
        }
        let login = server.login.clone()?;
        if login.futile() {
            return None;
        }
        let callback_url = match login.holder() {
            Holder::Machine => {
                // The stdio face's session (it owns the hub), or `serve --http --stdio`'s.
                let local =
                    self.owns_hub || self.credential().as_deref() == Some(super::LOCAL_CREDENTIAL);
                if !local {
                    return None;
                }
                None
            }
            Holder::Subject => Some(self.hub.callback_url()?),
            Holder::Nobody => return None,
        };
        Some(Offer {
            server,
            login,
            callback_url,
        })
    }

    /// loom's own `S_login` tool for each server in `servers` that waits for a login this
    /// session may be offered: a client lists only what is listed, so without it a model
    /// could not ask for the login (SPEC §4.7).
    pub(crate) fn login_tools(
        &self,
        servers: &[Arc<Downstream>],
    ) -> Vec<serde_json::Map<String, serde_json::Value>> {
        servers
            .iter()
            .filter(|server| self.offer_for(Arc::clone(server)).is_some())
            .filter_map(|server| {
                let name = server.name();
                let tool = serde_json::json!({
                    "name": login_tool_name(name),
                    "description": format!(
                        "Log in to `{name}`, which asks for an OAuth login before its tools can \
                         be used: the person is asked to open its login page (or given it to \
                         open); its tools are listed once they have logged in."
                    ),
                    "inputSchema": {"type": "object", "properties": {}},
                });
                tool.as_object().cloned()
            })
            .collect()
    }

    /// Starts `offer`'s login (one per server and holder at a time), finished on a task of its
    /// own that keeps the claim until the browser came back or the wait ran out.
    async fn start_offered_login(&self, offer: &Offer) -> Result<Started, CallToolResult> {
        let name = offer.server.name();
        let login = &offer.login;
        if !login.begin_offer() {
            let page = match (login.holder(), login.offered_page()) {
                (Holder::Subject, Some(page)) => format!(" (its page: {page})"),
                _ => String::new(),
            };
            return Err(error_result(format!(
                "loom: a login to `{name}` is under way in a browser{page}; call again once it \
                 is done"
            )));
        }
        // Released however this call ends (a client that goes away mid-discovery too), unless
        // the task that finishes the login takes it over.
        let mut claim = OfferGuard(Some(login.clone()));
        let target = LoginTarget {
            server: name,
            url: login.url(),
            settings: login.settings(),
            store: login.store(),
            subject: login.subject(),
            face: offer.callback_url.as_deref().map(|uri| FaceRedirect {
                uri,
                redirects: &self.hub.redirects,
            }),
        };
        let pending: PendingLogin = login::begin(&target).await.map_err(|error| {
            error_result(format!("loom: cannot start the login to `{name}`: {error}"))
        })?;
        let page = pending.url.clone();
        login.set_offered_page(&page);
        // In a cluster the browser may come back to another instance: the store says this
        // one waits for it (SPEC §25).
        if let (Some(cluster), Some(_)) = (self.hub.cluster(), &offer.callback_url)
            && let Some(state) = reqwest::Url::parse(&page).ok().and_then(|url| {
                url.query()
                    .and_then(|q| crate::downstream::oauth::redirects::query_value(q, "state"))
            })
            && let Err(error) = cluster.record_login(&state).await
        {
            tracing::warn!(
                server = name,
                "the login's redirect can only come back to this instance: {error}"
            );
        }
        let (done_tx, done) = tokio::sync::oneshot::channel();
        let finishing = OfferGuard(claim.0.take());
        let finished_login = login.clone();
        let finisher = tokio::spawn(async move {
            let outcome = pending.finish(OFFERED_LOGIN_WAIT).await;
            if outcome.is_ok() {
                finished_login.logged_in();
            }
            drop(finishing);
            let _ = done_tx.send(outcome);
        });
        Ok(Started {
            page,
            done,
            finisher,
        })
    }

    /// [`Self::offer_login`] or [`Self::offer_login_as_input`], as the request's era allows.
    pub(crate) async fn offer_login_for(
        &self,
        params: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Option<ServerResult> {
        if super::era::Era::of_request(context) == super::era::Era::Discover {
            return self.offer_login_as_input(params, context).await;
        }
        self.offer_login(&params.name, &context.peer)
            .await
            .map(ServerResult::CallToolResult)
    }

    /// Whether the server `tool` is named after, waiting for this session's login, just got
    /// one another instance of a cluster made (SPEC §25): taken from the store, its connection
    /// waited for — so the call goes on instead of offering a second login.
    pub(crate) async fn adopt_shared_login(&self, tool: &str) -> bool {
        let Some(server) = self.server_named_in(tool) else {
            return false;
        };
        let Some(login) = &server.login else {
            return false;
        };
        if self.hub.cluster().is_none() || !login.pull_shared().await {
            return false;
        }
        let Some(index) = self
            .servers()
            .iter()
            .position(|reached| Arc::ptr_eq(reached, &server))
        else {
            return false;
        };
        self.wait_until_live(index).await;
        true
    }

    /// Whether server `index` lost its login during a call (its login says one is needed):
    /// once its connection has ended and it is listed as waiting for one (within 5 s).
    pub(crate) async fn lost_login(&self, index: usize) -> bool {
        let Some(server) = self.server(index) else {
            return false;
        };
        if !server
            .login
            .as_ref()
            .is_some_and(|login| login.login_needed())
        {
            return false;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while tokio::time::Instant::now() < deadline {
            if matches!(server.state(), ServerState::NeedsLogin { .. }) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// `Some(answer)` when the call to `tool` went to a server waiting for a login and the
    /// client was offered one: the person logged in (the answer says to call again), declined,
    /// or the login failed; or, for a subject whose client takes no URL elicitation, the page
    /// to open. `None`: no login can be offered (the caller answers with the `loom auth
    /// login` message).
    pub(crate) async fn offer_login(
        &self,
        tool: &str,
        peer: &Peer<RoleServer>,
    ) -> Option<CallToolResult> {
        let offer = self.login_offer(tool)?;
        let elicits = peer
            .supported_elicitation_modes()
            .contains(&rmcp::service::ElicitationMode::Url);
        // The person at this machine can always run `loom auth login`; a subject of the HTTP
        // face is given the page in the answer when its client cannot open it.
        if !elicits && offer.callback_url.is_none() {
            return None;
        }
        let name = offer.server.name().to_owned();
        let started = match self.start_offered_login(&offer).await {
            Ok(started) => started,
            Err(answer) => return Some(answer),
        };
        if !elicits {
            return Some(page_to_open(&name, tool, &started.page));
        }
        let own_tool = tool == login_tool_name(&name);
        let Ok(url) = reqwest::Url::parse(&started.page) else {
            started.finisher.abort();
            return None;
        };
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
            started.finisher.abort();
        }
        match asked {
            Ok(ElicitationAction::Accept) => {}
            Ok(_) => {
                return Some(error_result(format!(
                    "loom: the login to `{name}` was declined; its tools stay unavailable{}",
                    match offer.login.holder() {
                        Holder::Machine => format!(" (log in with `loom auth login {name}`)"),
                        _ => " (call one of them again to log in)".to_owned(),
                    }
                )));
            }
            Err(error) => {
                tracing::warn!(server = %name, "the client was not asked to log in: {error}");
                return None;
            }
        }
        let finished = tokio::time::timeout(OFFERED_LOGIN_WAIT, started.done).await;
        let answer = match finished {
            Ok(Ok(Ok(done))) if own_tool => {
                tracing::info!(server = %name, scopes = ?done.scopes, "logged in through the client");
                return Some(crate::tools::text_result(format!(
                    "loom: logged in to `{name}`; its tools are listed again in a moment"
                )));
            }
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

    /// [`Self::offer_login`] for a 2026-07-28 request, which cannot be sent a request of
    /// loom's: the page is asked for as an `input_required` URL elicitation, and the client's
    /// retry makes the call once the login is done (it waits for the server's connection).
    /// A client that declared no URL-mode elicitation: as [`Self::offer_login`] without one.
    pub(crate) async fn offer_login_as_input(
        &self,
        params: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Option<ServerResult> {
        let tool = params.name.as_ref();
        let offer = self.login_offer(tool)?;
        let capabilities = context.client_capabilities().unwrap_or_default();
        let elicits = declares(
            &capabilities,
            AskKind::Elicitation,
            &serde_json::json!({"mode": "url"}),
        );
        if !elicits && offer.callback_url.is_none() {
            return None;
        }
        let name = offer.server.name().to_owned();
        let started = match self.start_offered_login(&offer).await {
            Ok(started) => started,
            Err(answer) => return Some(ServerResult::CallToolResult(answer)),
        };
        if !elicits {
            return Some(ServerResult::CallToolResult(page_to_open(
                &name,
                tool,
                &started.page,
            )));
        }
        let own = tool
            .strip_prefix(name.as_str())
            .and_then(|rest| rest.strip_prefix('_'))
            .unwrap_or(tool)
            .to_owned();
        let index = offer.server.index;
        let mut down = params.clone();
        down.name = own.clone().into();
        down.meta = None;
        down.request_state = None;
        down.input_responses = None;
        // loom's own login tool has nothing to call again: its retry says how the login went.
        let again = (tool != login_tool_name(&name)).then(|| {
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(down))
        });
        let call = Call {
            method: "tools/call",
            target: tool.to_owned(),
            arguments: params.arguments.clone().map(serde_json::Value::Object),
            route: Some(Route {
                server: index,
                name: own,
            }),
        };
        let elicitation = serde_json::json!({
            "mode": "url",
            "message": format!("Log in to `{name}` so that loom can call its tools."),
            "url": started.page,
            "elicitationId": crate::token::random_hex().unwrap_or_else(|| format!("login-{name}")),
        });
        // The login goes on without this call: the retry finds the server logged in.
        drop(started.done);
        let asked = self.login_first(
            index,
            &name,
            elicitation,
            call,
            again,
            started.finisher.abort_handle(),
        );
        if asked.is_none() {
            started.finisher.abort();
        }
        asked
    }
}

/// The name of loom's login tool for server `server`.
pub(crate) fn login_tool_name(server: &str) -> String {
    format!("{server}_login")
}

/// The answer that gives a subject the page where it logs in (its client takes no URL
/// elicitation); the login waits for the browser on its own task.
fn page_to_open(server: &str, tool: &str, page: &str) -> CallToolResult {
    let then = if tool == login_tool_name(server) {
        "its tools are listed once you have".to_owned()
    } else {
        format!("then call `{tool}` again")
    };
    error_result(format!(
        "loom: `{server}` needs you to log in. Open this page in a browser and log in; {then}: \
         {page}"
    ))
}
