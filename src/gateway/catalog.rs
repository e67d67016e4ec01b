//! What loom's client sees: every server's tools, prompts, resources and templates under one
//! roof, and the routes back to where each came from.
//!
//! Tools and prompts are renamed `<server>_<name>` (see [`super::naming`]); routing always goes
//! through the route map, never by splitting a name on `_` (server and tool names both contain
//! underscores). Resource URIs are *not* rewritten: tool results pass through byte-identical and
//! may contain `resource_link` blocks naming the server's own URIs, which must stay readable.
//! A URI is routed to the server that listed it, or whose template matches it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rmcp::model::{Prompt, Resource, ResourceTemplate};
use serde_json::Value;

use super::naming::NameAllocator;
use crate::downstream::{Catalog, ToolDef};

/// Where a tool's `outputSchema` is kept when loom may replace its results.
pub(crate) const OUTPUT_SCHEMA_META: &str = "io.loom/outputSchema";

/// Where an exposed name leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub server: usize,
    pub name: String,
}

/// One server's contribution, in config order.
pub struct ServerListing<'a> {
    pub index: usize,
    pub name: &'a str,
    pub catalog: Arc<Catalog>,
}

#[derive(Debug, Default, Clone)]
pub struct ExposedCatalog {
    pub tools: Vec<ToolDef>,
    pub prompts: Vec<Prompt>,
    pub resources: Vec<Resource>,
    pub templates: Vec<ResourceTemplate>,
    tool_routes: HashMap<String, Route>,
    prompt_routes: HashMap<String, Route>,
    resource_owners: HashMap<String, usize>,
    template_owners: Vec<(usize, UriTemplate)>,
    /// Exposed tools whose `execution.taskSupport` is `"required"`.
    task_required: std::collections::HashSet<String>,
    /// The same tools by server index and their own name (a view calls them by it, §8.5).
    task_required_own: std::collections::HashSet<(usize, String)>,
    /// Tools with an MCP Apps view, by server index and their own name (SPEC §8.5).
    views: std::collections::HashSet<(usize, String)>,
    /// Every server's own tool names: where each leads, `None` when two servers have it.
    originals: HashMap<String, Option<Route>>,
    /// `ui://` URIs of a server that another server (earlier in config order) uses too, as
    /// loom exposes them: to the server and the server's own URI (SPEC §5.4).
    ui_renamed: HashMap<String, (usize, String)>,
}

/// The `ui://` URIs a server uses: its listed resources and its tools' views.
fn ui_uris_of(catalog: &Catalog) -> Vec<&str> {
    let mut uris: Vec<&str> = catalog
        .resources
        .iter()
        .map(|r| r.uri.as_str())
        .chain(catalog.tools.iter().filter_map(view_of))
        .filter(|uri| uri.starts_with("ui://"))
        .collect();
    uris.sort_unstable();
    uris.dedup();
    uris
}

/// Point a tool's view (both spellings of it) at `uri`.
fn rename_view(tool: &mut ToolDef, uri: &str) {
    let Some(Value::Object(meta)) = tool.get_mut("_meta") else {
        return;
    };
    if let Some(Value::Object(ui)) = meta.get_mut("ui")
        && ui.contains_key("resourceUri")
    {
        ui.insert("resourceUri".into(), Value::String(uri.to_string()));
    }
    if meta.contains_key("ui/resourceUri") {
        meta.insert("ui/resourceUri".into(), Value::String(uri.to_string()));
    }
}

/// How loom exposes `uri` of server `server` when an earlier server uses the same `ui://` URI:
/// `ui://<server>/<the rest>`, or `ui://<server>-<n>/<the rest>` (n = 2, 3, …) when that is a URI
/// some server uses or an earlier rename took, so that no view is ever shown another's page.
/// The name chosen is added to `taken`.
fn renamed_ui(server: &str, uri: &str, taken: &mut HashSet<String>) -> String {
    let rest = uri.trim_start_matches("ui://");
    let mut candidate = format!("ui://{server}/{rest}");
    let mut n = 2u64;
    while taken.contains(&candidate) {
        candidate = format!("ui://{server}-{n}/{rest}");
        n += 1;
    }
    taken.insert(candidate.clone());
    candidate
}

