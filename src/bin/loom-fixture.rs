//! `loom-fixture`: a downstream MCP stdio server that loom's integration tests start as a real
//! child process. It exists to exercise everything a gateway has to carry: plain and structured
//! results, byte-exact raw results, errors of both kinds, progress and cancellation,
//! server-to-client requests (sampling, roots, elicitation), list-changed notifications,
//! pagination, huge messages, and misbehaving processes (failing to start, crashing, lingering,
//! ignoring SIGTERM).
//!
//! It speaks newline-delimited JSON-RPC on stdin/stdout through loom's own
//! [`loom::wire::LineTransport`] in splicing mode. Stdout is the protocol; all diagnostics go to
//! stderr (`LOOM_FIXTURE_LOG` sets the tracing filter, default `warn`).
//!
//! # Flags
//!
//! * `--name NAME`: `serverInfo.name` and the greeting resource text (default `fixture`).
//! * `--extra-tools N`: adds tools `tool_000` … `tool_{N-1}`, each echoing its `text` argument.
//! * `--page-size N`: if > 0, `tools/list` is paginated, N tools per page, with an opaque
//!   `nextCursor`.
//! * `--fail-start`: prints `fixture: failing on purpose` to stderr and exits with code 3 before
//!   reading anything.
//! * `--exit-after-ms N`: exits with code 4 after N ms (a crash loop).
//! * `--linger-ms N`: once stdin reaches EOF, stays alive N more ms before exiting.
//! * `--ignore-sigterm`: installs a SIGTERM handler that ignores the signal (tests SIGKILL
//!   escalation).
//! * `--tools-from FILE`: adds the tools of a recorded `tools/list` (a JSON array), each echoing.
//! * `--no-base-tools`: lists only the tools the flags add.
//! * `--long-names`: adds a tool whose name is 70 characters long
//!   (`a_very_long_tool_name_…`) and two tools, `dup.name` and `dup name`, that differ only in
//!   characters loom must sanitize. All three echo `text`.
//! * `--no-resources`: declares neither the resources nor the prompts capability.
//! * `--app`: adds an MCP Apps tool `cohorts {count}` shown with `ui://cohorts/view.html`
//!   (`_meta.ui.resourceUri` and `_meta["ui/resourceUri"]`, an `outputSchema`); it answers a
//!   one-line text summary and `structuredContent` `{"server": name, "cohorts": [{cohort, size,
//!   retained}] × count}`; the page is listed as a resource (`text/html;profile=mcp-app`) whose
//!   text names the server.
//!
//! # Tools (in `tools/list` order; `--extra-tools`, `--long-names` and `add_tool` ones follow)
//!
//! 1. `echo {text}`: one text block with `text`.
//! 2. `rows {count, offset?}`: one text block holding a compact JSON array of `count` user rows
//!    (`id`, `name`, `email`, `score`, `active`, `created`) starting at id `offset`.
//! 3. `structured {}`: declares an `outputSchema`; returns `{"total":2,"items":[{"id":1},{"id":2}]}`
//!    as `structuredContent` and as text.
//! 4. `raw {json}`: the JSON-RPC `result` is exactly the bytes of `json` (invalid JSON:
//!    invalid-params error).
//! 5. `image {}`: a text block, then a 1×1 PNG image block.
//! 6. `resource_link {}`: a `resource_link` block pointing at `fixture://greeting`.
//! 7. `fail {message}`: a result with `isError: true` and `message` as text.
//! 8. `rpc_error {message}`: a JSON-RPC error response (code -32000) carrying `message`.
//! 9. `slow {ms, steps?=5}`: sleeps `ms` in `steps` slices, sending `notifications/progress`
//!    (`progress` i, `total` steps, `message` "step i") after each slice when the request has a
//!    `progressToken`; answers `done after {ms} ms`. On cancellation it stops, records the request
//!    id and prints `cancelled request {id}` to stderr.
//! 10. `cancelled {}`: JSON array (of strings) of the request ids cancelled so far.
//! 11. `crash {code?=1}`: exits the process at once with `code`, without answering.
//! 12. `env {}`: JSON object of this process's environment, sorted by key.
//! 13. `pid {}`: this process's pid.
//! 14. `meta_echo {}`: the request's `_meta`, as `structuredContent` and as text.
//! 15. `add_tool {name, remove?=false}`: adds an echo tool called `name`, sends
//!     `notifications/tools/list_changed`, answers `added`. With `remove: true` it takes the
//!     tool called `name` out of `tools/list` instead (it still answers calls), announces the
//!     change and answers `removed`.
//! 16. `sample {prompt}`: sends `sampling/createMessage` to the client, answers its text.
//! 17. `roots {}`: sends `roots/list` to the client, answers the roots as JSON.
//! 18. `elicit {message}`: sends `elicitation/create` (form asking for a string `answer`),
//!     answers `{"action":…,"content":…}` as JSON.
//! 19. `big_text {bytes}`: one text block of exactly `bytes` ASCII characters.
//! 21. `logs {count, bytes?=200}`: sends `count` `notifications/message` (level info, `data` a
//!     string of `bytes` characters), prints `sent {count} log lines` to stderr, answers
//!     `sent {count}`.
//! 20. `orders {count, users?}`: JSON text array of orders whose `user_id` refers to `rows` ids.
//!
//! Client-side failures of 16–18 come back as `isError` results carrying the error text.
//!
//! # Resources and prompts (unless `--no-resources`)
//!
//! * `fixture://greeting` (text/plain, `hello from {name}`) and `fixture://data.json`
//!   (application/json); template `fixture://items/{id}` reads as `item {id}`. Unknown URIs give
//!   a resource-not-found error (-32002).
//! * `resources/subscribe` and `unsubscribe` are accepted and remembered; subscribing to
//!   `fixture://greeting` is followed (50 ms later) by `notifications/resources/updated` for it.
//! * Prompt `greet {name}` returns one user message `Hello, {name}!`.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use clap::Parser;
use loom::wire::{LineTransport, RawResults, placeholder_result};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientNotification, ClientRequest,
    ClientResult, ContentBlock, ElicitRequest, ElicitRequestParams, ElicitationSchema, ErrorCode,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, JsonObject,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, Prompt, PromptArgument, PromptMessage,
    PromptsCapability, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
    ResourceUpdatedNotificationParam, ResourcesCapability, Role, ServerCapabilities, ServerConfig,
    ServerRequest, ServerResult, SubscribeRequestParams, Tool, ToolsCapability,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, Service, ServiceError};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::CancellationToken;

