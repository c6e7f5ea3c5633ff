//! One column's chunk of the row group being written ([`Chunk`]): each batch's rows encoded
//! into data pages of [`PAGE_ROWS`] rows as they come (version 1 pages: definition levels of a
//! nullable column, then the values, Snappy-compressed together), numbers `PLAIN`, strings
//! `RLE_DICTIONARY` against the row group's dictionary, whose page goes first; then the
//! chunk's bytes and its metadata (statistics, offset index), for the file to append.
//!
//! Parquet's own writer hashes every string of every row to find its dictionary key and
//! compares it for the min and max; here the keys come made, and the statistics are the
//! dictionary's. What the chunk holds in the file is what that writer makes: the same
//! encodings, statistics ([`super::stats`]), size statistics and offset index; only its pages
//! end at other rows (every 8 192, where that writer's end near 20 000), so a chunk of more
//! rows than a page has other bytes.

use super::hybrid;
use super::schema::Type;
use super::stats::{self, Bounds};
use super::values::{ColumnBatch, Values};
use bytes::Bytes;
use parquet::basic::{Compression, Encoding, EncodingMask, PageType};
use parquet::column::page::{CompressedPage, Page, PageWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::errors::Result;
use parquet::file::metadata::{
    ColumnChunkMetaData, LevelHistogram, OffsetIndexBuilder, PageEncodingStats,
};
use parquet::file::writer::{SerializedPageWriter, TrackedWrite};
use parquet::schema::types::ColumnDescPtr;

/// Rows a data page holds at most (a batch is cut into pages of this many).
pub const PAGE_ROWS: usize = 8192;

/// Compresses pages with Snappy, into a buffer kept from one page to the next (grown, never
/// shrunk: zeroed once, not at every page).
pub struct Compressor {
    snappy: snap::raw::Encoder,
    out: Vec<u8>,
}

impl Compressor {
    pub fn new() -> Compressor {
        Compressor {
            snappy: snap::raw::Encoder::new(),
            out: Vec::new(),
        }
    }

    fn compress(&mut self, data: &[u8]) -> Result<Bytes> {
        let room = snap::raw::max_compress_len(data.len());
        if self.out.len() < room {
            self.out.resize(room, 0);
        }
        let n = self
            .snappy
            .compress(data, &mut self.out)
            .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))?;
        Ok(Bytes::copy_from_slice(&self.out[..n]))
    }
}

/// The min and max of a chunk's values, of its type.
enum Range {
    I64(Bounds<i64>),
    I32(Bounds<i32>),
    F64(Bounds<f64>),
    Bool(Bounds<bool>),
    /// A string column's: its dictionary's strings (every one used in the row group).
    Str(Vec<String>),
}

/// One column's chunk of the row group being written.
pub struct Chunk {
    descr: ColumnDescPtr,
    ty: Type,
    sink: TrackedWrite<Vec<u8>>,
    range: Range,
    /// A string column's data pages, written after its dictionary's page.
    held: Vec<CompressedPage>,
    rows: u64,
    nulls: u64,
    /// A string column's bytes over its non-null rows.
    string_bytes: i64,
    pages: Vec<PageEncodingStats>,
    offsets: OffsetIndexBuilder,
    data_offset: Option<i64>,
    dictionary_offset: Option<i64>,
    uncompressed: i64,
    compressed: i64,
    bytes_written: u64,
    /// The page being encoded.
    page: Vec<u8>,
}

impl Chunk {
    /// An empty chunk of the column `descr`, of type `ty`.
    pub fn new(descr: ColumnDescPtr, ty: Type) -> Chunk {
        Chunk {
            descr,
            ty,
            sink: TrackedWrite::new(Vec::new()),
            range: match ty {
                Type::I64 => Range::I64(Bounds::default()),
                Type::I32 => Range::I32(Bounds::default()),
                Type::F64 => Range::F64(Bounds::default()),
                Type::Bool => Range::Bool(Bounds::default()),
                Type::Str => Range::Str(Vec::new()),
            },
            held: Vec::new(),
            rows: 0,
            nulls: 0,
            string_bytes: 0,
            pages: Vec::new(),
            offsets: OffsetIndexBuilder::new(),
            data_offset: None,
            dictionary_offset: None,
            uncompressed: 0,
            compressed: 0,
            bytes_written: 0,
            page: Vec::new(),
        }
    }

