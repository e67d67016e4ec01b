//! `loom_read`: the originals of reduced results, whole, one page, a range of lines or the
//! lines matching a pattern at a time (SPEC §19.4).

use std::sync::Arc;

use base64::Engine as _;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents, Tool};
use serde_json::{Map, Value, json};

use super::{error_result, number, object_schema, read_only};
use crate::common::text::thousands;
use crate::store::document::{Blob, Content, Document};
use crate::store::{Dataset, Store};

pub(crate) use crate::common::tools::{MAX_PAGE_CHARS, READ};

/// Characters one page holds unless `length` says otherwise.
pub(crate) const DEFAULT_PAGE_CHARS: usize = 8_000;
/// Matching lines one pattern search shows (the count covers all of them).
pub(crate) const MAX_MATCHES: usize = 100;
/// A shown line is cut to this many characters.
const MAX_LINE_CHARS: usize = 400;
/// Lines of context around each match unless `context` says otherwise, and the most allowed.
const DEFAULT_CONTEXT: usize = 2;
const MAX_CONTEXT: usize = 20;
/// A pattern compiles to at most this much (the regex crate's own bound: no exponential
/// blow-up, matching is linear in the text).
const MAX_REGEX_BYTES: usize = 1 << 20;

const DESCRIPTION: &str = "Read the original of a result loom reduced (doc_<n>) or a binary it \
lifted out (blob_<n>): by characters (`offset`, `length`; default the first 8,000), by `lines` \
(\"120-180\"), or the lines matching a regex `pattern`. Documents are also tables \
doc_<n>(line_no, text) for loom_query.";

/// The definition of `loom_read`.
pub(crate) fn tool() -> Tool {
    Tool::new(
        READ,
        DESCRIPTION,
        object_schema(
            json!({
                "ref": {"type": "string"},
                "offset": {"type": "integer", "minimum": 0, "description": "In code points, from 0."},
                "length": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_CHARS},
                "lines": {"type": "string", "description": "1-based, inclusive: \"120-180\", \"42\", \"90-\"."},
                "pattern": {"type": "string", "description": "Rust regex; (?i) ignores case."},
                "context": {"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "description": "Lines around each match (default 2)."},
                "pin": {"type": "boolean", "description": "Keep it from eviction."}
            }),
            &["ref"],
        ),
    )
    .annotate(read_only())
}

/// How the call asked to read.
enum Mode {
    Chars { offset: usize, length: usize },
    Lines { first: usize, last: usize },
    Pattern { regex: regex::Regex, context: usize },
}

/// `"120-180"`, `"120"`, `"120-"` (to the end): 1-based, inclusive.
fn line_range(text: &str, total: usize) -> Result<(usize, usize), String> {
    let bad = || {
        format!(
            "`lines` must be \"first-last\" or \"n\" with 1 ≤ first ≤ last (1-based line numbers; \
             this document has {total} lines), found {text:?}"
        )
    };
    let parse = |s: &str| s.trim().parse::<usize>().map_err(|_| bad());
    let (first, last) = match text.split_once('-') {
        Some((a, b)) if b.trim().is_empty() => (parse(a)?, total),
        Some((a, b)) => (parse(a)?, parse(b)?),
        None => {
            let n = parse(text)?;
            (n, n)
        }
    };
    if first == 0 || last < first {
        return Err(bad());
    }
    if first > total {
        return Err(format!(
            "`lines` starts at line {first}, past the end: this document has {total} lines"
        ));
    }
    Ok((first, last.min(total)))
}

/// The arguments `loom_read` takes; anything else is an error rather than silently ignored.
const ARGUMENTS: &[&str] = &[
    "ref", "offset", "length", "lines", "pattern", "context", "pin",
];

fn unknown_argument(arguments: &Map<String, Value>) -> Option<String> {
    arguments
        .keys()
        .find(|k| !ARGUMENTS.contains(&k.as_str()))
        .map(|k| {
            format!(
                "unknown argument `{k}`; loom_read takes {}",
                ARGUMENTS.join(", ")
            )
        })
}

