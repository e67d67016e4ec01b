//! MCP tasks (protocol 2025-11-25) through loom (SPEC §5.10).
//!
//! A server that offers task-augmented tools gets them called as tasks through loom: the
//! task-augmented `tools/call` goes to the tool's server and its `CreateTaskResult` passes back
//! as sent; `tasks/get`, `tasks/result` and `tasks/cancel` are routed by task id to the server
//! that created the task; `tasks/list` merges every task server's list; the servers'
//! `notifications/tasks/status` reach the client as they came. A `tasks/result` is a tool result
//! like any other: large and tabular, it becomes an envelope.
//!
//! Task ids are the servers' own, never rewritten (they travel inside results and `_meta` that
//! pass through byte-identical). The id → server table is filled from every place an id is seen.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::ErrorData as McpError;
use rmcp::model::{
    ClientRequest, CustomNotification, CustomRequest, ErrorCode, MetaObject, ServerNotification,
    ServerResult,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value, json};

use super::era::Era;
use crate::downstream::{TaskSupport, task_support};
use crate::gateway::Gateway;
use crate::gateway::forward::Forwarded;
use crate::intercept::Origin;

/// Task ids remembered; the oldest are forgotten beyond this (a client polling a task that old
/// gets the unknown-task error).
pub(crate) const MAX_REMEMBERED_TASKS: usize = 10_000;

/// Pages of one server's `tasks/list` that loom follows.
const MAX_LIST_PAGES: usize = 100;

/// The `_meta` key that ties a message to its task.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// What loom declares in `capabilities.tasks` when a server offers task-augmented tools.
pub(crate) fn capability() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// Where a task lives, and what made it (for the provenance of an envelope of its result).
#[derive(Debug, Clone)]
struct TaskRoute {
    server: usize,
    /// The server's own tool name and the redacted arguments; unknown for tasks loom only saw
    /// in a list or a notification.
    origin: Option<Origin>,
}

/// Task id → route, oldest forgotten first; and status notifications of ids not routed yet.
#[derive(Default)]
pub(crate) struct TaskRoutes {
    inner: Mutex<(HashMap<String, TaskRoute>, VecDeque<String>)>,
    parked: Mutex<Parking>,
}

/// Held statuses, and the tasks whose held statuses are being sent: a later status of such a
/// task waits behind them, so the client sees a task's statuses in the order they came.
#[derive(Default)]
struct Parking {
    held: Vec<Parked>,
    releasing: HashSet<(usize, String)>,
}

/// A status notification for a task id loom does not route yet: a server may send a task's
/// first status before its `CreateTaskResult` (server-everything does), and a status read right
/// after that result may be handled before the result is.
struct Parked {
    at: Instant,
    server: usize,
    id: String,
    notification: CustomNotification,
}

/// How long a status for an unknown task id is held, and how many are held at most.
const PARKED_FOR: Duration = Duration::from_secs(5);
const MAX_PARKED: usize = 256;

/// How long parked statuses wait after their task's `CreateTaskResult` was handed to rmcp, so
/// they reach the client after it.
const AFTER_CREATED: Duration = Duration::from_millis(20);

impl TaskRoutes {
    /// Route `id` to `server`. Returns whether statuses were held for it; they are then being
    /// released (under the same locks [`TaskRoutes::route_status`] takes, so a status that
    /// arrives meanwhile queues behind them) and [`TaskRoutes::take_released`] hands them out.
    pub(in crate::gateway) fn record(
        &self,
        id: &str,
        server: usize,
        origin: Option<Origin>,
    ) -> bool {
        let mut guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        self.insert(&mut guard, id, server, origin);
        let mut parking = self.parked.lock().unwrap_or_else(PoisonError::into_inner);
        let held = parking
            .held
            .iter()
            .any(|p| p.server == server && p.id == id && p.at.elapsed() < PARKED_FOR);
        if held {
            parking.releasing.insert((server, id.to_string()));
        }
        held
    }

    /// The statuses held for `id` of `server`, in the order they came; when there are none
    /// left, the task is no longer being released.
    fn take_released(&self, server: usize, id: &str) -> Vec<CustomNotification> {
        let mut parking = self.parked.lock().unwrap_or_else(PoisonError::into_inner);
        let (mine, rest): (Vec<Parked>, Vec<Parked>) = std::mem::take(&mut parking.held)
            .into_iter()
            .partition(|p| p.server == server && p.id == id);
        parking.held = rest;
        if mine.is_empty() {
            parking.releasing.remove(&(server, id.to_string()));
        }
        mine.into_iter().map(|p| p.notification).collect()
    }

