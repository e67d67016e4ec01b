//! Redaction of tool arguments before they are stored as provenance — not only on the way out:
//! what is never stored can never leak into an envelope, a log, an export or a snapshot.
//!
//! * A member whose key names a secret (token, secret, pass/password/passwd/pwd, api key,
//!   access key, auth/authorization, bearer, credential, cookie, session, private key,
//!   signature, dsn, connection string) has its whole value replaced by `"[redacted]"`.
//! * A string that looks like a secret wherever it appears (a `Bearer …` or `Basic …`
//!   credential, a JWT, a PEM private key, a GitHub, GitLab, Slack, Stripe, npm, PyPI, Google
//!   or AWS key, an `sk-…` key) is replaced too; a URL's password (`postgres://user:pw@host`)
//!   is replaced inside the URL, which is kept; so are the values of a URL's query parameters
//!   named like credentials (`?token=…`, `?api_key=…`, `?sig=…`) or shaped like one, and the
//!   value of a `Cookie:` / `Set-Cookie:` header line.
//! * Other strings are cut at 200 characters; arrays keep their first 20 elements, objects
//!   their first 50 members, nesting 5 levels, each cut marked: provenance is shown in every
//!   listing and description, and one call with a 100,000-element argument made each 1.2 MB.

use serde_json::{Map, Value};

pub(crate) const REDACTED: &str = "[redacted]";
/// The whole `args` of a tool listed in its server's `provenanceDenylist`.
pub(crate) const OMITTED: &str = "[omitted]";
/// Strings in provenance are cut to this many characters.
pub(crate) const MAX_STRING_CHARS: usize = 200;
/// Elements of an array kept in provenance; the rest are counted in a last element.
pub(crate) const MAX_ARRAY_ITEMS: usize = 20;
/// Members of an object kept in provenance; the rest are counted under [`MORE_KEY`].
pub(crate) const MAX_MEMBERS: usize = 50;
/// Levels of nesting kept in provenance; a deeper array or object becomes [`DEEPER`].
pub(crate) const MAX_DEPTH: usize = 5;
const MORE_KEY: &str = "[more members]";
const DEEPER: &str = "[nested deeper]";

/// Does this key name a secret? Compared on lowercase letters and digits only, so `api_key`,
/// `apiKey` and `API-KEY` all match.
pub(crate) fn secret_key(key: &str) -> bool {
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
        "accesskey",
        "secretkey",
        "signingkey",
        "encryptionkey",
        "masterkey",
        "connectionstring",
    ];
    // Whole words only: `pass` is a password's name, `passenger` is not.
    const WORDS: &[&str] = &["pass", "pw", "passphrase", "dsn", "otp"];
    PARTS.iter().any(|part| folded.contains(part))
        || words(key).any(|word| WORDS.contains(&word.as_str()))
}