/// A valid 1×1 RGBA PNG.
const TINY_PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

/// 70 characters: longer than the 64 many clients accept.
const LONG_TOOL_NAME: &str =
    "a_very_long_tool_name_that_is_longer_than_the_sixty_four_character_cap";

const GREETING_URI: &str = "fixture://greeting";
/// The page the `--app` tool is shown with.
const APP_URI: &str = "ui://cohorts/view.html";
const APP_MIME: &str = "text/html;profile=mcp-app";
const DATA_URI: &str = "fixture://data.json";
const ITEM_URI_PREFIX: &str = "fixture://items/";
const CURSOR_PREFIX: &str = "fixture-cursor-";

#[derive(Parser, Debug)]
#[command(
    name = "loom-fixture",
    about = "Downstream MCP stdio server for loom's tests"
)]
struct Args {
    /// serverInfo name.
    #[arg(long, default_value = "fixture")]
    name: String,
    /// Add tools tool_000 .. tool_{N-1}, each echoing its `text` argument.
    #[arg(long, default_value_t = 0)]
    extra_tools: usize,
    /// Paginate tools/list with this many tools per page (0: no pagination).
    #[arg(long, default_value_t = 0)]
    page_size: usize,
    /// Exit with code 3 before reading anything.
    #[arg(long)]
    fail_start: bool,
    /// Exit with code 4 after this many milliseconds.
    #[arg(long)]
    exit_after_ms: Option<u64>,
    /// Stay alive this many milliseconds after stdin reaches EOF.
    #[arg(long, default_value_t = 0)]
    linger_ms: u64,
    /// Ignore SIGTERM.
    #[arg(long)]
    ignore_sigterm: bool,
    /// Add a 70-character tool name and two names that collide once sanitized.
    #[arg(long)]
    long_names: bool,
    /// Do not declare the resources and prompts capabilities.
    #[arg(long)]
    no_resources: bool,
    /// Add the tools listed in this JSON file (an array of tool definitions, e.g. a real
    /// server's recorded `tools/list`), each echoing its `text` argument.
    #[arg(long)]
    tools_from: Option<std::path::PathBuf>,
    /// List only the tools the flags add (`--extra-tools`, `--tools-from`, …), none of the base set.
    #[arg(long)]
    no_base_tools: bool,
    /// Add the MCP Apps tool `cohorts` and its `ui://` page.
    #[arg(long)]
    app: bool,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn schema(value: Value) -> Arc<JsonObject> {
    Arc::new(rmcp::model::object(value))
}

fn text_schema() -> Arc<JsonObject> {
    schema(json!({
        "type": "object",
        "properties": {"text": {"type": "string", "description": "Text to echo back"}},
        "required": ["text"]
    }))
}

fn empty_schema() -> Arc<JsonObject> {
    schema(json!({"type": "object", "properties": {}}))
}

fn echo_tool(name: impl Into<String>) -> Tool {
    Tool::new(name.into(), "Echoes its `text` argument.", text_schema())
}

fn base_tools() -> Vec<Tool> {
    let message_schema = |what: &str| {
        schema(json!({
            "type": "object",
            "properties": {"message": {"type": "string", "description": what}},
            "required": ["message"]
        }))
    };
    vec![
        echo_tool("echo"),
        Tool::new(
            "rows",
            "Returns a JSON array of `count` synthetic user rows starting at `offset`.",
            schema(json!({
                "type": "object",
                "properties": {
                    "count": {"type": "integer", "minimum": 0},
                    "offset": {"type": "integer", "minimum": 0}
                },
                "required": ["count"]
            })),
        ),
        Tool::new(
            "structured",
            "Returns structured content matching its output schema.",
            empty_schema(),
        )
        .with_raw_output_schema(schema(json!({
            "type": "object",
            "properties": {
                "total": {"type": "integer"},
                "items": {"type": "array", "items": {"type": "object"}}
            },
            "required": ["total", "items"]
        }))),
        Tool::new(
            "raw",
            "Answers with exactly the given JSON text as the JSON-RPC result.",
            schema(json!({
                "type": "object",
                "properties": {"json": {"type": "string", "description": "The result, as JSON text"}},
                "required": ["json"]
            })),
        ),
        Tool::new(
            "image",
            "Returns a text block and a tiny PNG.",
            empty_schema(),
        ),
        Tool::new(
            "resource_link",
            "Returns a resource link to fixture://greeting.",
            empty_schema(),
        ),
        Tool::new(
            "fail",
            "Returns a tool error (isError: true) with the message.",
            message_schema("Error text"),
        ),
        Tool::new(
            "rpc_error",
            "Fails with a JSON-RPC error carrying the message.",
            message_schema("Error message"),
        ),
        Tool::new(
            "slow",
            "Sleeps `ms` milliseconds in `steps` slices, reporting progress; honours cancellation.",
            schema(json!({
                "type": "object",
                "properties": {
                    "ms": {"type": "integer", "minimum": 0},
                    "steps": {"type": "integer", "minimum": 0, "default": 5}
                },
                "required": ["ms"]
            })),
        ),
        Tool::new(
            "cancelled",
            "Lists the ids of the requests cancelled so far.",
            empty_schema(),
        ),
        Tool::new(
            "crash",
            "Exits the process at once with `code` (default 1), without answering.",
            schema(json!({
                "type": "object",
                "properties": {"code": {"type": "integer"}}
            })),
        ),
        Tool::new(
            "env",
            "Returns this process's environment as a JSON object.",
            empty_schema(),
        ),
        Tool::new("pid", "Returns this process's pid.", empty_schema()),
        Tool::new("meta_echo", "Returns the request's _meta.", empty_schema()),
        Tool::new(
            "add_tool",
            "Adds an echo tool with the given name and announces the change.",
            schema(json!({
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"]
            })),
        ),
        Tool::new(
            "sample",
            "Asks the client to sample a message for the prompt.",
            schema(json!({
                "type": "object",
                "properties": {"prompt": {"type": "string"}},
                "required": ["prompt"]
            })),
        ),
        Tool::new("roots", "Asks the client for its roots.", empty_schema()),
        Tool::new(
            "elicit",
            "Asks the client to elicit an `answer` string from the user.",
            message_schema("What to ask the user"),
        ),
        Tool::new(
            "big_text",
            "Returns one text block of exactly `bytes` ASCII characters.",
            schema(json!({
                "type": "object",
                "properties": {"bytes": {"type": "integer", "minimum": 0}},
                "required": ["bytes"]
            })),
        ),
        Tool::new(
            "logs",
            "Sends `count` log notifications of `bytes` characters each, then answers.",
            schema(json!({
                "type": "object",
                "properties": {
                    "count": {"type": "integer", "minimum": 0},
                    "bytes": {"type": "integer", "minimum": 0, "default": 200}
                },
                "required": ["count"]
            })),
        ),
        Tool::new(
            "orders",
            "Returns a JSON array of `count` synthetic orders whose `user_id` refers to `rows` ids below `users` (default 1000).",
            schema(json!({
                "type": "object",
                "properties": {
                    "count": {"type": "integer", "minimum": 0},
                    "users": {"type": "integer", "minimum": 1}
                },
                "required": ["count"]
            })),
        ),
    ]
}

/// Tools whose only behaviour is echoing `text` (everything not in [`base_tools`]).
fn flag_tools(args: &Args) -> Vec<Tool> {
    let mut tools: Vec<Tool> = (0..args.extra_tools)
        .map(|i| echo_tool(format!("tool_{i:03}")))
        .collect();
    if let Some(path) = &args.tools_from {
        let recorded = std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| serde_json::from_str::<Vec<Tool>>(&text).map_err(|e| e.to_string()));
        match recorded {
            Ok(recorded) => tools.extend(recorded),
            Err(error) => eprintln!("fixture: --tools-from {}: {error}", path.display()),
        }
    }
    if args.app {
        let app = serde_json::from_value(json!({
            "name": "cohorts",
            "description": "Cohort retention, shown as a heatmap.",
            "inputSchema": {"type": "object", "properties": {"count": {"type": "integer"}}},
            "outputSchema": {"type": "object", "properties": {"cohorts": {"type": "array"}}},
            "_meta": {"ui": {"resourceUri": APP_URI}, "ui/resourceUri": APP_URI}
        }));
        match app {
            Ok(app) => tools.push(app),
            Err(error) => eprintln!("fixture: --app: {error}"),
        }
    }
    if args.long_names {
        tools.push(echo_tool(LONG_TOOL_NAME));
        tools.push(echo_tool("dup.name"));
        tools.push(echo_tool("dup name"));
    }
    tools
}

