use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Decimal128Type, Float64Type, Int64Type, TimeUnit};

use super::*;

fn ingest(text: &str) -> Ingested {
    ingest_json_array(text).expect("ingest")
}

fn column_names(ingested: &Ingested) -> Vec<&str> {
    ingested.columns.iter().map(|c| c.name.as_str()).collect()
}

#[test]
fn columns_follow_first_seen_key_order_and_missing_keys_are_null() {
    let got = ingest(r#"[{"b": 1, "a": "x"}, {"a": "y", "c": true}]"#);
    assert_eq!(column_names(&got), vec!["b", "a", "c"]);
    let b = got.batch.column(0).as_primitive::<Int64Type>();
    assert_eq!(b.value(0), 1);
    assert!(b.is_null(1));
    assert_eq!(got.batch.column(2).data_type(), &DataType::Boolean);
}

#[test]
fn rows_of_changing_shape_land_in_the_right_columns() {
    // Same keys as the row before (placed without hashing), reordered keys, a repeated key,
    // then the first shape again.
    let got = ingest(
        r#"[{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"b": 5, "a": 6}, {"a": 7, "a": 8, "b": 9},
            {"a": 10, "a": 11, "b": 12}, {"a": 13, "b": 14}]"#,
    );
    assert_eq!(column_names(&got), vec!["a", "b", "a_2"]);
    let column = |i: usize| -> Vec<Option<i64>> {
        got.batch
            .column(i)
            .as_primitive::<Int64Type>()
            .iter()
            .collect()
    };
    assert_eq!(column(0), [1, 3, 6, 7, 10, 13].map(Some));
    assert_eq!(column(1), [2, 4, 5, 9, 12, 14].map(Some));
    assert_eq!(column(2), vec![None, None, None, Some(8), Some(11), None]);
}

#[test]
fn undecodable_strings_never_become_nulls_or_raw_json() {
    // A nested object with an undecodable key keeps its column whole, as JSON text.
    let got = ingest(r#"[{"o": {"x": 1}}, {"o": {"\ud800": 2}}]"#);
    assert_eq!(column_names(&got), vec!["o"]);
    let o = got.batch.column(0).as_string::<i32>();
    assert_eq!(o.value(1), r#"{"\ud800": 2}"#);
    // An undecodable string value is an error (the result then passes through), not its JSON.
    assert!(ingest_json_array(r#"[{"s": "a"}, {"s": "\ud800"}]"#).is_err());
}

#[test]
fn nested_objects_flatten_to_a_depth_then_stay_json() {
    let got = ingest(
        r#"[{"user": {"login": "ada", "org": {"id": 7, "geo": {"lat": 1.5, "deep": {"x": 1}}}}},
            {"user": null}]"#,
    );
    assert_eq!(
        column_names(&got),
        vec!["user_login", "user_org_id", "user_org_geo"]
    );
    assert_eq!(got.columns[1].source, "user.org.id");
    let geo = got.batch.column(2).as_string::<i32>();
    assert_eq!(geo.value(0), r#"{"lat": 1.5, "deep": {"x": 1}}"#);
    assert!(geo.is_null(1));
}

#[test]
fn every_source_key_keeps_its_own_column() {
    let got = ingest(r#"[{"ID": 1, "id": 2, "a.b": 3, "a": {"b": 4}, "a_b": 5}]"#);
    assert_eq!(
        column_names(&got),
        vec!["ID", "id_2", "a_b", "a_b_2", "a_b_3"]
    );
    let values: Vec<i64> = (0..5)
        .map(|i| got.batch.column(i).as_primitive::<Int64Type>().value(0))
        .collect();
    assert_eq!(values, vec![1, 2, 3, 4, 5]);
}

#[test]
fn values_are_never_rounded_or_rewritten() {
    let got = ingest(
        r#"[{"big": 12345678901234567890123, "s": "007", "n": "336776", "f": 2.50, "mix": 1},
            {"big": 1, "s": "42", "n": "-3", "f": 3, "mix": "one"}]"#,
    );
    let big = got.batch.column(0).as_primitive::<Decimal128Type>();
    assert_eq!(big.value(0), 12345678901234567890123_i128);
    assert_eq!(got.batch.column(1).as_string::<i32>().value(0), "007");
    assert_eq!(
        got.batch.column(2).as_primitive::<Int64Type>().value(0),
        336776
    );
    assert_eq!(
        got.batch.column(3).as_primitive::<Float64Type>().value(0),
        2.5
    );
    let mix = got.batch.column(4).as_string::<i32>();
    assert_eq!((mix.value(0), mix.value(1)), ("1", "one"));
    assert_eq!(got.columns[4].typing, ColumnType::JsonText);
}

#[test]
fn temporal_and_list_columns_get_their_types() {
    let got = ingest(
        r#"[{"d": "2024-01-31", "t": "2024-01-31T10:00:00Z", "tags": ["a", "b"], "xs": [1, 2]},
            {"d": null, "t": "2024-02-01T00:00:00.5Z", "tags": [], "xs": null}]"#,
    );
    let types: Vec<DataType> = got
        .batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.data_type().clone())
        .collect();
    assert_eq!(types[0], DataType::Date32);
    assert_eq!(
        types[1],
        DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
    );
    assert!(matches!(&types[2], DataType::List(f) if f.data_type() == &DataType::Utf8));
    assert!(matches!(&types[3], DataType::List(f) if f.data_type() == &DataType::Int64));
    let lists = got.batch.column(2).as_list::<i32>();
    assert_eq!(lists.value(0).len(), 2);
    assert_eq!(lists.value(1).len(), 0);
}

#[test]
fn field_metadata_names_the_source() {
    let got = ingest(r#"[{"a b": {"c": "1"}}]"#);
    let schema = got.batch.schema();
    let field = schema.field(0);
    assert_eq!(field.name(), "a_b_c");
    assert_eq!(
        field.metadata().get(SOURCE_KEY).map(String::as_str),
        Some("a b.c")
    );
    assert_eq!(
        field.metadata().get(TYPING_KEY).map(String::as_str),
        Some("integers written as strings")
    );
}

#[test]
fn what_is_not_a_table_is_refused() {
    assert!(matches!(ingest_json_array("[]"), Err(IngestError::Empty)));
    assert!(matches!(
        ingest_json_array("[1, 2]"),
        Err(IngestError::NotRows(_))
    ));
    assert!(matches!(
        ingest_json_array("[{}, {}]"),
        Err(IngestError::NotRows(_))
    ));
    assert!(matches!(
        ingest_json_array("[{\"a\": 1}"),
        Err(IngestError::NotRows(_))
    ));
}

#[test]
fn only_empty_objects_keep_their_column_as_text() {
    let got = ingest(r#"[{"meta": {}, "a": 1}]"#);
    assert_eq!(column_names(&got), vec!["meta", "a"]);
    assert_eq!(got.batch.column(0).as_string::<i32>().value(0), "{}");
}
