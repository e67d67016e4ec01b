use super::*;
use crate::store::StoreSettings;

fn store() -> Arc<Store> {
    Arc::new(Store::new(StoreSettings::default()).expect("store"))
}

fn origin() -> Origin {
    Origin {
        server: "fx".into(),
        tool: "rows".into(),
        args: json!({"count": 1000}),
    }
}

fn rows_json(n: usize) -> String {
    let rows: Vec<Value> = (0..n)
        .map(|i| {
            let plan = ["free", "pro", "team"][i % 3];
            json!({"id": i, "name": format!("user-{i}"), "plan": plan,
                   "score": i as f64 * 1.5, "active": i % 2 == 0, "created": "2024-01-01T00:00:00Z"})
        })
        .collect();
    serde_json::to_string(&rows).expect("json")
}

fn raw(value: Value) -> Box<RawValue> {
    RawValue::from_string(value.to_string()).expect("raw")
}

fn replaced(outcome: Outcome) -> Value {
    match outcome {
        Outcome::Replaced(value) => value,
        Outcome::Reduced(value) => panic!("reduced as a document: {value}"),
        Outcome::PassThrough(_, why) => panic!("passed through: {why}"),
        Outcome::Spliced(raw, _) => panic!("spliced: {}", raw.get()),
        Outcome::Summarize(_) => panic!("sent to a model"),
    }
}

#[tokio::test]
async fn a_large_json_text_result_becomes_an_envelope_and_a_dataset() {
    let store = store();
    let result = raw(json!({"content": [{"type": "text", "text": rows_json(1000)}]}));
    let original = result.get().len();
    let value = replaced(intercept(
        result,
        &origin(),
        &store,
        2000,
        &crate::common::policy::Policy::tables_only(),
    ));
    let envelope = &value["structuredContent"];
    assert_eq!(envelope["kind"], "loom_dataset_ref");
    assert_eq!(envelope["rows"], 1000);
    assert_eq!(envelope["provenance"]["source"], "json_text");
    assert_eq!(envelope["joinHints"], json!([]));
    let text = value["content"][0]["text"].as_str().expect("text");
    assert_eq!(
        serde_json::from_str::<Value>(text).expect("json"),
        *envelope
    );
    assert!(text.len() * 10 < original, "{} vs {original}", text.len());
    assert!(
        text.chars().count() <= crate::envelope::TARGET_CHARS,
        "{text}"
    );
    let reference = envelope["ref"].as_str().expect("ref");
    let out = store
        .query(&format!("SELECT count(*), sum(id) FROM {reference}"))
        .await
        .expect("query");
    assert_eq!(out.rows, 1);
    // Typed sample values.
    assert!(envelope["sample"][0]["id"].is_number(), "{envelope}");
    assert_eq!(envelope["sample"][0]["created"], "2024-01-01T00:00:00Z");
}

#[tokio::test]
async fn several_tables_in_structured_content_with_context() {
    let store = store();
    let rows: Value = serde_json::from_str(&rows_json(300)).expect("rows");
    let result = raw(json!({
        "content": [{"type": "text", "text": "short summary"}],
        "structuredContent": {"entities": rows, "relations": rows, "total": 600, "hasMore": false}
    }));
    let value = replaced(intercept(
        result,
        &origin(),
        &store,
        2000,
        &crate::common::policy::Policy::tables_only(),
    ));
    let envelope = &value["structuredContent"];
    assert_eq!(
        envelope["datasets"].as_array().map(Vec::len),
        Some(2),
        "{envelope}"
    );
    assert_eq!(envelope["context"]["total"], 600);
    assert_eq!(envelope["context"]["hasMore"], false);
    assert_eq!(envelope["context"]["text0"], "short summary");
    assert_eq!(envelope["provenance"]["source"], "structuredContent");
    assert_eq!(store.list().len(), 2);
}

