//! The MCP server rmcp runs for loom's client.
//!
//! [`GatewayService`] takes the requests whose answers pass through raw (tool calls, resource
//! reads, prompts, completions); everything else goes to [`GatewayHandler`], a plain rmcp
//! `ServerHandler` that answers from the exposed catalog.

#![allow(deprecated)] // resources/subscribe and logging are legacy-only but clients use them.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequest, ClientRequest, ErrorCode, GetPromptRequest, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams, Reference,
    ServerCapabilities, ServerConfig, ServerResult, SetLevelRequestParams, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, Service, ServiceRole};

use super::era::Era;
use super::forward::Forwarded;
use super::input::{Call, Reply};
use super::{Gateway, discovery};
use crate::tools;

use crate::wire::TASK_METHOD_PREFIX;

/// Answers everything that is not passed through raw.
#[derive(Clone)]
pub(super) struct GatewayHandler(pub Arc<Gateway>);

/// What rmcp serves: raw passthrough first, the typed handler for the rest.
#[derive(Clone)]
pub struct GatewayService {
    gateway: Arc<Gateway>,
    handler: GatewayHandler,
}

impl GatewayService {
    pub fn new(gateway: Arc<Gateway>) -> Self {
        Self {
            handler: GatewayHandler(gateway.clone()),
            gateway,
        }
    }
}

pub(super) fn unknown_tool(gateway: &Gateway, name: &str) -> McpError {
    let catalog = gateway.exposed();
    // The same suggestions as loom_call's (a dropped server prefix, a typo, a doubled prefix).
    let close = super::search::closest_names(name, catalog.tool_names(), 3);
    let hint = if close.is_empty() {
        "call tools/list for the current names".to_string()
    } else {
        format!("did you mean {}?", close.join(", "))
    };
    McpError::invalid_params(format!("unknown tool `{name}`; {hint}"), None)
}

/// A `resources/read` answer of a renamed `ui://` URI with its contents named as loom exposes
/// them (`from` → `to`), so the host finds the page under the URI it asked for (SPEC §5.4).
fn with_contents_uri(forwarded: Forwarded, from: &str, to: &str) -> Forwarded {
    let mut value = match &forwarded {
        Forwarded::Raw(raw) => match serde_json::from_str::<serde_json::Value>(raw.get()) {
            Ok(value) => value,
            Err(_) => return forwarded,
        },
        Forwarded::Typed(typed) => match serde_json::to_value(typed.as_ref()) {
            Ok(value) => value,
            Err(_) => return forwarded,
        },
    };
    if let Some(contents) = value
        .get_mut("contents")
        .and_then(serde_json::Value::as_array_mut)
    {
        for content in contents {
            if content.get("uri").and_then(serde_json::Value::as_str) == Some(from) {
                content["uri"] = serde_json::Value::String(to.to_string());
            }
        }
    }
    match serde_json::value::to_raw_value(&value) {
        Ok(raw) => Forwarded::Raw(raw),
        Err(_) => forwarded,
    }
}

/// The `requestState` of a retry that answers loom's questions, if the request is one (SPEC
/// §5.11). `inputResponses` without a state answer nothing loom asked.
fn input_round<'a>(
    state: &'a Option<String>,
    responses: &Option<rmcp::model::InputResponses>,
) -> Result<Option<&'a str>, McpError> {
    match (state, responses) {
        (Some(state), _) => Ok(Some(state)),
        (None, Some(_)) => Err(McpError::invalid_params(
            "loom: `inputResponses` without `requestState`: loom asked for no input on this \
             call (send them with the `requestState` of the `input_required` result they answer)",
            None,
        )),
        (None, None) => Ok(None),
    }
}

fn is_standard_method(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "ping"
            | "server/discover"
            | "tools/list"
            | "tools/call"
            | "resources/list"
            | "resources/read"
            | "resources/templates/list"
            | "resources/subscribe"
            | "resources/unsubscribe"
            | "prompts/list"
            | "prompts/get"
            | "completion/complete"
            | "logging/setLevel"
    )
}

