//! Many sessions as one catalog (`loom query --all-sessions`): `loom_catalog` lists every dataset
//! of every session with its provenance, and each table name (a ref without its sequence number:
//! `ds_crm_rows`, `doc`) is the union of that table's datasets across sessions, with the
//! session, server, tool, ref and creation time as columns. So "which tools returned the most
//! rows this week" and "every result this tool ever gave" are one SQL statement each.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
    new_null_array,
};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use futures::StreamExt;

use super::{Location, Manifest, ManifestDataset, Session, dataset_batches, manifest, table_of};

/// The catalog table's name.
pub(crate) const CATALOG_TABLE: &str = "loom_catalog";

/// Columns every cross-session table starts with.
pub(crate) const PROVENANCE_COLUMNS: [&str; 5] =
    ["session_id", "ref", "server", "tool", "created_at"];

/// Manifests read at once (each is one small GET on S3).
const READ_AHEAD: usize = 16;

/// Every session under the root with its manifest, oldest first. A session whose manifest cannot
/// be read is reported in the second list and left out.
pub(crate) async fn all_manifests(
    location: &Location,
    sessions: Vec<Session>,
) -> (Vec<(Session, Manifest)>, Vec<String>) {
    let read: Vec<(Session, Result<Manifest, String>)> =
        futures::stream::iter(sessions.into_iter().map(|session| async move {
            let result = manifest(location, &session).await;
            (session, result)
        }))
        .buffered(READ_AHEAD)
        .collect()
        .await;
    let mut ok = Vec::new();
    let mut failed = Vec::new();
    for (session, result) in read {
        match result {
            Ok(m) => ok.push((session, m)),
            Err(e) => failed.push(e),
        }
    }
    (ok, failed)
}

/// The cross-session table a dataset belongs to.
pub(crate) fn table_name(entry: &ManifestDataset) -> String {
    if entry.table.is_empty() {
        table_of(&entry.reference)
    } else {
        entry.table.clone()
    }
}

/// Table name → its datasets, in session order.
pub(crate) fn tables(
    sessions: &[(Session, Manifest)],
) -> BTreeMap<String, Vec<(&Session, &ManifestDataset)>> {
    let mut tables: BTreeMap<String, Vec<(&Session, &ManifestDataset)>> = BTreeMap::new();
    for (session, manifest) in sessions {
        for entry in &manifest.datasets {
            tables
                .entry(table_name(entry))
                .or_default()
                .push((session, entry));
        }
    }
    tables
}

fn instant(text: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.timestamp_micros())
}

fn utc_micros() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// `loom_catalog`: one row per dataset of every session. Arguments are as the manifest holds
/// them: redacted before they were ever stored.
pub(crate) fn catalog_batch(sessions: &[(Session, Manifest)]) -> Result<RecordBatch, String> {
    let entries: Vec<(&Session, &Manifest, &ManifestDataset)> = sessions
        .iter()
        .flat_map(|(s, m)| m.datasets.iter().map(move |d| (s, m, d)))
        .collect();
    let text = |f: &dyn Fn(&Session, &Manifest, &ManifestDataset) -> String| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(
            entries.iter().map(|(s, m, d)| f(s, m, d)),
        ))
    };
    let fields = vec![
        Field::new("session_id", DataType::Utf8, false),
        Field::new("ref", DataType::Utf8, false),
        Field::new("table", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("server", DataType::Utf8, false),
        Field::new("tool", DataType::Utf8, false),
        Field::new("args", DataType::Utf8, false),
        Field::new("source", DataType::Utf8, false),
        Field::new("created_at", utc_micros(), true),
        Field::new("rows", DataType::Int64, false),
        Field::new("columns", DataType::Int64, false),
        Field::new("pinned", DataType::Boolean, false),
        Field::new("session_complete", DataType::Boolean, false),
        Field::new("loom_version", DataType::Utf8, false),
        Field::new("file", DataType::Utf8, false),
    ];
    let columns: Vec<ArrayRef> = vec![
        text(&|s, _, _| s.id.clone()),
        text(&|_, _, d| d.reference.clone()),
        text(&|_, _, d| table_name(d)),
        text(&|_, _, d| d.kind.clone()),
        text(&|_, _, d| d.provenance.server.clone()),
        text(&|_, _, d| d.provenance.tool.clone()),
        text(&|_, _, d| d.provenance.args.to_string()),
        text(&|_, _, d| d.provenance.source.clone()),
        Arc::new(
            TimestampMicrosecondArray::from(
                entries
                    .iter()
                    .map(|(_, _, d)| instant(&d.created_at))
                    .collect::<Vec<_>>(),
            )
            .with_timezone("UTC"),
        ),
        Arc::new(Int64Array::from_iter_values(
            entries
                .iter()
                .map(|(_, _, d)| i64::try_from(d.rows).unwrap_or(i64::MAX)),
        )),
        Arc::new(Int64Array::from_iter_values(entries.iter().map(
            |(_, _, d)| i64::try_from(d.schema.len()).unwrap_or(i64::MAX),
        ))),
        Arc::new(BooleanArray::from_iter(
            entries.iter().map(|(_, _, d)| Some(d.pinned)),
        )),
        Arc::new(BooleanArray::from_iter(
            entries.iter().map(|(_, m, _)| Some(m.complete)),
        )),
        text(&|_, m, _| m.loom_version.clone()),
        text(&|s, _, d| format!("{}/{}", s.folder, d.file)),
    ];
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(|e| e.to_string())
}

