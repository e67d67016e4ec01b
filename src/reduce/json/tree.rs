//! The parsed document the summary walks. Strings and keys are borrowed from the text (copied
//! only when they hold escapes) and an object's members sit in one `Vec`, so a container costs
//! one allocation. `serde_json::Value` costs two per object (entries and index), one per key and
//! one per string, and hashes every key; on a 5.7 MB npm packument building and freeing that
//! tree was nine tenths of the summary's time.
//!
//! Parsing goes through serde_json, so its rules hold unchanged: nesting beyond 128 is refused,
//! as are lone surrogates and numbers beyond f64. A repeated key keeps its first position and
//! its last value, as serde_json's own map does.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Number, Value};

pub(super) type Members<'a> = Vec<(Cow<'a, str>, Node<'a>)>;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Node<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    Array(Vec<Node<'a>>),
    Object(Members<'a>),
}

/// Objects up to this many members look for a repeated key pairwise; larger ones use a set.
const PAIRWISE_MEMBERS: usize = 32;

impl<'a> Node<'a> {
    pub(super) fn parse(text: &'a str) -> Option<Node<'a>> {
        serde_json::from_str(text).ok()
    }

    pub(super) fn as_object(&self) -> Option<&[(Cow<'a, str>, Node<'a>)]> {
        match self {
            Node::Object(members) => Some(members),
            _ => None,
        }
    }

    /// The same value as a `serde_json::Value` (deep copy).
    pub(super) fn to_value(&self) -> Value {
        match self {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(*b),
            Node::Number(n) => Value::Number(n.clone()),
            Node::String(s) => Value::String(s.to_string()),
            Node::Array(items) => Value::Array(items.iter().map(Node::to_value).collect()),
            Node::Object(members) => Value::Object(
                members
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_value()))
                    .collect(),
            ),
        }
    }
}

/// Keeps the first position and the last value of a repeated key.
fn merge_repeated_keys(members: &mut Members<'_>) {
    let repeated = if members.len() <= PAIRWISE_MEMBERS {
        members
            .iter()
            .enumerate()
            .any(|(i, (k, _))| members[..i].iter().any(|(earlier, _)| earlier == k))
    } else {
        let mut seen = std::collections::HashSet::with_capacity(members.len());
        !members.iter().all(|(k, _)| seen.insert(k.as_ref()))
    };
    if !repeated {
        return;
    }
    let mut first_at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut merged: Members<'_> = Vec::with_capacity(members.len());
    for (key, value) in members.drain(..) {
        match first_at.get(key.as_ref()) {
            Some(&at) => merged[at].1 = value,
            None => {
                first_at.insert(key.to_string(), merged.len());
                merged.push((key, value));
            }
        }
    }
    *members = merged;
}

impl<'de: 'a, 'a> Deserialize<'de> for Node<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor(std::marker::PhantomData))
    }
}

struct NodeVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for NodeVisitor<'a> {
    type Value = Node<'a>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Node::Null)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
        Ok(Node::Bool(b))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Self::Value, E> {
        Ok(Node::Number(n.into()))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Self::Value, E> {
        Ok(Node::Number(n.into()))
    }
    fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Self::Value, E> {
        Number::from_f64(n)
            .map(Node::Number)
            .ok_or_else(|| E::custom("a number that is not finite"))
    }
    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Node::String(Cow::Borrowed(s)))
    }
    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Node::String(Cow::Owned(s.to_string())))
    }
    fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
        Ok(Node::String(Cow::Owned(s)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(item) = seq.next_element::<Node<'a>>()? {
            items.push(item);
        }
        Ok(Node::Array(items))
    }
    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
        let mut members: Members<'a> = Vec::with_capacity(map.size_hint().unwrap_or(0).min(4096));
        while let Some(crate::common::json::Key(key)) =
            map.next_key::<crate::common::json::Key<'de>>()?
        {
            let value: Node<'a> = map.next_value()?;
            members.push((key, value));
        }
        merge_repeated_keys(&mut members);
        Ok(Node::Object(members))
    }
}

impl Serialize for Node<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Null => serializer.serialize_unit(),
            Node::Bool(b) => serializer.serialize_bool(*b),
            Node::Number(n) => n.serialize(serializer),
            Node::String(s) => serializer.serialize_str(s),
            Node::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Node::Object(members) => {
                let mut map = serializer.serialize_map(Some(members.len()))?;
                for (k, v) in members {
                    map.serialize_entry(k.as_ref(), v)?;
                }
                map.end()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_borrowed_unless_escaped() {
        let text = r#"{"plain": "abc", "esc\u0061ped": "a\"b", "n": [1, -2, 2.5, true, null]}"#;
        let Some(Node::Object(members)) = Node::parse(text) else {
            panic!("an object")
        };
        assert!(matches!(members[0].0, Cow::Borrowed("plain")));
        assert!(matches!(members[0].1, Node::String(Cow::Borrowed("abc"))));
        assert!(matches!(&members[1].0, Cow::Owned(k) if k == "escaped"));
        assert!(matches!(&members[1].1, Node::String(Cow::Owned(s)) if s == "a\"b"));
        let back = serde_json::to_string(&Node::Object(members.clone())).unwrap_or_default();
        let expected: Value = serde_json::from_str(text).unwrap_or_default();
        assert_eq!(
            serde_json::from_str::<Value>(&back).unwrap_or_default(),
            expected
        );
        assert_eq!(Node::Object(members).to_value(), expected);
    }

    #[test]
    fn repeated_keys_keep_first_place_and_last_value_like_serde_json() {
        let small = r#"{"a": 1, "b": 2, "a": 3}"#;
        let wide: String = format!(
            "{{{}, \"k3\": \"again\"}}",
            (0..40)
                .map(|i| format!("\"k{i}\": {i}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        for text in [small, wide.as_str()] {
            let node = Node::parse(text).map(|n| n.to_value());
            let value: Option<Value> = serde_json::from_str(text).ok();
            assert_eq!(node, value);
            assert_eq!(
                node.map(|v| serde_json::to_string(&v).unwrap_or_default()),
                value.map(|v| serde_json::to_string(&v).unwrap_or_default())
            );
        }
    }

    #[test]
    fn refused_like_serde_json() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        for bad in [
            deep.as_str(),
            "[1e400]",
            r#"["\ud800"]"#,
            "{\"a\":1",
            "",
            "[1,]",
        ] {
            assert!(Node::parse(bad).is_none(), "{bad:.20}");
        }
    }
}
