//! A tool's resolved compression policy: what the result path may do to its results (SPEC
//! §19.6). config/policy.rs resolves it from the `compression` block (`default < perServer <
//! perTool`); the data path reads it from here, below config.

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
