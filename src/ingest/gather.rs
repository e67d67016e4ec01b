//! Objects → columns of raw cells, in first-seen key order.
//!
//! A table arrives as a JSON array of objects. [`RawTable`] reads it in one streaming pass:
//! each object's members go into one reused row buffer and from there straight into their
//! columns — no allocation per row, no second pass over the rows. Rows of one table nearly
//! always repeat the previous row's keys in the same order; such a row is placed by comparing
//! keys, without hashing any.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::{IngestError, MAX_COLUMNS};
use crate::common::json::{Key, is_whitespace, skip_whitespace};

/// A column before typing: its source path and one optional raw value per row.
pub(super) struct SourceColumn<'a> {
    pub path: Vec<String>,
    /// The key as it appears in the objects (the last path segment, without `#2`).
    key: String,
    pub cells: Vec<Option<&'a RawValue>>,
}

/// Places object members into columns. A key repeated inside one object gets its own column
/// (its second occurrence is a different source key). Stops with [`IngestError::TooWide`] as
/// soon as there would be more than [`MAX_COLUMNS`] columns: each column costs a cell per row,
/// so a result with a new key in every row must be refused before it is allocated.
pub(super) struct Gatherer<'a> {
    prefix: Vec<String>,
    rows: usize,
    columns: Vec<SourceColumn<'a>>,
    /// key → its columns, by occurrence within one object.
    index: HashMap<String, Vec<usize>>,
    /// The columns of the last row placed the slow way, in member order.
    template: Vec<usize>,
}

impl<'a> Gatherer<'a> {
    pub(super) fn new(prefix: &[String]) -> Self {
        Self {
            prefix: prefix.to_vec(),
            rows: 0,
            columns: Vec::new(),
            index: HashMap::new(),
            template: Vec::new(),
        }
    }

    /// A row without an object (a null nested value): every column gets nothing.
    pub(super) fn skip_row(&mut self) {
        self.rows += 1;
    }

    fn put(columns: &mut [SourceColumn<'a>], slot: usize, row: usize, value: &'a RawValue) {
        let cells = &mut columns[slot].cells;
        cells.resize(row, None);
        cells.push(Some(value));
    }

    pub(super) fn add_row(
        &mut self,
        members: &[(Cow<'_, str>, &'a RawValue)],
    ) -> Result<(), IngestError> {
        let row = self.rows;
        self.rows += 1;
        let same_shape = members.len() == self.template.len()
            && members
                .iter()
                .zip(&self.template)
                .all(|((key, _), slot)| key.as_ref() == self.columns[*slot].key);
        if same_shape {
            for ((_, value), slot) in members.iter().zip(&self.template) {
                Self::put(&mut self.columns, *slot, row, value);
            }
            return Ok(());
        }
        self.template.clear();
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (key, value) in members {
            let occurrence = seen.entry(key.as_ref()).or_insert(0);
            *occurrence += 1;
            let slot = self.slot_for(key, *occurrence - 1)?;
            Self::put(&mut self.columns, slot, row, value);
            self.template.push(slot);
        }
        Ok(())
    }

    /// The column of the `nth` (from 0) occurrence of `key` within an object; a new one when
    /// there is none yet, unless that would make more than [`MAX_COLUMNS`].
    fn slot_for(&mut self, key: &str, nth: usize) -> Result<usize, IngestError> {
        if let Some(&slot) = self.index.get(key).and_then(|slots| slots.get(nth)) {
            return Ok(slot);
        }
        if self.columns.len() >= MAX_COLUMNS {
            return Err(IngestError::TooWide(self.columns.len() + 1));
        }
        let mut path = self.prefix.clone();
        path.push(if nth == 0 {
            key.to_string()
        } else {
            format!("{key}#{}", nth + 1)
        });
        self.columns.push(SourceColumn {
            path,
            key: key.to_string(),
            cells: Vec::new(),
        });
        let slot = self.columns.len() - 1;
        // Occurrences are made in order (the n-th of a key only after the (n-1)-th), so the new
        // column lands at position `nth` of its key's list.
        self.index.entry(key.to_string()).or_default().push(slot);
        Ok(slot)
    }

    pub(super) fn rows(&self) -> usize {
        self.rows
    }

    /// The columns, each with one cell per row.
    pub(super) fn finish(mut self) -> Vec<SourceColumn<'a>> {
        for column in &mut self.columns {
            column.cells.resize(self.rows, None);
        }
        self.columns
    }
}

