//! Functions that build large values out of small inputs (`repeat`, `lpad`, `rpad`,
//! `array_repeat`, `array_resize`, `range`, `generate_series`, `replace`, `regexp_replace`),
//! wrapped so that what they would build is measured from their actual arguments before they
//! build it (SPEC §10.3).
//!
//! Their allocations happen outside DataFusion's memory pool, in one step that no timeout can
//! interrupt: `repeat('<20,000 characters>', 100000)` is 2 GB in one value, and the same
//! `repeat('x', 100000)` over a 100,000-row dataset is 10 GB in one batch. The wrappers replace
//! the built-ins under the same names, so the bound also holds where the optimizer folds a
//! constant call at planning time — folding calls the same function.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::ArrowNativeType as _;
use arrow::datatypes::{DataType, FieldRef, Int64Type};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature,
};
use datafusion::prelude::SessionContext;

/// The most one call may build in one value.
pub(crate) const MAX_VALUE_BYTES: u64 = 1024 * 1024;
/// The most one call may build for one batch of rows, all values together.
pub(crate) const MAX_BATCH_BYTES: u64 = 64 * 1024 * 1024;

/// How a function's output size follows from its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Growth {
    /// `repeat(text, n)`: the text's bytes times n.
    Repeat,
    /// `lpad/rpad(text, n[, fill])`: n characters of at most 4 bytes.
    Pad,
    /// `array_repeat(element, n)`, `array_resize(list, n[, fill])`: n elements.
    Elements,
    /// `range/generate_series([start,] stop[, step])` as scalar functions: the span over the step.
    Series,
    /// `replace(text, from, to)`: every occurrence of `from` may become `to`.
    Replace,
    /// `regexp_replace(text, pattern, replacement[, flags])`: every position may match.
    RegexpReplace,
    /// `concat(…)`, `concat_ws(sep, …)`, and the `||` operator on text: the sum of the parts
    /// (each separator counted as a part). Small alone, but a CTE chain that doubles a value at
    /// every level reaches gigabytes in 30 levels.
    Concat,
    /// `array_concat(…)`, `array_append`, `array_prepend`: the sum of the parts.
    ArrayConcat,
    /// `encode(data, format)`: hex doubles the bytes (base64 adds a third). One reference to its
    /// input, so a chain of them is merged into one expression that no output check sees
    /// between steps.
    Encode,
    /// `array_to_string(list, delimiter[, null_text])`: every element's text and a delimiter
    /// after each. A list of a million one-character elements joined with a 60 KB delimiter is
    /// 60 GB in one value.
    Join,
    /// `make_array(…)`, `struct(…)`, `named_struct(…)`, `map(…)`, `array_union(…)`, …: a new
    /// value holding a copy of every argument. `make_array(l, l, …)` with 20,000 references to
    /// one 40 KB list is 800 MB in one value, though each argument is small.
    Combine,
    /// `array_replace[_n|_all](list, from, to)`: every element may become `to`, itself a list.
    ReplaceElements,
    /// `to_char(value, format)`: each directive of the format may print up to 16 times its own
    /// length (`%+` is 2 bytes for 32); a 10,000-directive format made 1.2 GB.
    Format,
    /// `levenshtein(a, b)`: no bigger value, but work of `len(a) × len(b)` in one step that no
    /// timeout interrupts (two 200 KB strings held an engine thread for a minute).
    Pairwise,
    /// `array_has_all(a, b)`, `array_has_any(a, b)`: each element of one list is looked for in
    /// the other by a scan, `count(a) × count(b)` steps in one step that no timeout interrupts
    /// (10 M elements held an engine thread for a minute past the query's timeout).
    /// `array_has_any` with a constant side is a hash lookup, linear, and not bounded.
    PairwiseElements,
}

