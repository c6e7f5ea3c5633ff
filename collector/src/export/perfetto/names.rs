//! The slice names and argument strings of the trace being written, each numbered once
//! ([`Table`]): a lane's sequence interns a name under its number (its iid there) the first
//! time one of its events uses it ([`super::lane::Seen`]). What a name depends on (a function
//! id, a kernel id, a copy's kind and size, a launch's dimensions) is looked up in a small map
//! of its own first, so that the text is made and hashed once.

use crate::export::layout::{self, Gpu, KernelNames, Value};
use crate::gpu_summary::fast_hash::FastMap;
use crate::model::Trace;
use rtrace_format::ApiRecord;
use std::collections::HashMap;

/// Texts numbered from 1 in order of first use.
#[derive(Debug, Default)]
pub struct Table {
    texts: Vec<String>,
    numbers: HashMap<String, u32>,
}

impl Table {
    /// The number of `text`, given one if new.
    pub fn number(&mut self, text: &str) -> u32 {
        match self.numbers.get(text) {
            Some(&n) => n,
            None => self.add(text.to_string()),
        }
    }

    /// [`Table::number`] of a text made already.
    pub fn number_owned(&mut self, text: String) -> u32 {
        match self.numbers.get(&text) {
            Some(&n) => n,
            None => self.add(text),
        }
    }

    fn add(&mut self, text: String) -> u32 {
        self.texts.push(text.clone());
        let n = self.texts.len() as u32;
        self.numbers.insert(text, n);
        n
    }

    /// The text numbered `n`.
    pub fn text(&self, n: u32) -> &str {
        &self.texts[n as usize - 1]
    }
}

/// Numbers by id (a function's, a kernel name's: small, dense), found in a list for the ids
/// below 2^16 and in a map past them.
#[derive(Default)]
struct ById {
    /// Number of id `i` at `i` (0 for none yet).
    small: Vec<u32>,
    large: FastMap<u32, u32>,
}

/// Ids numbered in [`ById::small`].
const SMALL_IDS: u32 = 1 << 16;

impl ById {
    #[inline]
    fn get(&self, id: u32) -> Option<u32> {
        if id < SMALL_IDS {
            self.small.get(id as usize).copied().filter(|&n| n != 0)
        } else {
            self.large.get(&id).copied()
        }
    }

    fn insert(&mut self, id: u32, n: u32) {
        if id < SMALL_IDS {
            if id as usize >= self.small.len() {
                self.small.resize(id as usize + 1, 0);
            }
            self.small[id as usize] = n;
        } else {
            self.large.insert(id, n);
        }
    }
}

/// The names of slices ([`Table`]), by what each depends on.
#[derive(Default)]
pub struct Names {
    pub table: Table,
    functions: ById,
    kernels: ById,
    /// Copies and memsets by what their name depends on ([`layout::copy_or_set_key`]).
    copies: FastMap<(u32, u64), u32>,
    demangled: KernelNames,
}

impl Names {
    /// The number of API call `r`'s name.
    #[inline]
    pub fn api(&mut self, trace: &Trace, r: &ApiRecord) -> u32 {
        match self.functions.get(r.function) {
            Some(n) => n,
            None => {
                let n = self
                    .table
                    .number_owned(trace.function_name(r.function).into_owned());
                self.functions.insert(r.function, n);
                n
            }
        }
    }

    /// The number of GPU record `g`'s name.
    #[inline]
    pub fn gpu(&mut self, trace: &Trace, g: Gpu) -> u32 {
        if let Gpu::Kernel(k) = g {
            if let Some(n) = self.kernels.get(k.name) {
                return n;
            }
            let n = self.table.number(self.demangled.get(trace, k.name));
            self.kernels.insert(k.name, n);
            return n;
        }
        let key = layout::copy_or_set_key(g).unwrap_or_default();
        match self.copies.get(&key) {
            Some(&n) => n,
            None => {
                let name = layout::copy_or_set_name(g).unwrap_or_default();
                let n = self.table.number_owned(name);
                self.copies.insert(key, n);
                n
            }
        }
    }
}

/// The string values of slice arguments ([`Table`]): launch dimensions (the last two kept
/// with their numbers: launches mostly repeat theirs) and names fixed at build time (memory
/// kinds: each kept with its number, found by address).
#[derive(Default)]
pub struct Strings {
    pub table: Table,
    recent: [Option<([i32; 3], u32)>; 2],
    fixed: Vec<(&'static str, u32)>,
    /// The slot the next new dimensions go to.
    next: usize,
    text: String,
}

impl Strings {
    /// The number of `value`'s text; `None` for a number.
    #[inline]
    pub fn of(&mut self, value: &Value) -> Option<u32> {
        match value {
            Value::Uint(_) => None,
            Value::Dim(d) => {
                if let Some((_, n)) = self.recent.iter().flatten().find(|(k, _)| k == d) {
                    return Some(*n);
                }
                let n = self.table.number(value.write_str(&mut self.text)?);
                self.recent[self.next] = Some((*d, n));
                self.next = (self.next + 1) % self.recent.len();
                Some(n)
            }
            Value::Name(name) => {
                let same = |(f, _): &&(&str, u32)| std::ptr::eq(*f, *name);
                if let Some((_, n)) = self.fixed.iter().find(same) {
                    return Some(*n);
                }
                let n = self.table.number(name);
                self.fixed.push((name, n));
                Some(n)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_strings_follow_their_values() {
        let mut strings = Strings::default();
        // Grid and block alternating, repeated, then new ones: each numbered by its text,
        // once.
        for d in [
            [4, 1, 1],
            [256, 1, 1],
            [4, 1, 1],
            [256, 1, 1],
            [8, 2, 1],
            [256, 1, 1],
            [8, 2, 1],
            [4, 1, 1],
            [4, 1, 1],
            [-3, 0, 7],
        ] {
            let want = format!("({},{},{})", d[0], d[1], d[2]);
            let n = strings.of(&Value::Dim(d)).unwrap();
            assert_eq!(strings.table.text(n), want);
            let pinned = strings.of(&Value::Name("pinned")).unwrap();
            assert_eq!(strings.table.text(pinned), "pinned");
            assert_eq!(strings.of(&Value::Uint(9)), None);
        }
        // (4,1,1), pinned, (256,1,1), (8,2,1), (-3,0,7).
        assert_eq!(strings.table.texts.len(), 5);
        assert_eq!(strings.of(&Value::Dim([256, 1, 1])), Some(3));
    }
}
