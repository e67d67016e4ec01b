//! The protocol era a client speaks decides a few members of every result loom sends it. This is
//! the one place that decides them, for results passed through raw and results loom builds
//! (envelopes, reduced results, errors it makes up, its own tools' answers) alike (SPEC §5.7).
//!
//! - The `initialize` era (2024-11-05 … 2025-11-25) knows no `resultType`, and tool output must
//!   be an object.
//! - The `server/discover` era (2026-07-28 and later) requires `resultType` on every result,
//!   `ttlMs`/`cacheScope` on cacheable ones, and reports an unknown resource as invalid params.

use rmcp::ErrorData as McpError;
use rmcp::model::{
    ClientRequest, ContentBlock, CustomResult, ErrorCode, ProtocolVersion, ResultType, ServerResult,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::value::RawValue;

/// The `_meta` key of the server's identity on every 2026-07-28 result.
pub(crate) const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// loom's identity, as 2026-07-28 results carry it in `_meta`.
pub(crate) fn server_info() -> serde_json::Value {
    serde_json::json!({"name": "loom", "version": env!("CARGO_PKG_VERSION")})
}

/// Methods the 2026-07-28 revision removed (`ping`, `logging/setLevel`, resource subscriptions:
/// `subscriptions/listen` and the per-request `logLevel` replace them).
const REMOVED_IN_2026: &[&str] = &[
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// Whether a 2026-07-28 client's `method` is one that revision (with the tasks extension) does
/// not have: answered -32601, before anything else about the request is checked.
pub(crate) fn absent_in_2026(method: &str) -> bool {
    REMOVED_IN_2026.contains(&method)
        || matches!(method, "initialize" | "tasks/result" | "tasks/list")
}

/// What rmcp checks before it dispatches a request itself, done for every request loom answers
/// (most never reach rmcp's own dispatch): a protocol version in `_meta` that loom does not
/// know is -32022; a request of the 2026-07-28 lifecycle (it names that version, or the
/// session was opened without `initialize`) must carry `protocolVersion` and
/// `clientCapabilities` in its `_meta` (-32602); a method that revision removed is -32601
/// (SPEC §5.1).
pub(crate) fn check_request(
    request: &ClientRequest,
    context: &RequestContext<RoleServer>,
) -> Result<(), McpError> {
    if matches!(request, ClientRequest::InitializeRequest(_)) {
        return Ok(());
    }
    let requested = context.meta.protocol_version();
    if let Some(version) = &requested
        && !ProtocolVersion::KNOWN_VERSIONS.contains(version)
    {
        return Err(McpError::unsupported_protocol_version(
            version.clone(),
            ProtocolVersion::KNOWN_VERSIONS,
        ));
    }
    let inline = matches!(request, ClientRequest::DiscoverRequest(_))
        || context.peer.peer_info().is_none()
        || requested
            .as_ref()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
    if inline {
        let missing = context
            .meta
            .missing_required_keys(&ProtocolVersion::V_2026_07_28);
        if !missing.is_empty() {
            return Err(McpError::invalid_params(
                format!(
                    "request _meta is missing or has malformed required fields: {}",
                    missing.join(", ")
                ),
                None,
            ));
        }
    }
    let method = request.method();
    if Era::of_request(context) == Era::Discover && REMOVED_IN_2026.contains(&method) {
        return Err(McpError::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!(
                "`{method}` does not exist in protocol 2026-07-28 (resource updates and list \
                 changes come through subscriptions/listen, the log level with each request's \
                 `io.modelcontextprotocol/logLevel`)"
            ),
            None,
        ));
    }
    Ok(())
}

/// The two shapes of MCP results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Era {
    /// Negotiated with `initialize` (2024-11-05 … 2025-11-25), or not negotiated yet.
    Initialize,
    /// 2026-07-28 or later, negotiated with `server/discover`.
    Discover,
}