    /// What to do with a status for `id` from `server`: forward it, or nothing (it was parked
    /// for a task not routed yet, or it is another server's task).
    fn route_status(
        &self,
        server: usize,
        id: String,
        notification: CustomNotification,
    ) -> Option<CustomNotification> {
        let guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        match guard.0.get(&id) {
            Some(route) if route.server == server => {
                // Checked and queued under one lock: a release that ends meanwhile would
                // otherwise leave this status behind.
                let mut parking = self.parked.lock().unwrap_or_else(PoisonError::into_inner);
                if parking.releasing.contains(&(server, id.clone())) {
                    parking.hold(server, id, notification);
                    None
                } else {
                    Some(notification)
                }
            }
            Some(_) => None,
            None => {
                self.park(server, id, notification);
                None
            }
        }
    }

    fn insert(
        &self,
        guard: &mut (HashMap<String, TaskRoute>, VecDeque<String>),
        id: &str,
        server: usize,
        origin: Option<Origin>,
    ) {
        let (routes, order) = guard;
        match routes.get_mut(id) {
            // Task ids are each server's own: two servers may use the same one. A task created
            // through loom keeps its route; a sighting elsewhere (another server's list) does not
            // take it over.
            Some(route) if route.server != server && origin.is_none() => {
                tracing::warn!(task = %id, "two servers use this task id; it stays routed to the server that created it through loom");
            }
            Some(route) => {
                route.server = server;
                if origin.is_some() {
                    route.origin = origin;
                }
            }
            None => {
                routes.insert(id.to_string(), TaskRoute { server, origin });
                order.push_back(id.to_string());
                while order.len() > MAX_REMEMBERED_TASKS {
                    if let Some(oldest) = order.pop_front() {
                        routes.remove(&oldest);
                    }
                }
            }
        }
    }

    fn get(&self, id: &str) -> Option<TaskRoute> {
        let guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        guard.0.get(id).cloned()
    }

    fn park(&self, server: usize, id: String, notification: CustomNotification) {
        self.parked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .hold(server, id, notification);
    }
}

impl Parking {
    fn hold(&mut self, server: usize, id: String, notification: CustomNotification) {
        let Parking { held, releasing } = self;
        // Statuses of tasks being released are kept whatever their age: they go out next.
        held.retain(|p| {
            p.at.elapsed() < PARKED_FOR || releasing.contains(&(p.server, p.id.clone()))
        });
        if held.len() >= MAX_PARKED {
            held.remove(0);
        }
        held.push(Parked {
            at: Instant::now(),
            server,
            id,
            notification,
        });
    }
}

fn invalid(message: String) -> McpError {
    McpError::invalid_params(message, None)
}

fn unknown_task(id: &str) -> McpError {
    invalid(format!(
        "unknown task `{id}`: no server behind loom created or listed it (call tasks/list for \
         the tasks loom knows)"
    ))
}

/// The task id of a `CreateTaskResult` (`{"task": {"taskId": …}}`), if `raw` is one.
fn created_task_id(raw: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Created {
        task: Task,
    }
    #[derive(serde::Deserialize)]
    struct Task {
        #[serde(rename = "taskId")]
        task_id: String,
    }
    serde_json::from_str::<Created>(raw)
        .ok()
        .map(|c| c.task.task_id)
}

impl Gateway {
    /// Whether any exposed tool can run as a task (then loom declares the capability).
    pub fn offers_tasks(&self) -> bool {
        self.exposed()
            .tools
            .iter()
            .any(|tool| task_support(tool) != TaskSupport::Forbidden)
    }

    fn serves_tasks(&self, index: usize) -> bool {
        self.server(index).is_some_and(|server| {
            server
                .catalog()
                .tools
                .iter()
                .any(|tool| task_support(tool) != TaskSupport::Forbidden)
        })
    }

