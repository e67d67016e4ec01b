//! One Arrow type per column, decided over **all** its values (never a prefix), conservatively:
//! a column only gets a type its every value fits exactly; otherwise it stays text.

use chrono::NaiveDate;
use serde_json::value::RawValue;

use super::IngestOptions;
use super::cells::{
    NumberText, canonical_decimal, canonical_int, classify_number, for_each_element,
};
use crate::common::json::{Kind, kind, string_content};

/// Largest integer every f64 holds exactly; an int+float column with a bigger integer would be
/// rounded, so it stays text instead.
const F64_EXACT_INT: i64 = 1 << 53;

/// What a column becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    /// Every value null (kept as a nullable text column).
    AllNull,
    Bool,
    Int,
    Float,
    /// Integers beyond i64 with at most 38 digits: Decimal128(38, 0).
    Decimal,
    /// Strings that are all canonical integers (`"336776"`, never `"007"`): Int64.
    IntFromText,
    /// Strings read out of formatted text that are all canonical decimals (`"41.13"`, never
    /// `"1e5"` or `"1,234"`): Float64. Only with [`IngestOptions::decimal_strings`].
    FloatFromText,
    Text,
    Date,
    /// ISO-8601 date-times of one form; `utc` when every value ends in `Z`.
    Timestamp {
        utc: bool,
    },
    List(ListElement),
    /// Mixed kinds, integers too big for anything else, nested arrays: the JSON text of each
    /// value (strings as their content).
    JsonText,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListElement {
    Bool,
    Int,
    Float,
    Text,
}

/// The written form of a temporal string; a column is temporal only if all share one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TemporalForm {
    Date,
    DateTime { separator: u8, utc: bool },
}

/// The parts of a date or date-time string whose layout is `YYYY-MM-DD` or
/// `YYYY-MM-DD[T ]HH:MM:SS[.f{1,6}][Z]` (not yet checked against the calendar).
struct Parts {
    date: (i32, u32, u32),
    /// Hour, minute, second, microseconds, the separator and whether it ends in `Z`.
    time: Option<(u32, u32, u32, u32, u8, bool)>,
}

/// Read the layout by hand: this runs on every string cell of every table, and chrono's
/// format-string parser would re-read its format each time.
fn parts(s: &str) -> Option<Parts> {
    let b = s.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<u32> {
        let digits = b.get(range)?;
        digits.iter().try_fold(0u32, |n, d| {
            d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0'))
        })
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let date = (
        i32::try_from(number(0..4)?).ok()?,
        number(5..7)?,
        number(8..10)?,
    );
    if b.len() == 10 {
        return Some(Parts { date, time: None });
    }
    let separator = b[10];
    if !(separator == b'T' || separator == b' ') || b.len() < 19 || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    let mut rest = &b[19..];
    let mut micros = 0;
    if let Some(fraction) = rest.strip_prefix(b".") {
        let n = fraction.iter().take_while(|d| d.is_ascii_digit()).count();
        if n == 0 || n > 6 {
            return None;
        }
        micros = number(20..20 + n)? * 10u32.pow(6 - n as u32);
        rest = &fraction[n..];
    }
    let utc = match rest {
        b"" => false,
        b"Z" => true,
        _ => return None,
    };
    Some(Parts {
        date,
        time: Some((hour, minute, second, micros, separator, utc)),
    })
}

fn calendar_date((year, month, day): (i32, u32, u32)) -> Option<NaiveDate> {
    NaiveDate::from_ymd_opt(year, month, day)
}

/// `YYYY-MM-DD`, or `YYYY-MM-DD[T ]HH:MM:SS[.f{1,6}][Z]`, and a real calendar value (a leap
/// second `:60` is not one: such a column stays text).
pub(crate) fn temporal_form(s: &str) -> Option<TemporalForm> {
    let parts = parts(s)?;
    let date = calendar_date(parts.date)?;
    match parts.time {
        None => Some(TemporalForm::Date),
        Some((hour, minute, second, micros, separator, utc)) => {
            date.and_hms_micro_opt(hour, minute, second, micros)?;
            Some(TemporalForm::DateTime { separator, utc })
        }
    }
}

/// Microseconds since the epoch of a string [`temporal_form`] accepted as a date-time.
pub(crate) fn parse_datetime(s: &str) -> Option<i64> {
    let parts = parts(s)?;
    let (hour, minute, second, micros, _, _) = parts.time?;
    let at = calendar_date(parts.date)?.and_hms_micro_opt(hour, minute, second, micros)?;
    Some(at.and_utc().timestamp_micros())
}

/// Days since the epoch of a `YYYY-MM-DD` string.
pub(crate) fn parse_date(s: &str) -> Option<i32> {
    let parts = parts(s)?;
    if parts.time.is_some() {
        return None;
    }
    let date = calendar_date(parts.date)?;
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1)?;
    i32::try_from((date - epoch).num_days()).ok()
}

