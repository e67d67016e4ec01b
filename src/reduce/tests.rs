//! The model summary stage's side of the reduction (SPEC §19.9): what is handed to the gateway,
//! what a summary replaces, what is let go.

use serde_json::json;

use super::*;
use crate::store::StoreSettings;

fn origin() -> Origin {
    Origin {
        server: "logs".into(),
        tool: "tail".into(),
        args: json!({}),
    }
}

fn log(lines: usize) -> String {
    (1..=lines)
        .map(|i| {
            if i == 4211 {
                format!(
                    "2026-12-03T10:00:{:02}Z ERROR disk /var/data full (line {i})\n",
                    i % 60
                )
            } else {
                format!(
                    "2026-12-03T10:00:{:02}Z INFO request {i} served in 12 ms\n",
                    i % 60
                )
            }
        })
        .collect()
}

fn policy(llm_summary: bool) -> Policy {
    Policy {
        llm_summary,
        ..Policy::default()
    }
}

fn result_of(text: &str) -> String {
    json!({"content": [{"type": "text", "text": text}]}).to_string()
}

#[test]
fn an_over_budget_text_is_offered_with_its_cut_as_the_fallback() {
    let store = Store::new(StoreSettings::default()).expect("store");
    let text = log(6000);
    let mut reduction = reduce(&result_of(&text), &origin(), &store, &policy(true))
        .expect("reduced")
        .expect("something to do");
    assert_eq!(reduction.summarizable.len(), 1);
    let block = &mut reduction.summarizable[0];
    assert_eq!(block.budget_chars(), 7000);
    // The model reads the text before the cut, itself cut (head and tail, as a log) past the
    // input limit.
    let (input, cut) = block.take_input(120_000);
    assert_eq!(cut.map(|c| c.total_chars), Some(text.chars().count()));
    assert!(input.chars().count() <= 120_000);
    assert!(input.starts_with("2026-12-03T10:00:01Z INFO request 1 served"));
    assert!(input.trim_end().ends_with("request 6000 served in 12 ms"));
    assert!(
        input.contains("characters (lines"),
        "the marker says what was left out"
    );

    // Over the budget: no.
    assert_eq!(block.compose(&"x".repeat(7001), "m"), None);
    assert_eq!(block.compose("   ", "m"), None);
    let composed = block
        .compose(
            "6,000 lines; ERROR at line 4211: disk /var/data full",
            "acme/small-1",
        )
        .expect("fits");
    let header = composed.lines().next().expect("a header");
    assert!(
        header.starts_with("[loom: text summarised by the model \"acme/small-1\""),
        "{header}"
    );
    assert!(header.contains("loom_read(\"doc_"), "{header}");
    // The text's own characters: the head and the tail around loom's marker line.
    let marker_at = input.find("[… ").expect("a marker");
    let tail_at = marker_at + input[marker_at..].find('\n').expect("a line") + 1;
    let own = input[..marker_at].chars().count() + input[tail_at..].chars().count();
    assert!(text.starts_with(&input[..marker_at]) && text.ends_with(&input[tail_at..]));
    assert_eq!(cut.map(|c| c.sent_chars), Some(own));
    let read = format!(
        "the model read {} of its {} chars",
        crate::common::text::thousands(own),
        crate::common::text::thousands(text.chars().count())
    );
    assert!(header.contains(&read), "{header}");
    assert!(composed.ends_with("\n6,000 lines; ERROR at line 4211: disk /var/data full"));

    reduction.summarized(0, composed.clone());
    let value = reduction.finish(&store).expect("changed");
    assert_eq!(value["content"][0]["text"], composed.as_str());
    // The original stays readable; nothing the cut alone needed is held.
    let documents: Vec<_> = store.list();
    assert_eq!(documents.len(), 1, "only the original: {documents:?}");
    assert_eq!(documents[0].provenance.source, "text");
}

