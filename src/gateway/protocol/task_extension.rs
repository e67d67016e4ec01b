//! MCP tasks for clients on protocol 2026-07-28, which moved tasks into the extension
//! `io.modelcontextprotocol/tasks`, over servers that speak the 2025-11-25 shape (SPEC §5.10).
//!
//! In the extension the server decides: a client that declares the extension on a `tools/call`
//! may get `resultType: "task"` (a flat task) instead of a result, then polls `tasks/get`,
//! which carries the task's `result` (or `error`) once it is done and its `inputRequests`
//! while it needs input, answered with `tasks/update`; `tasks/cancel` asks it to stop. There
//! is no `tasks/result` and no `tasks/list`.
//!
//! loom creates the task on the server with 2025-11-25's `params.task`, and at once asks the
//! server for its result (`tasks/result`) on a request of its own that stays open: the
//! server's questions for the task (its requests carrying the task's `related-task`) arrive on
//! it and are kept for `tasks/get`, and its answer is the task's result, intercepted like any
//! tool result when `tasks/get` first hands it out. A tool that only runs as a task, called by
//! a client that cannot take a task (any client of an older version, or a 2026-07-28 client
//! that does not declare the extension), is run as a task by loom and answered as a plain
//! call.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{ClientRequest, CustomRequest, CustomResult, ErrorCode, ServerResult};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::input::{Call, Reply};
use crate::downstream::callers::Ask;
use crate::gateway::Gateway;
use crate::gateway::catalog::Route;
use crate::gateway::forward::{ForwardError, Forwarded, Launch, Running, Waited, input_answerer};
use crate::intercept::Origin;
use crate::result::Decision;

/// The extension's name, in `capabilities.extensions`.
pub(crate) const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Tasks a session keeps (the oldest are forgotten beyond it).
const MAX_TASKS: usize = 10_000;

/// How long loom keeps a task (and its result) whose server gave it no `ttl`: a client that
/// never comes back must not hold a result for the life of its scope.
const UNTIMED_TASK_KEEP: Duration = Duration::from_secs(3600);

/// How long `tasks/get` of a task the server says has ended waits for its result to arrive.
const RESULT_GRACE: Duration = Duration::from_secs(5);

/// Whether this request's client declared the tasks extension.
pub(crate) fn declares_tasks(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.supports_tasks())
}

/// One task created for a 2026-07-28 client.
pub(in crate::gateway) struct Bridged {
    server: usize,
    origin: Origin,
    asks: Mutex<TaskAsks>,
    /// The answer of the `tasks/result` loom keeps open, once it came.
    outcome: Mutex<Option<Result<Forwarded, ForwardError>>>,
    arrived: tokio::sync::Notify,
    /// The result as `tasks/get` hands it out (decided once: an envelope is made once), or the
    /// error; held across the deciding, so concurrent `tasks/get`s wait for the one deciding.
    decided: tokio::sync::Mutex<Option<Result<Box<RawValue>, McpError>>>,
    /// Ends the open `tasks/result` (the session ended).
    stop: CancellationToken,
    /// When loom forgets the task: its `ttl` after creation, as the server said (the server
    /// may forget it then too), or [`UNTIMED_TASK_KEEP`] when it gave none.
    expires: tokio::time::Instant,
}

/// When a task created now with the server's task object `task` is forgotten.
fn expiry_of(task: &Map<String, Value>) -> tokio::time::Instant {
    let keep = task
        .get("ttl")
        .and_then(Value::as_u64)
        .map(Duration::from_millis)
        .unwrap_or(UNTIMED_TASK_KEEP);
    let now = tokio::time::Instant::now();
    now.checked_add(keep).unwrap_or(now + UNTIMED_TASK_KEEP)
}

/// Questions one task may ask in its life. Each key is remembered (to tell an answer given twice
/// from one to a question never asked), so a server that asks without end must not make that
/// memory grow without end; past this its questions are answered with an error.
const MAX_TASK_QUESTIONS: usize = 1_000;

