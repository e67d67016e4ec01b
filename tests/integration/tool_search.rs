//! Tool search against real servers' tool lists: the labelled queries in `testdata/tools/`
//! (see its README.md for how the lists were captured and the queries written). Prints recall@1
//! and recall@5 of the BM25F search and of a plain keyword score for comparison, for each query
//! set: `queries.json` (the scorer was tuned on it), `holdout.json` and `holdout2.json` (never
//! tuned against).

use std::fs;
use std::path::{Path, PathBuf};

use loom::gateway::search::{ToolIndex, ToolText, categories, closest_names, params_of, title_of};
use loom::gateway::semantic::{SentenceModel, text_of};
use serde_json::Value;

/// The folder with `<server>.json` tool lists and `queries.json`, from the crate's root.
const TOOLS_DIR: &str = "testdata/tools";
/// The servers whose lists are searched together, as one gateway would expose them: the eight
/// captured first, then fourteen more (2026-12, issue 35) so that the held-out sets are measured
/// among 294 tools, many of them near neighbours (git and github, fetch and firecrawl and brave,
/// arxiv and firecrawl's paper search, filesystem and obsidian).
const SERVERS: &[&str] = &[
    "everything",
    "filesystem",
    "memory",
    "postgres",
    "git",
    "time",
    "fetch",
    "sqlite",
    "github",
    "playwright",
    "notion",
    "slack",
    "maps",
    "brave",
    "thinking",
    "context7",
    "kubernetes",
    "firecrawl",
    "awsdocs",
    "excel",
    "arxiv",
    "obsidian",
];
/// How many of [`SERVERS`] `queries.json` and `holdout.json` were first written for: measured on
/// them alone too, so the figures before the catalog grew stay comparable.
const FIRST_EIGHT: usize = 8;

fn tools_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(TOOLS_DIR)
}

