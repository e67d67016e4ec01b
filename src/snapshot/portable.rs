//! Parquet that other engines read. A snapshot is a contract with engines loom does not control
//! (Spark, DataFusion's Python bindings, DuckDB): Arrow types that Parquet stores in a form they
//! refuse or misread are written in a portable form instead, and loom restores the exact type
//! when it reads the file back (the original type is kept in the field's metadata).
//!
//! | Arrow type | written as | why |
//! |---|---|---|
//! | UInt8 / UInt16 / UInt32 | Int16 / Int32 / Int64 | unsigned annotations are not read everywhere |
//! | UInt64 | Decimal128(20, 0) | every u64 fits; Spark reads UINT_64 as that anyway |
//! | Float16 | Float32 | FLOAT16 is unknown to most readers |
//! | Null | Utf8, all null | an UNKNOWN-typed column is unreliable |
//! | Timestamp(s) | Timestamp(ms) | seconds are stored without an annotation (a bare int64) |
//! | Timestamp(ns) at top level, every value whole µs | Timestamp(µs) | Spark refuses NANOS |
//! | Date64 | Timestamp(ms) | Date64 is stored as a bare int64 |
//! | Time32 / Time64 | Utf8 `HH:MM:SS[.f]` | Spark has no time type |
//! | Duration | Int64 (in its unit) | stored as a bare int64 anyway; the unit is in the metadata |
//! | Interval (any) | Struct{months Int32, days Int32, nanoseconds Int64} | the Parquet writer cannot write MonthDayNano at all, Spark reads no INTERVAL |
//! | Decimal256(p ≤ 38) | Decimal128 | Spark's decimals stop at 38 digits |
//! | Decimal256(p > 38) | Utf8, exact digits | no engine here reads it as a number |
//! | Dictionary(k, v) | v | plain values read everywhere |
//!
//! Inside lists and structs the same rules apply, except that nanosecond timestamps stay as they
//! are. What remains unreadable for Spark (nanosecond timestamps that are not whole
//! microseconds) is reported by [`spark_unreadable`], so the Spark catalog can say so.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, FixedSizeListArray, Int32Array, Int64Array, LargeListArray,
    ListArray, RecordBatch, StructArray, new_null_array,
};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{
    DataType, Field, FieldRef, Fields, IntervalDayTime, IntervalMonthDayNano, IntervalUnit, Schema,
    SchemaRef, TimeUnit,
};

/// Field metadata naming the type a column had before it was made portable.
pub(crate) const ORIGINAL_TYPE_KEY: &str = "loom.type";

const INTERVAL_FIELDS: [(&str, DataType); 3] = [
    ("months", DataType::Int32),
    ("days", DataType::Int32),
    ("nanoseconds", DataType::Int64),
];

fn interval_struct() -> DataType {
    DataType::Struct(
        INTERVAL_FIELDS
            .iter()
            .map(|(name, t)| Field::new(*name, t.clone(), true))
            .collect(),
    )
}

/// Casts that must not change a value: an overflow or a parse failure is an error, not a null.
fn exact() -> CastOptions<'static> {
    CastOptions {
        safe: false,
        ..CastOptions::default()
    }
}

