//! What every client session shares: the downstream servers, their supervisors, and the loop
//! that hands their events to the sessions.
//!
//! Over stdio there is one session; over HTTP (`loom serve --http`) one per client session, each
//! with its own datasets and documents (SPEC §22). A server's notifications go to the session
//! they concern (progress to the session whose request it is, task status to the session that
//! knows the task) or to every session (list changes, log messages, resource updates); a
//! server's own requests (sampling, elicitation, roots) go to the client whose call is in flight
//! on that server (src/downstream/callers.rs); with none in flight, to the client of the session
//! that called that server last, else to the session that connected last — but only while every
//! open session is of one credential.

use std::sync::{Arc, Mutex, PoisonError, Weak};

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Gateway, SHUTDOWN_BUDGET, StartError};
use crate::config::Config;
use crate::downstream::callers::Callers;
use crate::downstream::{Downstream, DownstreamEvent, UpstreamLink};

pub struct Hub {
    pub(super) config: Arc<Config>,
    pub(super) servers: Vec<Arc<Downstream>>,
    /// The client of the session that connected last.
    pub(super) latest: UpstreamLink,
    /// Per server: the client of the session that called it last (falls back to `latest`).
    last_callers: Vec<UpstreamLink>,
    sessions: Mutex<Vec<Weak<Gateway>>>,
    shutdown: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// The query engine every session's store runs on.
    pub(super) engine: crate::store::SharedEngine,
    /// (connection key, resource URI) → how many sessions subscribed to it there.
    subscribers: Mutex<std::collections::HashMap<(usize, String), usize>>,
    /// Every request in flight on a server, so the server's own requests reach the client
    /// whose call caused them (SPEC §5.8).
    pub(super) in_flight: Arc<Callers>,
    sessions_opened: std::sync::atomic::AtomicU64,
    /// Per server, the most verbose log level loom asked it for on behalf of 2026-07-28
    /// requests (they carry a level each; servers of the `initialize` era take one for the
    /// connection).
    /// By connection key (a subject's own connections included).
    log_levels: Mutex<std::collections::HashMap<usize, u8>>,
    /// The model summary stage's endpoint (SPEC §19.9), when `llm` is configured.
    pub(super) summarizer: Option<Arc<crate::llm::Summarizer>>,
    /// Tool search's sentence model (SPEC §20.3), when `tools.searchModel` is set and loads.
    pub(super) tool_embedder: Option<Arc<super::semantic::ToolEmbedder>>,
    /// Bytes exported per credential, against `exportMaxBytes` (SPEC §15).
    export_quotas: Mutex<std::collections::HashMap<String, Arc<std::sync::atomic::AtomicU64>>>,
    /// Whether each subject of the HTTP face logs in to remote servers for itself (with
    /// `http.auth`), on connections of its own (SPEC §4.7).
    per_subject: bool,
    /// Where logins are kept (none without HOME and XDG_STATE_HOME).
    logins: Option<crate::downstream::oauth::store::TokenStore>,
    /// The subjects' own connections, by server index and credential.
    subject_servers: Mutex<std::collections::HashMap<(usize, String), SubjectServer>>,
    /// The next key a subject's connection registers its calls under (after the indexes).
    next_key: std::sync::atomic::AtomicUsize,
    /// Subjects' logins waiting for their browser to come back to loom's HTTP face.
    pub(super) redirects: crate::downstream::oauth::redirects::Redirects,
    /// loom's `…/oauth/callback` URL, once the HTTP face knows its address.
    callback_url: std::sync::RwLock<Option<String>>,
    /// The store shared with other instances (SPEC §25), when `cluster` is configured.
    pub(super) cluster: Option<Arc<crate::cluster::Cluster>>,
}

/// One subject's connection to a server it logs in to for itself.
struct SubjectServer {
    downstream: Arc<Downstream>,
    /// The client of the subject's session that called it last.
    link: UpstreamLink,
    stop: CancellationToken,
    last_used: std::time::Instant,
}

/// A subject's connection with no session of the subject left is closed after this long.
const SUBJECT_IDLE: std::time::Duration = std::time::Duration::from_secs(600);

impl Hub {
    /// Start every enabled server concurrently and wait until each has either listed its tools
    /// or failed its first start. Fails only when no server could start at all.
    pub async fn start(config: Config) -> Result<Arc<Hub>, StartError> {
        Self::start_with(config, false).await
    }