/// The functions bounded here, by name (aliases follow their function).
const BOUNDED: &[(&str, Growth)] = &[
    ("repeat", Growth::Repeat),
    ("lpad", Growth::Pad),
    ("rpad", Growth::Pad),
    ("array_repeat", Growth::Elements),
    ("array_resize", Growth::Elements),
    ("range", Growth::Series),
    ("generate_series", Growth::Series),
    ("replace", Growth::Replace),
    ("regexp_replace", Growth::RegexpReplace),
    ("concat", Growth::Concat),
    ("concat_ws", Growth::Concat),
    ("array_concat", Growth::ArrayConcat),
    ("array_append", Growth::ArrayConcat),
    ("array_prepend", Growth::ArrayConcat),
    ("encode", Growth::Encode),
    ("array_to_string", Growth::Join),
    ("make_array", Growth::Combine),
    ("struct", Growth::Combine),
    ("named_struct", Growth::Combine),
    ("map", Growth::Combine),
    ("make_map", Growth::Combine),
    ("array_union", Growth::Combine),
    ("array_intersect", Growth::Combine),
    ("array_except", Growth::Combine),
    ("arrays_zip", Growth::Combine),
    ("array_insert", Growth::Combine),
    ("array_replace", Growth::ReplaceElements),
    ("array_replace_n", Growth::ReplaceElements),
    ("array_replace_all", Growth::ReplaceElements),
    ("to_char", Growth::Format),
    ("levenshtein", Growth::Pairwise),
    ("array_has_all", Growth::PairwiseElements),
    ("array_has_any", Growth::PairwiseElements),
];

/// The most `len(a) × len(b)` steps one call of a pairwise function ([`Growth::Pairwise`]) may
/// take for its batch of rows (about half a second of one thread): work that cannot be
/// interrupted is bounded before it starts.
pub(crate) const MAX_PAIRWISE_STEPS: u64 = 1 << 28;

/// How many times its own length one directive of a `to_char` format may print.
const FORMAT_EXPANSION: u64 = 16;

/// Replace every bounded built-in of `ctx` with its bounded wrapper, and the `||` operator on
/// text with [`STRING_CONCAT`] (an optimizer rule, run after type coercion).
pub(crate) fn install(ctx: &SessionContext) {
    for (name, growth) in BOUNDED {
        if let Some(inner) = ctx.state().scalar_functions().get(*name).cloned() {
            ctx.register_udf(ScalarUDF::new_from_impl(Bounded {
                inner: inner.as_ref().clone(),
                growth: *growth,
            }));
        }
    }
    let concat = Arc::new(ScalarUDF::new_from_impl(StringConcat::new()));
    ctx.register_udf(concat.as_ref().clone());
    ctx.add_optimizer_rule(Arc::new(BoundStringConcat { concat }));
}

/// The name `||` on text runs under in loom's plans.
pub(crate) const STRING_CONCAT: &str = "loom_string_concat";

#[derive(Debug, PartialEq, Eq, Hash)]
struct Bounded {
    inner: ScalarUDF,
    growth: Growth,
}

/// Per-row byte lengths of a text argument (a scalar stands for every row); `None` if it is not
/// text.
fn text_lengths(value: &ColumnarValue, rows: usize) -> Option<Vec<u64>> {
    let len = |s: Option<&str>| s.map_or(0, |s| s.len() as u64);
    match value {
        ColumnarValue::Scalar(scalar) => {
            let one = match scalar {
                ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s) => {
                    len(s.as_deref())
                }
                _ => return None,
            };
            Some(vec![one; rows.max(1)])
        }
        ColumnarValue::Array(array) => Some(match array.data_type() {
            DataType::Utf8 => array.as_string::<i32>().iter().map(len).collect(),
            DataType::LargeUtf8 => array.as_string::<i64>().iter().map(len).collect(),
            DataType::Utf8View => array.as_string_view().iter().map(len).collect(),
            _ => return None,
        }),
    }
}