/// The portable type of `t`, or `None` when it is portable already. `top_level_whole_micros`:
/// a nanosecond timestamp column whose values are all whole microseconds.
fn portable_type(t: &DataType, top_level_whole_micros: bool) -> Option<DataType> {
    Some(match t {
        DataType::UInt8 => DataType::Int16,
        DataType::UInt16 => DataType::Int32,
        DataType::UInt32 => DataType::Int64,
        DataType::UInt64 => DataType::Decimal128(20, 0),
        DataType::Float16 => DataType::Float32,
        DataType::Null => DataType::Utf8,
        DataType::Timestamp(TimeUnit::Second, tz) => {
            DataType::Timestamp(TimeUnit::Millisecond, tz.clone())
        }
        DataType::Timestamp(TimeUnit::Nanosecond, tz) if top_level_whole_micros => {
            DataType::Timestamp(TimeUnit::Microsecond, tz.clone())
        }
        DataType::Date64 => DataType::Timestamp(TimeUnit::Millisecond, None),
        DataType::Time32(_) | DataType::Time64(_) => DataType::Utf8,
        DataType::Duration(_) => DataType::Int64,
        DataType::Interval(_) => interval_struct(),
        DataType::Decimal256(p, s) if *p <= 38 => DataType::Decimal128(*p, *s),
        DataType::Decimal256(..) => DataType::Utf8,
        DataType::Dictionary(_, values) => {
            portable_type(values, false).unwrap_or_else(|| values.as_ref().clone())
        }
        DataType::List(f) => DataType::List(portable_field(f)?),
        DataType::LargeList(f) => DataType::LargeList(portable_field(f)?),
        DataType::FixedSizeList(f, n) => DataType::FixedSizeList(portable_field(f)?, *n),
        DataType::Struct(fields) => {
            let changed: Vec<Option<FieldRef>> = fields.iter().map(portable_field).collect();
            if changed.iter().all(Option::is_none) {
                return None;
            }
            DataType::Struct(
                fields
                    .iter()
                    .zip(changed)
                    .map(|(f, c)| c.unwrap_or_else(|| f.clone()))
                    .collect::<Fields>(),
            )
        }
        _ => return None,
    })
}

fn portable_field(f: &FieldRef) -> Option<FieldRef> {
    let t = portable_type(f.data_type(), false)?;
    Some(Arc::new(f.as_ref().clone().with_data_type(t)))
}

fn whole_micros(arrays: &[&ArrayRef]) -> bool {
    arrays.iter().all(|a| {
        a.as_primitive_opt::<arrow::datatypes::TimestampNanosecondType>()
            .is_some_and(|ts| ts.iter().flatten().all(|v| v % 1000 == 0))
    })
}