    /// A task request from the client: `method` is `tools/call` (task-augmented) or one of
    /// `tasks/*`, `params` as the client sent them.
    pub(in crate::gateway) async fn task_request(
        &self,
        method: &str,
        params: Option<Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, McpError> {
        if Era::of_request(context) == Era::Discover && method != "tools/call" {
            // The tasks extension of 2026-07-28 (src/gateway/protocol/task_extension.rs).
            let params = match params {
                Some(Value::Object(params)) => params,
                None | Some(Value::Null) => Map::new(),
                Some(_) => {
                    return Err(invalid(format!(
                        "malformed `{method}` request: params must be an object"
                    )));
                }
            };
            return self.extension_task_request(method, &params, context).await;
        }
        if !Era::request_has_tasks(context) {
            return Err(McpError::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!(
                    "`{method}`: loom offers MCP tasks on protocol 2025-11-25 only (this session \
                     negotiated {})",
                    context
                        .protocol_version()
                        .map_or("no version".to_string(), |v| v.as_str().to_string())
                ),
                None,
            ));
        }
        let mut params = match params {
            Some(Value::Object(params)) => params,
            None | Some(Value::Null) => Map::new(),
            Some(_) => {
                return Err(invalid(format!(
                    "malformed `{method}` request: params must be an object"
                )));
            }
        };
        // The client's `_meta` travels in the request context (forwarded by `forward`).
        params.remove("_meta");
        match method {
            "tools/call" => self.create_task(params, context).await,
            "tasks/list" => self.list_tasks(context).await,
            _ => {
                let Some(id) = params
                    .get("taskId")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                else {
                    return Err(invalid(format!(
                        "malformed `{method}` request: `taskId` (a string) is required"
                    )));
                };
                let route = self
                    .protocol
                    .task_routes
                    .get(&id)
                    .ok_or_else(|| unknown_task(&id))?;
                let server = self.hub.servers[route.server].name().to_string();
                let request = ClientRequest::CustomRequest(CustomRequest::new(
                    method,
                    Some(Value::Object(params)),
                ));
                // `tasks/result` waits for the task to finish, which may take far longer than a
                // call: it ends when the server answers, the client cancels or the server goes.
                let timeout = match method {
                    "tasks/result" => None,
                    _ => Some(std::time::Duration::from_millis(
                        self.hub.servers[route.server].config.call_timeout_ms,
                    )),
                };
                // The server's questions for the task come while `tasks/result` waits.
                let task = (method == "tasks/result").then(|| id.clone());
                let answer = self
                    .forward_for(route.server, request, context, timeout, task)
                    .await
                    .map_err(|e| {
                        e.into_rpc_error(&server, &format!("`{method}` for task `{id}`"))
                    })?;
                match (method, answer, route.origin) {
                    ("tasks/result", Forwarded::Raw(raw), Some(origin)) => Ok(with_related_task(
                        self.intercept(raw, origin, context).await,
                        &id,
                    )),
                    (_, answer, _) => Ok(self.pass_on(answer, context, false)),
                }
            }
        }
    }

    /// A task-augmented `tools/call`: to the tool's server with the exposed name mapped back.
    async fn create_task(
        &self,
        mut params: Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, McpError> {
        let Some(name) = params
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            return Err(invalid(
                "malformed `tools/call` request: `name` (a string) is required".into(),
            ));
        };
        if crate::tools::NAMES.contains(&name.as_str()) {
            return Err(invalid(format!(
                "tool `{name}` does not run as a task (call it without `task`)"
            )));
        }
        let exposed = self.exposed();
        let Some(route) = exposed.tool_route(&name) else {
            return Err(crate::gateway::handler::unknown_tool(self, &name));
        };
        let server = self.hub.servers[route.server].name().to_string();
        let arguments = params.get("arguments").and_then(Value::as_object).cloned();
        let origin = self.origin_of(route, arguments.as_ref());
        params.insert("name".into(), Value::String(route.name.clone()));
        let request = ClientRequest::CustomRequest(CustomRequest::new(
            "tools/call",
            Some(Value::Object(params)),
        ));
        match self.forward(route.server, request, context).await {
            Ok(Forwarded::Raw(raw)) => match created_task_id(raw.get()) {
                Some(id) => {
                    if self
                        .protocol
                        .task_routes
                        .record(&id, route.server, Some(origin))
                    {
                        self.release_parked(route.server, id.clone(), AFTER_CREATED);
                    }
                    Ok(self.pass_on(Forwarded::Raw(raw), context, false))
                }
                // The server ran the call at once (task support is its choice): a tool result.
                None => Ok(self.intercept(raw, origin, context).await),
            },
            Ok(typed) => Ok(self.pass_on(typed, context, false)),
            Err(e) => Err(e.into_rpc_error(&server, &format!("tool `{}`", route.name))),
        }
    }