/// The type a column gets in the union when its datasets disagree: a wider number when they
/// are all numbers, else text (every Arrow type casts to text).
fn widen(a: &DataType, b: &DataType) -> DataType {
    if a == b {
        return a.clone();
    }
    let int = |t: &DataType| {
        matches!(
            t,
            DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64
        )
    };
    let number = |t: &DataType| {
        int(t) || matches!(t, DataType::Float32 | DataType::Float64 | DataType::Null)
    };
    match (a, b) {
        (DataType::Null, other) | (other, DataType::Null) => other.clone(),
        (x, y) if int(x) && int(y) => DataType::Int64,
        (x, y) if number(x) && number(y) => DataType::Float64,
        _ => DataType::Utf8,
    }
}

/// One table across sessions: every member's rows under one schema, led by
/// [`PROVENANCE_COLUMNS`]. A data column whose name is one of those is kept as `data_<name>`.
pub(crate) async fn union_table(
    location: &Location,
    members: &[(&Session, &ManifestDataset)],
) -> Result<(SchemaRef, Vec<RecordBatch>), String> {
    // Files are read READ_AHEAD at a time (on S3 each is a round trip), kept in member order.
    let loaded: Vec<_> = futures::stream::iter(members.iter().map(|(session, entry)| async move {
        dataset_batches(location, session, entry)
            .await
            .map(|(schema, batches)| (*session, *entry, schema, batches))
    }))
    .buffered(READ_AHEAD)
    .collect::<Vec<_>>()
    .await
    .into_iter()
    .collect::<Result<_, String>>()?;
    // A data column named like a provenance column is `data_<name>` (`data_data_<name>` if that
    // is taken too, …), so no column of any dataset is lost.
    let rename = |name: &str, schema: &Schema| {
        if !PROVENANCE_COLUMNS.contains(&name) {
            return name.to_string();
        }
        let mut renamed = format!("data_{name}");
        while schema.field_with_name(&renamed).is_ok() {
            renamed.insert_str(0, "data_");
        }
        renamed
    };
    // Column order: first appearance; type: widened over every member that has it.
    let mut order: Vec<String> = Vec::new();
    let mut types: BTreeMap<String, DataType> = BTreeMap::new();
    for (_, _, schema, _) in &loaded {
        for field in schema.fields() {
            let name = rename(field.name(), schema);
            match types.get(&name) {
                Some(t) => {
                    let wider = widen(t, field.data_type());
                    types.insert(name, wider);
                }
                None => {
                    order.push(name.clone());
                    types.insert(name, field.data_type().clone());
                }
            }
        }
    }
    let mut fields = vec![
        Field::new("session_id", DataType::Utf8, false),
        Field::new("ref", DataType::Utf8, false),
        Field::new("server", DataType::Utf8, false),
        Field::new("tool", DataType::Utf8, false),
        Field::new("created_at", utc_micros(), true),
    ];
    for name in &order {
        fields.push(Field::new(name, types[name].clone(), true));
    }
    let schema = Arc::new(Schema::new(fields));
    let mut out = Vec::new();
    for (session, entry, member_schema, batches) in loaded {
        let at = instant(&entry.created_at);
        for batch in batches {
            let n = batch.num_rows();
            let repeat = |v: &str| -> ArrayRef { Arc::new(StringArray::from(vec![v; n])) };
            let mut columns: Vec<ArrayRef> = vec![
                repeat(&session.id),
                repeat(&entry.reference),
                repeat(&entry.provenance.server),
                repeat(&entry.provenance.tool),
                Arc::new(TimestampMicrosecondArray::from(vec![at; n]).with_timezone("UTC")),
            ];
            for name in &order {
                let target = &types[name];
                let found = member_schema
                    .fields()
                    .iter()
                    .position(|f| rename(f.name(), &member_schema) == *name);
                columns.push(match found {
                    Some(i) => cast(batch.column(i), target).map_err(|e| {
                        format!("column {name} of {} ({}): {e}", entry.reference, session.id)
                    })?,
                    None => new_null_array(target, n),
                });
            }
            out.push(RecordBatch::try_new(schema.clone(), columns).map_err(|e| e.to_string())?);
        }
    }
    Ok((schema, out))
}