fn arguments_of(request: &CallToolRequestParams) -> JsonObject {
    request.arguments.clone().unwrap_or_default()
}

fn str_arg(args: &JsonObject, key: &str) -> Result<String, McpError> {
    match args.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(McpError::invalid_params(
            format!("argument `{key}` must be a string"),
            None,
        )),
        None => Err(McpError::invalid_params(
            format!("missing argument `{key}`"),
            None,
        )),
    }
}

fn opt_u64_arg(args: &JsonObject, key: &str) -> Result<Option<u64>, McpError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value.as_u64().map(Some).ok_or_else(|| {
            McpError::invalid_params(
                format!("argument `{key}` must be a non-negative integer"),
                None,
            )
        }),
    }
}

fn u64_arg(args: &JsonObject, key: &str) -> Result<u64, McpError> {
    opt_u64_arg(args, key)?
        .ok_or_else(|| McpError::invalid_params(format!("missing argument `{key}`"), None))
}

fn text_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

fn error_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

fn service_error_text(error: ServiceError) -> String {
    match error {
        ServiceError::McpError(error) => error.message.into_owned(),
        other => other.to_string(),
    }
}

/// Synthetic users: 11 columns of mixed types (the shape loom's benchmarks call "10k × 11").
fn rows(count: u64, offset: u64) -> Value {
    const COUNTRIES: [&str; 5] = ["DE", "FR", "JP", "US", "BR"];
    const PLANS: [&str; 3] = ["free", "pro", "team"];
    Value::Array(
        (offset..offset.saturating_add(count))
            .map(|i| {
                let idx = usize::try_from(i).unwrap_or(0);
                json!({
                    "id": i,
                    "name": format!("user-{i}"),
                    "email": format!("user-{i}@example.com"),
                    "score": i as f64 * 1.5,
                    "active": i % 2 == 0,
                    "created": format!("2024-{:02}-{:02}T{:02}:00:00Z", 1 + (i / 28) % 12, 1 + i % 28, i % 24),
                    "country": COUNTRIES[idx % COUNTRIES.len()],
                    "plan": PLANS[idx % PLANS.len()],
                    "tags": [format!("t{}", i % 7), format!("g{}", i % 3)],
                    "manager_id": if i % 10 == 0 { Value::Null } else { json!(i / 10) },
                    "balance": (i % 1000) as f64 + 0.25,
                })
            })
            .collect(),
    )
}

