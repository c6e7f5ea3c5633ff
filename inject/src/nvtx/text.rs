//! The texts of NVTX events (messages, names) as ids: a table of the process, and on each
//! thread the ids it has used, so a text seen before costs one hash lookup and a new one takes
//! a lock, once. The worker writes the new texts ([`take_new_strings`]).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, CStr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

/// Messages longer than this many bytes are cut (on a character boundary).
const MAX_TEXT: usize = 4096;

/// NVTX's `wchar_t`: a UTF-32 code unit.
pub(super) type WChar = u32;

/// Text → id, for the process; ids from 1. Statics: NVTX's callbacks, on any thread of the
/// program, carry no pointer of rtrace's.
static STRINGS: Mutex<Option<HashMap<Box<str>, u32>>> = Mutex::new(None);
/// Texts given ids since the worker last took them.
static NEW_STRINGS: Mutex<Vec<(u32, Box<str>)>> = Mutex::new(Vec::new());
static NEXT_STRING: AtomicU32 = AtomicU32::new(1);

thread_local! {
    /// The ids this thread has used.
    static SEEN: RefCell<HashMap<Box<str>, u32>> = RefCell::new(HashMap::new());
}

/// The id of `text` (cut to [`MAX_TEXT`] bytes).
fn intern(text: &str) -> u32 {
    let text = cut(text);
    let cached = SEEN
        .try_with(|s| s.try_borrow().ok().and_then(|m| m.get(text).copied()))
        .ok()
        .flatten();
    if let Some(id) = cached {
        return id;
    }
    let id = intern_slow(text);
    let _ = SEEN.try_with(|s| {
        if let Ok(mut m) = s.try_borrow_mut() {
            m.insert(text.into(), id);
        }
    });
    id
}

#[cold]
fn intern_slow(text: &str) -> u32 {
    let Ok(mut table) = STRINGS.lock() else {
        return 0;
    };
    let table = table.get_or_insert_with(HashMap::new);
    if let Some(&id) = table.get(text) {
        return id;
    }
    let id = NEXT_STRING.fetch_add(1, Ordering::Relaxed);
    table.insert(text.into(), id);
    crate::capture::text_interned(id, text);
    if let Ok(mut new) = NEW_STRINGS.lock() {
        new.push((id, text.into()));
    }
    id
}

fn cut(text: &str) -> &str {
    if text.len() <= MAX_TEXT {
        return text;
    }
    let mut end = MAX_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Texts given ids since the last call, for the worker (ids ascending).
pub fn take_new_strings() -> Vec<(u32, Box<str>)> {
    NEW_STRINGS
        .lock()
        .map(|mut n| std::mem::take(&mut *n))
        .unwrap_or_default()
}

/// The id of a NUL-terminated C string (0 for NULL).
///
/// # Safety
/// `s` is NULL or a NUL-terminated string.
pub(super) unsafe fn c_text(s: *const c_char) -> u32 {
    if s.is_null() {
        return 0;
    }
    // SAFETY: the caller's contract.
    let bytes = unsafe { CStr::from_ptr(s) }.to_bytes();
    intern(&String::from_utf8_lossy(
        &bytes[..bytes.len().min(MAX_TEXT)],
    ))
}

/// The id of a NUL-terminated wide (UTF-32) string (0 for NULL).
///
/// # Safety
/// `s` is NULL or a NUL-terminated `wchar_t` string.
pub(super) unsafe fn w_text(s: *const WChar) -> u32 {
    if s.is_null() {
        return 0;
    }
    let mut text = String::new();
    for i in 0..MAX_TEXT {
        // SAFETY: reads up to the terminating NUL, which the caller guarantees.
        let c = unsafe { *s.add(i) };
        if c == 0 {
            break;
        }
        text.push(char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER));
    }
    intern(&text)
}
