//! Datasets to Parquet and back.

use arrow::array::RecordBatch;
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use super::*;

/// A dataset as Parquet.
pub struct ParquetFile {
    pub bytes: Vec<u8>,
    /// Why Spark cannot read some columns (empty when it reads them all).
    pub spark_unreadable: Vec<String>,
}

/// Parquet of a dataset: zstd, in portable types ([`portable`]), the Arrow schema embedded so
/// [`read_parquet`] gives back exactly the types it had.
pub fn parquet_file(
    schema: &arrow::datatypes::SchemaRef,
    batches: &[RecordBatch],
) -> Result<ParquetFile, String> {
    parquet_file_with(schema, batches, Compression::ZSTD(ZstdLevel::default()))
}

/// [`parquet_file`] with LZ4 (raw) instead of zstd: a cluster's datasets (SPEC §25) are read
/// back by another instance before its first query, and LZ4 decodes several times faster for
/// files somewhat larger; Spark, DataFusion and DuckDB read it.
pub fn parquet_file_fast(
    schema: &arrow::datatypes::SchemaRef,
    batches: &[RecordBatch],
) -> Result<ParquetFile, String> {
    parquet_file_with(schema, batches, Compression::LZ4_RAW)
}

fn parquet_file_with(
    schema: &arrow::datatypes::SchemaRef,
    batches: &[RecordBatch],
    compression: Compression,
) -> Result<ParquetFile, String> {
    let (schema, batches) = portable::to_portable(schema, batches)?;
    let properties = WriterProperties::builder()
        .set_compression(compression)
        .build();
    let mut buffer = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut buffer, schema.clone(), Some(properties))
        .map_err(|e| e.to_string())?;
    for batch in &batches {
        writer.write(batch).map_err(|e| e.to_string())?;
    }
    writer.close().map_err(|e| e.to_string())?;
    Ok(ParquetFile {
        bytes: buffer,
        spark_unreadable: portable::spark_unreadable(&schema),
    })
}

/// Parquet bytes of a dataset (see [`parquet_file`]).
pub fn parquet_bytes(
    schema: &arrow::datatypes::SchemaRef,
    batches: &[RecordBatch],
) -> Result<Vec<u8>, String> {
    parquet_file(schema, batches).map(|file| file.bytes)
}

/// Record batches back from Parquet bytes, in the types they had before they were written.
pub fn read_parquet(
    bytes: Bytes,
) -> Result<(arrow::datatypes::SchemaRef, Vec<RecordBatch>), String> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| e.to_string())?;
    let schema = builder.schema().clone();
    let reader = builder.build().map_err(|e| e.to_string())?;
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    portable::from_portable(&schema, batches)
}
