//! The correlation ids a trace's GPU and synchronization records name ([`Referenced`]), noted
//! on its first read, and the join's keys made of them ([`Keys`]): the rank of each such id
//! among them. The join's table (`join.rs`) is indexed by key, so that it holds only the API
//! records some GPU or synchronization record looks up (in a PyTorch trace most calls,
//! `cudaGetDevice`, `cudaGetLastError`, ..., launch nothing and are never looked up), one slot
//! each, with no gaps between ids.
//!
//! A bitmap in pages of [`PAGE_IDS`] ids, found by the id's page number; a page costs 8 KiB
//! (10 KiB with its word ranks), and past [`MOST_PAGES`] pages (ids far apart: one page each)
//! the set gives up and holds every id, so that its memory stays bounded whatever the ids:
//! the keys are then the ids themselves, and the join notes every API record, as it did
//! without the set. Ids of one chunk are close, so the page of the last id answers most
//! look-ups.

use crate::gpu_summary::fast_hash::FastMap;

/// Ids per page: a page is a bitmap of 8 KiB.
const PAGE_IDS: u64 = 1 << 16;
const PAGE_WORDS: usize = (PAGE_IDS / 64) as usize;
/// Pages at most (16 MiB of bitmaps): past them, every id.
pub(super) const MOST_PAGES: usize = 2048;

type Page = Box<[u64; PAGE_WORDS]>;

/// The correlation ids that GPU and synchronization records look up, as the first read notes
/// them.
#[derive(Clone, Debug)]
pub(crate) struct Referenced {
    /// Page number → index in `bitmaps`; `None`: past `most` pages, every id.
    pages: Option<FastMap<u64, usize>>,
    /// Pages at most ([`MOST_PAGES`]).
    most: usize,
    /// The page of the id noted last, and its index in `bitmaps`.
    last: Option<(u64, usize)>,
    /// The pages' bitmaps, in the order first noted.
    bitmaps: Vec<(u64, Page)>,
}

impl Default for Referenced {
    fn default() -> Referenced {
        Referenced::at_most(MOST_PAGES)
    }
}

impl Referenced {
    /// A set of at most `most` pages (0: every id from the start).
    pub(crate) fn at_most(most: usize) -> Referenced {
        Referenced {
            pages: (most > 0).then(FastMap::default),
            most,
            last: None,
            bitmaps: Vec::new(),
        }
    }

    /// Notes that a record looks up `id`.
    #[inline]
    pub(crate) fn note(&mut self, id: u64) {
        let page = id / PAGE_IDS;
        let bit = id % PAGE_IDS;
        let i = match self.last {
            Some((p, i)) if p == page => i,
            _ => match self.page_index(page) {
                Some(i) => i,
                None => return,
            },
        };
        self.bitmaps[i].1[(bit / 64) as usize] |= 1 << (bit % 64);
    }

    /// The index in `bitmaps` of page `page`, made if new; `None` once the set holds every
    /// id (it gives up here when a new page would pass its most).
    fn page_index(&mut self, page: u64) -> Option<usize> {
        let pages = self.pages.as_mut()?;
        let next = self.bitmaps.len();
        let i = *pages.entry(page).or_insert(next);
        if i == next {
            if next == self.most {
                self.pages = None;
                self.bitmaps = Vec::new();
                self.last = None;
                return None;
            }
            self.bitmaps.push((page, Box::new([0; PAGE_WORDS])));
        }
        self.last = Some((page, i));
        Some(i)
    }

    /// The keys of the ids noted.
    pub(crate) fn keys(self) -> Keys {
        if self.pages.is_none() {
            return Keys { pages: None };
        }
        let mut bitmaps = self.bitmaps;
        bitmaps.sort_unstable_by_key(|(page, _)| *page);
        let mut below = 0u64;
        let pages = bitmaps
            .into_iter()
            .map(|(number, bits)| {
                let mut words = Box::new([0u16; PAGE_WORDS]);
                let mut in_page = 0u32;
                for (w, b) in words.iter_mut().zip(bits.iter()) {
                    // At most 65 472 ids before the last word.
                    *w = in_page as u16;
                    in_page += b.count_ones();
                }
                let page = KeyPage {
                    number,
                    below,
                    words,
                    bits,
                };
                below += u64::from(in_page);
                page
            })
            .collect();
        Keys {
            pages: Some((pages, below)),
        }
    }
}

/// One page of [`Keys`]: its bitmap, and how many noted ids come before its first id and
/// before each of its words.
#[derive(Debug)]
struct KeyPage {
    number: u64,
    below: u64,
    words: Box<[u16; PAGE_WORDS]>,
    bits: Page,
}

impl KeyPage {
    /// Noted ids of this page below `bit`, and whether `bit` itself is noted.
    #[inline]
    fn rank(&self, bit: u64) -> (u64, bool) {
        let w = (bit / 64) as usize;
        let b = bit % 64;
        let word = self.bits[w];
        let before = u64::from((word & ((1u64 << b) - 1)).count_ones());
        (
            self.below + u64::from(self.words[w]) + before,
            word >> b & 1 != 0,
        )
    }
}

/// The join's key of each id a GPU or synchronization record looks up: its rank among those
/// ids, in id order (the id itself where the set gave up).
#[derive(Debug)]
pub(crate) struct Keys {
    /// The pages in order of number, and how many ids were noted in all; `None`: every id,
    /// each its own key.
    pages: Option<(Vec<KeyPage>, u64)>,
}

