//! Column statistics, computed once when a dataset is created: null fraction, distinct count
//! (exact up to [`DISTINCT_CAP`] values, a lower bound beyond), uniqueness, min and max.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use serde_json::Value;

use super::values::{cell, type_name};

/// Distinct values are counted exactly up to this many; past it the count is a lower bound.
pub const DISTINCT_CAP: usize = 100_000;

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ColumnProfile {
    pub name: String,
    #[serde(rename = "type")]
    pub data_type: String,
    pub null_fraction: f64,
    pub approx_distinct: usize,
    /// distinct / non-null values (1.0 = every value different).
    pub uniqueness: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<Value>,
    /// Hashes of distinct values (up to the cap), kept for join hints.
    #[serde(skip)]
    pub distinct_hashes: HashSet<u64>,
}

fn value_hash(array: &ArrayRef, row: usize) -> u64 {
    let mut hasher = DefaultHasher::new();
    match array.data_type() {
        DataType::Utf8 => array.as_string::<i32>().value(row).hash(&mut hasher),
        DataType::LargeUtf8 => array.as_string::<i64>().value(row).hash(&mut hasher),
        DataType::Utf8View => array.as_string_view().value(row).hash(&mut hasher),
        DataType::Int64 => array
            .as_primitive::<arrow::datatypes::Int64Type>()
            .value(row)
            .hash(&mut hasher),
        // Everything else through its typed JSON form: slower, but one path for all types.
        _ => cell(array, row).to_string().hash(&mut hasher),
    }
    hasher.finish()
}

/// Whether min/max mean something for this type.
fn ordered(data_type: &DataType) -> bool {
    data_type.is_numeric()
        || data_type.is_temporal()
        || matches!(
            data_type,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Boolean
        )
}

fn compare(a: &Value, b: &Value) -> std::cmp::Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x
            .as_f64()
            .partial_cmp(&y.as_f64())
            .unwrap_or(std::cmp::Ordering::Equal),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        _ => std::cmp::Ordering::Equal,
    }
}

pub fn profile(schema: &SchemaRef, batches: &[RecordBatch]) -> Vec<ColumnProfile> {
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    schema
        .fields()
        .iter()
        .enumerate()
        .map(|(index, field)| {
            let mut nulls = 0;
            let mut distinct = HashSet::new();
            let mut min: Option<Value> = None;
            let mut max: Option<Value> = None;
            let is_ordered = ordered(field.data_type());
            for batch in batches {
                let array = batch.column(index);
                nulls += array.null_count();
                if is_ordered {
                    // Typed JSON values compare the way a reader expects (numbers numerically,
                    // ISO timestamps and dates lexically = chronologically).
                    for row in 0..array.len() {
                        if array.is_null(row) {
                            continue;
                        }
                        let value = cell(array, row);
                        if min.as_ref().is_none_or(|m| compare(&value, m).is_lt()) {
                            min = Some(value.clone());
                        }
                        if max.as_ref().is_none_or(|m| compare(&value, m).is_gt()) {
                            max = Some(value);
                        }
                    }
                }
                for row in 0..array.len() {
                    if distinct.len() >= DISTINCT_CAP {
                        break;
                    }
                    if !array.is_null(row) {
                        distinct.insert(value_hash(array, row));
                    }
                }
            }
            let non_null = rows - nulls;
            ColumnProfile {
                name: field.name().clone(),
                data_type: type_name(field.data_type()),
                null_fraction: if rows == 0 {
                    0.0
                } else {
                    nulls as f64 / rows as f64
                },
                approx_distinct: distinct.len(),
                uniqueness: if non_null == 0 {
                    0.0
                } else {
                    distinct.len() as f64 / non_null as f64
                },
                min,
                max,
                distinct_hashes: distinct,
            }
        })
        .collect()
}
