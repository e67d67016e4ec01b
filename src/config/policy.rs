//! The `compression` block: how results that are not tables are reduced, per tool (SPEC §19.6).
//!
//! Resolved field by field, `default < perServer < perTool`: a per-tool entry that sets only
//! `maxOutputTokens` keeps the server's and the default's other fields.

/// A tool's resolved policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// The reduced text's budget, in tokens (characters ≈ tokens × 3.5).
    pub max_output_tokens: usize,
    /// Leave the tool's results alone: no envelope, no reduction, bytes as sent; its
    /// `outputSchema` stays in `tools/list`.
    pub bypass: bool,
    pub strip_base64: bool,
    pub html_to_markdown: bool,
    pub json_summary: bool,
    /// The last stage: what is still over the budget is cut (head and tail kept).
    pub truncate: bool,
    /// Keep the tables of results that pass through whole as datasets too (SPEC §8.4).
    pub keep_small_tables: bool,
    /// Text still over the budget after the deterministic stages goes to the `llm` endpoint
    /// for a summary before the cut (SPEC §19.9).
    pub llm_summary: bool,
    /// The tool has an MCP Apps view (`_meta.ui.resourceUri`): its `structuredContent` feeds the
    /// view and reaches the host as the server sent it; only `content` may be replaced (SPEC
    /// §8.5). Not a config key: set from the tool's definition.
    pub view: bool,
}

pub const DEFAULT_MAX_OUTPUT_TOKENS: usize = 2000;
/// Characters per token of the budget, the estimate Context Firewall's users know.
pub const CHARS_PER_TOKEN: f64 = 3.5;

impl Default for Policy {
    fn default() -> Self {
        Self {
            max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
            bypass: false,
            strip_base64: true,
            html_to_markdown: true,
            json_summary: true,
            truncate: true,
            keep_small_tables: true,
            llm_summary: false,
            view: false,
        }
    }
}

impl Policy {
    /// Tables and envelopes only: every reduction stage off (for tests of the table rungs).
    pub fn tables_only() -> Self {
        Self {
            strip_base64: false,
            html_to_markdown: false,
            json_summary: false,
            truncate: false,
            ..Self::default()
        }
    }

    /// Whether any reduction stage is on.
    pub fn reduces(&self) -> bool {
        self.strip_base64
            || self.html_to_markdown
            || self.json_summary
            || self.truncate
            || self.llm_summary
    }

    /// The budget in characters.
    pub fn max_output_chars(&self) -> usize {
        (self.max_output_tokens as f64 * CHARS_PER_TOKEN) as usize
    }
}

/// One entry of the block: the fields it sets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PolicyPatch {
    pub max_output_tokens: Option<usize>,
    pub bypass: Option<bool>,
    pub strip_base64: Option<bool>,
    pub html_to_markdown: Option<bool>,
    pub json_summary: Option<bool>,
    pub truncate: Option<bool>,
    pub keep_small_tables: Option<bool>,
    pub llm_summary: Option<bool>,
}

impl PolicyPatch {
    fn apply(&self, policy: &mut Policy) {
        let set = |slot: &mut bool, value: Option<bool>| {
            if let Some(v) = value {
                *slot = v;
            }
        };
        if let Some(n) = self.max_output_tokens {
            policy.max_output_tokens = n;
        }
        set(&mut policy.bypass, self.bypass);
        set(&mut policy.strip_base64, self.strip_base64);
        set(&mut policy.html_to_markdown, self.html_to_markdown);
        set(&mut policy.json_summary, self.json_summary);
        set(&mut policy.truncate, self.truncate);
        set(&mut policy.keep_small_tables, self.keep_small_tables);
        set(&mut policy.llm_summary, self.llm_summary);
    }
}

/// The whole block.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Compression {
    pub default: PolicyPatch,
    /// By server name.
    pub per_server: Vec<(String, PolicyPatch)>,
    /// By `server/tool` (the exposed name `server_tool` is turned into that when the file is
    /// read).
    pub per_tool: Vec<(String, String, PolicyPatch)>,
}

impl Compression {
    /// Whether any entry turns the model summary on.
    pub fn asks_for_llm(&self) -> bool {
        std::iter::once(&self.default)
            .chain(self.per_server.iter().map(|(_, p)| p))
            .chain(self.per_tool.iter().map(|(_, _, p)| p))
            .any(|patch| patch.llm_summary == Some(true))
    }

    /// The policy for `tool` (its own name, as the server lists it) of `server`.
    pub fn resolve(&self, server: &str, tool: &str) -> Policy {
        let mut policy = Policy::default();
        self.default.apply(&mut policy);
        for (name, patch) in &self.per_server {
            if name == server {
                patch.apply(&mut policy);
            }
        }
        for (s, t, patch) in &self.per_tool {
            if s == server && t == tool {
                patch.apply(&mut policy);
            }
        }
        policy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_resolve_default_then_server_then_tool() {
        let compression = Compression {
            default: PolicyPatch {
                max_output_tokens: Some(1000),
                html_to_markdown: Some(false),
                ..Default::default()
            },
            per_server: vec![(
                "github".into(),
                PolicyPatch {
                    max_output_tokens: Some(4000),
                    strip_base64: Some(false),
                    ..Default::default()
                },
            )],
            per_tool: vec![(
                "github".into(),
                "get_file".into(),
                PolicyPatch {
                    max_output_tokens: Some(8000),
                    ..Default::default()
                },
            )],
        };
        let tool = compression.resolve("github", "get_file");
        assert_eq!(tool.max_output_tokens, 8000);
        assert!(!tool.strip_base64, "the server's field stays");
        assert!(!tool.html_to_markdown, "the default's field stays");
        assert!(tool.json_summary, "loom's default for what nobody set");
        let other = compression.resolve("github", "list");
        assert_eq!(other.max_output_tokens, 4000);
        let elsewhere = compression.resolve("fetch", "fetch");
        assert_eq!(elsewhere.max_output_tokens, 1000);
        assert!(elsewhere.strip_base64);
        assert_eq!(Policy::default().max_output_chars(), 7000);
    }
}