    /// Encodes `batch`'s rows into data pages.
    pub fn write(&mut self, batch: &ColumnBatch, zip: &mut Compressor) -> Result<()> {
        if let (Range::Str(dictionary), false) = (&mut self.range, batch.added.is_empty()) {
            dictionary.extend(batch.added.iter().cloned());
        }
        let rows = batch.valid.as_ref().map_or(len(&batch.values), Vec::len);
        let mut value = 0;
        for start in (0..rows).step_by(PAGE_ROWS) {
            let end = (start + PAGE_ROWS).min(rows);
            self.page.clear();
            let values = match &batch.valid {
                Some(valid) => {
                    let valid = &valid[start..end];
                    let n = valid.iter().filter(|&&v| v).count();
                    self.nulls += (valid.len() - n) as u64;
                    levels(valid, &mut self.page);
                    value..value + n
                }
                None => start..end,
            };
            value = values.end;
            let (encoding, string_bytes) = self.values(&batch.values, values)?;
            let data = zip.compress(&self.page)?;
            let page = Page::DataPage {
                buf: data,
                num_values: (end - start) as u32,
                encoding,
                def_level_encoding: Encoding::RLE,
                rep_level_encoding: Encoding::RLE,
                statistics: None,
            };
            let page = CompressedPage::new(page, self.page.len());
            self.offsets.append_row_count((end - start) as i64);
            self.offsets
                .append_unencoded_byte_array_data_bytes(string_bytes);
            if matches!(self.range, Range::Str(_)) {
                self.held.push(page);
            } else {
                self.write_page(page)?;
            }
        }
        self.rows += rows as u64;
        Ok(())
    }

    /// Appends `values[range]` to the page, encoded; notes their bounds. Returns their
    /// encoding, and for strings their bytes.
    fn values(
        &mut self,
        values: &Values,
        range: std::ops::Range<usize>,
    ) -> Result<(Encoding, Option<i64>)> {
        let page = &mut self.page;
        match (values, &mut self.range) {
            (Values::I64(v), Range::I64(b)) => {
                let v = &v[range];
                b.add_ints(v);
                plain(page, v, i64::to_le_bytes);
            }
            (Values::I32(v), Range::I32(b)) => {
                let v = &v[range];
                b.add_ints(v);
                plain(page, v, i32::to_le_bytes);
            }
            (Values::F64(v), Range::F64(b)) => {
                let v = &v[range];
                b.add_doubles(v);
                plain(page, v, f64::to_le_bytes);
            }
            (Values::Bool(v), Range::Bool(b)) => {
                let v = &v[range];
                b.add_bools(v);
                for eight in v.chunks(8) {
                    let byte = eight
                        .iter()
                        .enumerate()
                        .fold(0u8, |acc, (i, &x)| acc | (u8::from(x) << i));
                    page.push(byte);
                }
            }
            (Values::Str(keys), Range::Str(dictionary)) => {
                let keys = &keys[range];
                let width = hybrid::bit_width(dictionary.len().saturating_sub(1) as u32);
                page.push(width);
                hybrid::encode(keys, width, page);
                let bytes: usize = keys.iter().map(|&k| dictionary[k as usize].len()).sum();
                self.string_bytes += bytes as i64;
                return Ok((Encoding::RLE_DICTIONARY, Some(bytes as i64)));
            }
            _ => {
                return Err(parquet::errors::ParquetError::General(format!(
                    "column {}: values of another type",
                    self.descr.name()
                )))
            }
        }
        Ok((Encoding::PLAIN, None))
    }

    fn write_page(&mut self, page: CompressedPage) -> Result<()> {
        let (kind, encoding) = (page.page_type(), page.encoding());
        match self.pages.last_mut() {
            Some(s) if s.page_type == kind && s.encoding == encoding => s.count += 1,
            _ => self.pages.push(PageEncodingStats {
                page_type: kind,
                encoding,
                count: 1,
            }),
        }
        let spec = SerializedPageWriter::new(&mut self.sink).write_page(page)?;
        let offset = spec.offset as i64;
        match kind {
            PageType::DICTIONARY_PAGE => self.dictionary_offset = Some(offset),
            _ => {
                self.data_offset.get_or_insert(offset);
                self.offsets
                    .append_offset_and_size(offset, spec.compressed_size as i32);
            }
        }
        self.uncompressed += spec.uncompressed_size as i64;
        self.compressed += spec.compressed_size as i64;
        self.bytes_written += spec.bytes_written;
        Ok(())
    }

