//! Meaning, not only words, for tool search (SPEC §20.3): with `tools.searchModel` set, a
//! sentence-embedding model (a BERT-family sentence-transformers folder such as
//! all-MiniLM-L6-v2) turns each tool's name, title and first sentence, and each query, into a
//! vector; [`super::search::ToolIndex::search_with_meaning`] then ranks by BM25F and cosine
//! similarity together. Words alone miss what users say in other words ("make the header row bold" for
//! `format_range`, "notify me of new papers" for `watch_topic`); the model places those near.
//!
//! The model runs in loom's own process on the CPU (candle, the Hugging Face project's Rust
//! framework, with its own BERT): no service is called and nothing leaves the machine. Tool
//! vectors are computed on a background thread after the catalog changes and kept by text, so a
//! tool already seen is never embedded twice; until a tool's vector is ready it ranks by words
//! alone. A query is embedded on the call (all-MiniLM-L6-v2: ~23 ms on two cores).
//!
//! Everything read here comes from a folder the user named or from servers: the weights file is
//! read whole only under [`MAX_MODEL_BYTES`], texts are cut to [`MAX_TEXT_CHARS`] before the
//! tokenizer sees them and to [`MAX_TOKENS`] after, and the cache holds at most
//! [`MAX_CACHED_VECTORS`] vectors.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{Tokenizer, TruncationParams};

use super::search::ToolVector;
use crate::common::tools::SEARCH_MODEL_FILES as MODEL_FILES;

/// Largest weights file read (all-MiniLM-L6-v2 is 90 MB; bert-base sized models ~440 MB).
pub const MAX_MODEL_BYTES: u64 = 1024 * 1024 * 1024;
/// Characters of one text the tokenizer is given: 256 tokens of prose take ~1,100.
pub const MAX_TEXT_CHARS: usize = 2_000;
/// Tokens of one text the model reads: what all-MiniLM-L6-v2 was trained with.
pub const MAX_TOKENS: usize = 256;
/// Tool vectors kept (a catalog of 10,000 tools fits twice); past it the cache starts over.
pub const MAX_CACHED_VECTORS: usize = 20_000;
/// Catalogs waiting for the background thread; past it a search asks again for its texts.
const QUEUE: usize = 4;

/// A BERT-family sentence encoder: mean of the last layer over the tokens, unit length.
pub struct SentenceModel {
    bert: BertModel,
    tokenizer: Tokenizer,
}

impl SentenceModel {
    /// Loads `dir`; the error names the file and what was wrong with it.
    pub fn load(dir: &Path) -> Result<Self, String> {
        let file = |name: &str| -> PathBuf { dir.join(name) };
        for name in MODEL_FILES {
            if !file(name).is_file() {
                return Err(format!(
                    "{}: no {name} (a sentence-transformers model folder has {}, e.g. all-MiniLM-L6-v2)",
                    dir.display(),
                    MODEL_FILES.join(", ")
                ));
            }
        }
        let config_path = file("config.json");
        let config_text = std::fs::read_to_string(&config_path)
            .map_err(|e| format!("{}: {e}", config_path.display()))?;
        let config: Config = serde_json::from_str(&config_text).map_err(|e| {
            format!(
                "{}: not a BERT model's config ({e}); loom runs BERT-family sentence encoders",
                config_path.display()
            )
        })?;
        let mut tokenizer = Tokenizer::from_file(file("tokenizer.json"))
            .map_err(|e| format!("{}: {e}", file("tokenizer.json").display()))?;
        // Saved tokenizers often pad to a fixed length; padding would be averaged in.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS.min(config.max_position_embeddings),
                ..TruncationParams::default()
            }))
            .map_err(|e| format!("{}: {e}", file("tokenizer.json").display()))?;
        let weights_path = file("model.safetensors");
        let size = std::fs::metadata(&weights_path)
            .map_err(|e| format!("{}: {e}", weights_path.display()))?
            .len();
        if size > MAX_MODEL_BYTES {
            return Err(format!(
                "{}: {size} bytes, more than the {MAX_MODEL_BYTES} loom reads; use a small sentence encoder such as all-MiniLM-L6-v2",
                weights_path.display()
            ));
        }
        let weights =
            std::fs::read(&weights_path).map_err(|e| format!("{}: {e}", weights_path.display()))?;
        let device = Device::Cpu;
        let vars = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(|e| format!("{}: {e}", weights_path.display()))?;
        let bert = BertModel::load(vars, &config).map_err(|e| {
            format!(
                "{}: does not hold the BERT weights its config.json describes ({e})",
                weights_path.display()
            )
        })?;
        let model = SentenceModel { bert, tokenizer };
        // A model that loads but cannot run is found now, not on the first search.
        model
            .embed("tool search")
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(model)
    }

    /// `text`'s unit vector.
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, String> {
        let text = match text.char_indices().nth(MAX_TEXT_CHARS) {
            Some((end, _)) => &text[..end],
            None => text,
        };
        let encoding = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| format!("tokenizer: {e}"))?;
        let ids = encoding.get_ids();
        if ids.is_empty() {
            return Err("the tokenizer gave no tokens".to_owned());
        }
        let run = || -> candle_core::Result<Vec<f32>> {
            let device = &self.bert.device;
            let input = Tensor::new(ids, device)?.unsqueeze(0)?;
            let types = input.zeros_like()?;
            let output = self.bert.forward(&input, &types, None)?;
            let mean = output.mean(1)?.squeeze(0)?;
            mean.to_vec1::<f32>()
        };
        let mut vector = run().map_err(|e| format!("model: {e}"))?;
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        if !norm.is_finite() || norm == 0.0 {
            return Err("the model gave a zero vector".to_owned());
        }
        vector.iter_mut().for_each(|x| *x /= norm);
        Ok(vector)
    }
}