impl Era {
    pub(crate) fn of(version: Option<&ProtocolVersion>) -> Self {
        // Versions are dates: they compare as strings.
        match version {
            Some(v) if v.as_str() >= ProtocolVersion::V_2026_07_28.as_str() => Self::Discover,
            _ => Self::Initialize,
        }
    }

    pub(crate) fn of_request(context: &RequestContext<RoleServer>) -> Self {
        Self::of(context.protocol_version().as_ref())
    }

    /// Whether MCP tasks as loom proxies them exist in `version`: 2025-11-25 introduced them,
    /// 2026-07-28 moved them into an extension of another shape (SPEC §5.10).
    pub(crate) fn has_tasks(version: Option<&str>) -> bool {
        version.is_some_and(|v| {
            v >= ProtocolVersion::V_2025_11_25.as_str()
                && v < ProtocolVersion::V_2026_07_28.as_str()
        })
    }

    /// Whether the client of this request predates `resource_link` blocks
    /// ([`predates_resource_links`]).
    pub(crate) fn request_predates_resource_links(context: &RequestContext<RoleServer>) -> bool {
        predates_resource_links(context.protocol_version().as_ref().map(|v| v.as_str()))
    }

    pub(crate) fn request_has_tasks(context: &RequestContext<RoleServer>) -> bool {
        Self::has_tasks(context.protocol_version().as_ref().map(|v| v.as_str()))
    }

    /// A result loom built (or rmcp decoded), shaped for this era: `resultType: "complete"` and
    /// cache hints added for 2026-07-28; `resultType` and non-object tool output removed before
    /// it. A raw placeholder (`CustomResult`) is left alone: [`Era::shape_raw`] shaped its bytes.
    pub(crate) fn shape_built(self, mut result: ServerResult) -> ServerResult {
        // The placeholder of a raw result: `shape_raw` shaped its bytes.
        if matches!(
            &result,
            ServerResult::CustomResult(CustomResult(serde_json::Value::Null))
        ) {
            return result;
        }
        match self {
            Self::Discover => {
                // An empty result (`ping`, `logging/setLevel`, subscriptions) is still a result
                // of this revision, which requires `resultType` on every one.
                if matches!(result, ServerResult::EmptyResult(_)) {
                    result = ServerResult::CustomResult(CustomResult(
                        serde_json::json!({"resultType": "complete"}),
                    ));
                }
                if let Some(slot) = result_type_slot(&mut result) {
                    slot.get_or_insert(ResultType::COMPLETE);
                }
                result.fill_missing_cache_hints();
                return with_server_info(result);
            }
            Self::Initialize => {
                result.strip_result_type_for_legacy_peer();
                result.strip_non_object_output_for_legacy_peer();
            }
        }
        result
    }

    /// A JSON-RPC error loom sends: 2026-07-28 reports an unknown resource as invalid params
    /// (-32602), older versions as -32002.
    pub(crate) fn shape_error(self, mut error: McpError) -> McpError {
        if self == Self::Discover && error.code == ErrorCode::RESOURCE_NOT_FOUND {
            error.code = ErrorCode::INVALID_PARAMS;
        }
        error
    }

    /// A downstream result passed through as bytes. Downstream servers speak the `initialize`
    /// era, so for a 2026-07-28 client the members that revision requires and an older server
    /// never sends are inserted at the front — `"resultType":"complete"`, and for cacheable
    /// results `"ttlMs":0` and `"cacheScope":"private"` (loom promises no caching for a server
    /// that said nothing) — and every byte the server sent is kept after them.
    pub(crate) fn shape_raw(self, raw: Box<RawValue>, cacheable: bool) -> Box<RawValue> {
        match self {
            Self::Discover => complete_for_2026(raw, cacheable),
            // Only a 2026-07-28 server writes these; a client of an older version connected to
            // it directly would not get them (strict clients refuse `resultType`).
            Self::Initialize
                if memchr::memmem::find(raw.get().as_bytes(), b"\"resultType\"").is_some() =>
            {
                without_members(raw, &["resultType", "ttlMs", "cacheScope"])
            }
            Self::Initialize => raw,
        }
    }
}

