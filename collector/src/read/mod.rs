//! The reading layer: everything the report ([`crate::report`]) and the export
//! ([`crate::export`]) read traces through. Neither imports the other; both read here.
//!
//! - [`inputs`]: the command line's inputs as trace files (files, directories of `*.bin`
//!   traces; standard input and pipes spooled to a file first by [`crate::spool`]), and why
//!   one could not be read;
//! - [`trace`]: the first read of a file through the format crate's reader, its small chunks
//!   kept in a [`Trace`](crate::model::Trace), its records handed to a [`RecordSink`];
//! - [`index`]: the chunks of records found on a first read, and reading them again by offset
//!   ([`Rereader`](index::Rereader));
//! - [`records`]: the records as one typed enum, a chunk's worth ([`Records`]) or one with its
//!   place in the trace ([`Rec`](records::Rec)), and the sources of those for the merge;
//! - [`merge`]: a k-way merge in time order that knows nothing of what it merges;
//! - [`links`]: the links from API calls to their GPU work, by correlation id
//!   ([`LinkTable`](links::LinkTable));
//! - [`first`]: the first read of the passes that merge a file's records in time order (its
//!   chunks indexed, its links noted).
//!
//! A new record kind is declared in the format crate, decoded in [`records`] (and named in
//! [`index::Kind`]), and used by the consumer that needs it.

pub mod first;
pub mod index;
pub mod inputs;
pub mod links;
pub mod merge;
pub mod records;
pub mod trace;

pub use index::StreamError;
pub use inputs::{expand_inputs, Inputs, LoadError};
pub use records::Records;
pub use trace::{load_inputs, load_trace, KeepAll, Loaded, RecordSink};
