//! The envelope: what the model gets instead of a large result. A ref it can query, the schema
//! with column statistics, a few typed sample rows, join hints, provenance, the scalars that
//! surrounded the table, and a ready SQL example — in about 2,000 characters.
//!
//! Size is budgeted: the envelope is built with 5 join hints and 5 sample rows, then shrunk step
//! by step (fewer hints, shorter strings, 3 sample rows, briefer statistics, rows as arrays,
//! the schema as `name: Type`) until it fits [`TARGET_CHARS`]. Sample rows never go below
//! [`MIN_SAMPLE_ROWS`]; a schema too wide for [`MAX_CHARS`] is cut last, with a pointer to
//! `loom_describe`.

pub(crate) mod sql;

use std::ops::Range;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::common::text::cut;
use crate::common::tokens::estimate_tokens;
use crate::hints::JoinHint;
use crate::store::Dataset;
use crate::store::values::{Shown, cell_shown};

/// What an envelope aims for.
pub const TARGET_CHARS: usize = 2_000;
/// What an envelope never exceeds.
pub const MAX_CHARS: usize = 8_192;
/// Sample rows before shrinking.
pub const SAMPLE_ROWS: usize = 5;
/// Long strings in samples are cut to this many characters (then shorter when shrinking).
pub const SAMPLE_STRING_CHARS: usize = 200;
/// A column name is shown to at most this many characters (a 60,000-character name made a
/// 1.3 MB `loom_describe`); a longer one ends in `…`.
pub const MAX_NAME_CHARS: usize = 200;
/// Arrays and objects in the provenance's arguments show this many items (then fewer).
pub const ARGS_ITEMS: usize = 20;

/// One dataset to describe, with the path it was found at in the result.
pub struct DatasetView<'a> {
    pub dataset: &'a Arc<Dataset>,
    pub path: &'a str,
}

/// How much detail to include; each shrink step lowers one knob.
#[derive(Debug, Clone, Copy)]
struct Detail {
    hints: usize,
    sample_rows: usize,
    string_chars: usize,
    /// Strings in the provenance's arguments are cut to this many characters, and arrays and
    /// objects in them to this many items.
    args_chars: usize,
    args_items: usize,
    text_min_max: bool,
    stats: Stats,
    /// Sample rows as arrays in schema order instead of objects (column names not repeated).
    rows_as_arrays: bool,
    schema_columns: usize,
}

/// How each column is described in `schema`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stats {
    /// `{name, type, nullFraction, approxDistinct, uniqueness, min?, max?}`.
    Full,
    /// `{name, type, approxDistinct}`, and `nullFraction` when there are nulls.
    Brief,
    /// `"name: Type, N distinct"`, and `", P% null"` when there are nulls.
    Counted,
    /// `"name: Type"`.
    Names,
}

/// Sample rows never go below this: a model reads three example rows faster than a schema of
/// statistics, so the statistics give way first (issue 11).
pub const MIN_SAMPLE_ROWS: usize = 3;

const SHRINK: &[fn(&mut Detail) -> bool] = &[
    |d| std::mem::replace(&mut d.hints, 3) > 3,
    |d| std::mem::replace(&mut d.string_chars, 60) != 60,
    |d| {
        let changed = d.args_chars != 60 || d.args_items != 3;
        (d.args_chars, d.args_items) = (60, 3);
        changed
    },
    |d| std::mem::replace(&mut d.sample_rows, MIN_SAMPLE_ROWS) > MIN_SAMPLE_ROWS,
    |d| std::mem::replace(&mut d.string_chars, 24) != 24,
    |d| std::mem::replace(&mut d.hints, 2) > 2,
    |d| std::mem::replace(&mut d.text_min_max, false),
    |d| std::mem::replace(&mut d.hints, 1) > 1,
    |d| std::mem::replace(&mut d.stats, Stats::Brief) == Stats::Full,
    |d| !std::mem::replace(&mut d.rows_as_arrays, true),
    |d| std::mem::replace(&mut d.stats, Stats::Counted) == Stats::Brief,
    |d| std::mem::replace(&mut d.stats, Stats::Names) != Stats::Names,
    |d| std::mem::replace(&mut d.string_chars, 12) != 12,
    |d| {
        let changed = d.args_chars != 24 || d.args_items != 1;
        (d.args_chars, d.args_items) = (24, 1);
        changed
    },
    |d| std::mem::replace(&mut d.hints, 0) > 0,
];

fn round3(v: f64) -> Value {
    let rounded = (v * 1000.0).round() / 1000.0;
    if rounded.fract() == 0.0 && rounded.abs() < 1e15 {
        json!(rounded as i64)
    } else {
        json!(rounded)
    }
}

