//! Rows → Arrow. Never lie, never lose: every value lands in exactly one cell of a column whose
//! type it fits exactly, and every source key gets a column of its own.
//!
//! The path: raw JSON objects ([`cells`]) → columns in first-seen key order → nested objects
//! flattened to `parent_child` columns up to [`FLATTEN_DEPTH`] levels → one type per column over
//! all rows ([`infer`]) → Arrow arrays built with arrow's builders ([`build`]).

mod build;
pub(crate) mod cells;
mod gather;
pub(crate) mod infer;
pub(crate) mod names;

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::Schema;

pub use cells::{RawObject, RawRows};
pub use gather::RawTable;
use gather::{Gatherer, SourceColumn};
pub use infer::ColumnType;

/// Nested objects are flattened this many levels deep (`a_b_c`); values deeper than that are
/// kept as JSON text in the deepest column.
pub const FLATTEN_DEPTH: usize = 3;

/// A table wider than this is not treated as a table (it would not be one a model can query).
pub const MAX_COLUMNS: usize = 2048;

/// Field metadata key holding the JSON path a column came from (`user.login`).
pub const SOURCE_KEY: &str = "loom.source";
/// Field metadata key holding how values were typed when it is not obvious (e.g. `text`).
pub const TYPING_KEY: &str = "loom.typing";

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum IngestError {
    #[error("not an array of objects: {0}")]
    NotRows(String),
    #[error("no rows")]
    Empty,
    #[error("{0} columns is more than the {MAX_COLUMNS} loom keeps as a table")]
    TooWide(usize),
    #[error("arrow: {0}")]
    Arrow(String),
}

/// What ingest produced: one record batch plus, per column, where it came from.
#[derive(Debug, Clone)]
pub struct Ingested {
    pub batch: RecordBatch,
    pub columns: Vec<ColumnInfo>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ColumnInfo {
    pub name: String,
    /// JSON path of the source key, segments joined with `.`.
    pub source: String,
    pub typing: ColumnType,
}

impl ColumnInfo {
    /// The columns of a table loom did not type itself (a query's result, a table built by a
    /// stage): each named as in `schema`, typed as Arrow says (`Text`: no typing of loom's), its
    /// source its name — or, with `stored_sources`, the `loom.source` field metadata a dataset
    /// loom wrote carries (a re-opened snapshot keeps the JSON paths its columns came from).
    pub fn of_schema(schema: &Schema, stored_sources: bool) -> Vec<Self> {
        schema
            .fields()
            .iter()
            .map(|field| Self {
                name: field.name().clone(),
                source: stored_sources
                    .then(|| field.metadata().get(SOURCE_KEY).cloned())
                    .flatten()
                    .unwrap_or_else(|| field.name().clone()),
                typing: ColumnType::Text,
            })
            .collect()
    }
}

/// How values are typed beyond the rules every table shares (SPEC §9.2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IngestOptions {
    /// The cells were read out of formatted text (CSV, markdown, record blocks), so every value
    /// arrived as a string: a column whose every value is a canonical decimal (`-?(0|[1-9]\d*)\.\d+`,
    /// at most 15 significant digits, so f64 holds it exactly) becomes Float64. Off for JSON,
    /// where a string that looks like a decimal was deliberately written as a string.
    pub decimal_strings: bool,
}

/// Parse `text` as a JSON array of objects and ingest it.
pub fn ingest_json_array(text: &str) -> Result<Ingested, IngestError> {
    ingest_json_array_with(text, IngestOptions::default())
}

/// [`ingest_json_array`] with typing options.
pub fn ingest_json_array_with(text: &str, options: IngestOptions) -> Result<Ingested, IngestError> {
    let table = RawTable::parse(text).map_err(|e| IngestError::NotRows(e.to_string()))?;
    ingest_table_with(table, options)
}