/// The first protocol version with `resource_link` content blocks.
const RESOURCE_LINKS_SINCE: &str = "2025-06-18";

/// Whether a client of protocol `version` predates `resource_link` content blocks (2024-11-05,
/// 2025-03-26): servers speak a newer version to loom than such a client does, and a strict
/// client of those versions refuses a block kind it does not know.
pub(crate) fn predates_resource_links(version: Option<&str>) -> bool {
    version.is_some_and(|v| v < RESOURCE_LINKS_SINCE)
}

/// A `resource_link` block as a client that predates them can take it: a text block whose text
/// is the link's own JSON (every member kept, so nothing the server said is lost or altered).
fn link_as_text(link: &str) -> String {
    serde_json::json!({"type": "text", "text": link}).to_string()
}

/// A passed-through result for a client that predates `resource_link` blocks (SPEC §5.7): each
/// such block of a tool result's `content` or a prompt message's `content` becomes
/// [`link_as_text`]; every other byte is the server's.
pub(crate) fn raw_without_resource_links(raw: Box<RawValue>) -> Box<RawValue> {
    if memchr::memmem::find(raw.get().as_bytes(), b"resource_link").is_none() {
        return raw;
    }
    let rewritten = with_members_rewritten(&raw, |key, value| match key {
        "content" => blocks_without_links(value),
        "messages" => messages_without_links(value),
        _ => None,
    });
    rewritten
        .and_then(|text| RawValue::from_string(text).ok())
        .unwrap_or(raw)
}

/// The object `object` with the members `rewrite` gives new text for (`None`: kept as they are),
/// every other member's bytes kept; `None` when nothing was rewritten or it is not an object.
fn with_members_rewritten(
    object: &RawValue,
    rewrite: impl Fn(&str, &RawValue) -> Option<String>,
) -> Option<String> {
    let Ordered(members) = serde_json::from_str::<Ordered<'_>>(object.get()).ok()?;
    let mut changed = false;
    let mut out = String::with_capacity(object.get().len() + 64);
    out.push('{');
    for (n, (key, value)) in members.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::to_string(key).unwrap_or_default());
        out.push(':');
        let new = rewrite(key, value);
        changed |= new.is_some();
        out.push_str(new.as_deref().unwrap_or(value.get()));
    }
    out.push('}');
    changed.then_some(out)
}

/// The block itself rewritten when it is a `resource_link`.
fn block_without_link(block: &RawValue) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Kind<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Option<std::borrow::Cow<'a, str>>,
    }
    let kind = serde_json::from_str::<Kind<'_>>(block.get()).ok()?;
    (kind.kind.as_deref() == Some("resource_link")).then(|| link_as_text(block.get()))
}

/// A `content` array with its links rewritten, or `None` when none was.
fn blocks_without_links(content: &RawValue) -> Option<String> {
    let blocks = serde_json::from_str::<Vec<&RawValue>>(content.get()).ok()?;
    let rewritten: Vec<Option<String>> = blocks.iter().map(|b| block_without_link(b)).collect();
    joined_if_any(&blocks, &rewritten)
}

/// A prompt's `messages` with each message's link rewritten, or `None` when none was.
fn messages_without_links(messages: &RawValue) -> Option<String> {
    let list = serde_json::from_str::<Vec<&RawValue>>(messages.get()).ok()?;
    let rewritten: Vec<Option<String>> = list
        .iter()
        .map(|message| {
            with_members_rewritten(message, |key, value| {
                (key == "content")
                    .then(|| block_without_link(value))
                    .flatten()
            })
        })
        .collect();
    joined_if_any(&list, &rewritten)
}

