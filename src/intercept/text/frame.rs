//! What every formatted-text rung shares: lines with their offsets, truncation markers,
//! preamble candidates, header plausibility, distinct column keys and writing rows as JSON.

use crate::ingest::cells::canonical_int;
use crate::ingest::infer::temporal_form;

/// At most this many lines may stand before a table as its preamble ("Contents of /x.csv:").
pub(crate) const MAX_PREAMBLE_LINES: usize = 3;

/// All text kept beside the tables (preamble, trailer, headings between tables), in characters.
pub(crate) const MAX_RESIDUE_CHARS: usize = 500;

/// A header cell longer than this is prose, not a column name.
pub(crate) const MAX_HEADER_CHARS: usize = 64;

/// One line of a text: byte offsets of its content (without the line break) and of the next line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Line<'a> {
    pub start: usize,
    /// End of the content, before `\r\n` or `\n`.
    pub end: usize,
    /// Start of the next line (after the line break), or the text's length.
    pub next: usize,
    pub text: &'a str,
}

impl Line<'_> {
    pub(crate) fn is_blank(&self) -> bool {
        self.text.trim().is_empty()
    }
}

/// The lines of `text` with their offsets; `\r\n` counts as one break.
pub(crate) fn lines(text: &str) -> impl Iterator<Item = Line<'_>> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        if at >= text.len() {
            return None;
        }
        let start = at;
        let (end, next) = match text[start..].find('\n') {
            Some(i) => {
                let newline = start + i;
                let end = if newline > start && text.as_bytes()[newline - 1] == b'\r' {
                    newline - 1
                } else {
                    newline
                };
                (end, newline + 1)
            }
            None => (text.len(), text.len()),
        };
        at = next;
        Some(Line {
            start,
            end,
            next,
            text: &text[start..end],
        })
    })
}

/// A line a tool appends when it cut its output: fetch's `<error>Content truncated…</error>`,
/// `[output truncated]`, `... (42 more rows)`, a lone `...`/`…`. Deliberately narrow: a data row
/// never starts with these.
pub(crate) fn is_truncation_marker(line: &str) -> bool {
    let t = line.trim();
    if t == "..." || t == "…" {
        return true;
    }
    let lower = t.to_ascii_lowercase();
    let opens =
        ['[', '(', '<', '…'].iter().any(|c| lower.starts_with(*c)) || lower.starts_with("...");
    opens
        && (lower.contains("truncat")
            || lower.contains("more rows")
            || lower.contains("more lines")
            || lower.contains("more items")
            || lower.contains("more results"))
}

/// The text without a truncation marker on its last non-blank line: (body, whether one was cut).
pub fn peel_marker(text: &str) -> (&str, bool) {
    let trimmed = text.trim_end();
    let last_start = trimmed.rfind('\n').map_or(0, |i| i + 1);
    if is_truncation_marker(&trimmed[last_start..]) {
        (&text[..last_start], true)
    } else {
        (text, false)
    }
}

/// Where a table may start: at the top, or after up to [`MAX_PREAMBLE_LINES`] lines that
/// `preamble` accepts (short, and not able to be part of the table). Blank lines in between are
/// free.
pub(crate) fn table_starts(text: &str, preamble: impl Fn(&str) -> bool) -> Vec<usize> {
    let mut starts = vec![0];
    let mut taken = 0;
    let mut chars = 0;
    for line in lines(text) {
        if line.is_blank() {
            continue;
        }
        if taken == MAX_PREAMBLE_LINES {
            break;
        }
        chars += line.text.chars().count();
        if chars > MAX_RESIDUE_CHARS || !preamble(line.text) {
            break;
        }
        taken += 1;
        if line.next < text.len() {
            starts.push(line.next);
        }
    }
    starts
}

/// Whether a cell can be a column name: short, one line, no padding, at least one letter, and
/// not itself a value (a number or a date — then the "header" is a data row).
pub(crate) fn label_like(cell: &str) -> bool {
    let chars = cell.chars().count();
    (1..=MAX_HEADER_CHARS).contains(&chars)
        && cell.trim() == cell
        && !cell.chars().any(char::is_control)
        && cell.chars().any(char::is_alphabetic)
        && !cell.contains(['"', '[', ']', '{', '}', '<', '>', '='])
        && canonical_int(cell).is_none()
        && cell.parse::<f64>().is_err()
        && temporal_form(cell).is_none()
}