    /// [`Self::start`]; with `per_subject`, remote servers that ask for a login are logged in
    /// to by each subject of the HTTP face for itself (SPEC §4.7), never with the machine's
    /// login.
    pub async fn start_with(config: Config, per_subject: bool) -> Result<Arc<Hub>, StartError> {
        let config = Arc::new(config);
        // Where `loom auth login` keeps the logins of remote servers (SPEC §4.7); without HOME
        // and XDG_STATE_HOME there are none, and a server that asks for one says so.
        let logins = crate::downstream::oauth::store::default_root(|name| std::env::var(name).ok())
            .map(crate::downstream::oauth::store::TokenStore::new);
        // Sharing what clients were told about, or not starting: an instance that cannot reach
        // the store (or holds another secret) would answer refs it cannot see.
        let cluster = match &config.cluster {
            Some(cluster) => Some(
                crate::cluster::Cluster::open(cluster)
                    .await
                    .map_err(StartError::Cluster)?,
            ),
            None => None,
        };
        // The subjects' logins too: a login made on one instance serves every instance.
        let logins = match (&cluster, logins) {
            (Some(cluster), Some(logins)) if per_subject => Some(logins.sharing(Arc::new(
                crate::cluster::handoff::SharedLoginStore(cluster.clone()),
            ))),
            (_, logins) => logins,
        };
        let servers: Vec<Arc<Downstream>> = config
            .servers
            .iter()
            .filter(|s| !s.disabled)
            .enumerate()
            .map(|(index, server)| {
                Arc::new(Downstream::with_logins(
                    index,
                    server.clone(),
                    logins.as_ref(),
                    per_subject,
                ))
            })
            .collect();
        if servers.is_empty() {
            return Err(StartError::NoServers);
        }
        let engine = crate::store::SharedEngine::start(&super::store_settings(&config))
            .map_err(StartError::Engine)?;
        // Never worse than without it: an endpoint loom cannot set up leaves the stage off.
        let summarizer = config.llm.clone().and_then(|llm| {
            crate::llm::Summarizer::new(llm)
                .map_err(|error| {
                    tracing::warn!("the model summary stage is off: {error}");
                })
                .ok()
                .map(Arc::new)
        });
        // Never worse than without it: a model that does not load (or panics loading) leaves
        // search to words. Reading up to 1 GiB and a test sentence run off the async threads.
        let tool_embedder = match config.tools.search_model.clone() {
            Some(dir) => tokio::task::spawn_blocking(move || {
                std::panic::catch_unwind(|| super::semantic::SentenceModel::load(&dir))
                    .unwrap_or_else(|_| {
                        Err(format!(
                            "{}: the model's code panicked loading it",
                            dir.display()
                        ))
                    })
            })
            .await
            .unwrap_or_else(|error| Err(format!("the model did not load: {error}")))
            .and_then(super::semantic::ToolEmbedder::start)
            .map_err(|error| {
                tracing::warn!("tools.searchModel: {error}; tool search ranks by words alone");
            })
            .ok(),
            None => None,
        };
        let latest = UpstreamLink::default();
        let server_count = servers.len();
        let last_callers = servers
            .iter()
            .map(|_| UpstreamLink::with_fallback(&latest))
            .collect();
        let hub = Arc::new(Hub {
            config: config.clone(),
            servers,
            latest,
            last_callers,
            sessions: Mutex::new(Vec::new()),
            shutdown: CancellationToken::new(),
            tasks: Mutex::new(Vec::new()),
            engine,
            subscribers: Mutex::new(std::collections::HashMap::new()),
            in_flight: Arc::default(),
            sessions_opened: std::sync::atomic::AtomicU64::new(0),
            log_levels: Mutex::default(),
            summarizer,
            tool_embedder,
            export_quotas: Mutex::default(),
            per_subject,
            logins,
            subject_servers: Mutex::default(),
            next_key: std::sync::atomic::AtomicUsize::new(server_count),
            redirects: Default::default(),
            callback_url: std::sync::RwLock::new(None),
            cluster,
        });
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let mut firsts = Vec::new();
        let mut tasks = Vec::new();
        for (server, link) in hub.servers.iter().zip(&hub.last_callers) {
            let (first_tx, first_rx) = oneshot::channel();
            firsts.push((server.name().to_string(), first_rx));
            tasks.push(tokio::spawn(server.clone().supervise(
                config.restart.clone(),
                link.clone(),
                hub.in_flight.clone(),
                events_tx.clone(),
                hub.shutdown.clone(),
                first_tx,
            )));
        }
        tasks.push(tokio::spawn(hub.clone().event_loop(events_rx)));
        if per_subject {
            tasks.push(tokio::spawn(hub.clone().sweep_loop()));
        }
        hub.lock_tasks().extend(tasks);

        let mut failures = Vec::new();
        for (name, first) in firsts {
            match first.await {
                Ok(Ok(())) => {}
                Ok(Err(reason)) => failures.push((name, reason)),
                Err(_) => failures.push((name, "supervisor ended before starting".into())),
            }
        }
        if failures.len() == hub.servers.len() {
            hub.shutdown().await;
            return Err(StartError::AllFailed(failures));
        }
        for (name, reason) in &failures {
            tracing::warn!(server = %name, "did not start (retrying in the background): {reason}");
        }
        let source: Arc<dyn crate::telemetry::metrics::Source> = hub.clone();
        crate::telemetry::metrics::watch(Arc::downgrade(&source));
        Ok(hub)
    }