fn mode(arguments: &Map<String, Value>, document: &Document) -> Result<Mode, String> {
    let pattern = match arguments.get("pattern") {
        None | Some(Value::Null) => None,
        Some(Value::String(p)) if !p.is_empty() => Some(p.as_str()),
        Some(other) => {
            return Err(format!(
                "`pattern` must be a non-empty string, found {other}"
            ));
        }
    };
    let lines = match arguments.get("lines") {
        None | Some(Value::Null) => None,
        Some(Value::String(l)) => Some(l.as_str()),
        Some(Value::Number(n)) => {
            return line_range(&n.to_string(), document.lines())
                .map(|(first, last)| Mode::Lines { first, last });
        }
        Some(other) => {
            return Err(format!(
                "`lines` must be a string such as \"120-180\", found {other}"
            ));
        }
    };
    let offset = number(arguments, "offset")?;
    let length = number(arguments, "length")?;
    let context = number(arguments, "context")?;
    let chosen = [
        pattern.is_some(),
        lines.is_some(),
        offset.is_some() || length.is_some(),
    ];
    if chosen.iter().filter(|c| **c).count() > 1 {
        return Err("give one of `offset`/`length`, `lines` or `pattern`, not several".to_string());
    }
    if let Some(pattern) = pattern {
        // `^` and `$` are line anchors: the search is for lines, and it runs a chunk of lines
        // at a time.
        let regex = regex::RegexBuilder::new(pattern)
            .multi_line(true)
            .size_limit(MAX_REGEX_BYTES)
            .build()
            .map_err(|e| format!("`pattern` is not a valid regular expression: {e}"))?;
        let context = match context {
            Some(c) if c as usize > MAX_CONTEXT => {
                return Err(format!("`context` must be 0–{MAX_CONTEXT}, found {c}"));
            }
            Some(c) => c as usize,
            None => DEFAULT_CONTEXT,
        };
        return Ok(Mode::Pattern { regex, context });
    }
    if context.is_some() {
        return Err("`context` goes with `pattern` (lines shown around each match)".to_string());
    }
    if let Some(lines) = lines {
        let (first, last) = line_range(lines, document.lines())?;
        return Ok(Mode::Lines { first, last });
    }
    let offset = usize::try_from(offset.unwrap_or(0)).unwrap_or(usize::MAX);
    let length = match length {
        None => DEFAULT_PAGE_CHARS,
        Some(0) => {
            return Err(format!(
                "`length` must be 1–{MAX_PAGE_CHARS} characters, found 0"
            ));
        }
        Some(l) if l as usize > MAX_PAGE_CHARS => {
            return Err(format!(
                "`length` must be 1–{MAX_PAGE_CHARS} characters, found {l}"
            ));
        }
        Some(l) => l as usize,
    };
    if offset >= document.chars && !(offset == 0 && document.chars == 0) {
        return Err(format!(
            "`offset` {offset} is past the end: this document has {} characters (offsets 0–{})",
            document.chars,
            document.chars.saturating_sub(1)
        ));
    }
    Ok(Mode::Chars { offset, length })
}

/// The page and, in a second block, where it sits; `structuredContent` says the same.
fn page(reference: &str, document: &Document, offset: usize, length: usize) -> CallToolResult {
    let text = document.slice(offset, length);
    let got = if text.len() == length.min(document.chars - offset) {
        // ASCII fast path: one byte a character.
        text.len()
    } else {
        text.chars().count()
    };
    let end = offset + got;
    let mut position =
        json!({"ref": reference, "offset": offset, "length": got, "total": document.chars});
    let first_line = document.line_of(document.byte_at(offset));
    let last_line = document.line_of(
        document
            .byte_at(end)
            .saturating_sub(1)
            .max(document.byte_at(offset)),
    );
    let mut where_ = format!(
        "[loom: {reference} characters {}–{} of {} (lines {first_line}–{last_line} of {})",
        thousands(offset),
        thousands(end),
        thousands(document.chars),
        thousands(document.lines()),
    );
    if end < document.chars {
        position["nextOffset"] = json!(end);
        where_.push_str(&format!(
            "; next: loom_read(\"{reference}\", offset: {end}{})]",
            if length == DEFAULT_PAGE_CHARS {
                String::new()
            } else {
                format!(", length: {length}")
            }
        ));
    } else {
        where_.push_str("; the end]");
    }
    let mut result =
        CallToolResult::success(vec![ContentBlock::text(text), ContentBlock::text(where_)]);
    result.structured_content = Some(position);
    result
}

