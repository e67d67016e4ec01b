//! Documents and blobs: the originals of reduced results, held in the store beside the datasets
//! (budgeted, evicted and snapshotted the same way) and readable whole.
//!
//! A document is also a table, `doc_<n>(line_no BIGINT, text VARCHAR)`: its text column is a
//! string view array over the original's own bytes, so the table costs 16 bytes a line beyond
//! the text, and the original is the table's buffer read back exactly.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryArray, Int64Array, RecordBatch, StringArray, StringViewArray,
    UInt64Array,
};
use arrow::buffer::{Buffer, ScalarBuffer};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use super::profile::ColumnProfile;

/// What kind of original a document holds: it decides how the text was reduced and how it is
/// cut (SPEC §19).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentKind {
    /// An HTML page (its reduction is Markdown).
    Page,
    /// A JSON document that is not a table.
    Json,
    /// Anything else: logs, command output, prose, Markdown.
    Text,
}

impl DocumentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Page => "page",
            Self::Json => "json",
            Self::Text => "text",
        }
    }

    /// The kind [`Self::as_str`] named.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Page, Self::Json, Self::Text]
            .into_iter()
            .find(|kind| kind.as_str() == name)
    }
}

/// What a held entry is.
#[derive(Debug)]
pub enum Content {
    /// Rows from a tool result or a query.
    Table,
    Document(Document),
    Blob(Blob),
}

impl Content {
    /// `dataset`, `document` or `blob`, as `loom_list_datasets` says it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Table => "dataset",
            Self::Document(_) => "document",
            Self::Blob(_) => "blob",
        }
    }
}

/// A decoded binary lifted out of a result.
#[derive(Debug)]
pub struct Blob {
    pub mime: String,
    pub bytes: Buffer,
}

/// Every this many bytes of a document, the number of characters before that point: finding a
/// character offset walks at most this far.
const CHECKPOINT_BYTES: usize = 64 * 1024;

/// The original's bytes as the text column's buffer: the same allocation as the document's
/// `Arc<str>`, so the table costs no second copy of the text.
struct SharedText(Arc<str>);

impl AsRef<[u8]> for SharedText {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// An original text, whole.
#[derive(Debug)]
pub struct Document {
    pub kind: DocumentKind,
    /// Validated once, when the document was made: every read borrows it.
    text: Arc<str>,
    /// Its length in characters (Unicode code points).
    pub chars: usize,
    /// Byte offset where each line starts (lines end at `\n`, which belongs to no line).
    line_starts: Vec<usize>,
    /// `(byte offset, characters before it)`, ascending, at character boundaries.
    checkpoints: Vec<(usize, usize)>,
}

impl Document {
    /// The whole original.
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn lines(&self) -> usize {
        self.line_starts.len()
    }

    /// The byte offset of character `offset` (the end for offsets past it).
    pub fn byte_at(&self, offset: usize) -> usize {
        let text = self.text();
        let at = self
            .checkpoints
            .partition_point(|(_, chars)| *chars <= offset);
        let (mut byte, mut chars) = at
            .checked_sub(1)
            .and_then(|i| self.checkpoints.get(i))
            .copied()
            .unwrap_or((0, 0));
        for c in text[byte..].chars() {
            if chars == offset {
                return byte;
            }
            byte += c.len_utf8();
            chars += 1;
        }
        text.len()
    }

    /// The character offset of byte `byte` (a character boundary).
    pub fn char_at(&self, byte: usize) -> usize {
        let at = self.checkpoints.partition_point(|(b, _)| *b <= byte);
        let (from, chars) = at
            .checked_sub(1)
            .and_then(|i| self.checkpoints.get(i))
            .copied()
            .unwrap_or((0, 0));
        chars + self.text().get(from..byte).map_or(0, |s| s.chars().count())
    }

    /// `length` characters from character `offset`.
    pub fn slice(&self, offset: usize, length: usize) -> &str {
        let start = self.byte_at(offset);
        let end = self.byte_at(offset.saturating_add(length));
        &self.text()[start..end]
    }

    /// Byte range of line `n` (1-based), without its `\n`.
    pub fn line_range(&self, n: usize) -> Option<(usize, usize)> {
        let start = *self.line_starts.get(n.checked_sub(1)?)?;
        let end = match self.line_starts.get(n) {
            Some(next) => next - 1,
            None => self.text.len(),
        };
        Some((start, end))
    }

    /// Line `n` (1-based).
    pub fn line(&self, n: usize) -> Option<&str> {
        let (start, end) = self.line_range(n)?;
        self.text().get(start..end)
    }

