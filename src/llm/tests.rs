use super::*;

#[test]
fn a_chat_completion_gives_its_text_and_usage() {
    let answer = br#"{"id":"x","object":"chat.completion","choices":[{"index":0,
        "message":{"role":"assistant","content":"  6,000 lines; ERROR at 4,211  "},
        "finish_reason":"stop"}],"usage":{"prompt_tokens":1200,"completion_tokens":30}}"#;
    let summary = parse_answer(answer).expect("a summary");
    assert_eq!(summary.text, "6,000 lines; ERROR at 4,211");
    assert_eq!(
        (summary.prompt_tokens, summary.completion_tokens),
        (1200, 30)
    );
    let no_usage = br#"{"choices":[{"message":{"content":"ok"}}]}"#;
    assert_eq!(parse_answer(no_usage).expect("ok").prompt_tokens, 0);
}

#[test]
fn every_bad_answer_has_its_kind() {
    let kind = |body: &[u8]| parse_answer(body).map(|_| ()).unwrap_err().kind;
    assert_eq!(
        kind(b"{\"choices\": [ {\"message\": "),
        FailureKind::Malformed
    );
    assert_eq!(kind(b"[1,2]"), FailureKind::Malformed);
    assert_eq!(kind(br#"{"choices":[]}"#), FailureKind::Malformed);
    assert_eq!(
        kind(br#"{"choices":[{"message":{"content":["a"]}}]}"#),
        FailureKind::Malformed
    );
    assert_eq!(
        kind(br#"{"choices":[{"message":{"content":""}}]}"#),
        FailureKind::Empty
    );
    assert_eq!(
        kind(br#"{"choices":[{"message":{"content":null}}]}"#),
        FailureKind::Empty
    );
    assert_eq!(
        kind(br#"{"choices":[{"message":{"content":"half a"},"finish_reason":"length"}]}"#),
        FailureKind::CutOff
    );
}

#[test]
fn the_request_carries_the_text_and_the_instructions_only() {
    let body = request_body(
        "m-1",
        "line one\nline two",
        Some(InputCut {
            sent_chars: 100,
            total_chars: 900,
        }),
        7000,
    );
    assert_eq!(body["model"], "m-1");
    assert_eq!(body["stream"], false);
    assert_eq!(body["max_tokens"], 7000 / 3 + 64);
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[1]["role"], "user");
    assert_eq!(messages[1]["content"], "line one\nline two");
    let instructions = messages[0]["content"].as_str().expect("text");
    assert!(
        instructions.contains("At most 6300 characters"),
        "{instructions}"
    );
    assert!(instructions.contains("900 characters long; you see 100"));
    let members: Vec<&String> = body.as_object().expect("object").keys().collect();
    assert_eq!(members, ["model", "messages", "max_tokens", "stream"]);
}

#[test]
fn error_bodies_are_quoted_short() {
    assert_eq!(
        error_message(r#"{"error":{"message":"invalid api key","type":"x"}}"#).as_deref(),
        Some("invalid api key")
    );
    assert_eq!(
        error_message(r#"{"error":"overloaded"}"#).as_deref(),
        Some("overloaded")
    );
    let long = format!(r#"{{"error":{{"message":"{}"}}}}"#, "e".repeat(5000));
    assert_eq!(
        error_message(&long).map(|m| m.len()),
        Some(QUOTED_ERROR_CHARS)
    );
    assert_eq!(error_message("<html>"), None);
}

fn config(key: &str) -> LlmConfig {
    LlmConfig {
        provider: None,
        base_url: "http://127.0.0.1:9/v1".into(),
        api_key: crate::config::Secret::new(key.into()),
        key_source: crate::config::KeySource::Variables(vec!["K".into()]),
        model: "m".into(),
        timeout_ms: 2000,
        max_input_chars: 120_000,
        max_in_flight: 1,
    }
}

#[test]
fn the_key_is_scrubbed_from_what_an_endpoint_says() {
    let summarizer = Summarizer::new(config("sk-secret-123")).expect("client");
    assert_eq!(
        summarizer.scrub("Incorrect API key provided: sk-secret-123."),
        "Incorrect API key provided: ***."
    );
    assert!(!format!("{:?}", config("sk-secret-123")).contains("sk-secret-123"));
}

#[tokio::test]
async fn a_closed_port_is_unreachable_not_an_error_of_the_call() {
    let summarizer = Summarizer::new(config("k")).expect("client");
    let failure = summarizer
        .summarize("some text", None, 1000)
        .await
        .expect_err("nothing listens on port 9");
    assert_eq!(failure.kind, FailureKind::Unreachable, "{}", failure.detail);
}