/// The batches in portable form, with the schema they now have. Columns that changed carry
/// [`ORIGINAL_TYPE_KEY`].
pub(crate) fn to_portable(
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<(SchemaRef, Vec<RecordBatch>), String> {
    let mut targets = Vec::with_capacity(schema.fields().len());
    for (i, field) in schema.fields().iter().enumerate() {
        let column: Vec<&ArrayRef> = batches.iter().map(|b| b.column(i)).collect();
        let micros = matches!(
            field.data_type(),
            DataType::Timestamp(TimeUnit::Nanosecond, _)
        ) && whole_micros(&column);
        // The original type is restored from its text: a type whose text does not parse back
        // to itself (odd nested names, nested metadata) is written as it is.
        let restorable = field
            .data_type()
            .to_string()
            .parse::<DataType>()
            .is_ok_and(|t| t == *field.data_type());
        targets.push(portable_type(field.data_type(), micros).filter(|_| restorable));
    }
    retype(schema, batches.to_vec(), targets, Mark::Original)
}

/// What a retyped column's metadata says: the type it had ([`to_portable`]), or nothing
/// ([`from_portable`]).
enum Mark {
    Original,
    Nothing,
}

/// The batches with the columns that have a new field converted to its type.
fn retype(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    new_types: Vec<Option<DataType>>,
    mark: Mark,
) -> Result<(SchemaRef, Vec<RecordBatch>), String> {
    if new_types.iter().all(Option::is_none) {
        return Ok((schema.clone(), batches));
    }
    let new_fields: Vec<Option<Field>> = schema
        .fields()
        .iter()
        .zip(new_types)
        .map(|(field, new_type)| {
            new_type.map(|t| {
                let mut metadata = field.metadata().clone();
                match mark {
                    Mark::Original => {
                        metadata.insert(ORIGINAL_TYPE_KEY.into(), field.data_type().to_string())
                    }
                    Mark::Nothing => metadata.remove(ORIGINAL_TYPE_KEY),
                };
                field
                    .as_ref()
                    .clone()
                    .with_data_type(t)
                    .with_metadata(metadata)
            })
        })
        .collect();
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .zip(&new_fields)
        .map(|(field, new)| new.clone().unwrap_or_else(|| field.as_ref().clone()))
        .collect();
    let retyped = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
    let mut out = Vec::with_capacity(batches.len());
    for batch in batches {
        let columns = batch
            .columns()
            .iter()
            .zip(&new_fields)
            .map(|(column, new)| match new {
                None => Ok(column.clone()),
                Some(field) => convert(column, field.data_type()),
            })
            .collect::<Result<Vec<_>, String>>()?;
        out.push(RecordBatch::try_new(retyped.clone(), columns).map_err(|e| e.to_string())?);
    }
    Ok((retyped, out))
}

/// `array` as type `to`, where `to` is the portable form of its type or the other way round.
fn convert(array: &ArrayRef, to: &DataType) -> Result<ArrayRef, String> {
    if array.data_type() == to {
        return Ok(array.clone());
    }
    let nulls = array.logical_nulls();
    match (array.data_type(), to) {
        (DataType::Interval(unit), DataType::Struct(_)) => interval_to_struct(array, *unit),
        (DataType::Struct(_), DataType::Interval(unit)) => struct_to_interval(array, *unit),
        (DataType::List(_), DataType::List(f)) => {
            let list = array.as_list::<i32>();
            let values = convert(list.values(), f.data_type())?;
            ListArray::try_new(f.clone(), list.offsets().clone(), values, nulls)
                .map(|a| Arc::new(a) as ArrayRef)
                .map_err(|e| e.to_string())
        }
        (DataType::LargeList(_), DataType::LargeList(f)) => {
            let list = array.as_list::<i64>();
            let values = convert(list.values(), f.data_type())?;
            LargeListArray::try_new(f.clone(), list.offsets().clone(), values, nulls)
                .map(|a| Arc::new(a) as ArrayRef)
                .map_err(|e| e.to_string())
        }
        (DataType::FixedSizeList(_, _), DataType::FixedSizeList(f, n)) => {
            let list = array.as_fixed_size_list();
            let values = convert(list.values(), f.data_type())?;
            FixedSizeListArray::try_new(f.clone(), *n, values, nulls)
                .map(|a| Arc::new(a) as ArrayRef)
                .map_err(|e| e.to_string())
        }
        (DataType::Struct(_), DataType::Struct(fields)) => {
            let parts = array.as_struct();
            let columns = parts
                .columns()
                .iter()
                .zip(fields.iter())
                .map(|(c, f)| convert(c, f.data_type()))
                .collect::<Result<Vec<_>, String>>()?;
            StructArray::try_new(fields.clone(), columns, parts.nulls().cloned())
                .map(|a| Arc::new(a) as ArrayRef)
                .map_err(|e| e.to_string())
        }
        (DataType::Utf8, DataType::Null) => Ok(new_null_array(&DataType::Null, array.len())),
        _ => cast_with_options(array, to, &exact()).map_err(|e| {
            format!(
                "cannot convert {} to {to} for Parquet: {e}",
                array.data_type()
            )
        }),
    }
}

fn interval_to_struct(array: &ArrayRef, unit: IntervalUnit) -> Result<ArrayRef, String> {
    let n = array.len();
    let (mut months, mut days, mut nanos) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let mut push = |m: i32, d: i32, ns: i64| {
        months.push(m);
        days.push(d);
        nanos.push(ns);
    };
    match unit {
        IntervalUnit::YearMonth => array
            .as_primitive::<arrow::datatypes::IntervalYearMonthType>()
            .values()
            .iter()
            .for_each(|&m| push(m, 0, 0)),
        IntervalUnit::DayTime => array
            .as_primitive::<arrow::datatypes::IntervalDayTimeType>()
            .values()
            .iter()
            .for_each(|v| push(0, v.days, i64::from(v.milliseconds) * 1_000_000)),
        IntervalUnit::MonthDayNano => array
            .as_primitive::<arrow::datatypes::IntervalMonthDayNanoType>()
            .values()
            .iter()
            .for_each(|v| push(v.months, v.days, v.nanoseconds)),
    }
    let DataType::Struct(fields) = interval_struct() else {
        return Err("interval struct".into());
    };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(months)),
        Arc::new(Int32Array::from(days)),
        Arc::new(Int64Array::from(nanos)),
    ];
    StructArray::try_new(fields, columns, array.logical_nulls())
        .map(|a| Arc::new(a) as ArrayRef)
        .map_err(|e| e.to_string())
}