impl Service<RoleServer> for GatewayService {
    async fn handle_request(
        &self,
        request: <RoleServer as ServiceRole>::PeerReq,
        context: RequestContext<RoleServer>,
    ) -> Result<<RoleServer as ServiceRole>::Resp, McpError> {
        if self.gateway.upstream().get().is_none() {
            self.gateway.upstream().set(context.peer.clone());
        }
        // `initialize` is answered in the handshake's shape whatever version it asks for: a
        // client may ask for 2026-07-28 there (rmcp's default does) and is answered 2025-11-25.
        let era = if matches!(request, ClientRequest::InitializeRequest(_)) {
            Era::Initialize
        } else {
            Era::of_request(&context)
        };
        let observed = self.gateway.observe(&request, &context);
        if let Err(error) = super::era::check_request(&request, &context) {
            let error = era.shape_error(error);
            if let Some(observed) = observed {
                observed.finish(crate::telemetry::Outcome::Error(error.code.0), None);
            }
            return Err(error);
        }
        let predates_links = Era::request_predates_resource_links(&context);
        let answer = crate::telemetry::within(observed.clone(), self.route(request, context))
            .await
            .map(|result| era.shape_built(result))
            .map(|result| match predates_links {
                true => super::era::built_without_resource_links(result),
                false => result,
            })
            .map_err(|error| era.shape_error(error));
        if let Some(observed) = observed {
            if let Ok(ServerResult::InitializeResult(initialized)) = &answer {
                observed.note_version(initialized.protocol_version.as_str());
            }
            let (outcome, bytes) = super::observe::ending(&answer);
            observed.finish(outcome, bytes);
        }
        answer
    }

    async fn handle_notification(
        &self,
        notification: <RoleServer as ServiceRole>::PeerNot,
        context: NotificationContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.handler
            .handle_notification(notification, context)
            .await
    }

    fn get_info(&self) -> <RoleServer as ServiceRole>::Info {
        ServerHandler::get_info(&self.handler)
    }
}

