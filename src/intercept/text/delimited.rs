//! Delimited text: CSV (RFC 4180), semicolon-separated (quoted the same way) and TSV.
//!
//! Two readings of the same bytes must agree before a table is believed. The `csv` crate reads
//! the values (quoted fields, embedded delimiters and newlines, doubled quotes); a strict scanner
//! here checks what the crate forgives: a quote inside an unquoted field, text after a closing
//! quote, a lone `\r` — RFC 4180 says none of these, the crate would guess, so the rung declines.
//! The scanner also knows what the crate does not tell: where a record ends (a blank line ends
//! the table), whether an empty field was quoted, and whether the text ends inside a quote (cut).
//!
//! Rules:
//! - the first line is the header: at least 2 fields, every one a label (not a number, not a
//!   date; only the first may be empty, as in a pandas index);
//! - every record has the header's field count; at least 2 data rows;
//! - a blank line ends the table (what follows is residue);
//! - empty fields: unquoted → null, quoted `""` → the empty string (PostgreSQL's CSV convention);
//! - TSV has no quoting: quotes are literal, except that a field starting with `"` is ambiguous
//!   (some writers quote TSV) and the rung declines;
//! - the last record is dropped and reported when the text ends inside a quoted field, or when a
//!   truncation marker follows it (it may be cut, even when it looks whole: `5,Alic`).

use std::collections::HashSet;

use super::frame::{self, JsonRows, distinct_keys, label_like};
use super::{Found, TextTable, Torn};
use crate::intercept::locate::Rung;

/// Data rows a delimited table needs (fewer is more likely a coincidence than a table).
pub(crate) const MIN_ROWS: usize = 2;

#[derive(Debug, Clone, Copy)]
struct Dialect {
    delimiter: u8,
    quoting: bool,
    rung: Rung,
}

const CSV: Dialect = Dialect {
    delimiter: b',',
    quoting: true,
    rung: Rung::Csv,
};
const TSV: Dialect = Dialect {
    delimiter: b'\t',
    quoting: false,
    rung: Rung::Tsv,
};
const SEMICOLON: Dialect = Dialect {
    delimiter: b';',
    quoting: true,
    rung: Rung::CsvSemicolon,
};

pub(crate) fn find_csv(body: &str, truncated: bool) -> Option<Found> {
    find(body, truncated, CSV)
}

pub(crate) fn find_tsv(body: &str, truncated: bool) -> Option<Found> {
    find(body, truncated, TSV)
}

pub(crate) fn find_semicolon(body: &str, truncated: bool) -> Option<Found> {
    find(body, truncated, SEMICOLON)
}

fn find(body: &str, truncated: bool, dialect: Dialect) -> Option<Found> {
    let delimiter = char::from(dialect.delimiter);
    // A preamble line cannot be the header: it has no delimiter, or it is a sentence ending in
    // a colon ("Query returned 2,000 rows:").
    let preamble = |line: &str| !line.contains(delimiter) || line.trim_end().ends_with(':');
    frame::table_starts(body, preamble)
        .into_iter()
        .find_map(|start| read(body, start, truncated, dialect))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The record ended at a line break or the end of the text.
    Complete,
    /// The text ended inside a quoted field.
    Unterminated,
    /// Not RFC 4180 (or, for TSV, a field that might be quoted).
    Invalid,
}

#[derive(Debug, Clone, Copy)]
struct Scan {
    start: usize,
    /// End of the record's content (before its line break).
    end: usize,
    /// Start of the next record.
    next: usize,
    fields: usize,
    how: End,
}

/// Scan one record from `start`. Quoted empty fields are noted as (record, field).
fn scan(
    b: &[u8],
    start: usize,
    dialect: Dialect,
    record: usize,
    quoted_empty: &mut HashSet<(usize, usize)>,
) -> Scan {
    let n = b.len();
    let d = dialect.delimiter;
    let mut i = start;
    let mut fields = 0;
    let done = |end: usize, next: usize, fields: usize, how: End| Scan {
        start,
        end,
        next,
        fields,
        how,
    };
    loop {
        fields += 1;
        if i < n && b[i] == b'"' {
            if !dialect.quoting {
                return done(i, n, fields, End::Invalid);
            }
            i += 1;
            let content = i;
            loop {
                if i >= n {
                    return done(n, n, fields, End::Unterminated);
                }
                if b[i] == b'"' {
                    if b.get(i + 1) == Some(&b'"') {
                        i += 2;
                        continue;
                    }
                    break;
                }
                i += 1;
            }
            if i == content {
                quoted_empty.insert((record, fields - 1));
            }
            i += 1;
            match b.get(i) {
                None => return done(n, n, fields, End::Complete),
                Some(&c) if c == d => i += 1,
                Some(b'\n') => return done(i, i + 1, fields, End::Complete),
                Some(b'\r') if b.get(i + 1) == Some(&b'\n') => {
                    return done(i, i + 2, fields, End::Complete);
                }
                Some(_) => return done(i, n, fields, End::Invalid),
            }
        } else {
            loop {
                match b.get(i) {
                    None => return done(n, n, fields, End::Complete),
                    Some(&c) if c == d => {
                        i += 1;
                        break;
                    }
                    Some(b'\n') => return done(i, i + 1, fields, End::Complete),
                    Some(b'\r') if b.get(i + 1) == Some(&b'\n') => {
                        return done(i, i + 2, fields, End::Complete);
                    }
                    // A lone CR ends a record for some readers and not others.
                    Some(b'\r') => return done(i, n, fields, End::Invalid),
                    Some(b'"') if dialect.quoting => {
                        return done(i, n, fields, End::Invalid);
                    }
                    Some(_) => i += 1,
                }
            }
        }
    }
}

