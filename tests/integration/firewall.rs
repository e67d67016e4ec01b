//! The context firewall end to end through a real loom (SPEC §19): large results that are not
//! tables are reduced, their originals kept whole and readable with `loom_read` and `loom_query`,
//! security-relevant output is never shortened in silence, `bypass` leaves results alone, and
//! hostile input never takes loom down.

use crate::common;

use common::*;
use serde_json::{Value, json};

fn loom_with(config_extra: Value) -> (tempfile::TempDir, RawClient) {
    let mut config = json!({"servers": [fixture_server("fx", &[])]});
    if let (Value::Object(config), Value::Object(extra)) = (&mut config, config_extra) {
        config.extend(extra);
    }
    let (dir, path) = write_config(&config);
    let mut loom = RawClient::loom(&path);
    loom.initialize();
    (dir, loom)
}

/// The fixture answers with exactly this result.
fn call_raw(loom: &mut RawClient, result: &Value) -> Line {
    loom.call_tool("fx_raw", json!({"json": result.to_string()}))
}

fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

fn texts(line: &Line) -> Vec<String> {
    line.value["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("no content in {:.300}", line.raw))
        .iter()
        .filter_map(|b| b["text"].as_str().map(str::to_string))
        .collect()
}

/// Every `loom_read("<ref>", offset: N, length: M)` call written in `text`.
fn read_calls(text: &str) -> Vec<(String, usize, usize)> {
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("loom_read(\"") {
        rest = &rest[at + "loom_read(\"".len()..];
        let Some(end) = rest.find('"') else { break };
        let reference = rest[..end].to_string();
        let tail = &rest[end..];
        let number = |key: &str| -> Option<usize> {
            let close = tail.find(')')?;
            let args = &tail[..close];
            let from = args.find(key)? + key.len();
            args[from..]
                .trim_start()
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        };
        if let (Some(offset), Some(length)) = (number("offset:"), number("length:")) {
            calls.push((reference, offset, length));
        }
    }
    calls
}

/// The ref a header line names as the full original.
fn original_ref(text: &str) -> String {
    let at = text
        .find("full original: loom_read(\"")
        .expect("a full-original ref")
        + 26;
    text[at..].split('"').next().expect("ref").to_string()
}

/// The whole document read back page by page.
fn read_all(loom: &mut RawClient, reference: &str) -> String {
    let mut out = String::new();
    let mut offset = 0;
    loop {
        let line = loom.call_tool(
            "loom_read",
            json!({"ref": reference, "offset": offset, "length": 100000}),
        );
        let page = texts(&line);
        out.push_str(&page[0]);
        match line.value["result"]["structuredContent"]["nextOffset"].as_u64() {
            Some(next) => offset = next as usize,
            None => return out,
        }
    }
}

fn a_log(lines: usize) -> String {
    let mut log = String::new();
    for n in 1..=lines {
        let entry = match n {
            3 => "2026-12-01T00:00:03Z ERROR db: connection refused (first failure)".to_string(),
            _ => format!(
                "2026-12-01T00:{:02}:{:02}Z INFO request {n} served in {} ms",
                n / 60 % 60,
                n % 60,
                n % 17
            ),
        };
        log.push_str(&entry);
        log.push('\n');
    }
    log.push_str("SUMMARY: 9999 requests, 1 error, exit code 1");
    log
}

#[test]
fn a_large_log_keeps_head_and_tail_and_every_cut_is_one_read_away() {
    let (_dir, mut loom) = loom_with(json!({}));
    let log = a_log(10_000);
    let line = call_raw(&mut loom, &text_result(&log));
    let shown = &texts(&line)[0];
    assert!(shown.starts_with("[loom: text reduced "), "{:.300}", shown);
    assert!(
        shown.chars().count() < 8_000,
        "within the default budget: {}",
        shown.len()
    );
    assert!(
        shown.contains("ERROR db: connection refused"),
        "the first error is kept"
    );
    assert!(
        shown.contains("SUMMARY: 9999 requests"),
        "the final summary is kept"
    );
    let reference = original_ref(shown);
    // The marker's call reads exactly what was left out.
    let calls = read_calls(shown);
    assert!(
        !calls.is_empty(),
        "a marker with its loom_read call: {shown:.2000}"
    );
    let chars: Vec<char> = log.chars().collect();
    for (doc, offset, length) in calls {
        assert_eq!(
            doc, reference,
            "the cut reads from the original (no stage changed it)"
        );
        let line = loom.call_tool(
            "loom_read",
            json!({"ref": doc, "offset": offset, "length": length}),
        );
        let want: String = chars.iter().skip(offset).take(length).collect();
        assert_eq!(texts(&line)[0], want);
    }
    // The whole original, exactly.
    assert_eq!(read_all(&mut loom, &reference), log);
    // And as a table.
    let counted = query(
        &mut loom,
        &format!(
            "SELECT count(*) AS n, max(line_no) AS last FROM {reference} WHERE text LIKE '%ERROR%'"
        ),
    );
    assert_eq!(counted["rows"][0]["n"], 1, "{counted}");
    let listed = loom.call_tool("loom_list_datasets", json!({}));
    let entry = listed.value["result"]["structuredContent"]["datasets"]
        .as_array()
        .expect("datasets")
        .iter()
        .find(|d| d["ref"] == reference.as_str())
        .cloned()
        .expect("the document is listed");
    assert_eq!(entry["kind"], "document");
    assert_eq!(entry["documentKind"], "text");
    assert_eq!(entry["rows"], 10_001);
    // Pattern search over it.
    let found = loom.call_tool(
        "loom_read",
        json!({"ref": reference, "pattern": "ERROR|SUMMARY"}),
    );
    assert_eq!(
        found.value["result"]["structuredContent"]["lines"],
        json!([3, 10001])
    );
}

#[test]
fn errors_are_never_shortened_in_silence() {
    let (_dir, mut loom) = loom_with(json!({}));
    // Under the hard limit: byte-identical, however large.
    let message = format!("permission denied: {}", "detail ".repeat(4_000));
    let result = json!({"content": [{"type": "text", "text": message}], "isError": true});
    let line = call_raw(&mut loom, &result);
    assert_eq!(result_bytes(&line), result.to_string());
    // Over it: the head, the marker, and the original one call away.
    let huge = format!(
        "Traceback (most recent call last):\n{}",
        "  File \"x.py\", line 1, in <module>\n".repeat(3_000)
    );
    let result = json!({"content": [{"type": "text", "text": huge}], "isError": true});
    let line = call_raw(&mut loom, &result);
    assert_eq!(line.value["result"]["isError"], true);
    let shown = &texts(&line)[0];
    assert!(
        shown.starts_with("[loom: security-relevant output cut at the hard limit"),
        "{:.200}",
        shown
    );
    assert!(shown.contains("Traceback (most recent call last):"));
    assert!(shown.chars().count() <= 50_300);
    assert_eq!(read_all(&mut loom, &original_ref(shown)), huge);
}

#[test]
fn bypass_leaves_results_and_output_schemas_alone() {
    let (_dir, mut loom) = loom_with(json!({"compression": {"perTool": {
        "fx/raw": {"bypass": true}, "fx_structured": {"bypass": true}}}}));
    let result = text_result(&a_log(5_000));
    let line = call_raw(&mut loom, &result);
    assert_eq!(
        result_bytes(&line),
        result.to_string(),
        "bypassed: bytes as sent"
    );
    let listed = loom.call("tools/list", json!({}));
    let tools = listed.value["result"]["tools"].as_array().expect("tools");
    let structured = tools
        .iter()
        .find(|t| t["name"] == "fx_structured")
        .expect("tool");
    assert!(
        structured.get("outputSchema").is_some(),
        "bypassed: schema kept"
    );
}

#[test]
fn image_blocks_keep_their_positions() {
    let (_dir, mut loom) = loom_with(json!({}));
    let image = json!({"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"});
    // A block under the budget is left as it is, and nothing is held for it.
    let under_budget = a_log(40);
    let result = json!({"content": [image, {"type": "text", "text": a_log(5_000)},
                                    {"type": "text", "text": "short"},
                                    {"type": "text", "text": under_budget}]});
    let line = call_raw(&mut loom, &result);
    let content = line.value["result"]["content"].as_array().expect("content");
    assert_eq!(content.len(), 4);
    assert_eq!(content[0], image);
    let reduced = content[1]["text"].as_str().expect("text");
    assert!(reduced.starts_with("[loom: text reduced"), "{reduced:.200}");
    assert_eq!(content[2]["text"], "short");
    assert_eq!(content[3]["text"], under_budget.as_str());
    let listed = loom.call_tool("loom_list_datasets", json!({}));
    let held = listed.value["result"]["structuredContent"]["datasets"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        held.len(),
        1,
        "one document, for the reduced block only: {held:?}"
    );
}

#[test]
fn small_results_pass_byte_identical() {
    let (_dir, mut loom) = loom_with(json!({}));
    let result = text_result(&a_log(20));
    let line = call_raw(&mut loom, &result);
    assert_eq!(result_bytes(&line), result.to_string());
}

#[test]
fn loom_read_on_a_dataset_or_an_unknown_ref_says_what_to_do() {
    let (_dir, mut loom) = loom_with(json!({}));
    let line = loom.call_tool("loom_read", json!({"ref": "doc_42"}));
    assert_eq!(line.value["result"]["isError"], true);
    assert!(first_text(&line).contains("no document or blob `doc_42`"));
    let rows = loom.call_tool("fx_rows", json!({"count": 500}));
    let reference = envelope(&rows)["ref"].as_str().expect("ref").to_string();
    let line = loom.call_tool("loom_read", json!({"ref": reference}));
    assert!(first_text(&line).contains("is a dataset, not a document; query it with loom_query"));
}

#[test]
fn a_json_document_becomes_a_valid_summary_whose_folds_are_datasets() {
    let (_dir, mut loom) = loom_with(json!({}));
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/json/npm_react.json");
    let document = std::fs::read_to_string(path).expect("testdata");
    let line = call_raw(&mut loom, &text_result(&document));
    let shown = &texts(&line)[0];
    let (header, summary) = shown.split_once('\n').expect("a header line");
    assert!(
        header.starts_with("[loom: json reduced 335,660 → "),
        "{header}"
    );
    let summary: Value = serde_json::from_str(summary).expect("the summary is valid JSON");
    let original: Value = serde_json::from_str(&document).expect("json");
    for key in original.as_object().expect("object").keys() {
        assert!(summary.get(key).is_some(), "top-level `{key}` kept");
    }
    assert!(
        shown.chars().count() * 20 < document.chars().count(),
        "≥ 95% smaller"
    );
    // The folded `versions` array is a dataset holding every version.
    let fold = summary["versions"]
        .as_array()
        .and_then(|a| a.last())
        .and_then(|m| m["…"].as_str())
        .expect("a fold marker")
        .to_string();
    let dataset = fold
        .split_whitespace()
        .find(|w| w.starts_with("ds_"))
        .expect("a dataset ref");
    let counted = query(&mut loom, &format!("SELECT count(*) AS n FROM {dataset}"));
    assert_eq!(
        counted["rows"][0]["n"],
        original["versions"].as_array().expect("versions").len()
    );
    assert_eq!(read_all(&mut loom, &original_ref(shown)), document);
}

#[test]
fn base64_is_lifted_out_and_read_back_as_an_image() {
    use base64::Engine as _;
    let (_dir, mut loom) = loom_with(json!({}));
    // A PNG signature then bytes that look like compressed data.
    let mut png = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
    png.extend((0u32..6000).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
    let encoded = base64::engine::general_purpose::STANDARD.encode(&png);
    let text = format!(
        "Screenshot taken.\n![shot](data:image/png;base64,{encoded})\n{}",
        "The page shows the settings panel.\n".repeat(50)
    );
    let line = call_raw(&mut loom, &text_result(&text));
    let shown = &texts(&line)[0];
    assert!(
        shown.contains("1 base64 blob (6,008 bytes) lifted out"),
        "{shown:.400}"
    );
    assert!(
        !shown.contains(&encoded[..200]),
        "the base64 is gone from the text"
    );
    let blob = shown
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .find(|w| w.starts_with("blob_"))
        .expect("a blob ref")
        .to_string();
    let read = loom.call_tool("loom_read", json!({"ref": blob}));
    let block = &read.value["result"]["content"][0];
    assert_eq!(block["type"], "image");
    assert_eq!(block["mimeType"], "image/png");
    assert_eq!(block["data"], encoded.as_str());
}

#[test]
fn hostile_results_never_take_loom_down() {
    let (_dir, mut loom) = loom_with(json!({}));
    let deep_html = format!(
        "<!DOCTYPE html><html><body>{}text{}</body></html>",
        "<div>".repeat(100_000),
        "</div>".repeat(100_000)
    );
    let truncated_html = format!(
        "<!DOCTYPE html><html><head><title>t</title></head><body><article><p>{}",
        "An unfinished paragraph with <b>bold and <i>italic ".repeat(2_000)
    );
    let deep_json = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    let many_keys = format!(
        "{{{}}}",
        (0..200_000)
            .map(|i| format!("\"k{i}\": {i}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let garbage: String = (0u32..400_000)
        .map(|i| {
            char::from_u32(0x20 + (i.wrapping_mul(2_654_435_761) >> 7) % 0x2F00).unwrap_or('?')
        })
        .collect();
    let bad_base64 = format!(
        "data:image/png;base64,{}!!!{}",
        "QUJD".repeat(5_000),
        "x".repeat(20_000)
    );
    for (name, text) in [
        ("100,000 nested divs", deep_html),
        ("truncated HTML", truncated_html),
        ("100,000-deep JSON arrays", deep_json),
        ("an object of 200,000 keys", many_keys),
        ("binary-looking garbage", garbage),
        ("a data URI that does not decode", bad_base64),
    ] {
        let started = std::time::Instant::now();
        let line = call_raw(&mut loom, &text_result(&text));
        eprintln!("{name}: answered in {:?}", started.elapsed());
        let result = &line.value["result"];
        assert!(
            result.get("content").is_some(),
            "{name}: answered with a result: {:.300}",
            line.raw
        );
        // Either reduced (a header naming the original) or passed through as sent.
        let shown = &texts(&line)[0];
        if shown.starts_with("[loom: ") {
            assert_eq!(
                read_all(&mut loom, &original_ref(shown)),
                text,
                "{name}: original kept"
            );
        } else {
            assert_eq!(shown, &text, "{name}: passed through");
        }
    }
    let echo = loom.call_tool("fx_echo", json!({"text": "still here"}));
    assert_eq!(first_text(&echo), "still here");
}

#[test]
fn a_page_becomes_its_main_content_as_markdown_and_its_tables_datasets() {
    let (_dir, mut loom) = loom_with(json!({}));
    let pages = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/html/pages/");
    let page = std::fs::read_to_string(format!("{pages}py_library_datetime.html")).expect("page");
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{pages}py_library_datetime.expect.json"))
            .expect("expect"),
    )
    .expect("json");
    let line = call_raw(&mut loom, &text_result(&page));
    let shown = &texts(&line)[0];
    let header = shown.lines().next().expect("header");
    assert!(
        header.starts_with("[loom: page reduced 421,600 → "),
        "{header}"
    );
    assert!(header.contains("main content as Markdown"), "{header}");
    assert!(header.contains("(head kept)"), "{header}");
    assert!(shown.starts_with(&format!(
        "{header}\n# `datetime` — Basic date and time types"
    )));
    // The whole Markdown (before the cut) keeps every sentence picked from the article, and
    // none of the page's chrome.
    let whole_at = header
        .find("the whole reduced text: loom_read(\"")
        .expect("reduced doc")
        + 35;
    let whole_ref = header[whole_at..]
        .split('"')
        .next()
        .expect("ref")
        .to_string();
    let markdown = read_all(&mut loom, &whole_ref);
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let flat = squash(&markdown.replace(['*', '`', '\\'], ""));
    for sentence in expected["sentences"].as_array().expect("sentences") {
        let sentence = squash(sentence.as_str().expect("text"));
        assert!(flat.contains(&sentence), "sentence lost: {sentence}");
    }
    for chrome in expected["absent"].as_array().expect("absent") {
        let chrome = chrome.as_str().expect("text");
        assert!(!markdown.contains(chrome), "chrome kept: {chrome}");
    }
    // The page's data tables are datasets, named in the header and in the Markdown.
    let table = header
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .find(|w| w.starts_with("ds_fx_raw_table"))
        .expect("a table dataset in the header")
        .to_string();
    assert!(markdown.contains(&format!("[loom: this table is dataset {table} (")));
    let counted = query(&mut loom, &format!("SELECT count(*) AS n FROM {table}"));
    assert!(
        counted["rows"][0]["n"].as_u64().is_some_and(|n| n >= 2),
        "{counted}"
    );
    // And the original, exactly.
    assert_eq!(read_all(&mut loom, &original_ref(shown)), page);
}
