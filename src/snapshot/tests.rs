use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::DataType;
use bytes::Bytes;
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, PutPayload};

use super::*;
use crate::ingest::ingest_json_array;
use crate::store::{Dataset, NewDataset, Provenance, Store, StoreSettings};

const ROWS: &str = r#"[
  {"id": 1, "big": 12345678901234567890123, "at": "2024-01-02T03:04:05Z", "day": "2024-01-02", "tags": ["a"], "name": "x"},
  {"id": 2, "big": 5, "at": null, "day": "2024-02-03", "tags": [], "name": null}
]"#;

fn dataset(store: &Store, args: serde_json::Value) -> Arc<Dataset> {
    let ingested = ingest_json_array(ROWS).expect("ingest");
    store
        .add(NewDataset {
            server: "crm".into(),
            tool: "rows".into(),
            schema: ingested.batch.schema(),
            batches: vec![ingested.batch],
            columns: ingested.columns,
            provenance: Provenance {
                server: "crm".into(),
                tool: "rows".into(),
                args,
                created_at: "2026-11-30T00:00:00.000Z".into(),
                source: "json_text".into(),
            },
            pinned: false,
            implicit: false,
            passed_through: false,
            name: None,
        })
        .expect("add")
}

#[test]
fn parquet_keeps_the_arrow_types() {
    let store = Store::new(StoreSettings::default()).expect("store");
    let d = dataset(&store, serde_json::json!({}));
    let bytes = parquet_bytes(&d.schema, &d.batches).expect("write");
    let (schema, batches) = read_parquet(Bytes::from(bytes)).expect("read");
    assert_eq!(schema.fields(), d.schema.fields());
    assert!(matches!(
        schema.field(1).data_type(),
        DataType::Decimal128(38, 0)
    ));
    assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 2);
    assert_eq!(batches[0], d.batches[0]);
}

#[tokio::test]
async fn a_session_is_written_and_its_catalog_opens_in_a_fresh_datafusion() {
    let dir = tempfile::tempdir().expect("dir");
    let location = open(dir.path().to_str().expect("utf8")).expect("open");
    let store = Store::new(StoreSettings::default()).expect("store");
    let (writer, task) = SnapshotWriter::start(location.clone());
    let w = writer.clone();
    store.listen(Box::new(move |d| w.dataset_created(d)));
    let d = dataset(&store, serde_json::json!({"apiKey": "[redacted]"}));
    store.stop_listening();
    drop(writer);
    task.await.expect("writer");

    // A folder of the user's own under the root is not a session (it would sort last).
    std::fs::create_dir(dir.path().join("zzz-notes")).expect("mkdir");
    let sessions = sessions(&location).await.expect("sessions");
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let manifest = manifest(&location, &sessions[0]).await.expect("manifest");
    assert_eq!(manifest.datasets.len(), 1);
    assert_eq!(manifest.datasets[0].reference, d.reference);
    assert_eq!(manifest.datasets[0].provenance.args["apiKey"], "[redacted]");

    // Hive-style: session, server, tool and ref are folders an engine reads as columns.
    let session_dir = dir.path().join(&sessions[0].folder);
    assert!(
        sessions[0].folder.starts_with("session_id="),
        "{sessions:?}"
    );
    assert_eq!(
        manifest.datasets[0].file,
        format!("server=crm/tool=rows/ref={0}/{0}.parquet", d.reference)
    );
    assert!(session_dir.join(&manifest.datasets[0].file).is_file());
    assert_eq!(manifest.layout, LAYOUT);
    assert_eq!(manifest.datasets[0].table, "ds_crm_rows");
    let catalog = std::fs::read_to_string(session_dir.join("catalog.sql")).expect("catalog");
    let ctx = datafusion::prelude::SessionContext::new();
    for statement in catalog.lines().filter(|l| l.starts_with("CREATE")) {
        ctx.sql(statement)
            .await
            .expect("create")
            .collect()
            .await
            .expect("run");
    }
    let out = ctx
        .sql(&format!("SELECT sum(id), max(big) FROM {}", d.reference))
        .await
        .expect("plan")
        .collect()
        .await
        .expect("query");
    let text = arrow::util::pretty::pretty_format_batches(&out)
        .expect("fmt")
        .to_string();
    assert!(text.contains("12345678901234567890123"), "{text}");
}

