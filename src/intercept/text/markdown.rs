//! GFM markdown tables: a header row, a delimiter row (`---`, `:--`, `--:`, `:-:` cells, at least
//! one `|` in it), then rows, until a blank line or a line without a pipe. Several tables in one
//! text are several tables.
//!
//! Cells: split on unescaped `|`; leading and trailing pipes are optional; each cell is trimmed
//! and `\|` becomes `|` (the escape belongs to the table syntax); everything else in a cell is
//! kept as written (its markdown, backticks included). GFM splits even inside inline code, but
//! people write `` `a|b` `` in cells all the time, so a row is read both ways: strictly, and with
//! pipes inside code spans kept; whichever gives the header's cell count is the row (when both
//! do, they are the same split). A row no reading fits is ragged and the rung declines — GFM
//! would pad or cut it, which loses or invents cells. Empty cells are null.
//!
//! Tables inside code fences are not tables. With a truncation marker right after the last table,
//! its last row is dropped and reported: it may be cut even when it looks whole.

use super::frame::{self, JsonRows, Line, distinct_keys};
use super::{Found, TextTable, Torn};
use crate::intercept::locate::Rung;

/// Positions of the pipes that separate cells, optionally ignoring those inside code spans.
fn separators(line: &str, keep_code: bool) -> Vec<usize> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'`' if keep_code => {
                let run = b[i..].iter().take_while(|&&c| c == b'`').count();
                // The span closes at the next run of exactly the same length; an unclosed run
                // is literal backticks.
                let mut j = i + run;
                let mut close = None;
                while j < b.len() {
                    if b[j] == b'`' {
                        let other = b[j..].iter().take_while(|&&c| c == b'`').count();
                        if other == run {
                            close = Some(j + other);
                            break;
                        }
                        j += other;
                    } else {
                        j += 1;
                    }
                }
                i = close.unwrap_or(i + run);
            }
            b'|' => {
                out.push(i);
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// The cells of a row line under one reading, and whether it had a closing pipe.
fn cells(line: &str, keep_code: bool) -> (Vec<String>, bool) {
    let trimmed = line.trim();
    let mut pipes: Vec<usize> = separators(trimmed, keep_code);
    let mut from = 0;
    let mut to = trimmed.len();
    if pipes.first() == Some(&0) {
        pipes.remove(0);
        from = 1;
    }
    let closed = pipes
        .last()
        .is_some_and(|&p| p + 1 == trimmed.len() && p >= from);
    if closed {
        pipes.pop();
        to = trimmed.len() - 1;
    }
    let mut out = Vec::with_capacity(pipes.len() + 1);
    let mut start = from;
    for pipe in pipes.into_iter().chain(std::iter::once(to)) {
        let cell = trimmed.get(start..pipe).unwrap_or_default().trim();
        out.push(cell.replace("\\|", "|"));
        start = pipe + 1;
    }
    (out, closed)
}

/// A row's cells: the reading (strict, then code-aware) with `width` cells, if any.
fn row(line: &str, width: usize) -> Option<(Vec<String>, bool)> {
    let strict = cells(line, false);
    if strict.0.len() == width {
        return Some(strict);
    }
    let code = cells(line, true);
    (code.0.len() == width).then_some(code)
}

fn is_delimiter_row(line: &str) -> Option<usize> {
    if !line.contains('|') {
        return None;
    }
    let (cells, _) = cells(line, false);
    let ok = cells.iter().all(|c| {
        let inner = c.strip_prefix(':').unwrap_or(c);
        let inner = inner.strip_suffix(':').unwrap_or(inner);
        !inner.is_empty() && inner.bytes().all(|b| b == b'-')
    });
    ok.then_some(cells.len())
}

fn has_pipe(line: &str) -> bool {
    line.contains('|') && !separators(line, false).is_empty()
}

fn is_fence(line: &str) -> bool {
    let t = line.trim_start();
    line.len() - t.len() <= 3 && (t.starts_with("```") || t.starts_with("~~~"))
}

struct Table {
    start: usize,
    end: usize,
    rows: String,
    /// Where the last row's line starts and ends.
    last: (usize, usize),
    torn: Option<Torn>,
}

pub(crate) fn find(body: &str, truncated: bool) -> Option<Found> {
    let lines: Vec<Line<'_>> = frame::lines(body).collect();
    let last_content = lines.iter().rposition(|l| !l.is_blank());
    let mut tables: Vec<Table> = Vec::new();
    let mut in_fence = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if is_fence(line.text) {
            in_fence = !in_fence;
            i += 1;
            continue;
        }
        if in_fence || !has_pipe(line.text) {
            i += 1;
            continue;
        }
        let Some(width) = lines.get(i + 1).and_then(|l| is_delimiter_row(l.text)) else {
            i += 1;
            continue;
        };
        let Some((header, _)) = row(line.text, width) else {
            i += 1;
            continue;
        };
        let mut out = JsonRows::new(distinct_keys(&header));
        let mut j = i + 2;
        let mut last = (0, 0);
        let mut torn = None;
        while j < lines.len() && !lines[j].is_blank() && has_pipe(lines[j].text) {
            let at_end = last_content == Some(j);
            match row(lines[j].text, width) {
                Some((cells, _)) => {
                    out.begin_row();
                    for (k, cell) in cells.iter().enumerate() {
                        out.cell(k, (!cell.is_empty()).then_some(cell.as_str()));
                    }
                    out.end_row();
                    last = (lines[j].start, lines[j].end);
                }
                // A short last row right before a truncation marker was cut.
                None if truncated && at_end && out.rows() > 0 => {
                    torn = Some(Torn {
                        span: lines[j].start..lines[j].end,
                        rows: 1,
                        reason: "the last row is short: the text was truncated",
                    });
                    j += 1;
                    break;
                }
                None => return None,
            }
            j += 1;
        }
        if out.rows() == 0 {
            return None;
        }
        tables.push(Table {
            start: line.start,
            end: last.1,
            rows: out.finish(),
            last,
            torn,
        });
        i = j;
    }
    if in_fence {
        return None;
    }
    // Only the last table can meet the marker; a torn row anywhere else is a ragged table.
    let count = tables.len();
    let mut torn = None;
    for (index, table) in tables.iter_mut().enumerate() {
        if table.torn.is_some() && index + 1 != count {
            return None;
        }
        if index + 1 == count {
            torn = table.torn.take();
        }
    }
    let last_table = tables.last_mut()?;
    let after_last = body[last_table
        .torn
        .as_ref()
        .map_or(last_table.end, |t| t.span.end)..]
        .trim()
        .is_empty();
    if torn.is_none() && truncated && after_last {
        // The marker follows the last row: its end may be missing even when it looks whole
        // (`| 5 | \`a|` was `| 5 | \`a|b\` |`). Re-read the tables without it.
        return drop_last_row(body, tables);
    }
    Some(assemble(tables, torn))
}