/// Whether only whitespace is left from `at` to the end of the line (or of the text).
fn blank_line_at(b: &[u8], at: usize) -> bool {
    b[at..]
        .iter()
        .take_while(|&&c| c != b'\n')
        .all(|c| c.is_ascii_whitespace())
}

fn read(body: &str, start: usize, truncated: bool, dialect: Dialect) -> Option<Found> {
    let b = body.as_bytes();
    let mut quoted_empty = HashSet::new();
    let mut scans: Vec<Scan> = Vec::new();
    let mut torn: Option<Torn> = None;
    let mut at = start;
    while at < b.len() {
        if blank_line_at(b, at) {
            break;
        }
        let record = scan(b, at, dialect, scans.len(), &mut quoted_empty);
        // One field is a line, not a table: stop before reading the rest of the text.
        if scans.is_empty() && record.fields < 2 {
            return None;
        }
        let width = scans.first().map_or(record.fields, |h| h.fields);
        let last = body[record.next.min(b.len())..].trim().is_empty();
        match record.how {
            End::Invalid => return None,
            // The text stops inside a quote: it was cut, whatever a marker says.
            End::Unterminated if scans.len() >= 2 => {
                torn = Some(Torn {
                    span: record.start..b.len(),
                    rows: 1,
                    reason: "the text ends inside a quoted field (cut off)",
                });
                break;
            }
            End::Unterminated => return None,
            End::Complete if record.fields == width => {}
            End::Complete if truncated && last && record.fields < width && scans.len() >= 2 => {
                torn = Some(Torn {
                    span: record.start..record.end,
                    rows: 1,
                    reason: "the last row is short: the text was truncated",
                });
                break;
            }
            End::Complete => return None,
        }
        scans.push(record);
        at = record.next;
    }
    let header = scans.first()?;
    if header.fields < 2 {
        return None;
    }
    // With a truncation marker right after the table, the last row may be missing its end —
    // even one that looks whole: `5,Alic` or `5,"say "` (cut inside `"say ""hi"""`) do.
    if torn.is_none()
        && truncated
        && scans.len() >= 2
        && let Some(last) = scans.last()
        && body[last.next.min(b.len())..].trim().is_empty()
    {
        torn = Some(Torn {
            span: last.start..last.end,
            rows: 1,
            reason: "a truncation marker follows the last row, which may be cut",
        });
        scans.pop();
    }
    if scans.len() < MIN_ROWS + 1 {
        return None;
    }
    let table_end = scans.last()?.end;
    let span = start..table_end;
    let rows = values(&body[span.clone()], dialect, &scans, &quoted_empty)?;
    Some(Found {
        rung: dialect.rung,
        spans: vec![span],
        tables: vec![TextTable { path: None, rows }],
        context: serde_json::Map::new(),
        torn,
    })
}

