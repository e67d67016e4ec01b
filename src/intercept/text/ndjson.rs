//! NDJSON: one JSON object per line, at least [`MIN_ROWS`] of them, each line exactly one object
//! (anything after it on the line declines). The rows keep their JSON as written, so their types
//! come from the JSON, as for rung 2. A blank line or a line that does not start with `{` ends
//! the table; a last line that stops mid-object at the end of the text was cut: it is dropped and
//! reported.

use serde_json::value::RawValue;

use super::frame::{self, Line};
use super::{Found, TextTable, Torn};
use crate::intercept::locate::Rung;

pub(crate) const MIN_ROWS: usize = 2;

pub(crate) fn find(body: &str, _truncated: bool) -> Option<Found> {
    let preamble = |line: &str| !line.trim_start().starts_with('{');
    frame::table_starts(body, preamble)
        .into_iter()
        .find_map(|start| read(body, start))
}

fn read(body: &str, start: usize) -> Option<Found> {
    let mut lines = frame::lines(&body[start..])
        .skip_while(Line::is_blank)
        .peekable();
    let first = *lines.peek()?;
    let mut rows = String::from("[");
    let mut count = 0;
    let mut end = start + first.start;
    let mut torn = None;
    for line in lines {
        let text = line.text.trim();
        if text.is_empty() || !text.starts_with('{') {
            break;
        }
        match serde_json::from_str::<&RawValue>(text) {
            Ok(_) => {
                if count > 0 {
                    rows.push(',');
                }
                rows.push_str(text);
                count += 1;
                end = start + line.end;
            }
            // Objects always close; one that stops at the very end of the text was cut.
            Err(e)
                if e.is_eof()
                    && body[start + line.next..].trim().is_empty()
                    && count >= MIN_ROWS =>
            {
                torn = Some(Torn {
                    span: start + line.start..start + line.end,
                    rows: 1,
                    reason: "the last line stops mid-object (cut off)",
                });
                break;
            }
            Err(_) => return None,
        }
    }
    rows.push(']');
    if count < MIN_ROWS {
        return None;
    }
    let span = start + first.start..end;
    Some(Found {
        rung: Rung::Ndjson,
        spans: vec![span],
        tables: vec![TextTable { path: None, rows }],
        context: serde_json::Map::new(),
        torn,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn objects_per_line_keep_their_json() {
        let text = "{\"a\": 1, \"b\": \"x\"}\n{\"a\": 2.5, \"b\": null}\n";
        let found = find(text, false).expect("table");
        let rows: Value = serde_json::from_str(&found.tables[0].rows).expect("rows");
        assert_eq!(rows, json!([{"a": 1, "b": "x"}, {"a": 2.5, "b": null}]));
        assert_eq!(found.spans, vec![0..text.len() - 1]);
    }

    #[test]
    fn a_cut_last_line_is_reported() {
        let text = "{\"a\": 1}\n{\"a\": 2}\n{\"a\": ";
        let found = find(text, false).expect("table");
        assert_eq!(found.torn.expect("torn").span, 18..24);
    }

    #[test]
    fn not_ndjson() {
        assert!(find("{\"a\": 1}\n", false).is_none());
        assert!(find("{\"a\": 1}\n{\"a\": 2} trailing\n", false).is_none());
        assert!(find("{\"a\": 1}\n[1, 2]\n{\"a\": 3}\n", false).is_none());
        assert!(find("{'a': 1}\n{'a': 2}\n", false).is_none());
        assert!(find("{\"a\": \n1}\n{\"a\": 2}\n", false).is_none());
    }
}
