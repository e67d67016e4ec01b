//! Tool search for search mode: `loom_find_tools(query, limit?)` ranks the exposed tools, the
//! "unknown tool" error suggests near names, and each server is summed up by its categories.
//!
//! Ranking is BM25F (fielded BM25, Robertson & Zaragoza): a word in a tool's own name counts three
//! times a word in its description, because names are short and chosen to say what a tool does
//! while descriptions ramble; the title and the description's first sentence sit between (see
//! [`FIELD_WEIGHT`]), and other tools' names that a description mentions are not its words. Words
//! are split on snake, kebab and camel case and on digits, lightly stemmed (plurals, -ing, -ed), and
//! a query word also matches its synonyms at half weight, so "folder" finds `create_directory` but
//! a tool that says "folder" itself still ranks first. A query's abbreviations are spelled out
//! ("PR"), two words the index knows as one are joined ("check out"), and a question leans toward
//! tools that tell rather than change.
//!
//! Everything here takes text from downstream servers or from the model, so every input is capped:
//! queries at [`MAX_QUERY_CHARS`] and [`MAX_QUERY_TERMS`], words at [`MAX_WORD_CHARS`], indexed
//! fields at [`MAX_FIELD_WORDS`], schemas at [`MAX_PARAMS`] and [`MAX_SCHEMA_DEPTH`].

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use serde_json::Value;

/// Characters of a query that are read; the rest is ignored.
pub const MAX_QUERY_CHARS: usize = 1_000;
/// Distinct query terms that are scored; a query is a request, not a document.
pub const MAX_QUERY_TERMS: usize = 64;
/// Characters kept of one word: longer runs are base64 or hashes, not vocabulary.
pub const MAX_WORD_CHARS: usize = 64;
/// Words indexed per field of one tool, so one giant description cannot dominate memory.
pub const MAX_FIELD_WORDS: usize = 1_000;
/// Parameters read from one input schema, nested ones included.
pub const MAX_PARAMS: usize = 64;
/// References and alternatives [`params_of`] follows on one path.
pub const MAX_SCHEMA_HOPS: usize = 4;
/// How deep [`params_of`] follows nested objects and arrays of objects.
pub const MAX_SCHEMA_DEPTH: usize = 3;

/// BM25 term-frequency saturation, at the top of the usual 1.2–2.0: a word a tool's name and its
/// description both say counts more than either, where 1.2 let long descriptions catch up with
/// names (measured on 294 tools: 1.2 to 2.5 sit within a query of each other, 2.0 a little
/// ahead on the tuned and development sets).
const K1: f64 = 2.0;
/// Weight of the read-verbs term a question adds ([`is_question`]): under a synonym's, so it only
/// decides between tools the query's own words found about equally.
const QUESTION_WEIGHT: f64 = 0.3;
/// Weight of a synonym's match relative to the query word itself.
const SYNONYM_WEIGHT: f64 = 0.5;
/// Share of a tool's score that comes from the sentence model when one is configured (the rest
/// from BM25F, each scaled by the query's best): chosen on the tuned set and `holdout2.json`
/// (0.3 to 0.6 measured; 0.6 best on both), before `holdout4.json` was first run.
pub const MEANING_WEIGHT: f64 = 0.6;
/// Characters of a name compared by edit distance in [`closest_names`] (quadratic cost).
const MAX_DISTANCE_CHARS: usize = 64;

/// The fields of a tool, in the order of [`FIELD_WEIGHT`] and [`FIELD_B`].
const NAME: usize = 0;
const TITLE: usize = 1;
const SERVER: usize = 2;
const PARAM_NAMES: usize = 3;
const PARAM_TEXT: usize = 4;
const LEAD: usize = 5;
const DESCRIPTION: usize = 6;
const FIELDS: usize = 7;
/// A name word outweighs any other; a title (a short human name, often the name reworded: "Take a
/// screenshot") nearly as much; then the description's first sentence, which says what the tool
/// does, and the server's name; parameter names as much as an ordinary word; last the words that
/// ramble — the rest of the description (usage notes, examples, error codes) and parameters'
/// descriptions. Measured on 294 tools, the rambling fields at half weight found one query more of
/// `holdout.json` and of `holdout2.json` than all fields at 1; the other weights sit on a plateau
/// (±1 query).
const FIELD_WEIGHT: [f64; FIELDS] = [3.0, 2.0, 1.5, 1.0, 0.5, 1.5, 0.5];
/// Length normalisation per field: none for the server (one or two words, the same for all of a
/// server's tools), little for names and titles, the usual 0.75 for the prose fields.
const FIELD_B: [f64; FIELDS] = [0.3, 0.3, 0.0, 0.75, 0.75, 0.75, 0.75];
/// Words of a description's first sentence that count as its lead.
const MAX_LEAD_WORDS: usize = 40;

/// Function words dropped from queries and tool texts alike: NLTK's English list (the words
/// apostrophes leave behind included: "don't" is "don" and "t") less "now", which asks for the
/// current time or state, plus "could", "would", "please" and "us". Tool verbs (get, list, show)
/// are not function words and stay.
const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "ain",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "aren",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "couldn",
    "d",
    "did",
    "didn",
    "do",
    "does",
    "doesn",
    "doing",
    "don",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "hadn",
    "has",
    "hasn",
    "have",
    "haven",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "isn",
    "it",
    "its",
    "itself",
    "just",
    "ll",
    "m",
    "ma",
    "me",
    "mightn",
    "more",
    "most",
    "mustn",
    "my",
    "myself",
    "needn",
    "no",
    "nor",
    "not",
    "o",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "please",
    "re",
    "s",
    "same",
    "shan",
    "she",
    "should",
    "shouldn",
    "so",
    "some",
    "such",
    "t",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "us",
    "ve",
    "very",
    "was",
    "wasn",
    "we",
    "were",
    "weren",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "won",
    "would",
    "wouldn",
    "y",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// Verbs that, followed by "me", frame a request rather than name an action.
const CONVERSATIONAL_VERBS: &[&str] = &["give", "let", "show", "tell"];

/// Words that say what a tool does to something rather than what it is about: left out of
/// [`categories`], where a model wants to know a server's subject ("branch", "table", "entity").
const GENERIC_VERBS: &[&str] = &[
    "add", "all", "create", "delete", "do", "get", "list", "make", "multiple", "new", "read",
    "remove", "run", "set", "show", "update", "write",
];

