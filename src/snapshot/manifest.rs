//! The manifest: what a session folder holds, as `manifest.json` says it.

use serde::{Deserialize, Serialize};

/// One dataset as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestDataset {
    #[serde(rename = "ref")]
    pub reference: String,
    pub rows: usize,
    /// The Arrow schema, as arrow's JSON-ish display (the Parquet file carries the real one).
    pub schema: Vec<ManifestColumn>,
    pub provenance: ManifestProvenance,
    pub created_at: String,
    pub pinned: bool,
    pub file: String,
    /// `dataset`, `document` (a reduced result's original, one row per line) or `blob`;
    /// manifests written before documents existed hold datasets only.
    #[serde(default = "dataset_kind")]
    pub kind: String,
    /// The ref without its sequence number (`ds_crm_rows` for `ds_crm_rows_2`): what the datasets
    /// of one tool share across sessions. Empty in manifests before layout 2.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub table: String,
    /// Why Spark cannot read some of its columns (`catalog.spark.sql` leaves such a table out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spark_unreadable: Vec<String>,
}

pub(super) fn first_layout() -> u32 {
    1
}

/// The layout this version writes.
pub const LAYOUT: u32 = 2;

/// The folder of a session in the Hive-style layout is `session_id=<id>`.
pub const SESSION_FOLDER_PREFIX: &str = "session_id=";

pub(super) fn dataset_kind() -> String {
    "dataset".to_string()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestColumn {
    pub name: String,
    #[serde(rename = "type")]
    pub data_type: String,
}

impl ManifestColumn {
    /// A held dataset's columns as a manifest (or a cluster entry) records them.
    pub fn all_of(schema: &arrow::datatypes::Schema) -> Vec<Self> {
        schema
            .fields()
            .iter()
            .map(|f| Self {
                name: f.name().clone(),
                data_type: f.data_type().to_string(),
            })
            .collect()
    }
}

/// Provenance as stored: arguments were redacted before they were ever held (SPEC §13).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestProvenance {
    pub server: String,
    pub tool: String,
    pub args: serde_json::Value,
    pub source: String,
}

impl ManifestProvenance {
    /// A held dataset's provenance as stored (its creation time is a field of its own).
    pub fn of(provenance: &crate::store::Provenance) -> Self {
        Self {
            server: provenance.server.clone(),
            tool: provenance.tool.clone(),
            args: provenance.args.clone(),
            source: provenance.source.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// 2 for the Hive-style layout; absent (1) before it.
    #[serde(default = "first_layout")]
    pub layout: u32,
    pub loom_version: String,
    pub session: String,
    pub created_at: String,
    pub datasets: Vec<ManifestDataset>,
    /// False while some dataset of the session is not (yet) written; manifests before this field
    /// hold no such information and read as complete.
    #[serde(default = "complete_by_default")]
    pub complete: bool,
    /// Datasets the writer gave up on, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<MissingDataset>,
}

pub(super) fn complete_by_default() -> bool {
    true
}

/// A dataset of the session that is not in the snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MissingDataset {
    #[serde(rename = "ref")]
    pub reference: String,
    pub error: String,
}