/// `[…]` of `items`, each replaced by its rewriting where it has one; `None` when none has.
fn joined_if_any(items: &[&RawValue], rewritten: &[Option<String>]) -> Option<String> {
    if rewritten.iter().all(Option::is_none) {
        return None;
    }
    let parts: Vec<&str> = items
        .iter()
        .zip(rewritten)
        .map(|(item, new)| new.as_deref().unwrap_or(item.get()))
        .collect();
    Some(format!("[{}]", parts.join(",")))
}

/// A result loom built, for a client that predates `resource_link` blocks: the same rewriting
/// as [`raw_without_resource_links`] on tool results and prompts.
pub(crate) fn built_without_resource_links(mut result: ServerResult) -> ServerResult {
    let as_text = |block: &mut ContentBlock| {
        if let ContentBlock::ResourceLink(link) = block
            && let Ok(json) = serde_json::to_string(&ContentBlock::ResourceLink(link.clone()))
        {
            *block = ContentBlock::text(json);
        }
    };
    match &mut result {
        ServerResult::CallToolResult(call) => call.content.iter_mut().for_each(as_text),
        ServerResult::GetPromptResult(prompt) => prompt
            .messages
            .iter_mut()
            .for_each(|m| as_text(&mut m.content)),
        _ => {}
    }
    result
}

/// An object's members in order, their values as text borrowed from it.
pub(crate) struct Ordered<'de>(pub Vec<(String, &'de RawValue)>);

impl<'de> serde::Deserialize<'de> for Ordered<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> serde::de::Visitor<'de> for Members {
            type Value = Ordered<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry::<String, &'de RawValue>()? {
                    members.push(member);
                }
                Ok(Ordered(members))
            }
        }
        deserializer.deserialize_map(Members)
    }
}

/// The object `raw` without the top-level members `names`; every other member keeps its bytes.
fn without_members(raw: Box<RawValue>, names: &[&str]) -> Box<RawValue> {
    let Ok(Ordered(members)) = serde_json::from_str::<Ordered<'_>>(raw.get()) else {
        return raw;
    };
    if !members.iter().any(|(key, _)| names.contains(&key.as_str())) {
        return raw;
    }
    let mut out = String::with_capacity(raw.get().len());
    out.push('{');
    for (key, value) in members
        .iter()
        .filter(|(key, _)| !names.contains(&key.as_str()))
    {
        if out.len() > 1 {
            out.push(',');
        }
        out.push_str(&serde_json::to_string(key).unwrap_or_default());
        out.push(':');
        out.push_str(value.get());
    }
    out.push('}');
    RawValue::from_string(out).unwrap_or(raw)
}

/// Whether a result is 2026-07-28's `input_required`.
pub(crate) fn is_input_required(raw: &RawValue) -> bool {
    #[derive(serde::Deserialize)]
    struct Kind<'a> {
        #[serde(rename = "resultType", borrow, default)]
        result_type: Option<std::borrow::Cow<'a, str>>,
    }
    memchr::memmem::find(raw.get().as_bytes(), b"input_required").is_some()
        && serde_json::from_str::<Kind<'_>>(raw.get())
            .is_ok_and(|k| k.result_type.as_deref() == Some("input_required"))
}

/// `result` with loom's `serverInfo` in its `_meta` (2026-07-28 results carry it; one already
/// there is kept).
fn with_server_info(result: ServerResult) -> ServerResult {
    let Ok(serde_json::Value::Object(mut object)) = serde_json::to_value(&result) else {
        return result;
    };
    let meta = object
        .entry("_meta")
        .or_insert_with(|| serde_json::Value::Object(Default::default()));
    match meta {
        serde_json::Value::Object(meta) => {
            meta.entry(SERVER_INFO).or_insert_with(server_info);
        }
        // A `_meta` that is not an object is the result's own business.
        _ => return result,
    }
    ServerResult::CustomResult(CustomResult(serde_json::Value::Object(object)))
}