/// Synthetic orders whose `user_id` refers to `rows`' `id` (0 .. users).
fn orders(count: u64, users: u64) -> Value {
    const STATUS: [&str; 4] = ["paid", "open", "refunded", "shipped"];
    Value::Array(
        (0..count)
            .map(|i| {
                json!({
                    "order_id": 100_000 + i,
                    "user_id": i.wrapping_mul(7919) % users.max(1),
                    "amount": ((i * 37) % 500) as f64 + 0.5,
                    "status": STATUS[usize::try_from(i % 4).unwrap_or(0)],
                })
            })
            .collect(),
    )
}

fn big_text(bytes: usize) -> String {
    const PATTERN: &[u8] = b"abcdefghij";
    let body: Vec<u8> = PATTERN.iter().copied().cycle().take(bytes).collect();
    String::from_utf8(body).unwrap_or_default()
}

fn environment() -> BTreeMap<String, String> {
    std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect()
}

/// The MCP behaviour of the fixture (everything except the `raw` tool, see [`FixtureService`]).
struct Fixture {
    name: String,
    resources: bool,
    /// `--app`: its page is listed and read.
    app: bool,
    page_size: usize,
    /// Base tools followed by the flag-driven echo tools; fixed for the process lifetime.
    static_tools: Vec<Tool>,
    /// How many of `static_tools` are base tools (the rest echo).
    base_tool_count: usize,
    /// Echo tools added by `add_tool`.
    dynamic_tools: Mutex<Vec<Tool>>,
    /// Tools `add_tool` took out of the list.
    removed_tools: Mutex<BTreeSet<String>>,
    /// Ids (as strings) of requests whose cancellation the fixture observed.
    cancelled: Mutex<Vec<String>>,
    subscriptions: Mutex<BTreeSet<String>>,
    /// Cancelled when stdin reaches EOF, so in-flight handlers stop at once and the process can
    /// exit (or linger) without rmcp waiting for them.
    stdin_closed: CancellationToken,
}

