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
        // What candle's BERT divides by or counts down from: checked here, so a config that
        // parses but cannot describe a model is an error, not a panic in the model's code.
        if config.num_attention_heads == 0
            || config.hidden_size == 0
            || !config
                .hidden_size
                .is_multiple_of(config.num_attention_heads)
            || config.vocab_size == 0
            || config.max_position_embeddings < 2
        {
            return Err(format!(
                "{}: hidden_size ({}) must be a positive multiple of num_attention_heads ({}), vocab_size ({}) positive and max_position_embeddings ({}) at least 2",
                config_path.display(),
                config.hidden_size,
                config.num_attention_heads,
                config.vocab_size,
                config.max_position_embeddings
            ));
        }
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
    let text = format!(
        "{} {}: {}. {}",
        words(server),
        words(tool),
        title,
        lead.trim()
    );
    // Cut as `embed` cuts, so a server's megabyte title or description is never kept (it is the
    // cache's key) nor queued whole.
    match text.char_indices().nth(MAX_TEXT_CHARS) {
        Some((end, _)) => text[..end].to_owned(),
        None => text,
    }
}

/// How long the first search over a catalog waits for the vectors of its tools still being made
/// (right after loom started or the catalog changed); later searches use what is made.
pub const MEANING_WAIT: Duration = Duration::from_secs(10);

/// What turns a text into a unit vector: the sentence model, or a stand-in in tests.
pub trait Encoder: Send + Sync {
    fn encode(&self, text: &str) -> Result<Vec<f32>, String>;
}

impl Encoder for SentenceModel {
    fn encode(&self, text: &str) -> Result<Vec<f32>, String> {
        self.embed(text)
    }
}

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
    encoder: Arc<dyn Encoder>,
    vectors: Arc<Vectors>,
    /// Catalogs (their first `capacity` texts) for the background thread.
    queue: SyncSender<Vec<String>>,
    /// Vectors kept; a catalog's texts past it rank by words alone.
    capacity: usize,
    /// Queries embedded at once: one per core, the rest wait their turn.
    queries: tokio::sync::Semaphore,
}

impl ToolEmbedder {
    /// Starts the background thread that embeds catalog texts.
    pub fn start(model: SentenceModel) -> Result<Arc<Self>, String> {
        Self::start_with(Arc::new(model), MAX_CACHED_VECTORS)
    }

    /// [`Self::start`] with any encoder and cache size.
    pub fn start_with(encoder: Arc<dyn Encoder>, capacity: usize) -> Result<Arc<Self>, String> {
        let vectors: Arc<Vectors> = Arc::default();
        let (queue, catalogs) = sync_channel(QUEUE);
        let (worker_encoder, worker_vectors) = (encoder.clone(), vectors.clone());
        std::thread::Builder::new()
            .name("loom-tool-vectors".to_owned())
            .spawn(move || embed_catalogs(&*worker_encoder, &worker_vectors, &catalogs, capacity))
            .map_err(|e| format!("cannot start the tool vector thread: {e}"))?;
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Ok(Arc::new(ToolEmbedder {
            encoder,
            vectors,
            queue,
            capacity: capacity.max(1),
            queries: tokio::sync::Semaphore::new(cores),
        }))
    }

    /// Waits for a turn to embed a query (one per core at once).
    pub async fn query_turn(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        self.queries.acquire().await.ok()
    }

    /// Asks for the vectors of `texts` (a catalog's); those not known yet are made in the
    /// background.
    pub fn prepare(&self, texts: &[String]) {
        self.ask(texts);
    }

