//! One table's file of one partition, written as rows come ([`TableFile`]): the rows are
//! appended to Arrow column builders, a record batch is handed every [`BATCH_ROWS`] rows to a
//! thread of the file's that encodes it with Parquet's Arrow writer (so that reading and
//! encoding use two cores), and a row group is closed every [`ROW_GROUP_ROWS`]; memory holds at
//! most the batch being built, [`QUEUED`] batches waiting, and the row group being encoded,
//! whatever the number of rows.

use super::schema::{Table, Type, SCHEMA_VERSION};
use crate::model::IdMap;
use arrow_array::builder::{BooleanBuilder, Float64Builder, Int32Builder, Int64Builder};
use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, DictionaryArray, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::arrow_writer::{ArrowWriter, ArrowWriterOptions};
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Rows handed to the Parquet writer at a time.
pub const BATCH_ROWS: usize = 65_536;
/// Rows per row group.
pub const ROW_GROUP_ROWS: usize = 1 << 20;
/// Batches handed on and not yet encoded, at most, per file.
pub const QUEUED: usize = 2;

/// A column being built.
enum Builder {
    I64(Int64Builder),
    I32(Int32Builder),
    F64(Float64Builder),
    Bool(BooleanBuilder),
    /// Dictionary keys into `values`, the distinct strings so far (`index` finds them by text,
    /// `by_id` by the id of what they name: [`TableFile::sym`]).
    Str {
        keys: Int32Builder,
        values: Vec<String>,
        index: HashMap<String, i32>,
        by_id: IdMap<i32>,
    },
}

/// The key of `s` among `values`, added when new.
fn intern(values: &mut Vec<String>, index: &mut HashMap<String, i32>, s: &str) -> i32 {
    if let Some(&k) = index.get(s) {
        return k;
    }
    let k = values.len() as i32;
    values.push(s.to_string());
    index.insert(s.to_string(), k);
    k
}

impl Builder {
    fn new(ty: Type) -> Builder {
        match ty {
            Type::I64 => Builder::I64(Int64Builder::with_capacity(BATCH_ROWS)),
            Type::I32 => Builder::I32(Int32Builder::with_capacity(BATCH_ROWS)),
            Type::F64 => Builder::F64(Float64Builder::with_capacity(BATCH_ROWS)),
            Type::Bool => Builder::Bool(BooleanBuilder::with_capacity(BATCH_ROWS)),
            Type::Str => Builder::Str {
                keys: Int32Builder::with_capacity(BATCH_ROWS),
                values: Vec::new(),
                index: HashMap::new(),
                by_id: IdMap::default(),
            },
        }
    }

    /// The column built so far (the builder is left empty; a string column keeps its values).
    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::I64(b) => Arc::new(b.finish()),
            Builder::I32(b) => Arc::new(b.finish()),
            Builder::F64(b) => Arc::new(b.finish()),
            Builder::Bool(b) => Arc::new(b.finish()),
            Builder::Str { keys, values, .. } => {
                let values: ArrayRef = Arc::new(StringArray::from_iter_values(values.iter()));
                // Every key is an index into `values`.
                let keys = keys.finish();
                Arc::new(
                    DictionaryArray::<Int32Type>::try_new(keys, values).expect("keys in range"),
                )
            }
        }
    }
}

fn data_type(ty: Type) -> DataType {
    match ty {
        Type::I64 => DataType::Int64,
        Type::I32 => DataType::Int32,
        Type::F64 => DataType::Float64,
        Type::Bool => DataType::Boolean,
        Type::Str => DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
    }
}

/// The Arrow schema of `table`'s files.
pub fn arrow_schema(table: &Table) -> SchemaRef {
    Arc::new(Schema::new(
        table
            .columns
            .iter()
            .map(|c| Field::new(c.name, data_type(c.ty), c.nullable))
            .collect::<Vec<_>>(),
    ))
}