impl Fixture {
    fn new(args: &Args, stdin_closed: CancellationToken) -> Self {
        let mut static_tools = if args.no_base_tools {
            Vec::new()
        } else {
            base_tools()
        };
        let base_tool_count = static_tools.len();
        static_tools.extend(flag_tools(args));
        Self {
            name: args.name.clone(),
            resources: !args.no_resources,
            app: args.app,
            page_size: args.page_size,
            static_tools,
            base_tool_count,
            dynamic_tools: Mutex::new(Vec::new()),
            removed_tools: Mutex::new(BTreeSet::new()),
            cancelled: Mutex::new(Vec::new()),
            subscriptions: Mutex::new(BTreeSet::new()),
            stdin_closed,
        }
    }

    fn all_tools(&self) -> Vec<Tool> {
        let mut tools = self.static_tools.clone();
        tools.extend(lock(&self.dynamic_tools).iter().cloned());
        let removed = lock(&self.removed_tools);
        tools.retain(|t| !removed.contains(t.name.as_ref()));
        tools
    }

    fn is_echo_tool(&self, name: &str) -> bool {
        self.static_tools[self.base_tool_count..]
            .iter()
            .any(|t| t.name == name)
            || lock(&self.dynamic_tools).iter().any(|t| t.name == name)
    }

    fn record_cancelled(&self, context: &RequestContext<RoleServer>) {
        let id = context.id.to_string();
        eprintln!("cancelled request {id}");
        lock(&self.cancelled).push(id);
    }

    fn require_resources(&self) -> Result<(), McpError> {
        if self.resources {
            Ok(())
        } else {
            Err(McpError::new(
                ErrorCode::METHOD_NOT_FOUND,
                "resources and prompts are disabled (--no-resources)",
                None,
            ))
        }
    }

