//! Arrow values as typed JSON: an Int64 is a JSON number, a timestamp an ISO-8601 string, a list
//! an array. Used by envelopes, query results and exports alike, so a value reads the same
//! everywhere.

use crate::common::text::cut;
use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{
    DataType, Date32Type, Date64Type, Decimal128Type, Float32Type, Float64Type, Int8Type,
    Int16Type, Int32Type, Int64Type, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use chrono::{DateTime, NaiveDate};
use serde_json::{Number, Value};

/// Integers beyond this are written as strings in JSON, because most JSON readers (JavaScript's
/// among them) would round them.
pub const JSON_SAFE_INT: i128 = 9_007_199_254_740_991;

fn float(v: f64) -> Value {
    Number::from_f64(v)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

fn timestamp(micros: i64, utc: bool) -> Value {
    match DateTime::from_timestamp_micros(micros) {
        Some(dt) => iso(dt, utc),
        None => Value::Null,
    }
}

/// An instant with as many fraction digits as it needs: none, 6 (µs) or 9 (ns, never cut to µs).
fn iso(dt: DateTime<chrono::Utc>, utc: bool) -> Value {
    let naive = dt.naive_utc();
    let nanos = dt.timestamp_subsec_nanos();
    let text = if nanos == 0 {
        naive.format("%Y-%m-%dT%H:%M:%S").to_string()
    } else if nanos.is_multiple_of(1000) {
        naive.format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
    } else {
        naive.format("%Y-%m-%dT%H:%M:%S%.9f").to_string()
    };
    Value::String(if utc { format!("{text}Z") } else { text })
}

fn date(days: i32) -> Value {
    NaiveDate::from_ymd_opt(1970, 1, 1)
        .and_then(|epoch| epoch.checked_add_signed(chrono::Duration::days(i64::from(days))))
        .map(|d| Value::String(d.format("%Y-%m-%d").to_string()))
        .unwrap_or(Value::Null)
}

/// An integer as JSON: a number within ±(2^53 − 1), where every JSON reader (JavaScript's
/// included) keeps its value; beyond, a string of its digits, so no client rounds an ID.
fn json_integer(value: i128) -> Value {
    if (-JSON_SAFE_INT..=JSON_SAFE_INT).contains(&value) {
        i64::try_from(value).map_or(Value::Null, Value::from)
    } else {
        Value::String(value.to_string())
    }
}

/// The value at `row` of `array` as typed JSON.
pub fn cell(array: &ArrayRef, row: usize) -> Value {
    if array.is_null(row) {
        return Value::Null;
    }
    match array.data_type() {
        DataType::Null => Value::Null,
        DataType::Boolean => Value::Bool(array.as_boolean().value(row)),
        DataType::Int8 => array.as_primitive::<Int8Type>().value(row).into(),
        DataType::Int16 => array.as_primitive::<Int16Type>().value(row).into(),
        DataType::Int32 => array.as_primitive::<Int32Type>().value(row).into(),
        DataType::Int64 => json_integer(i128::from(array.as_primitive::<Int64Type>().value(row))),
        DataType::UInt8 => array.as_primitive::<UInt8Type>().value(row).into(),
        DataType::UInt16 => array.as_primitive::<UInt16Type>().value(row).into(),
        DataType::UInt32 => array.as_primitive::<UInt32Type>().value(row).into(),
        DataType::UInt64 => json_integer(i128::from(array.as_primitive::<UInt64Type>().value(row))),
        DataType::Float32 => float(f64::from(array.as_primitive::<Float32Type>().value(row))),
        DataType::Float64 => float(array.as_primitive::<Float64Type>().value(row)),
        DataType::Decimal128(_, scale) => {
            let raw = array.as_primitive::<Decimal128Type>().value(row);
            if *scale == 0 && (-JSON_SAFE_INT..=JSON_SAFE_INT).contains(&raw) {
                i64::try_from(raw).map(Value::from).unwrap_or(Value::Null)
            } else {
                Value::String(array.as_primitive::<Decimal128Type>().value_as_string(row))
            }
        }
        DataType::Utf8 => Value::String(array.as_string::<i32>().value(row).to_string()),
        DataType::LargeUtf8 => Value::String(array.as_string::<i64>().value(row).to_string()),
        DataType::Utf8View => Value::String(array.as_string_view().value(row).to_string()),
        DataType::Date32 => date(array.as_primitive::<Date32Type>().value(row)),
        DataType::Date64 => {
            let ms = array.as_primitive::<Date64Type>().value(row);
            date(i32::try_from(ms.div_euclid(86_400_000)).unwrap_or(i32::MAX))
        }
        DataType::Timestamp(unit, tz) => {
            let utc = tz.is_some();
            let micros = match unit {
                TimeUnit::Second => array
                    .as_primitive::<TimestampSecondType>()
                    .value(row)
                    .saturating_mul(1_000_000),
                TimeUnit::Millisecond => array
                    .as_primitive::<TimestampMillisecondType>()
                    .value(row)
                    .saturating_mul(1_000),
                TimeUnit::Microsecond => {
                    array.as_primitive::<TimestampMicrosecondType>().value(row)
                }
                TimeUnit::Nanosecond => {
                    let nanos = array.as_primitive::<TimestampNanosecondType>().value(row);
                    return iso(DateTime::from_timestamp_nanos(nanos), utc);
                }
            };
            timestamp(micros, utc)
        }
        DataType::List(_) => {
            let list = array.as_list::<i32>().value(row);
            Value::Array((0..list.len()).map(|i| cell(&list, i)).collect())
        }
        DataType::LargeList(_) => {
            let list = array.as_list::<i64>().value(row);
            Value::Array((0..list.len()).map(|i| cell(&list, i)).collect())
        }
        DataType::Struct(fields) => {
            let s = array.as_struct();
            Value::Object(
                fields
                    .iter()
                    .zip(s.columns())
                    .map(|(f, c)| (f.name().clone(), cell(c, row)))
                    .collect(),
            )
        }
        _ => {
            // Everything else (intervals, binary, maps…) as arrow's own display text.
            match arrow::util::display::array_value_to_string(array, row) {
                Ok(text) => Value::String(text),
                Err(_) => Value::Null,
            }
        }
    }
}

/// How much of a value an answer shows (samples, `loom_describe`): strings cut to `chars`
/// characters, lists and structs to their first `items` entries with the rest counted, nesting
/// to `depth` levels — so that an answer stays small inside lists and structs too (a 3-row
/// sample of 200,000-element lists was 2.6 MB).
#[derive(Debug, Clone, Copy)]
pub struct Shown {
    pub chars: usize,
    pub items: usize,
    pub depth: usize,
}

impl Shown {
    pub const fn new(chars: usize) -> Self {
        Self {
            chars,
            items: 10,
            depth: 3,
        }
    }
}

/// The value at `row` of `array` as typed JSON, within `shown`: a list past its first `items`
/// elements ends with `"… N more"`, a struct past its first `items` fields with the member
/// `"…": "N more"`, a list or struct nested deeper than `depth` is `"[N items]"` /
/// `"{N fields}"`. Only what is shown is converted.
pub fn cell_shown(array: &ArrayRef, row: usize, shown: Shown) -> Value {
    if array.is_null(row) {
        return Value::Null;
    }
    let list = |values: ArrayRef| -> Value {
        if shown.depth == 0 {
            return Value::String(format!("[{} items]", values.len()));
        }
        let inner = Shown {
            depth: shown.depth - 1,
            ..shown
        };
        let mut out: Vec<Value> = (0..values.len().min(shown.items))
            .map(|i| cell_shown(&values, i, inner))
            .collect();
        if values.len() > shown.items {
            out.push(Value::String(format!(
                "… {} more",
                values.len() - shown.items
            )));
        }
        Value::Array(out)
    };
    match array.data_type() {
        DataType::List(_) => list(array.as_list::<i32>().value(row)),
        DataType::LargeList(_) => list(array.as_list::<i64>().value(row)),
        DataType::FixedSizeList(_, _) => list(array.as_fixed_size_list().value(row)),
        DataType::Struct(fields) => {
            if shown.depth == 0 {
                return Value::String(format!("{{{} fields}}", fields.len()));
            }
            let inner = Shown {
                depth: shown.depth - 1,
                ..shown
            };
            let s = array.as_struct();
            let mut out: serde_json::Map<String, Value> = fields
                .iter()
                .zip(s.columns())
                .take(shown.items)
                .map(|(f, c)| (cut(f.name(), shown.chars), cell_shown(c, row, inner)))
                .collect();
            if fields.len() > shown.items {
                out.insert(
                    "…".into(),
                    Value::String(format!("{} more", fields.len() - shown.items)),
                );
            }
            Value::Object(out)
        }
        DataType::Utf8 => Value::String(cut(array.as_string::<i32>().value(row), shown.chars)),
        DataType::LargeUtf8 => Value::String(cut(array.as_string::<i64>().value(row), shown.chars)),
        DataType::Utf8View => Value::String(cut(array.as_string_view().value(row), shown.chars)),
        _ => match cell(array, row) {
            Value::String(s) => Value::String(cut(&s, shown.chars)),
            other => other,
        },
    }
}

/// A short type name for schemas shown to a model (`Int64`, `Utf8`, `Timestamp(µs, UTC)`).
pub fn type_name(data_type: &DataType) -> String {
    match data_type {
        DataType::Timestamp(unit, tz) => {
            let unit = match unit {
                TimeUnit::Second => "s",
                TimeUnit::Millisecond => "ms",
                TimeUnit::Microsecond => "µs",
                TimeUnit::Nanosecond => "ns",
            };
            match tz {
                Some(tz) => format!("Timestamp({unit}, {tz})"),
                None => format!("Timestamp({unit})"),
            }
        }
        DataType::List(field) | DataType::LargeList(field) => {
            format!("List({})", type_name(field.data_type()))
        }
        DataType::Utf8View | DataType::LargeUtf8 => "Utf8".to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array, UInt64Array};
    use serde_json::json;

    use super::cell;

    #[test]
    fn integers_beyond_2_pow_53_are_strings_of_their_digits() {
        let signed: ArrayRef = Arc::new(Int64Array::from(vec![
            9_007_199_254_740_991,
            9_007_199_254_740_993,
            -9_007_199_254_740_993,
            i64::MIN,
        ]));
        let values: Vec<_> = (0..4).map(|row| cell(&signed, row)).collect();
        assert_eq!(
            values,
            [
                json!(9_007_199_254_740_991_i64),
                json!("9007199254740993"),
                json!("-9007199254740993"),
                json!("-9223372036854775808"),
            ]
        );
        let unsigned: ArrayRef = Arc::new(UInt64Array::from(vec![7, u64::MAX]));
        assert_eq!(cell(&unsigned, 0), json!(7));
        assert_eq!(cell(&unsigned, 1), json!("18446744073709551615"));
    }

    #[test]
    fn nanosecond_timestamps_keep_their_nanoseconds() {
        use arrow::array::TimestampNanosecondArray;
        let stamps: ArrayRef = Arc::new(
            TimestampNanosecondArray::from(vec![
                1_704_164_645_123_456_789,
                1_704_164_645_123_456_000,
                1_704_164_645_000_000_000,
                -2_208_898_000_000_000_001,
            ])
            .with_timezone("UTC"),
        );
        let texts: Vec<serde_json::Value> = (0..4).map(|row| cell(&stamps, row)).collect();
        assert_eq!(
            texts,
            [
                "2024-01-02T03:04:05.123456789Z",
                "2024-01-02T03:04:05.123456Z",
                "2024-01-02T03:04:05Z",
                "1900-01-02T01:13:19.999999999Z",
            ]
        );
    }
}