/// General-purpose synonym groups; each word matches the others at [`SYNONYM_WEIGHT`].
const SYNONYMS: &[&[&str]] = &[
    &["find", "search", "lookup", "look", "locate"],
    &["delete", "remove", "erase", "rm", "forget", "drop"],
    &["create", "add", "new"],
    &["list", "show", "enumerate", "ls"],
    &[
        "read", "get", "open", "fetch", "view", "retrieve", "download", "cat",
    ],
    &["write", "save", "store", "put"],
    &["edit", "modify", "change", "update", "replace"],
    &["move", "rename"],
    &["run", "execute", "exec"],
    &["compare", "diff", "difference"],
    &["convert", "transform"],
    &["toggle", "enable", "disable", "switch"],
    &["compress", "zip", "gzip", "archive"],
    &["file", "document"],
    &["dir", "directory", "folder"],
    &["repo", "repository"],
    &["commit", "history"],
    &["time", "clock", "timezone"],
    &["url", "web", "page", "website", "http", "https", "link"],
    &["sql", "query", "database", "db", "table"],
    &[
        "memory",
        "knowledge",
        "graph",
        "entity",
        "remember",
        "recall",
        "memorize",
    ],
    &["note", "observation", "fact"],
    &["relation", "relationship"],
    &["image", "picture", "photo", "img", "screenshot"],
    &["env", "environment"],
    &["config", "configuration", "settings"],
    &["info", "information", "metadata"],
    &["param", "parameter", "arg", "argument"],
    &["msg", "message"],
    // Added when the catalog grew to 22 servers (2026-12): everyday words for what tools do.
    &["append", "insert", "add"],
    &["copy", "duplicate", "clone"],
    &["size", "large", "big"],
    &["height", "elevation", "altitude"],
    &["format", "style"],
    &["navigate", "go", "visit", "browse"],
    &["current", "now", "today"],
    &["stop", "cancel", "terminate", "kill", "abort"],
    &["spreadsheet", "workbook", "worksheet", "sheet"],
    &["sum", "total"],
    &["calculate", "compute"],
    &["issue", "ticket", "bug"],
    &["reply", "respond", "answer"],
    &["tag", "label"],
    &["error", "exception", "failure"],
    &["summary", "summarize", "summarise", "overview"],
];

/// What the index reads of one exposed tool.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolText {
    /// The exposed name, e.g. `filesystem_read_text_file`; ties in ranking are broken by it.
    pub name: String,
    /// The downstream server's name, e.g. `filesystem`.
    pub server: String,
    /// The downstream tool's own name, e.g. `read_text_file`.
    pub tool: String,
    /// The tool's `title` (or `annotations.title`), empty when it has none; see [`title_of`].
    pub title: String,
    pub description: String,
    /// `(name, description)` of each parameter, as [`params_of`] reads them from `inputSchema`.
    pub params: Vec<(String, String)>,
}

/// A tool's unit vector from the sentence model (`semantic`); empty when the model failed on it.
pub type ToolVector = std::sync::Arc<[f32]>;

/// Cosine of two unit vectors (0 when their lengths differ, as an empty vector's does).
fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return 0.0;
    }
    a.iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum()
}

/// One ranked tool: its position in the list given to [`ToolIndex::build`] and its score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub index: usize,
    pub score: f64,
}

/// How often one term occurs in each field of one tool.
#[derive(Debug, Clone)]
struct Posting {
    tool: u32,
    frequency: [u16; FIELDS],
}

/// A BM25F index over a fixed list of tools; rebuilt whenever the catalog changes.
#[derive(Debug, Clone, Default)]
pub struct ToolIndex {
    tools: Vec<ToolText>,
    term_ids: HashMap<String, usize>,
    postings: Vec<Vec<Posting>>,
    field_lengths: Vec<[u32; FIELDS]>,
    average_lengths: [f64; FIELDS],
}

impl ToolIndex {
    pub fn build(tools: Vec<ToolText>) -> Self {
        let mut index = ToolIndex {
            tools: Vec::new(),
            ..ToolIndex::default()
        };
        let mut totals = [0u64; FIELDS];
        let mut occurrences: Vec<(usize, usize)> = Vec::new();
        let names: HashSet<&str> = tools
            .iter()
            .flat_map(|tool| [tool.name.as_str(), tool.tool.as_str()])
            .filter(|name| is_compound_name(name))
            .collect();
        for (position, tool) in tools.iter().enumerate() {
            let fields = field_terms(tool, &names);
            let mut lengths = [0u32; FIELDS];
            occurrences.clear();
            for (field, terms) in fields.iter().enumerate() {
                lengths[field] = terms.len() as u32;
                totals[field] += terms.len() as u64;
                for term in terms {
                    occurrences.push((index.term_id(term), field));
                }
            }
            index.field_lengths.push(lengths);
            // Grouped by term: one posting per term, in term order, whatever the hash order.
            occurrences.sort_unstable();
            for group in occurrences.chunk_by(|a, b| a.0 == b.0) {
                let mut frequency = [0u16; FIELDS];
                for &(_, field) in group {
                    frequency[field] = frequency[field].saturating_add(1);
                }
                index.postings[group[0].0].push(Posting {
                    tool: position as u32,
                    frequency,
                });
            }
        }
        let count = tools.len().max(1) as f64;
        index.average_lengths = totals.map(|total| total as f64 / count);
        index.tools = tools;
        index
    }

    /// The id of `term`, a new one (with an empty posting list) if it was not seen yet.
    fn term_id(&mut self, term: &str) -> usize {
        if let Some(&id) = self.term_ids.get(term) {
            return id;
        }
        let id = self.postings.len();
        self.term_ids.insert(term.to_owned(), id);
        self.postings.push(Vec::new());
        id
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Every indexed tool, in the order given to [`ToolIndex::build`].
    pub fn tools(&self) -> &[ToolText] {
        &self.tools
    }

    /// The tool a [`Hit::index`] points at.
    pub fn tool(&self, index: usize) -> Option<&ToolText> {
        self.tools.get(index)
    }

    /// The best `limit` tools for `query`, best first, ties by exposed name. A query with no
    /// searchable word (empty, punctuation, only stopwords) finds nothing: the caller tells the
    /// model so, rather than listing arbitrary tools.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Hit> {
        self.search_with_meaning(query, limit, None)
    }

