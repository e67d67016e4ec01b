//! `loom_describe`: every column, statistics, a sample, join hints and provenance of one dataset,
//! a page of columns at a time.

use std::ops::Range;
use std::sync::Arc;

use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};

use super::*;
use crate::envelope::{self, sample_json, schema_json};
use crate::store::{Dataset, Store};

/// Columns one answer describes when `limit` is not given: a table of up to 50 columns is
/// described in one call.
pub(crate) const DESCRIBE_COLUMNS: u64 = 50;
/// Columns one answer describes at most. A table may have 2,048 (SPEC §7): described whole, 600
/// columns of 190-character names and values (3 rows) made one answer of 2.06 MB.
pub(crate) const MAX_DESCRIBE_COLUMNS: u64 = 200;
/// An answer's JSON text stays within this many bytes: a page ends before the column that
/// would take it over (it always holds one column, so a single column larger than this still
/// comes back, alone). The test fixture's 11-column rows take ~290 bytes a column (statistics and
/// ten sample values; 3.6 KB in all), so the bound is felt only by pages of long names or values.
pub(crate) const MAX_DESCRIBE_BYTES: usize = 64 * 1024;
/// Sample rows, and the characters a sample string is cut to.
const SAMPLE_ROWS: usize = 10;
const SAMPLE_CHARS: usize = 200;
/// Room kept for `"nextOffset": N`, which is added after the page is measured.
const NEXT_OFFSET_BYTES: usize = 32;

/// The full description, every column at once (`loom query --describe`, a person at a
/// terminal): no page, no byte bound.
pub(crate) fn describe_dataset(d: &Dataset, held: &[Arc<Dataset>]) -> Value {
    describe_page(d, held, 0, usize::MAX, usize::MAX)
}

/// The description of `d` with the columns from `offset`, at most `limit` of them and no more
/// than keep the answer's JSON text within `max_bytes` (at least one column when there is one):
/// `columns` counts them all, `nextOffset` is where the next page starts when more follow.
pub(crate) fn describe_page(
    d: &Dataset,
    held: &[Arc<Dataset>],
    offset: usize,
    limit: usize,
    max_bytes: usize,
) -> Value {
    let total = d.profile().len();
    let start = offset.min(total);
    let candidates = start..start.saturating_add(limit).min(total);
    let mut schema = schema_json(d, true, candidates.clone());
    let infos = d.columns.iter().skip(start);
    for (entry, info) in schema.iter_mut().zip(infos) {
        if let (Value::Object(entry), true) = (entry, info.source != info.name) {
            entry.insert(
                "source".into(),
                json!(crate::common::text::cut(
                    &info.source,
                    envelope::MAX_NAME_CHARS
                )),
            );
        }
    }
    for (entry, field) in schema.iter_mut().zip(d.schema.fields().iter().skip(start)) {
        if let (Value::Object(entry), Some(note)) =
            (entry, field.metadata().get(crate::ingest::TYPING_KEY))
        {
            entry.insert("note".into(), json!(note));
        }
    }
    let mut described = json!({
        "ref": d.reference,
        "kind": d.content.kind(),
        "rows": d.rows,
        "columns": total,
        "bytes": d.bytes,
        "schema": [],
        "sample": sample_json(d, SAMPLE_ROWS, SAMPLE_CHARS, start..start),
        // Recomputed against what is live now, not what was live at creation.
        "joinHints": crate::hints::hints_for(d, held),
        "provenance": d.provenance,
        "age": age(d.created),
        "pinned": d.pinned(),
        "implicit": d.implicit,
        "passedThrough": d.passed_through,
        "usage": envelope::sql::usage(&[d]),
    });
    kind_details(d, &mut described);
    let end = if max_bytes == usize::MAX {
        candidates.end
    } else {
        let base = described.to_string().len() + NEXT_OFFSET_BYTES;
        fitting_end(d, &schema, candidates, max_bytes.saturating_sub(base))
    };
    schema.truncate(end - start);
    described["schema"] = Value::Array(schema);
    described["sample"] = Value::Array(sample_json(d, SAMPLE_ROWS, SAMPLE_CHARS, start..end));
    if end < total {
        described["nextOffset"] = json!(end);
    }
    described
}

/// Where a page of `candidates` ends so that its columns' schema entries and sample cells take
/// at most `room` bytes of JSON text; never before the first candidate's end. Each column is
/// measured as it will be written (its entry, and its member in each sample row, with a comma
/// each: one more than JSON writes), so the sum is an upper bound.
fn fitting_end(d: &Dataset, schema: &[Value], candidates: Range<usize>, room: usize) -> usize {
    let mut used = 0usize;
    for (column, entry) in candidates.clone().zip(schema) {
        let cells: usize = sample_json(d, SAMPLE_ROWS, SAMPLE_CHARS, column..column + 1)
            .iter()
            // `{"name":value}` is written inside its row as `"name":value,`.
            .map(|row| row.to_string().len().saturating_sub(1))
            .sum();
        used = used.saturating_add(entry.to_string().len() + 1 + cells);
        if used > room && column > candidates.start {
            return column;
        }
    }
    candidates.end
}