/// The text a tool's vector is made of: server and name as words, title, first sentence (the
/// rest of a description is usage notes and examples, which blur what the tool is for).
pub fn text_of(tool: &super::search::ToolText) -> String {
    let (lead, _) = super::search::split_lead(&tool.description);
    let name = if tool.tool.is_empty() {
        &tool.name
    } else {
        &tool.tool
    };
    tool_text(&tool.server, name, &tool.title, lead)
}

fn tool_text(server: &str, tool: &str, title: &str, lead: &str) -> String {
    let words = |name: &str| {
        let mut out = String::with_capacity(name.len() + 4);
        let mut previous_lower = false;
        for c in name.chars() {
            if matches!(c, '_' | '-' | '.') {
                out.push(' ');
                previous_lower = false;
                continue;
            }
            if c.is_uppercase() && previous_lower {
                out.push(' ');
            }
            previous_lower = c.is_lowercase() || c.is_ascii_digit();
            out.extend(c.to_lowercase());
        }
        out
    };
    format!(
        "{} {}: {}. {}",
        words(server),
        words(tool),
        title,
        lead.trim()
    )
}

/// How long a search waits for the vectors of tools still being embedded (a session's first
/// search right after loom started or the catalog changed); past it, those rank by words alone.
pub const MEANING_WAIT: Duration = Duration::from_secs(10);

/// The vectors made so far, by text, and the signal the background thread gives after each.
#[derive(Default)]
struct Vectors {
    by_text: Mutex<HashMap<String, ToolVector>>,
    made: Condvar,
}

/// A query's vector and its catalog's (in catalog order, `None` where not made).
pub type Meaning = (Vec<f32>, Vec<Option<ToolVector>>);

/// Tool vectors by text, filled by a background thread; queries embedded on the call.
pub struct ToolEmbedder {
    model: Arc<SentenceModel>,
    vectors: Arc<Vectors>,
    queue: SyncSender<Vec<String>>,
}

impl ToolEmbedder {
    /// Starts the background thread that embeds catalog texts.
    pub fn start(model: SentenceModel) -> Result<Arc<Self>, String> {
        let model = Arc::new(model);
        let vectors: Arc<Vectors> = Arc::default();
        let (queue, texts) = sync_channel(QUEUE);
        let worker_model = model.clone();
        let worker_vectors = vectors.clone();
        std::thread::Builder::new()
            .name("loom-tool-vectors".to_owned())
            .spawn(move || embed_catalogs(&worker_model, &worker_vectors, &texts))
            .map_err(|e| format!("cannot start the tool vector thread: {e}"))?;
        Ok(Arc::new(ToolEmbedder {
            model,
            vectors,
            queue,
        }))
    }

    /// Asks for the vectors of `texts` (a catalog's); those not known yet are made in the
    /// background.
    pub fn prepare(&self, texts: &[String]) {
        self.ask(texts);
    }