#[test]
fn without_a_summary_the_cut_text_answers() {
    let store = Store::new(StoreSettings::default()).expect("store");
    let text = log(6000);
    let with = reduce(&result_of(&text), &origin(), &store, &policy(true))
        .expect("reduced")
        .expect("something");
    let fallback = with.finish(&store).expect("the cut");
    let store2 = Store::new(StoreSettings::default()).expect("store");
    let without = reduce(&result_of(&text), &origin(), &store2, &policy(false))
        .expect("reduced")
        .expect("cut");
    assert!(
        without.summarizable.is_empty(),
        "off unless the policy says so"
    );
    assert_eq!(fallback, without.finish(&store2).expect("cut"));
}

#[test]
fn a_text_left_whole_by_the_stages_holds_its_original_only_for_the_summary() {
    // No cut (truncate off) and nothing else to do: the result would pass through as sent.
    let store = Store::new(StoreSettings::default()).expect("store");
    let text = log(3000);
    let no_cut = Policy {
        truncate: false,
        ..policy(true)
    };
    let reduction = reduce(&result_of(&text), &origin(), &store, &no_cut)
        .expect("reduced")
        .expect("a summary may be made");
    assert_eq!(
        store.list().len(),
        1,
        "the original, for the summary's pointer"
    );
    assert_eq!(reduction.finish(&store), None, "no summary: as sent");
    assert!(store.list().is_empty(), "and nothing held");

    // With a summary: the original stays, for its pointer.
    let mut reduction = reduce(&result_of(&text), &origin(), &store, &no_cut)
        .expect("reduced")
        .expect("a summary may be made");
    let (input, cut) = reduction.summarizable[0].take_input(1_000_000);
    assert_eq!(
        (input, cut),
        (text.clone(), None),
        "short enough: sent whole"
    );
    let composed = reduction.summarizable[0]
        .compose("3,000 lines, all INFO", "m")
        .expect("fits");
    reduction.summarized(0, composed.clone());
    let value = reduction.finish(&store).expect("changed");
    assert_eq!(value["content"][0]["text"], composed.as_str());
    assert_eq!(store.list().len(), 1, "the original");
}

#[test]
fn a_summary_never_makes_a_block_longer_than_it_was() {
    // Just over the budget, left as sent by the cut rule (the header would eat the saving).
    let store = Store::new(StoreSettings::default()).expect("store");
    let text: String = log(200).chars().take(7_050).collect();
    let reduction = reduce(&result_of(&text), &origin(), &store, &policy(true))
        .expect("reduced")
        .expect("a summary may be made");
    let block = &reduction.summarizable[0];
    assert_eq!(
        block.compose(&"s".repeat(6_990), "m"),
        None,
        "longer with its header"
    );
    assert!(block.compose("200 lines of INFO", "m").is_some());
}

