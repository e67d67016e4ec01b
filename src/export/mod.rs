//! `loom_export`: a dataset written to a file under `exportDir` by loom's own serializers —
//! never by the engine (no `COPY`: the engine stays sealed).
//!
//! * Streaming: rows are written batch by batch through a buffered writer, never collected.
//! * Atomic: written to a temporary file in the target directory, then renamed; a failure leaves
//!   no half file, and an existing file is replaced only with `overwrite: true`.
//! * Confined: the file name is a plain basename checked by [`filename`]; nothing outside
//!   `exportDir` can be named.

pub(crate) mod filename;

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Decimal128Type, Int64Type, UInt64Type};
use serde_json::Value;

use crate::store::Dataset;
use crate::store::values::cell;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Csv,
    Json,
}

impl Format {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.to_ascii_lowercase().as_str() {
            "csv" => Ok(Self::Csv),
            "json" => Ok(Self::Json),
            other => Err(format!("unknown format `{other}`; use \"csv\" or \"json\"")),
        }
    }

    pub fn extension(self) -> &'static str {
        match self {
            Self::Csv => "csv",
            Self::Json => "json",
        }
    }
}

/// What an export wrote.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Written {
    pub path: String,
    pub rows: usize,
    pub bytes: u64,
    pub format: &'static str,
}

/// A cell as CSV text: empty for NULL, a string's own text, numbers and booleans as written in
/// JSON, timestamps ISO-8601, lists and structs as JSON. With `neutralize`, a text cell that a
/// spreadsheet would run as a formula (it starts with `=`, `+`, `-`, `@`, tab or CR) gets a
/// leading `'`: tool data is untrusted (SPEC §15).
fn csv_field(array: &arrow::array::ArrayRef, row: usize, neutralize: bool) -> String {
    match cell(array, row) {
        Value::Null => String::new(),
        Value::String(s) if neutralize && is_text(array.data_type()) && looks_like_formula(&s) => {
            format!("'{s}")
        }
        Value::String(s) => s,
        other => other.to_string(),
    }
}

fn is_text(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    )
}

fn looks_like_formula(text: &str) -> bool {
    text.starts_with(['=', '+', '-', '@', '\t', '\r'])
}

/// CSV of `batches` with a header of `names` to `out`; returns the rows written.
pub fn write_csv(
    out: impl Write,
    batches: &[RecordBatch],
    names: &[String],
    neutralize: bool,
) -> std::io::Result<usize> {
    // The `csv` crate quotes per RFC 4180: fields with `"`, `,`, CR or LF are quoted, `"` doubled.
    let mut writer = csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .from_writer(out);
    // Column names come from the data too (a query's aliases, a tool's keys): the header row is
    // neutralized like any text cell.
    let header = names.iter().map(|name| {
        if neutralize && looks_like_formula(name) {
            format!("'{name}")
        } else {
            name.clone()
        }
    });
    writer.write_record(header).map_err(std::io::Error::other)?;
    let mut rows = 0;
    for batch in batches {
        for row in 0..batch.num_rows() {
            let record = batch
                .columns()
                .iter()
                .map(|c| csv_field(c, row, neutralize));
            writer.write_record(record).map_err(std::io::Error::other)?;
            rows += 1;
        }
    }
    writer.flush()?;
    Ok(rows)
}

/// A JSON value for export: like [`cell`], except that decimals are written as JSON numbers with
/// their exact digits (a reader that wants them exact can have them).
pub fn write_json_value(
    out: &mut impl Write,
    array: &arrow::array::ArrayRef,
    row: usize,
) -> std::io::Result<()> {
    if !array.is_null(row) {
        let digits = match array.data_type() {
            DataType::Decimal128(_, _) => {
                Some(array.as_primitive::<Decimal128Type>().value_as_string(row))
            }
            // A file keeps every integer a number (samples and query results, read by
            // JavaScript clients, write those beyond 2^53 as strings).
            DataType::Int64 => Some(array.as_primitive::<Int64Type>().value(row).to_string()),
            DataType::UInt64 => Some(array.as_primitive::<UInt64Type>().value(row).to_string()),
            _ => None,
        };
        if let Some(digits) = digits {
            return out.write_all(digits.as_bytes());
        }
    }
    serde_json::to_writer(out, &cell(array, row)).map_err(std::io::Error::other)
}