    /// The 1-based line that byte `byte` is on.
    pub fn line_of(&self, byte: usize) -> usize {
        self.line_starts
            .partition_point(|start| *start <= byte)
            .max(1)
    }
}

/// The table of a document: one row per line, `\n` the separator (a `\r` before it stays in
/// the line's text, so the lines joined by `\n` are the original exactly).
pub fn document(
    kind: DocumentKind,
    text: String,
) -> Result<(SchemaRef, RecordBatch, Document), String> {
    let len = text.len();
    if u32::try_from(len).is_err() {
        return Err(format!(
            "a document of {len} bytes; loom holds at most 4 GiB in one"
        ));
    }
    let mut line_starts = vec![0];
    line_starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
    let mut checkpoints = Vec::with_capacity(len / CHECKPOINT_BYTES + 1);
    let mut chars = 0;
    let mut next = CHECKPOINT_BYTES;
    for (byte, _) in text.char_indices() {
        if byte >= next {
            checkpoints.push((byte, chars));
            next = byte + CHECKPOINT_BYTES;
        }
        chars += 1;
    }
    let text: Arc<str> = Arc::from(text);
    let bytes = Buffer::from(bytes::Bytes::from_owner(SharedText(text.clone())));
    let views: Vec<u128> = line_starts
        .iter()
        .enumerate()
        .map(|(i, start)| {
            let end = line_starts.get(i + 1).map_or(len, |next| next - 1);
            let line = &bytes.as_slice()[*start..end];
            // Offsets fit: the whole text is under 4 GiB (checked above).
            arrow::array::builder::make_view(line, 0, *start as u32)
        })
        .collect();
    let text_column =
        StringViewArray::try_new(ScalarBuffer::from(views), vec![bytes.clone()], None)
            .map_err(|e| format!("cannot hold the document's lines: {e}"))?;
    let line_numbers = Int64Array::from_iter_values(1..=line_starts.len() as i64);
    let schema = Arc::new(Schema::new(vec![
        Field::new("line_no", DataType::Int64, false),
        Field::new("text", DataType::Utf8View, false),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(line_numbers) as ArrayRef, Arc::new(text_column)],
    )
    .map_err(|e| format!("cannot hold the document's lines: {e}"))?;
    Ok((
        schema,
        batch,
        Document {
            kind,
            text,
            chars,
            line_starts,
            checkpoints,
        },
    ))
}

/// The table of a blob: `blob_<n>(mime VARCHAR, bytes BIGINT, data BYTEA)`, one row.
pub fn blob(mime: &str, data: Vec<u8>) -> Result<(SchemaRef, RecordBatch, Blob), String> {
    let bytes = Buffer::from(data);
    let schema = Arc::new(Schema::new(vec![
        Field::new("mime", DataType::Utf8, false),
        Field::new("bytes", DataType::UInt64, false),
        Field::new("data", DataType::Binary, false),
    ]));
    let size = bytes.len();
    let data_column = BinaryArray::try_new(
        arrow::buffer::OffsetBuffer::from_lengths([size]),
        bytes.clone(),
        None,
    )
    .map_err(|e| format!("cannot hold the blob: {e}"))?;
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(vec![mime])) as ArrayRef,
            Arc::new(UInt64Array::from(vec![size as u64])),
            Arc::new(data_column),
        ],
    )
    .map_err(|e| format!("cannot hold the blob: {e}"))?;
    Ok((
        schema,
        batch,
        Blob {
            mime: mime.to_string(),
            bytes,
        },
    ))
}

/// What `loom_describe` shows of a document's or blob's columns: exact counts, no value hashes
/// (documents take no part in join hints, and their lines are not worth the memory).
pub fn plain_profile(schema: &SchemaRef, batch: &RecordBatch) -> Vec<ColumnProfile> {
    let rows = batch.num_rows();
    schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(field, column)| {
            let (min, max, distinct) = match field.name().as_str() {
                "line_no" => (
                    Some(serde_json::json!(1)),
                    Some(serde_json::json!(rows)),
                    rows,
                ),
                "text" => {
                    let lines = column.as_any().downcast_ref::<StringViewArray>();
                    let distinct = lines.map_or(0, |l| {
                        l.iter()
                            .flatten()
                            .collect::<std::collections::HashSet<_>>()
                            .len()
                    });
                    (None, None, distinct)
                }
                _ => (None, None, rows),
            };
            ColumnProfile {
                name: field.name().clone(),
                data_type: super::values::type_name(field.data_type()),
                null_fraction: 0.0,
                approx_distinct: distinct,
                uniqueness: if rows == 0 {
                    0.0
                } else {
                    ((distinct as f64 / rows as f64) * 1000.0).round() / 1000.0
                },
                min,
                max,
                distinct_hashes: Vec::new(),
                sketch: Vec::new(),
                capped: false,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_join_back_to_the_original() {
        for text in ["", "one", "a\nb", "a\r\nb\r\n", "\n\n", "é\n😀x\n"] {
            let (_, batch, doc) = document(DocumentKind::Text, text.to_string()).expect("doc");
            let lines = batch
                .column(1)
                .as_any()
                .downcast_ref::<StringViewArray>()
                .expect("views");
            let joined: Vec<&str> = lines.iter().map(|l| l.unwrap_or("")).collect();
            assert_eq!(joined.join("\n"), text);
            assert_eq!(doc.text(), text);
            assert_eq!(doc.chars, text.chars().count());
            assert_eq!(doc.lines(), batch.num_rows());
        }
    }

    #[test]
    fn character_offsets_cross_checkpoints() {
        // Multi-byte characters on both sides of several checkpoints.
        let text: String = (0..200_000)
            .map(|i| match i % 4 {
                0 => 'a',
                1 => 'é',
                2 => '😀',
                _ => '\n',
            })
            .collect();
        let (_, _, doc) = document(DocumentKind::Text, text.clone()).expect("doc");
        let chars: Vec<char> = text.chars().collect();
        for offset in [
            0, 1, 65_535, 65_536, 99_999, 150_001, 199_999, 200_000, 300_000,
        ] {
            let want: String = chars.iter().skip(offset).take(7).collect();
            assert_eq!(doc.slice(offset, 7), want, "offset {offset}");
            let byte = doc.byte_at(offset);
            assert_eq!(doc.char_at(byte), offset.min(chars.len()));
        }
    }
}