fn assemble(tables: Vec<Table>, torn: Option<Torn>) -> Found {
    let several = tables.len() > 1;
    let mut spans = Vec::with_capacity(tables.len());
    let mut out = Vec::with_capacity(tables.len());
    for (index, table) in tables.into_iter().enumerate() {
        spans.push(table.start..table.end);
        out.push(TextTable {
            path: several.then(|| format!("table{}", index + 1)),
            rows: table.rows,
        });
    }
    Found {
        rung: Rung::Markdown,
        spans,
        tables: out,
        context: serde_json::Map::new(),
        torn,
    }
}

/// The tables with the last row of the last one dropped (and reported).
fn drop_last_row(body: &str, mut tables: Vec<Table>) -> Option<Found> {
    let last = tables.pop()?;
    let (row_start, row_end) = last.last;
    let reread = find(&body[..row_start], false)?;
    // The re-read must be the same tables minus that one row.
    if reread.tables.len() != tables.len() + 1 {
        return None;
    }
    let mut found = reread;
    found.torn = Some(Torn {
        span: row_start..row_end,
        rows: 1,
        reason: "a truncation marker follows the last row, which may be cut",
    });
    Some(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn rows(found: &Found, index: usize) -> Value {
        serde_json::from_str(&found.tables[index].rows).expect("rows")
    }

    #[test]
    fn a_gfm_table_with_escapes_and_code() {
        let text = "| name | expr | note |\n|:-----|:----:|-----:|\n| or | `a|b` | pipe \\| here |\n| empty |  | x |\n";
        let found = find(text, false).expect("table");
        assert_eq!(
            rows(&found, 0),
            json!([
                {"name": "or", "expr": "`a|b`", "note": "pipe | here"},
                {"name": "empty", "expr": null, "note": "x"}
            ])
        );
        assert_eq!(found.spans, vec![0..text.len() - 1]);
    }

    #[test]
    fn outer_pipes_are_optional() {
        let found = find("a | b\n--|--\n1 | 2\n3 | 4", false).expect("table");
        assert_eq!(
            rows(&found, 0),
            json!([{"a": "1", "b": "2"}, {"a": "3", "b": "4"}])
        );
    }

    #[test]
    fn several_tables_with_headings_between() {
        let text = "## Users\n\n| id | name |\n|---|---|\n| 1 | a |\n\n## Orders\n\n| id | total |\n|---|---|\n| 9 | 1.50 |\n";
        let found = find(text, false).expect("tables");
        assert_eq!(found.tables.len(), 2);
        assert_eq!(found.tables[1].path.as_deref(), Some("table2"));
        assert_eq!(rows(&found, 1), json!([{"id": "9", "total": "1.50"}]));
    }

    #[test]
    fn ragged_fenced_and_pipe_prose_decline() {
        assert!(find("| a | b |\n|---|---|\n| 1 |\n| 2 | 3 |\n", false).is_none());
        assert!(find("| a | b |\n|---|---|\n| 1 | 2 | 3 |\n", false).is_none());
        assert!(find("```\n| a | b |\n|---|---|\n| 1 | 2 |\n```\n", false).is_none());
        assert!(find("use a | b to pipe\nthen c | d\n", false).is_none());
        assert!(find("| a | b |\n|---|\n| 1 | 2 |\n", false).is_none());
        assert!(find(" id | name\n----+------\n  1 | a\n", false).is_none());
    }

    #[test]
    fn a_cut_last_row_is_dropped_and_reported() {
        let text = "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n| 5 | 6";
        let found = find(text, true).expect("table");
        assert_eq!(rows(&found, 0).as_array().expect("rows").len(), 2);
        assert_eq!(found.torn.expect("torn").span, 40..47);
        let found = find("| a | b |\n|---|---|\n| 1 | 2 |\n| 3 |", true).expect("table");
        assert_eq!(rows(&found, 0).as_array().expect("rows").len(), 1);
        let found = find("| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n", true).expect("table");
        assert_eq!(found.torn.expect("torn").span, 30..39);
    }
}
