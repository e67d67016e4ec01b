//! Which client a server's own requests (sampling, elicitation, roots) are for.
//!
//! A server asks its client for input while it works on a request of that client: every
//! request loom has in flight on a server is registered here with the way its client is
//! reached ([`Answerer`]), so a server's request goes to the client whose call caused it, never
//! to another session's (SPEC §5.8). A client of the `initialize` era gets the request as a
//! server→client request; a 2026-07-28 request cannot receive one, so the request is handed to
//! the waiting call, which answers its client with `input_required` (SPEC §5.11).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::ErrorData as McpError;
use rmcp::model::{ClientCapabilities, ErrorCode};
use rmcp::service::{Peer, RoleServer};
use tokio::sync::{mpsc, oneshot};

/// A server→client request kind that loom relays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskKind {
    Sampling,
    Elicitation,
    Roots,
}

impl AskKind {
    /// The JSON-RPC method.
    pub fn method(self) -> &'static str {
        match self {
            Self::Sampling => "sampling/createMessage",
            Self::Elicitation => "elicitation/create",
            Self::Roots => "roots/list",
        }
    }

    /// The capability a client declares to receive it, as loom's errors name it.
    pub fn capability(self) -> &'static str {
        match self {
            Self::Sampling => "sampling",
            Self::Elicitation => "elicitation",
            Self::Roots => "roots",
        }
    }
}

/// One server request handed to a waiting 2026-07-28 call: its params as the server sent them
/// (decoded by rmcp, so as a JSON value), and where the client's answer goes.
#[derive(Debug)]
pub struct Ask {
    pub kind: AskKind,
    pub params: serde_json::Value,
    pub reply: oneshot::Sender<Result<serde_json::Value, McpError>>,
}

/// How the client of one request in flight is reached.
#[derive(Clone)]
pub enum Answerer {
    /// A session of the `initialize` era: the server's request is sent to its client.
    Peer(Peer<RoleServer>),
    /// A 2026-07-28 request that can carry `input_required`: the server's request goes to the
    /// waiting call, with what the request declared its client can answer.
    Input {
        capabilities: Box<ClientCapabilities>,
        asks: mpsc::UnboundedSender<Ask>,
    },
    /// A 2026-07-28 request whose answer cannot be `input_required` (e.g. `tasks/get`).
    Refuse { method: String },
}

struct Caller {
    number: u64,
    server: usize,
    session: u64,
    /// The MCP task the request waits for (`tasks/result`), if any: the server's requests
    /// that name this task in their `related-task` `_meta` are for it.
    task: Option<String>,
    answerer: Answerer,
    /// Waiting for its client to answer a question of the server's (2026-07-28
    /// `input_required`): the server's handler of it is blocked on that answer, so a new
    /// question from the server comes from another call, if one is in flight.
    parked: bool,
}

/// Every request in flight on every server, oldest first.
#[derive(Default)]
pub struct Callers {
    calls: Mutex<Vec<Caller>>,
    next: AtomicU64,
    /// The credential each open session belongs to (over HTTP a digest of its bearer token;
    /// the stdio session is one of its own): a server's request that no call of loom's caused
    /// goes to a client only while every open session is of one credential.
    credentials: Mutex<std::collections::HashMap<u64, String>>,
    /// The connections that are one credential's own (a subject's connection to a server it
    /// logged in to, SPEC §4.7), by their key: whatever they send concerns that credential.
    owners: Mutex<std::collections::HashMap<usize, String>>,
}

/// Keeps a request registered; dropping it removes the registration.
pub struct CallerGuard {
    callers: Arc<Callers>,
    number: u64,
}

impl CallerGuard {
    /// The request waits for its client's answer (`true`), or is followed again (`false`).
    pub fn set_parked(&self, parked: bool) {
        if let Some(caller) = self
            .callers
            .lock()
            .iter_mut()
            .find(|caller| caller.number == self.number)
        {
            caller.parked = parked;
        }
    }
}