/// Column keys that are all distinct: a repeated name gets `_2`, `_3`, … (never overwrites).
pub(crate) fn distinct_keys<S: AsRef<str>>(names: &[S]) -> Vec<String> {
    let mut taken = std::collections::HashSet::new();
    names
        .iter()
        .map(|name| {
            let base = name.as_ref();
            let mut key = base.to_string();
            let mut n = 2;
            while taken.contains(&key) {
                key = format!("{base}_{n}");
                n += 1;
            }
            taken.insert(key.clone());
            key
        })
        .collect()
}

/// Append `s` as a JSON string.
pub(crate) fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    let mut plain = 0;
    for (i, b) in s.bytes().enumerate() {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[plain..i]);
        if escape.is_empty() {
            out.push_str(&format!("\\u{b:04x}"));
        } else {
            out.push_str(escape);
        }
        plain = i + 1;
    }
    out.push_str(&s[plain..]);
    out.push('"');
}

/// Rows of string cells (or nulls) written as a JSON array of objects, keys in column order.
pub(crate) struct JsonRows {
    keys: Vec<String>,
    out: String,
    rows: usize,
    cells_in_row: usize,
}

impl JsonRows {
    pub(crate) fn new(keys: Vec<String>) -> Self {
        Self {
            keys,
            out: String::from("["),
            rows: 0,
            cells_in_row: 0,
        }
    }

    pub(crate) fn begin_row(&mut self) {
        if self.rows > 0 {
            self.out.push(',');
        }
        self.out.push('{');
        self.rows += 1;
        self.cells_in_row = 0;
    }

    /// The next cell of the current row, under the key at position `column`.
    pub(crate) fn cell(&mut self, column: usize, value: Option<&str>) {
        if self.cells_in_row > 0 {
            self.out.push(',');
        }
        self.cells_in_row += 1;
        push_json_string(&mut self.out, &self.keys[column]);
        self.out.push(':');
        match value {
            Some(v) => push_json_string(&mut self.out, v),
            None => self.out.push_str("null"),
        }
    }

    pub(crate) fn end_row(&mut self) {
        self.out.push('}');
    }

    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    pub(crate) fn finish(mut self) -> String {
        self.out.push(']');
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_keep_offsets_and_crlf() {
        let text = "a\r\nbb\n\nc";
        let got: Vec<(usize, usize, usize, &str)> = lines(text)
            .map(|l| (l.start, l.end, l.next, l.text))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, 1, 3, "a"),
                (3, 5, 6, "bb"),
                (6, 6, 7, ""),
                (7, 8, 8, "c")
            ]
        );
    }

    #[test]
    fn markers_are_narrow() {
        for marker in [
            "<error>Content truncated. Call the fetch tool with a start_index of 5000 to get more content.</error>",
            "[output truncated]",
            "... (42 more rows)",
            "…",
            "...",
            "(truncated)",
        ] {
            assert!(is_truncation_marker(marker), "{marker}");
        }
        for row in [
            "5,truncated",
            "| 1 | truncated |",
            "Status: truncated",
            "id,name",
        ] {
            assert!(!is_truncation_marker(row), "{row}");
        }
        let (body, cut) = peel_marker("a,b\n1,2\n\n<error>Content truncated.</error>\n");
        assert_eq!((body, cut), ("a,b\n1,2\n\n", true));
        assert_eq!(peel_marker("a,b\n1,2"), ("a,b\n1,2", false));
    }

    #[test]
    fn preamble_candidates_are_short_and_few() {
        let text = "Contents of /x.csv:\n\na,b\n1,2\n";
        assert_eq!(table_starts(text, |l| !l.contains(',')), vec![0, 20]);
        let long = format!("{}\na,b\n", "x".repeat(600));
        assert_eq!(table_starts(&long, |_| true), vec![0]);
    }

    #[test]
    fn headers_are_labels_not_values() {
        for ok in ["id", "Last Modified", "size (MB)", "e-mail", "2nd"] {
            assert!(label_like(ok), "{ok}");
        }
        for bad in [
            "",
            " id",
            "42",
            "4.5",
            "2024-01-01",
            "2024-01-01 10:00:00",
            "[2024",
            "a=b",
            "1e5",
        ] {
            assert!(!label_like(bad), "{bad}");
        }
    }

    #[test]
    fn repeated_names_stay_distinct() {
        assert_eq!(
            distinct_keys(&["name", "name", "name_2", "id"]),
            vec!["name", "name_2", "name_2_2", "id"]
        );
    }

    #[test]
    fn json_rows_escape_everything() {
        let mut rows = JsonRows::new(vec!["a\"".into(), "b".into()]);
        rows.begin_row();
        rows.cell(0, Some("x\n\u{1}\\é"));
        rows.cell(1, None);
        rows.end_row();
        let text = rows.finish();
        let value: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(value[0]["a\""], "x\n\u{1}\\é");
        assert!(value[0]["b"].is_null());
    }
}