/// One table's file of one partition, open for rows.
pub struct TableFile {
    table: &'static Table,
    path: PathBuf,
    schema: SchemaRef,
    columns: Vec<Builder>,
    /// The column the next value goes to.
    at: usize,
    rows: usize,
    pub written: u64,
    /// The encoding thread's queue (`None` once closed) and the thread.
    queue: Option<SyncSender<RecordBatch>>,
    encoder: Option<JoinHandle<io::Result<()>>>,
}

/// The encoding thread: writes each batch it is given, then the file's footer.
fn encode(
    mut writer: ArrowWriter<BufWriter<File>>,
    batches: Receiver<RecordBatch>,
    path: PathBuf,
) -> io::Result<()> {
    for batch in batches {
        writer.write(&batch).map_err(|e| parquet_error(&path, e))?;
    }
    let mut file = writer.into_inner().map_err(|e| parquet_error(&path, e))?;
    io::Write::flush(&mut file)
}

fn parquet_error(path: &Path, e: parquet::errors::ParquetError) -> io::Error {
    match e {
        parquet::errors::ParquetError::External(e) => match e.downcast::<io::Error>() {
            Ok(e) => *e,
            Err(e) => io::Error::other(format!("{}: {e}", path.display())),
        },
        e => io::Error::other(format!("{}: {e}", path.display())),
    }
}

impl TableFile {
    /// Creates `path` for `table`'s rows; `meta`: key-value metadata besides the schema's
    /// version and the table's name.
    pub fn create(table: &'static Table, path: &Path, meta: &[(&str, String)]) -> io::Result<Self> {
        let file = File::create(path)?;
        let schema = arrow_schema(table);
        let mut kv = vec![
            KeyValue::new("rtrace.schema_version".into(), SCHEMA_VERSION.to_string()),
            KeyValue::new("rtrace.table".into(), table.name.to_string()),
        ];
        kv.extend(
            meta.iter()
                .map(|(k, v)| KeyValue::new((*k).to_string(), v.clone())),
        );
        // Dictionaries for the strings (names repeat), plain encoding for numbers (ids and
        // times are mostly distinct: a dictionary would cost time and be dropped).
        let mut props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_size(ROW_GROUP_ROWS)
            .set_dictionary_enabled(false)
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_key_value_metadata(Some(kv));
        for c in table.columns.iter().filter(|c| c.ty == Type::Str) {
            props = props.set_column_dictionary_enabled(ColumnPath::from(c.name), true);
        }
        // Without Arrow's schema in the file: readers that honour it (pyarrow, so pandas and
        // Dask) would read the strings as categoricals; Parquet's own UTF8 type is what they are.
        let writer = ArrowWriter::try_new_with_options(
            BufWriter::with_capacity(1 << 20, file),
            schema.clone(),
            ArrowWriterOptions::new()
                .with_properties(props.build())
                .with_skip_arrow_metadata(true),
        )
        .map_err(|e| parquet_error(path, e))?;
        let (queue, batches) = sync_channel(QUEUED);
        let owned = path.to_path_buf();
        let encoder = std::thread::Builder::new()
            .name(format!("parquet-{}", table.name))
            .spawn(move || encode(writer, batches, owned))?;
        Ok(TableFile {
            table,
            path: path.to_path_buf(),
            columns: table.columns.iter().map(|c| Builder::new(c.ty)).collect(),
            schema,
            at: 0,
            rows: 0,
            written: 0,
            queue: Some(queue),
            encoder: Some(encoder),
        })
    }

    #[inline]
    fn next(&mut self) -> &mut Builder {
        let i = self.at;
        self.at += 1;
        &mut self.columns[i]
    }

    /// Appends an integer to the row's next column (an int64 or int32 column).
    #[inline]
    pub fn int(&mut self, v: i64) -> &mut Self {
        match self.next() {
            Builder::I64(b) => b.append_value(v),
            Builder::I32(b) => b.append_value(v as i32),
            _ => panic!("not an integer column"),
        }
        self
    }

