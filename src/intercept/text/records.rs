//! Record blocks: every line `Key: value`, blocks separated by blank lines or started by numbered
//! leads (`1. Title`), as git, issue trackers and search tools print them:
//!
//! ```text
//! 1. Fix the parser
//!    Author: alice
//!    Date: 2024-01-02
//!
//! 2. Add tests
//!    Author: bob
//!    Date: 2024-01-03
//! ```
//!
//! Rules: at least 2 blocks of at least 2 fields; one key set shared by at least 90% of the
//! blocks (the rest may miss keys or add some: those cells are null); the lines of a block are
//! indented alike (nested YAML is not records); numbered leads on every block or none, counting
//! up by one. A key starts with a letter, is at most 40 characters and 4 words; the value is the
//! text after `:` and its spaces, trimmed (empty → null). A repeated key in a block is a second
//! column (`Label`, `Label_2`). A lead's text is the `title` column and its number the `number`
//! column — the only names this rung makes up, because that data has none.
//!
//! Any line that is not `Key: value` (a multi-line commit message, a log line) rejects the whole
//! rung — no silently dropped parts — except a last block with no `Key:` line at all, which is a
//! trailer (kept as residue). With a truncation marker right after the last block, that block
//! may be cut: it is dropped and reported.

use std::collections::HashMap;

use super::frame::{self, JsonRows, distinct_keys};
use super::{Found, TextTable, Torn};
use crate::intercept::locate::Rung;

pub(crate) const MIN_BLOCKS: usize = 2;
/// The share of blocks that must have the same key set.
pub(crate) const MIN_SAME_KEYS: f64 = 0.9;
pub(crate) const MAX_KEY_CHARS: usize = 40;
pub(crate) const MAX_KEY_WORDS: usize = 4;

fn key_like(key: &str) -> bool {
    key.chars().count() <= MAX_KEY_CHARS
        && key.starts_with(|c: char| c.is_ascii_alphabetic())
        && key.trim_end() == key
        && key.split_whitespace().count() <= MAX_KEY_WORDS
        && !key.contains("  ")
        && key
            .chars()
            .all(|c| c.is_alphanumeric() || " _-./()#'".contains(c))
}

/// `Key: value` → (indent, key, value).
fn pair(line: &str) -> Option<(usize, &str, Option<&str>)> {
    let text = line.trim_start();
    let indent = line.len() - text.len();
    let (key, rest) = text.split_once(':')?;
    if !key_like(key) || !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let value = rest.trim();
    Some((indent, key, (!value.is_empty()).then_some(value)))
}

/// `12. Title` or `12) Title` → (number, title).
fn lead(line: &str) -> Option<(u64, &str)> {
    let text = line.trim_start();
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    if !(1..=6).contains(&digits) {
        return None;
    }
    let rest = text[digits..].strip_prefix(['.', ')'])?;
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    Some((text[..digits].parse().ok()?, rest.trim()))
}

struct Block<'a> {
    start: usize,
    end: usize,
    lead: Option<(u64, &'a str)>,
    indent: Option<usize>,
    pairs: Vec<(&'a str, Option<&'a str>)>,
}

pub(crate) fn find(body: &str, truncated: bool) -> Option<Found> {
    // "Found 3 results:" reads like a key without a value; as the first line it may be either.
    let preamble = |line: &str| {
        (pair(line).is_none() || line.trim_end().ends_with(':')) && lead(line).is_none()
    };
    frame::table_starts(body, preamble)
        .into_iter()
        .find_map(|start| read(body, start, truncated))
}

