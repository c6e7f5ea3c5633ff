//! What the Parquet dataset's schema is made of: tables of columns, each with its type, unit
//! and meaning (the tables themselves are declared once in `tables.rs`), the schema's version,
//! and the dataset's `_schema.json` written from them.
//!
//! Compatibility rule: within a major version, a new release only adds tables and appends
//! nullable columns at the end of a table (the minor version counts those additions); a column
//! is never renamed, retyped, removed or given a new meaning or unit without a new major
//! version.

/// The schema's version, `MAJOR.MINOR`, in every file's key-value metadata
/// (`rtrace.schema_version`) and the dataset's `_schema.json`.
pub const SCHEMA_VERSION: &str = "1.0";

/// A column's type in the files (Parquet physical type, and Arrow's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    /// INT64 (Arrow Int64): times, ids, counts, sizes.
    I64,
    /// INT32 (Arrow Int32): small signed values (grid and block sizes).
    I32,
    /// DOUBLE (Arrow Float64).
    F64,
    /// BOOLEAN.
    Bool,
    /// BYTE_ARRAY, UTF8 (Arrow Utf8), dictionary-encoded: names that repeat.
    Str,
}

impl Type {
    /// How docs/parquet.md and `_schema.json` name it.
    pub fn name(self) -> &'static str {
        match self {
            Type::I64 => "int64",
            Type::I32 => "int32",
            Type::F64 => "double",
            Type::Bool => "boolean",
            Type::Str => "string",
        }
    }
}

/// One column.
#[derive(Clone, Copy, Debug)]
pub struct Column {
    pub name: &'static str,
    pub ty: Type,
    /// Whether it may be null (`null` in `_schema.json`).
    pub nullable: bool,
    /// `ns`, `bytes`, ... or empty.
    pub unit: &'static str,
    pub meaning: &'static str,
}

/// One table: a folder of the dataset (`NAME/host=H/pid=P/part-N.parquet`).
#[derive(Clone, Copy, Debug)]
pub struct Table {
    pub name: &'static str,
    pub about: &'static str,
    pub columns: &'static [Column],
}

pub const fn col(
    name: &'static str,
    ty: Type,
    unit: &'static str,
    meaning: &'static str,
) -> Column {
    Column {
        name,
        ty,
        nullable: false,
        unit,
        meaning,
    }
}

pub const fn opt(
    name: &'static str,
    ty: Type,
    unit: &'static str,
    meaning: &'static str,
) -> Column {
    Column {
        name,
        ty,
        nullable: true,
        unit,
        meaning,
    }
}

/// `_schema.json`: the version and every table's columns.
pub fn schema_json(tables: &[&Table], partitions: &[Column]) -> String {
    fn esc(s: &str) -> String {
        let mut out = String::with_capacity(s.len() + 2);
        out.push('"');
        for ch in s.chars() {
            match ch {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }
    let column = |c: &Column| {
        format!(
            "{{\"name\":{},\"type\":{},\"nullable\":{},\"unit\":{},\"meaning\":{}}}",
            esc(c.name),
            esc(c.ty.name()),
            c.nullable,
            esc(c.unit),
            esc(c.meaning)
        )
    };
    let mut out = format!(
        "{{\"format\":\"rtrace-parquet\",\"schema_version\":{},\"layout\":\"TABLE/host=HOST/pid=PID/part-N.parquet\",\"partitions\":[{}],\"tables\":[",
        esc(SCHEMA_VERSION),
        partitions.iter().map(column).collect::<Vec<_>>().join(",")
    );
    for (i, t) in tables.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            "\n{{\"name\":{},\"about\":{},\"columns\":[{}]}}",
            esc(t.name),
            esc(t.about),
            t.columns.iter().map(column).collect::<Vec<_>>().join(",")
        ));
    }
    out.push_str("\n]}\n");
    out
}