impl Keys {
    /// Keys that are the ids themselves.
    #[cfg(test)]
    pub(crate) fn identity() -> Keys {
        Keys { pages: None }
    }

    /// Whether the keys are ranks, one per id looked up (no gaps, none shared), rather than
    /// the ids themselves.
    pub(crate) fn dense(&self) -> bool {
        self.pages.is_some()
    }

    /// A look-up of keys, remembering the page of the last id.
    pub(crate) fn cursor(&self) -> KeyCursor<'_> {
        KeyCursor {
            keys: self,
            last: usize::MAX,
        }
    }

    /// The keys of the noted ids in `lo..=hi`, least and greatest; `(u64::MAX, 0)` (a range
    /// that reaches nothing, as [`crate::read::index::ChunkRef`]'s) if none is noted.
    pub(crate) fn range(&self, lo: u64, hi: u64) -> (u64, u64) {
        if lo > hi {
            return (u64::MAX, 0);
        }
        if self.pages.is_none() {
            return (lo, hi);
        }
        let mut c = self.cursor();
        let (first, _) = c.rank(lo);
        let (last, noted) = c.rank(hi);
        // Keys below `hi`'s, and `hi`'s own where it is noted (ranks are below 2^64: fewer
        // ids than that are noted).
        let end = last + u64::from(noted);
        match end > first {
            true => (first, end - 1),
            false => (u64::MAX, 0),
        }
    }
}

/// Look-ups in [`Keys`]: ids close to the last one are answered from its page.
pub(crate) struct KeyCursor<'a> {
    keys: &'a Keys,
    /// Index of the last page found.
    last: usize,
}

impl KeyCursor<'_> {
    /// The key of `id`; `None` where no GPU or synchronization record looks it up.
    #[inline]
    pub(crate) fn key(&mut self, id: u64) -> Option<u64> {
        match self.rank(id) {
            (key, true) => Some(key),
            _ => None,
        }
    }

    /// Noted ids below `id`, and whether `id` is noted (every id, each its own key, where
    /// the set gave up).
    #[inline]
    fn rank(&mut self, id: u64) -> (u64, bool) {
        let Some((pages, total)) = &self.keys.pages else {
            return (id, true);
        };
        let number = id / PAGE_IDS;
        let at = match pages.get(self.last) {
            Some(p) if p.number == number => self.last,
            _ => match pages.binary_search_by_key(&number, |p| p.number) {
                Ok(i) => {
                    self.last = i;
                    i
                }
                // Between pages: the ids of those below.
                Err(i) => return (pages.get(i).map_or(*total, |p| p.below), false),
            },
        };
        pages[at].rank(id % PAGE_IDS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_ranks_of_the_ids_noted() {
        let mut r = Referenced::default();
        let ids = [u64::MAX, 0, 1, 63, 64, 65_535, 65_536, 1 << 40];
        for &id in &ids {
            r.note(id);
        }
        r.note(64); // again: one key
        let keys = r.keys();
        let mut c = keys.cursor();
        let mut sorted = ids;
        sorted.sort_unstable();
        for (rank, &id) in sorted.iter().enumerate() {
            assert_eq!(c.key(id), Some(rank as u64), "{id}");
        }
        for id in [
            2u64,
            62,
            66,
            65_534,
            65_537,
            (1 << 40) + 1,
            u64::MAX - 1,
            1 << 20,
        ] {
            assert_eq!(c.key(id), None, "{id}");
        }
        assert_eq!(keys.range(0, u64::MAX), (0, 7));
        assert_eq!(keys.range(2, 65_535), (2, 4));
        assert_eq!(keys.range(62, 62), (u64::MAX, 0));
        assert_eq!(keys.range(65_537, (1 << 40) - 1), (u64::MAX, 0));
        assert_eq!(keys.range(65_537, 1 << 40), (7 - 1, 7 - 1));
        assert_eq!(keys.range(u64::MAX, u64::MAX), (7, 7));
        assert_eq!(keys.range(5, 4), (u64::MAX, 0));
        assert_eq!(
            Referenced::default().keys().range(0, u64::MAX),
            (u64::MAX, 0)
        );
        let every = Keys::identity();
        assert_eq!(
            (every.cursor().key(12345), every.range(3, 9)),
            (Some(12345), (3, 9))
        );
    }

    #[test]
    fn ids_too_far_apart_make_the_keys_the_ids() {
        let mut r = Referenced::default();
        for p in 0..MOST_PAGES as u64 {
            r.note(p * PAGE_IDS + 7);
        }
        let keys = r.clone().keys();
        let last = (MOST_PAGES as u64 - 1) * PAGE_IDS + 7;
        assert_eq!(keys.cursor().key(last), Some(MOST_PAGES as u64 - 1));
        assert_eq!(keys.cursor().key(8), None);
        // One page more: every id, its own key.
        r.note(MOST_PAGES as u64 * PAGE_IDS);
        assert!(r.bitmaps.is_empty());
        r.note(5);
        let keys = r.keys();
        assert_eq!((keys.cursor().key(8), keys.range(1, 2)), (Some(8), (1, 2)));
        assert!(!keys.dense());
        let mut none = Referenced::at_most(0);
        none.note(3);
        assert_eq!(none.keys().cursor().key(9), Some(9));
    }
}