/// One result of many tables is not many datasets: past [`MAX_DATASETS_PER_RESULT`] it is no
/// table result (the firewall reduces it as a document); at the limit every table is one.
#[tokio::test]
async fn a_result_of_thousands_of_tables_makes_no_datasets() {
    let rows: Value = serde_json::from_str(&rows_json(100)).expect("rows");
    let arrays = |n: usize| -> Value {
        let mut object = Map::new();
        for i in 0..n {
            object.insert(format!("t{i}"), rows.clone());
        }
        Value::Object(object)
    };
    let store = store();
    let many = raw(json!({
        "content": [{"type": "text", "text": "many"}],
        "structuredContent": arrays(6_000)
    }));
    let outcome = intercept(
        many,
        &origin(),
        &store,
        2000,
        &crate::common::policy::Policy::tables_only(),
    );
    assert!(!matches!(outcome, Outcome::Replaced(_)));
    assert!(store.list().is_empty(), "{} datasets", store.list().len());

    let at_limit = raw(json!({
        "content": [{"type": "text", "text": "some"}],
        "structuredContent": arrays(MAX_DATASETS_PER_RESULT)
    }));
    let value = replaced(intercept(
        at_limit,
        &origin(),
        &store,
        200,
        &crate::common::policy::Policy::tables_only(),
    ));
    assert_eq!(
        value["structuredContent"]["datasets"]
            .as_array()
            .map(Vec::len),
        Some(MAX_DATASETS_PER_RESULT)
    );
}

#[tokio::test]
async fn what_must_pass_through_does() {
    let store = store();
    let small = raw(json!({"content": [{"type": "text", "text": "[{\"a\": 1}]"}]}));
    assert!(matches!(
        intercept(
            small,
            &origin(),
            &store,
            2000,
            &crate::common::policy::Policy::tables_only()
        ),
        Outcome::PassThrough(_, "small")
    ));
    let big = rows_json(1000);
    let cases = [
        json!({"content": [{"type": "text", "text": big}], "isError": true}),
        json!({"content": [{"type": "text", "text": big}, {"type": "image", "data": "AA==", "mimeType": "image/png"}]}),
        json!({"content": [{"type": "text", "text": "word ".repeat(5000)}]}),
        // The structured rows are found, but a long text block beside them is not a copy.
        json!({"content": [{"type": "text", "text": "prose ".repeat(500)}], "structuredContent": {"rows": serde_json::from_str::<Value>(&big).expect("rows")}}),
    ];
    for case in cases {
        let text = case.to_string();
        match intercept(
            raw(case),
            &origin(),
            &store,
            2000,
            &crate::common::policy::Policy::tables_only(),
        ) {
            Outcome::PassThrough(bytes, _) => assert_eq!(bytes.get(), text),
            Outcome::Replaced(v) | Outcome::Reduced(v) => panic!("replaced: {v}"),
            Outcome::Spliced(raw, _) => panic!("spliced: {}", raw.get()),
            Outcome::Summarize(_) => panic!("sent to a model"),
        }
    }
    assert!(store.list().is_empty(), "nothing half-built may stay");
}

#[tokio::test]
async fn a_text_copy_of_the_structured_content_is_not_lost_data() {
    let store = store();
    let inner = format!("Contents of /data/users.json:\n{}", rows_json(500));
    let result = raw(json!({
        "content": [{"type": "text", "text": inner}],
        "structuredContent": {"content": inner}
    }));
    let value = replaced(intercept(
        result,
        &origin(),
        &store,
        2000,
        &crate::common::policy::Policy::tables_only(),
    ));
    assert_eq!(
        value["structuredContent"]["context"]["content.preamble"],
        "Contents of /data/users.json:"
    );
}

