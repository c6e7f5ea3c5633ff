//! One table's file of one partition, written as rows come ([`TableFile`]): each row's values
//! are appended to its columns' vectors ([`ColumnBatch`]; a string as its key in the row
//! group's dictionary, [`Strings`]), and every [`BATCH_ROWS`] rows the batch is handed to a
//! thread of the file's that encodes it ([`ParquetFile`]), so that reading and encoding use two
//! cores; the thread hands the emptied vectors back for the batches after. A row group is
//! closed every [`ROW_GROUP_ROWS`]; memory holds at most the batch being filled, [`QUEUED`]
//! batches waiting, and the row group being encoded, whatever the number of rows.

use super::file::ParquetFile;
use super::schema::Table;
use super::values::{ColumnBatch, Fill, Strings, Values};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::thread::JoinHandle;

pub use super::file::ROW_GROUP_ROWS;

/// Rows handed to the encoding thread at a time: few enough that a batch's columns are still
/// in the caches when the thread encodes them (8 192 rows of the 10M-record benchmark's API
/// calls are 700 KB; 65 536 took more memory, 181 MiB instead of 117, and no less time).
pub const BATCH_ROWS: usize = 8192;
/// Batches handed on and not yet encoded, at most, per file.
pub const QUEUED: usize = 4;

// A row group is whole batches: both sides start a new dictionary at the same row.
const _: () = assert!(ROW_GROUP_ROWS.is_multiple_of(BATCH_ROWS));

/// A batch of rows, one [`ColumnBatch`] a column.
struct Batch {
    rows: usize,
    columns: Vec<ColumnBatch>,
}

/// One table's file of one partition, open for rows.
pub struct TableFile {
    table: &'static Table,
    path: PathBuf,
    columns: Vec<ColumnBatch>,
    /// The string columns' dictionaries in the row group (empty for other columns).
    strings: Vec<Strings>,
    /// The column the next value goes to.
    at: usize,
    rows: usize,
    written: u64,
    /// The encoding thread's queue (`None` once closed), the batches it has emptied, and the
    /// thread.
    queue: Option<SyncSender<Batch>>,
    emptied: Receiver<Vec<ColumnBatch>>,
    encoder: Option<JoinHandle<io::Result<()>>>,
}