fn lines(reference: &str, document: &Document, first: usize, last: usize) -> CallToolResult {
    let (Some((start, _)), Some((_, end))) =
        (document.line_range(first), document.line_range(last))
    else {
        return error_result(format!(
            "{READ}: lines {first}–{last} are not in {reference}"
        ));
    };
    let offset = document.char_at(start);
    let length = document.char_at(end) - offset;
    if length > MAX_PAGE_CHARS {
        // Too long for one answer: the first page of it, and how to go on.
        return page(reference, document, offset, MAX_PAGE_CHARS);
    }
    let text = &document.text()[start..end];
    let where_ = format!(
        "[loom: {reference} lines {first}–{last} of {} (characters {}–{} of {})]",
        thousands(document.lines()),
        thousands(offset),
        thousands(offset + length),
        thousands(document.chars),
    );
    let mut result =
        CallToolResult::success(vec![ContentBlock::text(text), ContentBlock::text(where_)]);
    result.structured_content = Some(json!({
        "ref": reference, "firstLine": first, "lastLine": last, "totalLines": document.lines(),
        "offset": offset, "length": length, "total": document.chars,
    }));
    result
}

/// A line cut to [`MAX_LINE_CHARS`] around `at` (a byte offset into it, where the match is).
fn shown(line: &str, at: usize) -> String {
    if line.chars().count() <= MAX_LINE_CHARS {
        return line.to_string();
    }
    let before = line[..at.min(line.len())].chars().count();
    let skip = before.saturating_sub(MAX_LINE_CHARS / 4);
    let piece: String = line.chars().skip(skip).take(MAX_LINE_CHARS).collect();
    let rest = line.chars().count() - skip - piece.chars().count();
    format!(
        "{}{piece}{}",
        if skip > 0 { "…" } else { "" },
        if rest > 0 {
            format!("… [+{rest} chars]")
        } else {
            String::new()
        }
    )
}

/// A pattern search runs over chunks of whole lines of about this many bytes, and a longer
/// line in windows of this size, checking its deadline between them: one regular expression
/// over a 4 MB line can take half a minute, and nothing interrupts it.
const SEARCH_CHUNK_BYTES: usize = 64 * 1024;
/// How far past its window a match on a long line may reach and still be found.
const SEARCH_OVERLAP_BYTES: usize = 4 * 1024;

/// The largest char boundary of `text` at or below `at`.
fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Where the first match of `regex` on the long line `start..end` of `text` is, window by
/// window; `Err(())` when the deadline passed first. Between windows the engine's thread goes
/// to other work (see [`search`]).
async fn search_long_line(
    text: &str,
    regex: &regex::Regex,
    (start, end): (usize, usize),
    deadline: std::time::Instant,
) -> Result<Option<usize>, ()> {
    let mut window = start;
    while window < end {
        if std::time::Instant::now() > deadline {
            return Err(());
        }
        let stop = floor_boundary(
            text,
            (window + SEARCH_CHUNK_BYTES + SEARCH_OVERLAP_BYTES).min(end),
        );
        if let Some(found) = regex.find(&text[window..stop]) {
            return Ok(Some(window + found.start()));
        }
        let next = floor_boundary(text, window + SEARCH_CHUNK_BYTES);
        window = if next > window { next } else { stop };
        tokio::task::yield_now().await;
    }
    Ok(None)
}