impl Drop for CallerGuard {
    fn drop(&mut self) {
        self.callers
            .lock()
            .retain(|caller| caller.number != self.number);
    }
}

/// Who a server's request is for.
pub enum Picked {
    /// The client of the request in flight (the oldest one, when one session has several).
    Answerer(Answerer),
    /// No request is in flight on the server, and every open session is of one credential.
    Nobody,
    /// No request is in flight on the server, and sessions of several credentials are open:
    /// whichever client got it, it could be another credential's than the one it concerns.
    Unclaimed { credentials: usize },
    /// Requests of several sessions are in flight: which one caused this cannot be told.
    Ambiguous { sessions: usize },
    /// The request names a task no request of loom's waits for (`tasks/result`).
    NoneForTask,
}

impl Callers {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Caller>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Register a request of `session` in flight on `server` (waiting for MCP task `task`).
    pub fn register(
        self: &Arc<Self>,
        server: usize,
        session: u64,
        task: Option<String>,
        answerer: Answerer,
    ) -> CallerGuard {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().push(Caller {
            number,
            server,
            session,
            task,
            answerer,
            parked: false,
        });
        CallerGuard {
            callers: self.clone(),
            number,
        }
    }

    /// The client a request of `server` is for. A request tied to an MCP task (`related_task`)
    /// is for the request that waits for that task, and for no one else; any other is for the
    /// calls that wait for no task — of one session, the oldest that can take a question (a
    /// request whose answer cannot be `input_required` comes last).
    pub fn pick(&self, server: usize, related_task: Option<&str>) -> Picked {
        let calls = self.lock();
        if let Some(task) = related_task {
            return match calls
                .iter()
                .find(|c| c.server == server && c.task.as_deref() == Some(task))
            {
                Some(waiting) => Picked::Answerer(waiting.answerer.clone()),
                None => Picked::NoneForTask,
            };
        }
        let on_server: Vec<&Caller> = calls
            .iter()
            .filter(|c| c.server == server && c.task.is_none())
            .collect();
        // A call waiting for its client's answer has a server handler blocked on it: when any
        // call is followed, the question is one of those (a client that never answered must
        // not hold the next call's question, nor make another credential's ambiguous).
        let following: Vec<&Caller> = on_server.iter().copied().filter(|c| !c.parked).collect();
        let on_server = if following.is_empty() {
            on_server
        } else {
            following
        };
        let Some(first) = on_server.first() else {
            // A credential's own connection asks that credential's client (through the
            // connection's link), whoever else is connected.
            let owned = self
                .owners
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains_key(&server);
            let credentials = self.credentials_open();
            return if credentials > 1 && !owned {
                Picked::Unclaimed { credentials }
            } else {
                Picked::Nobody
            };
        };
        let mut sessions = vec![first.session];
        for caller in &on_server {
            if !sessions.contains(&caller.session) {
                sessions.push(caller.session);
            }
        }
        if sessions.len() > 1 {
            return Picked::Ambiguous {
                sessions: sessions.len(),
            };
        }
        let best = on_server
            .iter()
            .find(|c| !matches!(c.answerer, Answerer::Refuse { .. }))
            .unwrap_or(first);
        Picked::Answerer(best.answerer.clone())
    }

