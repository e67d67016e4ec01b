//! The result path: everything that becomes of one downstream tool result, decided in one place
//! and in one direction — the faces (rmcp's path, the direct lane, tasks) hand a result to
//! [`ResultPath::decide`] and get back what answers it. In order:
//!
//! 1. the tool's policy (`compression`, resolved per server and tool; its view flag from the
//!    session's catalog);
//! 2. a bypassed tool's result, or one that cannot be over `tokenThreshold` by its bytes, passes
//!    at once (the only test of size on this path; a small result's tables may still be kept,
//!    step 6);
//! 3. a larger one goes to the blocking pool: the table rungs, then the firewall's stages
//!    (intercept/, reduce/), under a deadline and the caller's cancellation;
//! 4. text still over its budget goes to the model summary stage when `llm` is set
//!    ([`summary`]);
//! 5. the session's report counts what came in and what went out;
//! 6. the tables of a small result that passed through whole are kept as datasets once the
//!    answer is on its way ([`keep`], SPEC §8.4).
//!
//! Never worse than no proxy — the panic fences: a panic on the blocking pool becomes an error
//! result (here); one in the summary stage passes the server's bytes through ([`summary`]); one
//! while keeping tables loses only those tables ([`keep`]); intercept/ fences each of its stages
//! so that a failed table rung still lets the firewall try.

pub(crate) mod keep;
mod summary;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::config::Config;
use crate::intercept::{Origin, Outcome};
use crate::report::SessionStats;
use crate::store::Store;

/// What answers a downstream tool result ([`ResultPath::decide`]).
pub(crate) enum Decision {
    /// The server's bytes, passed through; the [`keep::Keep`] hands them to the session's
    /// keeper once dropped: on the direct lane after the answer is written, on rmcp's path once
    /// the answer is handed to rmcp to write (SPEC §8.4).
    PassThrough(Box<serde_json::value::RawValue>, keep::Keep),
    /// A result loom built in its place.
    Built(Box<rmcp::model::ServerResult>),
}

/// One session's result path: its store, settings, report and keeper.
pub(crate) struct ResultPath {
    store: Arc<Store>,
    config: Arc<Config>,
    /// The `llm` endpoint of the summary stage, when configured (shared by the hub's sessions).
    summarizer: Option<Arc<crate::llm::Summarizer>>,
    stats: Arc<SessionStats>,
    /// Keeps the tables of results that pass through whole (SPEC §8.4).
    keeper: keep::Keeper,
    /// The session's part in a cluster: a result that names datasets is answered once they are
    /// in the shared store (SPEC §25).
    cluster: Arc<std::sync::OnceLock<Arc<crate::cluster::Membership>>>,
}

impl ResultPath {
    pub(crate) fn new(
        store: Arc<Store>,
        config: Arc<Config>,
        summarizer: Option<Arc<crate::llm::Summarizer>>,
        stats: Arc<SessionStats>,
        cluster: Arc<std::sync::OnceLock<Arc<crate::cluster::Membership>>>,
    ) -> Self {
        Self {
            keeper: keep::Keeper::start(store.clone()),
            store,
            config,
            summarizer,
            stats,
            cluster,
        }
    }