    /// Whether it holds no rows.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// The chunk's bytes and what the file needs to know of them; the chunk is left empty,
    /// for the next row group.
    pub fn finish(&mut self, zip: &mut Compressor) -> Result<(Bytes, ColumnCloseResult)> {
        let mut done = std::mem::replace(self, Chunk::new(self.descr.clone(), self.ty));
        self.page = std::mem::take(&mut done.page);
        // Room for a chunk like this one, so that the next one's bytes are not moved as they
        // grow (nor held in twice their size).
        let like = done.sink.bytes_written();
        self.sink = TrackedWrite::new(Vec::with_capacity(like + like / 8));
        done.close(zip)
    }

    fn close(mut self, zip: &mut Compressor) -> Result<(Bytes, ColumnCloseResult)> {
        let signed = self.descr.sort_order().is_signed();
        let statistics = match &self.range {
            Range::I64(b) => b.statistics(self.nulls, signed),
            Range::I32(b) => b.statistics(self.nulls, signed),
            Range::F64(b) => b.signed_zeros().statistics(self.nulls, signed),
            Range::Bool(b) => b.statistics(self.nulls, signed),
            Range::Str(dictionary) => stats::strings(dictionary, self.nulls),
        };
        let mut encodings = vec![Encoding::RLE];
        if let Range::Str(dictionary) = &self.range {
            let mut plain = Vec::new();
            for s in dictionary {
                plain.extend_from_slice(&(s.len() as u32).to_le_bytes());
                plain.extend_from_slice(s.as_bytes());
            }
            let page = Page::DictionaryPage {
                buf: zip.compress(&plain)?,
                num_values: dictionary.len() as u32,
                encoding: Encoding::PLAIN,
                is_sorted: false,
            };
            self.write_page(CompressedPage::new(page, plain.len()))?;
            for page in std::mem::take(&mut self.held) {
                self.write_page(page)?;
            }
            encodings.push(Encoding::RLE_DICTIONARY);
        }
        encodings.push(Encoding::PLAIN);
        let histogram = (self.descr.max_def_level() > 0).then(|| {
            LevelHistogram::from(vec![self.nulls as i64, (self.rows - self.nulls) as i64])
        });
        let strings = matches!(self.range, Range::Str(_)).then_some(self.string_bytes);
        let metadata = ColumnChunkMetaData::builder(self.descr.clone())
            .set_compression(Compression::SNAPPY)
            .set_encodings_mask(EncodingMask::new_from_encodings(encodings.iter()))
            .set_page_encoding_stats(self.pages)
            .set_total_compressed_size(self.compressed)
            .set_total_uncompressed_size(self.uncompressed)
            .set_num_values(self.rows as i64)
            .set_data_page_offset(self.data_offset.unwrap_or(0))
            .set_dictionary_page_offset(self.dictionary_offset)
            .set_statistics(statistics)
            .set_unencoded_byte_array_data_bytes(strings)
            .set_repetition_level_histogram(None)
            .set_definition_level_histogram(histogram)
            .build()?;
        let bytes = Bytes::from(self.sink.into_inner()?);
        Ok((
            bytes,
            ColumnCloseResult {
                bytes_written: self.bytes_written,
                rows_written: self.rows,
                metadata,
                bloom_filter: None,
                column_index: None,
                offset_index: Some(self.offsets.build()),
            },
        ))
    }
}

/// Appends `values` PLAIN-encoded: each one's `N` little-endian bytes (`N` at most 8), a block
/// at a time through the stack, so that the page is neither zeroed first nor checked for room
/// at every value.
fn plain<T: Copy, const N: usize>(page: &mut Vec<u8>, values: &[T], bytes: fn(T) -> [u8; N]) {
    const BLOCK: usize = 512;
    page.reserve(values.len() * N);
    let mut buf = [0u8; BLOCK];
    for block in values.chunks(BLOCK / N) {
        for (out, &v) in buf.chunks_exact_mut(N).zip(block) {
            out.copy_from_slice(&bytes(v));
        }
        page.extend_from_slice(&buf[..block.len() * N]);
    }
}

fn len(values: &Values) -> usize {
    match values {
        Values::I64(v) => v.len(),
        Values::I32(v) => v.len(),
        Values::F64(v) => v.len(),
        Values::Bool(v) => v.len(),
        Values::Str(v) => v.len(),
    }
}

/// A version 1 data page's definition levels (1 for a value, 0 for a null): their length in
/// four bytes, then the levels hybrid-encoded with bit width 1.
fn levels(valid: &[bool], page: &mut Vec<u8>) {
    let at = page.len();
    page.extend_from_slice(&[0; 4]);
    hybrid::encode(valid, 1, page);
    let n = (page.len() - at - 4) as u32;
    page[at..at + 4].copy_from_slice(&n.to_le_bytes());
}