    /// Every task server's `tasks/list`, merged (all pages, in config order). A server that is
    /// down or fails to list is left out and logged: its tasks cannot be reached either way.
    async fn list_tasks(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, McpError> {
        let mut tasks = Vec::new();
        for server in self
            .hub
            .servers
            .iter()
            .filter(|s| self.serves_tasks(s.index))
        {
            let mut cursor: Option<String> = None;
            for _ in 0..MAX_LIST_PAGES {
                let mut params = Map::new();
                if let Some(cursor) = cursor.take() {
                    params.insert("cursor".into(), Value::String(cursor));
                }
                let request = ClientRequest::CustomRequest(CustomRequest::new(
                    "tasks/list",
                    Some(Value::Object(params)),
                ));
                let page = match self.forward(server.index, request, context).await {
                    Ok(Forwarded::Raw(raw)) => serde_json::from_str::<Value>(raw.get()).ok(),
                    Ok(Forwarded::Typed(_)) => None,
                    Err(error) => {
                        tracing::warn!(server = %server.name(), "tasks/list: {}", error.describe(server.name(), "tasks/list"));
                        None
                    }
                };
                let Some(mut page) = page else { break };
                if let Some(Value::Array(listed)) = page.get_mut("tasks").map(Value::take) {
                    for task in listed {
                        let Some(id) = task.get("taskId").and_then(Value::as_str) else {
                            continue;
                        };
                        // The servers are shared by every session (SPEC §22): one of several
                        // sessions lists only the tasks created through it.
                        if !self.owns_hub && self.protocol.task_routes.get(id).is_none() {
                            continue;
                        }
                        if self.protocol.task_routes.record(id, server.index, None) {
                            self.release_parked(server.index, id.to_string(), Duration::ZERO);
                        }
                        tasks.push(task);
                    }
                }
                match page.get("nextCursor").and_then(Value::as_str) {
                    Some(next) if !next.is_empty() => cursor = Some(next.to_string()),
                    _ => break,
                }
            }
        }
        let raw = serde_json::value::to_raw_value(&json!({"tasks": tasks}))
            .map_err(|e| McpError::internal_error(format!("tasks/list: {e}"), None))?;
        Ok(self.pass_on(Forwarded::Raw(raw), context, false))
    }

    /// A server's `notifications/tasks/status`: passed to the client as it came, for tasks loom
    /// knows (created through it or listed by it).
    pub(in crate::gateway) async fn task_status(
        &self,
        server: usize,
        notification: CustomNotification,
    ) {
        let id = notification
            .params
            .as_ref()
            .and_then(|p| p.get("taskId"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let Some(id) = id else { return };
        if self.upstream_is_2026() {
            // 2026-07-28 has no unsolicited task statuses (its clients poll `tasks/get`).
            return;
        }
        // A status of a task not routed yet is held until it is (its CreateTaskResult is being
        // handled, or comes next), then sent; dropped after a few seconds if it never is.
        let Some(notification) = self
            .protocol
            .task_routes
            .route_status(server, id, notification)
        else {
            return;
        };
        if let Some(peer) = self.upstream.get() {
            let _ = peer
                .send_notification(ServerNotification::CustomNotification(notification))
                .await;
        }
    }

    /// Send the statuses parked for a task that is now routed, `after` a moment (so that the
    /// answer being handed to rmcp right now goes out first).
    fn release_parked(&self, server: usize, id: String, after: Duration) {
        let routes = self.protocol.task_routes.clone();
        let peer = self.upstream.get();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            // Until none is left: statuses that came meanwhile queued behind these.
            loop {
                let batch = routes.take_released(server, &id);
                if batch.is_empty() {
                    return;
                }
                for notification in batch {
                    if let Some(peer) = &peer {
                        let _ = peer
                            .send_notification(ServerNotification::CustomNotification(notification))
                            .await;
                    }
                }
            }
        });
    }
}

/// An envelope made of a task's result keeps the task's `_meta` tie (a passed-through result
/// carries the server's own).
fn with_related_task(result: ServerResult, id: &str) -> ServerResult {
    match result {
        ServerResult::CallToolResult(mut result) => {
            let mut meta = result.meta.take().map(|m| m.0).unwrap_or_default();
            meta.insert(RELATED_TASK.into(), json!({"taskId": id}));
            result.meta = Some(MetaObject(meta));
            ServerResult::CallToolResult(result)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::{TaskRoutes, created_task_id};

    #[test]
    fn created_tasks_are_recognised_by_their_shape() {
        assert_eq!(
            created_task_id(r#"{"task":{"taskId":"abc","status":"working"}}"#),
            Some("abc".into())
        );
        assert_eq!(created_task_id(r#"{"content":[]}"#), None);
        assert_eq!(created_task_id(r#"{"task":"abc"}"#), None);
    }

    #[test]
    fn the_oldest_routes_are_forgotten_first() {
        let routes = TaskRoutes::default();
        for i in 0..=super::MAX_REMEMBERED_TASKS {
            routes.record(&format!("t{i}"), i % 3, None);
        }
        assert!(routes.get("t0").is_none());
        assert_eq!(routes.get("t1").map(|r| r.server), Some(1));
        // Seen again (in a list), a task keeps the origin it was created with.
        let origin = crate::intercept::Origin {
            server: "s".into(),
            tool: "t".into(),
            args: serde_json::json!({}),
        };
        routes.record("t5", 2, Some(origin));
        routes.record("t5", 2, None);
        assert_eq!(
            routes.get("t5").and_then(|r| r.origin).map(|o| o.tool),
            Some("t".into())
        );
    }
}
