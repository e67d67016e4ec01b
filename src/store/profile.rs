//! Column statistics, computed once when a dataset is created: null fraction, distinct count
//! (exact up to [`DISTINCT_CAP`] values, a lower bound beyond), uniqueness, min and max.

use std::collections::HashSet;
use std::hash::BuildHasherDefault;
use std::hash::{DefaultHasher, Hash, Hasher};

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, make_comparator};
use arrow::datatypes::{DataType, SchemaRef};
use serde_json::Value;

use super::values::{cell, type_name};

/// The members are already hashes: hashing them again (SipHash) would only cost time, so the
/// set uses them as they are (with one multiply to spread the bits).
#[derive(Default, Clone, Copy)]
pub struct PrehashedHasher(u64);

impl Hasher for PrehashedHasher {
    fn finish(&self) -> u64 {
        self.0.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

/// A set of value hashes.
pub type HashSetOfHashes = HashSet<u64, BuildHasherDefault<PrehashedHasher>>;

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
    pub distinct_hashes: HashSetOfHashes,
    /// The smallest [`SKETCH_SIZE`] of them, sorted.
    #[serde(skip)]
    pub sketch: Vec<u64>,
    /// Whether the distinct set hit [`DISTINCT_CAP`] (counts are lower bounds then).
    #[serde(skip)]
    pub capped: bool,
}

/// The hash a value is known by in join sketches. Integers — whatever their Arrow type — and
/// strings that are canonical integers share one hash space, so a text column of `"336776"`
/// meets an Int64 column of `336776`.
fn value_hash(array: &ArrayRef, row: usize) -> u64 {
    use arrow::datatypes::{Int32Type, Int64Type, UInt32Type, UInt64Type};
    let mut hasher = DefaultHasher::new();
    let int = |v: i64, hasher: &mut DefaultHasher| {
        hasher.write_u8(1);
        v.hash(hasher);
    };
    let text = |s: &str, hasher: &mut DefaultHasher| match crate::ingest::cells::canonical_int(s) {
        Some(v) => int(v, hasher),
        None => {
            hasher.write_u8(2);
            s.hash(hasher);
        }
    };
    match array.data_type() {
        DataType::Utf8 => text(array.as_string::<i32>().value(row), &mut hasher),
        DataType::LargeUtf8 => text(array.as_string::<i64>().value(row), &mut hasher),
        DataType::Utf8View => text(array.as_string_view().value(row), &mut hasher),
        DataType::Int64 => int(array.as_primitive::<Int64Type>().value(row), &mut hasher),
        DataType::Int32 => int(
            i64::from(array.as_primitive::<Int32Type>().value(row)),
            &mut hasher,
        ),
        DataType::UInt32 => int(
            i64::from(array.as_primitive::<UInt32Type>().value(row)),
            &mut hasher,
        ),
        DataType::UInt64 => match i64::try_from(array.as_primitive::<UInt64Type>().value(row)) {
            Ok(v) => int(v, &mut hasher),
            Err(_) => cell(array, row).to_string().hash(&mut hasher),
        },
        DataType::Float64 => {
            hasher.write_u8(4);
            array
                .as_primitive::<arrow::datatypes::Float64Type>()
                .value(row)
                .to_bits()
                .hash(&mut hasher);
        }
        DataType::Boolean => {
            hasher.write_u8(5);
            array.as_boolean().value(row).hash(&mut hasher);
        }
        DataType::Date32 => {
            hasher.write_u8(6);
            array
                .as_primitive::<arrow::datatypes::Date32Type>()
                .value(row)
                .hash(&mut hasher);
        }
        DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, _) => {
            hasher.write_u8(7);
            array
                .as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
                .value(row)
                .hash(&mut hasher);
        }
        // Everything else through its typed JSON form: slower, but one path for all types.
        _ => {
            hasher.write_u8(3);
            cell(array, row).to_string().hash(&mut hasher);
        }
    }
    hasher.finish()
}

/// Hash sketch size: the `SKETCH_SIZE` smallest distinct hashes are a uniform sample of the
/// column's distinct values (bottom-k), enough to estimate containment in another column.
pub const SKETCH_SIZE: usize = 64;

/// Whether min/max mean something for this type.
fn ordered(data_type: &DataType) -> bool {
    data_type.is_numeric()
        || data_type.is_temporal()
        || matches!(
            data_type,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Boolean
        )
}

/// The rows holding the smallest and largest non-null values of `array`.
fn extremes(array: &ArrayRef) -> (Option<usize>, Option<usize>) {
    let Ok(cmp) = make_comparator(
        array.as_ref(),
        array.as_ref(),
        arrow::compute::SortOptions::default(),
    ) else {
        return (None, None);
    };
    let mut lo: Option<usize> = None;
    let mut hi: Option<usize> = None;
    for row in (0..array.len()).filter(|r| !array.is_null(*r)) {
        if lo.is_none_or(|l| cmp(row, l).is_lt()) {
            lo = Some(row);
        }
        if hi.is_none_or(|h| cmp(row, h).is_gt()) {
            hi = Some(row);
        }
    }
    (lo, hi)
}

pub fn profile(schema: &SchemaRef, batches: &[RecordBatch]) -> Vec<ColumnProfile> {
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    schema
        .fields()
        .iter()
        .enumerate()
        .map(|(index, field)| {
            let mut nulls = 0;
            let mut distinct = HashSetOfHashes::default();
            let mut min_at: Option<(ArrayRef, usize)> = None;
            let mut max_at: Option<(ArrayRef, usize)> = None;
            let is_ordered = ordered(field.data_type());
            for batch in batches {
                let array = batch.column(index);
                nulls += array.null_count();
                if is_ordered {
                    // Compared on the typed values (decimals as integers, timestamps as instants),
                    // then shown as typed JSON.
                    let (lo, hi) = extremes(array);
                    for (found, slot, want) in [
                        (lo, &mut min_at, std::cmp::Ordering::Less),
                        (hi, &mut max_at, std::cmp::Ordering::Greater),
                    ] {
                        let Some(row) = found else { continue };
                        let better = match slot {
                            None => true,
                            Some((held, held_row)) => make_comparator(
                                array.as_ref(),
                                held.as_ref(),
                                arrow::compute::SortOptions::default(),
                            )
                            .map(|cmp| cmp(row, *held_row) == want)
                            .unwrap_or(false),
                        };
                        if better {
                            *slot = Some((array.clone(), row));
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
            let min = min_at.map(|(array, row)| cell(&array, row));
            let max = max_at.map(|(array, row)| cell(&array, row));
            let non_null = rows - nulls;
            let mut sketch: Vec<u64> = distinct.iter().copied().collect();
            if sketch.len() > SKETCH_SIZE {
                sketch.select_nth_unstable(SKETCH_SIZE);
                sketch.truncate(SKETCH_SIZE);
            }
            sketch.sort_unstable();
            ColumnProfile {
                capped: distinct.len() >= DISTINCT_CAP,
                sketch,
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