fn read_json(name: &str) -> Value {
    let path = tools_dir().join(name);
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn load_tools(servers: &[&str]) -> Vec<ToolText> {
    let mut tools = Vec::new();
    for server in servers {
        let list = read_json(&format!("{server}.json"));
        for tool in list.as_array().expect("a tool list is an array") {
            let name = tool["name"].as_str().expect("a tool has a name");
            tools.push(ToolText {
                name: format!("{server}_{name}"),
                server: (*server).to_owned(),
                tool: name.to_owned(),
                title: tool.as_object().map(title_of).unwrap_or_default(),
                description: tool["description"].as_str().unwrap_or_default().to_owned(),
                params: params_of(&tool["inputSchema"]),
            });
        }
    }
    tools
}

struct Query {
    text: String,
    /// The expected tool first, then the equally right ones.
    right: Vec<String>,
}

fn load_queries(file: &str) -> Vec<Query> {
    let list = read_json(file);
    let queries = list.as_array().expect("a query file is an array");
    queries
        .iter()
        .map(|q| {
            let mut right = vec![q["expect"].as_str().expect("expect").to_owned()];
            if let Some(also) = q["also"].as_array() {
                right.extend(also.iter().filter_map(Value::as_str).map(str::to_owned));
            }
            Query {
                text: q["query"].as_str().expect("query").to_owned(),
                right,
            }
        })
        .collect()
}

/// The peer's score: +3 per query token found in the name, +1 per token found in the
/// description (lower-cased substring tests, tokens split on anything not alphanumeric), ties by
/// name. `whole_words` tests tokens against the text's words instead of substrings.
fn keyword_ranking(tools: &[ToolText], query: &str, whole_words: bool) -> Vec<String> {
    let tokens: Vec<String> = query
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect();
    let found = |text: &str, token: &str| {
        let text = text.to_lowercase();
        if whole_words {
            text.split(|c: char| !c.is_alphanumeric())
                .any(|w| w == token)
        } else {
            text.contains(token)
        }
    };
    let mut scored: Vec<(u32, &str)> = tools
        .iter()
        .map(|tool| {
            let score = tokens
                .iter()
                .map(|t| {
                    3 * u32::from(found(&tool.name, t)) + u32::from(found(&tool.description, t))
                })
                .sum();
            (score, tool.name.as_str())
        })
        .filter(|(score, _)| *score > 0)
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    scored
        .into_iter()
        .map(|(_, name)| name.to_owned())
        .collect()
}

/// (recall@1, recall@5) of `rank` over `queries`; misses at 5 are printed.
fn recall(label: &str, queries: &[Query], rank: impl Fn(&str) -> Vec<String>) -> (f64, f64) {
    let (mut at1, mut at5) = (0usize, 0usize);
    for query in queries {
        let ranked = rank(&query.text);
        let right_within = |k: usize| ranked.iter().take(k).any(|name| query.right.contains(name));
        at1 += usize::from(right_within(1));
        if right_within(5) {
            at5 += 1;
        } else {
            println!(
                "  {label} misses {:?} (want {}): {:?}",
                query.text,
                query.right[0],
                ranked.iter().take(5).collect::<Vec<_>>()
            );
        }
    }
    let n = queries.len() as f64;
    (at1 as f64 / n, at5 as f64 / n)
}

/// The queries of `files`, every label checked against `tools`.
fn labelled(files: &[&str], tools: &[ToolText]) -> Vec<Query> {
    let mut all = Vec::new();
    for file in files {
        let queries = load_queries(file);
        for query in &queries {
            for name in &query.right {
                assert!(
                    tools.iter().any(|t| &t.name == name),
                    "{file}: query {:?} expects unknown tool {name}",
                    query.text
                );
            }
        }
        all.extend(queries);
    }
    all
}

/// recall@1 and recall@5 of ours, the peer's and the whole-word keyword score on `queries`.
fn compare(label: &str, queries: &[Query], tools: &[ToolText]) -> [(&'static str, (f64, f64)); 3] {
    println!(
        "{label}: {} queries over {} tools",
        queries.len(),
        tools.len()
    );
    let index = ToolIndex::build(tools.to_vec());
    let ours = recall("bm25f", queries, |q| {
        index
            .search(q, 5)
            .into_iter()
            .filter_map(|hit| index.tool(hit.index).map(|t| t.name.clone()))
            .collect()
    });
    let peer = recall("keyword", queries, |q| keyword_ranking(tools, q, false));
    let words = recall("keyword-words", queries, |q| {
        keyword_ranking(tools, q, true)
    });
    let table = [
        ("bm25f (ours)", ours),
        ("keyword, substrings (peer)", peer),
        ("keyword, whole words", words),
    ];
    println!("{:<30} {:>9} {:>9}", "scorer", "recall@1", "recall@5");
    for (label, (r1, r5)) in table {
        println!("{label:<30} {r1:>9.3} {r5:>9.3}");
    }
    table
}

/// The floors in this file sit a little under what the scorer reaches (testdata/tools/README.md
/// has the figures), so a change that loses two or three queries of a set fails. This set is the
/// one the scorer was tuned on: 0.883 at 5 over the 22 servers.
#[test]
fn bm25f_finds_the_tool_meant_and_beats_keywords() {
    let tools = load_tools(SERVERS);
    let queries = labelled(&["queries.json"], &tools);
    assert!(queries.len() >= 40, "the labelled set is too small");
    let scores = compare("queries.json", &queries, &tools);
    let ours = scores[0].1;
    assert!(ours.1 >= 0.85, "recall@5 {:.3} is under 0.85", ours.1);
    assert_ours_is_best(&scores);
}

/// BM25F at least as good as both keyword readings, at @1 and @5.
fn assert_ours_is_best(scores: &[(&str, (f64, f64)); 3]) {
    let [(_, ours), (_, peer), (_, words)] = scores;
    assert!(
        ours.0 >= peer.0 && ours.1 >= peer.1,
        "the keyword score does better"
    );
    assert!(
        ours.0 >= words.0 && ours.1 >= words.1,
        "whole-word keywords do better"
    );
}

/// Queries never tuned against: `holdout.json` (16, written after the scorer was tuned on
/// `queries.json`), `holdout2.json` and `holdout3.json` (50 and 49, written together from the 22
/// tool lists before the scorer ran on them, then split in two: the misses of the second were
/// read while the scorer changed, the third was run blind until the changes were final).
/// Together they are the honest estimate by words alone: 0.861 at 5 (0.878 blind), under the 0.90
/// issue 35 aimed at, which the sentence model reaches
/// ([`meaning_lifts_recall_on_every_held_out_set`]). `holdout4.json` (60, written blind by
/// someone who never saw the scorer, 2026-12-07) scores 0.900 by words alone. recall@1 (0.574
/// for the first three) has a floor too, so a change that only shuffles the top five cannot pass
/// unseen.
#[test]
fn bm25f_holds_up_on_queries_written_after_tuning() {
    let tools = load_tools(SERVERS);
    let sets = [
        ("holdout.json", vec!["holdout.json"], 0.87),
        ("holdout2.json", vec!["holdout2.json"], 0.78),
        ("holdout3.json", vec!["holdout3.json"], 0.83),
        ("holdout4.json", vec!["holdout4.json"], 0.88),
        (
            "held out, first three",
            vec!["holdout.json", "holdout2.json", "holdout3.json"],
            0.84,
        ),
    ];
    // The last set is the first three together: its recall@1 is the floor checked below.
    // Every set is measured and printed before any floor is checked, so a failing run still shows
    // all the figures.
    let mut below = Vec::new();
    let mut all = (0.0, 0.0);
    for (label, files, floor) in sets {
        let queries = labelled(&files, &tools);
        let scores = compare(label, &queries, &tools);
        let ours = scores[0].1;
        if ours.1 < floor {
            below.push(format!("{label}: recall@5 {:.3} is under {floor}", ours.1));
        }
        assert_ours_is_best(&scores);
        all = ours;
    }
    if all.0 < 0.55 {
        below.push(format!("all held out: recall@1 {:.3} is under 0.55", all.0));
    }
    assert!(below.is_empty(), "held-out floors missed: {below:?}");
}

/// The first two sets on the eight servers they were written for, comparable with the figures
/// before the catalog grew (0.950 and 0.812 at 5 then; 0.933 and 0.875 now); labels naming the
/// later servers' tools are dropped.
#[test]
fn first_sets_on_the_first_eight_servers() {
    let tools = load_tools(&SERVERS[..FIRST_EIGHT]);
    for (file, floor) in [("queries.json", 0.9), ("holdout.json", 0.8)] {
        let mut queries = load_queries(file);
        for query in &mut queries {
            query
                .right
                .retain(|name| tools.iter().any(|t| &t.name == name));
            assert!(!query.right.is_empty(), "{file}: {:?}", query.text);
        }
        let label = format!("{file} (first eight servers)");
        let ours = compare(&label, &queries, &tools)[0].1;
        assert!(
            ours.1 >= floor,
            "{label}: recall@5 {:.3} is under {floor}",
            ours.1
        );
    }
}

/// What `categories` says about each real server (printed for review), and "did you mean" on the
/// real names for the mistakes models make: a dropped server prefix, a typo, a doubled prefix.
#[test]
fn real_servers_get_categories_and_near_names() {
    let tools = load_tools(SERVERS);
    for server in SERVERS {
        let own: Vec<&ToolText> = tools.iter().filter(|t| t.server == *server).collect();
        let top = categories(own.iter().copied(), 5);
        println!("{server:<11} {top:?}");
        assert!(!top.is_empty() || own.len() < 2, "{server} has no category");
    }
    let names = || tools.iter().map(|t| t.name.as_str());
    assert_eq!(
        closest_names("read_text_file", names(), 1),
        ["filesystem_read_text_file"]
    );
    assert_eq!(closest_names("git_status", names(), 1), ["git_git_status"]);
    assert_eq!(
        closest_names("memory_create_entity", names(), 1),
        ["memory_create_entities"]
    );
    assert_eq!(
        closest_names("sqlite_list_table", names(), 1),
        ["sqlite_list_tables"]
    );
    assert_eq!(
        closest_names("time_get_time", names(), 1),
        ["time_get_current_time"]
    );
}

/// The folder of the sentence model `.ci/setup-model` installs (or `LOOM_SEARCH_MODEL`); `None`
/// after a notice when it is missing outside CI (under `.ci/test` a missing model fails).
pub(crate) fn sentence_model_dir(what: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("LOOM_SEARCH_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/models/all-MiniLM-L6-v2")
        });
    if dir.join("model.safetensors").is_file() {
        return Some(dir);
    }
    assert!(
        !crate::s3::in_ci(),
        "{}: no sentence model; run `bash .ci/setup-model` (every test must run under .ci/test)",
        dir.display()
    );
    eprintln!(
        "SKIPPED: {what}: no model at {} (bash .ci/setup-model installs it)",
        dir.display()
    );
    None
}