#[test]
fn session_ids_are_unique_in_a_process_and_recognised() {
    let ids: Vec<String> = (0..50).map(|_| session_id()).collect();
    let unique: std::collections::HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");
    for id in &ids {
        assert!(is_session_name(id), "{id}");
    }
    for name in ["20261130T120000123Z-4242", "20261130T120000123Z-4242-7"] {
        assert!(is_session_name(name), "{name}");
    }
    for name in [
        "notes",
        "zzz-my-folder",
        "20261130T120000123Z-",
        "20261130T120000123Z-42a",
        "20261130T120000123Z-42-7-1",
        "2026113XT120000123Z-42",
        "20261130T12000012Z-42",
    ] {
        assert!(!is_session_name(name), "{name}");
    }
}

#[test]
fn partition_values_and_tables() {
    assert_eq!(partition_value("crm"), "crm");
    assert_eq!(partition_value("my-server.v2_x"), "my-server.v2_x");
    assert_eq!(partition_value("a/b=c d"), "a_b_c_d");
    assert_eq!(partition_value("ünï"), "_n_");
    assert_eq!(partition_value(""), "_");
    assert_eq!(partition_value(".."), "_");
    assert_eq!(partition_value(&"x".repeat(100)).len(), 64);
    assert_eq!(table_of("ds_crm_rows_2"), "ds_crm_rows");
    assert_eq!(table_of("doc_3"), "doc");
    assert_eq!(table_of("my_view"), "my_view");
    assert_eq!(table_of("top_10x"), "top_10x");
    assert_eq!(table_of("_7"), "_7");
}

/// A session written before the Hive layout (`<id>/datasets/<ref>.parquet`, no `layout`) opens.
#[tokio::test]
async fn sessions_of_the_first_layout_still_open() {
    let dir = tempfile::tempdir().expect("dir");
    let store = Store::new(StoreSettings::default()).expect("store");
    let d = dataset(&store, serde_json::json!({}));
    let id = "20261130T120000123Z-4242";
    let folder = dir.path().join(id);
    std::fs::create_dir_all(folder.join("datasets")).expect("mkdir");
    let bytes = parquet_bytes(&d.schema, &d.batches).expect("write");
    std::fs::write(
        folder
            .join("datasets")
            .join(format!("{}.parquet", d.reference)),
        bytes,
    )
    .expect("parquet");
    let manifest_v1 = serde_json::json!({
        "loomVersion": "0.1.0", "session": id, "createdAt": "2026-11-30T12:00:00.123Z",
        "datasets": [{
            "ref": d.reference, "rows": 2, "schema": [],
            "provenance": {"server": "crm", "tool": "rows", "args": {}, "source": "json_text"},
            "createdAt": "2026-11-30T12:00:00.200Z", "pinned": false,
            "file": format!("datasets/{}.parquet", d.reference)
        }]
    });
    std::fs::write(folder.join("manifest.json"), manifest_v1.to_string()).expect("manifest");
    let location = open(dir.path().to_str().expect("utf8")).expect("open");
    let found = sessions(&location).await.expect("sessions");
    assert_eq!(
        found,
        vec![Session {
            id: id.into(),
            folder: id.into()
        }]
    );
    let manifest = manifest(&location, &found[0]).await.expect("manifest");
    assert_eq!(manifest.layout, 1);
    assert_eq!(manifest.datasets[0].kind, "dataset");
    let (_, batches) = dataset_batches(&location, &found[0], &manifest.datasets[0])
        .await
        .expect("read");
    assert_eq!(batches[0], d.batches[0]);
}