/// Per-row integers of a count argument (NULL and non-integers count 0; negative ones too).
fn counts(value: &ColumnarValue, rows: usize) -> Vec<i64> {
    let array: ArrayRef = match value {
        ColumnarValue::Scalar(scalar) => match scalar.to_array_of_size(1) {
            Ok(array) => array,
            Err(_) => return vec![0; rows.max(1)],
        },
        ColumnarValue::Array(array) => array.clone(),
    };
    let Ok(ints) = arrow::compute::cast(&array, &DataType::Int64) else {
        return vec![0; rows.max(1)];
    };
    let ints = ints.as_primitive::<Int64Type>();
    let values: Vec<i64> = (0..ints.len())
        .map(|i| if ints.is_null(i) { 0 } else { ints.value(i) })
        .collect();
    match (value, values.first()) {
        (ColumnarValue::Scalar(_), Some(one)) => vec![*one; rows.max(1)],
        _ => values,
    }
}

/// The bytes each row's value of an argument stands for, nested values measured through every
/// level ([`super::measure`]); a scalar stands for every row.
fn value_sizes(value: &ColumnarValue) -> super::measure::Sizes {
    use super::measure::{Sizes, row_sizes};
    match value {
        ColumnarValue::Array(array) => row_sizes(array.as_ref()),
        // Nested scalars hold a one-row array: measured where it is, never copied.
        ColumnarValue::Scalar(ScalarValue::List(array)) => {
            Sizes::Fixed(row_sizes(array.as_ref()).at(0))
        }
        ColumnarValue::Scalar(ScalarValue::LargeList(array)) => {
            Sizes::Fixed(row_sizes(array.as_ref()).at(0))
        }
        ColumnarValue::Scalar(ScalarValue::FixedSizeList(array)) => {
            Sizes::Fixed(row_sizes(array.as_ref()).at(0))
        }
        ColumnarValue::Scalar(ScalarValue::Struct(array)) => {
            Sizes::Fixed(row_sizes(array.as_ref()).at(0))
        }
        ColumnarValue::Scalar(ScalarValue::Map(array)) => {
            Sizes::Fixed(row_sizes(array.as_ref()).at(0))
        }
        ColumnarValue::Scalar(scalar) => match scalar.to_array_of_size(1) {
            Ok(array) => Sizes::Fixed(row_sizes(array.as_ref()).at(0)),
            Err(_) => Sizes::Fixed(scalar.size() as u64),
        },
    }
}

/// Per row of a list argument: how many elements it holds (a scalar stands for every row).
fn element_counts(value: &ColumnarValue, rows: usize) -> Vec<u64> {
    let array = match value {
        ColumnarValue::Array(array) => array.clone(),
        ColumnarValue::Scalar(scalar) => match scalar.to_array_of_size(1) {
            Ok(array) => array,
            Err(_) => return vec![0; rows.max(1)],
        },
    };
    let counts: Vec<u64> = match array.data_type() {
        DataType::List(_) => array
            .as_list::<i32>()
            .value_offsets()
            .windows(2)
            .map(|w| (w[1] - w[0]).max(0) as u64)
            .collect(),
        DataType::LargeList(_) => array
            .as_list::<i64>()
            .value_offsets()
            .windows(2)
            .map(|w| (w[1] - w[0]).max(0) as u64)
            .collect(),
        DataType::FixedSizeList(_, n) => vec![u64::try_from(*n).unwrap_or(0); array.len()],
        _ => vec![0; array.len()],
    };
    match value {
        ColumnarValue::Scalar(_) => vec![counts.first().copied().unwrap_or(0); rows.max(1)],
        ColumnarValue::Array(_) => counts,
    }
}

/// Bytes of one element of `value` per row, for list-building functions: a text's length, a
/// scalar's own size (a list scalar: all its elements), an array's average bytes per row; 16 at
/// least.
fn element_bytes(value: &ColumnarValue, rows: usize) -> Vec<u64> {
    if let Some(lengths) = text_lengths(value, rows) {
        return lengths.into_iter().map(|l| l.max(16)).collect();
    }
    let per_row = match value {
        ColumnarValue::Scalar(scalar) => scalar.size() as u64,
        ColumnarValue::Array(array) => {
            (array.get_array_memory_size() as u64) / (array.len().max(1) as u64)
        }
    };
    vec![per_row.max(16); rows.max(1)]
}