/// The `resultType` member of results that have one as an option.
fn result_type_slot(result: &mut ServerResult) -> Option<&mut Option<ResultType>> {
    Some(match result {
        ServerResult::CompleteResult(r) => &mut r.result_type,
        ServerResult::GetPromptResult(r) => &mut r.result_type,
        ServerResult::ListPromptsResult(r) => &mut r.result_type,
        ServerResult::ListResourcesResult(r) => &mut r.result_type,
        ServerResult::ListResourceTemplatesResult(r) => &mut r.result_type,
        ServerResult::ReadResourceResult(r) => &mut r.result_type,
        ServerResult::ListToolsResult(r) => &mut r.result_type,
        ServerResult::CallToolResult(r) => &mut r.result_type,
        ServerResult::ListSkillsResult(r) => &mut r.result_type,
        ServerResult::GetSkillResult(r) => &mut r.result_type,
        _ => return None,
    })
}

/// Members a 2026-07-28 result must have and a server speaking an older version never sends.
#[derive(serde::Deserialize)]
struct Present<'a> {
    #[serde(rename = "resultType", default)]
    result_type: Option<serde::de::IgnoredAny>,
    #[serde(rename = "ttlMs", default)]
    ttl_ms: Option<serde::de::IgnoredAny>,
    #[serde(rename = "cacheScope", default)]
    cache_scope: Option<serde::de::IgnoredAny>,
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<&'a RawValue>,
}

/// The members of a `_meta` object, to see whether it names a server already.
#[derive(serde::Deserialize)]
struct MetaPresent {
    #[serde(rename = "io.modelcontextprotocol/serverInfo", default)]
    server_info: Option<serde::de::IgnoredAny>,
}

