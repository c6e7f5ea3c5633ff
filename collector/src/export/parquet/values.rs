//! One column's rows of a batch, as [`super::columns::TableFile`] gathers them and hands them
//! to its file's encoding thread ([`ColumnBatch`]): the values in a vector of their type (a
//! nullable column's non-null values only, with a flag a row), a string column's rows as keys
//! into the row group's dictionary, whose strings each batch brings as they first appear
//! ([`Strings`]): the order Parquet's dictionary pages list them in. Rows of records come a
//! column at a time ([`Fill`]): a loop a column over the records, not a call a value.

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

/// Rows appended a column at a time: each method gives the next column its value for every
/// row (in the table's order of columns).
pub struct Fill<'a> {
    columns: &'a mut [ColumnBatch],
    strings: &'a mut [Strings],
    /// The rows being appended.
    rows: usize,
    at: usize,
}

impl<'a> Fill<'a> {
    pub fn new(columns: &'a mut [ColumnBatch], strings: &'a mut [Strings], rows: usize) -> Self {
        Fill {
            columns,
            strings,
            rows,
            at: 0,
        }
    }

    #[inline]
    fn next(&mut self) -> (&mut ColumnBatch, &mut Strings) {
        let i = self.at;
        self.at += 1;
        (&mut self.columns[i], &mut self.strings[i])
    }

    /// Integers (an int64 or int32 column), one a row.
    #[inline]
    pub fn ints(&mut self, values: impl Iterator<Item = i64>) -> &mut Self {
        let rows = self.rows;
        let (c, _) = self.next();
        match &mut c.values {
            Values::I64(v) => v.extend(values),
            Values::I32(v) => v.extend(values.map(|x| x as i32)),
            _ => panic!("not an integer column"),
        }
        if let Some(valid) = &mut c.valid {
            valid.extend(std::iter::repeat_n(true, rows));
        }
        self
    }

    /// Integers or nulls, one a row (a nullable column).
    #[inline]
    pub fn opt_ints(&mut self, values: impl Iterator<Item = Option<i64>>) -> &mut Self {
        let (c, _) = self.next();
        let (Values::I64(v), Some(valid)) = (&mut c.values, &mut c.valid) else {
            panic!("not a nullable int64 column")
        };
        for x in values {
            valid.push(x.is_some());
            v.extend(x);
        }
        self
    }

    #[inline]
    pub fn bools(&mut self, values: impl Iterator<Item = bool>) -> &mut Self {
        let (c, _) = self.next();
        let (Values::Bool(v), None) = (&mut c.values, &c.valid) else {
            panic!("not a boolean column")
        };
        v.extend(values);
        self
    }

    /// Strings, one a row of `rows`, each named by an id (a name id, an enum's number):
    /// `text` asked for an id's string the first time the column meets it in its row group.
    #[inline]
    pub fn syms<R, S: AsRef<str>>(
        &mut self,
        rows: &[R],
        id: impl Fn(&R) -> u64,
        mut text: impl FnMut(&R) -> S,
    ) -> &mut Self {
        let (c, strings) = self.next();
        let (Values::Str(keys), None) = (&mut c.values, &c.valid) else {
            panic!("not a string column")
        };
        let mut last = None;
        for r in rows {
            let id = id(r);
            let key = match last {
                Some((at, key)) if at == id => key,
                _ => strings.key_by_id(id, || text(r), &mut c.added),
            };
            last = Some((id, key));
            keys.push(key);
        }
        self
    }

    /// Whether every column was given its values.
    pub fn is_complete(&self) -> bool {
        self.at == self.columns.len()
    }
}