/// The text one leaf element may print as when it is not text itself (a number, a date, a
/// boolean): at most this many bytes.
const PRINTED_ELEMENT_BYTES: u64 = 40;

/// Per row of a list argument: how many leaf elements it holds (nested lists flattened, as
/// `array_to_string` prints them) and the bytes of their text.
fn joined_elements(value: &ColumnarValue, rows: usize) -> Vec<(u64, u64)> {
    let array = match value {
        ColumnarValue::Scalar(scalar) => match scalar.to_array_of_size(1) {
            Ok(array) => array,
            Err(_) => return vec![(0, 0); rows.max(1)],
        },
        ColumnarValue::Array(array) => array.clone(),
    };
    (0..array.len())
        .map(|row| leaf_span(array.as_ref(), row, row + 1))
        .collect()
}

/// Leaf elements and their text bytes for rows `start..end` of `array`.
fn leaf_span(array: &dyn Array, start: usize, end: usize) -> (u64, u64) {
    let down = |values: &ArrayRef, from: usize, to: usize| leaf_span(values.as_ref(), from, to);
    let text = |offsets: &[usize]| -> (u64, u64) {
        let bytes = match (offsets.first(), offsets.last()) {
            (Some(first), Some(last)) => last.saturating_sub(*first) as u64,
            _ => 0,
        };
        (offsets.len().saturating_sub(1) as u64, bytes)
    };
    if start >= end || end > array.len() {
        return (0, 0);
    }
    match array.data_type() {
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            let offsets = list.value_offsets();
            down(
                list.values(),
                offsets[start].as_usize(),
                offsets[end].as_usize(),
            )
        }
        DataType::LargeList(_) => {
            let list = array.as_list::<i64>();
            let offsets = list.value_offsets();
            down(
                list.values(),
                offsets[start].as_usize(),
                offsets[end].as_usize(),
            )
        }
        DataType::FixedSizeList(_, size) => {
            let list = array.as_fixed_size_list();
            let size = usize::try_from(*size).unwrap_or(0);
            down(list.values(), start * size, end * size)
        }
        DataType::Utf8 => {
            let offsets = array.as_string::<i32>().value_offsets();
            text(
                &offsets[start..=end]
                    .iter()
                    .map(|o| o.as_usize())
                    .collect::<Vec<_>>(),
            )
        }
        DataType::LargeUtf8 => {
            let offsets = array.as_string::<i64>().value_offsets();
            text(
                &offsets[start..=end]
                    .iter()
                    .map(|o| o.as_usize())
                    .collect::<Vec<_>>(),
            )
        }
        DataType::Utf8View => {
            let views = &array.as_string_view().views()[start..end];
            let bytes = views.iter().map(|v| u64::from(*v as u32)).sum();
            ((end - start) as u64, bytes)
        }
        _ => {
            let count = (end - start) as u64;
            (count, count.saturating_mul(PRINTED_ELEMENT_BYTES))
        }
    }
}