    /// Each server's name and the kind of its state (`starting`, `healthy`, `restarting`,
    /// `failed`, `needs_login`, `stopped`): what a balancer's health check is told (SPEC §22).
    pub(crate) fn server_states(&self) -> Vec<(String, &'static str)> {
        use crate::downstream::ServerState;
        self.servers
            .iter()
            .map(|server| {
                let state = match server.state() {
                    ServerState::Starting => "starting",
                    ServerState::Healthy => "healthy",
                    ServerState::Restarting { .. } => "restarting",
                    ServerState::Failed { .. } => "failed",
                    ServerState::NeedsLogin { .. } => "needs_login",
                    ServerState::Stopped => "stopped",
                };
                (server.name().to_string(), state)
            })
            .collect()
    }

    /// The cluster store this process shares with other instances (SPEC §25), if configured.
    pub fn cluster(&self) -> Option<&Arc<crate::cluster::Cluster>> {
        self.cluster.as_ref()
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The HTTP face's redirect for subjects' logins (`http://ADDR/oauth/callback`).
    pub fn set_callback_url(&self, url: String) {
        if let Ok(mut slot) = self.callback_url.write() {
            *slot = Some(url);
        }
    }

    pub(super) fn callback_url(&self) -> Option<String> {
        self.callback_url.read().ok().and_then(|url| url.clone())
    }

    /// The browser came back to loom's HTTP face from a subject's login: handed to the login
    /// that sent its `state`.
    pub(crate) fn login_redirected(
        &self,
        query: &str,
    ) -> Result<(), crate::downstream::oauth::redirects::Undelivered> {
        self.redirects.deliver(query)
    }

    /// Server `index` as the sessions of `credential` reach it: the shared connection, or —
    /// when each subject logs in for itself and the server wants a login — the subject's own.
    pub(super) fn server_for(
        self: &Arc<Self>,
        index: usize,
        credential: Option<&str>,
    ) -> Option<Arc<Downstream>> {
        let shared = self.servers.get(index)?;
        let own = self.per_subject
            && shared
                .login
                .as_ref()
                .is_some_and(|login| login.holder() == crate::downstream::oauth::Holder::Nobody)
            && matches!(
                shared.state(),
                crate::downstream::ServerState::NeedsLogin { .. }
            );
        match (own, credential) {
            (true, Some(credential)) => self.subject_server(index, credential),
            _ => Some(shared.clone()),
        }
    }

    /// The connection registered under `key`: a shared one, or a subject's own.
    pub(super) fn connection(&self, key: usize) -> Option<Arc<Downstream>> {
        if let Some(shared) = self.servers.get(key) {
            return Some(shared.clone());
        }
        self.lock_subjects()
            .values()
            .find(|own| own.downstream.key == key)
            .map(|own| own.downstream.clone())
    }

    fn lock_subjects(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<(usize, String), SubjectServer>> {
        self.subject_servers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// `credential`'s own connection to server `index`, started on first use; connections no
    /// session has used for [`SUBJECT_IDLE`] are closed.
    fn subject_server(self: &Arc<Self>, index: usize, credential: &str) -> Option<Arc<Downstream>> {
        let store = self.logins.as_ref()?;
        let config = self.servers.get(index)?.config.clone();
        let now = std::time::Instant::now();
        let mut subjects = self.lock_subjects();
        if let Some(own) = subjects.get_mut(&(index, credential.to_owned())) {
            own.last_used = now;
            return Some(own.downstream.clone());
        }
        self.sweep_subjects(&mut subjects);
        let key = self
            .next_key
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The stdio session of `loom serve --http --stdio` is the person at this machine.
        let subject = (credential != super::LOCAL_CREDENTIAL).then_some(credential);
        let downstream = Arc::new(Downstream::for_subject(index, key, config, store, subject));
        self.in_flight.set_owner(key, Some(credential));
        let link = UpstreamLink::default();
        let stop = self.shutdown.child_token();
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let (first, _) = oneshot::channel();
        let supervisor = tokio::spawn(downstream.clone().supervise(
            self.config.restart.clone(),
            link.clone(),
            self.in_flight.clone(),
            events_tx,
            stop.clone(),
            first,
        ));
        let events = tokio::spawn(self.clone().subject_events(
            downstream.clone(),
            credential.to_owned(),
            events_rx,
            stop.clone(),
        ));
        {
            // Subjects' connections come and go: the handles of those that ended go too.
            let mut tasks = self.lock_tasks();
            tasks.retain(|task| !task.is_finished());
            tasks.extend([supervisor, events]);
        }
        subjects.insert(
            (index, credential.to_owned()),
            SubjectServer {
                downstream: downstream.clone(),
                link,
                stop,
                last_used: now,
            },
        );
        tracing::info!(server = %downstream.name(), "a subject's own connection started");
        Some(downstream)
    }

    /// Closes the subjects' connections that no open session is of and none has used for
    /// [`SUBJECT_IDLE`].
    fn sweep_subjects(
        &self,
        subjects: &mut std::collections::HashMap<(usize, String), SubjectServer>,
    ) {
        if subjects.is_empty() {
            return;
        }
        let open: std::collections::HashSet<String> = self
            .sessions()
            .iter()
            .filter_map(|session| session.credential())
            .collect();
        let now = std::time::Instant::now();
        subjects.retain(|(_, holder), own| {
            // Idle time counts from the subject's last open session, not its last request.
            if open.contains(holder) {
                own.last_used = now;
            }
            let keep = now.duration_since(own.last_used) < SUBJECT_IDLE;
            if !keep {
                tracing::info!(server = %own.downstream.name(), "closing an idle subject's own connection");
                own.stop.cancel();
                self.in_flight.set_owner(own.downstream.key, None);
                self.log_levels
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&own.downstream.key);
                self.subscribers
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .retain(|(key, _), _| *key != own.downstream.key);
            }
            keep
        });
    }

    /// Sweeps the subjects' connections every minute, until shutdown.
    async fn sweep_loop(self: Arc<Self>) {
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                () = tokio::time::sleep(std::time::Duration::from_secs(60)) => {}
            }
            let mut subjects = self.lock_subjects();
            self.sweep_subjects(&mut subjects);
        }
    }