#[test]
fn at_most_four_blocks_of_one_result_go_to_the_model() {
    let store = Store::new(StoreSettings::default()).expect("store");
    let blocks: Vec<_> = (0..6)
        .map(|i| json!({"type": "text", "text": format!("block {i}\n{}", log(3000))}))
        .collect();
    let raw = json!({"content": blocks}).to_string();
    let reduction = reduce(&raw, &origin(), &store, &policy(true))
        .expect("reduced")
        .expect("something");
    assert_eq!(reduction.summarizable.len(), MAX_SUMMARIES_PER_RESULT);
    let value = reduction.finish(&store).expect("the cuts");
    let cut = value["content"].as_array().expect("blocks");
    assert_eq!(cut.len(), 6);
    assert!(cut.iter().all(|b| {
        b["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("[loom: text reduced"))
    }));
}

#[test]
fn errors_and_texts_within_the_budget_are_never_offered() {
    let store = Store::new(StoreSettings::default()).expect("store");
    let error = json!({"isError": true, "content": [{"type": "text", "text": log(6000)}]});
    let reduction = reduce(&error.to_string(), &origin(), &store, &policy(true)).expect("ok");
    assert!(reduction.is_none_or(|r| r.summarizable.is_empty()));
    let denial = format!("Permission denied: /etc/shadow\n{}", log(3000));
    let reduction = reduce(&result_of(&denial), &origin(), &store, &policy(true)).expect("ok");
    assert!(reduction.is_none_or(|r| r.summarizable.is_empty()));
    let small = log(50);
    let reduction = reduce(&result_of(&small), &origin(), &store, &policy(true)).expect("ok");
    assert!(reduction.is_none_or(|r| r.summarizable.is_empty()));
}

fn header(reduction: Reduction) -> String {
    let result = reduction.result;
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    text.lines().next().unwrap_or_default().to_string()
}

fn page(paragraphs: usize) -> String {
    let body: String = (0..paragraphs)
        .map(|i| format!("<p>Paragraph {i} of the article, with a sentence.</p>"))
        .collect();
    format!("<!doctype html><html><body><main>{body}</main></body></html>")
}

/// Issue 35: a page of thousands of attributes per element kept a blocking thread busy for
/// 88 s. It is bounded before the parser runs: its text, under the default deadline.
#[test]
fn a_page_of_attribute_heavy_elements_is_reduced_to_its_text() {
    let store = Store::new(StoreSettings::default()).expect("store");
    let attributes: String = (0..2_000).map(|i| format!(" data-a{i}=\"v\"")).collect();
    let html = format!(
        "<!doctype html><html><body>{}</body></html>",
        (0..50)
            .map(|i| format!("<div{attributes}>Paragraph {i} stays.</div>"))
            .collect::<String>()
    );
    let reduction = reduce(&result_of(&html), &origin(), &store, &Policy::default())
        .expect("reduced")
        .expect("something to do");
    let text = reduction.result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        header(reduction).contains("its text (markup too costly to render)"),
        "{text}"
    );
    assert!(text.contains("Paragraph 0 stays.") && text.contains("Paragraph 49 stays."));
}

/// Past the deadline each stage takes its cheapest path; the budget cut still runs.
#[test]
fn past_the_deadline_a_page_is_its_text_and_json_is_only_cut() {
    let store = Store::new(StoreSettings::default()).expect("store");
    let passed = Interrupt::at(std::time::Instant::now());
    let reduction = reduce_with(
        &result_of(&page(400)),
        &origin(),
        &store,
        &policy(false),
        &passed,
    )
    .expect("reduced")
    .expect("something to do");
    let line = header(reduction);
    assert!(
        line.contains("its text (the page took too long to render)"),
        "{line}"
    );
    assert!(line.contains("cut to 7,000 chars (head kept)"), "{line}");

    let json = serde_json::to_string(
        &(0..2_000)
            .map(|i| json!({"id": i, "name": format!("item {i}"), "tags": ["a", "b"]}))
            .collect::<Vec<_>>(),
    )
    .unwrap_or_default();
    let summarised = reduce(&result_of(&json), &origin(), &store, &policy(false))
        .expect("reduced")
        .expect("something to do");
    assert!(header(summarised).contains("JSON summarised by structure"));
    let cut = reduce_with(
        &result_of(&json),
        &origin(),
        &store,
        &policy(false),
        &passed,
    )
    .expect("reduced")
    .expect("something to do");
    let line = header(cut);
    assert!(!line.contains("JSON summarised"), "{line}");
    assert!(
        line.contains("cut to 7,000 chars (head and tail kept)"),
        "{line}"
    );
}

/// A cancelled reduction stops, fails (the original passes through) and holds nothing.
#[test]
fn a_cancelled_reduction_stops_and_lets_go_of_what_it_held() {
    let store = Store::new(StoreSettings::default()).expect("store");
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let cancelled = Interrupt::none().with_cancel(flag);
    for text in [page(400), log(6000)] {
        let outcome = reduce_with(
            &result_of(&text),
            &origin(),
            &store,
            &policy(true),
            &cancelled,
        );
        assert_eq!(
            outcome.map(|r| r.is_some()),
            Err(interrupt::CANCELLED.to_string())
        );
        assert!(store.list().is_empty(), "nothing held");
    }
}

/// Issue 35: a page of 40,000 data tables took 81 s, each table's placeholder filled by a pass
/// over the whole Markdown and every table made a dataset. Now at most
/// [`MAX_DATASETS_PER_RESULT`] become datasets (the first ones, in page order, each named
/// right below its table); the others stay Markdown tables and the header counts them; the whole
/// reduced text keeps every table, and the original is kept whole.
#[test]
fn a_page_of_forty_thousand_tables_makes_at_most_the_capped_datasets() {
    use crate::store::document::Content;
    let store = Store::new(StoreSettings::default()).expect("store");
    let tables: String = crate::common::hostile::many_tables(40_000);
    // Text on the page shaped like loom's placeholder is the page's text, left alone.
    let html = format!(
        "<!doctype html><html><body><main><h1>Tables</h1><p>{{loom-table-0}} is text.</p>\
         {tables}</main></body></html>"
    );
    let reduction = reduce_with(
        &result_of(&html),
        &origin(),
        &store,
        &Policy::default(),
        &Interrupt::none(),
    )
    .expect("reduced")
    .expect("something to do");
    let line = header(reduction);
    assert!(
        line.contains(&format!(
            "{MAX_DATASETS_PER_RESULT} tables as datasets ds_logs_tail_table1_"
        )) && line.contains(&format!(
            "39,968 more tables as Markdown only (at most {MAX_DATASETS_PER_RESULT} datasets \
             of one page)"
        )),
        "{line}"
    );
    let held = store.list();
    let datasets: Vec<_> = held
        .iter()
        .filter(|d| matches!(d.content, Content::Table))
        .collect();
    assert_eq!(datasets.len(), MAX_DATASETS_PER_RESULT);
    for (k, dataset) in (1..).zip(&datasets) {
        let named = format!("ds_logs_tail_table{k}_");
        assert!(
            dataset.reference.starts_with(&named),
            "{}",
            dataset.reference
        );
    }
    assert!(datasets.iter().all(|d| d.rows == 2));
    // The whole reduced text: every table, each dataset named right below its own table, no
    // placeholder left, the page's look-alike as it was.
    let reduced = held
        .iter()
        .find_map(|d| match &d.content {
            Content::Document(doc) if d.provenance.source == "reduced" => {
                Some(doc.text().to_string())
            }
            _ => None,
        })
        .expect("the whole reduced text is kept");
    assert_eq!(
        reduced.matches("[loom: this table is dataset ").count(),
        MAX_DATASETS_PER_RESULT
    );
    for (i, dataset) in datasets.iter().enumerate() {
        let named = reduced
            .find(&format!("dataset {} (2 rows)", dataset.reference))
            .expect("named");
        let own = reduced.find(&format!("| {i} | b{i} |")).expect("its table");
        let next = reduced
            .find(&format!("| {} | a{} |", i + 1, i + 1))
            .expect("the next table");
        assert!(own < named && named < next, "table {i}");
    }
    assert!(reduced.contains("| 39999 | b39999 |"));
    assert_eq!(reduced.matches("{loom-table-").count(), 1);
    assert!(reduced.contains("{loom-table-0} is text."));
    let original = held.iter().find_map(|d| match &d.content {
        Content::Document(doc) if d.provenance.source == "page" => Some(doc.text().len()),
        _ => None,
    });
    assert_eq!(original, Some(html.len()), "the original is kept whole");
}

/// Placeholders are filled in one pass; what only starts like one is copied as it is.
#[test]
fn placeholders_are_filled_in_one_pass() {
    let text = "a {p-0} b {p-x} c {p-12 d {p-1}{p-1} e {p-";
    let filled = fill_placeholders(text, "{p-", |k| format!("<{k}>"));
    assert_eq!(filled, "a <0> b {p-x} c {p-12 d <1><1> e {p-");
}
