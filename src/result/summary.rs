//! The model summary stage (SPEC §19.9): text the deterministic stages left over its budget goes
//! to the `llm` endpoint, and a summary that fits takes the cut text's place.

use super::ResultPath;
use crate::intercept::Outcome;

impl ResultPath {
    /// The model summary stage (SPEC §19.9): each over-budget text to the endpoint, its summary
    /// in place of the cut text when one comes within the budget; the cut text otherwise.
    pub(super) async fn summarize(&self, pending: crate::intercept::ToSummarize) -> Outcome {
        let Some(summarizer) = self.summarizer.clone() else {
            return crate::intercept::summarized(pending, &self.store);
        };
        // Never worse than no proxy: were the stage to panic, the server's bytes answer.
        let original = pending.raw.clone();
        let answered = std::panic::AssertUnwindSafe(self.summarize_with(pending, &summarizer));
        match futures::FutureExt::catch_unwind(answered).await {
            Ok(Some(outcome)) => outcome,
            _ => {
                tracing::error!("the model summary stage panicked; passed through unchanged");
                Outcome::PassThrough(original, "failed")
            }
        }
    }

    async fn summarize_with(
        &self,
        pending: crate::intercept::ToSummarize,
        summarizer: &crate::llm::Summarizer,
    ) -> Option<Outcome> {
        // Cutting a long text for the model is linear work: off the I/O thread.
        let max_input = summarizer.max_input_chars();
        let prepared = tokio::task::spawn_blocking(move || {
            let mut pending = pending;
            let asks: Vec<_> = pending
                .reduction
                .summarizable
                .iter_mut()
                .map(|block| {
                    let (input, cut) = block.take_input(max_input);
                    (input, cut, block.budget_chars())
                })
                .collect();
            (pending, asks)
        })
        .await;
        let (mut pending, asks) = prepared.ok()?;
        // A call dropped while the endpoint answers (the client cancelled it) never sends its
        // result: what the reduction holds for it goes then.
        let abandoned = LetGoUnlessDone {
            store: &self.store,
            refs: pending.reduction.held().to_vec(),
            done: false,
        };
        let answers = futures::future::join_all(
            asks.iter()
                .map(|(input, cut, budget)| summarizer.summarize(input, *cut, *budget)),
        )
        .await;
        drop(asks);
        let mut abandoned = abandoned;
        abandoned.done = true;
        for (index, answer) in answers.into_iter().enumerate() {
            let failure = match answer {
                Ok(summary) => {
                    self.stats
                        .model_tokens(summary.prompt_tokens, summary.completion_tokens);
                    let block = &pending.reduction.summarizable[index];
                    match block.compose(&summary.text, summarizer.model()) {
                        Some(composed) => {
                            pending.reduction.summarized(index, composed);
                            self.stats.summarized(true);
                            continue;
                        }
                        None => crate::llm::Failure::new(
                            crate::llm::FailureKind::OverBudget,
                            format!(
                                "the summary has {} chars; with its header it must fit the budget \
                                 of {} chars and be shorter than the original",
                                crate::common::text::thousands(summary.text.trim().chars().count()),
                                crate::common::text::thousands(block.budget_chars())
                            ),
                        ),
                    }
                }
                Err(failure) => {
                    self.stats
                        .model_tokens(failure.prompt_tokens, failure.completion_tokens);
                    failure
                }
            };
            self.stats.summarized(false);
            summarizer.failed(&failure);
        }
        Some(crate::intercept::summarized(pending, &self.store))
    }
}

/// Store entries let go when dropped, unless `done` was set first.
struct LetGoUnlessDone<'a> {
    store: &'a crate::store::Store,
    refs: Vec<String>,
    done: bool,
}

impl Drop for LetGoUnlessDone<'_> {
    fn drop(&mut self) {
        if !self.done {
            for reference in &self.refs {
                self.store.remove(reference);
            }
        }
    }
}
