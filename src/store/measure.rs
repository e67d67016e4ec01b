//! The bytes each row's value stands for, for every Arrow type: text and binary by their length,
//! lists, maps and fixed-size lists by their elements, structs by their fields, dictionaries by
//! the value each key points at — nested as deep as the type goes (SPEC §10.3).
//!
//! Sizes are logical: a value that several rows share (a dictionary's, a list referenced by
//! every row of a cross join) counts once per row, because that is what a function building a
//! new value from it copies. This is what the value bounds measure, before a function builds
//! ([`super::bounded`]) and after ([`super::output`]).

use arrow::array::{Array, AsArray, OffsetSizeTrait};
use arrow::datatypes::DataType;

/// Bytes per row of one column.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Sizes {
    /// Every row the same width (fixed-width types, nulls included).
    Fixed(u64),
    /// One size per row.
    PerRow(Vec<u64>),
}

impl Sizes {
    /// The size of `row` (the last one for a shorter vector: never panics).
    pub(crate) fn at(&self, row: usize) -> u64 {
        match self {
            Self::Fixed(width) => *width,
            Self::PerRow(sizes) => sizes.get(row).or(sizes.last()).copied().unwrap_or_default(),
        }
    }

    pub(crate) fn largest(&self) -> u64 {
        match self {
            Self::Fixed(width) => *width,
            Self::PerRow(sizes) => sizes.iter().copied().max().unwrap_or(0),
        }
    }

    /// The bytes rows `start..end` hold together.
    fn span(&self, prefix: &Option<Vec<u64>>, start: usize, end: usize) -> u64 {
        match (self, prefix) {
            (Self::Fixed(width), _) => width.saturating_mul(end.saturating_sub(start) as u64),
            (Self::PerRow(_), Some(prefix)) => {
                let at = |i: usize| prefix.get(i).or(prefix.last()).copied().unwrap_or(0);
                at(end).saturating_sub(at(start))
            }
            (Self::PerRow(_), None) => 0,
        }
    }

    /// Running sums (entry `i` is the bytes of rows `0..i`), for spans of many rows.
    fn prefix(&self) -> Option<Vec<u64>> {
        match self {
            Self::Fixed(_) => None,
            Self::PerRow(sizes) => {
                let mut prefix = Vec::with_capacity(sizes.len() + 1);
                let mut sum = 0u64;
                prefix.push(0);
                for size in sizes {
                    sum = sum.saturating_add(*size);
                    prefix.push(sum);
                }
                Some(prefix)
            }
        }
    }
}

/// Bytes each row of `array` stands for.
pub(crate) fn row_sizes(array: &dyn Array) -> Sizes {
    fn offsets<O: OffsetSizeTrait>(offsets: &[O]) -> Sizes {
        Sizes::PerRow(
            offsets
                .windows(2)
                .map(|w| w[1].as_usize().saturating_sub(w[0].as_usize()) as u64)
                .collect(),
        )
    }
    fn lists<O: OffsetSizeTrait>(offsets: &[O], values: &dyn Array) -> Sizes {
        let elements = row_sizes(values);
        let prefix = elements.prefix();
        Sizes::PerRow(
            offsets
                .windows(2)
                .map(|w| elements.span(&prefix, w[0].as_usize(), w[1].as_usize()))
                .collect(),
        )
    }
    fn views<O: OffsetSizeTrait>(offsets: &[O], sizes: &[O], values: &dyn Array) -> Sizes {
        let elements = row_sizes(values);
        let prefix = elements.prefix();
        Sizes::PerRow(
            offsets
                .iter()
                .zip(sizes)
                .map(|(start, size)| {
                    let start = start.as_usize();
                    elements.span(&prefix, start, start.saturating_add(size.as_usize()))
                })
                .collect(),
        )
    }
    match array.data_type() {
        DataType::Null => Sizes::Fixed(0),
        DataType::Utf8 => offsets(array.as_string::<i32>().value_offsets()),
        DataType::LargeUtf8 => offsets(array.as_string::<i64>().value_offsets()),
        DataType::Binary => offsets(array.as_binary::<i32>().value_offsets()),
        DataType::LargeBinary => offsets(array.as_binary::<i64>().value_offsets()),
        DataType::Utf8View => Sizes::PerRow(
            array
                .as_string_view()
                .views()
                .iter()
                .map(|view| u64::from(*view as u32))
                .collect(),
        ),
        DataType::BinaryView => Sizes::PerRow(
            array
                .as_binary_view()
                .views()
                .iter()
                .map(|view| u64::from(*view as u32))
                .collect(),
        ),
        DataType::FixedSizeBinary(width) => Sizes::Fixed(u64::try_from(*width).unwrap_or(0)),
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            lists(list.value_offsets(), list.values().as_ref())
        }
        DataType::LargeList(_) => {
            let list = array.as_list::<i64>();
            lists(list.value_offsets(), list.values().as_ref())
        }
        DataType::ListView(_) => {
            let list = array.as_list_view::<i32>();
            views(
                list.value_offsets(),
                list.value_sizes(),
                list.values().as_ref(),
            )
        }
        DataType::LargeListView(_) => {
            let list = array.as_list_view::<i64>();
            views(
                list.value_offsets(),
                list.value_sizes(),
                list.values().as_ref(),
            )
        }
        DataType::Map(_, _) => {
            let map = array.as_map();
            lists(map.value_offsets(), map.entries())
        }
        DataType::FixedSizeList(_, length) => {
            let list = array.as_fixed_size_list();
            let length = usize::try_from(*length).unwrap_or(0);
            let elements = row_sizes(list.values().as_ref());
            match elements {
                Sizes::Fixed(width) => Sizes::Fixed(width.saturating_mul(length as u64)),
                per_row => {
                    let prefix = per_row.prefix();
                    Sizes::PerRow(
                        (0..list.len())
                            .map(|row| {
                                let start = list.value_offset(row).max(0) as usize;
                                per_row.span(&prefix, start, start.saturating_add(length))
                            })
                            .collect(),
                    )
                }
            }
        }
        DataType::Struct(_) => {
            let fields = array.as_struct();
            let columns: Vec<Sizes> = fields
                .columns()
                .iter()
                .map(|c| row_sizes(c.as_ref()))
                .collect();
            if columns.iter().all(|c| matches!(c, Sizes::Fixed(_))) {
                return Sizes::Fixed(columns.iter().fold(0u64, |s, c| s.saturating_add(c.at(0))));
            }
            Sizes::PerRow(
                (0..fields.len())
                    .map(|row| {
                        columns
                            .iter()
                            .fold(0u64, |sum, c| sum.saturating_add(c.at(row)))
                    })
                    .collect(),
            )
        }
        DataType::Dictionary(_, _) => match array.as_any_dictionary_opt() {
            Some(dictionary) => {
                let values = row_sizes(dictionary.values().as_ref());
                match values {
                    Sizes::Fixed(width) => Sizes::Fixed(width),
                    per_value => Sizes::PerRow(
                        dictionary
                            .normalized_keys()
                            .into_iter()
                            .map(|key| per_value.at(key))
                            .collect(),
                    ),
                }
            }
            None => Sizes::Fixed(0),
        },
        other => match other.primitive_width() {
            Some(width) => Sizes::Fixed(width as u64),
            // Run-end encoded and union arrays: their memory spread over their rows.
            None => {
                Sizes::Fixed((array.get_array_memory_size() as u64) / (array.len().max(1) as u64))
            }
        },
    }
}

