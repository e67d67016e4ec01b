//! The envelope as interception builds it from realistic results: sizes, samples, statistics.

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::envelope::{MIN_SAMPLE_ROWS, TARGET_CHARS};
use crate::intercept::{Origin, Outcome, intercept};
use crate::store::{Store, StoreSettings};

/// A column of a realistic wide table (an orders table as PostgreSQL returns it): name and the
/// value of row `i`.
type Column = (&'static str, fn(usize) -> Value);

const COLUMNS: &[Column] = &[
    ("id", |i| json!(i + 1)),
    ("order_number", |i| {
        json!(format!("ORD-2026-{:06}", i * 7 + 13))
    }),
    ("customer_id", |i| json!(1000 + (i * 37) % 500)),
    ("customer_email", |i| {
        json!(format!("customer{}@example.com", (i * 37) % 500))
    }),
    ("status", |i| {
        json!(["pending", "paid", "shipped", "delivered", "refunded"][i % 5])
    }),
    ("currency", |i| json!(["EUR", "USD", "GBP"][i % 3])),
    ("subtotal", |i| {
        json!(format!("{}.{:02}", 10 + i % 300, i % 100))
    }),
    ("tax", |i| {
        json!(format!("{}.{:02}", 1 + i % 30, (i * 3) % 100))
    }),
    ("shipping_fee", |i| json!(format!("{}.99", i % 10))),
    ("total", |i| {
        json!(format!("{}.{:02}", 20 + i % 330, (i * 7) % 100))
    }),
    ("created_at", |i| {
        json!(format!(
            "2026-0{}-{:02}T{:02}:14:05Z",
            1 + i % 9,
            1 + i % 28,
            i % 24
        ))
    }),
    ("updated_at", |i| {
        json!(format!(
            "2026-0{}-{:02}T{:02}:44:51Z",
            1 + i % 9,
            1 + i % 28,
            i % 24
        ))
    }),
    ("shipped_at", |i| {
        if i % 4 == 0 {
            Value::Null
        } else {
            json!(format!("2026-10-{:02}", 1 + i % 28))
        }
    }),
    ("billing_country", |i| {
        json!(["DE", "FR", "US", "GB", "NL", "JP"][i % 6])
    }),
    ("shipping_city", |i| {
        json!(["Berlin", "Paris", "Austin", "Leeds", "Utrecht", "Osaka"][i % 6])
    }),
    ("notes", |i| {
        json!(if i % 3 == 0 {
            "Leave the parcel with the neighbour at number 12 if nobody answers the door; the dog is friendly."
        } else {
            ""
        })
    }),
    ("is_gift", |i| json!(i % 7 == 0)),
    ("coupon_code", |i| {
        if i % 5 == 0 {
            json!("AUTUMN10")
        } else {
            Value::Null
        }
    }),
    ("items_count", |i| json!(1 + i % 9)),
    ("warehouse", |i| {
        json!(["north-1", "south-2", "east-3"][i % 3])
    }),
    ("carrier", |i| {
        json!(["DHL", "UPS", "FedEx", "La Poste"][i % 4])
    }),
    ("tracking_number", |i| {
        json!(format!("1Z{:016}", i * 982_451_653))
    }),
    ("weight_kg", |i| json!((i % 50) as f64 / 4.0 + 0.25)),
    ("sales_channel", |i| {
        json!(["web", "app", "marketplace"][i % 3])
    }),
    ("payment_method", |i| {
        json!(["card", "paypal", "invoice", "sepa"][i % 4])
    }),
    ("risk_score", |i| json!((i * 13) % 100)),
    ("loyalty_tier", |i| {
        json!(["bronze", "silver", "gold"][i % 3])
    }),
    ("discount_total", |i| json!(format!("{}.00", i % 15))),
    ("refund_total", |i| {
        json!(if i % 5 == 4 { "12.50" } else { "0.00" })
    }),
    ("fulfilled_by", |i| json!(["merchant", "partner"][i % 2])),
];

fn table(columns: usize, rows: usize) -> String {
    let rows: Vec<Value> = (0..rows)
        .map(|i| {
            let mut row = serde_json::Map::new();
            for c in 0..columns {
                let (name, value) = COLUMNS[c % COLUMNS.len()];
                let name = if c < COLUMNS.len() {
                    name.to_string()
                } else {
                    format!("{name}_{}", c / COLUMNS.len() + 1)
                };
                row.insert(name, value(i));
            }
            Value::Object(row)
        })
        .collect();
    serde_json::to_string(&rows).expect("json")
}

/// The envelope of an 842-row table of `columns` columns, as a PostgreSQL server's query tool
/// would return it (with the SQL in the arguments).
fn envelope_of(columns: usize) -> Value {
    envelope_with_args(
        columns,
        json!({"sql": "SELECT * FROM orders WHERE created_at >= now() - interval '90 days' ORDER BY id"}),
    )
}

fn envelope_with_args(columns: usize, args: Value) -> Value {
    let store = Arc::new(Store::new(StoreSettings::default()).expect("store"));
    let origin = Origin {
        server: "postgres".into(),
        tool: "query".into(),
        args,
    };
    let result = json!({"content": [{"type": "text", "text": table(columns, 842)}]});
    let raw = RawValue::from_string(result.to_string()).expect("raw");
    match intercept(
        raw,
        &origin,
        &store,
        2000,
        &crate::common::policy::Policy::tables_only(),
    ) {
        Outcome::Replaced(value) => value["structuredContent"].clone(),
        Outcome::PassThrough(_, why) => panic!("{columns} columns passed through: {why}"),
        Outcome::Reduced(v) => panic!("{columns} columns reduced as a document: {v}"),
        Outcome::Spliced(raw, _) => panic!("{columns} columns spliced: {}", raw.get()),
        Outcome::Summarize(_) => panic!("sent to a model"),
    }
}

/// Every envelope carries at least three sample rows, and up to 30 columns the schema and the
/// sample fit the 2,000-character target together (issue 11: a 19-column result had no sample).
#[test]
fn wide_envelopes_keep_three_sample_rows_within_the_target() {
    for columns in [5, 11, 19, 30, 60] {
        let envelope = envelope_of(columns);
        let chars = envelope.to_string().chars().count();
        let sample = envelope["sample"].as_array().expect("a sample");
        let schema = envelope["schema"].as_array().expect("a schema");
        eprintln!(
            "envelope for 842 rows x {columns} columns: {chars} chars, {} sample rows, schema {}",
            sample.len(),
            if schema[0].is_string() {
                "names: types"
            } else {
                "with statistics"
            }
        );
        assert!(
            sample.len() >= MIN_SAMPLE_ROWS,
            "{columns} columns: {envelope}"
        );
        if columns <= 30 {
            assert!(
                chars <= TARGET_CHARS,
                "{columns} columns: {chars} chars: {envelope}"
            );
            assert_eq!(schema.len(), columns, "{envelope}");
        }
        // Every sample row has a value for every column the schema shows.
        for row in sample {
            let width = row
                .as_array()
                .map(Vec::len)
                .or(row.as_object().map(|o| o.len()));
            assert_eq!(width, Some(schema.len()), "{row}");
        }
    }
}

/// A narrow table keeps the full form: statistics per column and rows as objects.
#[test]
fn narrow_envelopes_keep_statistics_and_named_values() {
    let envelope = envelope_of(5);
    assert_eq!(envelope["schema"][0]["name"], "id", "{envelope}");
    assert!(envelope["schema"][0]["min"].is_number(), "{envelope}");
    assert_eq!(envelope["sample"].as_array().map(Vec::len), Some(5));
    assert_eq!(envelope["sample"][0]["id"], 1, "{envelope}");
}

/// Arguments can be as large as the result (server-memory's `create_entities` takes the
/// entities it returns): the envelope shows their first items and counts the rest.
#[test]
fn large_arguments_are_cut_in_the_envelope() {
    let entities: Vec<Value> = (0..300)
        .map(|i| json!({"name": format!("entity-{i}"), "observations": ["a", "b"]}))
        .collect();
    let envelope = envelope_with_args(5, json!({"entities": entities}));
    let chars = envelope.to_string().chars().count();
    assert!(chars <= TARGET_CHARS, "{chars}: {envelope}");
    let shown = envelope["provenance"]["args"]["entities"]
        .as_array()
        .expect("entities");
    assert!(
        shown
            .last()
            .and_then(Value::as_str)
            .is_some_and(|s| s.ends_with(" more")),
        "{envelope}"
    );
}
