//! Arrow arrays from typed columns, with arrow's builders. A value that does not fit the inferred
//! type at this point is a bug in inference, reported as an error (the caller then passes the
//! original result through) — never silently nulled.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanBuilder, Date32Builder, Decimal128Builder, Float64Builder, Int64Builder,
    ListBuilder, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow::datatypes::Field;
use serde_json::value::RawValue;

use super::cells::{
    NumberText, canonical_decimal, canonical_int, classify_number, for_each_element,
};
use super::infer::{ColumnType, ListElement, parse_date, parse_datetime};
use super::{IngestError, SOURCE_KEY, TYPING_KEY};
use crate::common::json::{Kind, kind, string_content};

fn mismatch(source: &str, value: &RawValue, wanted: &str) -> IngestError {
    let mut shown = value.get().to_string();
    shown.truncate(60);
    IngestError::Arrow(format!("`{source}`: {shown} is not {wanted}"))
}

fn present<'a>(cell: &Option<&'a RawValue>) -> Option<&'a RawValue> {
    cell.filter(|raw| kind(raw) != Kind::Null)
}

/// The text stored for a value in a text column: a string's content, any other value's JSON.
/// A string JSON cannot decode (a lone surrogate `\ud800`) is an error, never stored as its raw
/// JSON text: the result then passes through untouched.
fn as_text<'a>(raw: &'a RawValue, source: &str) -> Result<std::borrow::Cow<'a, str>, IngestError> {
    if kind(raw) == Kind::String {
        string_content(raw).ok_or_else(|| mismatch(source, raw, "a decodable string"))
    } else {
        Ok(std::borrow::Cow::Borrowed(raw.get()))
    }
}

fn typing_note(typing: ColumnType) -> Option<&'static str> {
    match typing {
        ColumnType::IntFromText => Some("integers written as strings"),
        ColumnType::FloatFromText => Some("decimals written as text"),
        ColumnType::JsonText => Some("mixed or nested values as JSON text"),
        ColumnType::Decimal => Some("integers beyond 64 bits"),
        ColumnType::AllNull => Some("every value null"),
        _ => None,
    }
}

pub(super) fn build_column(
    name: &str,
    typing: ColumnType,
    cells: &[Option<&RawValue>],
    source: &str,
) -> Result<(Field, ArrayRef), IngestError> {
    let n = cells.len();
    let array: ArrayRef = match typing {
        ColumnType::Bool => {
            let mut b = BooleanBuilder::with_capacity(n);
            for cell in cells {
                b.append_option(present(cell).map(|raw| raw.get() == "true"));
            }
            Arc::new(b.finish())
        }
        ColumnType::Int => {
            let mut b = Int64Builder::with_capacity(n);
            for cell in cells {
                match present(cell) {
                    None => b.append_null(),
                    Some(raw) => match classify_number(raw.get()) {
                        NumberText::Int(v) => b.append_value(v),
                        _ => return Err(mismatch(source, raw, "a 64-bit integer")),
                    },
                }
            }
            Arc::new(b.finish())
        }
        ColumnType::IntFromText => {
            let mut b = Int64Builder::with_capacity(n);
            for cell in cells {
                match present(cell) {
                    None => b.append_null(),
                    Some(raw) => match string_content(raw).and_then(|s| canonical_int(&s)) {
                        Some(v) => b.append_value(v),
                        None => return Err(mismatch(source, raw, "a canonical integer string")),
                    },
                }
            }
            Arc::new(b.finish())
        }
        ColumnType::FloatFromText => {
            let mut b = Float64Builder::with_capacity(n);
            for cell in cells {
                match present(cell) {
                    None => b.append_null(),
                    Some(raw) => match string_content(raw).and_then(|s| canonical_decimal(&s)) {
                        Some(v) => b.append_value(v),
                        None => return Err(mismatch(source, raw, "a canonical decimal string")),
                    },
                }
            }
            Arc::new(b.finish())
        }
        ColumnType::Float => {
            let mut b = Float64Builder::with_capacity(n);
            for cell in cells {
                match present(cell) {
                    None => b.append_null(),
                    Some(raw) => match raw.get().parse::<f64>() {
                        Ok(v) if v.is_finite() => b.append_value(v),
                        _ => return Err(mismatch(source, raw, "a finite number")),
                    },
                }
            }
            Arc::new(b.finish())
        }
        ColumnType::Decimal => {
            let mut b = Decimal128Builder::with_capacity(n)
                .with_precision_and_scale(38, 0)
                .map_err(|e| IngestError::Arrow(e.to_string()))?;
            for cell in cells {
                match present(cell) {
                    None => b.append_null(),
                    Some(raw) => match raw.get().parse::<i128>() {
                        Ok(v) => b.append_value(v),
                        Err(_) => {
                            return Err(mismatch(source, raw, "an integer of 38 digits or fewer"));
                        }
                    },
                }
            }
            Arc::new(b.finish())
        }
        ColumnType::Date => {
            let mut b = Date32Builder::with_capacity(n);
            for cell in cells {
                match present(cell) {
                    None => b.append_null(),
                    Some(raw) => match string_content(raw).and_then(|s| parse_date(&s)) {
                        Some(v) => b.append_value(v),
                        None => return Err(mismatch(source, raw, "a date")),
                    },
                }
            }
            Arc::new(b.finish())
        }
        ColumnType::Timestamp { utc } => {
            let mut b = TimestampMicrosecondBuilder::with_capacity(n);
            for cell in cells {
                match present(cell) {
                    None => b.append_null(),
                    Some(raw) => match string_content(raw).and_then(|s| parse_datetime(&s)) {
                        Some(v) => b.append_value(v),
                        None => return Err(mismatch(source, raw, "a date-time")),
                    },
                }
            }
            let array = b.finish();
            if utc {
                Arc::new(array.with_timezone("UTC"))
            } else {
                Arc::new(array)
            }
        }
        ColumnType::List(element) => build_list(element, cells, source)?,
        ColumnType::Text | ColumnType::JsonText | ColumnType::AllNull => {
            let mut b = StringBuilder::with_capacity(n, n * 16);
            for cell in cells {
                match present(cell) {
                    None => b.append_null(),
                    Some(raw) => b.append_value(as_text(raw, source)?),
                }
            }
            Arc::new(b.finish())
        }
    };
    let mut metadata = HashMap::from([(SOURCE_KEY.to_string(), source.to_string())]);
    if let Some(note) = typing_note(typing) {
        metadata.insert(TYPING_KEY.to_string(), note.to_string());
    }
    let field = Field::new(name, array.data_type().clone(), true).with_metadata(metadata);
    Ok((field, array))
}