    /// The texts of a catalog that get vectors: the first `capacity`.
    fn kept<'t>(&self, texts: &'t [String]) -> &'t [String] {
        &texts[..texts.len().min(self.capacity)]
    }

    /// [`Self::prepare`], saying whether the texts are known, on their way, or not taken.
    fn ask(&self, texts: &[String]) -> Asked {
        let texts = self.kept(texts);
        let missing = {
            let vectors = self.lock();
            texts.iter().any(|t| !vectors.contains_key(t))
        };
        if !missing {
            return Asked::Queued;
        }
        // The whole catalog goes: the thread keeps its vectors when the cache is full.
        match self.queue.try_send(texts.to_vec()) {
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
    /// threads); `None` (search by words alone) when the model fails on the query or the
    /// background thread is gone.
    pub fn meaning(&self, query: &str, texts: &[String], wait: Duration) -> Option<Meaning> {
        let texts = self.kept(texts);
        let mut asked = self.ask(texts);
        if asked == Asked::Dead {
            return None;
        }
        let query = self
            .encoder
            .encode(query)
            .map_err(|e| tracing::warn!("tool search: the query was not embedded: {e}"))
            .ok()?;
        let deadline = Instant::now() + wait;
        loop {
            let vectors = self.lock();
            let known: Vec<Option<ToolVector>> =
                texts.iter().map(|t| vectors.get(t).cloned()).collect();
            let left = deadline.saturating_duration_since(Instant::now());
            if known.iter().all(Option::is_some) || left.is_zero() || asked == Asked::Dead {
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

/// The background thread: embeds each catalog's texts not known yet, until loom ends. When the
/// cache is full, vectors of texts the catalog at hand does not have make room; a catalog is at
/// most `capacity` texts, so its own vectors always fit and are never made twice.
fn embed_catalogs(
    encoder: &dyn Encoder,
    vectors: &Vectors,
    catalogs: &Receiver<Vec<String>>,
    capacity: usize,
) {
    let lock = || {
        vectors
            .by_text
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    };
    let mut failures = 0usize;
    while let Ok(catalog) = catalogs.recv() {
        let mut current: Option<std::collections::HashSet<&str>> = None;
        for text in &catalog {
            if lock().contains_key(text) {
                continue;
            }
            // A panic in the model's code on a server's text ends neither the thread nor loom.
            let made =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| encoder.encode(text)))
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
            if known.len() >= capacity {
                let current =
                    current.get_or_insert_with(|| catalog.iter().map(String::as_str).collect());
                known.retain(|text, _| current.contains(text.as_str()));
            }
            known.insert(text.clone(), vector);
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

        // Parses, but candle's BERT would divide by zero heads: an error, not a panic.
        let zero_heads = folder(&[
            (
                "config.json",
                br#"{"vocab_size": 10, "hidden_size": 4, "num_hidden_layers": 1,
                "num_attention_heads": 0, "intermediate_size": 4, "hidden_act": "gelu",
                "hidden_dropout_prob": 0.1, "max_position_embeddings": 8, "type_vocab_size": 2,
                "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0,
                "classifier_dropout": null, "model_type": "bert"}"#,
            ),
            ("tokenizer.json", b"{}"),
            ("model.safetensors", b""),
        ]);
        let error = load_error(zero_heads.path());
        assert!(error.contains("num_attention_heads (0)"), "{error}");

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

    /// A stand-in encoder: a text's vector is (its length, 1) at unit length; "panic" panics,
    /// "fail" fails; each call is counted and takes `delay` (a text starting "slow", 10 s).
    struct Stand {
        calls: std::sync::atomic::AtomicUsize,
        delay: Duration,
    }

    impl Encoder for Stand {
        fn encode(&self, text: &str) -> Result<Vec<f32>, String> {
            self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            std::thread::sleep(if text.starts_with("slow") {
                Duration::from_secs(10)
            } else {
                self.delay
            });
            match text {
                "panic" => panic!("a stand-in panic"),
                "fail" => Err("a stand-in failure".to_owned()),
                _ => {
                    let (a, b) = (text.len() as f32, 1.0f32);
                    let norm = (a * a + b * b).sqrt();
                    Ok(vec![a / norm, b / norm])
                }
            }
        }
    }

    fn stand(delay_ms: u64) -> Arc<Stand> {
        Arc::new(Stand {
            calls: Default::default(),
            delay: Duration::from_millis(delay_ms),
        })
    }

    fn texts(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    /// The first search waits for a catalog still being embedded and gets every vector; a text
    /// the encoder fails or panics on gets an empty vector and the thread goes on.
    #[test]
    fn a_search_waits_for_its_catalog_and_failures_do_not_stop_the_thread() {
        let encoder = stand(20);
        let embedder = ToolEmbedder::start_with(encoder.clone(), 100).expect("starts");
        let catalog = texts(&["alpha", "panic", "beta", "fail", "gamma"]);
        let (query, known) = embedder
            .meaning("q", &catalog, Duration::from_secs(60))
            .expect("a query vector");
        assert_eq!(query.len(), 2);
        let lengths: Vec<Option<usize>> =
            known.iter().map(|v| v.as_ref().map(|v| v.len())).collect();
        assert_eq!(lengths, [Some(2), Some(0), Some(2), Some(0), Some(2)]);
        // Known texts are not embedded again: one more search costs the query alone.
        let calls = encoder.calls.load(std::sync::atomic::Ordering::SeqCst);
        embedder
            .meaning("q", &catalog, Duration::ZERO)
            .expect("a query vector");
        assert_eq!(
            encoder.calls.load(std::sync::atomic::Ordering::SeqCst),
            calls + 1
        );
        // A query the encoder fails on: words alone.
        assert!(embedder.meaning("fail", &catalog, Duration::ZERO).is_none());
    }

    /// Past the cache's size, a catalog's first `capacity` texts get vectors (the rest rank by
    /// words) and searching again embeds nothing: no churn. A second catalog makes room by
    /// dropping the first's vectors, never its own.
    #[test]
    fn a_catalog_larger_than_the_cache_does_not_churn() {
        let encoder = stand(0);
        let embedder = ToolEmbedder::start_with(encoder.clone(), 3).expect("starts");
        let first = texts(&["a", "bb", "ccc", "dddd", "eeeee"]);
        let (_, known) = embedder
            .meaning("q", &first, Duration::from_secs(60))
            .expect("a query vector");
        assert_eq!(known.len(), 3);
        assert!(known.iter().all(Option::is_some));
        let calls = |e: &Stand| e.calls.load(std::sync::atomic::Ordering::SeqCst);
        let after_first = calls(&encoder);
        for _ in 0..3 {
            embedder
                .meaning("q", &first, Duration::from_secs(60))
                .expect("a query vector");
        }
        assert_eq!(
            calls(&encoder),
            after_first + 3,
            "only the queries were embedded"
        );
        let second = texts(&["x", "yy", "zzz"]);
        let (_, known) = embedder
            .meaning("q", &second, Duration::from_secs(60))
            .expect("a query vector");
        assert!(known.iter().all(Option::is_some));
        assert_eq!(embedder.vectors(&second).iter().flatten().count(), 3);
    }

    /// A search that does not wait gets what is made so far: `None` for the rest.
    #[test]
    fn a_search_that_does_not_wait_takes_what_is_made() {
        let embedder = ToolEmbedder::start_with(stand(0), 100).expect("starts");
        let catalog = texts(&["slow one", "slow two", "slow three"]);
        let (query, known) = embedder
            .meaning("q", &catalog, Duration::ZERO)
            .expect("a query vector");
        assert_eq!((query.len(), known.len()), (2, 3));
        assert!(known.iter().all(Option::is_none), "{known:?}");
    }

    #[test]
    fn tool_texts_spell_names_as_words() {
        let huge = super::super::search::ToolText {
            name: "s_t".into(),
            server: "s".into(),
            tool: "t".into(),
            title: "title ".repeat(100_000),
            description: "word ".repeat(100_000),
            params: Vec::new(),
        };
        assert_eq!(text_of(&huge).chars().count(), MAX_TEXT_CHARS);
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