#[derive(Default)]
struct Seen {
    nulls: usize,
    bools: usize,
    ints: usize,
    ints_beyond_f64: bool,
    bigints: usize,
    bigints_beyond_decimal: bool,
    floats: usize,
    out_of_range: bool,
    strings: usize,
    all_canonical_int: bool,
    all_canonical_decimal: bool,
    temporal: Option<Option<TemporalForm>>,
    arrays: usize,
    list_element: Option<Option<ListElement>>,
    objects: usize,
}

fn merge_list_element(seen: &mut Option<Option<ListElement>>, element: Option<ListElement>) {
    *seen = Some(match (*seen, element) {
        (None, e) => e,
        (Some(None), _) | (_, None) => None,
        (Some(Some(a)), Some(b)) if a == b => Some(a),
        (Some(Some(ListElement::Int)), Some(ListElement::Float))
        | (Some(Some(ListElement::Float)), Some(ListElement::Int)) => Some(ListElement::Float),
        _ => None,
    });
}

/// The element type of a raw array: `Ok(None)` when it has no non-null element (no evidence),
/// `Err(())` when its elements are not all one scalar kind.
fn array_element(raw: &RawValue) -> Result<Option<ListElement>, ()> {
    let mut element: Option<Option<ListElement>> = None;
    let mut big_int = false;
    for_each_element(raw, |value| {
        let this = match kind(value) {
            Kind::Null => return,
            Kind::Bool => Some(ListElement::Bool),
            Kind::String => Some(ListElement::Text),
            Kind::Number => match classify_number(value.get()) {
                NumberText::Int(v) => {
                    big_int |= v.unsigned_abs() >= F64_EXACT_INT.unsigned_abs();
                    Some(ListElement::Int)
                }
                NumberText::Float(_) => Some(ListElement::Float),
                _ => None,
            },
            Kind::Array | Kind::Object => None,
        };
        merge_list_element(&mut element, this);
    })
    .map_err(|_| ())?;
    match element {
        None => Ok(None),
        // Floats with an integer f64 cannot hold would be rounded.
        Some(Some(ListElement::Float)) if big_int => Err(()),
        Some(Some(e)) => Ok(Some(e)),
        Some(None) => Err(()),
    }
}

/// The type of a leaf column (objects were flattened before).
#[cfg(test)]
pub(crate) fn infer(cells: &[Option<&RawValue>]) -> ColumnType {
    infer_with(cells, IngestOptions::default())
}

/// [`infer`] with typing options.
pub(crate) fn infer_with(cells: &[Option<&RawValue>], options: IngestOptions) -> ColumnType {
    let mut seen = Seen {
        all_canonical_int: true,
        // Only looked for when asked: JSON strings keep their text.
        all_canonical_decimal: options.decimal_strings,
        ..Seen::default()
    };
    for cell in cells {
        let Some(raw) = cell else {
            seen.nulls += 1;
            continue;
        };
        match kind(raw) {
            Kind::Null => seen.nulls += 1,
            Kind::Bool => seen.bools += 1,
            Kind::Number => match classify_number(raw.get()) {
                NumberText::Int(v) => {
                    seen.ints += 1;
                    seen.ints_beyond_f64 |= !(-F64_EXACT_INT..=F64_EXACT_INT).contains(&v);
                }
                NumberText::BigInt => {
                    seen.bigints += 1;
                    let digits = raw.get().trim_start_matches('-').len();
                    seen.bigints_beyond_decimal |= digits > 38;
                }
                NumberText::Float(_) => seen.floats += 1,
                NumberText::OutOfRange => seen.out_of_range = true,
            },
            Kind::String => {
                seen.strings += 1;
                let content = string_content(raw).unwrap_or_default();
                if seen.all_canonical_int && canonical_int(&content).is_none() {
                    seen.all_canonical_int = false;
                }
                if seen.all_canonical_decimal && canonical_decimal(&content).is_none() {
                    seen.all_canonical_decimal = false;
                }
                if seen.temporal != Some(None) {
                    let form = temporal_form(&content);
                    seen.temporal = Some(match seen.temporal {
                        None => form,
                        Some(previous) if previous == form => form,
                        _ => None,
                    });
                }
            }
            Kind::Array => {
                seen.arrays += 1;
                match array_element(raw) {
                    Ok(Some(element)) => merge_list_element(&mut seen.list_element, Some(element)),
                    Ok(None) => {}
                    Err(()) => seen.list_element = Some(None),
                }
            }
            Kind::Object => seen.objects += 1,
        }
    }
    decide(&seen, cells.len())
}

