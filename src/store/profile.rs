//! Column statistics, computed once when a dataset is created: null fraction, distinct count,
//! uniqueness, min and max — plus the value hashes join hints are scored from.
//!
//! Every value is hashed once, with a typed loop per column (no per-cell dispatch, no JSON), the
//! hashes are sorted and deduplicated: the count is exact (up to 64-bit hash collisions), and the
//! sorted list doubles as the join-hint index — the smallest [`SKETCH_SIZE`] of it are the
//! column's bottom-k sketch, and looking a sketch up in another column's list is a merge of two
//! sorted runs.

use std::cmp::Ordering;
use std::hash::{BuildHasher, Hasher};

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, make_comparator};
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Float64Type, Int32Type, Int64Type, SchemaRef, TimeUnit,
    TimestampMicrosecondType, UInt32Type, UInt64Type,
};
use serde_json::Value;

use super::values::{cell, type_name};

/// At most this many distinct-value hashes are kept per column (the smallest ones: a uniform
/// sample of the values, and consistent between columns). The distinct count itself is exact.
pub(crate) const DISTINCT_CAP: usize = 100_000;

/// Hash sketch size: the `SKETCH_SIZE` smallest distinct hashes are a uniform sample of the
/// column's distinct values (bottom-k), enough to estimate containment in another column.
pub(crate) const SKETCH_SIZE: usize = 64;

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
    /// Hashes of the distinct values, ascending: all of them, or the smallest [`DISTINCT_CAP`]
    /// when [`Self::capped`]. Kept for join hints.
    #[serde(skip)]
    pub distinct_hashes: Vec<u64>,
    /// The smallest [`SKETCH_SIZE`] of them, ascending.
    #[serde(skip)]
    pub sketch: Vec<u64>,
    /// Whether `distinct_hashes` holds only the smallest [`DISTINCT_CAP`] of the hashes.
    #[serde(skip)]
    pub capped: bool,
}

/// One fixed seed: a value hashes the same in every dataset and every run.
const HASHES: foldhash::quality::FixedState =
    foldhash::quality::FixedState::with_seed(0x6c6f_6f6d_6a6f_696e);

/// Tags keep the kinds apart: the integer 1, the float 1.0 and `true` are different values.
mod tag {
    pub(super) const INT: u8 = 1;
    pub(super) const TEXT: u8 = 2;
    pub(super) const OTHER: u8 = 3;
    pub(super) const FLOAT: u8 = 4;
    pub(super) const BOOL: u8 = 5;
    pub(super) const DATE: u8 = 6;
    pub(super) const TIMESTAMP: u8 = 7;
    pub(super) const LIST: u8 = 8;
    pub(super) const DECIMAL: u8 = 9;
}

fn hash_tagged(tag: u8, bytes: &[u8]) -> u64 {
    let mut hasher = HASHES.build_hasher();
    hasher.write_u8(tag);
    hasher.write(bytes);
    hasher.finish()
}

/// Integers — whatever their Arrow type — and strings that are canonical integers share one hash
/// space, so a text column of `"336776"` meets an Int64 column of `336776`.
fn hash_int(v: i64) -> u64 {
    hash_tagged(tag::INT, &v.to_le_bytes())
}

fn hash_text(s: &str) -> u64 {
    if let Some(v) = crate::ingest::cells::canonical_int(s) {
        return hash_int(v);
    }
    // A canonical integer beyond 64 bits meets the same number in a Decimal128 column.
    let digits = s.strip_prefix('-').unwrap_or(s);
    let canonical_big = digits.len() > 18
        && digits.len() <= 38
        && !digits.starts_with('0')
        && digits.bytes().all(|b| b.is_ascii_digit());
    match canonical_big.then(|| s.parse::<i128>().ok()).flatten() {
        Some(v) => hash_tagged(tag::DECIMAL, &v.to_le_bytes()),
        None => hash_tagged(tag::TEXT, s.as_bytes()),
    }
}

/// Stands for a null element inside a list (null rows themselves are not hashed).
const NULL_ELEMENT: u64 = 0x9e37_79b9_7f4a_7c15;