    /// [`Self::search`], with the query's vector and the tools' (in index order, `None` where
    /// not known yet) when a sentence model is configured: each tool then scores
    /// `(1 - w)·bm25f/best bm25f + w·cosine/best cosine` with w = [`MEANING_WEIGHT`], so a tool
    /// the query describes in other words can rank among those it names.
    pub fn search_with_meaning(
        &self,
        query: &str,
        limit: usize,
        meaning: Option<(&[f32], &[Option<ToolVector>])>,
    ) -> Vec<Hit> {
        if limit == 0 || self.tools.is_empty() {
            return Vec::new();
        }
        let known = |term: &str| self.term_ids.contains_key(term);
        let terms = query_terms(query, &known);
        if terms.is_empty() {
            return Vec::new();
        }
        let mut scores = self.word_scores(query, &terms);
        if let Some((query_vector, tool_vectors)) = meaning {
            let closeness: Vec<f64> = (0..self.tools.len())
                .map(|i| match tool_vectors.get(i) {
                    Some(Some(vector)) => cosine(query_vector, vector).max(0.0),
                    _ => 0.0,
                })
                .collect();
            let best_words = scores.iter().copied().fold(0.0, f64::max);
            let best_meaning = closeness.iter().copied().fold(0.0, f64::max);
            if best_meaning > 0.0 {
                for (score, close) in scores.iter_mut().zip(&closeness) {
                    let words = if best_words > 0.0 {
                        *score / best_words
                    } else {
                        0.0
                    };
                    *score = (1.0 - MEANING_WEIGHT) * words + MEANING_WEIGHT * close / best_meaning;
                }
            }
        }
        let mut hits: Vec<Hit> = scores
            .into_iter()
            .enumerate()
            .filter(|(_, score)| *score > 0.0)
            .map(|(index, score)| Hit { index, score })
            .collect();
        let ranking = |a: &Hit, b: &Hit| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| self.tools[a.index].name.cmp(&self.tools[b.index].name))
                .then(a.index.cmp(&b.index))
        };
        // Only the best `limit` need ordering; a broad query can match every one of 10,000 tools.
        if hits.len() > limit {
            hits.select_nth_unstable_by(limit - 1, ranking);
            hits.truncate(limit);
        }
        hits.sort_by(ranking);
        hits
    }

    /// Every tool's BM25F score for the query's `terms` (0 where no term matches).
    fn word_scores(&self, query: &str, terms: &[String]) -> Vec<f64> {
        let mut scores = vec![0.0f64; self.tools.len()];
        // Per query term, a tool scores its best variant (the word or one synonym), so a tool that
        // says both "folder" and "directory" is not counted twice for one query word.
        let mut best = vec![0.0f64; self.tools.len()];
        let mut touched: Vec<usize> = Vec::new();
        let mut groups: Vec<Vec<(String, f64)>> =
            terms.iter().map(|term| expansions(term)).collect();
        // A question ("which pods are running", "how high is Denver") asks to be told something:
        // tools that get, list or describe answer it, tools that create or delete do not. One
        // weak extra term says so without outweighing any word the query has.
        if !groups.is_empty() && is_question(query) {
            groups.push(
                READ_VERBS
                    .iter()
                    .map(|verb| (stem(verb), QUESTION_WEIGHT))
                    .collect(),
            );
        }
        for group in groups {
            for (variant, weight) in group {
                let Some(&id) = self.term_ids.get(variant.as_str()) else {
                    continue;
                };
                let postings = &self.postings[id];
                let idf = self.idf(postings.len());
                for posting in postings {
                    let tool = posting.tool as usize;
                    let score = weight * idf * self.saturated_frequency(posting);
                    if best[tool] == 0.0 {
                        touched.push(tool);
                    }
                    best[tool] = best[tool].max(score);
                }
            }
            for tool in touched.drain(..) {
                scores[tool] += best[tool];
                best[tool] = 0.0;
            }
        }
        scores
    }

    /// BM25's idf, in the form that stays positive for terms in more than half of the tools.
    fn idf(&self, tools_with_term: usize) -> f64 {
        let n = self.tools.len() as f64;
        let df = tools_with_term as f64;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// BM25F: field frequencies, each weighted and length-normalised, summed, then saturated.
    fn saturated_frequency(&self, posting: &Posting) -> f64 {
        let lengths = &self.field_lengths[posting.tool as usize];
        let mut frequency = 0.0;
        for field in 0..FIELDS {
            let count = f64::from(posting.frequency[field]);
            if count == 0.0 {
                continue;
            }
            let average = self.average_lengths[field];
            let relative = if average > 0.0 {
                f64::from(lengths[field]) / average
            } else {
                1.0
            };
            let norm = 1.0 - FIELD_B[field] + FIELD_B[field] * relative;
            frequency += FIELD_WEIGHT[field] * count / norm;
        }
        frequency / (K1 + frequency)
    }
}

/// The tool's own name, or the exposed one when the own name is unknown.
fn own_name(tool: &ToolText) -> &str {
    if tool.tool.is_empty() {
        &tool.name
    } else {
        &tool.tool
    }
}

/// The indexed terms of each field of one tool.
fn field_terms(tool: &ToolText, names: &HashSet<&str>) -> [Vec<String>; FIELDS] {
    let mut fields: [Vec<String>; FIELDS] = Default::default();
    fields[NAME] = terms_of(own_name(tool), MAX_FIELD_WORDS);
    // A title that only repeats the name ("brave_web_search" as its own title) adds nothing but a
    // second count of the same words.
    let title = terms_of(&tool.title, MAX_FIELD_WORDS);
    if title.iter().collect::<HashSet<_>>() != fields[NAME].iter().collect::<HashSet<_>>() {
        fields[TITLE] = title;
    }
    fields[SERVER] = terms_of(&tool.server, MAX_FIELD_WORDS);
    let prose = |text: &str, limit: usize| terms_of(&without_other_tools(text, names, tool), limit);
    let (lead, rest) = split_lead(&tool.description);
    fields[LEAD] = prose(lead, MAX_LEAD_WORDS);
    fields[DESCRIPTION] = prose(rest, MAX_FIELD_WORDS);
    for (name, description) in &tool.params {
        let room = MAX_FIELD_WORDS.saturating_sub(fields[PARAM_NAMES].len());
        fields[PARAM_NAMES].extend(terms_of(name, room));
        let room = MAX_FIELD_WORDS.saturating_sub(fields[PARAM_TEXT].len());
        fields[PARAM_TEXT].extend(prose(description, room));
    }
    fields
}

/// A description's first sentence and the rest. By convention the first sentence says what the
/// tool does ("Create a new branch in a GitHub repository"); what follows is usage notes,
/// examples and error codes, which name many things the tool is not about.
pub(super) fn split_lead(description: &str) -> (&str, &str) {
    let text = description.trim_start();
    let end = text
        .char_indices()
        .find(|&(i, c)| {
            c == '\n'
                || (matches!(c, '.' | '!' | '?') && text[i + 1..].starts_with(char::is_whitespace))
        })
        .map_or(text.len(), |(i, c)| i + c.len_utf8());
    text.split_at(end)
}

/// A tool name made of several words joined by `_` or `-` (`browser_snapshot`, `get-env`): one that
/// a description can name without meaning the word itself. Single words ("fetch") are never taken
/// out of prose.
fn is_compound_name(name: &str) -> bool {
    name.contains(['_', '-']) && name.chars().any(char::is_alphanumeric)
}

/// `text` with the other tools' names it mentions blanked out: servers write "use
/// `firecrawl_scrape` for one page" or "call browser_snapshot first" into a tool's description,
/// and those words describe the other tool; counted here, they make every tool of a server match
/// the words of its best-known one.
fn without_other_tools<'a>(
    text: &'a str,
    names: &HashSet<&str>,
    tool: &ToolText,
) -> std::borrow::Cow<'a, str> {
    let is_part = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    let mentions_other = |chunk: &str| {
        let chunk = chunk.trim_matches(|c: char| c == '_' || c == '-');
        chunk != tool.tool && chunk != tool.name && names.contains(chunk)
    };
    if !text.split(|c: char| !is_part(c)).any(mentions_other) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut kept = String::with_capacity(text.len());
    for (i, chunk) in text.split(|c: char| !is_part(c)).enumerate() {
        if i > 0 {
            kept.push(' ');
        }
        if !mentions_other(chunk) {
            kept.push_str(chunk);
        }
    }
    std::borrow::Cow::Owned(kept)
}

/// Stemmed, stopword-free terms of `text`, at most `limit` of them.
fn terms_of(text: &str, limit: usize) -> Vec<String> {
    words_of(text)
        .filter(|word| !is_stopword(word))
        .take(limit)
        .map(|word| stem(&word))
        .collect()
}