fn decide(seen: &Seen, total: usize) -> ColumnType {
    let values = total - seen.nulls;
    let numbers = seen.ints + seen.bigints + seen.floats;
    if values == 0 {
        return ColumnType::AllNull;
    }
    if seen.bools == values {
        return ColumnType::Bool;
    }
    if seen.out_of_range {
        return ColumnType::JsonText;
    }
    if numbers == values {
        return match (seen.floats > 0, seen.bigints > 0) {
            (false, false) => ColumnType::Int,
            (false, true) if !seen.bigints_beyond_decimal => ColumnType::Decimal,
            (false, true) => ColumnType::JsonText,
            (true, false) if !seen.ints_beyond_f64 => ColumnType::Float,
            _ => ColumnType::JsonText,
        };
    }
    if seen.strings == values {
        if seen.all_canonical_int {
            return ColumnType::IntFromText;
        }
        if seen.all_canonical_decimal {
            return ColumnType::FloatFromText;
        }
        return match seen.temporal {
            Some(Some(TemporalForm::Date)) => ColumnType::Date,
            Some(Some(TemporalForm::DateTime { utc, .. })) => ColumnType::Timestamp { utc },
            _ => ColumnType::Text,
        };
    }
    if seen.arrays == values {
        match seen.list_element {
            Some(Some(element)) => return ColumnType::List(element),
            // Only empty arrays: a list of text is as good as any.
            None => return ColumnType::List(ListElement::Text),
            Some(None) => {}
        }
    }
    ColumnType::JsonText
}

#[cfg(test)]
mod tests {
    use super::*;

    fn infer_texts(values: &[&str]) -> ColumnType {
        let raws: Vec<Box<RawValue>> = values
            .iter()
            .map(|v| serde_json::from_str(v).expect("raw"))
            .collect();
        let cells: Vec<Option<&RawValue>> = raws.iter().map(|r| Some(r.as_ref())).collect();
        infer(&cells)
    }

    #[test]
    fn scalar_columns() {
        assert_eq!(infer_texts(&["1", "2", "null"]), ColumnType::Int);
        assert_eq!(infer_texts(&["1", "2.5"]), ColumnType::Float);
        assert_eq!(infer_texts(&["true", "null", "false"]), ColumnType::Bool);
        assert_eq!(infer_texts(&["null", "null"]), ColumnType::AllNull);
        assert_eq!(infer_texts(&["\"a\"", "\"b\""]), ColumnType::Text);
    }

    #[test]
    fn the_whole_column_decides_not_a_prefix() {
        let mut values = vec!["1"; 5000];
        values.push("\"x\"");
        assert_eq!(infer_texts(&values), ColumnType::JsonText);
        let mut values = vec!["1"; 5000];
        values.push("1.5");
        assert_eq!(infer_texts(&values), ColumnType::Float);
    }

    #[test]
    fn big_integers_never_become_floats() {
        assert_eq!(
            infer_texts(&["1", "12345678901234567890123"]),
            ColumnType::Decimal
        );
        assert_eq!(infer_texts(&[&"9".repeat(39)]), ColumnType::JsonText);
        // An int+float mix with an integer f64 cannot hold stays text.
        assert_eq!(
            infer_texts(&["9007199254740993", "0.5"]),
            ColumnType::JsonText
        );
        assert_eq!(infer_texts(&["1e400"]), ColumnType::JsonText);
    }

    #[test]
    fn numbers_in_strings_only_when_every_value_is_canonical() {
        assert_eq!(
            infer_texts(&["\"336776\"", "\"-4\""]),
            ColumnType::IntFromText
        );
        assert_eq!(infer_texts(&["\"336776\"", "\"007\""]), ColumnType::Text);
        assert_eq!(infer_texts(&["\"1e5\""]), ColumnType::Text);
        assert_eq!(infer_texts(&["\"1.0\""]), ColumnType::Text);
    }