/// server-memory's `read_graph`: the graph pretty-printed in the text block and compact in
/// `structuredContent` — equal as values, not as bytes. Both tables become datasets.
#[tokio::test]
async fn a_pretty_printed_copy_of_the_structured_content_is_recognised() {
    let store = store();
    let entities: Vec<Value> = (0..400)
        .map(|i| json!({"name": format!("e{i}"), "entityType": "person", "observations": [format!("likes {i}"), "x"]}))
        .collect();
    let relations: Vec<Value> = (0..400)
        .map(|i| json!({"from": format!("e{i}"), "to": format!("e{}", (i + 1) % 400), "relationType": "knows"}))
        .collect();
    let graph = json!({"entities": entities, "relations": relations});
    let pretty = serde_json::to_string_pretty(&graph).expect("pretty");
    let result = raw(json!({
        "content": [{"type": "text", "text": pretty}],
        "structuredContent": graph,
    }));
    let value = replaced(intercept(
        result,
        &origin(),
        &store,
        2000,
        &crate::common::policy::Policy::tables_only(),
    ));
    let datasets = value["structuredContent"]["datasets"]
        .as_array()
        .expect("two datasets");
    let paths: Vec<&str> = datasets.iter().filter_map(|d| d["path"].as_str()).collect();
    assert_eq!(paths, ["entities", "relations"], "{value}");
    assert!(
        value["structuredContent"].get("context").is_none(),
        "{value}"
    );

    // A text block that differs in one value is not a copy: the result passes through.
    let mut changed = graph.clone();
    changed["relations"][7]["relationType"] = json!("hates");
    let result = raw(json!({
        "content": [{"type": "text", "text": serde_json::to_string_pretty(&changed).expect("pretty")}],
        "structuredContent": graph,
    }));
    assert!(matches!(
        intercept(
            result,
            &origin(),
            &store,
            2000,
            &crate::common::policy::Policy::tables_only()
        ),
        Outcome::PassThrough(..)
    ));
}

/// What serde_json's derive reads of a result: the rules [`ResultView::read`] follows.
mod oracle {
    use std::borrow::Cow;

    use serde::Deserialize;
    use serde_json::value::RawValue;

    #[derive(Deserialize)]
    pub(super) struct View<'a> {
        #[serde(borrow, default)]
        pub content: Vec<Block<'a>>,
        #[serde(borrow, default, rename = "structuredContent")]
        pub structured_content: Option<&'a RawValue>,
        #[serde(default, rename = "isError")]
        pub is_error: Option<bool>,
    }

    #[derive(Deserialize)]
    pub(super) struct Block<'a> {
        #[serde(borrow, rename = "type")]
        pub kind: Cow<'a, str>,
        #[serde(borrow, default)]
        pub text: Option<&'a RawValue>,
    }
}

type Seen = (Vec<(String, Option<String>)>, Option<String>, Option<bool>);

fn read_by_skim(raw: &str) -> Option<Seen> {
    let view = ResultView::read(raw)?;
    Some((
        view.content
            .iter()
            .map(|b| (b.kind.to_string(), b.text.map(str::to_string)))
            .collect(),
        view.structured_content.map(str::to_string),
        view.is_error,
    ))
}

fn read_by_serde(raw: &str) -> Option<Seen> {
    let view: oracle::View<'_> = serde_json::from_str(raw).ok()?;
    Some((
        view.content
            .iter()
            .map(|b| (b.kind.to_string(), b.text.map(|t| t.get().to_string())))
            .collect(),
        view.structured_content.map(|s| s.get().to_string()),
        view.is_error,
    ))
}

#[test]
fn results_are_read_as_serde_would_read_them() {
    for raw in [
        r#"{"content": [{"type": "text", "text": "a\"b"}], "isError": false}"#,
        r#"{"content": [{"text": "x", "type": "t\u0065xt", "annotations": {"a": [1]}}]}"#,
        r#"{"structuredContent": null, "content": [], "isError": null}"#,
        r#"{"structuredContent": [1, {"a": "}"}], "_meta": {"content": 1}}"#,
        r#"{}"#,
        // Refused by both: a member twice, a block without a string type, a non-boolean flag.
        r#"{"content": [], "content": []}"#,
        r#"{"isError": true, "isError": true}"#,
        r#"{"content": [{"type": "text", "type": "image"}]}"#,
        r#"{"content": [{"text": "x"}]}"#,
        r#"{"content": [{"type": 3}]}"#,
        r#"{"content": [7]}"#,
        r#"{"content": null}"#,
        r#"{"content": {"type": "text"}}"#,
        r#"{"isError": 1}"#,
        r#"{"isError": "true"}"#,
    ] {
        assert_eq!(read_by_skim(raw), read_by_serde(raw), "{raw}");
    }
    // Where the two differ on purpose: serde's derive also reads a struct written as an array
    // of its field values; that is no MCP result, and it passes through.
    for raw in [
        r#"[[{"type": "text", "text": "x"}], null, false]"#,
        r#"{"content": [["text", "x"]]}"#,
        "[]",
    ] {
        assert!(read_by_serde(raw).is_some(), "{raw}");
        assert_eq!(read_by_skim(raw), None, "{raw}");
    }
}