    /// [`Self::prepare`], saying whether the texts are known, on their way, or not taken.
    fn ask(&self, texts: &[String]) -> Asked {
        let missing: Vec<String> = {
            let vectors = self.lock();
            texts
                .iter()
                .filter(|t| !vectors.contains_key(*t))
                .cloned()
                .collect()
        };
        if missing.is_empty() {
            return Asked::Queued;
        }
        match self.queue.try_send(missing) {
            Ok(()) => Asked::Queued,
            // The thread is behind: asked again while a search waits, or at the next search.
            Err(TrySendError::Full(_)) => Asked::Full,
            Err(TrySendError::Disconnected(_)) => {
                tracing::warn!("tool search: the tool vector thread ended; search by words alone");
                Asked::Dead
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, ToolVector>> {
        self.vectors
            .by_text
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The vectors known of `texts`, in order (`None` for those not made yet).
    pub fn vectors(&self, texts: &[String]) -> Vec<Option<ToolVector>> {
        let vectors = self.lock();
        texts.iter().map(|t| vectors.get(t).cloned()).collect()
    }

    /// What a search of `query` over the catalog of `texts` needs: the query's vector and the
    /// tools', waiting up to `wait` for those still being made. Blocking (run it off the async
    /// threads); `None` (search by words alone) when the model fails on the query.
    pub fn meaning(&self, query: &str, texts: &[String], wait: Duration) -> Option<Meaning> {
        let mut asked = self.ask(texts);
        if asked == Asked::Dead {
            return None;
        }
        let query = self
            .model
            .embed(query)
            .map_err(|e| tracing::warn!("tool search: the query was not embedded: {e}"))
            .ok()?;
        let deadline = Instant::now() + wait;
        loop {
            let vectors = self.lock();
            let known: Vec<Option<ToolVector>> =
                texts.iter().map(|t| vectors.get(t).cloned()).collect();
            let left = deadline.saturating_duration_since(Instant::now());
            if known.iter().all(Option::is_some) || left.is_zero() {
                return Some((query, known));
            }
            let pause = match asked {
                Asked::Full => left.min(ASK_AGAIN),
                _ => left,
            };
            drop(
                self.vectors
                    .made
                    .wait_timeout(vectors, pause)
                    .unwrap_or_else(PoisonError::into_inner),
            );
            if asked == Asked::Full {
                asked = self.ask(texts);
            }
        }
    }
}

/// What became of a catalog's texts asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    /// Known already, or queued for the background thread.
    Queued,
    /// The queue was full; ask again.
    Full,
    /// The background thread is gone: words alone.
    Dead,
}

/// How often a waiting search asks again for texts a full queue did not take.
const ASK_AGAIN: Duration = Duration::from_millis(200);

/// The background thread: embeds each batch's texts not known yet, until loom ends.
fn embed_catalogs(model: &SentenceModel, vectors: &Vectors, texts: &Receiver<Vec<String>>) {
    let lock = || {
        vectors
            .by_text
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    };
    let mut failures = 0usize;
    while let Ok(batch) = texts.recv() {
        for text in batch {
            if lock().contains_key(&text) {
                continue;
            }
            // A panic in the model's code on a server's text ends neither the thread nor loom.
            let made =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| model.embed(&text)))
                    .unwrap_or_else(|_| Err("the model panicked on it".to_owned()));
            let vector: ToolVector = match made {
                Ok(vector) => vector.into(),
                Err(error) => {
                    failures += 1;
                    if failures == 1 {
                        tracing::warn!(
                            "tool search: a tool's text was not embedded ({error}); it ranks by words alone"
                        );
                    }
                    // Kept as an empty vector (cosine 0), so the text is not tried again.
                    Arc::from(Vec::new())
                }
            };
            let mut known = lock();
            if known.len() >= MAX_CACHED_VECTORS {
                known.clear();
            }
            known.insert(text, vector);
            drop(known);
            vectors.made.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(files: &[(&str, &[u8])]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("a temp dir");
        for (name, bytes) in files {
            std::fs::write(dir.path().join(name), bytes).expect("written");
        }
        dir
    }

    fn load_error(dir: &Path) -> String {
        match SentenceModel::load(dir) {
            Ok(_) => panic!("{} loaded", dir.display()),
            Err(error) => error,
        }
    }

    /// Every way a folder can be wrong is named, with what would be right; nothing panics.
    #[test]
    fn a_folder_that_is_not_a_model_says_what_is_wrong() {
        let empty = folder(&[]);
        let error = load_error(empty.path());
        assert!(
            error.contains("no config.json") && error.contains("all-MiniLM-L6-v2"),
            "{error}"
        );

        let not_bert = folder(&[
            ("config.json", br#"{"model_type": "llama"}"#),
            ("tokenizer.json", b"{}"),
            ("model.safetensors", b""),
        ]);
        let error = load_error(not_bert.path());
        assert!(error.contains("not a BERT model's config"), "{error}");

        let config = br#"{"vocab_size": 10, "hidden_size": 4, "num_hidden_layers": 1,
            "num_attention_heads": 1, "intermediate_size": 4, "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1, "max_position_embeddings": 8, "type_vocab_size": 2,
            "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0,
            "classifier_dropout": null, "model_type": "bert"}"#;
        let bad_tokenizer = folder(&[
            ("config.json", config),
            ("tokenizer.json", b"not json"),
            ("model.safetensors", b""),
        ]);
        let error = load_error(bad_tokenizer.path());
        assert!(error.contains("tokenizer.json"), "{error}");

        let tokenizer = br#"{"version": "1.0", "truncation": null, "padding": null,
            "added_tokens": [], "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
            "post_processor": null, "decoder": null,
            "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "a": 1}, "unk_token": "[UNK]"}}"#;
        let garbage = folder(&[
            ("config.json", config),
            ("tokenizer.json", tokenizer),
            (
                "model.safetensors",
                b"\xff\xff\xff\xff\xff\xff\xff\x7f garbage",
            ),
        ]);
        let error = load_error(garbage.path());
        assert!(error.contains("model.safetensors"), "{error}");
    }

    #[test]
    fn tool_texts_spell_names_as_words() {
        assert_eq!(
            tool_text("fs", "create_directory", "", "Create a new directory. "),
            "fs create directory: . Create a new directory."
        );
        assert_eq!(
            tool_text("notion", "API-getUsers", "List users", "Lists all users."),
            "notion api get users: List users. Lists all users."
        );
    }
}