/// A pattern search, a chunk at a time. After each chunk it lets the engine's threads run other
/// work (on two cores the engine has one thread): a long search of one client no longer keeps
/// another's trivial query waiting until the search's own deadline.
async fn search(
    reference: &str,
    document: &Document,
    regex: &regex::Regex,
    context: usize,
    deadline: std::time::Instant,
) -> CallToolResult {
    let text = document.text();
    // Lines that match, in order, each once, with where the first match sits in the line.
    let mut matched: Vec<(usize, usize)> = Vec::new();
    let mut total = 0usize;
    let mut record = |line: usize, at: usize, matched: &mut Vec<(usize, usize)>| {
        if matched.last().is_some_and(|(l, _)| *l == line) {
            return;
        }
        total += 1;
        if matched.len() < MAX_MATCHES {
            let (start, _) = document.line_range(line).unwrap_or((at, at));
            matched.push((line, at - start));
        }
    };
    // The line the search stopped at when its deadline passed.
    let mut stopped_at = None;
    let mut line = 1;
    while line <= document.lines() {
        if std::time::Instant::now() > deadline {
            stopped_at = Some(line);
            break;
        }
        let Some((start, end)) = document.line_range(line) else {
            break;
        };
        if end - start > SEARCH_CHUNK_BYTES {
            match search_long_line(text, regex, (start, end), deadline).await {
                Ok(Some(at)) => record(line, at, &mut matched),
                Ok(None) => {}
                Err(()) => {
                    stopped_at = Some(line);
                    break;
                }
            }
            line += 1;
            continue;
        }
        // Whole lines up to the chunk size (at least one), searched at once.
        let mut last = line;
        while let Some((_, next_end)) = document.line_range(last + 1) {
            if next_end - start > SEARCH_CHUNK_BYTES {
                break;
            }
            last += 1;
        }
        let chunk_end = document.line_range(last).map_or(end, |(_, e)| e);
        for found in regex.find_iter(&text[start..chunk_end]) {
            let at = start + found.start();
            record(document.line_of(at).min(last), at, &mut matched);
        }
        line = last + 1;
        tokio::task::yield_now().await;
    }
    if let Some(line) = stopped_at {
        let mut result = error_result(format!(
            "{READ}: the search for {:?} in {reference} passed queryTimeoutMs at line {} of {} \
             ({total} matching lines before it); narrow the pattern, read `lines` around what \
             you need, or filter with loom_query over {reference}(line_no, text)",
            regex.as_str(),
            thousands(line),
            thousands(document.lines())
        ));
        result.structured_content = Some(json!({
            "ref": reference, "pattern": regex.as_str(), "matches": total,
            "stoppedAtLine": line, "complete": false,
        }));
        return result;
    }
    if total == 0 {
        let mut result = CallToolResult::success(vec![ContentBlock::text(format!(
            "[loom: no line of {reference} matches {:?} ({} lines searched)]",
            regex.as_str(),
            thousands(document.lines())
        ))]);
        result.structured_content =
            Some(json!({"ref": reference, "pattern": regex.as_str(), "matches": 0, "lines": []}));
        return result;
    }
    let mut out = String::new();
    let mut printed_to = 0usize;
    for (index, (line, _)) in matched.iter().enumerate() {
        let from = line.saturating_sub(context).max(1).max(printed_to + 1);
        let to = (line + context).min(document.lines());
        if index > 0 && from > printed_to + 1 {
            out.push_str("--\n");
        }
        for n in from..=to {
            let body = document.line(n).unwrap_or_default();
            match matched.binary_search_by_key(&n, |(l, _)| *l) {
                Ok(i) => out.push_str(&format!("{n}: {}\n", shown(body, matched[i].1))),
                Err(_) => out.push_str(&format!("{n}- {}\n", shown(body, 0))),
            }
        }
        printed_to = to;
    }
    let numbers: Vec<usize> = matched.iter().map(|(l, _)| *l).collect();
    let note = if total > matched.len() {
        format!(
            "[loom: {} of {} matching lines of {reference} shown; narrow the pattern, or count and filter with loom_query over {reference}(line_no, text)]",
            matched.len(),
            thousands(total)
        )
    } else {
        format!(
            "[loom: {} matching line{} of {reference} ({} lines); `N:` marks a match, `N-` context]",
            total,
            if total == 1 { "" } else { "s" },
            thousands(document.lines())
        )
    };
    let mut result =
        CallToolResult::success(vec![ContentBlock::text(out), ContentBlock::text(note)]);
    result.structured_content = Some(json!({
        "ref": reference, "pattern": regex.as_str(), "matches": total, "lines": numbers,
    }));
    result
}

