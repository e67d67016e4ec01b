//! Rows as they arrive: JSON objects whose values are kept as raw JSON text, borrowed from the
//! source. Keeping the text (instead of `serde_json::Value`) is what lets ingest see every number
//! exactly as written — an integer beyond 64 bits keeps its digits, `2.50` stays `2.50` until it
//! is deliberately typed — without turning on serde_json's `arbitrary_precision`, which breaks
//! the untagged enums of the MCP model.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::common::json::Key;

/// One object: its members in source order (a repeated key appears twice).
#[derive(Debug, Default)]
pub struct RawObject<'a> {
    pub members: Vec<(Cow<'a, str>, &'a RawValue)>,
}

impl<'de: 'a, 'a> Deserialize<'de> for RawObject<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for ObjectVisitor<'a> {
            type Value = RawObject<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                    let value: &'de RawValue = map.next_value()?;
                    members.push((key, value));
                }
                Ok(RawObject { members })
            }
        }
        deserializer.deserialize_map(ObjectVisitor(std::marker::PhantomData))
    }
}

/// Call `each` for every element of a raw JSON array, in order, without collecting them.
/// An error when `raw` is not an array.
pub(crate) fn for_each_element<'a>(
    raw: &'a RawValue,
    mut each: impl FnMut(&'a RawValue),
) -> Result<(), serde_json::Error> {
    struct Elements<'a, F>(F, std::marker::PhantomData<&'a ()>);
    impl<'de: 'a, 'a, F: FnMut(&'a RawValue)> Visitor<'de> for Elements<'a, F> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON array")
        }
        fn visit_seq<S: SeqAccess<'de>>(mut self, mut seq: S) -> Result<(), S::Error> {
            while let Some(value) = seq.next_element::<&'de RawValue>()? {
                (self.0)(value);
            }
            Ok(())
        }
    }
    let mut deserializer = serde_json::Deserializer::from_str(raw.get());
    deserializer.deserialize_seq(Elements(&mut each, std::marker::PhantomData))
}

/// An array whose every element is an object.
#[derive(Debug)]
pub struct RawRows<'a>(pub Vec<RawObject<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for RawRows<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RowsVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for RowsVisitor<'a> {
            type Value = RawRows<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of JSON objects")
            }
            fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Self::Value, S::Error> {
                let mut rows = Vec::with_capacity(seq.size_hint().unwrap_or(64));
                while let Some(row) = seq.next_element::<RawObject<'de>>()? {
                    rows.push(row);
                }
                Ok(RawRows(rows))
            }
        }
        deserializer.deserialize_seq(RowsVisitor(std::marker::PhantomData))
    }
}

/// What a number's text says about it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum NumberText {
    /// An integer that fits i64.
    Int(i64),
    /// An integer beyond i64 (kept as digits).
    BigInt,
    /// A number with a fraction or exponent, or an integer that only fits as a float.
    Float(f64),
    /// A number f64 cannot hold (overflow to infinity).
    OutOfRange,
}

pub(crate) fn classify_number(text: &str) -> NumberText {
    let integral = !text.contains(['.', 'e', 'E']);
    if integral {
        if let Ok(v) = text.parse::<i64>() {
            return NumberText::Int(v);
        }
        return NumberText::BigInt;
    }
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() => NumberText::Float(v),
        _ => NumberText::OutOfRange,
    }
}

/// `-?(0|[1-9][0-9]*)` that fits i64 — a string that can become an integer and be written back
/// exactly as it was (no leading zeros, no `+`, no `-0`).
pub(crate) fn canonical_int(text: &str) -> Option<i64> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
        || text == "-0"
    {
        return None;
    }
    text.parse().ok()
}

/// The most significant digits a decimal string may have to become a Float64: every decimal of
/// at most 15 significant digits survives the round trip through f64 (DBL_DIG).
pub(crate) const MAX_DECIMAL_DIGITS: usize = 15;