/// A JSON array of objects, read straight into columns. Not an array, or an element that is not
/// an object, is a deserialization error; too many columns is kept as [`Self::error`] (the text
/// is still a table, just one loom does not hold).
pub struct RawTable<'a> {
    pub(super) gatherer: Gatherer<'a>,
    pub(super) error: Option<IngestError>,
}

impl RawTable<'_> {
    pub fn rows(&self) -> usize {
        self.gatherer.rows()
    }
}

impl fmt::Debug for RawTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawTable")
            .field("rows", &self.gatherer.rows)
            .field("columns", &self.gatherer.columns.len())
            .finish()
    }
}

/// One object into the reused row buffer.
struct RowSeed<'b, 'a>(&'b mut Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de: 'a, 'a> DeserializeSeed<'de> for RowSeed<'_, 'a> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for RowSeed<'_, 'a> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<(), M::Error> {
        self.0.clear();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            let value: &'de RawValue = map.next_value()?;
            self.0.push((key, value));
        }
        Ok(())
    }
}

impl<'a> RawTable<'a> {
    /// Read `text` (a JSON array of objects). Knowing the text's length lets the columns be
    /// sized once, from the first row's length, instead of growing by doubling. A long text is
    /// read in two halves on two threads (see [`Self::parse_in_halves`]).
    pub fn parse(text: &'a str) -> Result<Self, serde_json::Error> {
        if text.len() >= PARALLEL_PARSE_BYTES
            && crate::parallel::cores() > 1
            && let Some(table) = Self::parse_in_halves(text)
        {
            return Ok(table);
        }
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let table = deserializer.deserialize_seq(TableVisitor {
            text_bytes: text.len(),
            lifetime: std::marker::PhantomData,
        })?;
        deserializer.end()?;
        Ok(table)
    }

    fn empty() -> Self {
        RawTable {
            gatherer: Gatherer::new(&[]),
            error: None,
        }
    }

    /// Place one row read from a text of `text_bytes` bytes (0: unknown).
    fn take_row(&mut self, row: &[(Cow<'_, str>, &'a RawValue)], text_bytes: usize) {
        // Past an error the rest is only read to the end (it must still be JSON).
        if self.error.is_some() {
            self.gatherer.skip_row();
        } else if let Err(error) = self.gatherer.add_row(row) {
            self.error = Some(error);
        }
        if self.gatherer.rows() == 1 && text_bytes > 0 {
            // The first row's length says about how many rows the text holds.
            let row_bytes: usize = 2 + row
                .iter()
                .map(|(key, value)| key.len() + value.get().len() + 6)
                .sum::<usize>();
            let expected = text_bytes / row_bytes;
            self.gatherer.reserve(expected + expected / 8);
        }
    }

    /// The rows of a long text read by two threads: this one from the start, a helper from an
    /// element boundary near the middle — a comma between `}` and `{`. Such a comma may also sit
    /// inside a string; what proves it is a boundary is this thread's own reading, which is the
    /// ordinary left-to-right parse: if it arrives at exactly that comma after a whole element,
    /// the comma separates two elements of the array, and the helper's rows are the rest of the
    /// table. If it passes the comma instead, this thread reads on to the end alone and the
    /// helper's work is dropped. `None` when the text is not a table (the caller then reads it
    /// the ordinary way, which says why).
    fn parse_in_halves(text: &'a str) -> Option<Self> {
        let bytes = text.as_bytes();
        let open = skip_whitespace(bytes, 0);
        if bytes.get(open) != Some(&b'[') {
            return None;
        }
        let first = skip_whitespace(bytes, open + 1);
        let comma = element_boundary(bytes, bytes.len() / 2)?;
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            let rest = scope.spawn(|| {
                let mut rest = Self::empty();
                let end = read_rows(text, comma + 1, None, text.len() - comma, &mut rest, &stop);
                (end == Some(Reached::End)).then_some(rest)
            });
            let mut table = Self::empty();
            let reached = read_rows(text, first, Some(comma), text.len(), &mut table, &stop);
            if reached != Some(Reached::Stop) {
                // Done alone (or not a table): the helper's rows are not needed.
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            let rest = rest.join().ok().flatten();
            match reached? {
                Reached::End => Some(table),
                Reached::Stop => {
                    table.append(rest?);
                    Some(table)
                }
            }
        })
    }

    /// Add the rows `later` read after this table's own.
    fn append(&mut self, later: RawTable<'a>) {
        if self.error.is_none() {
            self.error = later.error;
        }
        if self.error.is_some() {
            self.gatherer.rows += later.gatherer.rows;
            return;
        }
        if let Err(error) = self.gatherer.append(later.gatherer) {
            self.error = Some(error);
        }
    }
}