/// The encoding thread: writes each batch it is given, then the file's footer.
fn encode(
    mut file: ParquetFile,
    batches: Receiver<Batch>,
    emptied: Sender<Vec<ColumnBatch>>,
    path: PathBuf,
) -> io::Result<()> {
    for mut batch in batches {
        file.write(batch.rows, &batch.columns)
            .map_err(|e| parquet_error(&path, e))?;
        batch.columns.iter_mut().for_each(ColumnBatch::clear);
        // Gone when the file is closed: the vectors are dropped.
        let _ = emptied.send(batch.columns);
    }
    let mut out = file.close().map_err(|e| parquet_error(&path, e))?;
    io::Write::flush(&mut out)
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

fn new_columns(table: &Table) -> Vec<ColumnBatch> {
    table
        .columns
        .iter()
        .map(|c| ColumnBatch::new(c.ty, c.nullable, BATCH_ROWS))
        .collect()
}

impl TableFile {
    /// Creates `path` for `table`'s rows; `meta`: key-value metadata besides the schema's
    /// version and the table's name.
    pub fn create(table: &'static Table, path: &Path, meta: &[(&str, String)]) -> io::Result<Self> {
        let file = ParquetFile::create(table, File::create(path)?, meta)
            .map_err(|e| parquet_error(path, e))?;
        let (queue, batches) = sync_channel(QUEUED);
        let (give_back, emptied) = channel();
        let owned = path.to_path_buf();
        let encoder = std::thread::Builder::new()
            .name(format!("parquet-{}", table.name))
            .spawn(move || encode(file, batches, give_back, owned))?;
        Ok(TableFile {
            table,
            path: path.to_path_buf(),
            columns: new_columns(table),
            strings: table.columns.iter().map(|_| Strings::default()).collect(),
            at: 0,
            rows: 0,
            written: 0,
            queue: Some(queue),
            emptied,
            encoder: Some(encoder),
        })
    }

    #[inline(always)]
    fn next(&mut self) -> &mut ColumnBatch {
        let i = self.at;
        self.at += 1;
        &mut self.columns[i]
    }

    /// Appends an integer to the row's next column (an int64 or int32 column).
    #[inline(always)]
    pub fn int(&mut self, v: i64) -> &mut Self {
        let c = self.next();
        match &mut c.values {
            Values::I64(b) => b.push(v),
            Values::I32(b) => b.push(v as i32),
            _ => panic!("not an integer column"),
        }
        c.row(true);
        self
    }

    /// An unsigned value, as the signed 64-bit value of the same bits.
    #[inline(always)]
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.int(v as i64)
    }

    /// An integer or null.
    #[inline(always)]
    pub fn opt_int(&mut self, v: Option<i64>) -> &mut Self {
        match v {
            Some(v) => self.int(v),
            None => {
                let c = self.next();
                assert!(
                    matches!(c.values, Values::I64(_) | Values::I32(_)),
                    "not an integer column"
                );
                c.row(false);
                self
            }
        }
    }

    #[inline(always)]
    pub fn float(&mut self, v: Option<f64>) -> &mut Self {
        let c = self.next();
        match &mut c.values {
            Values::F64(b) => b.extend(v),
            _ => panic!("not a double column"),
        }
        c.row(v.is_some());
        self
    }

    #[inline(always)]
    pub fn bool(&mut self, v: bool) -> &mut Self {
        let c = self.next();
        match &mut c.values {
            Values::Bool(b) => b.push(v),
            _ => panic!("not a boolean column"),
        }
        c.row(true);
        self
    }

    /// A string (or null).
    #[inline]
    pub fn str(&mut self, v: Option<&str>) -> &mut Self {
        let i = self.at;
        self.at += 1;
        let (c, strings) = (&mut self.columns[i], &mut self.strings[i]);
        let Values::Str(keys) = &mut c.values else {
            panic!("not a string column")
        };
        if let Some(s) = v {
            keys.push(strings.key(s, &mut c.added));
        }
        c.row(v.is_some());
        self
    }

    /// Appends a row for each of `records`, a column at a time: `fill` gives each column its
    /// values for the records it is handed (all of them, or those that fit in the batch).
    pub fn write_rows<R>(
        &mut self,
        records: &[R],
        mut fill: impl FnMut(&mut Fill, &[R]),
    ) -> io::Result<()> {
        debug_assert_eq!(self.at, 0, "{}: a row is open", self.table.name);
        let mut rest = records;
        while !rest.is_empty() {
            let (now, later) = rest.split_at(rest.len().min(BATCH_ROWS - self.rows));
            let mut columns = Fill::new(&mut self.columns, &mut self.strings, now.len());
            fill(&mut columns, now);
            assert!(
                columns.is_complete(),
                "{}: a column left out",
                self.table.name
            );
            self.rows += now.len();
            if self.rows == BATCH_ROWS {
                self.flush_batch()?;
            }
            rest = later;
        }
        Ok(())
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
        let next = self
            .emptied
            .try_recv()
            .unwrap_or_else(|_| new_columns(self.table));
        let batch = Batch {
            rows: self.rows,
            columns: std::mem::replace(&mut self.columns, next),
        };
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
        if (self.written as usize).is_multiple_of(ROW_GROUP_ROWS) {
            self.strings.iter_mut().for_each(Strings::clear);
        }
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

#[cfg(test)]
mod tests {
    use super::super::schema::{col, opt, Type};
    use super::*;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;

    /// Rows over several batches and row groups.
    const ROWS: usize = ROW_GROUP_ROWS + BATCH_ROWS + 7;

    fn or_null(some: bool, f: Field) -> Field {
        if some {
            f
        } else {
            Field::Null
        }
    }

    /// Writes `ROWS` rows with `write`, then checks every row read back (by the parquet crate's
    /// own reader) against `row`.
    fn round_trip(
        table: &'static Table,
        write: impl Fn(&mut TableFile),
        row: impl Fn(usize) -> Vec<Field>,
    ) {
        let dir =
            std::env::temp_dir().join(format!("rtrace-{}-{}", table.name, std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.parquet");
        let mut t = TableFile::create(table, &path, &[("k", "v".into())]).unwrap();
        write(&mut t);
        assert_eq!(t.close().unwrap(), ROWS as u64);
        let reader = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
        assert_eq!(reader.metadata().num_row_groups(), 2);
        let mut read = 0;
        for (i, r) in reader.get_row_iter(None).unwrap().enumerate() {
            let r = r.unwrap();
            let fields: Vec<Field> = r.get_column_iter().map(|(_, f)| f.clone()).collect();
            assert_eq!(fields, row(i), "row {i}");
            read += 1;
        }
        assert_eq!(read, ROWS);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    static BY_ROW: Table = Table {
        name: "by_row",
        about: "every type, required and nullable",
        columns: &[
            col("a", Type::I64, "", ""),
            opt("b", Type::I32, "", ""),
            opt("c", Type::F64, "", ""),
            col("d", Type::Bool, "", ""),
            opt("e", Type::Str, "", ""),
        ],
    };

    #[test]
    fn rows_written_a_row_at_a_time_read_back() {
        let write = |t: &mut TableFile| {
            for i in 0..ROWS {
                t.int(i as i64)
                    .opt_int((i % 3 != 0).then_some(-(i as i64)))
                    .float((i % 4 != 0).then_some(i as f64 / 2.0))
                    .bool(i % 5 == 0)
                    .str((i % 7 != 0).then(|| format!("name{}", i % 5)).as_deref())
                    .end()
                    .unwrap();
            }
        };
        round_trip(&BY_ROW, write, |i| {
            vec![
                Field::Long(i as i64),
                or_null(i % 3 != 0, Field::Int(-(i as i32))),
                or_null(i % 4 != 0, Field::Double(i as f64 / 2.0)),
                Field::Bool(i % 5 == 0),
                or_null(i % 7 != 0, Field::Str(format!("name{}", i % 5))),
            ]
        });
    }

    static BY_COLUMN: Table = Table {
        name: "by_column",
        about: "the types of the record tables",
        columns: &[
            col("a", Type::I64, "", ""),
            opt("b", Type::I64, "", ""),
            col("c", Type::I32, "", ""),
            col("d", Type::Bool, "", ""),
            col("e", Type::Str, "", ""),
        ],
    };

    #[test]
    fn rows_written_a_column_at_a_time_read_back() {
        let write = |t: &mut TableFile| {
            let rows: Vec<usize> = (0..ROWS).collect();
            for part in rows.chunks(70_001) {
                t.write_rows(part, |c, rows| {
                    c.ints(rows.iter().map(|&i| i as i64))
                        .opt_ints(rows.iter().map(|&i| (i % 11 != 0).then_some(i as i64 * 3)))
                        .ints(rows.iter().map(|&i| i as i64 % 1000))
                        .bools(rows.iter().map(|&i| i % 5 == 0))
                        .syms(rows, |&i| (i % 3) as u64, |&i| format!("sym{}", i % 3));
                })
                .unwrap();
            }
        };
        round_trip(&BY_COLUMN, write, |i| {
            vec![
                Field::Long(i as i64),
                or_null(i % 11 != 0, Field::Long(i as i64 * 3)),
                Field::Int(i as i32 % 1000),
                Field::Bool(i % 5 == 0),
                Field::Str(format!("sym{}", i % 3)),
            ]
        });
    }
}