/// The distinct terms of a query, in order, capped in characters and in terms. Abbreviations are
/// spelled out ("PR" → pull request); two neighbouring words that the index knows as one word
/// count as that word too ("check out" → checkout, "set up" → setup), before stopwords are
/// dropped, since the second half is often one ("out", "up"). `known` says whether the index
/// has a term.
fn query_terms(query: &str, known: &dyn Fn(&str) -> bool) -> Vec<String> {
    let capped = match query.char_indices().nth(MAX_QUERY_CHARS) {
        Some((end, _)) => &query[..end],
        None => query,
    };
    let mut seen = HashSet::new();
    let mut terms = Vec::new();
    let words: Vec<String> = words_of(capped)
        .flat_map(|word| match abbreviation(&word) {
            Some(spelled) => spelled.iter().map(|w| (*w).to_owned()).collect(),
            None => vec![word],
        })
        .collect();
    // "show me …", "give me …": how people ask, not what they ask for ("show me what's inside
    // config.toml" is not `git_show`). The verb still counts when it stands alone.
    let filler = |i: usize| {
        let is_frame = |verb: &String, next: Option<&String>| {
            CONVERSATIONAL_VERBS.contains(&verb.as_str()) && next.is_some_and(|n| n == "me")
        };
        is_frame(&words[i], words.get(i + 1))
    };
    let kept: Vec<&String> = (0..words.len())
        .filter(|&i| !filler(i))
        .map(|i| &words[i])
        .collect();
    let compounds = kept.windows(2).filter_map(|pair| {
        let joined = stem(&format!("{}{}", pair[0], pair[1]));
        // The first half must carry meaning: "for me" stems to "form".
        let whole = pair[0].chars().count() > 1 && pair[1].chars().count() > 1;
        (whole && !is_stopword(pair[0]) && known(&joined)).then_some(joined)
    });
    let hints = capped
        .split_whitespace()
        .filter_map(shape_hint)
        .map(str::to_owned);
    let singles = kept
        .iter()
        .filter(|word| !is_stopword(word))
        .map(|word| stem(word));
    for term in singles
        .chain(compounds)
        .chain(hints.map(|hint| stem(&hint)))
    {
        if seen.insert(term.clone()) {
            terms.push(term);
            if terms.len() == MAX_QUERY_TERMS {
                break;
            }
        }
    }
    terms
}

/// Verbs of tools that tell rather than change; see [`is_question`].
const READ_VERBS: &[&str] = &["get", "list", "read", "show", "search", "find", "describe"];
/// Words that open a question.
const QUESTION_WORDS: &[&str] = &[
    "what", "which", "who", "whom", "whose", "where", "when", "how", "why", "is", "are", "was",
    "were", "does", "do", "did", "has", "have",
];

/// Whether `query` asks something: it ends in a question mark or opens with a question word.
fn is_question(query: &str) -> bool {
    query.trim_end().ends_with('?')
        || words_of(query)
            .next()
            .is_some_and(|first| QUESTION_WORDS.contains(&first.as_str()))
}

/// Abbreviations people type that tool texts spell out. Only unambiguous ones: "pr" is always a
/// pull request in a tool request; "ts" (TypeScript? timestamp?) is not listed.
const ABBREVIATIONS: &[(&str, &[&str])] = &[
    ("pr", &["pull", "request"]),
    ("prs", &["pull", "requests"]),
    ("docs", &["documentation"]),
    ("md", &["markdown"]),
    ("js", &["javascript"]),
    ("py", &["python"]),
    ("tz", &["timezone"]),
];

fn abbreviation(word: &str) -> Option<&'static [&'static str]> {
    ABBREVIATIONS
        .iter()
        .find(|(short, _)| *short == word)
        .map(|(_, spelled)| *spelled)
}

/// A word for what a query chunk looks like: people name files and pages rather than say "file"
/// or "web page" ("what's inside config.toml", "get https://example.com").
fn shape_hint(chunk: &str) -> Option<&'static str> {
    let chunk = chunk.trim_matches(|c: char| !c.is_alphanumeric() && c != '*' && c != '/');
    if chunk.contains("://") || chunk.starts_with("www.") {
        return Some("url");
    }
    // A host name ends in a top-level domain, which no common file extension is ("example.com",
    // "docs.python.org"); `.md`, `.rs`, `.py`, `.ai`, `.io` are left to files, whose extensions
    // they also are.
    if let Some((host, tld)) = chunk.rsplit_once('.')
        && !host.is_empty()
        && !host.contains('/')
        && ["com", "org", "net", "edu", "gov", "dev", "app"].contains(&tld)
    {
        return Some("url");
    }
    let extension_like = chunk.rsplit_once('.').is_some_and(|(stem, extension)| {
        !stem.is_empty()
            && (2..=5).contains(&extension.chars().count())
            && extension.chars().all(|c| c.is_ascii_alphabetic())
    });
    let path_like = chunk.len() > 1 && chunk.contains('/');
    (extension_like || path_like).then_some("file")
}

/// A query term with weight 1 and its synonyms (stemmed) with [`SYNONYM_WEIGHT`].
fn expansions(term: &str) -> Vec<(String, f64)> {
    let mut out = vec![(term.to_owned(), 1.0)];
    if let Some(others) = synonym_table().get(term) {
        out.extend(others.iter().map(|other| (other.clone(), SYNONYM_WEIGHT)));
    }
    out
}

/// Stemmed word → the stems of its synonyms, built once from [`SYNONYMS`].
fn synonym_table() -> &'static HashMap<String, Vec<String>> {
    static TABLE: OnceLock<HashMap<String, Vec<String>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table: HashMap<String, Vec<String>> = HashMap::new();
        for group in SYNONYMS {
            let stems: Vec<String> = group.iter().map(|word| stem(word)).collect();
            for own in &stems {
                let others = table.entry(own.clone()).or_default();
                for other in &stems {
                    if other != own && !others.contains(other) {
                        others.push(other.clone());
                    }
                }
            }
        }
        table
    })
}

fn is_stopword(word: &str) -> bool {
    STOPWORDS.binary_search(&word).is_ok()
}

/// Lower-case words of `text`, split on anything not a letter or digit, on camel case
/// (`readFile`, `HTTPServer` → http server) and between letters and digits (`utf8` → utf 8).
pub fn split_words(text: &str) -> Vec<String> {
    words_of(text).collect()
}

fn words_of(text: &str) -> impl Iterator<Item = String> + '_ {
    let mut chars = text.chars().peekable();
    std::iter::from_fn(move || {
        let mut word = String::new();
        let mut kept = 0usize;
        let mut previous: Option<char> = None;
        while let Some(&c) = chars.peek() {
            if !c.is_alphanumeric() {
                chars.next();
                if previous.is_some() {
                    break;
                }
                continue;
            }
            if let Some(p) = previous {
                let next_is_lower = || {
                    let mut ahead = chars.clone();
                    ahead.next();
                    ahead.peek().is_some_and(|n| n.is_lowercase())
                };
                let boundary = (p.is_lowercase() && c.is_uppercase())
                    || (p.is_alphabetic() && c.is_numeric())
                    || (p.is_numeric() && c.is_alphabetic())
                    || (p.is_uppercase() && c.is_uppercase() && next_is_lower());
                if boundary {
                    break;
                }
            }
            chars.next();
            if kept < MAX_WORD_CHARS {
                word.extend(c.to_lowercase());
                kept += 1;
            }
            previous = Some(c);
        }
        (!word.is_empty()).then_some(word)
    })
}