impl Bounded {
    /// Bytes each row's value would take, from the actual arguments.
    fn sizes(&self, args: &[ColumnarValue], rows: usize) -> Vec<u64> {
        let arg = |i: usize| args.get(i);
        let positive = |n: i64| u64::try_from(n.max(0)).unwrap_or(0);
        match self.growth {
            Growth::Repeat => match (arg(0), arg(1)) {
                (Some(text), Some(n)) => {
                    let lengths = text_lengths(text, rows).unwrap_or_else(|| vec![0; rows.max(1)]);
                    lengths
                        .iter()
                        .zip(counts(n, rows))
                        .map(|(l, n)| l.saturating_mul(positive(n)))
                        .collect()
                }
                _ => Vec::new(),
            },
            Growth::Pad => match arg(1) {
                Some(n) => counts(n, rows)
                    .into_iter()
                    .map(|n| positive(n).saturating_mul(4))
                    .collect(),
                None => Vec::new(),
            },
            Growth::Elements => match (arg(0), arg(1)) {
                (Some(element), Some(n)) => element_bytes(element, rows)
                    .into_iter()
                    .zip(counts(n, rows))
                    .map(|(e, n)| e.saturating_mul(positive(n)))
                    .collect(),
                _ => Vec::new(),
            },
            Growth::Series => {
                let ints: Vec<Vec<i64>> = args.iter().map(|a| counts(a, rows)).collect();
                let width = ints.iter().map(Vec::len).max().unwrap_or(0);
                (0..width)
                    .map(|row| {
                        let at = |i: usize| ints.get(i).and_then(|v| v.get(row)).copied();
                        let (start, stop, step) = match ints.len() {
                            1 => (0, at(0).unwrap_or(0), 1),
                            _ => (at(0).unwrap_or(0), at(1).unwrap_or(0), at(2).unwrap_or(1)),
                        };
                        let span = i128::from(stop) - i128::from(start);
                        let steps = span.abs() / i128::from(step).abs().max(1) + 1;
                        u64::try_from(steps).unwrap_or(u64::MAX).saturating_mul(8)
                    })
                    .collect()
            }
            Growth::Encode => match arg(0) {
                Some(data) => text_lengths(data, rows)
                    .unwrap_or_else(|| element_bytes(data, rows))
                    .into_iter()
                    .map(|l| l.saturating_mul(2))
                    .collect(),
                None => Vec::new(),
            },
            Growth::Join => {
                let Some(list) = arg(0) else {
                    return Vec::new();
                };
                let delimiter = arg(1)
                    .and_then(|a| text_lengths(a, rows))
                    .unwrap_or_else(|| vec![0; rows.max(1)]);
                let null_text = arg(2)
                    .and_then(|a| text_lengths(a, rows))
                    .unwrap_or_else(|| vec![0; rows.max(1)]);
                let at = |v: &Vec<u64>, row: usize| v.get(row).or(v.first()).copied().unwrap_or(0);
                joined_elements(list, rows)
                    .into_iter()
                    .enumerate()
                    .map(|(row, (count, bytes))| {
                        let per_element = at(&delimiter, row).max(at(&null_text, row));
                        bytes.saturating_add(count.saturating_mul(per_element))
                    })
                    .collect()
            }
            Growth::Combine => {
                let parts: Vec<_> = args.iter().map(value_sizes).collect();
                (0..rows.max(1))
                    .map(|row| parts.iter().fold(0u64, |s, p| s.saturating_add(p.at(row))))
                    .collect()
            }
            Growth::ReplaceElements => {
                let (Some(list), Some(to)) = (arg(0), arg(2)) else {
                    return Vec::new();
                };
                let (list_sizes, to_sizes) = (value_sizes(list), value_sizes(to));
                element_counts(list, rows)
                    .into_iter()
                    .enumerate()
                    .map(|(row, count)| {
                        list_sizes
                            .at(row)
                            .saturating_add(count.saturating_mul(to_sizes.at(row)))
                    })
                    .collect()
            }
            Growth::Format => match arg(1) {
                Some(format) => {
                    let formats = value_sizes(format);
                    (0..rows.max(1))
                        .map(|row| formats.at(row).saturating_mul(FORMAT_EXPANSION))
                        .collect()
                }
                None => Vec::new(),
            },
            // Work, not size: checked in `check`.
            Growth::Pairwise | Growth::PairwiseElements => Vec::new(),
            Growth::Concat | Growth::ArrayConcat => {
                let parts: Vec<Vec<u64>> = args
                    .iter()
                    .map(|a| match self.growth {
                        Growth::Concat => {
                            text_lengths(a, rows).unwrap_or_else(|| vec![16; rows.max(1)])
                        }
                        _ => {
                            let sizes = value_sizes(a);
                            (0..rows.max(1)).map(|row| sizes.at(row).max(16)).collect()
                        }
                    })
                    .collect();
                // concat_ws repeats its separator between the parts.
                let separators = match self.inner.name() {
                    "concat_ws" => args.len().saturating_sub(2) as u64,
                    _ => 0,
                };
                let width = parts.iter().map(Vec::len).max().unwrap_or(0);
                (0..width)
                    .map(|row| {
                        let at = |v: &Vec<u64>| v.get(row).or(v.first()).copied().unwrap_or(0);
                        let sum = parts.iter().fold(0u64, |s, p| s.saturating_add(at(p)));
                        match parts.first() {
                            Some(sep) if separators > 0 => {
                                sum.saturating_add(at(sep).saturating_mul(separators))
                            }
                            _ => sum,
                        }
                    })
                    .collect()
            }
            Growth::Replace | Growth::RegexpReplace => {
                let (Some(text), Some(replacement)) = (
                    arg(0).and_then(|a| text_lengths(a, rows)),
                    arg(2).and_then(|a| text_lengths(a, rows)),
                ) else {
                    return Vec::new();
                };
                let pattern = arg(1).and_then(|a| text_lengths(a, rows));
                (0..text.len().max(replacement.len()))
                    .map(|row| {
                        let at = |v: &Vec<u64>| v.get(row).or(v.first()).copied().unwrap_or(0);
                        let (t, r) = (at(&text), at(&replacement));
                        let occurrences = match (self.growth, &pattern) {
                            // A literal pattern of n bytes occurs at most t / n times.
                            (Growth::Replace, Some(p)) if at(p) > 0 => t / at(p),
                            // An empty or regular pattern may match at every position.
                            _ => t + 1,
                        };
                        t.saturating_add(occurrences.saturating_mul(r))
                    })
                    .collect()
            }
        }
    }

