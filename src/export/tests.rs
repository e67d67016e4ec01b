use std::sync::Arc;

use super::*;
use crate::ingest::ingest_json_array;
use crate::store::{NewDataset, Provenance, Store, StoreSettings};

fn dataset(text: &str) -> Arc<Dataset> {
    dataset_with(text, true)
}

fn dataset_with(text: &str, keep_rows: bool) -> Arc<Dataset> {
    let store = Store::new(StoreSettings::default()).expect("store");
    let ingested = ingest_json_array(text).expect("ingest");
    store
        .add(NewDataset {
            server: "s".into(),
            tool: "t".into(),
            schema: ingested.batch.schema(),
            batches: if keep_rows {
                vec![ingested.batch]
            } else {
                vec![]
            },
            columns: ingested.columns,
            provenance: Provenance {
                server: "s".into(),
                tool: "t".into(),
                args: serde_json::json!({}),
                created_at: String::new(),
                source: "test".into(),
            },
            pinned: false,
            implicit: false,
            name: None,
        })
        .expect("add")
}

const ROWS: &str = r#"[
  {"id": 1, "note": "plain", "big": 12345678901234567890123, "at": "2024-01-02T03:04:05Z", "tags": ["a"]},
  {"id": 2, "note": "comma, \"quote\"\nnewline\r\nCRLF", "big": 2, "at": null, "tags": []}
]"#;

#[test]
fn csv_is_rfc_4180_with_a_header() {
    let dir = tempfile::tempdir().expect("dir");
    let written =
        export(&dataset(ROWS), Format::Csv, dir.path(), "out.csv", false).expect("export");
    assert_eq!(written.rows, 2);
    let text = std::fs::read_to_string(&written.path).expect("read");
    assert_eq!(
        text,
        "id,note,big,at,tags\r\n\
         1,plain,12345678901234567890123,2024-01-02T03:04:05Z,\"[\"\"a\"\"]\"\r\n\
         2,\"comma, \"\"quote\"\"\nnewline\r\nCRLF\",2,,[]\r\n"
    );
    // A CSV reader gets the values back exactly.
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let records: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("record")).collect();
    assert_eq!(&records[1][1], "comma, \"quote\"\nnewline\r\nCRLF");
    assert_eq!(written.bytes, text.len() as u64);
}

#[test]
fn json_is_an_array_of_typed_objects_with_exact_decimals() {
    let dir = tempfile::tempdir().expect("dir");
    let written =
        export(&dataset(ROWS), Format::Json, dir.path(), "out.json", false).expect("export");
    let text = std::fs::read_to_string(&written.path).expect("read");
    assert!(text.contains("\"big\":12345678901234567890123"), "{text}");
    let value: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(value[0]["id"], 1);
    assert_eq!(value[0]["at"], "2024-01-02T03:04:05Z");
    assert_eq!(value[0]["tags"], serde_json::json!(["a"]));
    assert!(value[1]["at"].is_null());
}

#[test]
fn existing_files_are_kept_unless_overwrite_and_no_temp_file_remains() {
    let dir = tempfile::tempdir().expect("dir");
    let data = dataset(ROWS);
    std::fs::write(dir.path().join("keep.csv"), "precious").expect("write");
    let error = export(&data, Format::Csv, dir.path(), "keep.csv", false).expect_err("exists");
    assert!(error.contains("overwrite"), "{error}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("keep.csv")).expect("read"),
        "precious"
    );
    export(&data, Format::Csv, dir.path(), "keep.csv", true).expect("overwrite");
    assert!(
        std::fs::read_to_string(dir.path().join("keep.csv"))
            .expect("read")
            .starts_with("id,")
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".loom-export-"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn an_empty_dataset_exports_a_header_or_an_empty_array() {
    let dir = tempfile::tempdir().expect("dir");
    let empty = dataset_with(r#"[{"a": 1}]"#, false);
    let csv = export(&empty, Format::Csv, dir.path(), "e.csv", false).expect("csv");
    assert_eq!(std::fs::read_to_string(csv.path).expect("read"), "a\r\n");
    let json = export(&empty, Format::Json, dir.path(), "e.json", false).expect("json");
    assert_eq!(std::fs::read_to_string(json.path).expect("read"), "[]\n");
}