fn read(body: &str, start: usize, truncated: bool) -> Option<Found> {
    let mut blocks: Vec<Block<'_>> = Vec::new();
    let mut open = false;
    let mut trailer = false;
    for line in frame::lines(&body[start..]) {
        let (from, to) = (start + line.start, start + line.end);
        if line.is_blank() {
            open = false;
            continue;
        }
        if let Some(lead) = lead(line.text) {
            blocks.push(Block {
                start: from,
                end: to,
                lead: Some(lead),
                indent: None,
                pairs: Vec::new(),
            });
            open = true;
            continue;
        }
        let Some((indent, key, value)) = pair(line.text) else {
            // A block of its own with nothing record-like after it is a trailer.
            let rest_plain = || {
                frame::lines(&body[start + line.start..])
                    .all(|l| pair(l.text).is_none() && lead(l.text).is_none())
            };
            if !open && !blocks.is_empty() && rest_plain() {
                trailer = true;
                break;
            }
            return None;
        };
        if !open {
            blocks.push(Block {
                start: from,
                end: to,
                lead: None,
                indent: None,
                pairs: Vec::new(),
            });
            open = true;
        }
        let block = blocks.last_mut()?;
        if block.indent.is_some_and(|i| i != indent) {
            return None;
        }
        block.indent = Some(indent);
        block.pairs.push((key, value));
        block.end = to;
    }
    let mut torn = None;
    // Dropped even when too few blocks are left: then the rung declines (below), rather than
    // keep a record that may be cut.
    if truncated
        && !trailer
        && let Some(last) = blocks.pop()
    {
        torn = Some(Torn {
            span: last.start..last.end,
            rows: 1,
            reason: "a truncation marker follows the last record, which may be cut",
        });
    }
    if blocks.len() < MIN_BLOCKS {
        return None;
    }
    let numbered = blocks.iter().filter(|b| b.lead.is_some()).count();
    if numbered != 0 && numbered != blocks.len() {
        return None;
    }
    let numbers: Vec<u64> = blocks.iter().filter_map(|b| b.lead.map(|l| l.0)).collect();
    if numbers.windows(2).any(|w| w[1] != w[0] + 1) {
        return None;
    }
    // A lead's text is a `Key: value` pair when every lead's is, under one key; else a title.
    let lead_pairs: Vec<Option<(usize, &str, Option<&str>)>> = blocks
        .iter()
        .map(|b| b.lead.and_then(|(_, rest)| pair(rest)))
        .collect();
    let leads_are_pairs = numbered > 0
        && lead_pairs.iter().all(Option::is_some)
        && lead_pairs
            .iter()
            .flatten()
            .all(|p| Some(p.1) == lead_pairs[0].map(|q| q.1));
    if leads_are_pairs {
        for (block, lead_pair) in blocks.iter_mut().zip(&lead_pairs) {
            if let Some((_, key, value)) = lead_pair {
                block.pairs.insert(0, (key, *value));
            }
        }
    }
    let titled = numbered > 0 && !leads_are_pairs;
    if blocks
        .iter()
        .any(|b| b.pairs.len() + usize::from(titled) < 2 || b.pairs.is_empty())
    {
        return None;
    }
    // Columns: (key, occurrence in its block), first seen first.
    let mut columns: Vec<(&str, usize)> = Vec::new();
    let mut column_of: HashMap<(&str, usize), usize> = HashMap::new();
    let mut key_sets: HashMap<Vec<(&str, usize)>, usize> = HashMap::new();
    let mut block_cells: Vec<Vec<(usize, Option<&str>)>> = Vec::with_capacity(blocks.len());
    for block in &blocks {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        let mut cells = Vec::with_capacity(block.pairs.len());
        let mut set = Vec::with_capacity(block.pairs.len());
        for &(key, value) in &block.pairs {
            let occurrence = seen.entry(key).or_insert(0);
            *occurrence += 1;
            let id = (key, *occurrence);
            let column = *column_of.entry(id).or_insert_with(|| {
                columns.push(id);
                columns.len() - 1
            });
            cells.push((column, value));
            set.push(id);
        }
        set.sort_unstable();
        *key_sets.entry(set).or_insert(0) += 1;
        block_cells.push(cells);
    }
    let modal = key_sets.values().copied().max().unwrap_or(0);
    if (modal as f64) < MIN_SAME_KEYS * blocks.len() as f64 {
        return None;
    }
    let mut names: Vec<String> = Vec::new();
    if titled {
        names.push("number".into());
        names.push("title".into());
    }
    let offset = names.len();
    names.extend(columns.iter().map(|&(key, occurrence)| {
        if occurrence == 1 {
            key.to_string()
        } else {
            format!("{key}_{occurrence}")
        }
    }));
    let mut rows = JsonRows::new(distinct_keys(&names));
    for (block, cells) in blocks.iter().zip(&block_cells) {
        let mut row: Vec<Option<&str>> = vec![None; names.len()];
        let number;
        if titled && let Some((n, title)) = block.lead {
            number = n.to_string();
            row[0] = Some(number.as_str());
            row[1] = (!title.is_empty()).then_some(title);
        }
        for &(column, value) in cells {
            row[offset + column] = value;
        }
        rows.begin_row();
        for (column, value) in row.into_iter().enumerate() {
            rows.cell(column, value);
        }
        rows.end_row();
    }
    let span = blocks.first()?.start..blocks.last()?.end;
    Some(Found {
        rung: Rung::RecordBlocks,
        spans: vec![span],
        tables: vec![TextTable {
            path: None,
            rows: rows.finish(),
        }],
        context: serde_json::Map::new(),
        torn,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn rows(found: &Found) -> Value {
        serde_json::from_str(&found.tables[0].rows).expect("rows")
    }

    #[test]
    fn blank_line_blocks() {
        let text = "Name: alpha\nSize: 10\nOwner:\n\nName: beta\nSize: 20\nOwner: bob\n";
        let found = find(text, false).expect("table");
        assert_eq!(
            rows(&found),
            json!([
                {"Name": "alpha", "Size": "10", "Owner": null},
                {"Name": "beta", "Size": "20", "Owner": "bob"}
            ])
        );
    }

    #[test]
    fn numbered_leads_give_number_and_title() {
        let text = "Found 2 repositories:\n\n1. acme/widget\n   Stars: 12\n   URL: https://x/widget\n2. acme/gadget\n   Stars: 7\n   URL: https://x/gadget\n";
        let found = find(text, false).expect("table");
        assert_eq!(
            rows(&found)[1],
            json!({"number": "2", "title": "acme/gadget", "Stars": "7", "URL": "https://x/gadget"})
        );
        assert_eq!(found.spans[0].start, 23);
    }

    #[test]
    fn repeated_keys_are_columns_of_their_own() {
        let text = "Id: 1\nLabel: bug\nLabel: ui\n\nId: 2\nLabel: docs\nLabel: ux\n";
        let found = find(text, false).expect("table");
        assert_eq!(
            rows(&found)[0],
            json!({"Id": "1", "Label": "bug", "Label_2": "ui"})
        );
    }

    #[test]
    fn anything_not_a_pair_rejects() {
        for text in [
            "commit abc\nAuthor: a\nDate: b\n\ncommit def\nAuthor: c\nDate: d\n",
            "Author: a\nDate: b\n\n    Fix the thing\n\nAuthor: c\nDate: d\n",
            "server:\n  host: a\n  port: 1\n\nserver:\n  host: b\n  port: 2\n",
            "Name: a\nSize: 1\n\nName: b\nColor: red\n\nName: c\nWeight: 3\n",
            "1. a\n   K: v\n   L: w\n3. b\n   K: v\n   L: w\n",
            "Name: a\nSize: 1\n",
            "URL: https://x\nhttps://y\n\nURL: z\nA: b\n",
        ] {
            assert!(find(text, false).is_none(), "{text:?}");
        }
    }

    #[test]
    fn a_trailer_block_and_a_cut_last_record() {
        let text = "A: 1\nB: 2\n\nA: 3\nB: 4\n\nShowing 2 of 40\n";
        let found = find(text, false).expect("table");
        assert_eq!(found.spans, vec![0..20]);
        let text = "A: 1\nB: 2\n\nA: 3\nB: 4\n\nA: 5\nB: ";
        let found = find(text, true).expect("table");
        assert_eq!(rows(&found).as_array().expect("rows").len(), 2);
        assert_eq!(found.torn.expect("torn").span, 22..30);
    }
}