fn sentence_model() -> Option<SentenceModel> {
    let dir = sentence_model_dir("tool search by meaning")?;
    Some(SentenceModel::load(&dir).unwrap_or_else(|e| panic!("{e}")))
}

/// recall@1 and recall@5 of BM25F with the sentence model over `queries`.
fn recall_with_meaning(
    label: &str,
    queries: &[Query],
    index: &ToolIndex,
    model: &SentenceModel,
    vectors: &[Option<std::sync::Arc<[f32]>>],
) -> (f64, f64) {
    recall(label, queries, |q| {
        let query = model.embed(q).expect("a query embeds");
        index
            .search_with_meaning(q, 5, Some((&query, vectors)))
            .into_iter()
            .filter_map(|hit| index.tool(hit.index).map(|t| t.name.clone()))
            .collect()
    })
}

/// With `tools.searchModel` (all-MiniLM-L6-v2), words and meaning together: every set measured
/// both ways and printed. The weight of meaning was chosen on `queries.json` and `holdout2.json`;
/// `holdout4.json` (60 queries written blind from the 22 tool lists by someone who never saw
/// the scorer, after the weight was fixed) is the honest figure of the two; the floors sit a
/// little under what was measured (testdata/tools/README.md has the figures).
#[test]
fn meaning_lifts_recall_on_every_held_out_set() {
    let Some(model) = sentence_model() else {
        return;
    };
    let tools = load_tools(SERVERS);
    let index = ToolIndex::build(tools.clone());
    let vectors: Vec<Option<std::sync::Arc<[f32]>>> = tools
        .iter()
        .map(|t| Some(model.embed(&text_of(t)).expect("a tool embeds").into()))
        .collect();
    let sets: [(&str, &[&str], f64); 5] = [
        ("queries.json", &["queries.json"], 0.88),
        ("holdout2.json", &["holdout2.json"], 0.92),
        (
            "held out, first three",
            &["holdout.json", "holdout2.json", "holdout3.json"],
            0.92,
        ),
        ("holdout3.json", &["holdout3.json"], 0.91),
        ("holdout4.json (blind)", &["holdout4.json"], 0.90),
    ];
    let mut below = Vec::new();
    println!(
        "{:<30} {:>14} {:>14}",
        "set", "words @1/@5", "+meaning @1/@5"
    );
    let mut rows = Vec::new();
    for (label, files, floor) in sets {
        let queries = labelled(files, &tools);
        let words = compare(label, &queries, &tools)[0].1;
        let meaning = recall_with_meaning(label, &queries, &index, &model, &vectors);
        rows.push(format!(
            "{label:<30} {:>6.3} {:>6.3}  {:>6.3} {:>6.3}",
            words.0, words.1, meaning.0, meaning.1
        ));
        if meaning.1 < floor {
            below.push(format!(
                "{label}: recall@5 {:.3} is under {floor}",
                meaning.1
            ));
        }
    }
    for row in rows {
        println!("{row}");
    }
    assert!(
        below.is_empty(),
        "floors missed with the sentence model: {below:?}"
    );
}

/// Text from servers and models is cut before the model reads it: a 4 MB description and a
/// query of 1,000 odd characters are embedded (unit vectors of the model's width) rather than
/// refused or read whole.
#[test]
fn hostile_texts_are_cut_before_the_model() {
    let Some(model) = sentence_model() else {
        return;
    };
    let width = model.embed("a tool").expect("embeds").len();
    let huge = ToolText {
        name: "evil_tool".into(),
        server: "evil".into(),
        tool: "tool".into(),
        title: "t".repeat(100_000),
        description: "word ".repeat(800_000),
        params: Vec::new(),
    };
    for text in [
        text_of(&huge),
        "\u{301}".repeat(1_000),
        "🦀".repeat(1_000),
        "\0\u{feff}\u{202e}".repeat(300),
        String::new(),
    ] {
        let vector = model.embed(&text).expect("embeds");
        assert_eq!(vector.len(), width);
        let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-3, "{norm}");
    }
}