    /// The sessions a log line of `server` may reach, decided as the line arrives (on the
    /// transport's read path for a child). A server's log line names no request,
    /// so it could concern any call in flight on it: it reaches the sessions of a credential
    /// only while every call in flight on the server is of that credential, or, none being in
    /// flight, while every open session is of one credential (SPEC §5.4). Another credential's
    /// sessions never hear of a call they did not make.
    pub fn log_audience(&self, server: usize) -> Vec<u64> {
        let owner = self
            .owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&server)
            .cloned();
        if let Some(owner) = owner {
            return self
                .lock_credentials()
                .iter()
                .filter(|(_, credential)| **credential == owner)
                .map(|(session, _)| *session)
                .collect();
        }
        let calls = self.lock();
        let credentials = self.lock_credentials();
        // The credential of each call in flight on the server, or of each open session when
        // there is none.
        let concerned: Vec<Option<&String>> = match calls.iter().any(|c| c.server == server) {
            true => calls
                .iter()
                .filter(|c| c.server == server)
                .map(|c| credentials.get(&c.session))
                .collect(),
            false => credentials.values().map(Some).collect(),
        };
        let Some(Some(credential)) = concerned.first().copied() else {
            return Vec::new();
        };
        if concerned.iter().any(|other| *other != Some(credential)) {
            return Vec::new();
        }
        credentials
            .iter()
            .filter(|(_, other)| *other == credential)
            .map(|(session, _)| *session)
            .collect()
    }

    /// The connection registered under `key` is `credential`'s own (forgotten with `None`).
    pub fn set_owner(&self, key: usize, credential: Option<&str>) {
        let mut owners = self.owners.lock().unwrap_or_else(PoisonError::into_inner);
        match credential {
            Some(credential) => owners.insert(key, credential.to_owned()),
            None => owners.remove(&key),
        };
    }

    /// Session `session` is open for `credential` (set again when it learns its credential).
    pub fn session_opened(&self, session: u64, credential: &str) {
        self.lock_credentials()
            .insert(session, credential.to_string());
    }

    /// Session `session` has ended.
    pub fn session_closed(&self, session: u64) {
        self.lock_credentials().remove(&session);
    }

    /// How many distinct credentials the open sessions belong to.
    fn credentials_open(&self) -> usize {
        let credentials = self.lock_credentials();
        let mut distinct: Vec<&String> = credentials.values().collect();
        distinct.sort();
        distinct.dedup();
        distinct.len()
    }

    fn lock_credentials(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<u64, String>> {
        self.credentials
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Requests in flight (for tests: nothing may leak).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether `capabilities` let a client answer `kind` (URL-mode elicitation needs its own
/// sub-capability; form mode is what a bare `elicitation: {}` means).
pub(crate) fn declares(
    capabilities: &ClientCapabilities,
    kind: AskKind,
    params: &serde_json::Value,
) -> bool {
    match kind {
        AskKind::Sampling => capabilities.sampling.is_some(),
        AskKind::Roots => capabilities.roots.is_some(),
        AskKind::Elicitation => match &capabilities.elicitation {
            None => false,
            Some(elicitation) => match params.get("mode").and_then(serde_json::Value::as_str) {
                Some("url") => elicitation.url.is_some(),
                _ => elicitation.form.is_some() || elicitation.url.is_none(),
            },
        },
    }
}

/// The error a server gets when its client cannot answer `kind`.
pub(crate) fn not_declared(kind: AskKind, params: &serde_json::Value) -> McpError {
    let what = match (kind, params.get("mode").and_then(serde_json::Value::as_str)) {
        (AskKind::Elicitation, Some("url")) => "URL-mode elicitation".to_string(),
        _ => kind.capability().to_string(),
    };
    McpError::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("loom's client did not declare the {what} capability"),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refuse(method: &str) -> Answerer {
        Answerer::Refuse {
            method: method.into(),
        }
    }

    fn method_of(picked: Picked) -> Option<String> {
        match picked {
            Picked::Answerer(Answerer::Refuse { method }) => Some(method),
            _ => None,
        }
    }

    #[test]
    fn log_lines_reach_only_the_credential_whose_calls_are_in_flight() {
        let callers = Arc::new(Callers::default());
        let heard = |server: usize| {
            let mut sessions = callers.log_audience(server);
            sessions.sort_unstable();
            sessions
        };
        assert!(heard(0).is_empty(), "no session, nobody hears");
        callers.session_opened(1, "alice");
        callers.session_opened(2, "alice");
        // One credential open: everyone hears, calls or not.
        assert_eq!(heard(0), [1, 2]);
        callers.session_opened(3, "bob");
        // Two credentials, no call in flight: nobody can be told apart, nobody hears.
        assert!(heard(0).is_empty());
        let alice = callers.register(0, 1, None, refuse("tools/call"));
        assert_eq!(heard(0), [1, 2], "bob must not hear of alice's call");
        // Another server's lines are not alice's.
        assert!(heard(1).is_empty());
        let bob = callers.register(0, 3, None, refuse("tools/call"));
        assert!(heard(0).is_empty());
        drop(alice);
        assert_eq!(heard(0), [3]);
        drop(bob);
        callers.session_closed(3);
        assert_eq!(heard(0), [1, 2]);
    }

    #[test]
    fn a_subjects_own_connection_concerns_that_subject_only() {
        let callers = Arc::new(Callers::default());
        callers.session_opened(1, "alice");
        callers.session_opened(2, "bob");
        callers.session_opened(3, "alice");
        // Server 0 shared by both: with nobody calling, its lines reach no one and its
        // requests belong to no one.
        assert!(callers.log_audience(0).is_empty());
        assert!(matches!(
            callers.pick(0, None),
            Picked::Unclaimed { credentials: 2 }
        ));
        // Key 7: alice's own connection to server 0.
        callers.set_owner(7, Some("alice"));
        let mut heard = callers.log_audience(7);
        heard.sort();
        assert_eq!(heard, [1, 3]);
        assert!(matches!(callers.pick(7, None), Picked::Nobody));
        let _call = callers.register(7, 3, None, refuse("alice's"));
        assert_eq!(method_of(callers.pick(7, None)).as_deref(), Some("alice's"));
        callers.set_owner(7, None);
        assert!(callers.log_audience(7).iter().all(|s| *s != 2));
    }

    #[test]
    fn a_request_goes_to_the_session_whose_call_is_in_flight() {
        let callers = Arc::new(Callers::default());
        assert!(matches!(callers.pick(0, None), Picked::Nobody));
        let a = callers.register(0, 1, None, refuse("a"));
        let _b = callers.register(0, 1, None, refuse("b"));
        let _other_server = callers.register(1, 2, None, refuse("c"));
        // One session with two calls on server 0: the oldest call.
        assert_eq!(method_of(callers.pick(0, None)).as_deref(), Some("a"));
        assert_eq!(method_of(callers.pick(1, None)).as_deref(), Some("c"));
        let _c = callers.register(0, 2, None, refuse("d"));
        assert!(matches!(
            callers.pick(0, None),
            Picked::Ambiguous { sessions: 2 }
        ));
        // A request tied to a task goes to the call waiting for that task, whoever else calls.
        let task = callers.register(0, 3, Some("t1".into()), refuse("task"));
        assert_eq!(
            method_of(callers.pick(0, Some("t1"))).as_deref(),
            Some("task")
        );
        assert!(matches!(
            callers.pick(0, None),
            Picked::Ambiguous { sessions: 2 }
        ));
        // A task nobody waits for: its questions go nowhere else.
        assert!(matches!(callers.pick(0, Some("t2")), Picked::NoneForTask));
        drop(task);
        drop(a);
        assert!(matches!(
            callers.pick(0, None),
            Picked::Ambiguous { sessions: 2 }
        ));
        drop(_c);
        assert_eq!(method_of(callers.pick(0, None)).as_deref(), Some("b"));
        drop(_b);
        drop(_other_server);
        assert!(callers.is_empty());
    }

    /// A server's request that no call caused reaches a client only while every open session
    /// is of one credential: with two credentials connected it could reach the wrong one.
    #[test]
    fn a_request_no_call_caused_never_crosses_credentials() {
        let callers = Arc::new(Callers::default());
        callers.session_opened(1, "stdio");
        assert!(matches!(callers.pick(0, None), Picked::Nobody));
        callers.session_opened(2, "digest-a");
        callers.session_opened(3, "digest-a");
        // The stdio session learns nothing; sessions 2 and 3 are one credential, stdio another.
        assert!(matches!(
            callers.pick(0, None),
            Picked::Unclaimed { credentials: 2 }
        ));
        callers.session_closed(1);
        assert!(matches!(callers.pick(0, None), Picked::Nobody));
        callers.session_opened(4, "digest-b");
        assert!(matches!(
            callers.pick(0, None),
            Picked::Unclaimed { credentials: 2 }
        ));
        // A call in flight says whose it is, whatever else is connected.
        let _call = callers.register(0, 4, None, refuse("b's call"));
        assert_eq!(
            method_of(callers.pick(0, None)).as_deref(),
            Some("b's call")
        );
    }

    /// A call waiting for its client's answer (parked) does not take the server's next
    /// question while another call is followed: a client that never answers a question must
    /// not hold the next call's (of its own session or of another credential's).
    #[test]
    fn a_call_waiting_for_its_client_does_not_take_the_next_question() {
        let callers = Arc::new(Callers::default());
        let waiting = callers.register(0, 1, None, refuse("unanswered"));
        waiting.set_parked(true);
        let _next = callers.register(0, 1, None, refuse("next"));
        assert_eq!(method_of(callers.pick(0, None)).as_deref(), Some("next"));
        // Another credential's call beside a parked one: not ambiguous, it is that call's.
        drop(_next);
        let _other = callers.register(0, 2, None, refuse("other session"));
        assert_eq!(
            method_of(callers.pick(0, None)).as_deref(),
            Some("other session")
        );
        drop(_other);
        // With only parked calls in flight, the oldest of them, as before.
        assert_eq!(
            method_of(callers.pick(0, None)).as_deref(),
            Some("unanswered")
        );
        // Followed again, it takes questions again.
        waiting.set_parked(false);
        let _later = callers.register(0, 1, None, refuse("later"));
        assert_eq!(
            method_of(callers.pick(0, None)).as_deref(),
            Some("unanswered")
        );
    }

    #[test]
    fn a_call_that_can_take_a_question_comes_first() {
        let callers = Arc::new(Callers::default());
        let _poll = callers.register(0, 1, None, refuse("tasks/get"));
        let (asks, _rx) = mpsc::unbounded_channel();
        let _call = callers.register(
            0,
            1,
            None,
            Answerer::Input {
                capabilities: Box::default(),
                asks,
            },
        );
        assert!(matches!(
            callers.pick(0, None),
            Picked::Answerer(Answerer::Input { .. })
        ));
    }

    #[test]
    fn url_elicitation_needs_its_own_capability() {
        let url = serde_json::json!({"mode": "url", "url": "https://x", "message": "m"});
        let form = serde_json::json!({"message": "m", "requestedSchema": {}});
        let bare: ClientCapabilities =
            serde_json::from_value(serde_json::json!({"elicitation": {}})).expect("caps");
        assert!(declares(&bare, AskKind::Elicitation, &form));
        assert!(!declares(&bare, AskKind::Elicitation, &url));
        let both: ClientCapabilities =
            serde_json::from_value(serde_json::json!({"elicitation": {"form": {}, "url": {}}}))
                .expect("caps");
        assert!(declares(&both, AskKind::Elicitation, &url));
        let url_only: ClientCapabilities =
            serde_json::from_value(serde_json::json!({"elicitation": {"url": {}}})).expect("caps");
        assert!(!declares(&url_only, AskKind::Elicitation, &form));
        assert!(!declares(&bare, AskKind::Sampling, &form));
        assert_eq!(
            not_declared(AskKind::Elicitation, &url).message,
            "loom's client did not declare the URL-mode elicitation capability"
        );
    }
}