/// Texts at least this long are read in two halves on two threads.
const PARALLEL_PARSE_BYTES: usize = 512 * 1024;

/// The first comma at or after `from` that stands between `}` and `{` (whitespace aside).
fn element_boundary(bytes: &[u8], from: usize) -> Option<usize> {
    (from..bytes.len()).find(|&at| {
        bytes[at] == b','
            && bytes[..at]
                .iter()
                .rev()
                .find(|&&b| !is_whitespace(b))
                .is_some_and(|&b| b == b'}')
            && bytes
                .get(skip_whitespace(bytes, at + 1))
                .is_some_and(|&b| b == b'{')
    })
}

/// Where [`read_rows`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reached {
    /// The comma it was told to stop at, right after an element.
    Stop,
    /// The closing `]`, with only whitespace after it.
    End,
}

/// Read objects one by one, from `at` (an element's start, whitespace allowed) into `table`:
/// each must be followed by a comma and the next object, or by the closing `]`. `None` when
/// something else is there, or when `cancel` is set.
fn read_rows<'a>(
    text: &'a str,
    mut at: usize,
    stop: Option<usize>,
    text_bytes: usize,
    table: &mut RawTable<'a>,
    cancel: &std::sync::atomic::AtomicBool,
) -> Option<Reached> {
    let bytes = text.as_bytes();
    let mut row = Vec::new();
    loop {
        if cancel.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        at = skip_whitespace(bytes, at);
        let mut deserializer = serde_json::Deserializer::from_str(text.get(at..)?);
        RowSeed(&mut row).deserialize(&mut deserializer).ok()?;
        // The object ends with its last member's value, whitespace, `}`.
        let last = match row.last() {
            Some((_, value)) => {
                let offset = (value.get().as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
                offset + value.get().len()
            }
            None => at + 1,
        };
        at = skip_whitespace(bytes, last);
        if bytes.get(at) != Some(&b'}') {
            return None;
        }
        table.take_row(&row, text_bytes);
        at = skip_whitespace(bytes, at + 1);
        match bytes.get(at) {
            Some(b',') if stop == Some(at) => return Some(Reached::Stop),
            Some(b',') => at += 1,
            Some(b']') => {
                return (skip_whitespace(bytes, at + 1) == bytes.len()).then_some(Reached::End);
            }
            _ => return None,
        }
    }
}

impl<'a> Gatherer<'a> {
    /// Add the rows `later` placed after this one's (same prefix): its columns join this one's
    /// by key and occurrence, columns first seen in `later` come after, in its order — the
    /// columns and cells one gatherer would have made of all the rows.
    fn append(&mut self, later: Gatherer<'a>) -> Result<(), IngestError> {
        let rows = self.rows;
        // A column is its key and which occurrence of the key within an object it holds (not its
        // path: the second `a` of an object and a key spelled `a#2` share the path `a#2`).
        let mut occurrence = vec![0; later.columns.len()];
        for slots in later.index.values() {
            for (nth, &slot) in slots.iter().enumerate() {
                occurrence[slot] = nth;
            }
        }
        self.rows += later.rows;
        for (column, nth) in later.finish().into_iter().zip(occurrence) {
            let slot = self.slot_for(&column.key, nth)?;
            let cells = &mut self.columns[slot].cells;
            cells.resize(rows, None);
            cells.extend(column.cells);
        }
        Ok(())
    }

    /// Room for `rows` cells in every column known so far.
    fn reserve(&mut self, rows: usize) {
        for column in &mut self.columns {
            column
                .cells
                .reserve(rows.saturating_sub(column.cells.len()));
        }
    }
}

struct TableVisitor<'a> {
    /// The length of the whole text, when known (0: unknown).
    text_bytes: usize,
    lifetime: std::marker::PhantomData<&'a ()>,
}

impl<'de: 'a, 'a> Deserialize<'de> for RawTable<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(TableVisitor {
            text_bytes: 0,
            lifetime: std::marker::PhantomData,
        })
    }
}

