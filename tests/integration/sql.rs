//! Runs every `sql/*.slt` file (sqllogictest) against loom's sealed store: what `loom_query`
//! answers, and every statement it refuses with its message. The tables are the JSON files in
//! `sql/data/`, ingested exactly as a tool result would be, named by their file stem.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use loom::ingest::ingest_json_array;
use loom::store::values::cell;
use loom::store::{NewDataset, Provenance, QueryError, Store, StoreSettings};
use sqllogictest::{AsyncDB, DBOutput, DefaultColumnType};

#[derive(Debug)]
struct SqlError(QueryError);

impl std::fmt::Display for SqlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::error::Error for SqlError {}

struct LoomDb {
    store: Arc<Store>,
}

/// A cell as sqllogictest text: NULL, strings as they are, everything else as typed JSON.
fn text(value: serde_json::Value) -> String {
    match value {
        serde_json::Value::Null => "NULL".into(),
        serde_json::Value::String(s) if s.is_empty() => "(empty)".into(),
        serde_json::Value::String(s) => s,
        other => other.to_string(),
    }
}

#[async_trait]
impl AsyncDB for LoomDb {
    type Error = SqlError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, SqlError> {
        let out = self.store.query(sql).await.map_err(SqlError)?;
        let mut rows = Vec::with_capacity(out.rows);
        for batch in &out.batches {
            for row in 0..batch.num_rows() {
                rows.push(batch.columns().iter().map(|c| text(cell(c, row))).collect());
            }
        }
        Ok(DBOutput::Rows {
            types: vec![DefaultColumnType::Any; out.schema.fields().len()],
            rows,
        })
    }

    async fn shutdown(&mut self) {}
}

fn store_with_data(dir: &Path) -> Arc<Store> {
    let store = Arc::new(Store::new(StoreSettings::default()).expect("store"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("sql/data")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    for file in files {
        let name = file
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("name")
            .to_string();
        let text = std::fs::read_to_string(&file).expect("read");
        let ingested = ingest_json_array(&text).expect("ingest");
        store
            .add(NewDataset {
                server: "slt".into(),
                tool: name.clone(),
                schema: ingested.batch.schema(),
                batches: vec![ingested.batch],
                columns: ingested.columns,
                provenance: Provenance {
                    server: "slt".into(),
                    tool: name.clone(),
                    args: serde_json::json!({}),
                    created_at: "2026-01-01T00:00:00Z".into(),
                    source: "test".into(),
                },
                pinned: true,
                implicit: false,
                passed_through: false,
                name: Some(name),
            })
            .expect("add");
    }
    store
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqllogictest_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("sql/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .slt files in {}", root.display());
    let mut failures = Vec::new();
    for file in &files {
        let store = store_with_data(&root.join("data"));
        let mut runner = sqllogictest::Runner::new(move || {
            let store = store.clone();
            async move { Ok(LoomDb { store }) }
        });
        if let Err(error) = runner.run_file_async(file).await {
            failures.push(format!("{}:\n{error}", file.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