    /// Awaits a request to the client, giving up when the call is cancelled or stdin closes.
    async fn ask_client<T>(
        &self,
        context: &RequestContext<RoleServer>,
        request: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, String> {
        tokio::select! {
            biased;
            () = context.ct.cancelled() => {
                self.record_cancelled(context);
                Err("request cancelled".to_owned())
            }
            () = self.stdin_closed.cancelled() => Err("stdin closed".to_owned()),
            result = request => result.map_err(service_error_text),
        }
    }

    async fn slow(
        &self,
        args: &JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let ms = u64_arg(args, "ms")?;
        let steps = opt_u64_arg(args, "steps")?.unwrap_or(5);
        let steps = u32::try_from(steps)
            .map_err(|_| McpError::invalid_params("argument `steps` is too large", None))?;
        let token = context.meta.get_progress_token();
        let total = Duration::from_millis(ms);
        let work = async {
            if steps == 0 {
                tokio::time::sleep(total).await;
                return;
            }
            let slice = total / steps;
            for i in 1..=steps {
                tokio::time::sleep(slice).await;
                if let Some(token) = &token {
                    let progress = ProgressNotificationParam::new(token.clone(), f64::from(i))
                        .with_total(f64::from(steps))
                        .with_message(format!("step {i}"));
                    if let Err(error) = context.peer.notify_progress(progress).await {
                        tracing::warn!(%error, "failed to send progress");
                    }
                }
            }
        };
        tokio::select! {
            biased;
            () = context.ct.cancelled() => {
                self.record_cancelled(context);
                Err(McpError::new(ErrorCode(-32800), "request cancelled", None))
            }
            () = self.stdin_closed.cancelled() => {
                Err(McpError::internal_error("stdin closed", None))
            }
            () = work => Ok(text_result(format!("done after {ms} ms"))),
        }
    }

    #[allow(deprecated)] // sampling is deprecated by SEP-2577 but still part of 2025-xx sessions
    async fn sample(
        &self,
        prompt: String,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        use rmcp::model::{CreateMessageRequestParams, SamplingMessage};
        let params = CreateMessageRequestParams::new(vec![SamplingMessage::user_text(prompt)], 256);
        Ok(
            match self
                .ask_client(context, context.peer.create_message(params))
                .await
            {
                Ok(result) => {
                    let texts: Vec<&str> = result
                        .message
                        .content
                        .iter()
                        .filter_map(|block| block.as_text().map(|t| t.text.as_str()))
                        .collect();
                    text_result(texts.join("\n"))
                }
                Err(error) => error_result(error),
            },
        )
    }

    #[allow(deprecated)] // roots are deprecated by SEP-2577 but still part of 2025-xx sessions
    async fn roots(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        Ok(
            match self.ask_client(context, context.peer.list_roots()).await {
                Ok(result) => text_result(
                    serde_json::to_string(&result.roots)
                        .map_err(|e| McpError::internal_error(e.to_string(), None))?,
                ),
                Err(error) => error_result(error),
            },
        )
    }

    async fn elicit(
        &self,
        message: String,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        // Sent by hand rather than through `Peer::create_elicitation`, which only exists with
        // rmcp's `elicitation` feature.
        let requested_schema = ElicitationSchema::builder()
            .required_string("answer")
            .build()
            .map_err(|e| McpError::internal_error(e, None))?;
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(
            ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema,
            },
        ));
        Ok(
            match self
                .ask_client(context, context.peer.send_request(request))
                .await
            {
                Ok(ClientResult::ElicitResult(result)) => text_result(
                    json!({"action": result.action, "content": result.content}).to_string(),
                ),
                Ok(other) => error_result(format!("unexpected elicitation answer: {other:?}")),
                Err(error) => error_result(error),
            },
        )
    }

    async fn add_tool(
        &self,
        name: String,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        if self.all_tools().iter().any(|t| t.name == name) {
            return Ok(error_result(format!("tool `{name}` already exists")));
        }
        lock(&self.dynamic_tools).push(echo_tool(name));
        if let Err(error) = context.peer.notify_tool_list_changed().await {
            tracing::warn!(%error, "failed to send tools/list_changed");
        }
        Ok(text_result("added"))
    }

    async fn remove_tool(
        &self,
        name: String,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        lock(&self.removed_tools).insert(name);
        if let Err(error) = context.peer.notify_tool_list_changed().await {
            tracing::warn!(%error, "failed to send tools/list_changed");
        }
        text_result("removed")
    }

    fn read(&self, uri: &str) -> Result<ReadResourceResult, McpError> {
        let contents = if self.app && uri == APP_URI {
            ResourceContents::text(
                format!("<!doctype html><title>cohorts of {}</title>", self.name),
                uri,
            )
            .with_mime_type(APP_MIME)
        } else if uri == GREETING_URI {
            ResourceContents::text(format!("hello from {}", self.name), uri)
                .with_mime_type("text/plain")
        } else if uri == DATA_URI {
            let data = json!({"server": self.name, "items": [1, 2, 3]});
            ResourceContents::text(data.to_string(), uri).with_mime_type("application/json")
        } else if let Some(id) = uri.strip_prefix(ITEM_URI_PREFIX)
            && !id.is_empty()
            && !id.contains('/')
        {
            ResourceContents::text(format!("item {id}"), uri).with_mime_type("text/plain")
        } else {
            return Err(McpError::resource_not_found(
                format!("no resource {uri}"),
                Some(json!({"uri": uri})),
            ));
        };
        Ok(ReadResourceResult::new(vec![contents]))
    }
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::default();
        let mut tools = ToolsCapability::default();
        tools.list_changed = Some(true);
        capabilities.tools = Some(tools);
        if self.resources {
            let mut resources = ResourcesCapability::default();
            resources.subscribe = Some(true);
            resources.list_changed = Some(true);
            capabilities.resources = Some(resources);
            let mut prompts = PromptsCapability::default();
            prompts.list_changed = Some(true);
            capabilities.prompts = Some(prompts);
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                self.name.clone(),
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(format!("{}: a loom test fixture", self.name))
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = self.all_tools();
        if self.page_size == 0 {
            return Ok(ListToolsResult::with_all_items(tools));
        }
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor
                .strip_prefix(CURSOR_PREFIX)
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| {
                    McpError::invalid_params(format!("invalid cursor {cursor:?}"), None)
                })?,
        };
        let end = start.saturating_add(self.page_size).min(tools.len());
        let page = tools
            .get(start..end)
            .map(<[Tool]>::to_vec)
            .unwrap_or_default();
        let mut result = ListToolsResult::with_all_items(page);
        if end < tools.len() {
            result.next_cursor = Some(format!("{CURSOR_PREFIX}{end}"));
        }
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = arguments_of(&request);
        let result = match request.name.as_ref() {
            "echo" => text_result(str_arg(&args, "text")?),
            "rows" => {
                let count = u64_arg(&args, "count")?;
                let offset = opt_u64_arg(&args, "offset")?.unwrap_or(0);
                text_result(rows(count, offset).to_string())
            }
            "orders" => {
                let count = u64_arg(&args, "count")?;
                let users = opt_u64_arg(&args, "users")?.unwrap_or(1000);
                text_result(orders(count, users).to_string())
            }
            "structured" => {
                CallToolResult::structured(json!({"total": 2, "items": [{"id": 1}, {"id": 2}]}))
            }
            // Normally answered by `FixtureService`; reaching here means the wrapper was bypassed.
            "raw" => {
                return Err(McpError::internal_error(
                    "raw is handled by FixtureService",
                    None,
                ));
            }
            "image" => CallToolResult::success(vec![
                ContentBlock::text("here is an image"),
                ContentBlock::image(TINY_PNG_BASE64, "image/png"),
            ]),
            "resource_link" => CallToolResult::success(vec![ContentBlock::resource_link(
                Resource::new(GREETING_URI, "greeting")
                    .with_description("A greeting from the fixture")
                    .with_mime_type("text/plain"),
            )]),
            "fail" => error_result(str_arg(&args, "message")?),
            "rpc_error" => {
                return Err(McpError::new(
                    ErrorCode(-32000),
                    str_arg(&args, "message")?,
                    None,
                ));
            }
            "slow" => self.slow(&args, &context).await?,
            "cancelled" => text_result(json!(*lock(&self.cancelled)).to_string()),
            "crash" => {
                let code = match args.get("code") {
                    None | Some(Value::Null) => 1,
                    Some(value) => value
                        .as_i64()
                        .and_then(|c| i32::try_from(c).ok())
                        .ok_or_else(|| {
                            McpError::invalid_params("argument `code` must be an integer", None)
                        })?,
                };
                eprintln!("fixture: crashing with code {code}");
                std::process::exit(code);
            }
            "env" => text_result(json!(environment()).to_string()),
            "pid" => text_result(std::process::id().to_string()),
            "meta_echo" => CallToolResult::structured(
                serde_json::to_value(&context.meta)
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?,
            ),
            "add_tool" if args.get("remove").and_then(Value::as_bool) == Some(true) => {
                self.remove_tool(str_arg(&args, "name")?, &context).await
            }
            "add_tool" => self.add_tool(str_arg(&args, "name")?, &context).await?,
            "sample" => self.sample(str_arg(&args, "prompt")?, &context).await?,
            "roots" => self.roots(&context).await?,
            "elicit" => self.elicit(str_arg(&args, "message")?, &context).await?,
            "cohorts" if self.app => {
                let count = u64_arg(&args, "count")?;
                let cohorts: Vec<Value> = (0..count)
                    .map(|i| {
                        json!({"cohort": format!("2024-{:02}", 1 + i % 12), "size": 1000 + i, "retained": (i * 37) % 1000})
                    })
                    .collect();
                serde_json::from_value(json!({
                    "content": [{"type": "text", "text": format!("{count} cohorts of {}", self.name)}],
                    "structuredContent": {"server": self.name, "cohorts": cohorts},
                    "_meta": {"fixture/served-by": self.name}
                }))
                .map_err(|e| McpError::internal_error(e.to_string(), None))?
            }
            "logs" => {
                let count = u64_arg(&args, "count")?;
                let bytes = usize::try_from(opt_u64_arg(&args, "bytes")?.unwrap_or(200))
                    .map_err(|_| McpError::invalid_params("argument `bytes` is too large", None))?;
                let line = Value::String(big_text(bytes));
                for _ in 0..count {
                    #[allow(deprecated)] // what servers still send
                    let params = rmcp::model::LoggingMessageNotificationParam::new(
                        rmcp::model::LoggingLevel::Info,
                        line.clone(),
                    );
                    #[allow(deprecated)]
                    if context.peer.notify_logging_message(params).await.is_err() {
                        break;
                    }
                }
                eprintln!("sent {count} log lines");
                text_result(format!("sent {count}"))
            }
            "big_text" => {
                let bytes = usize::try_from(u64_arg(&args, "bytes")?)
                    .map_err(|_| McpError::invalid_params("argument `bytes` is too large", None))?;
                text_result(big_text(bytes))
            }
            name if self.is_echo_tool(name) => text_result(str_arg(&args, "text")?),
            name => {
                return Err(McpError::invalid_params(
                    format!("unknown tool `{name}`"),
                    None,
                ));
            }
        };
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.require_resources()?;
        let mut listed = vec![
            Resource::new(GREETING_URI, "greeting")
                .with_description("A greeting from the fixture")
                .with_mime_type("text/plain"),
            Resource::new(DATA_URI, "data.json")
                .with_description("A small JSON document")
                .with_mime_type("application/json"),
        ];
        if self.app {
            listed.push(Resource::new(APP_URI, "cohorts view").with_mime_type(APP_MIME));
        }
        Ok(ListResourcesResult::with_all_items(listed))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        self.require_resources()?;
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new("fixture://items/{id}", "item")
                .with_description("One item by id")
                .with_mime_type("text/plain"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.require_resources()?;
        self.read(&request.uri).map(Into::into)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.require_resources()?;
        lock(&self.subscriptions).insert(request.uri.clone());
        if request.uri == GREETING_URI {
            // Let the subscribe response go out first.
            let peer = context.peer.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let update = ResourceUpdatedNotificationParam::new(GREETING_URI);
                if let Err(error) = peer.notify_resource_updated(update).await {
                    tracing::warn!(%error, "failed to send resources/updated");
                }
            });
        }
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.require_resources()?;
        lock(&self.subscriptions).remove(&request.uri);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        self.require_resources()?;
        Ok(ListPromptsResult::with_all_items(vec![Prompt::new(
            "greet",
            Some("Greets someone by name"),
            Some(vec![
                PromptArgument::new("name")
                    .with_description("Who to greet")
                    .with_required(true),
            ]),
        )]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        self.require_resources()?;
        if request.name != "greet" {
            return Err(McpError::invalid_params(
                format!("unknown prompt `{}`", request.name),
                None,
            ));
        }
        let name = str_arg(&request.arguments.unwrap_or_default(), "name")?;
        Ok(GetPromptResult::new(vec![PromptMessage::new_text(
            Role::User,
            format!("Hello, {name}!"),
        )])
        .with_description("A greeting")
        .into())
    }
}