impl GatewayService {
    async fn route(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, McpError> {
        let gateway = &self.gateway;
        match request {
            ClientRequest::CallToolRequest(CallToolRequest { params, .. })
                if params.name == discovery::CALL =>
            {
                let (tool, arguments) = match gateway.call_target(&params.arguments) {
                    Ok(target) => target,
                    Err(error) => {
                        return Ok(
                            gateway.answered_own(discovery::CALL, tools::error_result(error))
                        );
                    }
                };
                let mut inner = params.clone();
                inner.name = tool.into();
                inner.arguments = arguments;
                Box::pin(self.route(
                    ClientRequest::CallToolRequest(CallToolRequest::new(inner)),
                    context,
                ))
                .await
            }
            ClientRequest::CallToolRequest(CallToolRequest { params, .. })
                if matches!(
                    params.name.as_ref(),
                    discovery::FIND | discovery::CATEGORIES | discovery::STATS
                ) =>
            {
                let result = match params.name.as_ref() {
                    discovery::FIND => gateway.find_tools(&params.arguments).await,
                    discovery::CATEGORIES => gateway.tool_categories(),
                    _ => gateway.stats_now(),
                };
                Ok(gateway.answered_own(&params.name, result))
            }
            ClientRequest::CallToolRequest(CallToolRequest { params, .. })
                if tools::NAMES.contains(&params.name.as_ref()) =>
            {
                let result = gateway.call_own_tool(&params.name, &params.arguments).await;
                Ok(gateway.answered_own(&params.name, result))
            }
            ClientRequest::CallToolRequest(CallToolRequest { params, .. }) => {
                // The exposed name; else a server's own tool name that only one server has (an
                // MCP Apps view calls its server's tools by them, SPEC §8.5); else, for a retry,
                // where the tool led when the call was made (it may have left the catalog).
                let resolve = |exposed: &super::ExposedCatalog| {
                    exposed
                        .tool_route(&params.name)
                        .or_else(|| exposed.own_name_route(&params.name))
                        .cloned()
                        .or_else(|| {
                            params.request_state.as_deref().and_then(|state| {
                                gateway.protocol.waiting_route(state, &params.name)
                            })
                        })
                };
                let mut exposed = gateway.exposed();
                let mut route = resolve(&exposed);
                if route.is_none() {
                    gateway.wait_while_starting(&params.name).await;
                    // A connection came up (or went to wait for a login) since the catalog was
                    // built: listed as it is now (the rebuild loop then finds nothing to tell).
                    // A login another instance of a cluster made for this subject (§25).
                    let adopted = gateway.login_needed_for(&params.name).is_some()
                        && gateway.adopt_shared_login(&params.name).await;
                    if adopted || gateway.catalog_is_stale() {
                        gateway.rebuild();
                        exposed = gateway.exposed();
                        route = resolve(&exposed);
                    }
                }
                let Some(route) = route else {
                    if let Some(message) = gateway.login_needed_for(&params.name) {
                        if let Some(answer) = gateway.offer_login_for(&params, &context).await {
                            return Ok(answer);
                        }
                        return Ok(ServerResult::CallToolResult(crate::tools::error_result(
                            format!("loom: {message}"),
                        )));
                    }
                    return Err(unknown_tool(gateway, &params.name));
                };
                let route = &route;
                let server = gateway.hub.servers()[route.server].name().to_string();
                let what = format!("tool `{}`", route.name);
                let call = Call {
                    method: "tools/call",
                    target: params.name.to_string(),
                    arguments: params.arguments.clone().map(serde_json::Value::Object),
                    route: Some(route.clone()),
                };
                let reply = match input_round(&params.request_state, &params.input_responses)? {
                    Some(state) => {
                        gateway
                            .resume(state, params.input_responses.as_ref(), call, &context)
                            .await?
                    }
                    // A tool that only runs as a task, for a client that cannot take one as
                    // this request was made (SPEC §5.10).
                    None if exposed.route_runs_only_as_task(route)
                        && !Era::request_has_tasks(&context) =>
                    {
                        if Era::of_request(&context) == Era::Discover
                            && super::task_extension::declares_tasks(&context)
                        {
                            return match gateway
                                .create_extension_task(route, params.arguments.as_ref(), &context)
                                .await
                            {
                                Ok(result) => Ok(result),
                                Err(e) => e.into_call_answer(&server, &what),
                            };
                        }
                        gateway
                            .run_task(route, params.arguments.as_ref(), &context, call)
                            .await
                    }
                    None => {
                        let mut down = params.clone();
                        down.name = route.name.clone().into();
                        down.meta = None;
                        let request = ClientRequest::CallToolRequest(CallToolRequest::new(down));
                        gateway.call(route.server, request, &context, call).await
                    }
                };
                // The server wants a login again (a step-up, a refused refresh): offered as to a
                // call made while it waited for one (SPEC §4.7).
                if reply.is_err()
                    && gateway.lost_login(route.server).await
                    && let Some(answer) = gateway.offer_login_for(&params, &context).await
                {
                    return Ok(answer);
                }
                let answer = match reply {
                    Ok(Reply::Done(Forwarded::Raw(raw))) => {
                        let origin = gateway.origin_of(route, params.arguments.as_ref());
                        Ok(gateway.intercept(raw, origin, &context).await)
                    }
                    Ok(Reply::Done(typed)) => Ok(gateway.pass_on(typed, &context, false)),
                    Ok(Reply::Input(result)) => Ok(*result),
                    // The server's JSON-RPC error as it came; loom's own as `isError`.
                    Err(e) => e.into_call_answer(&server, &what),
                };
                // The call's progress and log lines go out before its answer, as directly.
                gateway.notes_drained().await;
                answer
            }
            // Tool definitions are carried as the servers wrote them (rmcp's typed `Tool` would
            // drop fields it does not know), so the list is written raw too.
            ClientRequest::ListToolsRequest(_) => {
                gateway.settle().await;
                let exposed = gateway.exposed();
                let visible = gateway.visible_tools(&exposed);
                let tools = match Era::request_has_tasks(&context) {
                    true => serde_json::json!({"tools": visible}),
                    // A version without 2025-11-25 tasks: tools lose `execution`; one that
                    // only runs as a task is run as one by loom (SPEC §5.10).
                    false => serde_json::json!({"tools": visible
                        .iter()
                        .map(|tool| {
                            let mut tool = (*tool).clone();
                            tool.remove("execution");
                            tool
                        })
                        .collect::<Vec<_>>()}),
                };
                match serde_json::value::to_raw_value(&tools) {
                    Ok(raw) => {
                        let seen = tools["tools"].as_array().map_or(0, Vec::len);
                        gateway
                            .stats()
                            .listed(seen, crate::report::Size::of(raw.get()));
                        Ok(gateway.pass_on(Forwarded::Raw(raw), &context, true))
                    }
                    Err(e) => Err(McpError::internal_error(format!("tools/list: {e}"), None)),
                }
            }
            ClientRequest::ReadResourceRequest(read)
                if read.params.uri == crate::tools::view::VIEW_URI =>
            {
                Ok(gateway.pass_on(
                    Forwarded::Typed(Box::new(ServerResult::ReadResourceResult(
                        crate::tools::view::read(),
                    ))),
                    &context,
                    true,
                ))
            }
            ClientRequest::ReadResourceRequest(mut read) => {
                let uri = read.params.uri.clone();
                let exposed = gateway.exposed();
                // A `ui://` URI loom renamed (two servers use it) is read under the server's own.
                let original = exposed.original_uri(&uri).map(str::to_string);
                let Some(owner) = exposed.resource_owner(&uri) else {
                    return Err(McpError::resource_not_found(
                        format!(
                            "no server lists the resource `{uri}`; call resources/list or \
                             resources/templates/list for what is available"
                        ),
                        None,
                    ));
                };
                let server = gateway.hub.servers()[owner].name().to_string();
                let call = Call {
                    method: "resources/read",
                    target: uri.clone(),
                    arguments: None,
                    route: None,
                };
                let reply =
                    match input_round(&read.params.request_state, &read.params.input_responses)? {
                        Some(state) => {
                            let responses = read.params.input_responses.clone();
                            gateway
                                .resume(state, responses.as_ref(), call, &context)
                                .await?
                        }
                        None => {
                            read.params.meta = None;
                            if let Some(original) = &original {
                                read.params.uri = original.clone();
                            }
                            let request = ClientRequest::ReadResourceRequest(read);
                            gateway.call(owner, request, &context, call).await
                        }
                    };
                match reply {
                    Ok(Reply::Done(forwarded)) => {
                        let forwarded = match &original {
                            Some(original) => with_contents_uri(forwarded, original, &uri),
                            None => forwarded,
                        };
                        Ok(gateway.pass_on(forwarded, &context, true))
                    }
                    Ok(Reply::Input(result)) => Ok(*result),
                    Err(e) => Err(e.into_rpc_error(&server, &format!("resource `{uri}`"))),
                }
            }
            ClientRequest::GetPromptRequest(GetPromptRequest { params, .. }) => {
                let exposed = gateway.exposed();
                let Some(route) = exposed.prompt_route(&params.name) else {
                    return Err(McpError::invalid_params(
                        format!(
                            "unknown prompt `{}`; call prompts/list for the names",
                            params.name
                        ),
                        None,
                    ));
                };
                let server = gateway.hub.servers()[route.server].name().to_string();
                let call = Call {
                    method: "prompts/get",
                    target: params.name.clone(),
                    arguments: params.arguments.clone().map(serde_json::Value::Object),
                    route: None,
                };
                let reply = match input_round(&params.request_state, &params.input_responses)? {
                    Some(state) => {
                        gateway
                            .resume(state, params.input_responses.as_ref(), call, &context)
                            .await?
                    }
                    None => {
                        let mut down = params.clone();
                        down.name = route.name.clone();
                        down.meta = None;
                        let request = ClientRequest::GetPromptRequest(GetPromptRequest::new(down));
                        gateway.call(route.server, request, &context, call).await
                    }
                };
                match reply {
                    Ok(Reply::Done(forwarded)) => Ok(gateway.pass_on(forwarded, &context, false)),
                    Ok(Reply::Input(result)) => Ok(*result),
                    Err(e) => Err(e.into_rpc_error(&server, &format!("prompt `{}`", route.name))),
                }
            }
            ClientRequest::CompleteRequest(mut complete) => {
                let exposed = gateway.exposed();
                let target = match &mut complete.params.r#ref {
                    Reference::Prompt(prompt) => {
                        exposed.prompt_route(&prompt.name).cloned().map(|route| {
                            prompt.name = route.name;
                            route.server
                        })
                    }
                    Reference::Resource(resource) => exposed.resource_owner(&resource.uri),
                    _ => None,
                };
                let Some(owner) = target else {
                    return Err(McpError::invalid_params(
                        "completion refers to no prompt or resource loom exposes",
                        None,
                    ));
                };
                complete.params.meta = None;
                let server = gateway.hub.servers()[owner].name().to_string();
                gateway
                    .forward(owner, ClientRequest::CompleteRequest(complete), &context)
                    .await
                    .map(|f| gateway.pass_on(f, &context, false))
                    .map_err(|e| e.into_rpc_error(&server, "completion"))
            }
            ClientRequest::CustomRequest(custom)
                if custom.method.starts_with(TASK_METHOD_PREFIX) =>
            {
                let method = &custom.method[TASK_METHOD_PREFIX.len()..];
                if method == "tools/call" && !Era::request_has_tasks(&context) {
                    // A version without 2025-11-25 tasks: a plain call, as before.
                    let mut params = custom.params.clone().unwrap_or_default();
                    if let Some(params) = params.as_object_mut() {
                        params.remove("task");
                    }
                    let params = serde_json::from_value(params).map_err(|_| {
                        McpError::invalid_params(
                            "malformed `tools/call` request: its params do not match the MCP schema",
                            None,
                        )
                    })?;
                    return Box::pin(self.route(
                        ClientRequest::CallToolRequest(CallToolRequest::new(params)),
                        context,
                    ))
                    .await;
                }
                gateway.task_request(method, custom.params, &context).await
            }
            // rmcp decodes a standard method with malformed params as a custom request; say
            // what is wrong instead of "method not found".
            ClientRequest::CustomRequest(custom) if is_standard_method(&custom.method) => {
                Err(McpError::invalid_params(
                    format!(
                        "malformed `{}` request: its params do not match the MCP schema",
                        custom.method
                    ),
                    None,
                ))
            }
            other => self.handler.handle_request(other, context).await,
        }
    }
}

