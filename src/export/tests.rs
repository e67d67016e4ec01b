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
            passed_through: false,
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

/// Tool data is untrusted: a text cell a spreadsheet would run as a formula is written with a
/// leading `'` (SPEC §15), numbers and the JSON export are untouched, and the option turns it off.
#[test]
fn csv_neutralizes_formulas_in_text_cells_only() {
    let rows = r#"[
      {"note": "=HYPERLINK(\"http://x\")", "n": -5, "d": "-1.50"},
      {"note": "+1", "n": 3, "d": "2.00"},
      {"note": "@SUM(A1)", "n": 4, "d": "3.00"},
      {"note": "plain -", "n": 5, "d": "4.00"}
    ]"#;
    let data = dataset(rows);
    let dir = tempfile::tempdir().expect("dir");
    let written = export(&data, Format::Csv, dir.path(), "f.csv", false).expect("export");
    let text = std::fs::read_to_string(&written.path).expect("read");
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let notes: Vec<String> = reader
        .records()
        .map(|r| r.expect("record")[0].to_string())
        .collect();
    assert_eq!(
        notes,
        ["'=HYPERLINK(\"http://x\")", "'+1", "'@SUM(A1)", "plain -"]
    );
    assert!(text.contains(",-5,"), "numbers are not text: {text}");

    let written = export_with(
        &data,
        Format::Csv,
        dir.path(),
        "raw.csv",
        false,
        false,
        u64::MAX,
    )
    .expect("export");
    let text = std::fs::read_to_string(&written.path).expect("read");
    assert!(text.contains("\"=HYPERLINK(\"\"http://x\"\")\""), "{text}");

    let json = export(&data, Format::Json, dir.path(), "f.json", false).expect("export");
    let text = std::fs::read_to_string(&json.path).expect("read");
    assert!(text.contains(r#""note":"=HYPERLINK"#), "{text}");
}

/// A file keeps every integer a number, even beyond 2^53 (query results and samples write those
/// as strings for JavaScript clients).
#[test]
fn json_export_keeps_big_integers_as_numbers() {
    let data = dataset(r#"[{"id": 9007199254740993}, {"id": 1}]"#);
    let dir = tempfile::tempdir().expect("dir");
    let written = export(&data, Format::Json, dir.path(), "ids.json", false).expect("export");
    let text = std::fs::read_to_string(&written.path).expect("read");
    assert!(text.contains(r#""id":9007199254740993"#), "{text}");
}

/// Column names come from the data as well (a query's aliases): a header that a spreadsheet
/// would run is neutralized like a cell.
#[test]
fn csv_neutralizes_formulas_in_the_header_too() {
    let data = dataset(r#"[{"a": 1, "b": 2, "c": 3}]"#);
    let names = ["=HYPERLINK(\"http://x\")", "-x", "plain"].map(String::from);
    let mut out = Vec::new();
    write_csv(&mut out, &data.batches, &names, true).expect("csv");
    let text = String::from_utf8(out).expect("utf-8");
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .expect("header")
        .iter()
        .map(str::to_string)
        .collect();
    assert_eq!(header, ["'=HYPERLINK(\"http://x\")", "'-x", "plain"]);
    let mut out = Vec::new();
    write_csv(&mut out, &data.batches, &names, false).expect("csv");
    assert!(String::from_utf8_lossy(&out).starts_with("\"=HYPERLINK"));
}

/// An export stops at what the session may still write, says so, and leaves no file behind.
#[test]
fn an_export_past_the_quota_writes_nothing() {
    let data = dataset(ROWS);
    let dir = tempfile::tempdir().expect("dir");
    let error = export_with(&data, Format::Json, dir.path(), "q.json", false, true, 10)
        .expect_err("over the quota");
    assert!(error.contains("exportMaxBytes"), "{error}");
    assert!(error.contains("10 bytes"), "{error}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).expect("dir").collect();
    assert!(left.is_empty(), "{left:?}");
    let written = export_with(
        &data,
        Format::Json,
        dir.path(),
        "q.json",
        false,
        true,
        1 << 20,
    )
    .expect("within the quota");
    assert!(written.bytes > 10);
}