    /// An unsigned value, as the signed 64-bit value of the same bits.
    #[inline]
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.int(v as i64)
    }

    /// An integer or null.
    #[inline]
    pub fn opt_int(&mut self, v: Option<i64>) -> &mut Self {
        match self.next() {
            Builder::I64(b) => b.append_option(v),
            Builder::I32(b) => b.append_option(v.map(|v| v as i32)),
            _ => panic!("not an integer column"),
        }
        self
    }

    #[inline]
    pub fn float(&mut self, v: Option<f64>) -> &mut Self {
        match self.next() {
            Builder::F64(b) => b.append_option(v),
            _ => panic!("not a double column"),
        }
        self
    }

    #[inline]
    pub fn bool(&mut self, v: bool) -> &mut Self {
        match self.next() {
            Builder::Bool(b) => b.append_value(v),
            _ => panic!("not a boolean column"),
        }
        self
    }

    /// A string (or null).
    #[inline]
    pub fn str(&mut self, v: Option<&str>) -> &mut Self {
        match self.next() {
            Builder::Str {
                keys,
                values,
                index,
                ..
            } => match v {
                None => keys.append_null(),
                Some(s) => keys.append_value(intern(values, index, s)),
            },
            _ => panic!("not a string column"),
        }
        self
    }

    /// A string named by `id` (a name id, an enum's number): found by the id, `text` asked
    /// only the first time the column meets it (rows repeat a few names many times).
    #[inline]
    pub fn sym<S: AsRef<str>>(&mut self, id: u64, text: impl FnOnce() -> S) -> &mut Self {
        match self.next() {
            Builder::Str {
                keys,
                values,
                index,
                by_id,
            } => {
                let key = match by_id.get(&id) {
                    Some(&k) => k,
                    None => {
                        let k = intern(values, index, text().as_ref());
                        by_id.insert(id, k);
                        k
                    }
                };
                keys.append_value(key);
            }
            _ => panic!("not a string column"),
        }
        self
    }

    /// Ends the row; writes a batch once [`BATCH_ROWS`] rows are held.
    #[inline]
    pub fn end(&mut self) -> io::Result<()> {
        debug_assert_eq!(
            self.at,
            self.columns.len(),
            "{}: row incomplete",
            self.table.name
        );
        self.at = 0;
        self.rows += 1;
        if self.rows == BATCH_ROWS {
            self.flush_batch()?;
        }
        Ok(())
    }

    fn flush_batch(&mut self) -> io::Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let arrays: Vec<ArrayRef> = self.columns.iter_mut().map(Builder::finish).collect();
        let batch = RecordBatch::try_new(self.schema.clone(), arrays)
            .map_err(|e| io::Error::other(format!("{}: {e}", self.path.display())))?;
        let sent = self.queue.as_ref().is_some_and(|q| q.send(batch).is_ok());
        if !sent {
            // The encoder stopped: its error says why.
            self.queue = None;
            return Err(self.join().err().unwrap_or_else(|| {
                io::Error::other(format!("{}: the encoder stopped", self.path.display()))
            }));
        }
        self.written += self.rows as u64;
        self.rows = 0;
        Ok(())
    }

    /// Waits for the encoding thread to end.
    fn join(&mut self) -> io::Result<()> {
        match self.encoder.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(io::Error::other(format!(
                "{}: the encoder panicked",
                self.path.display()
            ))),
            None => Ok(()),
        }
    }

    /// Writes what is held and the file's footer; returns the rows written.
    pub fn close(mut self) -> io::Result<u64> {
        self.flush_batch()?;
        self.queue = None;
        self.join()?;
        Ok(self.written)
    }
}

impl Drop for TableFile {
    /// A file left unclosed (an error elsewhere) still has its thread waited for, so that no
    /// thread writes in a directory being removed.
    fn drop(&mut self) {
        self.queue = None;
        let _ = self.join();
    }
}
