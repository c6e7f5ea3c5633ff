//! One table's Parquet file, written by its encoding thread a batch at a time ([`ParquetFile`]):
//! each column's rows encoded into its chunk of the row group as they come ([`Chunk`]), a row
//! group closed every [`ROW_GROUP_ROWS`] rows, then the footer. The file's schema is the
//! one Parquet's Arrow writer gives the table's Arrow schema (strings `BYTE_ARRAY` with the
//! `String` logical type), without the Arrow schema itself: readers that honour it (pyarrow,
//! so pandas and Dask) would read dictionary-encoded strings as categoricals.

use super::chunk::{Chunk, Compressor};
use super::schema::{Table, Type, SCHEMA_VERSION};
use super::values::ColumnBatch;
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowSchemaConverter;
use parquet::basic::Compression;
use parquet::errors::Result;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use std::fs::File;
use std::io::BufWriter;
use std::sync::Arc;

/// Rows per row group.
pub const ROW_GROUP_ROWS: usize = 1 << 20;

fn data_type(ty: Type) -> DataType {
    match ty {
        Type::I64 => DataType::Int64,
        Type::I32 => DataType::Int32,
        Type::F64 => DataType::Float64,
        Type::Bool => DataType::Boolean,
        Type::Str => DataType::Utf8,
    }
}

/// The Arrow schema of `table`'s files.
pub fn arrow_schema(table: &Table) -> Schema {
    Schema::new(
        table
            .columns
            .iter()
            .map(|c| Field::new(c.name, data_type(c.ty), c.nullable))
            .collect::<Vec<_>>(),
    )
}

/// A table's Parquet file being written.
pub struct ParquetFile {
    writer: SerializedFileWriter<BufWriter<File>>,
    chunks: Vec<Chunk>,
    /// Rows in the row group being written.
    rows: usize,
    zip: Compressor,
}

impl ParquetFile {
    /// Starts `file` as `table`'s; `meta`: key-value metadata besides the schema's version and
    /// the table's name.
    pub fn create(table: &Table, file: File, meta: &[(&str, String)]) -> Result<ParquetFile> {
        let schema = ArrowSchemaConverter::new().convert(&arrow_schema(table))?;
        let mut kv = vec![
            KeyValue::new("rtrace.schema_version".into(), SCHEMA_VERSION.to_string()),
            KeyValue::new("rtrace.table".into(), table.name.to_string()),
        ];
        kv.extend(
            meta.iter()
                .map(|(k, v)| KeyValue::new((*k).to_string(), v.clone())),
        );
        // What the footer says of the chunks (their pages are made in chunk.rs).
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_size(ROW_GROUP_ROWS)
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_key_value_metadata(Some(kv))
            .build();
        let chunks = schema
            .columns()
            .iter()
            .zip(table.columns)
            .map(|(descr, c)| Chunk::new(descr.clone(), c.ty))
            .collect();
        let writer = SerializedFileWriter::new(
            BufWriter::with_capacity(1 << 20, file),
            schema.root_schema_ptr(),
            Arc::new(props),
        )?;
        Ok(ParquetFile {
            writer,
            chunks,
            rows: 0,
            zip: Compressor::new(),
        })
    }

    /// Encodes a batch of `rows` rows: one [`ColumnBatch`] a column.
    pub fn write(&mut self, rows: usize, batch: &[ColumnBatch]) -> Result<()> {
        for (chunk, column) in self.chunks.iter_mut().zip(batch) {
            chunk.write(column, &mut self.zip)?;
        }
        self.rows += rows;
        if self.rows >= ROW_GROUP_ROWS {
            self.close_row_group()?;
        }
        Ok(())
    }

    fn close_row_group(&mut self) -> Result<()> {
        if self.chunks.iter().all(Chunk::is_empty) {
            return Ok(());
        }
        let mut group = self.writer.next_row_group()?;
        for chunk in &mut self.chunks {
            let (bytes, close) = chunk.finish(&mut self.zip)?;
            group.append_column(&bytes, close)?;
        }
        group.close()?;
        self.rows = 0;
        Ok(())
    }

    /// Writes the last row group and the footer; returns the file, flushed.
    pub fn close(mut self) -> Result<File> {
        self.close_row_group()?;
        let out = self.writer.into_inner()?;
        out.into_inner()
            .map_err(|e| parquet::errors::ParquetError::External(Box::new(e.into_error())))
    }
}