/// Schema entries with full statistics of the columns in `columns` (what a `loom_describe` page
/// shows).
pub fn schema_json(dataset: &Dataset, text_min_max: bool, columns: Range<usize>) -> Vec<Value> {
    schema_entries(dataset, Stats::Full, text_min_max, columns)
}

fn schema_entries(
    dataset: &Dataset,
    stats: Stats,
    text_min_max: bool,
    columns: Range<usize>,
) -> Vec<Value> {
    dataset
        .profile()
        .iter()
        .skip(columns.start)
        .take(columns.len())
        .map(|p| {
            match stats {
                Stats::Names => {
                    return Value::String(format!(
                        "{}: {}",
                        cut(&p.name, MAX_NAME_CHARS),
                        p.data_type
                    ));
                }
                Stats::Counted => {
                    let mut text = format!(
                        "{}: {}, {} distinct",
                        cut(&p.name, MAX_NAME_CHARS),
                        p.data_type,
                        p.approx_distinct
                    );
                    if p.null_fraction > 0.0 {
                        // At least 1% when there are nulls at all: "0% null" would be a lie.
                        let percent = (p.null_fraction * 100.0).round().max(1.0);
                        text.push_str(&format!(", {percent}% null"));
                    }
                    return Value::String(text);
                }
                Stats::Full | Stats::Brief => {}
            }
            let mut entry = Map::new();
            entry.insert("name".into(), json!(cut(&p.name, MAX_NAME_CHARS)));
            entry.insert("type".into(), json!(p.data_type));
            if stats == Stats::Brief {
                if p.null_fraction > 0.0 {
                    entry.insert("nullFraction".into(), round3(p.null_fraction));
                }
                entry.insert("approxDistinct".into(), json!(p.approx_distinct));
                return Value::Object(entry);
            }
            entry.insert("nullFraction".into(), round3(p.null_fraction));
            entry.insert("approxDistinct".into(), json!(p.approx_distinct));
            entry.insert("uniqueness".into(), round3(p.uniqueness));
            let is_text = p.data_type == "Utf8";
            if text_min_max || !is_text {
                for (key, value) in [("min", &p.min), ("max", &p.max)] {
                    if let Some(value) = value {
                        let value = cut_value(value, 40, 10);
                        entry.insert(key.into(), value);
                    }
                }
            }
            Value::Object(entry)
        })
        .collect()
}

/// The first `rows` rows over the columns in `columns`, as objects with typed values, strings
/// cut to `string_chars`.
pub fn sample_json(
    dataset: &Dataset,
    rows: usize,
    string_chars: usize,
    columns: Range<usize>,
) -> Vec<Value> {
    sample_rows(dataset, rows, string_chars, columns, false)
}

/// The first `rows` rows over the columns in `columns`, as objects or as arrays in schema order;
/// strings cut to `string_chars`.
fn sample_rows(
    dataset: &Dataset,
    rows: usize,
    string_chars: usize,
    columns: Range<usize>,
    as_arrays: bool,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(rows);
    for batch in &dataset.batches {
        for row in 0..batch.num_rows() {
            if out.len() >= rows {
                return out;
            }
            let schema = batch.schema();
            let cells = schema
                .fields()
                .iter()
                .zip(batch.columns())
                .skip(columns.start)
                .take(columns.len())
                .map(|(field, array)| {
                    let value = cell_shown(array, row, Shown::new(string_chars));
                    (cut(field.name(), MAX_NAME_CHARS), value)
                });
            out.push(if as_arrays {
                Value::Array(cells.map(|(_, value)| value).collect())
            } else {
                Value::Object(cells.collect())
            });
        }
    }
    out
}

/// `value` with every string in it cut to `chars` characters and every array or object to its
/// first `items` entries, the rest counted (`"… 297 more"`; for objects under the key `…`).
fn cut_value(value: &Value, chars: usize, items: usize) -> Value {
    match value {
        Value::String(s) => Value::String(cut(s, chars)),
        Value::Array(all) => {
            let mut kept: Vec<Value> = all
                .iter()
                .take(items)
                .map(|v| cut_value(v, chars, items))
                .collect();
            if all.len() > items {
                kept.push(Value::String(format!("… {} more", all.len() - items)));
            }
            Value::Array(kept)
        }
        Value::Object(members) => {
            let mut kept: Map<String, Value> = members
                .iter()
                .take(items)
                .map(|(k, v)| (k.clone(), cut_value(v, chars, items)))
                .collect();
            if members.len() > items {
                kept.insert("…".into(), json!(format!("{} more", members.len() - items)));
            }
            Value::Object(kept)
        }
        other => other.clone(),
    }
}

