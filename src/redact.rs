//! Redaction of tool arguments before they are stored as provenance — not only on the way out:
//! what is never stored can never leak into an envelope, a log, an export or a snapshot.
//!
//! * A member whose key names a secret (token, secret, password/passwd/pwd, api key,
//!   auth/authorization, bearer, credential, cookie, session, private key, signature) has its
//!   whole value replaced by `"[redacted]"`.
//! * A string that looks like a secret wherever it appears (a `Bearer …` header, a JWT, a GitHub
//!   `ghp_…`/`github_pat_…` token, an `sk-…` key, an AWS `AKIA…` key id) is replaced too.
//! * Other strings are cut at 200 characters.

use serde_json::{Map, Value};

pub const REDACTED: &str = "[redacted]";
/// The whole `args` of a tool listed in its server's `provenanceDenylist`.
pub const OMITTED: &str = "[omitted]";
/// Strings in provenance are cut to this many characters.
pub const MAX_STRING_CHARS: usize = 200;

/// Does this key name a secret? Compared on lowercase letters and digits only, so `api_key`,
/// `apiKey` and `API-KEY` all match.
pub fn secret_key(key: &str) -> bool {
    let folded: String = key
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    const PARTS: &[&str] = &[
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "apikey",
        "auth",
        "bearer",
        "credential",
        "cookie",
        "session",
        "privatekey",
        "signature",
    ];
    PARTS.iter().any(|part| folded.contains(part))
}

/// Does this string carry something that looks like a credential? The same test `loom check`
/// masks arguments with, so what one hides the other hides too.
pub fn secret_value(text: &str) -> bool {
    crate::config::looks_like_secret(text)
}

fn redact_value(value: &Value) -> Value {
    match value {
        Value::String(s) if secret_value(s) => Value::String(REDACTED.into()),
        Value::String(s) => Value::String(crate::store::values::cut(s, MAX_STRING_CHARS)),
        Value::Array(items) => Value::Array(items.iter().map(redact_value).collect()),
        Value::Object(map) => Value::Object(redact_object(map)),
        other => other.clone(),
    }
}

fn redact_object(map: &Map<String, Value>) -> Map<String, Value> {
    map.iter()
        .map(|(k, v)| {
            let value = if secret_key(k) {
                Value::String(REDACTED.into())
            } else {
                redact_value(v)
            };
            (k.clone(), value)
        })
        .collect()
}

/// Tool arguments as they may be stored.
pub fn arguments(arguments: Option<&Map<String, Value>>) -> Value {
    match arguments {
        Some(map) => Value::Object(redact_object(map)),
        None => Value::Object(Map::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_keys_lose_their_whole_value() {
        let args = json!({"apiKey": "abc", "Authorization": {"x": 1}, "query": "ok",
                          "db_password": 5, "sessionId": "s", "page": 2});
        let out = arguments(args.as_object());
        assert_eq!(out["apiKey"], REDACTED);
        assert_eq!(out["Authorization"], REDACTED);
        assert_eq!(out["db_password"], REDACTED);
        assert_eq!(out["sessionId"], REDACTED);
        assert_eq!(out["query"], "ok");
        assert_eq!(out["page"], 2);
    }

    #[test]
    fn secret_looking_values_are_caught_anywhere() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlLXZhbHVl";
        let args = json!({"q": "find ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                          "nested": [{"h": "Bearer abc.def"}, jwt],
                          "aws": "AKIAABCDEFGHIJKLMNOP", "llm": "sk-proj-abcdefghijklmnop",
                          "paid": "valid monkey"});
        let out = arguments(args.as_object());
        assert_eq!(out["q"], REDACTED);
        assert_eq!(out["nested"][0]["h"], REDACTED);
        assert_eq!(out["nested"][1], REDACTED);
        assert_eq!(out["aws"], REDACTED);
        assert_eq!(out["llm"], REDACTED);
        assert_eq!(out["paid"], "valid monkey");
    }

    #[test]
    fn long_strings_are_cut() {
        let args = json!({"text": "a".repeat(500)});
        let out = arguments(args.as_object());
        assert_eq!(out["text"].as_str().map(|s| s.chars().count()), Some(201));
    }
}