fn struct_to_interval(array: &ArrayRef, unit: IntervalUnit) -> Result<ArrayRef, String> {
    let parts = array.as_struct();
    let column = |name: &str| {
        parts
            .column_by_name(name)
            .ok_or_else(|| format!("an interval column without `{name}`"))
    };
    let months = column("months")?;
    let days = column("days")?;
    let nanos = column("nanoseconds")?;
    let (months, days, nanos) = (
        months
            .as_primitive_opt::<arrow::datatypes::Int32Type>()
            .ok_or("interval months are not Int32")?,
        days.as_primitive_opt::<arrow::datatypes::Int32Type>()
            .ok_or("interval days are not Int32")?,
        nanos
            .as_primitive_opt::<arrow::datatypes::Int64Type>()
            .ok_or("interval nanoseconds are not Int64")?,
    );
    let nulls = parts.nulls().cloned();
    let rows = 0..parts.len();
    let array: ArrayRef = match unit {
        IntervalUnit::YearMonth => Arc::new(arrow::array::IntervalYearMonthArray::new(
            rows.map(|i| months.value(i)).collect(),
            nulls,
        )),
        IntervalUnit::DayTime => Arc::new(arrow::array::IntervalDayTimeArray::new(
            rows.map(|i| {
                let millis = i32::try_from(nanos.value(i) / 1_000_000).unwrap_or(i32::MAX);
                IntervalDayTime::new(days.value(i), millis)
            })
            .collect(),
            nulls,
        )),
        IntervalUnit::MonthDayNano => Arc::new(arrow::array::IntervalMonthDayNanoArray::new(
            rows.map(|i| IntervalMonthDayNano::new(months.value(i), days.value(i), nanos.value(i)))
                .collect(),
            nulls,
        )),
    };
    Ok(array)
}

/// The batches with the types they had before [`to_portable`] (a file without the metadata,
/// e.g. written by an older loom, comes back unchanged).
pub(crate) fn from_portable(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
) -> Result<(SchemaRef, Vec<RecordBatch>), String> {
    let originals: Vec<Option<DataType>> = schema
        .fields()
        .iter()
        .map(|f| {
            f.metadata()
                .get(ORIGINAL_TYPE_KEY)
                .map(|t| {
                    t.parse::<DataType>()
                        .map_err(|e| format!("column {}: unknown type {t}: {e}", f.name()))
                })
                .transpose()
        })
        .collect::<Result<_, String>>()?;
    retype(schema, batches, originals, Mark::Nothing)
}

/// Columns of a portable schema that Spark still cannot read, with the reason.
pub(crate) fn spark_unreadable(schema: &Schema) -> Vec<String> {
    fn nanos(t: &DataType) -> bool {
        match t {
            DataType::Timestamp(TimeUnit::Nanosecond, _) => true,
            DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
                nanos(f.data_type())
            }
            DataType::Struct(fields) => fields.iter().any(|f| nanos(f.data_type())),
            DataType::Map(f, _) => nanos(f.data_type()),
            _ => false,
        }
    }
    schema
        .fields()
        .iter()
        .filter(|f| nanos(f.data_type()))
        .map(|f| {
            format!(
                "column `{}` holds nanosecond timestamps (Spark reads microseconds at most)",
                f.name()
            )
        })
        .collect()
}