pub(crate) fn describe(store: &Store, arguments: &Option<Map<String, Value>>) -> CallToolResult {
    let empty = Map::new();
    let given = arguments.as_ref().unwrap_or(&empty);
    if let Some(unknown) = given
        .keys()
        .find(|key| !matches!(key.as_str(), "ref" | "offset" | "limit"))
    {
        return error_result(format!(
            "{DESCRIBE}: unknown argument `{unknown}`; it takes `ref`, and `offset` and `limit` \
             (columns, both optional)"
        ));
    }
    let reference = match string_arg(arguments, "ref") {
        Ok(r) => r,
        Err(e) => return error_result(format!("{DESCRIBE}: {e}; {}", known_datasets(store))),
    };
    let (offset, limit) = match paging(given, DESCRIBE_COLUMNS, MAX_DESCRIBE_COLUMNS, " columns") {
        Ok(paged) => paged,
        Err(e) => return error_result(format!("{DESCRIBE}: {e}")),
    };
    let dataset = match store.get(reference) {
        Some(dataset) => dataset,
        None if store.was_evicted(reference) => {
            return error_result(format!(
                "{DESCRIBE}: `{reference}` was evicted to stay within memoryBudgetBytes; call the tool again to get it back; {}",
                known_datasets(store)
            ));
        }
        None => {
            return error_result(format!(
                "{DESCRIBE}: no dataset `{reference}`; {}",
                known_datasets(store)
            ));
        }
    };
    let total = dataset.profile().len();
    let offset = usize::try_from(offset).unwrap_or(usize::MAX);
    if offset > 0 && offset >= total {
        let offsets = match total {
            0 => "offset 0 only".to_string(),
            n => format!("offsets 0–{}", n - 1),
        };
        return error_result(format!(
            "{DESCRIBE}: `offset` {offset} is past the end: `{reference}` has {total} columns \
             ({offsets})"
        ));
    }
    json_result(describe_page(
        &dataset,
        &store.list(),
        offset,
        limit as usize,
        MAX_DESCRIBE_BYTES,
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::value::RawValue;
    use serde_json::{Value, json};

    use super::*;
    use crate::intercept::Origin;
    use crate::store::StoreSettings;

    /// A store holding one table of `columns` columns named `name(i)`, whose 3 rows hold
    /// `value(i)` in column i.
    fn wide(
        columns: usize,
        name: impl Fn(usize) -> String,
        value: impl Fn(usize) -> String,
    ) -> (Arc<Store>, String) {
        let store = Arc::new(Store::new(StoreSettings::default()).expect("store"));
        let row: Map<String, Value> = (0..columns).map(|i| (name(i), json!(value(i)))).collect();
        let rows = json!([row, row, row]);
        let result = json!({"content": [{"type": "text", "text": rows.to_string()}]});
        let raw = RawValue::from_string(result.to_string()).expect("raw");
        let origin = Origin {
            server: "s".into(),
            tool: "t".into(),
            args: json!({}),
        };
        let kept = crate::intercept::keep_passed_through(&raw, &origin, &store).expect("kept");
        let reference = kept.first().expect("a dataset").reference.clone();
        (store, reference)
    }

    fn call(store: &Store, arguments: Value) -> Value {
        let result = describe(store, &arguments.as_object().cloned());
        serde_json::to_value(&result).expect("json")
    }

    fn names(answer: &Value) -> Vec<String> {
        answer["structuredContent"]["schema"]
            .as_array()
            .expect("schema")
            .iter()
            .filter_map(|c| c["name"].as_str().map(str::to_string))
            .collect()
    }

    /// 2,000 columns (a table may have 2,048) are described 50 at a time by default, up to 200
    /// when asked; the pages, followed by `nextOffset`, give every column once and in order, each
    /// sample over its page's columns only.
    #[test]
    fn a_wide_dataset_is_described_a_page_of_columns_at_a_time() {
        let (store, reference) = wide(2_000, |i| format!("c{i:04}"), |i| format!("v{i}"));
        let first = call(&store, json!({"ref": reference}));
        let answer = &first["structuredContent"];
        assert_eq!(answer["columns"], 2_000);
        assert_eq!(answer["nextOffset"], 50);
        assert_eq!(names(&first).len(), 50);
        let sample = answer["sample"][0].as_object().expect("a sample row");
        assert_eq!(sample.len(), 50);
        assert_eq!(sample.get("c0049"), Some(&json!("v49")));
        let mut all: Vec<String> = Vec::new();
        let mut offset = Some(0u64);
        while let Some(at) = offset {
            let page = call(
                &store,
                json!({"ref": reference, "offset": at, "limit": 200}),
            );
            let text = page["content"][0]["text"].as_str().expect("text");
            assert!(text.len() <= MAX_DESCRIBE_BYTES, "{} bytes", text.len());
            let shown = names(&page);
            assert_eq!(shown.len(), 200);
            let sample = page["structuredContent"]["sample"][2]
                .as_object()
                .expect("row");
            assert_eq!(sample.keys().cloned().collect::<Vec<_>>(), shown);
            all.extend(shown);
            offset = page["structuredContent"]["nextOffset"].as_u64();
        }
        let expected: Vec<String> = (0..2_000).map(|i| format!("c{i:04}")).collect();
        assert_eq!(all, expected);
        // `loom query --describe`: every column at once.
        let dataset = store.get(&reference).expect("held");
        let whole = describe_dataset(&dataset, &store.list());
        assert_eq!(whole["schema"].as_array().map(Vec::len), Some(2_000));
        assert!(whole.get("nextOffset").is_none());
    }

    /// Columns of long names and values: a page stops before the column that would take the
    /// answer over [`MAX_DESCRIBE_BYTES`], and goes on from there; a page always holds a column.
    #[test]
    fn a_page_of_long_columns_stays_within_the_byte_bound() {
        let (store, reference) = wide(
            600,
            |i| format!("{}{i:03}", "名".repeat(190)),
            |i| format!("{}{i}", "値".repeat(190)),
        );
        let mut offset = 0u64;
        let mut pages = 0;
        loop {
            let page = call(
                &store,
                json!({"ref": reference, "offset": offset, "limit": 200}),
            );
            let text = page["content"][0]["text"].as_str().expect("text");
            assert!(text.len() <= MAX_DESCRIBE_BYTES, "{} bytes", text.len());
            let shown = names(&page).len();
            assert!((1..200).contains(&shown), "{shown} columns");
            pages += 1;
            match page["structuredContent"]["nextOffset"].as_u64() {
                Some(next) => {
                    assert_eq!(next, offset + shown as u64);
                    offset = next;
                }
                None => {
                    assert_eq!(offset + shown as u64, 600);
                    break;
                }
            }
        }
        assert!(pages > 3, "{pages} pages");
        let dataset = store.get(&reference).expect("held");
        // What one unpaged answer was: 2.06 MB.
        let whole = describe_dataset(&dataset, &store.list()).to_string().len();
        assert!(whole > 2_000_000, "{whole} bytes");
        let one = describe_page(&dataset, &store.list(), 10, 200, 1);
        assert_eq!(one["schema"].as_array().map(Vec::len), Some(1));
        assert_eq!(one["nextOffset"], 11);
    }

    /// Bad paging arguments are named, with what would be right.
    #[test]
    fn bad_paging_arguments_are_named() {
        let (store, reference) = wide(12, |i| format!("c{i}"), |i| format!("v{i}"));
        for (arguments, says) in [
            (
                json!({"ref": reference, "limit": 500}),
                "loom_describe: `limit` must be from 1 to 200 columns, found 500",
            ),
            (
                json!({"ref": reference, "limit": 0}),
                "`limit` must be from 1 to 200 columns, found 0",
            ),
            (
                json!({"ref": reference, "offset": -1}),
                "`offset` must be a whole number of 0 or more, found -1",
            ),
            (
                json!({"ref": reference, "offset": 1.5}),
                "`offset` must be a whole number of 0 or more, found 1.5",
            ),
            (
                json!({"ref": reference, "limit": "10"}),
                "`limit` must be a whole number, found \"10\"",
            ),
            (
                json!({"ref": reference, "offset": 12}),
                &format!(
                    "`offset` 12 is past the end: `{reference}` has 12 columns (offsets 0–11)"
                ),
            ),
            (
                json!({"ref": reference, "page": 2}),
                "loom_describe: unknown argument `page`; it takes `ref`, and `offset` and `limit`",
            ),
        ] {
            let answer = call(&store, arguments);
            assert_eq!(answer["isError"], true);
            let text = answer["content"][0]["text"].as_str().expect("text");
            assert!(text.contains(says), "{text}");
        }
        let last = call(&store, json!({"ref": reference, "offset": 11}));
        assert_eq!(names(&last), vec!["c11"]);
        assert!(last["structuredContent"].get("nextOffset").is_none());
    }
}