/// The values, read by the `csv` crate, as JSON rows; `None` if the crate's records do not line
/// up with the scan or the header is not a header.
fn values(
    table: &str,
    dialect: Dialect,
    scans: &[Scan],
    quoted_empty: &HashSet<(usize, usize)>,
) -> Option<String> {
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(dialect.delimiter)
        .quoting(dialect.quoting)
        .double_quote(true)
        .has_headers(false)
        .flexible(true)
        .from_reader(table.as_bytes());
    let mut records = reader.records();
    let header = records.next()?.ok()?;
    let width = header.len();
    if width != scans.first()?.fields {
        return None;
    }
    let names: Vec<&str> = header.iter().collect();
    let plausible = names
        .iter()
        .enumerate()
        .all(|(i, name)| label_like(name) || (i == 0 && name.is_empty()));
    if !plausible {
        return None;
    }
    let mut rows = JsonRows::new(distinct_keys(&names));
    let mut count = 1;
    for record in records {
        let record = record.ok()?;
        if record.len() != width {
            return None;
        }
        rows.begin_row();
        for (field, value) in record.iter().enumerate() {
            let null = value.is_empty() && !quoted_empty.contains(&(count, field));
            rows.cell(field, (!null).then_some(value));
        }
        rows.end_row();
        count += 1;
    }
    (count == scans.len()).then(|| rows.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn rows(found: &Found) -> Value {
        serde_json::from_str(&found.tables[0].rows).expect("rows")
    }

    #[test]
    fn rfc4180_quotes_commas_newlines_and_doubled_quotes() {
        let text = "id,name,note\r\n1,\"Smith, J\",\"said \"\"hi\"\"\"\r\n2,Lee,\"two\nlines\"\r\n";
        let found = find_csv(text, false).expect("table");
        assert_eq!(
            rows(&found),
            json!([
                {"id": "1", "name": "Smith, J", "note": "said \"hi\""},
                {"id": "2", "name": "Lee", "note": "two\nlines"}
            ])
        );
        assert_eq!(found.spans, vec![0..text.len() - 2]);
        assert!(found.torn.is_none());
    }

    #[test]
    fn empty_fields_unquoted_are_null_quoted_are_empty() {
        let found = find_csv("a,b\n1,\n,\"\"\n", false).expect("table");
        assert_eq!(
            rows(&found),
            json!([{"a": "1", "b": null}, {"a": null, "b": ""}])
        );
    }

    #[test]
    fn duplicate_headers_stay_distinct() {
        let found = find_csv("name,name,id\na,b,1\nc,d,2\n", false).expect("table");
        assert_eq!(
            rows(&found)[0],
            json!({"name": "a", "name_2": "b", "id": "1"})
        );
    }

    #[test]
    fn ragged_lenient_or_headerless_text_declines() {
        for text in [
            "a,b\n1,2\n3\n4,5\n",
            "a,b\n1,2\n3,4,5\n",
            "a,b\n1,x\"y\n3,4\n",
            "a,b\n\"1\"x,2\n3,4\n",
            "1,2\n3,4\n5,6\n",
            "2024-01-01,x\n2024-01-02,y\n2024-01-03,z\n",
            "Hello there, my friend\nSee you soon, I hope\nBye now, take care\n",
            "a,b\n1,2\n",
            "only\none\ncolumn\n",
        ] {
            assert!(find_csv(text, false).is_none(), "{text:?}");
        }
    }

    #[test]
    fn a_blank_line_ends_the_table() {
        let text = "a,b\n1,2\n3,4\n\n(2 rows)\n";
        let found = find_csv(text, false).expect("table");
        assert_eq!(found.spans, vec![0..11]);
        assert_eq!(rows(&found).as_array().expect("rows").len(), 2);
    }

    #[test]
    fn preamble_lines_are_skipped_only_when_they_cannot_be_the_header() {
        let text = "Contents of /data/x.csv:\na,b\n1,2\n3,4\n";
        assert_eq!(find_csv(text, false).expect("table").spans, vec![25..36]);
        let text = "Results, as requested:\na,b\n1,2\n3,4\n";
        assert_eq!(find_csv(text, false).expect("table").spans, vec![23..34]);
    }

    #[test]
    fn cut_rows_are_dropped_and_reported() {
        let found = find_csv("a,b\n1,2\n3,4\n5,\"unfinished", false).expect("table");
        let torn = found.torn.clone().expect("torn");
        assert_eq!(torn.span, 12..25);
        assert_eq!(rows(&found).as_array().expect("rows").len(), 2);
        // With a marker, the last row may be cut, whatever it looks like.
        let found = find_csv("a,b\n1,2\n3,4\n5\n\n", true).expect("table");
        assert_eq!(found.torn.expect("torn").span, 12..13);
        let found = find_csv("a,b\n1,2\n3,4\n5,6\n\n", true).expect("table");
        assert_eq!(found.torn.expect("torn").span, 12..15);
        let found = find_csv("a,b\n1,2\n3,4\n5,\"6\"\n\n", true).expect("table");
        assert_eq!(found.torn.expect("torn").span, 12..17);
        // Without a marker, a short last row is ragged.
        assert!(find_csv("a,b\n1,2\n3,4\n5\n", false).is_none());
    }

    #[test]
    fn tsv_is_literal_and_semicolons_are_quoted() {
        let found = find_tsv("a\tb\n5'11\"\tx\ny\tz\n", false).expect("table");
        assert_eq!(rows(&found)[0], json!({"a": "5'11\"", "b": "x"}));
        assert!(find_tsv("a\tb\n\"q\"\tx\ny\tz\n", false).is_none());
        let found = find_semicolon("a;b\n\"1;2\";3,5\n4;5\n", false).expect("table");
        assert_eq!(rows(&found)[0], json!({"a": "1;2", "b": "3,5"}));
        assert!(find_csv("a;b\n\"1;2\";3,5\n4;5\n", false).is_none());
    }
}
