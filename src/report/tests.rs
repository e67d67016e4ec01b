use super::*;

fn sized(chars: u64) -> Size {
    Size::of(&"x".repeat(chars as usize))
}

#[test]
fn sizes_count_code_points_and_estimate_tokens() {
    assert_eq!(Size::of("").chars, 0);
    assert_eq!(Size::of("héllo wörld").chars, 11);
    assert_eq!(Size::of("abcdefgh").tokens, 2);
    assert_eq!(count_chars("日本語"), 3);
}

#[test]
fn figures_add_up_and_loom_traffic_is_subtracted() {
    let stats = SessionStats::new();
    stats.exposed(65, sized(48_000));
    stats.listed(12, sized(5_000));
    stats.listed(14, sized(5_900));
    stats.called(
        "github/list_issues",
        Handling::Table,
        sized(100_000),
        sized(2_000),
    );
    stats.called(
        "github/list_issues",
        Handling::Table,
        sized(50_000),
        sized(1_900),
    );
    stats.called(
        "fetch/fetch",
        Handling::Document,
        sized(40_000),
        sized(7_000),
    );
    stats.called("time/now", Handling::PassedThrough, sized(80), sized(80));
    stats.own_call("loom_query", sized(1_000));
    stats.own_call("loom_read", sized(8_000));
    stats.own_call("loom_query", sized(500));
    let r = stats.report(Held {
        datasets: 2,
        documents: 1,
        blobs: 0,
        bytes: 1234,
    });
    assert_eq!(r.tools.listings, 2);
    assert_eq!((r.tools.direct_tools, r.tools.seen_tools), (65, 14));
    assert_eq!(r.tools.saved_per_listing.chars, 48_000 - 5_900);
    assert_eq!(r.calls.total, 4);
    assert_eq!(
        (r.calls.tables, r.calls.documents, r.calls.passed_through),
        (2, 1, 1)
    );
    assert_eq!(r.calls.before.chars, 190_080);
    assert_eq!(r.calls.after.chars, 10_980);
    assert_eq!((r.own.calls, r.own.queries, r.own.reads), (3, 2, 1));
    assert_eq!(r.own.answers.chars, 9_500);
    assert_eq!(r.output_saved.chars, 190_080 - 10_980 - 9_500);
    assert_eq!(
        r.output_saved.tokens,
        r.calls.before.tokens as i64 - r.calls.after.tokens as i64 - r.own.answers.tokens as i64
    );
    // Passed-through tools saved nothing and are not "top".
    let top: Vec<&str> = r.top_tools.iter().map(|t| t.tool.as_str()).collect();
    assert_eq!(top, ["github/list_issues", "fetch/fetch"]);
    assert_eq!(r.top_tools[0].saved.chars, 146_100);

    let md = markdown(&r);
    assert!(md.contains("| calls | 4 |"), "{md}");
    assert!(md.contains("**estimates**"), "{md}");
    assert!(md.contains("`github/list_issues`"), "{md}");
    let json: serde_json::Value = serde_json::from_str(&r.json()).expect("valid JSON");
    assert_eq!(json["calls"]["total"], 4);
    assert_eq!(json["outputSaved"]["chars"], 169_600);
    assert_eq!(json["held"]["bytes"], 1234);
    let short = stderr_summary(&r);
    assert!(
        short.contains("4 (2 as tables, 1 reduced as documents, 1 passed through)"),
        "{short}"
    );
}

#[test]
fn a_session_that_cost_more_than_it_saved_says_so() {
    let stats = SessionStats::new();
    stats.called("a/b", Handling::Table, sized(10_000), sized(2_000));
    stats.own_call("loom_read", sized(20_000));
    let r = stats.report(Held::default());
    assert_eq!(r.output_saved.chars, -12_000);
    assert!(stderr_summary(&r).contains("-12,000 chars"));
}

#[test]
fn the_report_file_is_json_or_markdown_by_its_name() {
    let dir = tempfile::tempdir().expect("temp dir");
    let stats = SessionStats::new();
    stats.called("a/b", Handling::Document, sized(10_000), sized(2_000));
    let r = stats.report(Held::default());
    let json_path = dir.path().join("deep/report.json");
    write(&r, &json_path).expect("written");
    let parsed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).expect("read")).expect("json");
    assert_eq!(parsed["calls"]["documents"], 1);
    let md_path = dir.path().join("report.md");
    write(&r, &md_path).expect("written");
    assert!(
        std::fs::read_to_string(&md_path)
            .expect("read")
            .starts_with("# loom session report")
    );
}