/// A light suffix stripper: plurals, -ing, -ed and a final e, so that "files", "file", "staged",
/// "staging" and "stage" meet. Stems are only ever compared with stems, never shown.
fn stem(word: &str) -> String {
    let length = word.chars().count();
    if length <= 3 {
        return word.to_owned();
    }
    for suffix in ["ies", "ied"] {
        if let Some(base) = word.strip_suffix(suffix)
            && base.chars().count() >= 2
        {
            return format!("{base}y");
        }
    }
    let base = if let Some(base) = word.strip_suffix("es")
        && ["s", "x", "z", "ch", "sh"]
            .iter()
            .any(|end| base.ends_with(end))
        && base.chars().count() >= 3
    {
        base
    } else if let Some(base) = word.strip_suffix('s')
        && !["ss", "us", "is"].iter().any(|end| word.ends_with(end))
    {
        base
    } else if let Some(base) = word.strip_suffix("ing").or_else(|| word.strip_suffix("ed"))
        && base.chars().count() >= 3
        && base.chars().any(|c| "aeiouy".contains(c))
    {
        undouble(base)
    } else {
        word
    };
    match base.strip_suffix('e') {
        Some(shorter) if base.chars().count() > 3 => shorter.to_owned(),
        _ => base.to_owned(),
    }
}

/// "running" → "run", "committed" → "commit"; "add" and "fill" stay.
fn undouble(base: &str) -> &str {
    let mut tail = base.chars().rev();
    match (tail.next(), tail.next()) {
        (Some(last), Some(before))
            if last == before && !"aeiouylsz".contains(last) && base.chars().count() >= 4 =>
        {
            &base[..base.len() - last.len_utf8()]
        }
        _ => base,
    }
}

/// A tool definition's human title: `title`, else `annotations.title` (the older place), else
/// empty.
pub fn title_of(tool: &serde_json::Map<String, Value>) -> String {
    tool.get("title")
        .or_else(|| tool.get("annotations").and_then(|a| a.get("title")))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// `(name, description)` of each property of a tool's `inputSchema`, nested properties (objects,
/// arrays of objects) included up to [`MAX_SCHEMA_DEPTH`], at most [`MAX_PARAMS`]. A parameter
/// without a description gets its title, or nothing. Local references (`#/$defs/…`,
/// `#/definitions/…`) and `anyOf`/`oneOf`/`allOf` alternatives are followed, at most
/// [`MAX_SCHEMA_HOPS`] on one path, since generated schemas (pydantic, zod) put a parameter's
/// fields there (`Optional[Model]` is `anyOf: [{$ref}, {type: null}]`). Anything not shaped like
/// a schema is skipped.
pub fn params_of(input_schema: &Value) -> Vec<(String, String)> {
    let mut params = Vec::new();
    let start = SchemaStep { depth: 0, hops: 0 };
    collect_params(input_schema, input_schema, start, &mut params);
    params
}

/// Where [`collect_params`] is: how deep in nested properties, and how many references and
/// alternatives it followed to get there (a reference cycle adds no depth, so it needs a bound of
/// its own).
#[derive(Clone, Copy)]
struct SchemaStep {
    depth: usize,
    hops: usize,
}

fn collect_params(
    schema: &Value,
    root: &Value,
    at: SchemaStep,
    params: &mut Vec<(String, String)>,
) {
    if at.depth >= MAX_SCHEMA_DEPTH || params.len() >= MAX_PARAMS {
        return;
    }
    if at.hops < MAX_SCHEMA_HOPS {
        let hop = SchemaStep {
            hops: at.hops + 1,
            ..at
        };
        if let Some(target) = local_reference(schema, root) {
            collect_params(target, root, hop, params);
        }
        for key in ["anyOf", "oneOf", "allOf"] {
            for alternative in schema
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                collect_params(alternative, root, hop, params);
            }
        }
    }
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, property) in properties {
        if params.len() >= MAX_PARAMS {
            return;
        }
        let text = ["description", "title"]
            .iter()
            .find_map(|key| property.get(key).and_then(Value::as_str))
            .unwrap_or_default()
            .to_owned();
        params.push((name.clone(), text));
        let inside = SchemaStep {
            depth: at.depth + 1,
            ..at
        };
        collect_params(property, root, inside, params);
        if let Some(items) = property.get("items") {
            collect_params(items, root, inside, params);
        }
    }
}

/// The schema a `$ref` such as `#/$defs/Style` points at inside `root`; other references
/// (remote, JSON-pointer escapes) are not followed.
fn local_reference<'a>(schema: &Value, root: &'a Value) -> Option<&'a Value> {
    let reference = schema.get("$ref")?.as_str()?;
    let (section, name) = reference.strip_prefix("#/")?.split_once('/')?;
    if !matches!(section, "$defs" | "definitions") || name.contains('/') {
        return None;
    }
    root.get(section)?.get(name)
}