/// Every type of the portability table goes in, comes back exactly, and the file on disk uses
/// only what Spark and the other engines read.
#[test]
fn unusual_types_are_written_portably_and_read_back_exactly() {
    use arrow::array::*;
    use arrow::datatypes::*;
    use parquet::basic::{LogicalType, TimeUnit as PqUnit};

    let ns_tz = DataType::Timestamp(TimeUnit::Nanosecond, Some("+00:00".into()));
    let list_of_u64 = DataType::List(Arc::new(Field::new("item", DataType::UInt64, true)));
    let struct_of = DataType::Struct(Fields::from(vec![
        Field::new("n", DataType::UInt8, true),
        Field::new("gap", DataType::Interval(IntervalUnit::MonthDayNano), true),
    ]));
    let columns: Vec<(&str, ArrayRef)> = vec![
        (
            "u8",
            Arc::new(UInt8Array::from(vec![Some(255), None, Some(0)])),
        ),
        (
            "u16",
            Arc::new(UInt16Array::from(vec![Some(65535), Some(1), None])),
        ),
        (
            "u32",
            Arc::new(UInt32Array::from(vec![Some(u32::MAX), None, Some(7)])),
        ),
        (
            "u64",
            Arc::new(UInt64Array::from(vec![Some(u64::MAX), Some(0), None])),
        ),
        (
            "f16",
            arrow::compute::cast(
                &Float32Array::from(vec![Some(1.5), None, Some(65504.0)]),
                &DataType::Float16,
            )
            .expect("f16"),
        ),
        ("nothing", Arc::new(NullArray::new(3))),
        (
            "ts_s",
            Arc::new(TimestampSecondArray::from(vec![
                Some(1_700_000_000),
                None,
                Some(-1),
            ])),
        ),
        (
            "ts_ns_whole",
            Arc::new(
                TimestampNanosecondArray::from(vec![
                    Some(1_700_000_000_123_456_000),
                    None,
                    Some(0),
                ])
                .with_timezone("+00:00"),
            ),
        ),
        (
            "ts_ns_fine",
            Arc::new(TimestampNanosecondArray::from(vec![
                Some(1_700_000_000_123_456_789),
                None,
                Some(1),
            ])),
        ),
        (
            "d64",
            Arc::new(Date64Array::from(vec![Some(86_400_000), None, Some(1_234)])),
        ),
        (
            "t64",
            Arc::new(Time64NanosecondArray::from(vec![
                Some(45_296_123_456_789),
                None,
                Some(0),
            ])),
        ),
        (
            "t32",
            Arc::new(Time32SecondArray::from(vec![Some(3_661), Some(0), None])),
        ),
        (
            "dur",
            Arc::new(DurationMillisecondArray::from(vec![
                Some(-5),
                None,
                Some(i64::MAX),
            ])),
        ),
        (
            "iv_mdn",
            Arc::new(IntervalMonthDayNanoArray::from(vec![
                Some(IntervalMonthDayNano::new(1, -2, 3)),
                None,
                Some(IntervalMonthDayNano::new(0, 0, i64::MIN)),
            ])),
        ),
        (
            "iv_ym",
            Arc::new(IntervalYearMonthArray::from(vec![Some(14), None, Some(-1)])),
        ),
        (
            "iv_dt",
            Arc::new(IntervalDayTimeArray::from(vec![
                Some(IntervalDayTime::new(3, 4_000)),
                None,
                Some(IntervalDayTime::new(-1, -1)),
            ])),
        ),
        (
            "d256_small",
            Arc::new(
                Decimal256Array::from(vec![
                    Some(i256::from_i128(12_345)),
                    None,
                    Some(i256::from_i128(-1)),
                ])
                .with_precision_and_scale(20, 2)
                .expect("decimal"),
            ),
        ),
        (
            "d256_big",
            Arc::new(
                Decimal256Array::from(vec![
                    Some(
                        i256::from_string("12345678901234567890123456789012345678901234567890")
                            .expect("digits"),
                    ),
                    None,
                    Some(i256::from_i128(-7)),
                ])
                .with_precision_and_scale(60, 3)
                .expect("decimal"),
            ),
        ),
        (
            "dict",
            Arc::new(
                vec![Some("a"), None, Some("a")]
                    .into_iter()
                    .collect::<DictionaryArray<Int32Type>>(),
            ),
        ),
        (
            "list_u64",
            Arc::new(ListArray::from_iter_primitive::<UInt64Type, _, _>(vec![
                Some(vec![Some(u64::MAX), None]),
                None,
                Some(vec![]),
            ])),
        ),
        ("count(*)", Arc::new(Int64Array::from(vec![1, 2, 3]))),
    ];
    let mut fields: Vec<Field> = columns
        .iter()
        .map(|(name, a)| Field::new(*name, a.data_type().clone(), true))
        .collect();
    let mut arrays: Vec<ArrayRef> = columns.iter().map(|(_, a)| a.clone()).collect();
    let nested = StructArray::try_new(
        match &struct_of {
            DataType::Struct(f) => f.clone(),
            _ => unreachable!(),
        },
        vec![
            Arc::new(UInt8Array::from(vec![Some(1), None, Some(200)])),
            Arc::new(IntervalMonthDayNanoArray::from(vec![
                Some(IntervalMonthDayNano::new(5, 6, 7)),
                Some(IntervalMonthDayNano::new(0, 0, 0)),
                None,
            ])),
        ],
        Some(vec![true, true, false].into()),
    )
    .expect("struct");
    fields.push(Field::new("nested", struct_of, true));
    arrays.push(Arc::new(nested));
    assert_eq!(fields[19].data_type(), &list_of_u64);
    assert_eq!(fields[7].data_type(), &ns_tz);
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), arrays).expect("batch");
    // Two batches: decisions (whole microseconds) hold for the whole column.
    let batches = vec![batch.clone(), batch.slice(1, 2)];

    let file = parquet_file(&schema, &batches).expect("written without panic");
    assert_eq!(
        file.spark_unreadable,
        vec!["column `ts_ns_fine` holds nanosecond timestamps (Spark reads microseconds at most)"]
    );
    let (back_schema, back) = read_parquet(Bytes::from(file.bytes.clone())).expect("read");
    assert_eq!(back_schema.fields(), schema.fields());
    let got = arrow::compute::concat_batches(&back_schema, &back).expect("concat");
    let want = arrow::compute::concat_batches(&schema, &batches).expect("concat");
    assert_eq!(got.num_rows(), 5);
    for i in 0..want.num_columns() {
        assert_eq!(
            got.column(i).as_ref(),
            want.column(i).as_ref(),
            "column {}",
            schema.field(i).name()
        );
    }

    // What is on disk: no unsigned, no FLOAT16/TIME/INTERVAL/UNKNOWN, no seconds or Date64
    // stored as a bare int64, decimals ≤ 38 digits; only the reported column keeps NANOS.
    let reader =
        parquet::file::serialized_reader::SerializedFileReader::new(Bytes::from(file.bytes))
            .expect("parquet");
    use parquet::file::reader::FileReader;
    let descr = reader.metadata().file_metadata().schema_descr_ptr();
    for column in descr.columns() {
        let path = column.path().string();
        let logical = column.logical_type_ref().cloned();
        match logical {
            Some(LogicalType::Integer(int)) => assert!(int.is_signed, "{path}"),
            Some(LogicalType::Float16 | LogicalType::Unknown) => panic!("{path}: {logical:?}"),
            Some(LogicalType::Time { .. }) => panic!("{path}: TIME"),
            Some(LogicalType::Timestamp(ts)) if ts.unit == PqUnit::NANOS => {
                assert_eq!(path, "ts_ns_fine")
            }
            Some(LogicalType::Decimal(d)) => assert!(d.precision <= 38, "{path}"),
            _ => {}
        }
        assert!(
            column.converted_type() != parquet::basic::ConvertedType::INTERVAL,
            "{path}"
        );
        if ["ts_s", "d64", "ts_ns_whole"].contains(&path.as_str()) {
            assert!(
                matches!(column.logical_type_ref(), Some(LogicalType::Timestamp(ts)) if ts.unit != PqUnit::NANOS),
                "{path}: {:?} as {:?}",
                column.logical_type_ref(),
                column.physical_type()
            );
        }
    }
}