/// The `ui://` page an MCP Apps tool is shown with: `_meta.ui.resourceUri`, or the older flat
/// `_meta["ui/resourceUri"]`.
pub(crate) fn view_of(tool: &ToolDef) -> Option<&str> {
    let meta = tool.get("_meta")?.as_object()?;
    meta.get("ui")
        .and_then(|ui| ui.get("resourceUri"))
        .or_else(|| meta.get("ui/resourceUri"))
        .and_then(Value::as_str)
}

impl ExposedCatalog {
    /// Build from every listed server. `reserved` names (loom's own tools) are never handed out.
    pub fn build(servers: &[ServerListing<'_>], max_name_len: usize, reserved: &[&str]) -> Self {
        let mut out = Self::default();
        // `ui://` URIs two servers use: the later servers' are renamed (tool views, listed
        // resources and reads alike), so each view reaches the page of its own server.
        let mut ui_first: HashMap<&str, usize> = HashMap::new();
        // loom's own view is loom's: a server using its URI is renamed like a later server.
        ui_first.insert(crate::common::tools::VIEW_URI, usize::MAX);
        let mut ui_rename: HashMap<(usize, String), String> = HashMap::new();
        // Every URI a server uses as it is: a rename must be none of them.
        let mut ui_taken: HashSet<String> = servers
            .iter()
            .flat_map(|server| ui_uris_of(&server.catalog))
            .map(str::to_string)
            .collect();
        ui_taken.insert(crate::common::tools::VIEW_URI.to_string());
        for server in servers {
            for uri in ui_uris_of(&server.catalog) {
                match ui_first.get(uri) {
                    Some(first) if *first != server.index => {
                        let exposed = renamed_ui(server.name, uri, &mut ui_taken);
                        out.ui_renamed
                            .insert(exposed.clone(), (server.index, uri.to_string()));
                        ui_rename.insert((server.index, uri.to_string()), exposed);
                    }
                    _ => {
                        ui_first.insert(uri, server.index);
                    }
                }
            }
        }
        let mut tool_names = NameAllocator::new(max_name_len);
        let mut prompt_names = NameAllocator::new(max_name_len);
        for name in reserved {
            tool_names.reserve(name);
        }
        for server in servers {
            for tool in &server.catalog.tools {
                let Some(name) = tool.get("name").and_then(Value::as_str) else {
                    continue;
                };
                let exposed = tool_names.allocate(server.name, name);
                if crate::downstream::task_support(tool) == crate::downstream::TaskSupport::Required
                {
                    out.task_required.insert(exposed.clone());
                    out.task_required_own
                        .insert((server.index, name.to_string()));
                }
                out.tool_routes.insert(
                    exposed.clone(),
                    Route {
                        server: server.index,
                        name: name.to_string(),
                    },
                );
                if view_of(tool).is_some() {
                    out.views.insert((server.index, name.to_string()));
                }
                out.originals
                    .entry(name.to_string())
                    .and_modify(|route| *route = None)
                    .or_insert_with(|| {
                        Some(Route {
                            server: server.index,
                            name: name.to_string(),
                        })
                    });
                let mut tool = tool.clone();
                tool.insert("name".into(), Value::String(exposed));
                if let Some(renamed) =
                    view_of(&tool).and_then(|uri| ui_rename.get(&(server.index, uri.to_string())))
                {
                    rename_view(&mut tool, renamed);
                }
                out.tools.push(tool);
            }
            for prompt in &server.catalog.prompts {
                let exposed = prompt_names.allocate(server.name, &prompt.name);
                out.prompt_routes.insert(
                    exposed.clone(),
                    Route {
                        server: server.index,
                        name: prompt.name.clone(),
                    },
                );
                let mut prompt = prompt.clone();
                prompt.name = exposed;
                out.prompts.push(prompt);
            }
            for resource in &server.catalog.resources {
                let renamed = ui_rename.get(&(server.index, resource.uri.clone()));
                let resource = &match renamed {
                    Some(renamed) => {
                        let mut resource = resource.clone();
                        resource.uri = renamed.clone();
                        resource
                    }
                    None => resource.clone(),
                };
                if let Some(first) = out.resource_owners.get(&resource.uri) {
                    // debug, not warn: every rebuild would repeat it. SPEC documents the rule.
                    tracing::debug!(
                        uri = %resource.uri,
                        kept = %first,
                        dropped = %server.name,
                        "two servers list the same resource URI; the first in config order wins"
                    );
                    continue;
                }
                out.resource_owners
                    .insert(resource.uri.clone(), server.index);
                out.resources.push(resource.clone());
            }
            for template in &server.catalog.templates {
                out.template_owners
                    .push((server.index, UriTemplate::new(&template.uri_template)));
                out.templates.push(template.clone());
            }
        }
        out
    }

    /// Results of any downstream tool may be replaced by an envelope, which cannot match the
    /// tool's own `outputSchema`; clients validate against it and would fail. So the schema is
    /// moved to `_meta["io.loom/outputSchema"]`: not validated, not lost (SPEC §5.3).
    /// A tool whose results loom leaves alone (`bypass`, SPEC §19.6) keeps its schema:
    /// `bypassed(route)` says which.
    /// A tool with an MCP Apps view keeps its schema too: its `structuredContent` is never
    /// replaced (SPEC §8.5).
    pub fn apply_output_schema_policy(&mut self, bypassed: impl Fn(&Route) -> bool) {
        for tool in &mut self.tools {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
            let kept = |route: &Route| {
                bypassed(route) || self.views.contains(&(route.server, route.name.clone()))
            };
            if self.tool_routes.get(name).is_some_and(kept) {
                continue;
            }
            if let Some(schema) = tool.remove("outputSchema") {
                let meta = tool
                    .entry("_meta")
                    .or_insert_with(|| Value::Object(Default::default()));
                if let Value::Object(meta) = meta {
                    meta.insert(OUTPUT_SCHEMA_META.to_string(), schema);
                }
            }
        }
    }

    /// The server's own URI of a `ui://` URI loom renamed (two servers use it), if it is one.
    pub fn original_uri(&self, exposed: &str) -> Option<&str> {
        self.ui_renamed.get(exposed).map(|(_, uri)| uri.as_str())
    }

    /// Whether tool `name` of server `server` has an MCP Apps view (SPEC §8.5).
    pub fn has_view(&self, server: usize, name: &str) -> bool {
        self.views.contains(&(server, name.to_string()))
    }

    pub fn tool_route(&self, exposed: &str) -> Option<&Route> {
        self.tool_routes.get(exposed)
    }

    /// A tool called by its server's own name, not the exposed one: MCP Apps views call their
    /// server's tools by the names their server gave them (SPEC §8.5). Only a name that no
    /// exposed tool has and that exactly one server's tool has.
    pub fn own_name_route(&self, name: &str) -> Option<&Route> {
        if self.tool_routes.contains_key(name) {
            return None;
        }
        self.originals.get(name)?.as_ref()
    }

    /// The `inputSchema` of the tool exposed as `exposed`.
    pub fn input_schema(&self, exposed: &str) -> Option<&Value> {
        self.tools
            .iter()
            .find(|tool| tool.get("name").and_then(Value::as_str) == Some(exposed))
            .and_then(|tool| tool.get("inputSchema"))
    }

    /// Whether the tool exposed as `exposed` only runs as an MCP task.
    pub fn runs_only_as_task(&self, exposed: &str) -> bool {
        self.task_required.contains(exposed)
    }

    /// Whether the tool `route` leads to only runs as an MCP task (whatever name it was called
    /// by).
    pub fn route_runs_only_as_task(&self, route: &Route) -> bool {
        self.task_required_own
            .contains(&(route.server, route.name.clone()))
    }

    pub fn prompt_route(&self, exposed: &str) -> Option<&Route> {
        self.prompt_routes.get(exposed)
    }

    /// The server that answers for `uri`: the one that listed it, else the first whose template
    /// matches it.
    pub fn resource_owner(&self, uri: &str) -> Option<usize> {
        if let Some(owner) = self.resource_owners.get(uri) {
            return Some(*owner);
        }
        self.template_owners
            .iter()
            .find(|(_, template)| template.matches(uri))
            .map(|(owner, _)| *owner)
    }

    /// Exposed tool names, for error messages.
    pub fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.tools
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str))
    }
}

