//! The reading layer: everything the report ([`crate::report`]) and the export
//! ([`crate::export`]) read traces through. Neither imports the other; both read here.
//!
//! - [`inputs`]: the command line's inputs as trace files (files, directories of `*.bin`
//!   traces; standard input and pipes spooled to a file first by [`crate::spool`]), and why
//!   one could not be read ([`LoadError`], [`StreamError`]);
//! - [`trace`]: the first read of a file through the format crate's reader, its small chunks
//!   kept in a [`Trace`](crate::model::Trace), its records handed to a [`RecordSink`];
//! - [`records`]: the records as one typed enum: the kinds of chunk that hold records
//!   ([`Kind`](records::Kind)), a chunk's worth ([`Records`]), one record with its place in
//!   the trace ([`Rec`](records::Rec));
//! - [`index`]: the chunks of records found on a first read, read again by offset
//!   ([`Rereader`](index::Rereader)) and in time order ([`FileSource`](index::FileSource));
//! - [`merge`]: a k-way merge in time order that knows nothing of what it merges;
//! - [`links`]: the links from API calls to their GPU work, by correlation id
//!   ([`LinkTable`](links::LinkTable));
//! - [`first`]: the first read of the passes that merge a file's records in time order (its
//!   chunks indexed, its links noted);
//! - [`parallel`]: several traces read at once, their results handed back in input order.
//!
//! Files here read top-down: `inputs` ← `merge` ← `records` ← `index`, `links` ← `trace` ←
//! `first`. A new record kind is declared in the format crate, named and decoded in
//! [`records`] (kept in the [`Trace`](crate::model::Trace) by [`KeepAll`]), and used by the
//! consumer that needs it; the export's first read and the passes that reread chunks pass
//! other kinds by (a wildcard arm), while the report's first pass matches every kind and so
//! must say what it does with a new one.

pub mod first;
pub mod index;
pub mod inputs;
pub mod links;
pub mod merge;
pub mod parallel;
pub mod records;
pub mod trace;

pub use inputs::{expand_inputs, Inputs, LoadError, StreamError};
pub use records::Records;
pub use trace::{load_inputs, load_trace, KeepAll, Loaded, RecordSink};