fn manifest_entry(reference: &str, file: &str, spark_unreadable: Vec<String>) -> ManifestDataset {
    ManifestDataset {
        reference: reference.into(),
        rows: 1,
        schema: vec![],
        provenance: ManifestProvenance {
            server: "crm".into(),
            tool: "rows".into(),
            args: serde_json::json!({}),
            source: "json_text".into(),
        },
        created_at: "2026-11-30T00:00:00.000Z".into(),
        pinned: false,
        file: file.into(),
        kind: "dataset".into(),
        table: table_of(reference),
        spark_unreadable,
    }
}

#[test]
fn spark_catalog_points_at_ref_folders_and_leaves_out_what_spark_cannot_read() {
    let session = Session::new("20261130T120000123Z-4242".into());
    let manifest = Manifest {
        layout: LAYOUT,
        loom_version: "0".into(),
        session: session.id.clone(),
        created_at: "2026-11-30T12:00:00.123Z".into(),
        complete: true,
        missing: vec![],
        datasets: vec![
            manifest_entry(
                "ds_crm_rows_1",
                "server=crm/tool=rows/ref=ds_crm_rows_1/ds_crm_rows_1.parquet",
                vec![],
            ),
            manifest_entry(
                "view_now",
                "server=loom/tool=loom_materialize/ref=view_now/view_now.parquet",
                vec!["column `t` holds nanosecond timestamps".into()],
            ),
        ],
    };
    let mut location = open("memory://").expect("memory");
    location.url_base = "s3://bucket/it's/here".into();
    let spark = catalog_spark_sql(&location, &session, &manifest);
    assert!(
        spark.contains("SET spark.sql.caseSensitive=true;\n"),
        "{spark}"
    );
    assert!(
        spark.contains("SET spark.sql.session.timeZone=UTC;\n"),
        "{spark}"
    );
    assert!(
        spark.contains(
            "CREATE OR REPLACE TEMPORARY VIEW `ds_crm_rows_1` USING parquet OPTIONS (path \
             's3a://bucket/it\\'s/here/session_id=20261130T120000123Z-4242/server=crm/tool=rows/ref=ds_crm_rows_1');\n"
        ),
        "{spark}"
    );
    assert!(
        spark.contains("-- `view_now` left out: column `t` holds nanosecond timestamps\n"),
        "{spark}"
    );
    assert!(!spark.contains("VIEW `view_now`"), "{spark}");
    // Every line is a statement or a comment: spark-sql -f runs it as it is.
    for line in spark.lines() {
        assert!(
            line.starts_with("--") || line.ends_with(';'),
            "not a statement: {line}"
        );
    }
    let datafusion = catalog_sql(&location, &session, &manifest);
    assert!(
        datafusion.contains(
            "CREATE EXTERNAL TABLE ds_crm_rows_1 STORED AS PARQUET LOCATION \
             's3://bucket/it''s/here/session_id=20261130T120000123Z-4242/server=crm/tool=rows/ref=ds_crm_rows_1/ds_crm_rows_1.parquet';"
        ),
        "{datafusion}"
    );
}