pub fn write_json(
    mut out: impl Write,
    batches: &[RecordBatch],
    names: &[String],
) -> std::io::Result<usize> {
    let keys: Vec<String> = names
        .iter()
        .map(|n| serde_json::to_string(n).unwrap_or_else(|_| "\"?\"".into()))
        .collect();
    out.write_all(b"[")?;
    let mut rows = 0;
    for batch in batches {
        for row in 0..batch.num_rows() {
            out.write_all(if rows == 0 { b"\n{" } else { b",\n{" })?;
            for (i, (key, array)) in keys.iter().zip(batch.columns()).enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                out.write_all(key.as_bytes())?;
                out.write_all(b":")?;
                write_json_value(&mut out, array, row)?;
            }
            out.write_all(b"}")?;
            rows += 1;
        }
    }
    out.write_all(if rows == 0 { b"]\n" } else { b"\n]\n" })?;
    out.flush()?;
    Ok(rows)
}

/// Write `dataset` to `dir/name` (both already checked), CSV formulas neutralized, with no
/// bound on its size. Creates `dir` if needed.
pub fn export(
    dataset: &Dataset,
    format: Format,
    dir: &Path,
    name: &str,
    overwrite: bool,
) -> Result<Written, String> {
    export_with(dataset, format, dir, name, overwrite, true, u64::MAX)
}

/// A writer that fails once more than `left` bytes were given to it: an export stops at the
/// session's quota instead of filling the disk (its temporary file is then removed).
struct Bounded<W> {
    inner: W,
    left: u64,
}

/// The error text of an export stopped by its quota; recognised to name the quota.
const QUOTA_STOP: &str = "the export quota is used up";

impl<W: Write> Write for Bounded<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let len = buf.len() as u64;
        if len > self.left {
            return Err(std::io::Error::other(QUOTA_STOP));
        }
        let written = self.inner.write(buf)?;
        self.left -= written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// [`export`], choosing whether CSV text cells that look like formulas are neutralized and how
/// many bytes the file may have at most (`max_bytes`: what is left of the session's quota).
pub fn export_with(
    dataset: &Dataset,
    format: Format,
    dir: &Path,
    name: &str,
    overwrite: bool,
    neutralize_formulas: bool,
    max_bytes: u64,
) -> Result<Written, String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create the export directory {}: {e}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .map_err(|e| format!("cannot resolve the export directory {}: {e}", dir.display()))?;
    let target: PathBuf = dir.join(name);
    if target.exists() && !overwrite {
        return Err(format!(
            "{} already exists; pass \"overwrite\": true to replace it, or another filename",
            target.display()
        ));
    }
    let temp = tempfile::Builder::new()
        .prefix(".loom-export-")
        .tempfile_in(&dir)
        .map_err(|e| format!("cannot create a temporary file in {}: {e}", dir.display()))?;
    let names: Vec<String> = dataset
        .schema
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let writer = BufWriter::with_capacity(
        1 << 16,
        Bounded {
            inner: temp.as_file(),
            left: max_bytes,
        },
    );
    let rows = match format {
        Format::Csv => write_csv(writer, &dataset.batches, &names, neutralize_formulas),
        Format::Json => write_json(writer, &dataset.batches, &names),
    }
    .map_err(|e| {
        if e.to_string().contains(QUOTA_STOP) {
            format!(
                "{} would be larger than the {max_bytes} bytes this session may still export                  (exportMaxBytes); nothing was written — export fewer rows (loom_materialize a                  query first) or raise exportMaxBytes",
                target.display()
            )
        } else {
            format!("writing {} failed: {e}", target.display())
        }
    })?;
    temp.as_file()
        .sync_all()
        .map_err(|e| format!("writing {} failed: {e}", target.display()))?;
    let persisted = if overwrite {
        temp.persist(&target).map_err(|e| e.error)
    } else {
        // Without overwrite, a file that appeared meanwhile is still never replaced.
        temp.persist_noclobber(&target).map_err(|e| e.error)
    };
    let file = persisted.map_err(|e| {
        format!(
            "cannot move the export into place at {}: {e}",
            target.display()
        )
    })?;
    let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    Ok(Written {
        path: target.display().to_string(),
        rows,
        bytes,
        format: format.extension(),
    })
}

#[cfg(test)]
mod tests;
