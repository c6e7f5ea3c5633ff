//! NVTX v3 injection: the program's NVTX ranges, marks and names, recorded on their threads.
//!
//! Every image that embeds NVTX v3 (the program, libtorch, NCCL, ...) loads the library named
//! by `NVTX_INJECTION64_PATH` on its first NVTX call and calls its `InitializeInjectionNvtx2`
//! once, for itself. librtrace.so sets that variable to its own path when it loads (unless it
//! is set already, or `RTRACE_NVTX=0`), so `dlopen` hands NVTX the copy already loaded, and
//! fills the CORE and CORE2 callback tables of each image that asks.
//!
//! - Events go into the calling thread's ring as tagged records ([`crate::ring::NVTX`]): no
//!   lock, no allocation once the thread has a ring and the message's text has an id.
//! - Texts get ids from a table of the process (`text.rs`); each thread keeps the ids it has
//!   used, so a text seen before costs one hash lookup; a new text takes a lock, once.
//! - Domain handles, registered-string handles and range ids are rtrace's own numbers (never
//!   0: NULL is the default domain, 0 what NVTX returns without a tool).
//! - Push and pop return the nesting level per thread and domain, from 0, as NVTX says.
//!
//! Rooms, from the bottom: `text.rs` (the text ids), `events.rs` (the callbacks, recording on
//! the calling thread), `inject.rs` (the injection entry point filling NVTX's tables, and
//! pointing NVTX at this library), `external.rs` (rtrace's external correlation ids).

mod events;
mod external;
mod inject;
mod text;

pub use inject::{announce, attach, GetExportTable};
pub use text::take_new_strings;