    fn check(&self, args: &[ColumnarValue], rows: usize, batch_rows: usize) -> Result<()> {
        if self.growth == Growth::Pairwise {
            return self.check_work(args, rows);
        }
        if self.growth == Growth::PairwiseElements {
            return self.check_element_work(args, rows);
        }
        let mut sizes = self.sizes(args, rows);
        // A call whose arguments are all constants is folded once, at planning, and its value
        // is then copied into every row of every batch it meets: bound it as that many copies.
        if !args.is_empty()
            && args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)))
            && let Some(one) = sizes.first().copied()
        {
            sizes = vec![one; batch_rows.max(1)];
        }
        check_sizes(self.inner.name(), &sizes)
    }
}

impl Bounded {
    /// A pairwise function's steps for its batch, `len(a) × len(b)` summed over the rows, at
    /// most [`MAX_PAIRWISE_STEPS`].
    fn check_work(&self, args: &[ColumnarValue], rows: usize) -> Result<()> {
        let (Some(a), Some(b)) = (args.first(), args.get(1)) else {
            return Ok(());
        };
        let (a, b) = (value_sizes(a), value_sizes(b));
        let steps = (0..rows.max(1)).fold(0u64, |sum, row| {
            sum.saturating_add(a.at(row).saturating_mul(b.at(row)))
        });
        if steps > MAX_PAIRWISE_STEPS {
            let name = self.inner.name();
            return Err(DataFusionError::ResourcesExhausted(format!(
                "`{name}` would take {steps} steps (the lengths of its two texts multiplied, \
                 summed over {rows} rows); loom allows at most {MAX_PAIRWISE_STEPS} per call — \
                 compare shorter texts (e.g. `{name}(left(a, 1000), left(b, 1000))`)"
            )));
        }
        Ok(())
    }
}

