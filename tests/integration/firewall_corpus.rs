//! The context firewall against the corpus in `testdata/firewall/` (SPEC §19): each case's
//! verdict (reduced or passed through), the stages that must and must not have run, and how a
//! cut keeps the text were decided by `make_corpus.py` (or by hand, for the real pages) from how
//! the text was made. The stages are read from the header line the model sees.

use std::path::{Path, PathBuf};

use loom::config::policy::Policy;
use loom::intercept::Origin;
use loom::store::{Store, StoreSettings};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
struct Expected {
    verdict: String,
    #[serde(default)]
    stages: Vec<String>,
    #[serde(default)]
    absent: Vec<String>,
    #[serde(default)]
    keep: Option<String>,
    /// The input, when it lives elsewhere in testdata.
    #[serde(default)]
    file: Option<String>,
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/firewall")
}

/// The stages a header line says ran.
fn stages_of(header: &str) -> Vec<&'static str> {
    let mut stages = Vec::new();
    for (words, stage) in [
        ("lifted out", "binary"),
        ("as Markdown", "markdown"),
        ("JSON summarised", "json"),
        ("cut to ", "cut"),
        ("security-relevant", "security"),
    ] {
        if header.contains(words) {
            stages.push(stage);
        }
    }
    stages
}

#[test]
fn every_case_gets_its_verdict() {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(corpus())
        .expect("corpus")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".expected.json"))
        .collect();
    cases.sort();
    assert!(cases.len() >= 8, "corpus too small: {}", cases.len());
    let origin = Origin {
        server: "corpus".into(),
        tool: "read".into(),
        args: json!({}),
    };
    let mut failures = Vec::new();
    let mut table = Vec::new();
    for expected_path in &cases {
        let name = expected_path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".expected.json"))
            .expect("name")
            .to_string();
        let expected: Expected =
            serde_json::from_str(&std::fs::read_to_string(expected_path).expect("read"))
                .expect("expected.json");
        let input = match &expected.file {
            Some(file) => corpus().join(file),
            None => std::fs::read_dir(corpus())
                .expect("corpus")
                .filter_map(|e| e.ok().map(|e| e.path()))
                .find(|p| {
                    let file = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    file.starts_with(&format!("{name}.")) && !file.ends_with(".expected.json")
                })
                .unwrap_or_else(|| panic!("no input for {name}")),
        };
        let text = std::fs::read_to_string(&input).expect("input");
        let store = Store::new(StoreSettings::default()).expect("store");
        let raw = json!({"content": [{"type": "text", "text": text}]}).to_string();
        let outcome = loom::reduce::reduce(&raw, &origin, &store, &Policy::default())
            .map(|reduction| reduction.and_then(|r| r.finish(&store)));
        let shown = match &outcome {
            Ok(Some(result)) => result["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            Ok(None) => String::new(),
            Err(e) => {
                failures.push(format!("{name}: failed: {e}"));
                continue;
            }
        };
        let header = shown.lines().next().unwrap_or("");
        let verdict = if shown.is_empty() {
            "passed"
        } else {
            "reduced"
        };
        let ran = stages_of(header);
        table.push(format!(
            "| {name} | {} | {} | {verdict} | {} |",
            text.chars().count(),
            shown.chars().count(),
            ran.join(", ")
        ));
        if verdict != expected.verdict {
            failures.push(format!("{name}: {verdict}, expected {}", expected.verdict));
            continue;
        }
        for stage in &expected.stages {
            if !ran.contains(&stage.as_str()) {
                failures.push(format!("{name}: stage {stage} did not run: {header}"));
            }
        }
        for stage in &expected.absent {
            if ran.contains(&stage.as_str()) {
                failures.push(format!("{name}: stage {stage} ran: {header}"));
            }
        }
        match expected.keep.as_deref() {
            Some("head") if !header.contains("(head kept)") => {
                failures.push(format!("{name}: expected the head kept: {header}"))
            }
            Some("head_and_tail") if !header.contains("(head and tail kept)") => {
                failures.push(format!("{name}: expected head and tail kept: {header}"))
            }
            _ => {}
        }
        if verdict == "reduced" {
            // The original is held whole.
            let at = header.find("full original: loom_read(\"").map(|i| i + 26);
            let reference = at.and_then(|i| header[i..].split('"').next());
            let kept = reference
                .and_then(|r| store.get(r))
                .and_then(|d| match &d.content {
                    loom::store::document::Content::Document(doc) => Some(doc.text() == text),
                    _ => None,
                });
            if kept != Some(true) {
                failures.push(format!("{name}: the original is not held whole: {header}"));
            }
        }
    }
    eprintln!("| case | chars in | chars out | verdict | stages |\n|---|---|---|---|---|");
    for row in &table {
        eprintln!("{row}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn stages_are_read_from_the_header() {
    let header = "[loom: page reduced 1 → 1 chars; 1 base64 blob (3 bytes) lifted out; main content as Markdown; cut to 7,000 chars (head kept); full original: loom_read(\"doc_1\")]";
    assert_eq!(stages_of(header), ["binary", "markdown", "cut"]);
}