/// A task's questions.
#[derive(Default)]
struct TaskAsks {
    /// Not answered yet, by their key.
    pending: Vec<(String, Ask)>,
    /// Every key ever given out: an answer to one already answered is ignored, to one never
    /// given out refused.
    given: std::collections::HashSet<String>,
}

impl TaskAsks {
    /// Keep `ask` under `key` for the client, or refuse it when the task has asked
    /// [`MAX_TASK_QUESTIONS`] already.
    fn record(&mut self, key: String, ask: Ask) {
        if self.given.len() >= MAX_TASK_QUESTIONS {
            let _ = ask.reply.send(Err(McpError::internal_error(
                format!(
                    "loom: this task asked {MAX_TASK_QUESTIONS} questions already; loom passes \
                     no more of them to its client"
                ),
                None,
            )));
            return;
        }
        self.given.insert(key.clone());
        self.pending.push((key, ask));
    }
}

/// The tasks of one session, by id, and their ids oldest first.
#[derive(Default)]
pub(in crate::gateway) struct BridgedTasks {
    inner: Mutex<TaskTable>,
}

#[derive(Default)]
struct TaskTable {
    tasks: HashMap<String, Arc<Bridged>>,
    order: VecDeque<String>,
}

impl BridgedTasks {
    fn insert(&self, id: String, task: Arc<Bridged>) {
        let mut guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let TaskTable { tasks, order } = &mut *guard;
        let now = tokio::time::Instant::now();
        tasks.retain(|_, task| {
            let keep = task.expires > now;
            if !keep {
                task.stop.cancel();
            }
            keep
        });
        order.retain(|id| tasks.contains_key(id));
        if tasks.insert(id.clone(), task).is_none() {
            order.push_back(id);
        }
        while order.len() > MAX_TASKS {
            if let Some(old) = order.pop_front()
                && let Some(task) = tasks.remove(&old)
            {
                task.stop.cancel();
            }
        }
    }

    /// The task `id`, unless it has expired (then it is forgotten now).
    pub(super) fn get(&self, id: &str) -> Option<Arc<Bridged>> {
        let mut guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let task = guard.tasks.get(id).cloned()?;
        if task.expires > tokio::time::Instant::now() {
            return Some(task);
        }
        task.stop.cancel();
        guard.tasks.remove(id);
        guard.order.retain(|other| other != id);
        None
    }

    /// Tasks held now (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .tasks
            .len()
    }

    /// The session ends: every open `tasks/result` is closed.
    pub(crate) fn clear(&self) {
        let mut guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        for (_, task) in guard.tasks.drain() {
            task.stop.cancel();
        }
        guard.order.clear();
    }
}

fn invalid(message: String) -> McpError {
    McpError::invalid_params(message, None)
}

fn unknown_task(id: &str) -> McpError {
    invalid(format!(
        "unknown task `{id}`: no task of that id was created through loom for this client"
    ))
}

/// The `taskId` of a 2025-11-25 `CreateTaskResult` (`{"task": {...}}`), and the task object.
fn created_task(raw: &str) -> Option<(String, Map<String, Value>)> {
    let value: Value = serde_json::from_str(raw).ok()?;
    let task = value.get("task")?.as_object()?.clone();
    let id = task.get("taskId")?.as_str()?.to_string();
    Some((id, task))
}

/// A 2025-11-25 task object in the extension's shape: `ttl` and `pollInterval` are
/// `ttlMs` and `pollIntervalMs` (both were milliseconds already).
fn as_extension_task(mut task: Map<String, Value>) -> Map<String, Value> {
    if let Some(ttl) = task.remove("ttl") {
        task.insert("ttlMs".into(), ttl);
    }
    if let Some(poll) = task.remove("pollInterval") {
        task.insert("pollIntervalMs".into(), poll);
    }
    task.remove("_meta");
    task
}

