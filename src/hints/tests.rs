use std::path::Path;

use serde_json::Value;

use super::*;
use crate::ingest::ingest_json_array;
use crate::store::{NewDataset, Provenance, Store, StoreSettings};

#[test]
fn tokens_split_snake_kebab_and_camel_case() {
    assert_eq!(tokens("assignee_login"), vec!["assignee", "login"]);
    assert_eq!(tokens("emailAddress"), vec!["email", "address"]);
    assert_eq!(tokens("userID"), vec!["user", "id"]);
    assert_eq!(tokens("X-Request-Id"), vec!["x", "request", "id"]);
}

#[test]
fn names_match_as_whole_tokens() {
    assert_eq!(name_affinity("user_id", "id", "list_users"), 0.9);
    assert_eq!(name_affinity("user_id", "id", "list_orders"), 0.6);
    assert_eq!(name_affinity("assignee_login", "login", "people"), 0.7);
    assert_eq!(name_affinity("sku", "sku", "products"), 1.0);
    assert_eq!(name_affinity("id", "id", "anything"), 0.1);
    // Key tokens only as whole tokens: not inside `paid`, `valid`, `monkey`.
    assert_eq!(name_affinity("paid", "id", "t"), 0.0);
    assert_eq!(name_affinity("valid", "id", "t"), 0.0);
    assert_eq!(name_affinity("monkey", "key", "t"), 0.0);
    assert_eq!(name_affinity("order_code", "code", "t"), 0.6);
    assert_eq!(name_affinity("order_code", "code", "orders"), 0.9);
    assert_eq!(name_affinity("billing_email", "contact_email", "t"), 0.4);
}

struct Case {
    name: String,
    datasets: Vec<Arc<Dataset>>,
    keys: Vec<(String, String)>,
}

fn load_case(path: &Path, store: &Store) -> Case {
    let case: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json");
    let mut datasets = Vec::new();
    for d in case["datasets"].as_array().expect("datasets") {
        let tool = d["tool"].as_str().expect("tool").to_string();
        let ingested = ingest_json_array(&d["rows"].to_string()).expect("ingest");
        datasets.push(
            store
                .add(NewDataset {
                    server: "labelled".into(),
                    tool: tool.clone(),
                    schema: ingested.batch.schema(),
                    batches: vec![ingested.batch],
                    columns: ingested.columns,
                    provenance: Provenance {
                        server: "labelled".into(),
                        tool,
                        args: Value::Null,
                        created_at: String::new(),
                        source: "test".into(),
                    },
                    pinned: true,
                    implicit: false,
                    passed_through: false,
                    name: None,
                })
                .expect("add"),
        );
    }
    let keys = case["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .map(|k| {
            (
                k[0].as_str().expect("a").to_string(),
                k[1].as_str().expect("b").to_string(),
            )
        })
        .collect();
    Case {
        name: case["name"].as_str().expect("name").to_string(),
        datasets,
        keys,
    }
}

/// `tool.column` of a hint's two ends, given the dataset the hint was computed for.
fn ends(new: &Dataset, hint: &JoinHint, all: &[Arc<Dataset>]) -> (String, String) {
    let other = all
        .iter()
        .find(|d| d.reference == hint.reference)
        .expect("other");
    (
        format!("{}.{}", new.provenance.tool, hint.column),
        format!("{}.{}", other.provenance.tool, hint.other_column),
    )
}

/// The labelled set in testdata/joins: every true key found, found first for its column, and no
/// decoy above a true key. Prints precision@1 and recall.
#[test]
fn labelled_join_set() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/joins");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("testdata/joins")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let (mut keys, mut found, mut first) = (0, 0, 0);
    let mut problems = Vec::new();
    for file in &files {
        let store = Store::new(StoreSettings::default()).expect("store");
        let case = load_case(file, &store);
        // Each dataset is "new" in turn, scored against all the others.
        let mut scored: Vec<(String, String, f64)> = Vec::new();
        for d in &case.datasets {
            for hint in hints_for(d, &case.datasets) {
                let (a, b) = ends(d, &hint, &case.datasets);
                scored.push((a, b, hint.score));
            }
        }
        let is_key = |a: &str, b: &str| {
            case.keys
                .iter()
                .any(|(x, y)| (x == a && y == b) || (x == b && y == a))
        };
        for (fk, pk) in &case.keys {
            keys += 1;
            let best_for_fk = scored
                .iter()
                .filter(|(a, b, _)| a == fk || b == fk)
                .max_by(|x, y| x.2.partial_cmp(&y.2).unwrap_or(std::cmp::Ordering::Equal));
            if scored
                .iter()
                .any(|(a, b, _)| is_key(a, b) && (a == fk || b == fk))
            {
                found += 1;
            } else {
                problems.push(format!(
                    "{}: {fk} → {pk} not found; hints: {scored:?}",
                    case.name
                ));
            }
            if best_for_fk.is_some_and(|(a, b, _)| is_key(a, b)) {
                first += 1;
            }
        }
        let weakest_key = scored
            .iter()
            .filter(|(a, b, _)| is_key(a, b))
            .map(|(_, _, s)| *s)
            .fold(f64::INFINITY, f64::min);
        for (a, b, s) in &scored {
            if !is_key(a, b) && *s > weakest_key {
                problems.push(format!(
                    "{}: decoy {a} ↔ {b} ({s}) above a true key ({weakest_key})",
                    case.name
                ));
            }
        }
    }
    eprintln!(
        "labelled join set: {} cases, {keys} keys, recall {found}/{keys}, precision@1 {first}/{keys}",
        files.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!((found, first), (keys, keys));
}