impl Bounded {
    /// A list-against-list function's steps for its batch, `count(a) × count(b)` summed over
    /// the rows, at most [`MAX_PAIRWISE_STEPS`].
    fn check_element_work(&self, args: &[ColumnarValue], rows: usize) -> Result<()> {
        let (Some(a), Some(b)) = (args.first(), args.get(1)) else {
            return Ok(());
        };
        let name = self.inner.name();
        let constant = |v: &ColumnarValue| matches!(v, ColumnarValue::Scalar(_));
        if name == "array_has_any" && (constant(a) != constant(b)) {
            return Ok(());
        }
        let (a, b) = (element_counts(a, rows), element_counts(b, rows));
        let at = |v: &Vec<u64>, row: usize| v.get(row).or(v.first()).copied().unwrap_or(0);
        let steps = (0..a.len().max(b.len())).fold(0u64, |sum, row| {
            sum.saturating_add(at(&a, row).saturating_mul(at(&b, row)))
        });
        if steps > MAX_PAIRWISE_STEPS {
            return Err(DataFusionError::ResourcesExhausted(format!(
                "`{name}` would take {steps} steps (the element counts of its two lists \
                 multiplied, summed over {rows} rows); loom allows at most {MAX_PAIRWISE_STEPS} \
                 per call — compare shorter lists, or unnest them and join"
            )));
        }
        Ok(())
    }
}

/// Fail when one value of `sizes` (bytes per row) is over [`MAX_VALUE_BYTES`] or all of them
/// together are over [`MAX_BATCH_BYTES`].
fn check_sizes(name: &str, sizes: &[u64]) -> Result<()> {
    if let Some(largest) = sizes.iter().copied().max()
        && largest > MAX_VALUE_BYTES
    {
        return Err(DataFusionError::ResourcesExhausted(format!(
            "`{name}` would build a value of {largest} bytes; loom allows at most \
             {MAX_VALUE_BYTES} bytes per value"
        )));
    }
    let total = sizes.iter().fold(0u64, |sum, s| sum.saturating_add(*s));
    if total > MAX_BATCH_BYTES {
        return Err(DataFusionError::ResourcesExhausted(format!(
            "`{name}` would build {total} bytes for {} rows at once; loom allows at most \
             {MAX_BATCH_BYTES} bytes per call (a constant value counts once per row of a batch)",
            sizes.len()
        )));
    }
    Ok(())
}

impl ScalarUDFImpl for Bounded {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn is_strict(&self) -> bool {
        self.inner.inner().is_strict()
    }

    fn short_circuits(&self) -> bool {
        self.inner.short_circuits()
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        super::deadline::check(&args.config_options)?;
        let batch_rows = usize::from(args.config_options.execution.batch_size);
        self.check(&args.args, args.number_rows, batch_rows)?;
        self.inner.invoke_with_args(args)
    }
}

/// For tests: whether `ctx`'s function `name` is bounded here.
#[cfg(test)]
pub(crate) fn is_bounded(ctx: &SessionContext, name: &str) -> bool {
    ctx.state()
        .scalar_functions()
        .get(name)
        .is_some_and(|udf| udf.inner().downcast_ref::<Bounded>().is_some())
}

/// `left || right` on text, with the operator's semantics (NULL if either side is NULL) and the
/// bound of [`Growth::Concat`].
#[derive(Debug, PartialEq, Eq, Hash)]
struct StringConcat {
    signature: Signature,
}

impl StringConcat {
    fn new() -> Self {
        Self {
            // Text only: called by name from SQL with anything else, it is a planning error
            // rather than a concatenation whose growth goes unmeasured.
            signature: Signature::uniform(
                2,
                vec![DataType::Utf8, DataType::LargeUtf8, DataType::Utf8View],
                datafusion::logical_expr::Volatility::Immutable,
            ),
        }
    }
}

/// The text type both sides of `||` are brought to: the widest of them.
fn concat_type(types: &[DataType]) -> DataType {
    if types.contains(&DataType::LargeUtf8) {
        DataType::LargeUtf8
    } else if types.contains(&DataType::Utf8View) {
        DataType::Utf8View
    } else {
        DataType::Utf8
    }
}