/// The largest value of `array` in bytes, for the types whose values can grow (text, binary,
/// lists, maps, structs and dictionaries of them); 0 for fixed-width ones, whose size follows
/// from the row count.
pub(crate) fn largest_value(array: &dyn Array) -> u64 {
    match row_sizes(array) {
        Sizes::Fixed(_) => 0,
        sizes => sizes.largest(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{
        ArrayRef, DictionaryArray, FixedSizeListArray, Int32Array, Int64Array, ListArray,
        StringArray, StructArray,
    };
    use arrow::datatypes::{Field, Int32Type};

    use super::*;

    fn list_of(values: ArrayRef, offsets: &[i32]) -> ListArray {
        let field = Arc::new(Field::new("item", values.data_type().clone(), true));
        ListArray::new(
            field,
            arrow::buffer::OffsetBuffer::new(offsets.to_vec().into()),
            values,
            None,
        )
    }

    #[test]
    fn nested_values_are_measured_through_every_level() {
        let text: ArrayRef = Arc::new(StringArray::from(vec!["a", "bbbb", "cc"]));
        assert_eq!(row_sizes(text.as_ref()), Sizes::PerRow(vec![1, 4, 2]));

        // A list of lists of text: row 0 holds "a" and "bbbb", row 1 holds "cc".
        let inner: ArrayRef = Arc::new(list_of(text.clone(), &[0, 2, 3]));
        let outer = list_of(inner, &[0, 1, 2]);
        assert_eq!(row_sizes(&outer), Sizes::PerRow(vec![5, 2]));
        assert_eq!(largest_value(&outer), 5);

        let ints: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3, 4]));
        let lists = list_of(ints.clone(), &[0, 3, 4]);
        assert_eq!(row_sizes(&lists), Sizes::PerRow(vec![24, 8]));
        assert_eq!(largest_value(ints.as_ref()), 0);

        let structs = StructArray::from(vec![
            (
                Arc::new(Field::new("t", DataType::Utf8, true)),
                text.clone(),
            ),
            (
                Arc::new(Field::new("n", DataType::Int32, true)),
                Arc::new(Int32Array::from(vec![1, 2, 3])) as ArrayRef,
            ),
        ]);
        assert_eq!(row_sizes(&structs), Sizes::PerRow(vec![5, 8, 6]));

        let fixed = FixedSizeListArray::new(
            Arc::new(Field::new("item", DataType::Utf8, true)),
            1,
            text.clone(),
            None,
        );
        assert_eq!(row_sizes(&fixed), Sizes::PerRow(vec![1, 4, 2]));

        // Every key of a dictionary counts its value, shared or not.
        let keys = Int32Array::from(vec![1, 1, 1, 0]);
        let dictionary = DictionaryArray::<Int32Type>::try_new(keys, text).expect("dictionary");
        assert_eq!(row_sizes(&dictionary), Sizes::PerRow(vec![4, 4, 4, 1]));
    }

    #[test]
    fn a_slice_is_measured_on_its_own_rows() {
        let text: ArrayRef = Arc::new(StringArray::from(vec!["a", "bbbb", "cc", "ddd"]));
        let lists = list_of(text, &[0, 1, 3, 4]);
        let sliced = lists.slice(1, 2);
        assert_eq!(row_sizes(&sliced), Sizes::PerRow(vec![6, 3]));
    }
}