/// The words of a key: split at `_`, `-`, `.`, spaces and lower-to-upper case changes, folded
/// to lower case (`dbPass` → `db`, `pass`).
fn words(key: &str) -> impl Iterator<Item = String> + '_ {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in key.chars() {
        if !c.is_alphanumeric() {
            words.push(std::mem::take(&mut current));
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower {
            words.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    words.push(current);
    words.into_iter().filter(|w| !w.is_empty())
}

/// Does this string carry something that looks like a credential? The same test `loom check`
/// masks arguments with, so what one hides the other hides too.
pub(crate) fn secret_value(text: &str) -> bool {
    crate::config::looks_like_secret(text)
}

/// `text` with the passwords of its URLs replaced, when those are the only secrets in it.
fn without_url_password(text: &str) -> Option<String> {
    let mut kept = String::with_capacity(text.len());
    let mut checked = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(range) = crate::config::url_userinfo(rest) {
        kept.push_str(&rest[..range.start]);
        kept.push_str(REDACTED);
        checked.push_str(&rest[..range.start]);
        rest = &rest[range.end..];
    }
    if kept.is_empty() {
        return None;
    }
    kept.push_str(rest);
    checked.push_str(rest);
    // Any other kind of secret, and nothing of the text is kept.
    (!secret_value(&checked)).then_some(kept)
}

/// Query parameter names that carry a credential beyond [`secret_key`]'s: signed URLs' `sig`
/// and `X-Amz-Signature`-style members are caught by it, `?key=` by `loom check`'s words.
fn secret_query_name(name: &str) -> bool {
    secret_key(name) || crate::config::is_sensitive_name(name) || name.eq_ignore_ascii_case("sig")
}

/// `text` with the values of its URLs' credential query parameters and of its `Cookie:` /
/// `Set-Cookie:` header lines replaced; the rest of the text as it was.
fn without_query_and_cookie_secrets(text: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    let mut out: Cow<'_, str> = Cow::Borrowed(text);
    if text.contains("://") && text.contains('?') {
        out = Cow::Owned(mask_query_values(&out));
    }
    if out.to_ascii_lowercase().contains("cookie:") {
        out = Cow::Owned(mask_cookie_lines(&out));
    }
    out
}

/// Every `name=value` of a URL's query (from `?` to `#` or the URL's end: whitespace, a quote
/// or an angle bracket) whose name or value says credential gets `[redacted]` as its value.
fn mask_query_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(scheme) = rest.find("://") {
        let end_of_url = rest[scheme..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`'))
            .map_or(rest.len(), |n| scheme + n);
        let url = &rest[..end_of_url];
        match url[scheme..].find('?') {
            Some(q) => {
                let query_start = scheme + q + 1;
                let query_end = url[query_start..]
                    .find('#')
                    .map_or(url.len(), |n| query_start + n);
                out.push_str(&url[..query_start]);
                let pairs: Vec<String> = url[query_start..query_end]
                    .split('&')
                    .map(|pair| match pair.split_once('=') {
                        Some((name, value)) if secret_query_name(name) || secret_value(value) => {
                            format!("{name}={REDACTED}")
                        }
                        _ => pair.to_string(),
                    })
                    .collect();
                out.push_str(&pairs.join("&"));
                out.push_str(&url[query_end..]);
            }
            None => out.push_str(url),
        }
        rest = &rest[end_of_url..];
    }
    out.push_str(rest);
    out
}

/// A `Cookie:` or `Set-Cookie:` header line keeps its name; its value, to the end of the line,
/// becomes `[redacted]`.
fn mask_cookie_lines(text: &str) -> String {
    text.split_inclusive('\n')
        .map(|line| {
            let lower = line.to_ascii_lowercase();
            match lower.find("cookie:") {
                Some(at) => {
                    let value_start = at + "cookie:".len();
                    let ending = if line.ends_with("\r\n") {
                        "\r\n"
                    } else if line.ends_with('\n') {
                        "\n"
                    } else {
                        ""
                    };
                    format!("{} {REDACTED}{ending}", &line[..value_start])
                }
                None => line.to_string(),
            }
        })
        .collect()
}

fn redact_value(value: &Value, depth: usize) -> Value {
    match value {
        Value::Array(_) | Value::Object(_) if depth >= MAX_DEPTH => Value::String(DEEPER.into()),
        Value::String(s) => {
            let s = without_query_and_cookie_secrets(s);
            Value::String(if secret_value(&s) {
                without_url_password(&s)
                    .map(|kept| crate::common::text::cut(&kept, MAX_STRING_CHARS))
                    .unwrap_or_else(|| REDACTED.into())
            } else {
                crate::common::text::cut(&s, MAX_STRING_CHARS)
            })
        }
        Value::Array(items) => {
            let mut kept: Vec<Value> = items
                .iter()
                .take(MAX_ARRAY_ITEMS)
                .map(|item| redact_value(item, depth + 1))
                .collect();
            if items.len() > MAX_ARRAY_ITEMS {
                kept.push(Value::String(format!(
                    "[{} more elements]",
                    items.len() - MAX_ARRAY_ITEMS
                )));
            }
            Value::Array(kept)
        }
        Value::Object(map) => Value::Object(redact_object(map, depth + 1)),
        other => other.clone(),
    }
}

fn redact_object(map: &Map<String, Value>, depth: usize) -> Map<String, Value> {
    let mut kept: Map<String, Value> = map
        .iter()
        .take(MAX_MEMBERS)
        .map(|(k, v)| {
            let value = if secret_key(k) {
                Value::String(REDACTED.into())
            } else {
                redact_value(v, depth)
            };
            (crate::common::text::cut(k, MAX_STRING_CHARS), value)
        })
        .collect();
    if map.len() > MAX_MEMBERS {
        kept.insert(MORE_KEY.into(), Value::from(map.len() - MAX_MEMBERS));
    }
    kept
}

/// Tool arguments as they may be stored.
pub(crate) fn arguments(arguments: Option<&Map<String, Value>>) -> Value {
    match arguments {
        Some(map) => Value::Object(redact_object(map, 1)),
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
    fn more_key_names_and_token_shapes_are_caught() {
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----";
        let basic = format!("Basic {}", "dXNlcjpodW50ZXIy"); // user:hunter2
        let args = json!({
            "pass": "hunter2", "access_key": "x", "dbPass": "y", "AWS_SECRET_ACCESS_KEY": "z",
            "dsn": "a", "passenger_count": 3, "compass": "north",
            "stripe": "sk_live_51Habcdefghijklmn", "google": "AIzaSyA1234567890abcdefghijklmnopqrstu",
            "gitlab": "glpat-abcdefghij0123456789", "auth_header": "x", "h": basic,
            "plain": "Basic usage of the tool", "key": pem,
            "url": "postgres://admin:s3cr3t@db.internal:5432/app",
            "text": "connect with mysql://root:toor@10.0.0.1/db please",
            "public": "https://example.com/a@b",
            "two": "postgres://a:b@h1/x and postgres://c:d@h2/y",
        });
        let out = arguments(args.as_object());
        for key in [
            "pass",
            "access_key",
            "dbPass",
            "AWS_SECRET_ACCESS_KEY",
            "dsn",
            "stripe",
            "google",
            "gitlab",
            "h",
            "key",
        ] {
            assert_eq!(out[key], REDACTED, "{key}: {}", out[key]);
        }
        assert_eq!(out["passenger_count"], 3);
        assert_eq!(out["compass"], "north");
        assert_eq!(out["plain"], "Basic usage of the tool");
        assert_eq!(
            out["url"],
            "postgres://admin:[redacted]@db.internal:5432/app"
        );
        assert_eq!(
            out["text"],
            "connect with mysql://root:[redacted]@10.0.0.1/db please"
        );
        assert_eq!(out["public"], "https://example.com/a@b");
        assert_eq!(
            out["two"],
            "postgres://a:[redacted]@h1/x and postgres://c:[redacted]@h2/y"
        );
        let mixed =
            json!({"m": "postgres://a:b@h/x with ghp_abcdefghijklmnopqrstuvwxyz0123456789"});
        assert_eq!(arguments(mixed.as_object())["m"], REDACTED);
    }

    #[test]
    fn url_query_credentials_and_cookies_are_redacted() {
        let args = json!({
            "url": "https://api.example.com/v1/items?page=2&access_token=abc123&q=x#top",
            "signed": "see https://b.s3.example.com/o?X-Amz-Signature=f00d&X-Amz-Expires=60 now",
            "google": "https://maps.example.com/api?key=AIzaLikeValue&city=Paris",
            "plain": "https://example.com/search?q=rust&page=1",
            "request": "GET / HTTP/1.1\r\nHost: a\r\nCookie: sid=s3cr3t; theme=dark\r\nAccept: */*",
            "note": "set-cookie: id=42",
        });
        let out = arguments(args.as_object());
        assert_eq!(
            out["url"],
            "https://api.example.com/v1/items?page=2&access_token=[redacted]&q=x#top"
        );
        assert_eq!(
            out["signed"],
            "see https://b.s3.example.com/o?X-Amz-Signature=[redacted]&X-Amz-Expires=60 now"
        );
        assert_eq!(
            out["google"],
            "https://maps.example.com/api?key=[redacted]&city=Paris"
        );
        assert_eq!(out["plain"], "https://example.com/search?q=rust&page=1");
        assert_eq!(
            out["request"],
            "GET / HTTP/1.1\r\nHost: a\r\nCookie: [redacted]\r\nAccept: */*"
        );
        assert_eq!(out["note"], "set-cookie: [redacted]");
    }

    #[test]
    fn large_arguments_are_bounded_and_the_cuts_marked() {
        let wide: Map<String, Value> = (0..80).map(|i| (format!("k{i}"), json!(i))).collect();
        let args = json!({
            "ids": (0..100_000).collect::<Vec<_>>(),
            "wide": wide,
            "deep": {"a": {"b": {"c": {"d": {"e": {"f": 1}}}}}},
        });
        let out = arguments(args.as_object());
        let ids = out["ids"].as_array().expect("ids");
        assert_eq!(ids.len(), MAX_ARRAY_ITEMS + 1);
        assert_eq!(ids[MAX_ARRAY_ITEMS], "[99980 more elements]");
        let wide = out["wide"].as_object().expect("wide");
        assert_eq!(wide.len(), MAX_MEMBERS + 1);
        assert_eq!(wide[MORE_KEY], 30);
        assert_eq!(out["deep"]["a"]["b"]["c"]["d"], DEEPER);
        assert!(out.to_string().len() < 2_000, "{}", out.to_string().len());
    }

    #[test]
    fn long_strings_are_cut() {
        let args = json!({"text": "a".repeat(500)});
        let out = arguments(args.as_object());
        assert_eq!(out["text"].as_str().map(|s| s.chars().count()), Some(201));
    }
}