/// An in-memory store whose dataset files (`ref=` paths) fail to be written `failures` times.
#[derive(Debug)]
struct FaultyStore {
    inner: object_store::memory::InMemory,
    failures: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FaultyStore")
    }
}

#[async_trait::async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &StorePath,
        payload: PutPayload,
        opts: object_store::PutOptions,
    ) -> object_store::Result<object_store::PutResult> {
        use std::sync::atomic::Ordering;
        if location.as_ref().contains("/ref=")
            && self
                .failures
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            return Err(object_store::Error::Generic {
                store: "S3",
                source: "Server returned non-2xx status code: 403 Forbidden: <Error><Code>AccessDenied</Code></Error>".into(),
            });
        }
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &StorePath,
        opts: object_store::PutMultipartOptions,
    ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &StorePath,
        options: object_store::GetOptions,
    ) -> object_store::Result<object_store::GetResult> {
        self.inner.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: futures::stream::BoxStream<'static, object_store::Result<StorePath>>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<StorePath>> {
        self.inner.delete_stream(locations)
    }
    fn list(
        &self,
        prefix: Option<&StorePath>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(
        &self,
        prefix: Option<&StorePath>,
    ) -> object_store::Result<object_store::ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &StorePath,
        to: &StorePath,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// A root on a [`FaultyStore`] whose dataset files fail `failures` times.
fn faulty_location(failures: usize) -> Location {
    Location {
        store: Arc::new(FaultyStore {
            inner: object_store::memory::InMemory::new(),
            failures: failures.into(),
        }),
        root: StorePath::from("snaps"),
        url_base: "s3://bucket/snaps".into(),
        endpoint: None,
    }
}

/// Writes one dataset through a store that fails `failures` times, lets the writer retry for
/// `wait` (retries every 10–40 ms), and returns the manifest it left.
async fn write_through_faults(failures: usize, wait: std::time::Duration) -> (Manifest, String) {
    let location = faulty_location(failures);
    let store = Store::new(StoreSettings::default()).expect("store");
    let retry = RetryPolicy {
        first_wait: std::time::Duration::from_millis(10),
        max_wait: std::time::Duration::from_millis(40),
        attempts: 8,
    };
    let (writer, task) = SnapshotWriter::start_with(location.clone(), retry);
    let w = writer.clone();
    store.listen(Box::new(move |d| w.dataset_created(d)));
    let d = dataset(&store, serde_json::json!({}));
    // The live session does not wait for the store: the dataset is there already.
    assert!(store.get(&d.reference).is_some());
    tokio::time::sleep(wait).await;
    store.stop_listening();
    drop(writer);
    task.await.expect("writer");
    let found = sessions(&location).await.expect("sessions");
    let manifest = manifest(&location, &found[0]).await.expect("manifest");
    (manifest, d.reference.clone())
}

#[tokio::test]
async fn a_failed_write_is_retried_with_backoff_and_the_manifest_ends_complete() {
    let (manifest, reference) = write_through_faults(3, std::time::Duration::from_secs(1)).await;
    assert!(manifest.complete, "{manifest:?}");
    assert!(manifest.missing.is_empty());
    assert_eq!(manifest.datasets.len(), 1);
    assert_eq!(manifest.datasets[0].reference, reference);
}

#[tokio::test]
async fn a_write_that_keeps_failing_is_listed_as_missing() {
    let (manifest, reference) =
        write_through_faults(usize::MAX, std::time::Duration::from_secs(1)).await;
    assert!(!manifest.complete);
    assert!(manifest.datasets.is_empty());
    assert_eq!(manifest.missing.len(), 1);
    assert_eq!(manifest.missing[0].reference, reference);
    assert!(
        manifest.missing[0].error.contains("access denied"),
        "{:?}",
        manifest.missing[0]
    );
}

/// Shutting down while a write waits for its retry: one last try, and the manifest says what
/// happened.
#[tokio::test]
async fn pending_writes_get_a_last_try_at_shutdown() {
    let (manifest, _) = write_through_faults(1, std::time::Duration::ZERO).await;
    assert!(manifest.complete, "{manifest:?}");
    assert_eq!(manifest.datasets.len(), 1);
}

/// While a write waits for its retry, the manifest says the snapshot is not complete (a kill
/// then must not leave a manifest claiming to be whole).
#[tokio::test]
async fn a_manifest_never_claims_to_be_whole_while_a_write_waits() {
    let location = faulty_location(usize::MAX);
    let store = Store::new(StoreSettings::default()).expect("store");
    let retry = RetryPolicy {
        first_wait: std::time::Duration::from_secs(30),
        max_wait: std::time::Duration::from_secs(30),
        attempts: 8,
    };
    let (writer, task) = SnapshotWriter::start_with(location.clone(), retry);
    let w = writer.clone();
    store.listen(Box::new(move |d| w.dataset_created(d)));
    let d = dataset(&store, serde_json::json!({}));
    // The first attempt has failed once the retry waits (the first wait is 30 s): poll for the
    // manifest it left, without a timing assumption on how soon that is.
    let mut polled = None;
    for _ in 0..600 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        if let Some(session) = sessions(&location)
            .await
            .ok()
            .and_then(|f| f.first().cloned())
            && let Ok(m) = manifest(&location, &session).await
        {
            polled = Some((session, m));
            break;
        }
    }
    let Some((session, waiting)) = polled else {
        panic!("no manifest was written")
    };
    let found = [session];
    assert!(!waiting.complete, "{waiting:?}");
    assert!(waiting.datasets.is_empty());
    // Shutdown: one last try, then it is listed as missing.
    store.stop_listening();
    drop(writer);
    task.await.expect("writer");
    let last = manifest(&location, &found[0]).await.expect("manifest");
    assert!(!last.complete);
    assert_eq!(last.missing.len(), 1);
    assert_eq!(last.missing[0].reference, d.reference);
}