fn blob(reference: &str, blob: &Blob) -> CallToolResult {
    let data = base64::engine::general_purpose::STANDARD.encode(blob.bytes.as_slice());
    let block = if blob.mime.starts_with("image/") {
        ContentBlock::image(data, blob.mime.clone())
    } else {
        ContentBlock::resource(
            ResourceContents::blob(data, format!("loom://blob/{reference}"))
                .with_mime_type(blob.mime.clone()),
        )
    };
    CallToolResult::success(vec![block])
}

fn known(store: &Store) -> String {
    let refs: Vec<String> = store
        .list()
        .iter()
        .filter(|d| !matches!(d.content, Content::Table))
        .take(20)
        .map(|d| d.reference.clone())
        .collect();
    if refs.is_empty() {
        "loom holds no documents or blobs yet: they appear when a large result that is not a table is reduced".to_string()
    } else {
        format!("documents and blobs held: {}", refs.join(", "))
    }
}

pub(crate) async fn read(
    store: &Arc<Store>,
    arguments: &Option<Map<String, Value>>,
) -> CallToolResult {
    let empty = Map::new();
    let arguments = arguments.as_ref().unwrap_or(&empty);
    let reference = match arguments.get("ref") {
        Some(Value::String(r)) if !r.trim().is_empty() => r.trim(),
        Some(other) => {
            return error_result(format!(
                "{READ}: `ref` must be a string such as \"doc_1\", found {other}"
            ));
        }
        None => {
            return error_result(format!(
                "{READ}: missing argument `ref` (e.g. \"doc_1\"); {}",
                known(store)
            ));
        }
    };
    let Some(held): Option<Arc<Dataset>> = store.get(reference) else {
        let why = if store.was_evicted(reference) {
            format!(
                "`{reference}` was evicted to stay within memoryBudgetBytes; call the tool again to get it back"
            )
        } else {
            format!("no document or blob `{reference}`")
        };
        return error_result(format!("{READ}: {why}; {}", known(store)));
    };
    if let Some(e) = unknown_argument(arguments) {
        return error_result(format!("{READ}: {e}"));
    }
    let pin = match arguments.get("pin") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::Bool(true)) => true,
        Some(other) => {
            return error_result(format!(
                "{READ}: `pin` must be true or false, found {other}"
            ));
        }
    };
    if pin
        && !matches!(held.content, Content::Table)
        && let Err(e) = store.pin(reference)
    {
        return error_result(format!("{READ}: {e}"));
    }
    let deadline = std::time::Instant::now() + store.settings().query_timeout;
    let mut result = read_held(reference, &held, arguments, deadline).await;
    if pin && result.is_error != Some(true) {
        result.content.push(ContentBlock::text(format!(
            "[loom: {reference} is pinned: it is never evicted]"
        )));
    }
    result
}