/// Call `sink(row, hash)` for every non-null row of `array`, in the hash space join hints
/// compare in. One typed loop per column type.
fn for_each_hash(array: &ArrayRef, sink: &mut dyn FnMut(usize, u64)) {
    fn rows(
        array: &dyn Array,
        mut hash: impl FnMut(usize) -> u64,
        sink: &mut dyn FnMut(usize, u64),
    ) {
        match array.nulls() {
            None => (0..array.len()).for_each(|row| sink(row, hash(row))),
            Some(nulls) => nulls.valid_indices().for_each(|row| sink(row, hash(row))),
        }
    }
    match array.data_type() {
        DataType::Utf8 => {
            let a = array.as_string::<i32>();
            rows(a, |r| hash_text(a.value(r)), sink);
        }
        DataType::LargeUtf8 => {
            let a = array.as_string::<i64>();
            rows(a, |r| hash_text(a.value(r)), sink);
        }
        DataType::Utf8View => {
            let a = array.as_string_view();
            rows(a, |r| hash_text(a.value(r)), sink);
        }
        DataType::Int64 => {
            let a = array.as_primitive::<Int64Type>();
            rows(a, |r| hash_int(a.value(r)), sink);
        }
        DataType::Int32 => {
            let a = array.as_primitive::<Int32Type>();
            rows(a, |r| hash_int(i64::from(a.value(r))), sink);
        }
        DataType::UInt32 => {
            let a = array.as_primitive::<UInt32Type>();
            rows(a, |r| hash_int(i64::from(a.value(r))), sink);
        }
        DataType::UInt64 => {
            let a = array.as_primitive::<UInt64Type>();
            rows(
                a,
                |r| match i64::try_from(a.value(r)) {
                    Ok(v) => hash_int(v),
                    Err(_) => hash_tagged(tag::DECIMAL, &i128::from(a.value(r)).to_le_bytes()),
                },
                sink,
            );
        }
        DataType::Decimal128(_, 0) => {
            // Integers beyond 64 bits; the ones within it meet Int64 columns.
            let a = array.as_primitive::<Decimal128Type>();
            rows(
                a,
                |r| match i64::try_from(a.value(r)) {
                    Ok(v) => hash_int(v),
                    Err(_) => hash_tagged(tag::DECIMAL, &a.value(r).to_le_bytes()),
                },
                sink,
            );
        }
        DataType::Float64 => {
            let a = array.as_primitive::<Float64Type>();
            rows(
                a,
                |r| hash_tagged(tag::FLOAT, &a.value(r).to_bits().to_le_bytes()),
                sink,
            );
        }
        DataType::Boolean => {
            let a = array.as_boolean();
            rows(a, |r| hash_tagged(tag::BOOL, &[u8::from(a.value(r))]), sink);
        }
        DataType::Date32 => {
            let a = array.as_primitive::<Date32Type>();
            rows(
                a,
                |r| hash_tagged(tag::DATE, &a.value(r).to_le_bytes()),
                sink,
            );
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            let a = array.as_primitive::<TimestampMicrosecondType>();
            rows(
                a,
                |r| hash_tagged(tag::TIMESTAMP, &a.value(r).to_le_bytes()),
                sink,
            );
        }
        DataType::List(_) => {
            // A list is the sequence of its elements' hashes.
            let list = array.as_list::<i32>();
            let values = list.values();
            let mut elements = vec![NULL_ELEMENT; values.len()];
            for_each_hash(values, &mut |row, hash| elements[row] = hash);
            let offsets = list.value_offsets();
            rows(
                list,
                |r| {
                    let mut hasher = HASHES.build_hasher();
                    hasher.write_u8(tag::LIST);
                    let (start, end) = (offsets[r] as usize, offsets[r + 1] as usize);
                    for hash in elements.get(start..end).unwrap_or_default() {
                        hasher.write_u64(*hash);
                    }
                    hasher.finish()
                },
                sink,
            );
        }
        // Everything else through its typed JSON form: slower, but one path for all types.
        _ => rows(
            array.as_ref(),
            |r| hash_tagged(tag::OTHER, cell(array, r).to_string().as_bytes()),
            sink,
        ),
    }
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

/// The rows holding the smallest and largest non-null values, by `cmp` over row numbers.
fn scan_extremes(
    array: &dyn Array,
    cmp: impl Fn(usize, usize) -> Ordering,
) -> (Option<usize>, Option<usize>) {
    let mut lo: Option<usize> = None;
    let mut hi: Option<usize> = None;
    let mut visit = |row: usize| {
        if lo.is_none_or(|l| cmp(row, l).is_lt()) {
            lo = Some(row);
        }
        if hi.is_none_or(|h| cmp(row, h).is_gt()) {
            hi = Some(row);
        }
    };
    match array.nulls() {
        None => (0..array.len()).for_each(&mut visit),
        Some(nulls) => nulls.valid_indices().for_each(&mut visit),
    }
    (lo, hi)
}

/// The rows holding the smallest and largest non-null values of `array`, in the order arrow's
/// sort uses (floats by total order). Typed loops for the common types, arrow's dynamic
/// comparator for the rest.
fn extremes(array: &ArrayRef) -> (Option<usize>, Option<usize>) {
    match array.data_type() {
        DataType::Int64 => {
            let a = array.as_primitive::<Int64Type>();
            scan_extremes(a, |x, y| a.value(x).cmp(&a.value(y)))
        }
        DataType::Float64 => {
            let a = array.as_primitive::<Float64Type>();
            scan_extremes(a, |x, y| a.value(x).total_cmp(&a.value(y)))
        }
        DataType::Date32 => {
            let a = array.as_primitive::<Date32Type>();
            scan_extremes(a, |x, y| a.value(x).cmp(&a.value(y)))
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            let a = array.as_primitive::<TimestampMicrosecondType>();
            scan_extremes(a, |x, y| a.value(x).cmp(&a.value(y)))
        }
        DataType::Decimal128(_, _) => {
            let a = array.as_primitive::<Decimal128Type>();
            scan_extremes(a, |x, y| a.value(x).cmp(&a.value(y)))
        }
        DataType::Utf8 => {
            let a = array.as_string::<i32>();
            scan_extremes(a, |x, y| a.value(x).cmp(a.value(y)))
        }
        DataType::Boolean => {
            let a = array.as_boolean();
            scan_extremes(a, |x, y| a.value(x).cmp(&a.value(y)))
        }
        _ => match make_comparator(
            array.as_ref(),
            array.as_ref(),
            arrow::compute::SortOptions::default(),
        ) {
            Ok(cmp) => scan_extremes(array.as_ref(), cmp),
            Err(_) => (None, None),
        },
    }
}

/// Profile every column of `batches`; columns are independent, so a large dataset is profiled
/// on every core ([`crate::parallel`]).
pub(crate) fn profile(schema: &SchemaRef, batches: &[RecordBatch]) -> Vec<ColumnProfile> {
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    crate::parallel::map_columns(schema.fields().len(), rows, |index| {
        profile_column(schema, batches, rows, index)
    })
}

fn profile_column(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    rows: usize,
    index: usize,
) -> ColumnProfile {
    let field = schema.field(index);
    let mut nulls = 0;
    let mut hashes: Vec<u64> = Vec::with_capacity(rows);
    let mut min_at: Option<(ArrayRef, usize)> = None;
    let mut max_at: Option<(ArrayRef, usize)> = None;
    let is_ordered = ordered(field.data_type());
    for batch in batches {
        let array = batch.column(index);
        nulls += array.null_count();
        if is_ordered {
            // Compared on the typed values (decimals as integers, timestamps as instants), then
            // shown as typed JSON.
            let (lo, hi) = extremes(array);
            for (found, slot, want) in [
                (lo, &mut min_at, Ordering::Less),
                (hi, &mut max_at, Ordering::Greater),
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
        for_each_hash(array, &mut |_, hash| hashes.push(hash));
    }
    let min = min_at.map(|(array, row)| cell(&array, row));
    let max = max_at.map(|(array, row)| cell(&array, row));
    let non_null = rows - nulls;
    hashes.sort_unstable();
    hashes.dedup();
    let distinct = hashes.len();
    let capped = distinct > DISTINCT_CAP;
    hashes.truncate(DISTINCT_CAP);
    hashes.shrink_to_fit();
    let sketch = hashes[..distinct.min(SKETCH_SIZE)].to_vec();
    ColumnProfile {
        capped,
        sketch,
        name: field.name().clone(),
        data_type: type_name(field.data_type()),
        null_fraction: if rows == 0 {
            0.0
        } else {
            nulls as f64 / rows as f64
        },
        approx_distinct: distinct,
        uniqueness: if non_null == 0 {
            0.0
        } else {
            distinct as f64 / non_null as f64
        },
        min,
        max,
        distinct_hashes: hashes,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, ListBuilder, StringArray, StringBuilder};
    use arrow::datatypes::{Field, Schema};

    use super::*;

    fn ints_of_five() -> Option<u64> {
        hashes_of(Arc::new(Int64Array::from(vec![5])))[0]
    }

    fn hashes_of(array: ArrayRef) -> Vec<Option<u64>> {
        let mut out = vec![None; array.len()];
        for_each_hash(&array, &mut |row, hash| out[row] = Some(hash));
        out
    }

    #[test]
    fn integers_and_canonical_integer_strings_share_hashes() {
        let ints = hashes_of(Arc::new(Int64Array::from(vec![
            Some(336776),
            None,
            Some(-5),
        ])));
        let texts = hashes_of(Arc::new(StringArray::from(vec!["336776", "x", "-5"])));
        assert_eq!(ints[0], texts[0]);
        assert_eq!(ints[1], None, "nulls are not hashed");
        assert_eq!(ints[2], texts[2]);
        let padded = hashes_of(Arc::new(StringArray::from(vec!["0336776"])));
        assert_ne!(padded[0], ints[0], "a padded string is another value");
        let big = 123_456_789_012_345_678_901_i128;
        let decimals = hashes_of(Arc::new(
            arrow::array::Decimal128Array::from(vec![big, -big, 5])
                .with_precision_and_scale(38, 0)
                .expect("decimal"),
        ));
        let texts = hashes_of(Arc::new(StringArray::from(vec![
            "123456789012345678901",
            "-123456789012345678901",
            "5",
        ])));
        assert_eq!(decimals, texts);
        assert_eq!(decimals[2], ints_of_five());
    }

    #[test]
    fn lists_hash_by_their_elements_in_order() {
        let mut builder = ListBuilder::new(StringBuilder::new());
        for list in [vec!["a", "b"], vec!["b", "a"], vec!["a", "b"]] {
            for v in list {
                builder.values().append_value(v);
            }
            builder.append(true);
        }
        builder.append_null();
        let hashes = hashes_of(Arc::new(builder.finish()));
        assert_eq!(hashes[0], hashes[2]);
        assert_ne!(hashes[0], hashes[1]);
        assert_eq!(hashes[3], None);
    }

    #[test]
    fn counts_are_exact_and_the_kept_hashes_are_the_smallest() {
        let values: Vec<i64> = (0..5000).map(|i| i % 1234).collect();
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, true)]));
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(values))])
            .expect("batch");
        let column = &profile(&schema, &[batch])[0];
        assert_eq!(column.approx_distinct, 1234);
        assert!(!column.capped);
        assert!(column.distinct_hashes.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(column.sketch[..], column.distinct_hashes[..SKETCH_SIZE]);
        assert_eq!(column.min, Some(serde_json::json!(0)));
        assert_eq!(column.max, Some(serde_json::json!(1233)));
    }

    #[test]
    fn parallel_and_serial_profiles_agree() {
        let n = 40_000;
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("b", DataType::Utf8, true),
            Field::new("c", DataType::Int64, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from_iter_values(0..n)),
                Arc::new(StringArray::from_iter_values(
                    (0..n).map(|i| format!("s{}", i % 77)),
                )),
                Arc::new(Int64Array::from_iter(
                    (0..n).map(|i| (i % 3 != 0).then_some(i)),
                )),
            ],
        )
        .expect("batch");
        let parallel = profile(&schema, std::slice::from_ref(&batch));
        let serial: Vec<ColumnProfile> = (0..3)
            .map(|i| profile_column(&schema, std::slice::from_ref(&batch), n as usize, i))
            .collect();
        assert_eq!(parallel, serial);
        assert_eq!(parallel[1].approx_distinct, 77);
        assert_eq!(parallel[2].name, "c");
    }
}