proptest::proptest! {
    #[test]
    fn any_result_is_read_as_serde_would_read_it(
        members in proptest::collection::vec(
            (proptest::sample::select(vec!["content", "structuredContent", "isError", "other"]),
             proptest::sample::select(vec![
                r#"[{"type": "text", "text": "t"}]"#,
                r#"[{"type": "text", "text": "[{\"a\": \"}\"}]", "extra": [1, {"b": null}]}]"#,
                r#"[{"text": "x", "type": "text"}, {"type": "image", "data": "AA=="}]"#,
                r#"[{"type": "text", "text": null}]"#,
                r#"[{"type": "text", "text": 5}]"#,
                r#"[{"type": "text", "type": "text"}]"#,
                r#"[{"kind": "text"}]"#,
                "[]", "null", "true", "false", "0", r#""s\\\"""#, r#"{"rows": [{"x": 1}]}"#,
             ])),
            0..5),
    ) {
        let inner: Vec<String> = members.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
        let raw = format!("{{{}}}", inner.join(", "));
        proptest::prop_assert_eq!(read_by_skim(&raw), read_by_serde(&raw), "{}", raw);
    }
}

/// server-memory's `create_entities`: the created entities pretty-printed as the text block, and
/// `{"entities": [...]}` compact as `structuredContent` — the text is a copy of the table.
#[tokio::test]
async fn a_pretty_printed_copy_of_a_table_is_recognised() {
    let store = store();
    let entities: Vec<Value> = (0..300)
        .map(|i| json!({"name": format!("e{i}"), "entityType": "person", "observations": ["x"]}))
        .collect();
    let result = raw(json!({
        "content": [{"type": "text", "text": serde_json::to_string_pretty(&entities).expect("pretty")}],
        "structuredContent": {"entities": entities},
    }));
    let value = replaced(intercept(
        result,
        &origin(),
        &store,
        2000,
        &crate::common::policy::Policy::tables_only(),
    ));
    assert_eq!(value["structuredContent"]["rows"], 300, "{value}");
}

/// Results that cannot hold a table never reach the keeper (SPEC §8.4); the ones that may,
/// do.
#[test]
fn only_results_that_may_hold_a_table_are_handed_on() {
    let may =
        |text: &str| super::may_hold_table(&RawValue::from_string(text.to_string()).expect("raw"));
    assert!(!may(r#"{"content":[{"type":"text","text":"Echo: hi"}]}"#));
    assert!(!may(
        r#"{"content":[{"type":"text","text":"[1, 2]"}],"isError":true}"#
    ));
    assert!(!may(
        r#"{"content":[{"type":"image","data":"AAAA","mimeType":"image/png"}]}"#
    ));
    assert!(may(
        r#"{"content":[{"type":"text","text":"[{\"id\": 1}]"}]}"#
    ));
    assert!(may(
        r#"{"content":[{"type":"text","text":"id,name\n1,a"}]}"#
    ));
    assert!(may(
        r#"{"content":[{"type":"text","text":"ok"}],"structuredContent":{"rows":[{"a":1}]}}"#
    ));
    assert!(!may(
        r#"{"content":[{"type":"text","text":"ok"}],"structuredContent":{"a":1}}"#
    ));
}