    /// What a subject's own connection sends goes to that subject's sessions only.
    async fn subject_events(
        self: Arc<Self>,
        downstream: Arc<Downstream>,
        credential: String,
        mut events: mpsc::UnboundedReceiver<DownstreamEvent>,
        stop: CancellationToken,
    ) {
        loop {
            let event = tokio::select! {
                _ = stop.cancelled() => return,
                event = events.recv() => match event {
                    Some(event) => event,
                    None => return,
                },
            };
            let sessions: Vec<Arc<Gateway>> = self
                .sessions()
                .into_iter()
                .filter(|session| session.credential().as_deref() == Some(credential.as_str()))
                .collect();
            if let DownstreamEvent::ListChanged { server } = &event {
                if let Err(reason) = downstream.relist().await {
                    tracing::warn!(server = %downstream.name(), "re-listing failed: {reason}");
                }
                for session in &sessions {
                    session
                        .handle_event(&DownstreamEvent::CatalogChanged { server: *server })
                        .await;
                }
                continue;
            }
            for session in &sessions {
                session.handle_event(&event).await;
            }
            if let DownstreamEvent::Progress { params, .. } = &event
                && let Ok(live) = downstream.live()
            {
                live.progress.done(&params.progress_token);
            }
        }
    }

    pub fn servers(&self) -> &[Arc<Downstream>] {
        &self.servers
    }

    /// The export counter the sessions of `credential` share.
    pub(super) fn export_quota(&self, credential: &str) -> Arc<std::sync::atomic::AtomicU64> {
        self.export_quotas
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(credential.to_string())
            .or_default()
            .clone()
    }