    /// What answers a raw tool result of `origin` (`view`: the tool has an MCP Apps view): its
    /// own bytes (not yet shaped for the client's era), or an envelope, a reduced result or an
    /// error loom built. Counted in the session's report.
    pub(crate) async fn decide(
        &self,
        raw: Box<serde_json::value::RawValue>,
        origin: Origin,
        view: bool,
    ) -> Decision {
        use crate::report::{Handling, Size};
        let bytes_in = raw.get().len() as u64;
        let before = Size::of(raw.get());
        let tool = format!("{}/{}", origin.server, origin.tool);
        let store = self.store.clone();
        let threshold = self.config.token_threshold;
        let mut policy = self
            .config
            .compression
            .resolve(&origin.server, &origin.tool);
        policy.view = view;
        // The one test of size on this path: a bypassed tool's result, or one whose bytes
        // cannot be over the threshold, is decided at once; a large one means parsing and
        // ingesting, CPU work kept off the I/O threads.
        let small = crate::common::tokens::upper_bound_tokens(raw.get().len()) <= threshold;
        // loom's work on a result it parses (one over the threshold): a span of the request's
        // trace. A result decided at once has its figures on the request's span alone.
        let span = match policy.bypass || small {
            true => crate::telemetry::TraceSpan::none(),
            false => crate::telemetry::child("loom.result"),
        };
        // The writes this result's datasets start are the ones its answer waits for.
        let mark = self.cluster.get().map(|member| member.mark());
        let outcome = if policy.bypass {
            Outcome::PassThrough(raw, "bypass")
        } else if small {
            Outcome::PassThrough(raw, "small")
        } else {
            crate::footprint::heavy_work();
            let origin = origin.clone();
            // A call cancelled while its result is decided drops this future; the flag then
            // stops the reduction still running on the blocking pool (SPEC §19.3).
            let cancelled = Arc::new(AtomicBool::new(false));
            let _cancel_on_drop = CancelOnDrop(cancelled.clone());
            let interrupt = crate::reduce::Interrupt::after(crate::reduce::DEFAULT_TIME_LIMIT)
                .with_cancel(cancelled);
            let outcome = tokio::task::spawn_blocking(move || {
                crate::intercept::over_threshold(
                    raw, &origin, &store, threshold, &policy, &interrupt,
                )
            })
            .await;
            crate::footprint::heavy_work();
            match outcome {
                Ok(outcome) => outcome,
                Err(error) => {
                    tracing::error!(%error, "interception crashed; the result is lost");
                    return Decision::Built(Box::new(rmcp::model::ServerResult::CallToolResult(
                        crate::tools::error_result(
                            "loom: interception of this result failed unexpectedly; call the tool again",
                        ),
                    )));
                }
            }
        };
        let summarized = matches!(outcome, Outcome::Summarize(_));
        let outcome = match outcome {
            Outcome::Summarize(pending) => self.summarize(*pending).await,
            other => other,
        };
        // An answer that names datasets goes out once they are in the cluster's store: any
        // instance can then answer them.
        if !matches!(outcome, Outcome::PassThrough(..))
            && let Some(member) = self.cluster.get()
        {
            member.settled_since(mark.unwrap_or(0)).await;
        }
        let observed = |decision: &'static str, after: Size, rows: Option<u64>| {
            crate::telemetry::decided(
                &crate::telemetry::Decided {
                    server: &origin.server,
                    tool: &origin.tool,
                    decision,
                    bytes_in,
                    chars_in: before.chars,
                    chars_out: after.chars,
                    tokens_in: before.tokens,
                    tokens_out: after.tokens,
                    rows,
                },
                &span,
            )
        };
        let (handling, value) = match outcome {
            // `summarize` never hands one back; were it to, the server's bytes answer.
            Outcome::Summarize(pending) => {
                self.stats
                    .called(&tool, Handling::PassedThrough, before, before);
                observed("passthrough", before, None);
                return Decision::PassThrough(pending.raw, keep::Keep::none());
            }
            Outcome::PassThrough(raw, why) => {
                self.stats
                    .called(&tool, Handling::PassedThrough, before, before);
                // Under the threshold, a table in it is kept too, once the answer is on its way.
                let kept = why == "small"
                    && policy.keep_small_tables
                    && crate::intercept::may_hold_table(&raw);
                observed(if kept { "kept" } else { "passthrough" }, before, None);
                let keep = match kept {
                    true => self.keeper.keep(&raw, origin),
                    false => keep::Keep::none(),
                };
                return Decision::PassThrough(raw, keep);
            }
            // A tool with a view: the server's bytes with loom's `content`, on the raw path.
            Outcome::Spliced(raw, built) => {
                let handling = match built {
                    crate::intercept::Built::Table => Handling::Table,
                    crate::intercept::Built::Document => Handling::Document,
                };
                let after = Size::of(raw.get());
                self.stats.called(&tool, handling, before, after);
                let (decision, rows) = match handling {
                    Handling::Table => ("envelope", envelope_rows(raw.get())),
                    _ => ("reduced", None),
                };
                observed(decision, after, rows);
                return Decision::PassThrough(raw, keep::Keep::none());
            }
            Outcome::Replaced(value) => (Handling::Table, value),
            Outcome::Reduced(value) => (Handling::Document, value),
        };
        let after = serde_json::to_string(&value)
            .map(|text| Size::of(&text))
            .unwrap_or_default();
        self.stats.called(&tool, handling, before, after);
        match handling {
            Handling::Table => observed("envelope", after, rows_of(&value)),
            _ if summarized => observed("summary", after, None),
            _ => observed("reduced", after, None),
        }
        Decision::Built(Box::new(rmcp::model::ServerResult::CallToolResult(
            match serde_json::from_value(value) {
                Ok(result) => result,
                Err(error) => crate::tools::error_result(format!(
                    "loom: could not encode the envelope: {error}"
                )),
            },
        )))
    }
}

/// Rows of the datasets an envelope result describes (`structuredContent.datasets[].rows`).
fn rows_of(result: &serde_json::Value) -> Option<u64> {
    let envelope = result.get("structuredContent")?;
    match envelope
        .get("datasets")
        .and_then(serde_json::Value::as_array)
    {
        Some(datasets) => Some(
            datasets
                .iter()
                .filter_map(|d| d.get("rows").and_then(serde_json::Value::as_u64))
                .sum(),
        ),
        None => envelope.get("rows").and_then(serde_json::Value::as_u64),
    }
}

/// [`rows_of`] for a result still as text (a tool with a view keeps the server's bytes).
fn envelope_rows(raw: &str) -> Option<u64> {
    if !crate::telemetry::trace::on() {
        return None;
    }
    rows_of(&serde_json::from_str(raw).ok()?)
}

/// Sets its flag when dropped: a decision whose caller went away tells its blocking work to stop.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}
