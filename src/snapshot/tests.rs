use std::sync::Arc;

use arrow::datatypes::DataType;

use super::*;
use crate::ingest::ingest_json_array;
use crate::store::{NewDataset, Store, StoreSettings};

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
    store.set_listener(Some(Box::new(move |d| w.dataset_created(d))));
    let d = dataset(&store, serde_json::json!({"apiKey": "[redacted]"}));
    store.set_listener(None);
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