/// The elements of a raw array (null ones as `None`) into `into`, which is cleared first: one
/// buffer serves every cell of a column.
fn elements<'a>(
    raw: &'a RawValue,
    source: &str,
    into: &mut Vec<Option<&'a RawValue>>,
) -> Result<(), IngestError> {
    into.clear();
    for_each_element(raw, |v| into.push((kind(v) != Kind::Null).then_some(v)))
        .map_err(|_| mismatch(source, raw, "an array"))
}

fn build_list(
    element: ListElement,
    cells: &[Option<&RawValue>],
    source: &str,
) -> Result<ArrayRef, IngestError> {
    macro_rules! list {
        ($builder:expr, $append:expr) => {{
            let mut b = ListBuilder::new($builder);
            let mut values = Vec::new();
            for cell in cells {
                match present(cell) {
                    None => b.append_null(),
                    Some(raw) => {
                        elements(raw, source, &mut values)?;
                        for value in values.iter().copied() {
                            #[allow(clippy::redundant_closure_call)]
                            $append(b.values(), value)?;
                        }
                        b.append(true);
                    }
                }
            }
            Arc::new(b.finish()) as ArrayRef
        }};
    }
    Ok(match element {
        ListElement::Bool => list!(
            BooleanBuilder::new(),
            |v: &mut BooleanBuilder, x: Option<&RawValue>| {
                v.append_option(x.map(|raw| raw.get() == "true"));
                Ok::<(), IngestError>(())
            }
        ),
        ListElement::Int => list!(
            Int64Builder::new(),
            |v: &mut Int64Builder, x: Option<&RawValue>| {
                match x {
                    None => v.append_null(),
                    Some(raw) => match classify_number(raw.get()) {
                        NumberText::Int(n) => v.append_value(n),
                        _ => return Err(mismatch(source, raw, "an integer")),
                    },
                }
                Ok(())
            }
        ),
        ListElement::Float => list!(
            Float64Builder::new(),
            |v: &mut Float64Builder, x: Option<&RawValue>| {
                match x {
                    None => v.append_null(),
                    Some(raw) => match raw.get().parse::<f64>() {
                        Ok(n) if n.is_finite() => v.append_value(n),
                        _ => return Err(mismatch(source, raw, "a number")),
                    },
                }
                Ok(())
            }
        ),
        ListElement::Text => list!(
            StringBuilder::new(),
            |v: &mut StringBuilder, x: Option<&RawValue>| {
                match x {
                    None => v.append_null(),
                    Some(raw) => v.append_value(as_text(raw, source)?),
                }
                Ok::<(), IngestError>(())
            }
        ),
    })
}