    /// A number for a new session, never given out twice.
    pub(super) fn next_session_number(&self) -> u64 {
        self.sessions_opened
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// A 2026-07-28 request wants the log messages of connection `server` at `level`: a server that
    /// logs is asked for that level when it was set to a less verbose one (or none) before.
    #[allow(deprecated)] // logging is SEP-2577-deprecated; older servers use it
    pub(super) fn wants_log_level(&self, server: &Downstream, level: &rmcp::model::LoggingLevel) {
        // 2026-07-28 servers take the level with each request (SPEC §4.6).
        if server.live().is_ok_and(|live| live.modern) {
            return;
        }
        let logs = server
            .catalog()
            .capabilities
            .as_ref()
            .is_some_and(|c| c.logging.is_some());
        if !logs {
            return;
        }
        let rank = super::logging::log_rank(level);
        {
            let mut levels = self
                .log_levels
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if levels.get(&server.key).is_some_and(|set| *set <= rank) {
                return;
            }
            levels.insert(server.key, rank);
        }
        if let Ok(live) = server.live() {
            let params = rmcp::model::SetLevelRequestParams::new(*level);
            tokio::spawn(async move {
                #[allow(deprecated)] // logging is SEP-2577-deprecated; older servers use it
                let _ = live.peer.set_level(params).await;
            });
        }
    }

    /// A handshake client set the level of the connection `key` with `logging/setLevel`: a
    /// 2026-07-28 request that wants more is sent its own again.
    #[allow(deprecated)] // logging is SEP-2577-deprecated; older servers use it
    pub(super) fn log_level_set(&self, key: usize, level: &rmcp::model::LoggingLevel) {
        self.log_levels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, super::logging::log_rank(level));
    }

    /// Requests in flight on the servers (for tests: nothing may leak).
    pub fn calls_in_flight(&self) -> usize {
        self.in_flight.len()
    }

    pub(super) fn register(&self, session: &Arc<Gateway>) {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.retain(|s| s.strong_count() > 0);
        sessions.push(Arc::downgrade(session));
    }

    /// Sessions still alive.
    pub fn sessions(&self) -> Vec<Arc<Gateway>> {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.retain(|s| s.strong_count() > 0);
        sessions.iter().filter_map(Weak::upgrade).collect()
    }

    /// A session is about to send a request to server `index`: that server's own requests go
    /// to this session's client from now on.
    pub(super) fn calling(&self, index: usize, key: usize, upstream: &UpstreamLink) {
        let link = if key == index {
            self.last_callers.get(index).cloned()
        } else {
            self.lock_subjects()
                .values()
                .find(|own| own.downstream.key == key)
                .map(|own| own.link.clone())
        };
        if let (Some(link), Some(peer)) = (link, upstream.get()) {
            link.set(peer);
        }
    }

    /// One more session subscribed to `uri` on connection `key`; true for the first.
    pub(super) fn subscribed(&self, key: usize, uri: &str) -> bool {
        let mut counts = self
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let count = counts.entry((key, uri.to_string())).or_default();
        *count += 1;
        *count == 1
    }

    /// One session fewer subscribed to `uri` on connection `key`; true when none is left.
    pub(super) fn unsubscribed(&self, key: usize, uri: &str) -> bool {
        let mut counts = self
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let entry = (key, uri.to_string());
        match counts.get_mut(&entry) {
            Some(count) if *count > 1 => {
                *count -= 1;
                false
            }
            Some(_) => {
                counts.remove(&entry);
                true
            }
            None => false,
        }
    }

    fn lock_tasks(&self) -> std::sync::MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stop every child (stdin closed, grace, SIGTERM, grace, SIGKILL) within the budget.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let tasks: Vec<_> = std::mem::take(&mut *self.lock_tasks());
        if tokio::time::timeout(SHUTDOWN_BUDGET, futures::future::join_all(tasks))
            .await
            .is_err()
        {
            tracing::warn!("shutdown budget ran out with servers still stopping");
        }
        self.engine.remove_spill();
    }

    async fn event_loop(self: Arc<Self>, mut events: mpsc::UnboundedReceiver<DownstreamEvent>) {
        loop {
            let event = tokio::select! {
                _ = self.shutdown.cancelled() => return,
                event = events.recv() => match event {
                    Some(event) => event,
                    None => return,
                },
            };
            match &event {
                DownstreamEvent::ListChanged { server } => {
                    // Re-listed once for everybody, then every session rebuilds its catalog.
                    let hub = self.clone();
                    let server = *server;
                    tokio::spawn(async move {
                        let Some(downstream) = hub.servers.get(server) else {
                            return;
                        };
                        if let Err(reason) = downstream.relist().await {
                            tracing::warn!(server = %downstream.name(), "re-listing failed: {reason}");
                        }
                        for session in hub.sessions() {
                            session
                                .handle_event(&DownstreamEvent::CatalogChanged { server })
                                .await;
                        }
                    });
                    continue;
                }
                _ => {
                    for session in self.sessions() {
                        session.handle_event(&event).await;
                    }
                }
            }
            if let DownstreamEvent::Progress { server, params } = &event
                && let Some(Ok(live)) = self.servers.get(*server).map(|s| s.live())
            {
                live.progress.done(&params.progress_token);
            }
        }
    }
}