fn dataset_json(view: &DatasetView<'_>, detail: Detail, with_path: bool) -> Map<String, Value> {
    let d = view.dataset;
    let mut entry = Map::new();
    entry.insert("ref".into(), json!(d.reference));
    if with_path {
        entry.insert("path".into(), json!(view.path));
    }
    entry.insert("rows".into(), json!(d.rows));
    entry.insert(
        "schema".into(),
        Value::Array(schema_entries(
            d,
            detail.stats,
            detail.text_min_max,
            0..detail.schema_columns,
        )),
    );
    if detail.schema_columns < d.profile().len() {
        entry.insert(
            "schemaCut".into(),
            json!(format!(
                "{} of {} columns shown; loom_describe {{\"ref\": \"{}\"}} lists all",
                detail.schema_columns,
                d.profile().len(),
                d.reference
            )),
        );
    }
    if detail.sample_rows > 0 {
        entry.insert(
            "sample".into(),
            Value::Array(sample_rows(
                d,
                detail.sample_rows,
                detail.string_chars,
                0..detail.schema_columns,
                detail.rows_as_arrays,
            )),
        );
    }
    entry
}

fn assemble(
    views: &[DatasetView<'_>],
    hints: &[JoinHint],
    context: &Map<String, Value>,
    detail: Detail,
    saved: usize,
) -> Value {
    let mut envelope = Map::new();
    envelope.insert("kind".into(), json!("loom_dataset_ref"));
    if let [single] = views {
        let body = dataset_json(single, detail, false);
        let mut body = body.into_iter();
        // `ref` and `rows` first, then the saving, then the rest: the order a reader scans.
        for (key, value) in body.by_ref().take(2) {
            envelope.insert(key, value);
        }
        envelope.insert("approxTokensSaved".into(), json!(saved));
        envelope.extend(body);
    } else {
        envelope.insert("approxTokensSaved".into(), json!(saved));
        envelope.insert(
            "datasets".into(),
            Value::Array(
                views
                    .iter()
                    .map(|v| Value::Object(dataset_json(v, detail, true)))
                    .collect(),
            ),
        );
    }
    envelope.insert(
        "joinHints".into(),
        serde_json::to_value(&hints[..hints.len().min(detail.hints)]).unwrap_or_else(|_| json!([])),
    );
    if let Some(first) = views.first() {
        envelope.insert(
            "provenance".into(),
            serde_json::to_value(&first.dataset.provenance)
                .map(|p| cut_args(p, detail.args_chars, detail.args_items))
                .unwrap_or(Value::Null),
        );
    }
    if !context.is_empty() {
        envelope.insert("context".into(), Value::Object(context.clone()));
    }
    let datasets: Vec<&Dataset> = views.iter().map(|v| v.dataset.as_ref()).collect();
    envelope.insert("usage".into(), json!(sql::usage(&datasets)));
    Value::Object(envelope)
}

/// Provenance with its `args` cut (the whole arguments are in `loom_describe`).
fn cut_args(mut provenance: Value, chars: usize, items: usize) -> Value {
    if let Some(args) = provenance.get_mut("args") {
        *args = cut_value(args, chars, items);
    }
    provenance
}

/// Build the envelope for `views`, found together in one result of `original_tokens` tokens.
pub fn build(
    views: &[DatasetView<'_>],
    hints: &[JoinHint],
    context: &Map<String, Value>,
    original_tokens: usize,
) -> Value {
    let columns = views
        .iter()
        .map(|v| v.dataset.profile().len())
        .max()
        .unwrap_or(0);
    let mut detail = Detail {
        hints: crate::hints::MAX_HINTS,
        sample_rows: SAMPLE_ROWS,
        string_chars: SAMPLE_STRING_CHARS,
        args_chars: SAMPLE_STRING_CHARS,
        args_items: ARGS_ITEMS,
        text_min_max: true,
        stats: Stats::Full,
        rows_as_arrays: false,
        schema_columns: columns,
    };
    let mut steps = SHRINK.iter();
    let mut envelope = assemble(views, hints, context, detail, 0);
    loop {
        let size = envelope.to_string().chars().count();
        if size <= TARGET_CHARS {
            break;
        }
        let shrunk = steps.by_ref().any(|step| step(&mut detail));
        if !shrunk {
            if size <= MAX_CHARS || detail.schema_columns <= 1 {
                break;
            }
            detail.schema_columns = (detail.schema_columns * 3 / 4).max(1);
        }
        envelope = assemble(views, hints, context, detail, 0);
    }
    let saved = original_tokens.saturating_sub(estimate_tokens(&envelope.to_string()));
    assemble(views, hints, context, detail, saved)
}
