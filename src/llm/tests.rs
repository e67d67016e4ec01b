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
        TokenLimit::MaxTokens.tokens(7000, true),
        TokenLimit::MaxTokens,
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

#[test]
fn the_token_limit_leaves_a_reasoning_model_room_to_think() {
    let with =
        |limit: TokenLimit| request_body("m", "text", None, 7000, limit.tokens(7000, true), limit);
    let members = |body: &Value| -> Vec<String> {
        body.as_object().expect("object").keys().cloned().collect()
    };
    let plain = with(TokenLimit::MaxTokens);
    assert_eq!(
        members(&plain),
        ["model", "messages", "max_tokens", "stream"]
    );
    assert_eq!(plain["max_tokens"], 7000 / 3 + 64);
    let reasoning = with(TokenLimit::MaxCompletionTokens);
    assert_eq!(
        members(&reasoning),
        ["model", "messages", "max_completion_tokens", "stream"]
    );
    assert_eq!(
        reasoning["max_completion_tokens"],
        7000 / 3 + 64 + REASONING_ALLOWANCE_TOKENS
    );
    // Without the room (an endpoint found the limit too large), the summary's tokens only.
    assert_eq!(
        TokenLimit::MaxCompletionTokens.tokens(7000, false),
        7000 / 3 + 64
    );
    // A budget past what any summary needs is capped.
    assert_eq!(
        TokenLimit::MaxTokens.tokens(1_000_000, true),
        MAX_COMPLETION_TOKENS
    );
    assert_eq!(
        TokenLimit::for_provider(Some("openai")),
        TokenLimit::MaxCompletionTokens
    );
    assert_eq!(
        TokenLimit::for_provider(Some("deepseek")),
        TokenLimit::MaxTokens
    );
    assert_eq!(TokenLimit::for_provider(None), TokenLimit::MaxTokens);
}

#[test]
fn what_an_error_says_about_the_token_limit() {
    use LimitComplaint::{Member, TooLarge};
    let openai = r#"{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}"#;
    assert_eq!(limit_complaint(openai, "max_tokens"), Some(Member));
    // The same body does not refuse what it recommends (`error.param` names the one at fault).
    assert_eq!(limit_complaint(openai, "max_completion_tokens"), None);
    // As LiteLLM hands it back.
    let litellm = r#"{"error":{"message":"litellm.BadRequestError: OpenAIException - Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"400"}}"#;
    assert_eq!(limit_complaint(litellm, "max_tokens"), Some(Member));
    let azure =
        r#"{"error":{"message":"Unrecognized request argument supplied: max_completion_tokens"}}"#;
    assert_eq!(
        limit_complaint(azure, "max_completion_tokens"),
        Some(Member)
    );
    assert_eq!(limit_complaint(azure, "max_tokens"), None);
    let pydantic = r#"{"detail":[{"type":"extra_forbidden","loc":["body","max_completion_tokens"],"msg":"Extra inputs are not permitted","input":4000}]}"#;
    assert_eq!(
        limit_complaint(pydantic, "max_completion_tokens"),
        Some(Member)
    );
    let plain_text = "Unrecognized request argument supplied: max_completion_tokens";
    assert_eq!(
        limit_complaint(plain_text, "max_completion_tokens"),
        Some(Member)
    );
    // A value more than the model writes: worth asking without the room to reason.
    let too_many = r#"{"error":{"message":"max_tokens is too large: 12288. This model supports at most 4096 completion tokens, whereas you provided 12288.","type":"invalid_request_error","param":"max_tokens","code":null}}"#;
    assert_eq!(limit_complaint(too_many, "max_tokens"), Some(TooLarge));
    assert_eq!(
        limit_complaint(too_many, "max_completion_tokens"),
        Some(TooLarge)
    );
    // Neither: the context is full, or a validator complains about something else while it
    // echoes the request (the tool output in it says "unknown" and "not allowed").
    let context = r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens (8000 in the messages, 1000 in the completion)."}}"#;
    assert_eq!(limit_complaint(context, "max_tokens"), None);
    let echoed = r#"{"detail":[{"type":"missing","loc":["body","model"],"msg":"Field required","input":{"messages":[{"role":"user","content":"unknown host; extra retries not allowed; too large at most"}],"max_tokens":2397}}]}"#;
    assert_eq!(limit_complaint(echoed, "max_tokens"), None);
    assert_eq!(limit_complaint("<html>502</html>", "max_tokens"), None);
}

#[test]
fn a_limit_spent_on_reasoning_says_so() {
    let answer = br#"{"choices":[{"message":{"content":""},"finish_reason":"length"}],
        "usage":{"prompt_tokens":900,"completion_tokens":2400,
                 "completion_tokens_details":{"reasoning_tokens":2400}}}"#;
    let failure = parse_answer(answer).expect_err("cut off");
    assert_eq!(failure.kind, FailureKind::CutOff);
    assert!(
        failure
            .detail
            .contains("2400 of its 2400 tokens spent reasoning"),
        "{}",
        failure.detail
    );
    assert_eq!(failure.completion_tokens, 2400);
}