/// Answers `tools/call raw` itself (the bytes go into the splicing transport's table) and
/// delegates everything else to [`Fixture`].
struct FixtureService {
    fixture: Fixture,
    raw_results: RawResults,
}

fn raw_argument(request: &CallToolRequestParams) -> Result<Box<RawValue>, McpError> {
    let json = str_arg(&arguments_of(request), "json")?;
    RawValue::from_string(json)
        .map_err(|e| McpError::invalid_params(format!("argument `json` is not JSON: {e}"), None))
}

impl Service<RoleServer> for FixtureService {
    async fn handle_request(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, McpError> {
        if let ClientRequest::CallToolRequest(call) = &request
            && call.params.name == "raw"
        {
            let raw = raw_argument(&call.params)?;
            self.raw_results.put(context.id.clone(), raw);
            return Ok(ServerResult::CustomResult(placeholder_result()));
        }
        <Fixture as Service<RoleServer>>::handle_request(&self.fixture, request, context).await
    }

    async fn handle_notification(
        &self,
        notification: ClientNotification,
        context: NotificationContext<RoleServer>,
    ) -> Result<(), McpError> {
        <Fixture as Service<RoleServer>>::handle_notification(&self.fixture, notification, context)
            .await
    }

    fn get_info(&self) -> ServerConfig {
        ServerHandler::get_info(&self.fixture)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        ServerHandler::supported_protocol_versions(&self.fixture)
    }
}

/// Stdin, cancelling a token when it reaches end of file.
struct EofSignal<R> {
    inner: R,
    eof: CancellationToken,
}

impl<R: AsyncRead + Unpin> AsyncRead for EofSignal<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        match &poll {
            Poll::Ready(Ok(())) if buf.filled().len() == before && buf.remaining() > 0 => {
                self.eof.cancel();
            }
            Poll::Ready(Err(_)) => self.eof.cancel(),
            _ => {}
        }
        poll
    }
}