impl ServerHandler for GatewayHandler {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_completions()
            .enable_logging()
            .build();
        let mut instructions = String::from(
            "loom is a gateway: the tools, prompts and resources below come from several MCP \
             servers. Tool and prompt names are `<server>_<name>`.",
        );
        if self.0.config().tools.mode == crate::config::ToolsMode::Search {
            instructions.push_str(
                " Most tools are not listed: loom_tool_categories says what each server offers, \
                 loom_find_tools finds tools by what they do, and any tool can be called by name \
                 or through loom_call.",
            );
        }
        for server in self.0.servers() {
            let name = server.name();
            let state = server.state();
            instructions.push_str(&format!("\n- {name}: {state}"));
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("loom", env!("CARGO_PKG_VERSION")))
            .with_instructions(instructions)
    }

    /// rmcp's discovery answer, with the tasks extension declared when a server behind loom
    /// offers task tools (SPEC §5.10).
    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::DiscoverResult, McpError> {
        let mut info = ServerHandler::get_info(self);
        if self.0.offers_tasks() {
            info.capabilities
                .extensions
                .get_or_insert_with(Default::default)
                .insert(
                    super::task_extension::TASKS_EXTENSION.into(),
                    Default::default(),
                );
        }
        Ok(rmcp::model::DiscoverResult::from_server_info(
            ServerHandler::supported_protocol_versions(self).into_owned(),
            info,
        ))
    }

    /// `subscriptions/listen` (2026-07-28): list changes are always offered; a resource URI is
    /// accepted when a server can take a subscription to it (the one that lists it, or any
    /// server that declares `resources.subscribe` for a URI no server lists). SPEC §5.9.
    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        let mut accepted = requested.clone();
        if let Some(uris) = &requested.resource_subscriptions {
            accepted.resource_subscriptions = Some(
                uris.iter()
                    .filter(|uri| !self.0.subscription_targets(uri).is_empty())
                    .cloned()
                    .collect(),
            );
        }
        Some(accepted)
    }

    /// One listen stream, until the client ends it: its sink gets this session's list changes
    /// and the updates of its resources; the servers are asked for those resources' updates
    /// while any stream or legacy subscription of any session wants them.
    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), McpError> {
        let uris = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        for uri in &uris {
            if self.0.listen_to(uri) {
                let request = SubscribeRequestParams::new(uri.clone());
                let outcome = self
                    .on_subscribers(uri, Change::Subscribe, "refused the subscription", |peer| {
                        let request = request.clone();
                        async move { peer.subscribe(request).await }
                    })
                    .await;
                if let Err(error) = outcome {
                    tracing::warn!(%uri, "subscriptions/listen: {}", error.message);
                }
            }
        }
        let Some(listener) = self.0.add_listener(context.sink().clone()) else {
            return Err(McpError::internal_error(
                format!(
                    "loom: this client has {} listen streams open already; end one first",
                    super::MAX_LISTENERS
                ),
                None,
            ));
        };
        tokio::select! {
            () = context.cancelled() => {}
            () = self.0.client_gone.cancelled() => {}
            () = self.0.shutdown.cancelled() => {}
        }
        self.0.remove_listener(listener);
        for uri in &uris {
            if self.0.stop_listening_to(uri) {
                let request = UnsubscribeRequestParams::new(uri.clone());
                let _ = self
                    .on_subscribers(uri, Change::Unsubscribe, "refused to unsubscribe", |peer| {
                        let request = request.clone();
                        async move { peer.unsubscribe(request).await }
                    })
                    .await;
            }
        }
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.0.upstream().set(context.peer);
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(
            self.0.exposed().prompts.clone(),
        ))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(ListResourcesResult::with_all_items(
            self.0.exposed().resources.clone(),
        ))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(
            self.0.exposed().templates.clone(),
        ))
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let uri = request.uri.clone();
        // Other sessions may hold the same subscription; the server is asked once, and updates
        // reach only the sessions that subscribed (SPEC §22).
        if !self.0.subscribe(&uri) {
            return Ok(());
        }
        let outcome = self
            .on_subscribers(
                &uri,
                Change::Subscribe,
                "refused the subscription",
                |peer| {
                    let request = request.clone();
                    async move { peer.subscribe(request).await }
                },
            )
            .await;
        if outcome.is_err() {
            self.0.unsubscribe(&uri);
        }
        outcome
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let uri = request.uri.clone();
        if !self.0.unsubscribe(&uri) {
            // This session was not subscribed; another session's subscription is not its to end.
            return Ok(());
        }
        self.on_subscribers(
            &uri,
            Change::Unsubscribe,
            "refused to unsubscribe",
            |peer| {
                let request = request.clone();
                async move { peer.unsubscribe(request).await }
            },
        )
        .await
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // 2026-07-28 servers take the level with each request (SPEC §4.6).
        self.0.protocol.set_legacy_log_level(request.level);
        // Every server that logs gets the level; one that does not is not an error.
        for server in self.0.servers() {
            let declares_logging = server
                .catalog()
                .capabilities
                .as_ref()
                .is_some_and(|c| c.logging.is_some());
            if let (true, Ok(live)) = (declares_logging, server.live())
                && !live.modern
            {
                self.0.hub().log_level_set(server.key, &request.level);
                let _ = live.peer.set_level(request.clone()).await;
            }
        }
        Ok(())
    }
}