/// Replace every column whose values are all objects (or null) by its flattened children.
fn flatten<'a>(
    columns: Vec<SourceColumn<'a>>,
    out: &mut Vec<SourceColumn<'a>>,
) -> Result<(), IngestError> {
    for column in columns {
        let mut objects = 0;
        let all_objects = column.cells.iter().all(|cell| match cell {
            None => true,
            Some(raw) => match crate::common::json::kind(raw) {
                crate::common::json::Kind::Null => true,
                crate::common::json::Kind::Object => {
                    objects += 1;
                    true
                }
                _ => false,
            },
        });
        // `a_b_c` is as deep as it goes: a column whose path is that long keeps objects as JSON.
        if !(all_objects && objects > 0 && column.path.len() < FLATTEN_DEPTH) {
            out.push(column);
            continue;
        }
        let mut nested = Gatherer::new(&column.path);
        let mut unreadable = false;
        for cell in &column.cells {
            match cell
                .filter(|raw| crate::common::json::kind(raw) == crate::common::json::Kind::Object)
            {
                None => nested.skip_row(),
                // An object whose keys cannot be decoded (a lone surrogate) must not become a
                // row of nulls: the column then stays whole, as JSON text.
                Some(raw) => match serde_json::from_str::<RawObject<'a>>(raw.get()) {
                    Ok(object) => nested.add_row(&object.members)?,
                    Err(_) => {
                        unreadable = true;
                        break;
                    }
                },
            }
        }
        if unreadable {
            out.push(column);
            continue;
        }
        let children = nested.finish();
        if children.is_empty() {
            // Only empty objects: keep the column (as text) rather than lose it.
            out.push(column);
            continue;
        }
        flatten(children, out)?;
        if out.len() > MAX_COLUMNS {
            return Err(IngestError::TooWide(out.len()));
        }
    }
    Ok(())
}

/// Ingest rows that are already split into raw objects.
pub fn ingest_rows(rows: &[RawObject<'_>]) -> Result<Ingested, IngestError> {
    ingest_rows_with(rows, IngestOptions::default())
}

/// [`ingest_rows`] with typing options.
pub fn ingest_rows_with(
    rows: &[RawObject<'_>],
    options: IngestOptions,
) -> Result<Ingested, IngestError> {
    let mut gatherer = Gatherer::new(&[]);
    for row in rows {
        gatherer.add_row(&row.members)?;
    }
    ingest_table_with(
        RawTable {
            gatherer,
            error: None,
        },
        options,
    )
}

/// Ingest a table read by [`RawTable`] (locating a table already reads it this way, so its rows
/// are parsed once).
pub fn ingest_table_with(
    table: RawTable<'_>,
    options: IngestOptions,
) -> Result<Ingested, IngestError> {
    if let Some(error) = table.error {
        return Err(error);
    }
    let rows = table.rows();
    if rows == 0 {
        return Err(IngestError::Empty);
    }
    let top = table.gatherer.finish();
    let mut columns = Vec::with_capacity(top.len());
    flatten(top, &mut columns)?;
    if columns.is_empty() {
        return Err(IngestError::NotRows("objects without keys".into()));
    }
    if columns.len() > MAX_COLUMNS {
        return Err(IngestError::TooWide(columns.len()));
    }
    let paths: Vec<&[String]> = columns.iter().map(|c| c.path.as_slice()).collect();
    let column_names = names::column_names(&paths);
    // Each column is typed and built on its own: large tables use every core.
    let built = crate::parallel::map_columns(columns.len(), rows, |index| {
        let column = &columns[index];
        let typing = infer::infer_with(&column.cells, options);
        let source = column.path.join(".");
        build::build_column(&column_names[index], typing, &column.cells, &source)
            .map(|(field, array)| (field, array, source, typing))
    });
    let mut fields = Vec::with_capacity(columns.len());
    let mut arrays = Vec::with_capacity(columns.len());
    let mut infos = Vec::with_capacity(columns.len());
    for (result, name) in built.into_iter().zip(column_names) {
        let (field, array, source, typing) = result?;
        fields.push(field);
        arrays.push(array);
        infos.push(ColumnInfo {
            name,
            source,
            typing,
        });
    }
    let schema = Arc::new(Schema::new(fields));
    let batch =
        RecordBatch::try_new(schema, arrays).map_err(|e| IngestError::Arrow(e.to_string()))?;
    Ok(Ingested {
        batch,
        columns: infos,
    })
}

#[cfg(test)]
mod tests;