/// An RFC 6570 template as loom routes by it: literal parts must match exactly; each `{…}`
/// expression matches one or more characters (a simple expression stops at `/`, the reserved
/// forms `{+x}` and `{#x}` may span them). Compiled once to an anchored regular expression, whose
/// matching is linear in the URI: a backtracking match of a template with several `{+x}` against
/// a long URI took time exponential in the number of expressions.
#[derive(Debug, Clone)]
pub(crate) struct UriTemplate {
    /// `None` for a template loom cannot read (an unclosed `{`, or too large to compile): it
    /// matches nothing.
    pattern: Option<regex::Regex>,
}

/// Compiled size a template's expression may take; a server's template is not ours to trust.
const TEMPLATE_REGEX_BYTES: usize = 1 << 20;

impl UriTemplate {
    pub(crate) fn new(template: &str) -> Self {
        let mut pattern = String::from("^");
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            pattern.push_str(&regex::escape(&rest[..open]));
            let Some(close) = rest[open..].find('}') else {
                return UriTemplate { pattern: None };
            };
            let expression = &rest[open + 1..open + close];
            pattern.push_str(
                if expression.starts_with('+') || expression.starts_with('#') {
                    "(?s:.+)"
                } else {
                    "[^/]+"
                },
            );
            rest = &rest[open + close + 1..];
        }
        pattern.push_str(&regex::escape(rest));
        pattern.push('$');
        let pattern = regex::RegexBuilder::new(&pattern)
            .size_limit(TEMPLATE_REGEX_BYTES)
            .dfa_size_limit(TEMPLATE_REGEX_BYTES)
            .build()
            .ok();
        UriTemplate { pattern }
    }

    /// Does `uri` fit the template?
    pub(crate) fn matches(&self, uri: &str) -> bool {
        self.pattern.as_ref().is_some_and(|p| p.is_match(uri))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template_matches(template: &str, uri: &str) -> bool {
        UriTemplate::new(template).matches(uri)
    }

    #[test]
    fn templates_match_simple_and_reserved_expressions() {
        assert!(template_matches(
            "fixture://items/{id}",
            "fixture://items/42"
        ));
        assert!(!template_matches(
            "fixture://items/{id}",
            "fixture://items/"
        ));
        assert!(!template_matches(
            "fixture://items/{id}",
            "fixture://items/4/2"
        ));
        assert!(template_matches("file:///{+path}", "file:///a/b/c.txt"));
        assert!(template_matches(
            "repo://{owner}/{name}/readme",
            "repo://a/b/readme"
        ));
        assert!(!template_matches(
            "repo://{owner}/{name}/readme",
            "repo://a/b/c"
        ));
        assert!(!template_matches("broken://{x", "broken://y"));
        // Literal parts are literal, regex characters included.
        assert!(template_matches("q://a.b/{x}?v=(1)", "q://a.b/y?v=(1)"));
        assert!(!template_matches("q://a.b/{x}", "q://aXb/y"));
        assert!(template_matches("doc://{#frag}", "doc://a/b\nc"));
        assert!(template_matches("u://{x}é/{+rest}", "u://ü€é/a/b"));
    }

    #[test]
    fn a_template_of_many_reserved_expressions_matches_in_linear_time() {
        // Backtracking tried every way to split the URI among the twelve expressions before
        // failing on the last literal: C(100,000, 12) ways. Bounded work answers at once.
        let template = format!("bomb://{}!", "{+x}-".repeat(12));
        let uri = format!("bomb://{}", "-".repeat(100_000));
        let compiled = UriTemplate::new(&template);
        assert!(!compiled.matches(&uri));
        assert!(compiled.matches(&format!("{uri}!")));
    }

    fn view_tool(name: &str, uri: &str) -> ToolDef {
        serde_json::json!({"name": name, "inputSchema": {"type": "object"},
            "_meta": {"ui": {"resourceUri": uri}}})
        .as_object()
        .cloned()
        .unwrap_or_default()
    }

    #[test]
    fn a_renamed_view_never_takes_a_uri_another_server_uses() {
        // b's `ui://x/page` clashes with a's and would become `ui://b/x/page`, which is c's own
        // view: c's tool would load b's page. b gets a name nobody uses instead.
        let listing: Vec<ServerListing<'_>> = [
            ("a", "ui://x/page"),
            ("b", "ui://x/page"),
            ("c", "ui://b/x/page"),
            ("b-2", "ui://b-2/x/page"),
        ]
        .into_iter()
        .enumerate()
        .map(|(index, (name, uri))| ServerListing {
            index,
            name,
            catalog: Arc::new(Catalog {
                tools: vec![view_tool("show", uri)],
                ..Catalog::default()
            }),
        })
        .collect();
        let exposed = ExposedCatalog::build(&listing, 64, &[]);
        let views: Vec<&str> = exposed.tools.iter().filter_map(view_of).collect();
        assert_eq!(
            views,
            [
                "ui://x/page",
                "ui://b-3/x/page",
                "ui://b/x/page",
                "ui://b-2/x/page"
            ]
        );
        assert_eq!(exposed.original_uri("ui://b-3/x/page"), Some("ui://x/page"));
        assert_eq!(exposed.original_uri("ui://b/x/page"), None);
    }

    fn tool(name: &str) -> ToolDef {
        serde_json::json!({"name": name, "inputSchema": {"type": "object"}, "execution": {}})
            .as_object()
            .cloned()
            .unwrap_or_default()
    }

    #[test]
    fn routes_lead_back_to_the_original_names() {
        let a = Arc::new(Catalog {
            tools: vec![tool("list_issues"), tool("dup.name"), tool("dup name")],
            ..Catalog::default()
        });
        let b = Arc::new(Catalog {
            tools: vec![tool("list_issues")],
            ..Catalog::default()
        });
        let listing = [
            ServerListing {
                index: 0,
                name: "git_hub",
                catalog: a,
            },
            ServerListing {
                index: 1,
                name: "gitlab",
                catalog: b,
            },
        ];
        let exposed = ExposedCatalog::build(&listing, 64, &[]);
        let names: Vec<_> = exposed.tool_names().collect();
        assert_eq!(names[0], "git_hub_list_issues");
        assert_eq!(names[3], "gitlab_list_issues");
        assert_eq!(
            exposed.tool_route("git_hub_list_issues"),
            Some(&Route {
                server: 0,
                name: "list_issues".into()
            })
        );
        // The two tools that sanitize to the same name are both reachable.
        assert_eq!(
            exposed.tool_route(names[1]).map(|r| r.name.as_str()),
            Some("dup.name")
        );
        assert_eq!(
            exposed.tool_route(names[2]).map(|r| r.name.as_str()),
            Some("dup name")
        );
        assert!(exposed.tool_route("git_hub").is_none());
    }
}