/// `-?(0|[1-9][0-9]*)\.[0-9]+` with at most [`MAX_DECIMAL_DIGITS`] significant digits, not a
/// negative zero — a string whose value an f64 holds exactly.
pub(crate) fn canonical_decimal(text: &str) -> Option<f64> {
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    let (whole, fraction) = unsigned.split_once('.')?;
    if whole.is_empty()
        || fraction.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !fraction.bytes().all(|b| b.is_ascii_digit())
        || (whole.len() > 1 && whole.starts_with('0'))
    {
        return None;
    }
    let digits = || whole.bytes().chain(fraction.bytes());
    let significant = digits().skip_while(|&b| b == b'0').count();
    let zero = digits().all(|b| b == b'0');
    if significant > MAX_DECIMAL_DIGITS || (zero && text.starts_with('-')) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_keep_raw_values_order_and_repeated_keys() {
        let text = r#"[{"b": 2.50, "a": {"x": [1]}, "b": "dup"}, {"c": 12345678901234567890123}]"#;
        let rows: RawRows<'_> = serde_json::from_str(text).expect("rows");
        assert_eq!(rows.0.len(), 2);
        let first = &rows.0[0].members;
        assert_eq!(first[0].0, "b");
        assert_eq!(first[0].1.get(), "2.50");
        assert_eq!(first[1].1.get(), r#"{"x": [1]}"#);
        assert_eq!(first[2].0, "b");
        assert_eq!(rows.0[1].members[0].1.get(), "12345678901234567890123");
        assert!(
            matches!(first[0].0, Cow::Borrowed("b")),
            "plain keys are not copied"
        );
        let escaped: RawRows<'_> = serde_json::from_str(r#"[{"a\"b": 1}]"#).expect("rows");
        assert_eq!(escaped.0[0].members[0].0, "a\"b");
    }

    #[test]
    fn array_elements_one_by_one() {
        let raw: Box<RawValue> = serde_json::from_str(r#"[1, "a", null, [2]]"#).expect("raw");
        let mut seen = Vec::new();
        for_each_element(&raw, |v| seen.push(v.get().to_string())).expect("array");
        assert_eq!(seen, vec!["1", "\"a\"", "null", "[2]"]);
        let not: Box<RawValue> = serde_json::from_str(r#"{"a": 1}"#).expect("raw");
        assert!(for_each_element(&not, |_| {}).is_err());
    }

    #[test]
    fn non_objects_are_not_rows() {
        assert!(serde_json::from_str::<RawRows<'_>>("[{}, 5]").is_err());
        assert!(serde_json::from_str::<RawRows<'_>>(r#"{"a": 1}"#).is_err());
    }

    #[test]
    fn numbers_are_classified_from_their_text() {
        assert_eq!(classify_number("42"), NumberText::Int(42));
        assert_eq!(
            classify_number("-9223372036854775808"),
            NumberText::Int(i64::MIN)
        );
        assert_eq!(classify_number("9223372036854775808"), NumberText::BigInt);
        assert_eq!(classify_number("2.50"), NumberText::Float(2.5));
        assert_eq!(classify_number("1e3"), NumberText::Float(1000.0));
        assert_eq!(classify_number("1e400"), NumberText::OutOfRange);
    }

    #[test]
    fn canonical_integers_only() {
        assert_eq!(canonical_int("336776"), Some(336776));
        assert_eq!(canonical_int("-5"), Some(-5));
        assert_eq!(canonical_int("0"), Some(0));
        for bad in [
            "007",
            "-0",
            "+1",
            "1.0",
            "",
            "-",
            "1e5",
            " 1",
            "99999999999999999999",
        ] {
            assert_eq!(canonical_int(bad), None, "{bad}");
        }
    }

    #[test]
    fn canonical_decimals_only() {
        assert_eq!(canonical_decimal("41.13"), Some(41.13));
        assert_eq!(canonical_decimal("-0.5"), Some(-0.5));
        assert_eq!(canonical_decimal("0.000000000000001"), Some(1e-15));
        assert_eq!(canonical_decimal("1.50"), Some(1.5));
        for bad in [
            "1",
            "1.",
            ".5",
            "01.5",
            "+1.5",
            "1e5",
            "1.5e3",
            "-0.0",
            "1,5",
            "0x10",
            " 1.5",
            "",
            "1234567890.1234567",
        ] {
            assert_eq!(canonical_decimal(bad), None, "{bad}");
        }
    }
}