impl ScalarUDFImpl for StringConcat {
    fn name(&self) -> &str {
        STRING_CONCAT
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(concat_type(arg_types))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let sizes: Vec<Vec<u64>> = args
            .args
            .iter()
            .map(|a| text_lengths(a, rows).unwrap_or_else(|| vec![0; rows.max(1)]))
            .collect();
        let constant = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let width = if constant {
            usize::from(args.config_options.execution.batch_size)
        } else {
            sizes.iter().map(Vec::len).max().unwrap_or(0)
        };
        let at = |v: &Vec<u64>, row: usize| v.get(row).or(v.first()).copied().unwrap_or(0);
        let per_row: Vec<u64> = (0..width)
            .map(|row| sizes.iter().fold(0u64, |s, v| s.saturating_add(at(v, row))))
            .collect();
        check_sizes("||", &per_row)?;
        let target = args.return_field.data_type().clone();
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let cast = |a: &ArrayRef| arrow::compute::cast(a, &target);
        let (Some(left), Some(right)) = (arrays.first(), arrays.get(1)) else {
            return Err(DataFusionError::Internal("`||` takes two arguments".into()));
        };
        let joined = arrow::compute::kernels::concat_elements::concat_elements_dyn(
            cast(left)?.as_ref(),
            cast(right)?.as_ref(),
        )?;
        if constant {
            let value = ScalarValue::try_from_array(&joined, 0)?;
            return Ok(ColumnarValue::Scalar(value));
        }
        Ok(ColumnarValue::Array(joined))
    }
}

/// Rewrites `a || b` on text into [`STRING_CONCAT`], so that its growth is bounded like
/// `concat`'s. Runs after type coercion (an optimizer rule), where both sides are text.
#[derive(Debug)]
struct BoundStringConcat {
    concat: Arc<ScalarUDF>,
}

impl datafusion::optimizer::OptimizerRule for BoundStringConcat {
    fn name(&self) -> &str {
        "loom_bound_string_concat"
    }

    fn rewrite(
        &self,
        plan: datafusion::logical_expr::LogicalPlan,
        _config: &dyn datafusion::optimizer::OptimizerConfig,
    ) -> Result<datafusion::common::tree_node::Transformed<datafusion::logical_expr::LogicalPlan>>
    {
        use datafusion::common::tree_node::{Transformed, TreeNode};
        use datafusion::logical_expr::{BinaryExpr, Expr, ExprSchemable, Operator};
        let concat = self.concat.clone();
        plan.transform_up_with_subqueries(|node| {
            // Expressions are typed against the node's inputs (a join's filter sees both).
            let schema = match node.inputs().as_slice() {
                [] => node.schema().as_ref().clone(),
                [input, rest @ ..] => {
                    let mut merged = input.schema().as_ref().clone();
                    for other in rest {
                        merged.merge(other.schema());
                    }
                    merged
                }
            };
            // The rewritten expression keeps the name the operator gave it (a projection's
            // column is named after its expression).
            let names = datafusion::logical_expr::expr_rewriter::NamePreserver::new(&node);
            node.map_expressions(|expr| {
                let saved = names.save(&expr);
                let rewritten = expr.transform_up(|e| match e {
                    Expr::BinaryExpr(BinaryExpr {
                        left,
                        op: Operator::StringConcat,
                        right,
                    }) => {
                        let text = |x: &Expr| {
                            x.get_type(&schema).is_ok_and(|t| {
                                matches!(
                                    t,
                                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
                                )
                            })
                        };
                        if text(&left) && text(&right) {
                            Ok(Transformed::yes(concat.call(vec![*left, *right])))
                        } else {
                            Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr {
                                left,
                                op: Operator::StringConcat,
                                right,
                            })))
                        }
                    }
                    other => Ok(Transformed::no(other)),
                })?;
                Ok(rewritten.update_data(|e| saved.restore(e)))
            })
        })
    }
}
