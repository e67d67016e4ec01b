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

use super::cells::Key;
use super::{IngestError, MAX_COLUMNS};

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
    pub fn new(prefix: &[String]) -> Self {
        Self {
            prefix: prefix.to_vec(),
            rows: 0,
            columns: Vec::new(),
            index: HashMap::new(),
            template: Vec::new(),
        }
    }

    /// A row without an object (a null nested value): every column gets nothing.
    pub fn skip_row(&mut self) {
        self.rows += 1;
    }

    fn put(columns: &mut [SourceColumn<'a>], slot: usize, row: usize, value: &'a RawValue) {
        let cells = &mut columns[slot].cells;
        cells.resize(row, None);
        cells.push(Some(value));
    }

    pub fn add_row(&mut self, members: &[(Cow<'_, str>, &'a RawValue)]) -> Result<(), IngestError> {
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
            let known = self
                .index
                .get(key.as_ref())
                .and_then(|slots| slots.get(*occurrence - 1))
                .copied();
            let slot = match known {
                Some(slot) => slot,
                None => {
                    if self.columns.len() >= MAX_COLUMNS {
                        return Err(IngestError::TooWide(self.columns.len() + 1));
                    }
                    let mut path = self.prefix.clone();
                    path.push(if *occurrence == 1 {
                        key.to_string()
                    } else {
                        format!("{key}#{occurrence}")
                    });
                    self.columns.push(SourceColumn {
                        path,
                        key: key.to_string(),
                        cells: Vec::new(),
                    });
                    let slot = self.columns.len() - 1;
                    self.index.entry(key.to_string()).or_default().push(slot);
                    slot
                }
            };
            Self::put(&mut self.columns, slot, row, value);
            self.template.push(slot);
        }
        Ok(())
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The columns, each with one cell per row.
    pub fn finish(mut self) -> Vec<SourceColumn<'a>> {
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
    /// sized once, from the first row's length, instead of growing by doubling.
    pub fn parse(text: &'a str) -> Result<Self, serde_json::Error> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let table = deserializer.deserialize_seq(TableVisitor {
            text_bytes: text.len(),
            lifetime: std::marker::PhantomData,
        })?;
        deserializer.end()?;
        Ok(table)
    }
}

impl Gatherer<'_> {
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
        let mut table = RawTable {
            gatherer: Gatherer::new(&[]),
            error: None,
        };
        let mut row = Vec::new();
        while let Some(()) = seq.next_element_seed(RowSeed(&mut row))? {
            // Past an error the rest is only read to the end (it must still be JSON).
            if table.error.is_some() {
                table.gatherer.skip_row();
            } else if let Err(error) = table.gatherer.add_row(&row) {
                table.error = Some(error);
            }
            if table.gatherer.rows() == 1 && self.text_bytes > 0 {
                // The first row's length says about how many rows the text holds.
                let row_bytes: usize = 2 + row
                    .iter()
                    .map(|(key, value)| key.len() + value.get().len() + 6)
                    .sum::<usize>();
                let expected = self.text_bytes / row_bytes;
                table.gatherer.reserve(expected + expected / 8);
            }
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
}