    #[test]
    fn decimal_strings_only_for_text_sources_and_only_canonical() {
        let text = IngestOptions {
            decimal_strings: true,
        };
        let with = |values: &[&str]| {
            let raws: Vec<Box<RawValue>> = values
                .iter()
                .map(|v| serde_json::from_str(v).expect("raw"))
                .collect();
            let cells: Vec<Option<&RawValue>> = raws.iter().map(|r| Some(r.as_ref())).collect();
            infer_with(&cells, text)
        };
        assert_eq!(
            with(&["\"41.13\"", "\"-0.5\"", "null"]),
            ColumnType::FloatFromText
        );
        assert_eq!(infer_texts(&["\"41.13\""]), ColumnType::Text);
        // One form only: integers, exponents, leading zeros, grouping and signs stay text.
        for odd in [
            "\"1\"",
            "\"1e5\"",
            "\"007.5\"",
            "\"1,234.5\"",
            "\"+1.5\"",
            "\".5\"",
            "\"5.\"",
        ] {
            assert_eq!(with(&["\"1.5\"", odd]), ColumnType::Text, "{odd}");
        }
        // Integers still win when every value is one.
        assert_eq!(with(&["\"12\"", "\"-3\""]), ColumnType::IntFromText);
        // More digits than f64 holds exactly: text.
        assert_eq!(with(&["\"3.14159265358979323\""]), ColumnType::Text);
    }

    #[test]
    fn temporal_strings_of_one_form() {
        assert_eq!(
            infer_texts(&["\"2024-01-31\"", "\"1999-12-01\""]),
            ColumnType::Date
        );
        assert_eq!(
            infer_texts(&["\"2024-01-31T10:00:00Z\"", "\"2024-02-01T00:00:00.123Z\""]),
            ColumnType::Timestamp { utc: true }
        );
        assert_eq!(
            infer_texts(&["\"2024-01-31 10:00:00\""]),
            ColumnType::Timestamp { utc: false }
        );
        // Mixed forms, offsets, impossible dates and nanoseconds stay text.
        assert_eq!(
            infer_texts(&["\"2024-01-31\"", "\"2024-01-31T10:00:00Z\""]),
            ColumnType::Text
        );
        assert_eq!(
            infer_texts(&["\"2024-01-31T10:00:00+02:00\""]),
            ColumnType::Text
        );
        assert_eq!(infer_texts(&["\"2024-02-30\""]), ColumnType::Text);
        assert_eq!(
            infer_texts(&["\"2024-01-31T10:00:00.123456789Z\""]),
            ColumnType::Text
        );
        assert_eq!(
            infer_texts(&["\"2024-01-31T10:00:00Z\"", "\"2024-01-31 10:00:00Z\""]),
            ColumnType::Text
        );
    }

    #[test]
    fn lists_only_when_homogeneous() {
        assert_eq!(
            infer_texts(&["[1, 2]", "[]", "null"]),
            ColumnType::List(ListElement::Int)
        );
        assert_eq!(
            infer_texts(&["[1, 2.5]"]),
            ColumnType::List(ListElement::Float)
        );
        assert_eq!(
            infer_texts(&["[\"a\"]", "[\"b\", null]"]),
            ColumnType::List(ListElement::Text)
        );
        assert_eq!(infer_texts(&["[1, \"a\"]"]), ColumnType::JsonText);
        assert_eq!(infer_texts(&["[[1]]"]), ColumnType::JsonText);
        assert_eq!(infer_texts(&["[{\"a\": 1}]"]), ColumnType::JsonText);
    }

    #[test]
    fn parses_dates_and_times() {
        assert_eq!(parse_date("1970-01-02"), Some(1));
        assert_eq!(parse_datetime("1970-01-01T00:00:01.5Z"), Some(1_500_000));
        assert_eq!(parse_datetime("1970-01-01 00:00:01"), Some(1_000_000));
        assert_eq!(
            parse_datetime("2024-02-29T23:59:59.000001Z"),
            Some(1_709_251_199_000_001)
        );
        assert_eq!(parse_datetime("1970-01-01T00:00:00.12Z"), Some(120_000));
        assert_eq!(parse_date("2024-02-29"), Some(19_782));
        for bad in [
            "2023-02-29",
            "2024-13-01",
            "2024-00-10",
            "2024-01-01T24:00:00",
            "2024-01-01T23:60:00",
            "2016-12-31T23:59:60Z",
            "2024-1-01",
            "2024-01-01T10:00",
            "２０２４-01-01",
            "2024-01-01T10:00:00.Z",
            "2024-01-01T10:00:00+01:00",
        ] {
            assert_eq!(temporal_form(bad), None, "{bad}");
        }
        assert_eq!(parse_date("2024-01-01T00:00:00"), None);
        assert_eq!(parse_datetime("2024-01-01"), None);
    }
}
