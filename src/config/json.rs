//! A JSON tree that keeps every object entry, duplicates included.
//!
//! `serde_json::Value` silently keeps only the last of two equal keys; for a config file that
//! means a second `"github"` entry in `mcpServers` quietly replaces the first. Parsing into this
//! tree instead lets validation report the repeat.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::error::Category;

use super::error::Problem;
use super::mask::looks_like_secret;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    Number(Num),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

/// serde_json hands numbers over in one of these three shapes; integers beyond `u64` arrive as
/// floats.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    PosInt(u64),
    NegInt(i64),
    Float(f64),
}

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Num::PosInt(n) => write!(f, "{n}"),
            Num::NegInt(n) => write!(f, "{n}"),
            // Debug keeps the decimal point, so `100.0` is not shown as `100`.
            Num::Float(x) => write!(f, "{x:?}"),
        }
    }
}

/// Longest string value quoted back in a message before it is cut short.
const MAX_ECHO_CHARS: usize = 40;

impl Json {
    /// What a value is, for "expected X, found Y" messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Json::Null => "null".to_owned(),
            Json::Bool(b) => format!("boolean {b}"),
            Json::Number(n) => format!("number {n}"),
            // A misplaced token must not end up in an error message on the terminal.
            Json::String(s) if looks_like_secret(s) => "a string".to_owned(),
            Json::String(s) if s.chars().count() > MAX_ECHO_CHARS => {
                let head: String = s.chars().take(MAX_ECHO_CHARS).collect();
                format!("string {}…", json_quote(&head))
            }
            Json::String(s) => format!("string {}", json_quote(s)),
            Json::Array(_) => "an array".to_owned(),
            Json::Object(_) => "an object".to_owned(),
        }
    }
}

pub(crate) fn json_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Number(
            u64::try_from(v).map_or(Num::NegInt(v), Num::PosInt),
        ))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Number(Num::PosInt(v)))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        Ok(Json::Number(Num::Float(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }

    fn visit_none<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Json, D::Error> {
        Json::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut entries = Vec::new();
        while let Some(entry) = map.next_entry::<String, Json>()? {
            entries.push(entry);
        }
        Ok(Json::Object(entries))
    }
}

/// Parses the document, or describes why it is not JSON as a single problem located at
/// `{origin}:{line}:{column}`.
pub(crate) fn parse(text: &str, origin: &str) -> Result<Json, Problem> {
    // Editors on Windows like to start UTF-8 files with a byte-order mark, which JSON forbids.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Err(Problem::new(
            "",
            "the file is empty; expected a JSON object with `servers` (array) or `mcpServers` (object)",
        ));
    }
    serde_json::from_str::<Json>(text).map_err(|e| {
        let path = format!("{origin}:{}:{}", e.line(), e.column());
        let message = match e.classify() {
            Category::Eof => format!("the file ends before the JSON is complete: {e}"),
            Category::Io | Category::Syntax | Category::Data => e.to_string(),
        };
        Problem::new(path, message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_duplicate_keys_and_order() {
        let v = parse(r#"{"b": 1, "a": 2, "b": 3}"#, "t").unwrap();
        let Json::Object(entries) = v else {
            panic!("not an object")
        };
        let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a", "b"]);
    }

    #[test]
    fn numbers_keep_their_shape() {
        let v = parse(r#"[1, -2, 1.5, 18446744073709551616]"#, "t").unwrap();
        let Json::Array(items) = v else {
            panic!("not an array")
        };
        assert_eq!(items[0], Json::Number(Num::PosInt(1)));
        assert_eq!(items[1], Json::Number(Num::NegInt(-2)));
        assert_eq!(items[2], Json::Number(Num::Float(1.5)));
        assert!(matches!(items[3], Json::Number(Num::Float(_))));
    }

    #[test]
    fn syntax_error_is_located_by_line_and_column() {
        let err = parse("{\n  \"a\": 1\n  \"b\": 2\n}", "loom.config.json").unwrap_err();
        assert_eq!(err.path, "loom.config.json:3:3");
        assert!(
            err.message
                .starts_with("expected `,` or `}` at line 3 column 3")
        );
    }

    #[test]
    fn truncated_file_says_it_ends_early() {
        let err = parse("{\"servers\": [", "c.json").unwrap_err();
        assert!(err.path.starts_with("c.json:1:"));
        assert!(err.message.contains("ends before the JSON is complete"));
    }

    #[test]
    fn empty_and_blank_files_get_a_clear_message() {
        for text in ["", "  \n\t", "\u{feff}"] {
            let err = parse(text, "c.json").unwrap_err();
            assert_eq!(err.path, "(root)");
            assert!(err.message.contains("the file is empty"));
        }
    }

    #[test]
    fn byte_order_mark_is_accepted() {
        assert!(parse("\u{feff}{}", "c.json").is_ok());
    }

    #[test]
    fn describe_names_the_kind_and_value() {
        assert_eq!(Json::Number(Num::PosInt(12)).describe(), "number 12");
        assert_eq!(Json::Number(Num::Float(100.0)).describe(), "number 100.0");
        assert_eq!(Json::String("abc".into()).describe(), "string \"abc\"");
        assert_eq!(Json::Bool(true).describe(), "boolean true");
        assert_eq!(Json::Null.describe(), "null");
        assert_eq!(Json::Array(vec![]).describe(), "an array");
        assert_eq!(Json::Object(vec![]).describe(), "an object");
    }

    #[test]
    fn describe_never_echoes_a_secret_and_truncates_long_strings() {
        let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        assert_eq!(Json::String(token.into()).describe(), "a string");
        let long = "x".repeat(100);
        let d = Json::String(long).describe();
        assert!(d.ends_with('…'));
        assert!(d.len() < 60);
    }
}
