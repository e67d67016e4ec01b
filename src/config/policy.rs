//! The `compression` block: how results that are not tables are reduced, per tool (SPEC §19.6).
//!
//! Resolved field by field, `default < perServer < perTool`: a per-tool entry that sets only
//! `maxOutputTokens` keeps the server's and the default's other fields.

// The resolved policy lives in the shared leaf, so the data path (intercept, reduce) reads it
// without depending on config's parsing; `loom::config::policy::Policy` keeps naming it.
pub use crate::common::policy::{CHARS_PER_TOKEN, DEFAULT_MAX_OUTPUT_TOKENS, Policy};

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