impl Gateway {
    /// The task-augmented `tools/call` a 2025-11-25 server gets for `route`.
    fn task_call(route: &Route, arguments: Option<&Map<String, Value>>) -> ClientRequest {
        let mut params = Map::new();
        params.insert("name".into(), Value::String(route.name.clone()));
        if let Some(arguments) = arguments {
            params.insert("arguments".into(), Value::Object(arguments.clone()));
        }
        params.insert("task".into(), json!({}));
        ClientRequest::CustomRequest(CustomRequest::new(
            "tools/call",
            Some(Value::Object(params)),
        ))
    }

    fn tasks_result_request(id: &str) -> ClientRequest {
        ClientRequest::CustomRequest(CustomRequest::new(
            "tasks/result",
            Some(json!({"taskId": id})),
        ))
    }

    /// A tool that only runs as a task, for a client that cannot take one: loom creates the
    /// task and waits for its result (a 2026-07-28 client's questions during it become
    /// `input_required` as for any call). `callTimeoutMs` bounds the whole; when it passes,
    /// the task is cancelled on the server.
    pub(in crate::gateway) async fn run_task(
        &self,
        route: &Route,
        arguments: Option<&Map<String, Value>>,
        context: &RequestContext<RoleServer>,
        call: Call,
    ) -> Result<Reply, ForwardError> {
        let created = self
            .forward(route.server, Self::task_call(route, arguments), context)
            .await?;
        let Forwarded::Raw(raw) = created else {
            return Ok(Reply::Done(created));
        };
        let Some((id, _)) = created_task(raw.get()) else {
            // The server answered at once instead (its choice).
            return Ok(Reply::Done(Forwarded::Raw(raw)));
        };
        let origin = self.origin_of(route, arguments);
        self.protocol
            .task_routes
            .record(&id, route.server, Some(origin));
        let request = Self::tasks_result_request(&id);
        // Abandoned (timed out, cancelled, given up), the task is cancelled on its server.
        self.call_for_task(route.server, request, context, call, id)
            .await
    }