/// Up to `n` of `candidates` nearest to an unknown tool `name`, best first: a case-insensitive
/// equal, then names that contain it or that it contains ("read_file" → "filesystem_read_file"),
/// shared words, and edit distance. Names sharing nothing with `name` are not suggested.
pub fn closest_names<'a>(
    name: &str,
    candidates: impl Iterator<Item = &'a str>,
    n: usize,
) -> Vec<String> {
    let wanted = fold(name);
    let wanted_terms: HashSet<String> = terms_of(&wanted, MAX_QUERY_TERMS).into_iter().collect();
    let mut scored: Vec<(f64, &str)> = Vec::new();
    for candidate in candidates {
        let folded = fold(candidate);
        let similarity = 1.0 - normalized_distance(&wanted, &folded);
        let contains = {
            let (short, long) = if wanted.len() <= folded.len() {
                (&wanted, &folded)
            } else {
                (&folded, &wanted)
            };
            short.chars().count() >= 3 && long.contains(short.as_str())
        };
        let candidate_terms: HashSet<String> =
            terms_of(&folded, MAX_QUERY_TERMS).into_iter().collect();
        let shared = wanted_terms.intersection(&candidate_terms).count();
        let union = wanted_terms.union(&candidate_terms).count();
        let overlap = if union == 0 {
            0.0
        } else {
            shared as f64 / union as f64
        };
        if similarity < 0.5 && !contains && shared == 0 {
            continue;
        }
        let exact = if folded == wanted { 3.0 } else { 0.0 };
        let score = exact + similarity + overlap + if contains { 0.5 } else { 0.0 };
        scored.push((score, candidate));
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    scored.dedup_by(|a, b| a.1 == b.1);
    scored
        .into_iter()
        .take(n)
        .map(|(_, name)| name.to_owned())
        .collect()
}

/// Lower case, at most [`MAX_QUERY_CHARS`] characters.
fn fold(name: &str) -> String {
    name.chars()
        .take(MAX_QUERY_CHARS)
        .flat_map(char::to_lowercase)
        .collect()
}

/// Levenshtein distance over the first [`MAX_DISTANCE_CHARS`] characters, divided by the longer
/// length: 0 for equal, 1 for nothing in common.
fn normalized_distance(a: &str, b: &str) -> f64 {
    let head = |s: &str| -> String { s.chars().take(MAX_DISTANCE_CHARS).collect() };
    1.0 - strsim::normalized_levenshtein(&head(a), &head(b))
}

/// A server's top `n` categories: the words most of its tools' own names share, most frequent
/// first (ties alphabetical), each counted once per tool. Generic verbs (get, list, create…),
/// stopwords, numbers, single letters and the server's own name are left out, so `git` gives
/// "branch", "diff"… rather than "git". Words with one stem are one category, shown in their most
/// common spelling.
pub fn categories<'a>(tools: impl Iterator<Item = &'a ToolText>, n: usize) -> Vec<(String, usize)> {
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut spellings: HashMap<String, HashMap<String, usize>> = HashMap::new();
    for tool in tools {
        let server_words: HashSet<String> = words_of(&tool.server).collect();
        let mut seen = HashSet::new();
        for word in words_of(own_name(tool)).take(MAX_FIELD_WORDS) {
            let meaningful = word.chars().count() > 1
                && !word.chars().all(|c| c.is_numeric())
                && !is_stopword(&word)
                && !GENERIC_VERBS.contains(&word.as_str())
                && !server_words.contains(&word);
            if !meaningful {
                continue;
            }
            let term = stem(&word);
            *spellings
                .entry(term.clone())
                .or_default()
                .entry(word)
                .or_default() += 1;
            if seen.insert(term.clone()) {
                *counts.entry(term).or_default() += 1;
            }
        }
    }
    let mut ranked: Vec<(String, usize)> = counts
        .into_iter()
        .map(|(term, count)| {
            let shown = spellings
                .get(&term)
                .and_then(|forms| {
                    forms
                        .iter()
                        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
                        .map(|(form, _)| form.clone())
                })
                .unwrap_or(term);
            (shown, count)
        })
        .collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    ranked.truncate(n);
    ranked
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use serde_json::json;

    use super::*;

    fn tool(server: &str, name: &str, description: &str) -> ToolText {
        ToolText {
            name: format!("{server}_{name}"),
            server: server.to_owned(),
            tool: name.to_owned(),
            title: String::new(),
            description: description.to_owned(),
            params: Vec::new(),
        }
    }

    fn names(index: &ToolIndex, query: &str, limit: usize) -> Vec<String> {
        index
            .search(query, limit)
            .iter()
            .filter_map(|hit| index.tool(hit.index).map(|t| t.name.clone()))
            .collect()
    }

    /// Meaning and words together: a tool no query word names can come first when the query's
    /// vector is its own; a tool without a vector keeps its words' share; a query without a
    /// searchable word finds nothing even with vectors.
    #[test]
    fn meaning_joins_words_in_the_ranking() {
        let index = ToolIndex::build(vec![
            tool("s", "alpha_tool", "Does alpha things."),
            tool("s", "echo", "Repeats its input."),
            tool("s", "gamma", "Unrelated."),
            tool("s", "alpha_unembedded", "Alpha as well."),
        ]);
        let query = [1.0f32, 0.0];
        let vectors: Vec<Option<ToolVector>> = vec![
            Some(std::sync::Arc::from(vec![0.0f32, 1.0])),
            Some(std::sync::Arc::from(vec![1.0f32, 0.0])),
            Some(std::sync::Arc::from(vec![-1.0f32, 0.0])),
            None,
        ];
        let ranked = |q: &str| -> Vec<(String, f64)> {
            index
                .search_with_meaning(q, 10, Some((&query, &vectors)))
                .iter()
                .map(|hit| (index.tools()[hit.index].tool.clone(), hit.score))
                .collect()
        };
        let found = ranked("alpha");
        let order: Vec<&str> = found.iter().map(|(name, _)| name.as_str()).collect();
        // echo: 0.6 (meaning alone); the alpha tools share the words' 0.4 at most; gamma's
        // cosine is negative and its words none: not found.
        assert_eq!(order[0], "echo", "{found:?}");
        assert!((found[0].1 - MEANING_WEIGHT).abs() < 1e-9, "{found:?}");
        assert!(order.contains(&"alpha_tool") && order.contains(&"alpha_unembedded"));
        assert!(!order.contains(&"gamma"), "{found:?}");
        assert!(found.iter().all(|(_, score)| *score <= 1.0 + 1e-9));
        // Words alone: only the alpha tools.
        let words: Vec<String> = names(&index, "alpha", 10);
        assert_eq!(words.len(), 2, "{words:?}");
        assert!(ranked("?!").is_empty() && ranked("the of and").is_empty());
        // A query vector of another length (another model) leaves the words as they were.
        let other = [1.0f32, 0.0, 0.0];
        let hits = index.search_with_meaning("alpha", 10, Some((&other, &vectors)));
        assert_eq!(hits, index.search("alpha", 10));
    }

    #[test]
    fn words_split_on_every_naming_style() {
        assert_eq!(split_words("read_text_file"), ["read", "text", "file"]);
        assert_eq!(split_words("get-tiny-image"), ["get", "tiny", "image"]);
        assert_eq!(split_words("readTextFile"), ["read", "text", "file"]);
        assert_eq!(
            split_words("HTTPServer parseJSON"),
            ["http", "server", "parse", "json"]
        );
        assert_eq!(
            split_words("utf8 sha256sum v2"),
            ["utf", "8", "sha", "256", "sum", "v", "2"]
        );
        assert_eq!(split_words("  --  "), Vec::<String>::new());
        assert_eq!(
            split_words("Größe ändern 東京の時間"),
            ["größe", "ändern", "東京の時間"]
        );
    }

    #[test]
    fn words_are_capped_in_length() {
        let long = "x".repeat(10_000);
        let words = split_words(&format!("{long} tail"));
        assert_eq!(words[0].chars().count(), MAX_WORD_CHARS);
        assert_eq!(words[1], "tail");
    }

    #[test]
    fn stems_meet_across_inflections() {
        for group in [
            &["file", "files"][..],
            &["stage", "staged", "staging", "stages"],
            &["commit", "commits", "committed", "committing"],
            &["entity", "entities"],
            &["directory", "directories"],
            &["branch", "branches"],
            &["match", "matches", "matching"],
            &["add", "added", "adding", "adds"],
            &["log", "logs", "logging"],
        ] {
            let stems: HashSet<String> = group.iter().map(|w| stem(w)).collect();
            assert_eq!(stems.len(), 1, "{group:?} stem to {stems:?}");
        }
        for kept in ["status", "process", "string", "need", "use", "größe"] {
            assert!(!stem(kept).is_empty(), "{kept}");
        }
        assert_ne!(stem("string"), stem("str"));
    }

    #[test]
    fn stopwords_are_sorted_for_binary_search() {
        assert!(STOPWORDS.windows(2).all(|pair| pair[0] < pair[1]));
    }

    #[test]
    fn name_matches_outrank_description_matches() {
        let index = ToolIndex::build(vec![
            tool(
                "a",
                "describe_table",
                "Explain the branch layout of a table",
            ),
            tool("b", "list_branches", "List all branches"),
        ]);
        assert_eq!(
            names(&index, "branch", 5),
            ["b_list_branches", "a_describe_table"]
        );
    }

    #[test]
    fn synonyms_match_below_the_word_itself() {
        let index = ToolIndex::build(vec![
            tool("fs", "create_directory", "Create a new directory"),
            tool("fs", "make_folder", "Make a folder"),
            tool("fs", "read_file", "Read a file"),
        ]);
        assert_eq!(
            names(&index, "folder", 5),
            ["fs_make_folder", "fs_create_directory"]
        );
    }

    #[test]
    fn ties_are_broken_by_exposed_name() {
        let twins: Vec<ToolText> = ["zeta", "alpha", "mid"]
            .iter()
            .map(|server| tool(server, "echo", "Echo the input"))
            .collect();
        let index = ToolIndex::build(twins);
        assert_eq!(
            names(&index, "echo", 5),
            ["alpha_echo", "mid_echo", "zeta_echo"]
        );
    }

    #[test]
    fn queries_without_searchable_words_find_nothing() {
        let index = ToolIndex::build(vec![tool("a", "echo", "Echo the input")]);
        for query in ["", "   ", "?!", "the of to", "show me"] {
            assert!(index.search(query, 5).is_empty(), "{query:?}");
        }
        assert!(index.search("echo", 0).is_empty());
        assert!(ToolIndex::build(Vec::new()).search("echo", 5).is_empty());
    }

    #[test]
    fn hostile_queries_are_capped_and_safe() {
        let index = ToolIndex::build(vec![
            tool("a", "echo", "Echo the input"),
            tool("t", "get_time", "Current time in Tokyo (東京)"),
        ]);
        let huge = "echo ".repeat(200_000) + "time";
        // Only the first MAX_QUERY_CHARS characters count: "time" is far beyond them.
        assert_eq!(names(&index, &huge, 5), ["a_echo"]);
        let many: String = (0..10_000).map(|i| format!("w{i}x ")).collect();
        assert!(query_terms(&many, &|_| false).len() <= MAX_QUERY_TERMS);
        assert_eq!(names(&index, "東京", 5), ["t_get_time"]);
        assert!(index.search("\u{0}\u{feff}🦀🦀🦀", 5).is_empty());
        // Cutting at MAX_QUERY_CHARS must land on a character boundary.
        let wide = "é".repeat(MAX_QUERY_CHARS + 10);
        assert!(index.search(&wide, 5).is_empty());
    }

    #[test]
    fn file_names_and_urls_in_queries_count_as_files_and_pages() {
        let index = ToolIndex::build(vec![
            tool("fs", "read_text_file", "Read a file as text"),
            tool("web", "fetch", "Fetch a URL"),
            tool("git", "show", "Show a commit"),
        ]);
        assert_eq!(names(&index, "config.toml", 1), ["fs_read_text_file"]);
        assert_eq!(names(&index, "src/lib.rs", 1), ["fs_read_text_file"]);
        assert_eq!(names(&index, "https://example.com", 1), ["web_fetch"]);
        assert_eq!(names(&index, "open example.com", 1), ["web_fetch"]);
        assert_eq!(names(&index, "notes.md", 1), ["fs_read_text_file"]);
        assert_eq!(
            names(&index, "show me what's inside config.toml", 1),
            ["fs_read_text_file"]
        );
        assert_eq!(names(&index, "show the last commit", 1), ["git_show"]);
    }

    #[test]
    fn titles_count_unless_they_repeat_the_name() {
        let mut shot = tool("pw", "browser_take_screenshot", "Capture the page");
        shot.title = "Take a picture".to_owned();
        let mut same = tool("b", "web_search", "Search the web");
        same.title = "web_search".to_owned();
        let index = ToolIndex::build(vec![shot, same, tool("fs", "read_file", "Read a file")]);
        assert_eq!(names(&index, "picture", 5), ["pw_browser_take_screenshot"]);
        // Indexed once: a title equal to the name would have doubled its words.
        assert_eq!(index.field_lengths[1][TITLE], 0);
        assert_eq!(index.field_lengths[0][TITLE], 2);
    }

    #[test]
    fn other_tools_named_in_a_description_are_not_its_words() {
        let index = ToolIndex::build(vec![
            tool("pw", "browser_snapshot", "Capture the page as text"),
            tool(
                "pw",
                "browser_click",
                "Click an element; call browser_snapshot first. Not pw_browser_snapshot either.",
            ),
        ]);
        assert_eq!(names(&index, "snapshot", 5), ["pw_browser_snapshot"]);
        // A single-word name is an ordinary word and stays ("fetch" the verb).
        let index = ToolIndex::build(vec![
            tool("web", "fetch", "Get a URL"),
            tool("web", "crawl_site", "Fetch every page of a site"),
        ]);
        assert_eq!(names(&index, "fetch", 5).len(), 2);
    }

    #[test]
    fn the_first_sentence_says_more_than_the_rest() {
        assert_eq!(
            split_lead("Create a branch. Fails when it exists."),
            ("Create a branch.", " Fails when it exists.")
        );
        assert_eq!(split_lead("One line\nnext"), ("One line\n", "next"));
        assert_eq!(split_lead("v1.2 is out"), ("v1.2 is out", ""));
        assert_eq!(split_lead(""), ("", ""));
        let index = ToolIndex::build(vec![
            tool(
                "a",
                "run",
                "Run a job. Unlike deploy, it does not touch releases.",
            ),
            tool("b", "ship", "Deploy a release."),
        ]);
        assert_eq!(names(&index, "deploy", 5), ["b_ship", "a_run"]);
    }

    #[test]
    fn abbreviations_are_spelled_out_and_split_words_joined() {
        let index = ToolIndex::build(vec![
            tool("gh", "merge_pull_request", "Merge a pull request"),
            tool("gh", "merge_branch", "Merge a branch"),
            tool("git", "checkout", "Switch to a branch"),
            tool("git", "check_status", "Show the status"),
        ]);
        assert_eq!(names(&index, "merge PR 12", 1), ["gh_merge_pull_request"]);
        assert_eq!(names(&index, "check out main", 1), ["git_checkout"]);
        // Only when the index has the joined word, and never from a function word: "for me" is
        // not "forme" (which stems to "form").
        let known = |term: &str| term == "form";
        assert_eq!(query_terms("read it for me", &known), ["read"]);
        assert_eq!(query_terms("fill form", &known), ["fill", "form"]);
    }

    #[test]
    fn questions_lean_toward_tools_that_tell() {
        let index = ToolIndex::build(vec![
            tool("git", "create_branch", "Create a branch"),
            tool("git", "list_branches", "List branches"),
        ]);
        // Both match "branches" alike; the question decides.
        assert_eq!(
            names(&index, "which branches exist?", 5),
            ["git_list_branches", "git_create_branch"]
        );
        assert!(is_question("What time is it"));
        assert!(is_question("time in Tokyo?"));
        assert!(!is_question("delete the branch"));
    }

    #[test]
    fn hostile_tool_texts_are_indexed_within_caps() {
        let mut giant = tool("x", "giant", &"word ".repeat(100_000));
        giant.params = vec![("p".repeat(5_000), "q ".repeat(100_000))];
        let index = ToolIndex::build(vec![giant, tool("y", "word", "")]);
        assert!(
            index.field_lengths[0]
                .iter()
                .all(|&l| l as usize <= MAX_FIELD_WORDS)
        );
        // Repetition saturates (BM25's k1) rather than being cut off: real descriptions repeat
        // "file" for a reason, so stuffing can lift a tool, but only to a bounded score.
        let hits = index.search("word", 5);
        assert_eq!(hits.len(), 2);
        assert!(
            hits.iter()
                .all(|hit| hit.score.is_finite() && hit.score < 10.0)
        );
    }

    #[test]
    fn params_are_read_from_nested_schemas_within_caps() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Where to read"},
                "entities": {"type": "array", "items": {"type": "object", "properties": {
                    "entityType": {"title": "Kind of entity"},
                    "observations": {"type": "array"}
                }}}
            }
        });
        assert_eq!(
            params_of(&schema),
            [
                ("path".to_owned(), "Where to read".to_owned()),
                ("entities".to_owned(), String::new()),
                ("entityType".to_owned(), "Kind of entity".to_owned()),
                ("observations".to_owned(), String::new()),
            ]
        );
        // Generated schemas put a parameter's fields behind `$ref` and `anyOf`; cycles end.
        let generated = json!({
            "properties": {
                "style": {"$ref": "#/$defs/Format"},
                "when": {"anyOf": [{"$ref": "#/definitions/Span"}, {"type": "null"}]},
                "loop": {"$ref": "#/$defs/Loop"},
                "far": {"$ref": "https://example.com/schema"}
            },
            "$defs": {
                "Format": {"properties": {"bold": {"type": "boolean"}}},
                "Loop": {"properties": {"again": {"$ref": "#/$defs/Loop"}}}
            },
            "definitions": {"Span": {"properties": {"days": {"description": "How many"}}}}
        });
        let found: Vec<String> = params_of(&generated).into_iter().map(|(n, _)| n).collect();
        // The cycle is cut by the depth: `again` is itself a Loop, read once more.
        assert_eq!(
            found,
            [
                "style", "bold", "when", "days", "loop", "again", "again", "far"
            ]
        );
        for not_a_schema in [json!(null), json!("x"), json!({"properties": [1, 2]})] {
            assert!(params_of(&not_a_schema).is_empty());
        }
        // 100 levels: serde_json refuses to parse deeper than 128, so no schema from a server is.
        let mut deep = json!({"type": "string"});
        for level in 0..100 {
            deep = json!({"properties": {format!("p{level}"): deep}});
        }
        assert_eq!(params_of(&deep).len(), MAX_SCHEMA_DEPTH);
        let wide: serde_json::Map<String, Value> =
            (0..1_000).map(|i| (format!("p{i}"), json!({}))).collect();
        assert_eq!(params_of(&json!({"properties": wide})).len(), MAX_PARAMS);
    }

    #[test]
    fn closest_names_prefer_containment_then_edits() {
        let known = [
            "filesystem_read_file",
            "filesystem_read_text_file",
            "filesystem_write_file",
            "git_git_status",
            "fetch_fetch",
            "time_get_current_time",
        ];
        let near = |name: &str, n: usize| closest_names(name, known.iter().copied(), n);
        assert_eq!(near("read_file", 1), ["filesystem_read_file"]);
        assert_eq!(near("filesystem_raed_file", 1), ["filesystem_read_file"]);
        assert_eq!(near("FILESYSTEM_WRITE_FILE", 1), ["filesystem_write_file"]);
        assert_eq!(near("git_status", 1), ["git_git_status"]);
        assert_eq!(near("fetch", 1), ["fetch_fetch"]);
        assert_eq!(near("current_time", 1), ["time_get_current_time"]);
        assert_eq!(near("read_file", 2).len(), 2);
        assert!(near("zzzz", 3).is_empty());
        assert!(near("", 3).is_empty());
        assert!(near("read_file", 0).is_empty());
        assert!(closest_names("read", std::iter::empty(), 3).is_empty());
        let long = "ä".repeat(100_000);
        assert!(near(&long, 3).len() <= 3);
    }

    #[test]
    fn categories_name_what_a_server_is_about() {
        let git: Vec<ToolText> = [
            "git_status",
            "git_diff_unstaged",
            "git_diff_staged",
            "git_diff",
            "git_commit",
            "git_create_branch",
            "git_branch",
            "git_checkout",
        ]
        .iter()
        .map(|name| tool("git", name, ""))
        .collect();
        let top = categories(git.iter(), 3);
        assert_eq!(
            top,
            [
                ("diff".to_owned(), 3),
                ("branch".to_owned(), 2),
                ("checkout".to_owned(), 1)
            ]
        );

        let memory: Vec<ToolText> = [
            "create_entities",
            "delete_entities",
            "read_graph",
            "open_nodes",
            "search_nodes",
        ]
        .iter()
        .map(|name| tool("memory", name, ""))
        .collect();
        assert_eq!(
            categories(memory.iter(), 2),
            [("entities".to_owned(), 2), ("nodes".to_owned(), 2)]
        );
        assert!(categories(std::iter::empty(), 5).is_empty());
    }

    /// Not a benchmark: prints build and query time for 10,000 synthetic tools so a regression to
    /// something quadratic shows; no timing is asserted (CI machines vary).
    #[test]
    fn ten_thousand_tools_build_and_search_quickly() {
        const VERBS: &[&str] = &[
            "get", "list", "create", "delete", "update", "search", "read", "write", "sync",
            "export",
        ];
        const NOUNS: &[&str] = &[
            "file", "issue", "branch", "user", "table", "invoice", "ticket", "page", "message",
            "channel", "order", "event", "report", "image", "record", "project", "comment",
        ];
        let mut seed: u64 = 42;
        let mut next = move |n: usize| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) as usize % n
        };
        let tools: Vec<ToolText> = (0..10_000)
            .map(|i| {
                let (verb, noun, other) = (VERBS[next(VERBS.len())], NOUNS[next(NOUNS.len())], NOUNS[next(NOUNS.len())]);
                let server = format!("server{}", i % 200);
                let mut t = tool(
                    &server,
                    &format!("{verb}_{noun}_{i}"),
                    &format!("{verb} a {noun} and its {other}s for the current workspace; returns JSON with ids, names and timestamps"),
                );
                t.params = vec![("id".into(), format!("The {noun} id")), ("limit".into(), "Maximum results".into())];
                t
            })
            .collect();
        let started = Instant::now();
        let index = ToolIndex::build(tools);
        let built = started.elapsed();
        let queries = [
            "delete an invoice",
            "list open tickets for a project",
            "export the report as JSON",
            "🦀",
            &"user ".repeat(500),
        ];
        let started = Instant::now();
        let mut found = 0;
        for query in queries {
            found += index.search(query, 10).len();
        }
        let searched = started.elapsed() / queries.len() as u32;
        println!("10,000 tools: build {built:?}, search {searched:?} per query ({found} hits)");
        assert_eq!(index.len(), 10_000);
        assert!(found > 0);
    }
}