/// What a session asks of the connections a resource's updates come from.
#[derive(Clone, Copy)]
enum Change {
    Subscribe,
    Unsubscribe,
}

impl GatewayHandler {
    /// Where a `resources/subscribe` (or `unsubscribe`) for `uri` goes (SPEC §5.4): the server
    /// that lists the URI or whose template matches it; a URI no server lists goes to every
    /// server that declared `resources.subscribe` (a server may publish updates for resources it
    /// does not list, e.g. ones it creates later), all of them at once, each within its
    /// `callTimeoutMs`. The request succeeds when one of them accepts it.
    async fn on_subscribers<F, Fut>(
        &self,
        uri: &str,
        change: Change,
        refused: &str,
        send: F,
    ) -> Result<(), McpError>
    where
        F: Fn(rmcp::Peer<rmcp::RoleClient>) -> Fut,
        Fut: std::future::Future<Output = Result<(), rmcp::ServiceError>>,
    {
        // An unsubscription goes where this session's subscription was counted (the servers it
        // reaches, or what they list, may have changed since).
        let targets = match change {
            Change::Subscribe => self.0.subscription_targets(uri),
            Change::Unsubscribe => self.0.take_subscribed_connections(uri),
        };
        if targets.is_empty() && matches!(change, Change::Unsubscribe) {
            return Ok(());
        }
        if targets.is_empty() {
            return Err(McpError::resource_not_found(
                format!(
                    "no server lists the resource `{uri}` and none accepts subscriptions to \
                     resources it does not list; call resources/list or resources/templates/list \
                     for what is available"
                ),
                None,
            ));
        }
        // Every target gets it, at once, each within its callTimeoutMs — a connection once for
        // all the sessions that subscribed there: the first subscription is sent, the last
        // unsubscription too, the others are counted.
        let hub = self.0.hub().clone();
        let attempts = targets.into_iter().map(|server| {
            let timeout = std::time::Duration::from_millis(server.config.call_timeout_ms);
            let due = match change {
                Change::Subscribe => hub.subscribed(server.key, uri),
                Change::Unsubscribe => hub.unsubscribed(server.key, uri),
            };
            let sent = due.then(|| server.live().map(|live| send(live.peer.clone())));
            let hub = hub.clone();
            let key = server.key;
            async move {
                let Some(sent) = sent else {
                    return (key, Ok(()));
                };
                let outcome = match sent {
                    Ok(sending) => match tokio::time::timeout(timeout, sending).await {
                        Ok(Ok(())) => Ok(()),
                        Ok(Err(e)) => Err(format!("server `{}` {refused}: {e}", server.name())),
                        Err(_) => Err(format!(
                            "server `{}` did not answer within {} ms",
                            server.name(),
                            timeout.as_millis()
                        )),
                    },
                    Err(state) => Err(format!("server `{}` is {state}", server.name())),
                };
                // A subscription the connection did not take is not counted there.
                if outcome.is_err() && matches!(change, Change::Subscribe) {
                    hub.unsubscribed(server.key, uri);
                }
                (key, outcome)
            }
        });
        let outcomes = futures::future::join_all(attempts).await;
        if matches!(change, Change::Subscribe) {
            self.0.counted_subscription(
                uri,
                outcomes
                    .iter()
                    .filter(|(_, outcome)| outcome.is_ok())
                    .map(|(key, _)| *key)
                    .collect(),
            );
        }
        if outcomes.iter().any(|(_, outcome)| outcome.is_ok()) {
            return Ok(());
        }
        let failures: Vec<String> = outcomes
            .into_iter()
            .filter_map(|(_, outcome)| outcome.err())
            .collect();
        Err(McpError::new(
            ErrorCode::INTERNAL_ERROR,
            format!("loom: {}", failures.join("; ")),
            None,
        ))
    }
}