impl<'de: 'a, 'a> Visitor<'de> for TableVisitor<'a> {
    type Value = RawTable<'a>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of JSON objects")
    }
    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Self::Value, S::Error> {
        let mut table = RawTable::empty();
        let mut row = Vec::new();
        while let Some(()) = seq.next_element_seed(RowSeed(&mut row))? {
            table.take_row(&row, self.text_bytes);
        }
        Ok(table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> RawTable<'_> {
        let parsed = RawTable::parse(text).expect("table");
        let plain: RawTable<'_> = serde_json::from_str(text).expect("table");
        assert_eq!(parsed.rows(), plain.rows());
        parsed
    }

    fn column_cells(columns: &[SourceColumn<'_>], index: usize) -> Vec<Option<String>> {
        columns[index]
            .cells
            .iter()
            .map(|cell| cell.map(|raw| raw.get().to_string()))
            .collect()
    }

    #[test]
    fn members_land_in_their_columns_whatever_the_row_shape() {
        let t = table(
            r#"[{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"b": 5, "a": 6}, {"a": 7, "a": 8},
                {}, {"c": "x", "a\"q": true}]"#,
        );
        assert_eq!(t.rows(), 6);
        let columns = t.gatherer.finish();
        let paths: Vec<String> = columns.iter().map(|c| c.path.join(".")).collect();
        assert_eq!(paths, vec!["a", "b", "a#2", "c", "a\"q"]);
        let some = |v: &str| Some(v.to_string());
        assert_eq!(
            column_cells(&columns, 0),
            vec![some("1"), some("3"), some("6"), some("7"), None, None]
        );
        assert_eq!(
            column_cells(&columns, 1),
            vec![some("2"), some("4"), some("5"), None, None, None]
        );
        assert_eq!(
            column_cells(&columns, 2),
            vec![None, None, None, some("8"), None, None]
        );
        assert_eq!(column_cells(&columns, 4)[5], some("true"));
    }

    #[test]
    fn non_objects_are_not_tables() {
        assert!(serde_json::from_str::<RawTable<'_>>(r#"[{"a": 1}, 2]"#).is_err());
        assert!(serde_json::from_str::<RawTable<'_>>(r#"{"a": 1}"#).is_err());
        assert!(serde_json::from_str::<RawTable<'_>>(r#"[{"a": 1}"#).is_err());
        assert!(RawTable::parse(r#"[{"a": 1}] x"#).is_err(), "trailing text");
        assert!(RawTable::parse(r#"[{"a": 1}, 2]"#).is_err());
        assert_eq!(table("[]").rows(), 0);
    }

    #[test]
    fn too_many_columns_is_kept_as_the_error() {
        let row: Vec<String> = (0..=MAX_COLUMNS)
            .map(|i| format!("\"k{i}\": {i}"))
            .collect();
        let text = format!("[{{{}}}, {{\"a\": 1}}]", row.join(", "));
        let t = table(&text);
        assert_eq!(t.error, Some(IngestError::TooWide(MAX_COLUMNS + 1)));
        assert_eq!(t.rows(), 2);
    }

    type NamedCells = (String, Vec<Option<String>>);

    /// Columns as (path, cells as text) for comparing two readings.
    fn columns_of(table: RawTable<'_>) -> (usize, Option<String>, Vec<NamedCells>) {
        let rows = table.rows();
        let error = table.error.as_ref().map(|e| e.to_string());
        // A table in error is not ingested: what columns it got up to the error is moot.
        let columns = if error.is_some() {
            Vec::new()
        } else {
            table.gatherer.finish()
        };
        let described = (0..columns.len())
            .map(|i| (columns[i].path.join("."), column_cells(&columns, i)))
            .collect();
        (rows, error, described)
    }

    /// What the two-thread reading gives, checked against the ordinary one.
    fn read_in_halves_agrees(text: &str) -> bool {
        let serial = serde_json::from_str::<RawTable<'_>>(text).map(columns_of);
        match RawTable::parse_in_halves(text) {
            Some(halves) => {
                let halves = Ok(columns_of(halves));
                let serial = serial.map_err(|e| e.to_string());
                let shown = text.get(..200).unwrap_or(text);
                assert!(
                    halves == serial,
                    "{shown}…: {:?} vs {:?}",
                    halves.map(|h| h.0),
                    serial.map(|s| s.0)
                );
                true
            }
            None => false,
        }
    }

    #[test]
    fn halves_give_the_columns_one_reading_gives() {
        // Columns first seen in the second half, a repeated key there, a nested object, a
        // string holding what looks like a boundary, pretty-printed spacing.
        let text = r#"[ {"a": 1, "b": "x"},
            {"a": 2, "b": "}, {"},
            {"b": "y", "a": 3} ,
            {"a": 4, "c": {"d": [1, {"e": 2}]}},
            {"a": 5, "a": 6, "z": null},
            {} ,{"c": "w"}
        ]  "#;
        assert!(read_in_halves_agrees(text));
        // A repeated key's second column and a key spelled like it share a path, not a column.
        let filler = r#"{"x": 1}, "#.repeat(40);
        for ending in [
            r#"{"a": 1, "a": 2}, {"a#2": 3}"#,
            r#"{"a#2": 3}, {"a": 1, "a": 2}"#,
        ] {
            assert!(read_in_halves_agrees(&format!("[{filler}{ending}]")));
            assert!(read_in_halves_agrees(&format!(
                "[{ending}, {filler}{ending}]"
            )));
        }
        // Too wide: by the rows of the second half together with the first's columns, or
        // within the second half alone.
        let wide = |prefix: &str, count: usize| {
            let members: Vec<String> = (0..count)
                .map(|i| format!(r#""{prefix}{i}": {i}"#))
                .collect();
            format!("{{{}}}", members.join(", "))
        };
        let small: Vec<String> = (0..6_000).map(|i| format!(r#"{{"a": {i}}}"#)).collect();
        let small = small.join(", ");
        for text in [
            format!(
                "[{}, {small}, {}]",
                wide("k", MAX_COLUMNS - 10),
                wide("n", 20)
            ),
            format!("[{small}, {}]", wide("k", MAX_COLUMNS + 5)),
        ] {
            assert!(read_in_halves_agrees(&text));
            let (_, error, _) = columns_of(RawTable::parse_in_halves(&text).expect("table"));
            assert_eq!(
                error,
                Some(IngestError::TooWide(MAX_COLUMNS + 1).to_string())
            );
        }
    }

    #[test]
    fn a_boundary_inside_a_string_is_passed_by() {
        // The middle of the text is inside one long string full of `}, {`: the first thread
        // reads past it and finishes alone.
        let trap = "}, {\\\"q\\\": 1}, {".repeat(200);
        let text = format!(r#"[{{"a": 1}}, {{"a": "{trap}"}}, {{"a": 3}}]"#);
        assert!(serde_json::from_str::<RawTable<'_>>(&text).is_ok());
        assert!(read_in_halves_agrees(&text));
    }

    #[test]
    fn not_a_table_in_either_half_is_no_table() {
        for text in [
            r#"[{"a": 1}, {"a": 2}, {"a": 3}, 4]"#,
            r#"[{"a": 1}, 2, {"a": 3}, {"a": 4}]"#,
            r#"[{"a": 1}, {"a": 2}, {"a": 3}, {"a": 4}] x"#,
            r#"[{"a": 1}, {"a": 2}, {"a": 3}, {"a": 4}"#,
            r#"[{"a": 1}, {"a": 2}, {"a": 3}, {"a" 4}]"#,
        ] {
            assert!(RawTable::parse_in_halves(text).is_none(), "{text}");
            assert!(RawTable::parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn long_texts_are_read_in_halves_with_the_same_result() {
        let rows: Vec<String> = (0..20_000)
            .map(|i| match i % 3 {
                0 => format!(r#"{{"id": {i}, "name": "n{i}", "tags": ["x", "}}, {{"]}}"#),
                1 => format!(r#"{{"name": "n{i}", "id": {i}}}"#),
                _ => format!(r#"{{"id": {i}, "late": {i}.5}}"#),
            })
            .collect();
        let text = format!("[{}]", rows.join(",\n  "));
        assert!(text.len() >= PARALLEL_PARSE_BYTES);
        assert!(read_in_halves_agrees(&text));
        assert_eq!(table(&text).rows(), 20_000);
    }

    use proptest::strategy::Strategy;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
        #[test]
        fn any_small_table_reads_the_same_in_halves(
            rows in proptest::collection::vec(
                proptest::collection::vec(
                    (proptest::sample::select(vec!["a", "b", "A", "c_d", "a#2", "a#3"]),
                     proptest::prop_oneof![
                        proptest::num::i64::ANY.prop_map(|v| v.to_string()),
                        "[a{}, \\[\\]\"\\\\ ]{0,6}".prop_map(|v| serde_json::Value::String(v).to_string()),
                        proptest::strategy::Just("null".to_string()),
                        proptest::strategy::Just(r#"{"x": [1, {"y": "}, {"}]}"#.to_string()),
                     ]),
                    0..4),
                1..12),
            pretty in proptest::bool::ANY,
        ) {
            let separator = if pretty { " ,\n  " } else { "," };
            let objects: Vec<String> = rows
                .iter()
                .map(|members| {
                    let inner: Vec<String> =
                        members.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                    format!("{{{}}}", inner.join(separator))
                })
                .collect();
            let text = format!("[{}]", objects.join(separator));
            read_in_halves_agrees(&text);
        }
    }
}