async fn linger(ms: u64) {
    if ms > 0 {
        eprintln!("fixture: stdin closed; lingering {ms} ms");
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if args.fail_start {
        eprintln!("fixture: failing on purpose");
        std::process::exit(3);
    }

    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LOOM_FIXTURE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();

    if args.ignore_sigterm {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut sigterm) => {
                tokio::spawn(async move {
                    while sigterm.recv().await.is_some() {
                        eprintln!("fixture: ignoring SIGTERM");
                    }
                });
            }
            Err(error) => eprintln!("fixture: cannot install a SIGTERM handler: {error}"),
        }
    }

    if let Some(ms) = args.exit_after_ms {
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            eprintln!("fixture: exiting after {ms} ms");
            std::process::exit(4);
        });
    }

    let stdin_closed = CancellationToken::new();
    let raw_results = RawResults::new();
    let service = FixtureService {
        fixture: Fixture::new(&args, stdin_closed.clone()),
        raw_results: raw_results.clone(),
    };
    let stdin = EofSignal {
        inner: tokio::io::stdin(),
        eof: stdin_closed,
    };
    let transport = LineTransport::splicing(stdin, tokio::io::stdout(), raw_results, "client");

    let code = match rmcp::serve_server(service, transport).await {
        Ok(running) => match running.waiting().await {
            Ok(reason) => {
                tracing::info!(?reason, "service ended");
                0
            }
            Err(error) => {
                eprintln!("fixture: service task failed: {error}");
                1
            }
        },
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => 0,
        Err(error) => {
            eprintln!("fixture: initialization failed: {error}");
            1
        }
    };
    linger(args.linger_ms).await;
    // Exit explicitly: the runtime would otherwise wait for stdin's blocking reader thread.
    std::process::exit(code);
}