fn complete_for_2026(raw: Box<RawValue>, cacheable: bool) -> Box<RawValue> {
    let text = raw.get();
    let Ok(present) = serde_json::from_str::<Present<'_>>(text) else {
        return raw;
    };
    let info = format!(r#""{SERVER_INFO}":{}"#, server_info());
    let mut members = Vec::new();
    if present.result_type.is_none() {
        members.push(r#""resultType":"complete""#.to_string());
    }
    if cacheable && present.ttl_ms.is_none() {
        members.push(r#""ttlMs":0"#.to_string());
    }
    if cacheable && present.cache_scope.is_none() {
        members.push(r#""cacheScope":"private""#.to_string());
    }
    // loom's serverInfo goes into the result's own `_meta` when it has one (at the front of
    // that object, the rest of its bytes kept), else into a `_meta` of its own.
    let mut meta_insert: Option<usize> = None;
    match present.meta {
        None => members.push(format!(r#""_meta":{{{info}}}"#)),
        Some(meta) => {
            let names_server = serde_json::from_str::<MetaPresent>(meta.get())
                .map(|m| m.server_info.is_some())
                .unwrap_or(true);
            if !names_server {
                // The borrowed `_meta` text lies inside `text`: its offset is where it starts.
                let offset = (meta.get().as_ptr() as usize).wrapping_sub(text.as_ptr() as usize);
                if offset < text.len() && text[offset..].starts_with('{') {
                    meta_insert = Some(offset + 1);
                }
            }
        }
    }
    let Some(body) = text.trim_start().strip_prefix('{') else {
        return raw;
    };
    let body_start = text.len() - body.len();
    if members.is_empty() && meta_insert.is_none() {
        return raw;
    }
    let mut out = String::with_capacity(text.len() + 160);
    out.push('{');
    if !members.is_empty() {
        out.push_str(&members.join(","));
        if !body.trim_start().starts_with('}') {
            out.push(',');
        }
    }
    match meta_insert {
        Some(at) if at >= body_start => {
            out.push_str(&text[body_start..at]);
            out.push_str(&info);
            if !text[at..].trim_start().starts_with('}') {
                out.push(',');
            }
            out.push_str(&text[at..]);
        }
        _ => out.push_str(body),
    }
    RawValue::from_string(out).unwrap_or(raw)
}

#[cfg(test)]
mod tests {
    use super::Era;
    use rmcp::model::{CallToolResult, ServerResult};
    use serde_json::json;
    use serde_json::value::RawValue;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_string()).expect("raw")
    }

    fn info() -> String {
        format!(
            r#""io.modelcontextprotocol/serverInfo":{{"name":"loom","version":"{}"}}"#,
            env!("CARGO_PKG_VERSION")
        )
    }

    #[test]
    fn older_results_get_the_2026_members_and_keep_their_bytes() {
        let info = info();
        let out = Era::Discover.shape_raw(raw(r#"{"content":[],"a":2.50}"#), false);
        assert_eq!(
            out.get(),
            format!(r#"{{"resultType":"complete","_meta":{{{info}}},"content":[],"a":2.50}}"#)
        );
        let out = Era::Discover.shape_raw(raw(r#"{ "contents" : [] }"#), true);
        assert_eq!(
            out.get(),
            format!(
                r#"{{"resultType":"complete","ttlMs":0,"cacheScope":"private","_meta":{{{info}}}, "contents" : [] }}"#
            )
        );
        let out = Era::Discover.shape_raw(raw("{}"), false);
        assert_eq!(
            out.get(),
            format!(r#"{{"resultType":"complete","_meta":{{{info}}}}}"#)
        );
        // A result with a `_meta` of its own gets the member at the front of it.
        let out = Era::Discover.shape_raw(raw(r#"{"content":[],"_meta":{"k": 1.50}}"#), false);
        assert_eq!(
            out.get(),
            format!(r#"{{"resultType":"complete","content":[],"_meta":{{{info},"k": 1.50}}}}"#)
        );
        let out = Era::Discover.shape_raw(raw(r#"{"_meta":{ }}"#), false);
        assert_eq!(
            out.get(),
            format!(r#"{{"resultType":"complete","_meta":{{{info} }}}}"#)
        );
        let already = format!(
            r#"{{"resultType":"complete","ttlMs":5,"cacheScope":"public","_meta":{{{info}}}}}"#
        );
        assert_eq!(Era::Discover.shape_raw(raw(&already), true).get(), already);
        let legacy = r#"{"content":[]}"#;
        assert_eq!(Era::Initialize.shape_raw(raw(legacy), true).get(), legacy);
        // A 2026-07-28 server's result for a client of an older version: without its members.
        let modern =
            r#"{"resultType":"complete","content":[{"text":"resultType"}],"ttlMs":5,"v":2.50}"#;
        assert_eq!(
            Era::Initialize.shape_raw(raw(modern), true).get(),
            r#"{"content":[{"text":"resultType"}],"v":2.50}"#
        );
        assert!(super::is_input_required(&raw(
            r#"{"resultType":"input_required","requestState":"s"}"#
        )));
        assert!(!super::is_input_required(&raw(
            r#"{"content":[{"text":"input_required"}]}"#
        )));
    }

    /// An envelope is decoded from JSON, which leaves `resultType` absent: a 2026-07-28 client
    /// rejects such a result (issue 11), so the era must add it.
    #[test]
    fn built_results_carry_the_members_of_their_era() {
        let envelope: CallToolResult = serde_json::from_value(json!({
            "content": [{"type": "text", "text": "{}"}],
            "structuredContent": {"kind": "loom_dataset_ref"},
        }))
        .expect("decodes");
        assert_eq!(envelope.result_type, None);

        let modern = Era::Discover.shape_built(ServerResult::CallToolResult(envelope.clone()));
        let modern = serde_json::to_value(&modern).expect("encodes");
        assert_eq!(modern["resultType"], "complete");
        assert_eq!(modern["_meta"][super::SERVER_INFO]["name"], "loom");

        let legacy = Era::Initialize.shape_built(ServerResult::CallToolResult(
            CallToolResult::structured(json!(["a", "b"])),
        ));
        let legacy = serde_json::to_value(&legacy).expect("encodes");
        assert!(legacy.get("resultType").is_none(), "{legacy}");
        assert!(legacy.get("structuredContent").is_none(), "{legacy}");

        let empty = Era::Discover.shape_built(ServerResult::empty(()));
        assert_eq!(
            serde_json::to_value(&empty).expect("encodes"),
            json!({"resultType": "complete", "_meta": {super::SERVER_INFO: super::server_info()}})
        );
        let empty = Era::Initialize.shape_built(ServerResult::empty(()));
        assert_eq!(serde_json::to_value(&empty).expect("encodes"), json!({}));
    }

    #[test]
    fn resource_links_reach_older_clients_as_their_own_json_in_text() {
        use super::{
            built_without_resource_links, predates_resource_links, raw_without_resource_links,
        };
        assert!(predates_resource_links(Some("2024-11-05")));
        assert!(predates_resource_links(Some("2025-03-26")));
        assert!(!predates_resource_links(Some("2025-06-18")));
        assert!(!predates_resource_links(None));

        let link = r#"{"type":"resource_link","uri":"fixture://greeting","name":"g","size":1.50}"#;
        let text = serde_json::to_string(link).expect("string");
        let tool =
            format!(r#"{{"content":[{{"type":"text","text":"a"}}, {link}],"isError":false}}"#);
        assert_eq!(
            raw_without_resource_links(raw(&tool)).get(),
            format!(
                r#"{{"content":[{{"type":"text","text":"a"}},{{"type":"text","text":{text}}}],"isError":false}}"#
            )
        );
        let prompt = format!(
            r#"{{"description":"d","messages":[{{"role":"user","content":{link}}},{{"role":"user", "content":{{"type":"text","text":"b"}}}}]}}"#
        );
        assert_eq!(
            raw_without_resource_links(raw(&prompt)).get(),
            format!(
                r#"{{"description":"d","messages":[{{"role":"user","content":{{"type":"text","text":{text}}}}},{{"role":"user", "content":{{"type":"text","text":"b"}}}}]}}"#
            )
        );
        // No link (the word only in a text): the server's bytes, untouched.
        let plain = r#"{"content":[{"type":"text","text":"resource_link"}], "x": 1.50}"#;
        assert_eq!(raw_without_resource_links(raw(plain)).get(), plain);

        let built = ServerResult::CallToolResult(CallToolResult::success(vec![
            rmcp::model::ContentBlock::resource_link(rmcp::model::Resource::new(
                "fixture://greeting",
                "greeting",
            )),
        ]));
        let ServerResult::CallToolResult(call) = built_without_resource_links(built) else {
            panic!("a tool result stays one");
        };
        let text = call.content[0]
            .as_text()
            .expect("a text block")
            .text
            .clone();
        let back: serde_json::Value = serde_json::from_str(&text).expect("the link's JSON");
        assert_eq!(back["type"], "resource_link");
        assert_eq!(back["uri"], "fixture://greeting");
    }

    #[test]
    fn tasks_exist_from_2025_11_25_until_2026_07_28() {
        for (version, has) in [
            (None, false),
            (Some("2025-06-18"), false),
            (Some("2025-11-25"), true),
            (Some("2026-07-28"), false),
        ] {
            assert_eq!(Era::has_tasks(version), has, "{version:?}");
        }
    }

    #[test]
    fn unknown_resources_are_invalid_params_for_2026() {
        let error = rmcp::ErrorData::resource_not_found("no server lists it", None);
        assert_eq!(Era::Discover.shape_error(error.clone()).code.0, -32602);
        assert_eq!(Era::Initialize.shape_error(error).code.0, -32002);
    }
}