    /// A `tools/call` of a task tool from a 2026-07-28 client that declared the extension:
    /// the task is created on the server and the client gets it as the extension's
    /// `CreateTaskResult` (`resultType: "task"`).
    pub(in crate::gateway) async fn create_extension_task(
        &self,
        route: &Route,
        arguments: Option<&Map<String, Value>>,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ForwardError> {
        let created = self
            .forward(route.server, Self::task_call(route, arguments), context)
            .await?;
        let origin = self.origin_of(route, arguments);
        let Forwarded::Raw(raw) = created else {
            return Ok(self.pass_on(created, context, false));
        };
        let Some((id, task)) = created_task(raw.get()) else {
            return Ok(self.intercept(raw, origin, context).await);
        };
        self.protocol
            .task_routes
            .record(&id, route.server, Some(origin.clone()));
        let bridged = Bridged::new(route.server, origin, expiry_of(&task));
        // The task's result, and the server's questions for it, come on this request.
        let (answerer, asks) = input_answerer(context);
        let launch = Launch {
            meta: Default::default(),
            answerer,
            asks: Some(asks),
            task: Some(id.clone()),
            timeout: None,
            client: context.client_capabilities(),
            log_level: None,
        };
        match self.launch(route.server, Self::tasks_result_request(&id), launch) {
            Ok(running) => {
                tokio::spawn(follow_task(bridged.clone(), running, self.suspended_keys()));
            }
            Err(error) => {
                *lock(&bridged.outcome) = Some(Err(error));
            }
        }
        // In a cluster, the store says which instance holds the task before its id is given
        // out: another instance forwards the client's tasks/* requests here (SPEC §25).
        if let Some(member) = self.cluster.get() {
            member.record_task(&id).await;
        }
        self.protocol.bridged.insert(id, bridged);
        let mut flat = as_extension_task(task);
        flat.insert("resultType".into(), Value::String("task".into()));
        Ok(ServerResult::CustomResult(CustomResult(Value::Object(
            flat,
        ))))
    }

    /// `tasks/get`, `tasks/update` and `tasks/cancel` in the extension's shape.
    pub(in crate::gateway) async fn extension_task_request(
        &self,
        method: &str,
        params: &Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, McpError> {
        if matches!(method, "tasks/result" | "tasks/list") {
            return Err(McpError::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!(
                    "`{method}` does not exist in the tasks extension of protocol 2026-07-28 \
                     (`tasks/get` carries a task's result)"
                ),
                None,
            ));
        }
        if !declares_tasks(context) {
            return Err(McpError::new(
                ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
                format!("`{method}` needs the client to declare the `{TASKS_EXTENSION}` extension"),
                Some(json!({"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})),
            ));
        }
        let Some(id) = params.get("taskId").and_then(Value::as_str) else {
            return Err(invalid(format!(
                "malformed `{method}` request: `taskId` (a string) is required"
            )));
        };
        let task = self
            .protocol
            .bridged
            .get(id)
            .ok_or_else(|| unknown_task(id))?;
        match method {
            "tasks/update" => {
                let responses = params.get("inputResponses").and_then(Value::as_object);
                task.update(id, responses)?;
                Ok(complete())
            }
            "tasks/cancel" => {
                let request = ClientRequest::CustomRequest(CustomRequest::new(
                    "tasks/cancel",
                    Some(json!({"taskId": id})),
                ));
                let server = self.hub.servers[task.server].name().to_string();
                self.forward(task.server, request, context)
                    .await
                    .map_err(|e| e.into_rpc_error(&server, &format!("`tasks/cancel` of `{id}`")))?;
                Ok(complete())
            }
            _ => self.get_extension_task(id, &task, context).await,
        }
    }

    async fn get_extension_task(
        &self,
        id: &str,
        task: &Arc<Bridged>,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, McpError> {
        let server = self.hub.servers[task.server].name().to_string();
        let request = ClientRequest::CustomRequest(CustomRequest::new(
            "tasks/get",
            Some(json!({"taskId": id})),
        ));
        let answer = self
            .forward(task.server, request, context)
            .await
            .map_err(|e| e.into_rpc_error(&server, &format!("`tasks/get` of `{id}`")))?;
        let status: Map<String, Value> = match answer {
            Forwarded::Raw(raw) => serde_json::from_str(raw.get()).ok(),
            Forwarded::Typed(typed) => serde_json::to_value(*typed)
                .ok()
                .and_then(|v| v.as_object().cloned()),
        }
        .ok_or_else(|| {
            McpError::internal_error(
                format!(
                    "loom: server `{server}` answered `tasks/get` with something that is not a task"
                ),
                None,
            )
        })?;
        let mut out = as_extension_task(status);
        out.insert("resultType".into(), Value::String("complete".into()));
        let state = out
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        match state.as_str() {
            "input_required" => {
                let asks = lock(&task.asks);
                if !asks.pending.is_empty() {
                    let mut requests = Map::new();
                    for (key, ask) in &asks.pending {
                        requests.insert(key.clone(), super::input::input_request(ask));
                    }
                    out.insert("inputRequests".into(), Value::Object(requests));
                }
            }
            "completed" | "failed" => {
                if let Some(result) = self.task_result(task).await {
                    return match result {
                        Ok(raw) => Ok(self.pass_on(
                            Forwarded::Raw(with_member(&out, "result", &raw)?),
                            context,
                            false,
                        )),
                        Err(error) => {
                            out.insert(
                                "error".into(),
                                json!({"code": error.code.0, "message": error.message, "data": error.data}),
                            );
                            Ok(ServerResult::CustomResult(CustomResult(Value::Object(out))))
                        }
                    };
                }
            }
            _ => {}
        }
        Ok(ServerResult::CustomResult(CustomResult(Value::Object(out))))
    }

    /// The task's result as `tasks/get` carries it, decided (passed through or made an
    /// envelope) the first time; `None` while it has not come.
    async fn task_result(&self, task: &Arc<Bridged>) -> Option<Result<Box<RawValue>, McpError>> {
        let mut decided = task.decided.lock().await;
        if let Some(known) = decided.as_ref() {
            return Some(known.clone());
        }
        let arrived = task.arrived.notified();
        tokio::pin!(arrived);
        arrived.as_mut().enable();
        if lock(&task.outcome).is_none() {
            let _ = tokio::time::timeout(RESULT_GRACE, arrived).await;
        }
        let outcome = lock(&task.outcome).take()?;
        let server = self.hub.servers[task.server].name().to_string();
        let known = match outcome {
            Ok(forwarded) => {
                let raw = match forwarded {
                    Forwarded::Raw(raw) => Some(raw),
                    Forwarded::Typed(typed) => serde_json::value::to_raw_value(&*typed).ok(),
                };
                match raw {
                    Some(raw) => match self.decide(raw, task.origin.clone()).await {
                        Decision::PassThrough(raw, _keep) => Ok(raw),
                        Decision::Built(result) => serde_json::value::to_raw_value(&*result)
                            .map_err(|e| McpError::internal_error(format!("tasks/get: {e}"), None)),
                    },
                    None => Err(McpError::internal_error(
                        "tasks/get: the task's result could not be encoded",
                        None,
                    )),
                }
            }
            Err(ForwardError::Rpc(error)) => Err(error),
            Err(other) => Err(McpError::internal_error(
                other.describe(
                    &server,
                    &format!("the result of task `{}`", task.origin.tool),
                ),
                None,
            )),
        };
        *decided = Some(known.clone());
        Some(known)
    }

    fn suspended_keys(&self) -> Arc<super::input::Keys> {
        self.protocol.suspended.keys()
    }
}

impl Bridged {
    fn new(server: usize, origin: Origin, expires: tokio::time::Instant) -> Arc<Self> {
        Arc::new(Self {
            server,
            origin,
            asks: Mutex::new(TaskAsks::default()),
            outcome: Mutex::new(None),
            arrived: tokio::sync::Notify::new(),
            decided: tokio::sync::Mutex::new(None),
            stop: CancellationToken::new(),
            expires,
        })
    }

    /// `tasks/update`: answers go to the server's waiting requests. A key never given out is
    /// refused; one already answered is ignored (the extension lets a client send an answer
    /// twice).
    fn update(&self, id: &str, responses: Option<&Map<String, Value>>) -> Result<(), McpError> {
        let Some(responses) = responses else {
            return Err(invalid(
                "malformed `tasks/update` request: `inputResponses` (an object) is required".into(),
            ));
        };
        let mut asks = lock(&self.asks);
        let unknown: Vec<&String> = responses
            .keys()
            .filter(|key| !asks.given.contains(*key))
            .collect();
        if !unknown.is_empty() {
            return Err(invalid(format!(
                "`inputResponses` of task `{id}` answers {} that the task never asked",
                unknown
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        for (key, ask) in &asks.pending {
            if let Some(answer) = responses.get(key) {
                super::input::check_answer(key, ask, answer)?;
            }
        }
        let pending = std::mem::take(&mut asks.pending);
        for (key, ask) in pending {
            match responses.get(&key) {
                Some(answer) => {
                    let _ = ask.reply.send(Ok(answer.clone()));
                }
                None => asks.pending.push((key, ask)),
            }
        }
        Ok(())
    }
}

/// Keep the task's `tasks/result` open: questions for the task are kept for `tasks/get`, and
/// its answer is the task's result.
async fn follow_task(task: Arc<Bridged>, mut running: Running, keys: Arc<super::input::Keys>) {
    loop {
        match running.wait(&task.stop).await {
            Waited::Asked(asked) => {
                let mut asks = lock(&task.asks);
                for ask in asked {
                    let key = keys.next(ask.kind);
                    asks.record(key, ask);
                }
            }
            Waited::Done(outcome) => {
                *lock(&task.outcome) = Some(outcome);
                task.arrived.notify_waiters();
                return;
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `{"resultType": "complete"}`: the extension's acknowledgement.
fn complete() -> ServerResult {
    ServerResult::CustomResult(CustomResult(json!({"resultType": "complete"})))
}

/// `object` with `name` set to the JSON text `raw`, kept as its bytes.
fn with_member(
    object: &Map<String, Value>,
    name: &str,
    raw: &RawValue,
) -> Result<Box<RawValue>, McpError> {
    let mut text = serde_json::to_string(object)
        .map_err(|e| McpError::internal_error(format!("tasks/get: {e}"), None))?;
    text.pop();
    if !object.is_empty() {
        text.push(',');
    }
    text.push_str(&serde_json::to_string(name).unwrap_or_default());
    text.push(':');
    text.push_str(raw.get());
    text.push('}');
    RawValue::from_string(text)
        .map_err(|e| McpError::internal_error(format!("tasks/get: {e}"), None))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task that asks without end is cut off at MAX_TASK_QUESTIONS: later questions get an
    /// error at once and nothing more is remembered.
    #[test]
    fn a_task_asking_without_end_is_cut_off() {
        use crate::downstream::callers::AskKind;
        let mut asks = TaskAsks::default();
        let mut replies = Vec::new();
        for n in 0..MAX_TASK_QUESTIONS + 5 {
            let (reply, answer) = tokio::sync::oneshot::channel();
            asks.record(
                format!("k{n}"),
                Ask {
                    kind: AskKind::Roots,
                    params: serde_json::json!({}),
                    reply,
                },
            );
            replies.push(answer);
        }
        assert_eq!(asks.given.len(), MAX_TASK_QUESTIONS);
        assert_eq!(asks.pending.len(), MAX_TASK_QUESTIONS);
        let mut last = replies.pop().expect("a reply");
        let refused = last.try_recv().expect("answered at once");
        let error = refused.expect_err("refused");
        assert!(
            error.message.contains("asked 1000 questions already"),
            "{error:?}"
        );
        // The kept ones still wait for their client.
        assert!(replies[0].try_recv().is_err());
    }

    fn bridged(ttl_ms: u64) -> Arc<Bridged> {
        let task: Map<String, Value> =
            serde_json::from_value(json!({"taskId": "t", "ttl": ttl_ms})).expect("task");
        let origin = Origin {
            server: "s".into(),
            tool: "t".into(),
            args: Value::Null,
        };
        Bridged::new(0, origin, expiry_of(&task))
    }

    /// A task is forgotten once its server's `ttl` has passed (its open `tasks/result` ends):
    /// a client that never polls does not keep results for the life of its scope.
    #[tokio::test]
    async fn tasks_are_forgotten_after_their_ttl() {
        let table = BridgedTasks::default();
        let short = bridged(1);
        let long = bridged(3_600_000);
        table.insert("short".into(), short.clone());
        table.insert("long".into(), long.clone());
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(table.get("short").is_none(), "kept past its ttl");
        assert!(short.stop.is_cancelled());
        assert!(table.get("long").is_some());
        // Expired ones also go when another task is created.
        table.insert("short2".into(), bridged(1));
        tokio::time::sleep(Duration::from_millis(20)).await;
        table.insert("other".into(), bridged(3_600_000));
        assert_eq!(table.len(), 2);
        assert!(!long.stop.is_cancelled());
    }

    #[test]
    fn tasks_take_the_extension_s_member_names() {
        let (id, task) = created_task(
            r#"{"task":{"taskId":"t1","status":"working","createdAt":"x","lastUpdatedAt":"x","ttl":60000,"pollInterval":100}}"#,
        )
        .expect("a created task");
        assert_eq!(id, "t1");
        let flat = as_extension_task(task);
        assert_eq!(flat["ttlMs"], 60000);
        assert_eq!(flat["pollIntervalMs"], 100);
        assert!(!flat.contains_key("ttl") && !flat.contains_key("pollInterval"));
        assert!(created_task(r#"{"content":[]}"#).is_none());
    }
}