async fn read_held(
    reference: &str,
    held: &Dataset,
    arguments: &Map<String, Value>,
    deadline: std::time::Instant,
) -> CallToolResult {
    match &held.content {
        Content::Blob(_) if arguments.keys().any(|k| k != "ref" && k != "pin") => {
            error_result(format!(
                "{READ}: `{reference}` is a blob: it is read whole, with `ref` alone (no offset, lines or pattern)"
            ))
        }
        Content::Table => error_result(format!(
            "{READ}: `{reference}` is a dataset, not a document; query it with loom_query (SELECT … FROM {reference})"
        )),
        Content::Blob(b) => blob(reference, b),
        Content::Document(document) => match mode(arguments, document) {
            Err(e) => error_result(format!("{READ}: {e}")),
            Ok(Mode::Chars { offset, length }) => page(reference, document, offset, length),
            Ok(Mode::Lines { first, last }) => lines(reference, document, first, last),
            Ok(Mode::Pattern { regex, context }) => {
                search(reference, document, &regex, context, deadline).await
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::document::DocumentKind;
    use crate::store::{Provenance, StoreSettings};

    fn store_with(text: &str) -> (Arc<Store>, String) {
        let store = Arc::new(Store::new(StoreSettings::default()).expect("store"));
        let provenance = Provenance {
            server: "s".into(),
            tool: "t".into(),
            args: json!({}),
            created_at: String::new(),
            source: "text".into(),
        };
        let doc = store
            .add_document(DocumentKind::Text, text.to_string(), provenance)
            .expect("document");
        (store, doc.reference.clone())
    }

    fn call(store: &Arc<Store>, arguments: Value) -> CallToolResult {
        futures::executor::block_on(read(store, &arguments.as_object().cloned()))
    }

    fn texts(result: &CallToolResult) -> Vec<String> {
        result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect()
    }

    fn is_error(result: &CallToolResult) -> bool {
        result.is_error == Some(true)
    }

    /// A search runs a chunk of lines, or a window of a long line, at a time: it finds what a
    /// search of the whole text finds (`^`/`$` are line anchors), also on a 4 MB line and across
    /// a window's edge, and it stops with an honest answer when its time is up.
    #[test]
    fn searches_run_in_chunks_and_stop_at_their_deadline() {
        let mut text = String::new();
        for i in 0..20_000 {
            text.push_str(&format!(
                "line {i} {}\n",
                if i % 997 == 0 { "ERROR here" } else { "ok" }
            ));
        }
        // A 4 MB line with one match straddling the edge of its first two windows.
        let edge = SEARCH_CHUNK_BYTES - 3;
        let mut long = "a".repeat(4 << 20);
        long.replace_range(edge..edge + 6, "NEEDLE");
        text.push_str(&long);
        text.push_str("\nlast ERROR line");
        let (store, doc) = store_with(&text);
        let found = call(
            &store,
            json!({"ref": doc, "pattern": "ERROR|NEEDLE", "context": 0}),
        );
        let meta = found.structured_content.clone().expect("structured");
        // Lines 1, 998, … (21 of the 20,000), the long line and the last one.
        assert_eq!(meta["matches"], 23, "{meta}");
        let lines = meta["lines"].as_array().expect("lines").clone();
        assert_eq!(lines.last(), Some(&json!(20_002)));
        assert_eq!(lines[lines.len() - 2], json!(20_001));
        let anchored = call(
            &store,
            json!({"ref": doc, "pattern": "^last", "context": 0}),
        );
        assert_eq!(
            anchored.structured_content.expect("structured")["lines"],
            json!([20_002])
        );

        // The search of a held document that cannot finish in time.
        let Some(held) = store.get(&doc) else {
            panic!("held")
        };
        let Content::Document(document) = &held.content else {
            panic!("a document")
        };
        let regex = regex::Regex::new("a[ab]{1000}[^ab]").expect("regex");
        let late = futures::executor::block_on(search(
            &doc,
            document,
            &regex,
            0,
            std::time::Instant::now(),
        ));
        assert!(is_error(&late));
        let text = texts(&late).join("");
        assert!(
            text.contains("passed queryTimeoutMs at line 1 of 20,002"),
            "{text}"
        );
        assert_eq!(
            late.structured_content.expect("structured")["complete"],
            false
        );
    }

    #[test]
    fn pages_concatenate_to_the_original_at_every_page_size() {
        // Multi-byte characters of every width, a CRLF line and a trailing newline.
        let text =
            "héllo wörld\r\n日本語のテキスト😀 and more\nz\u{301}\u{1F468}\u{200D}\u{1F469}\n";
        let (store, doc) = store_with(text);
        let total = text.chars().count();
        for length in 1..=total + 1 {
            let mut offset = 0;
            let mut joined = String::new();
            loop {
                let page = call(
                    &store,
                    json!({"ref": doc, "offset": offset, "length": length}),
                );
                assert!(!is_error(&page), "{:?}", texts(&page));
                let blocks = texts(&page);
                joined.push_str(&blocks[0]);
                let position = page.structured_content.clone().expect("position");
                assert_eq!(position["offset"], offset);
                assert_eq!(position["total"], total);
                match position.get("nextOffset").and_then(Value::as_u64) {
                    Some(next) => {
                        assert_eq!(next as usize, offset + length);
                        assert!(
                            blocks[1].contains(&format!("offset: {next}")),
                            "{}",
                            blocks[1]
                        );
                        offset = next as usize;
                    }
                    None => {
                        assert!(blocks[1].contains("the end"), "{}", blocks[1]);
                        break;
                    }
                }
            }
            assert_eq!(joined, text, "page length {length}");
        }
    }

    #[test]
    fn lines_and_patterns() {
        let text: String = (1..=300)
            .map(|n| {
                if n % 50 == 0 {
                    format!("line {n}: ERROR timeout after {n} ms")
                } else {
                    format!("line {n}: ok")
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let (store, doc) = store_with(&text);
        let range = call(&store, json!({"ref": doc, "lines": "120-122"}));
        assert_eq!(texts(&range)[0], "line 120: ok\nline 121: ok\nline 122: ok");
        let one = call(&store, json!({"ref": doc, "lines": "300"}));
        assert_eq!(texts(&one)[0], "line 300: ERROR timeout after 300 ms");
        let found = call(
            &store,
            json!({"ref": doc, "pattern": "(?i)error", "context": 1}),
        );
        let shown = &texts(&found)[0];
        assert!(
            shown.starts_with("49- line 49: ok\n50: line 50: ERROR"),
            "{shown}"
        );
        assert_eq!(found.structured_content.as_ref().expect("s")["matches"], 6);
        assert_eq!(
            found.structured_content.as_ref().expect("s")["lines"],
            json!([50, 100, 150, 200, 250, 300])
        );
        let none = call(&store, json!({"ref": doc, "pattern": "nothing here"}));
        assert!(texts(&none)[0].contains("no line"));
    }

    #[test]
    fn a_pinned_document_is_never_evicted() {
        let (store, doc) = store_with("keep me\n".repeat(100).as_str());
        let read = call(&store, json!({"ref": doc, "pin": true, "lines": "1"}));
        assert_eq!(texts(&read)[0], "keep me");
        assert_eq!(
            texts(&read).last().map(String::as_str),
            Some(format!("[loom: {doc} is pinned: it is never evicted]").as_str())
        );
        assert!(store.get(&doc).is_some_and(|d| d.pinned()));
        let bad = call(&store, json!({"ref": doc, "pin": "yes"}));
        assert!(texts(&bad)[0].contains("`pin` must be true or false"));
    }

    #[test]
    fn bad_arguments_say_what_is_valid() {
        let (store, doc) = store_with("short text\nsecond line");
        let cases = [
            (json!({"ref": "doc_99"}), "no document or blob `doc_99`"),
            (
                json!({"ref": doc, "offset": 500}),
                "past the end: this document has 22 characters (offsets 0–21)",
            ),
            (
                json!({"ref": doc, "length": -3}),
                "`length` must be a whole number of 0 or more",
            ),
            (
                json!({"ref": doc, "length": 0}),
                "`length` must be 1–100000",
            ),
            (
                json!({"ref": doc, "pattern": "(unclosed"}),
                "`pattern` is not a valid regular expression",
            ),
            (json!({"ref": doc, "lines": "9-3"}), "1 ≤ first ≤ last"),
            (
                json!({"ref": doc, "lines": "40"}),
                "past the end: this document has 2 lines",
            ),
            (
                json!({"ref": doc, "lines": "1", "offset": 3}),
                "give one of",
            ),
            (json!({}), "missing argument `ref`"),
            (
                json!({"ref": doc, "context": 3}),
                "`context` goes with `pattern`",
            ),
            (
                json!({"ref": doc, "page": 2}),
                "unknown argument `page`; loom_read takes ref, offset",
            ),
        ];
        for (arguments, says) in cases {
            let result = call(&store, arguments.clone());
            assert!(is_error(&result), "{arguments}");
            let text = &texts(&result)[0];
            assert!(text.starts_with("loom_read: "), "{text}");
            assert!(text.contains(says), "{arguments}: {text}");
        }
    }
}
