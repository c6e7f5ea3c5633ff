//! One column's rows of a batch, as [`super::columns::TableFile`] gathers them and hands them
//! to its file's encoding thread ([`ColumnBatch`]): the values in a vector of their type (a
//! nullable column's non-null values only, with a flag a row), a string column's rows as keys
//! into the row group's dictionary, whose strings each batch brings as they first appear
//! ([`Strings`]): the order Parquet's dictionary pages list them in.

use super::schema::Type;
use crate::model::IdMap;
use std::collections::HashMap;

/// A column's values, in row order.
#[derive(Debug)]
pub enum Values {
    I64(Vec<i64>),
    I32(Vec<i32>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
    /// Keys into the row group's dictionary.
    Str(Vec<u32>),
}

/// One column's rows of a batch.
#[derive(Debug)]
pub struct ColumnBatch {
    /// The values of the rows that have one.
    pub values: Values,
    /// A nullable column's rows: whether each has a value. `None` for a required column.
    pub valid: Option<Vec<bool>>,
    /// A string column's strings that first appear in this batch in its row group, in the
    /// order of their keys (the first is key `dictionary size before the batch`).
    pub added: Vec<String>,
}

impl ColumnBatch {
    /// An empty batch of a column of type `ty`, with room for `rows` rows.
    pub fn new(ty: Type, nullable: bool, rows: usize) -> ColumnBatch {
        ColumnBatch {
            values: match ty {
                Type::I64 => Values::I64(Vec::with_capacity(rows)),
                Type::I32 => Values::I32(Vec::with_capacity(rows)),
                Type::F64 => Values::F64(Vec::with_capacity(rows)),
                Type::Bool => Values::Bool(Vec::with_capacity(rows)),
                Type::Str => Values::Str(Vec::with_capacity(rows)),
            },
            valid: nullable.then(|| Vec::with_capacity(rows)),
            added: Vec::new(),
        }
    }

    /// Emptied, its room kept, for the next batch.
    pub fn clear(&mut self) {
        match &mut self.values {
            Values::I64(v) => v.clear(),
            Values::I32(v) => v.clear(),
            Values::F64(v) => v.clear(),
            Values::Bool(v) => v.clear(),
            Values::Str(v) => v.clear(),
        }
        if let Some(v) = &mut self.valid {
            v.clear();
        }
        self.added.clear();
    }

    /// Notes whether the row has a value (a required column's always has).
    #[inline]
    pub fn row(&mut self, has_value: bool) {
        if let Some(v) = &mut self.valid {
            v.push(has_value);
        } else {
            debug_assert!(has_value, "a null in a required column");
        }
    }
}

/// A string column's dictionary in its row group, on the side that gathers the rows: each
/// distinct string's key, found by the string or by the id of what it names.
#[derive(Debug, Default)]
pub struct Strings {
    keys: HashMap<String, u32>,
    by_id: IdMap<u32>,
}

impl Strings {
    /// The key of `s`; a new one (and `s` added to `added`) when `s` is new.
    #[inline]
    pub fn key(&mut self, s: &str, added: &mut Vec<String>) -> u32 {
        if let Some(&k) = self.keys.get(s) {
            return k;
        }
        let k = self.keys.len() as u32;
        self.keys.insert(s.to_string(), k);
        added.push(s.to_string());
        k
    }

    /// The key of the string named by `id`: `text` asked only the first time.
    #[inline]
    pub fn key_by_id<S: AsRef<str>>(
        &mut self,
        id: u64,
        text: impl FnOnce() -> S,
        added: &mut Vec<String>,
    ) -> u32 {
        if let Some(&k) = self.by_id.get(&id) {
            return k;
        }
        let k = self.key(text().as_ref(), added);
        self.by_id.insert(id, k);
        k
    }

    /// Forgets every string: a new row group starts.
    pub fn clear(&mut self) {
        self.keys.clear();
        self.by_id.clear();
    }
}
