//! The report as people read it: a few lines on stderr, or a Markdown page.

use std::fmt::Write as _;

use super::{Report, SignedSize, Size};
use crate::common::text::thousands;

fn size(s: Size) -> String {
    format!(
        "{} chars (~{} tokens)",
        thousands(s.chars as usize),
        thousands(s.tokens as usize)
    )
}

fn signed(s: SignedSize) -> String {
    let sign = |n: i64| {
        let text = thousands(n.unsigned_abs() as usize);
        if n < 0 { format!("-{text}") } else { text }
    };
    format!("{} chars (~{} tokens)", sign(s.chars), sign(s.tokens))
}

/// A saving as a share of the original; a loss is not a percentage anyone can read.
fn percent(saved: i64, of: u64) -> String {
    if of == 0 || saved < 0 {
        return "—".to_string();
    }
    format!("{:.1}%", saved as f64 * 100.0 / of as f64)
}

/// The short form loom prints on stderr when the session ends.
pub(crate) fn stderr_summary(r: &Report) -> String {
    let mut out = String::from("loom session report (token figures are estimates):\n");
    let t = &r.tools;
    let _ = writeln!(
        out,
        "  tools: {} exposed, the client saw {}; definitions {} → {} per listing, {} listing(s)",
        t.direct_tools,
        t.seen_tools,
        size(t.direct),
        size(t.seen),
        t.listings
    );
    let c = &r.calls;
    let _ = writeln!(
        out,
        "  calls: {} ({} as tables, {} reduced as documents, {} passed through); output {} → {}",
        c.total,
        c.tables,
        c.documents,
        c.passed_through,
        size(c.before),
        size(c.after)
    );
    let _ = writeln!(
        out,
        "  loom's own tools: {} call(s), {} queries, {} reads, answers {}",
        r.own.calls,
        r.own.queries,
        r.own.reads,
        size(r.own.answers)
    );
    let m = &r.model_summaries;
    if m.summarized + m.fell_back > 0 {
        let _ = writeln!(
            out,
            "  model summaries: {} text(s) summarised, {} got the cut text instead; the model \
             counted {} prompt and {} completion tokens",
            m.summarized,
            m.fell_back,
            thousands(m.prompt_tokens as usize),
            thousands(m.completion_tokens as usize)
        );
    }
    let _ = writeln!(
        out,
        "  output saved: {} ({} of the original), after paging and queries",
        signed(r.output_saved),
        percent(r.output_saved.chars, c.before.chars)
    );
    let _ = write!(
        out,
        "  held: {} dataset(s), {} document(s), {} blob(s), {} bytes",
        r.held.datasets,
        r.held.documents,
        r.held.blobs,
        thousands(r.held.bytes as usize)
    );
    out
}

/// The report as a Markdown page (`report.path` not ending in `.json`).
pub(crate) fn markdown(r: &Report) -> String {
    let mut out = String::from("# loom session report\n\n");
    let _ = writeln!(
        out,
        "Started {}, ran {} s. Token figures are **estimates** (SPEC §8.1: about four \
         characters per token for ASCII text), not a model's count.\n",
        r.started_at, r.duration_secs
    );
    let t = &r.tools;
    out.push_str("## Tool definitions\n\n| | tools | size |\n|---|---:|---:|\n");
    let _ = writeln!(
        out,
        "| every downstream tool, full descriptions | {} | {} |",
        t.direct_tools,
        size(t.direct)
    );
    let _ = writeln!(
        out,
        "| what the client was sent | {} | {} |",
        t.seen_tools,
        size(t.seen)
    );
    let _ = writeln!(
        out,
        "\nSaved per `tools/list`: {} ({}); the client listed {} time(s).\n",
        signed(t.saved_per_listing),
        percent(t.saved_per_listing.chars, t.direct.chars),
        t.listings
    );
    let c = &r.calls;
    out.push_str("## Tool results\n\n| | count |\n|---|---:|\n");
    let _ = writeln!(out, "| calls | {} |", c.total);
    let _ = writeln!(out, "| replaced by a dataset envelope | {} |", c.tables);
    let _ = writeln!(
        out,
        "| reduced, original kept as a document | {} |",
        c.documents
    );
    let _ = writeln!(out, "| passed through | {} |", c.passed_through);
    let _ = writeln!(
        out,
        "\nOutput as the servers sent it: {}; as the client got it: {}.",
        size(c.before),
        size(c.after)
    );
    let _ = writeln!(
        out,
        "loom's own tools: {} call(s) ({} queries, {} reads), their answers {}.",
        r.own.calls,
        r.own.queries,
        r.own.reads,
        size(r.own.answers)
    );
    let m = &r.model_summaries;
    if m.summarized + m.fell_back > 0 {
        let _ = writeln!(
            out,
            "Model summaries (`llmSummary`): {} text(s) summarised, {} answered by the cut text \
             instead; the model's own count: {} prompt and {} completion tokens.",
            m.summarized,
            m.fell_back,
            thousands(m.prompt_tokens as usize),
            thousands(m.completion_tokens as usize)
        );
    }
    let _ = writeln!(
        out,
        "\n**Output saved: {}** ({} of the original), after subtracting what loom's own tools \
         answered.\n",
        signed(r.output_saved),
        percent(r.output_saved.chars, c.before.chars)
    );
    if !r.top_tools.is_empty() {
        out.push_str("## Top tools by saving\n\n| tool | calls | before | after | saved |\n|---|---:|---:|---:|---:|\n");
        for tool in &r.top_tools {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} |",
                tool.tool,
                tool.calls,
                thousands(tool.before.chars as usize),
                thousands(tool.after.chars as usize),
                signed(tool.saved)
            );
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "## Held at the end\n\n{} dataset(s), {} document(s), {} blob(s): {} bytes.",
        r.held.datasets,
        r.held.documents,
        r.held.blobs,
        thousands(r.held.bytes as usize)
    );
    out
}