/// Whether `sql` names `table` as a word (case-insensitive): only tables a statement can use are
/// read from the store.
pub(crate) fn mentions(sql: &str, table: &str) -> bool {
    let sql = without_literals(sql).to_ascii_lowercase();
    let table = table.to_ascii_lowercase();
    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    sql.match_indices(&table).any(|(at, _)| {
        !word(sql[..at].chars().next_back()) && !word(sql[at + table.len()..].chars().next())
    })
}

/// `sql` with string literals and comments blanked out (a name inside `'…'` is data, not a
/// table); double-quoted identifiers stay.
pub(crate) fn without_literals(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                // To the closing quote; `''` inside is an escaped quote.
                while let Some(d) = chars.next() {
                    if d == '\'' {
                        if chars.peek() == Some(&'\'') {
                            chars.next();
                        } else {
                            break;
                        }
                    }
                }
                out.push(' ');
            }
            '-' if chars.peek() == Some(&'-') => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        break;
                    }
                }
                out.push(' ');
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for d in chars.by_ref() {
                    if last == '*' && d == '/' {
                        break;
                    }
                    last = d;
                }
                out.push(' ');
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widening_keeps_numbers_numbers() {
        assert_eq!(widen(&DataType::Int64, &DataType::Int64), DataType::Int64);
        assert_eq!(widen(&DataType::Int32, &DataType::Int64), DataType::Int64);
        assert_eq!(
            widen(&DataType::Int64, &DataType::Float64),
            DataType::Float64
        );
        assert_eq!(widen(&DataType::Null, &DataType::Date32), DataType::Date32);
        assert_eq!(widen(&DataType::Int64, &DataType::Utf8), DataType::Utf8);
        assert_eq!(widen(&DataType::Date32, &utc_micros()), DataType::Utf8);
    }

    #[test]
    fn mentions_are_whole_words() {
        assert!(mentions("SELECT * FROM ds_crm_rows", "ds_crm_rows"));
        assert!(mentions(
            "select count(*) from DS_CRM_ROWS where x",
            "ds_crm_rows"
        ));
        assert!(mentions("SELECT * FROM \"ds_crm_rows\"", "ds_crm_rows"));
        assert!(!mentions("SELECT * FROM ds_crm_rows_x", "ds_crm_rows"));
        assert!(!mentions("SELECT * FROM my_ds_crm_rows", "ds_crm_rows"));
        assert!(mentions("SELECT 1 FROM a JOIN doc ON true", "doc"));
        assert!(!mentions(
            "SELECT * FROM loom_catalog WHERE \"table\" = 'ds_crm_rows'",
            "ds_crm_rows"
        ));
        assert!(!mentions("SELECT 1 -- from ds_crm_rows\n", "ds_crm_rows"));
        assert!(!mentions("SELECT 1 /* ds_crm_rows */", "ds_crm_rows"));
        assert!(mentions("SELECT 'it''s' FROM ds_crm_rows", "ds_crm_rows"));
    }
}
