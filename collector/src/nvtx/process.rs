//! The process view of ranges and external ids: the GPU work launched by the process's other
//! threads while a range (or id) was open, credited when the launching thread had nothing of
//! its own open (docs/nvtx.md, "Which thread's work").
//!
//! - A launch (a call with GPU work) of thread U at time t goes, in the process view, to the
//!   ranges U began that are open at t (as in the thread view), and to every range of another
//!   thread of the process that is open at t, in each domain in which U has no range open at t.
//! - A call of U goes, in the process view, to the innermost id of each kind on U (as in the
//!   thread view), and to the innermost id of that kind of every other thread, for each kind of
//!   which U has no id pushed.
//!
//! The ranges of each (thread, domain) are a chain of their own ([`Chain`], with the nodes of
//! [`Foreign::nodes`]), so a launch credited to another thread goes to one node per (thread,
//! domain) with a range open, and reaches every range of that chain as an own call reaches
//! the ranges of its thread.

use super::chain::{Chain, Nodes};
use crate::gpu_summary::fast_hash::FastMap;

/// The chains and registers of the process view.
#[derive(Default)]
pub(super) struct Foreign {
    /// The nodes of every (thread, domain) chain.
    pub(super) nodes: Nodes,
    /// Per (thread, domain): its ranges that a launch could still be in.
    chains: FastMap<(u64, u32), Chain>,
    /// Per domain: the threads whose chain of it is not empty.
    domains: FastMap<u32, Vec<u64>>,
    /// Per kind of external id: the threads with an id of it pushed.
    kinds: FastMap<u32, Vec<u64>>,
}

/// Adds `tid` to `set` (when not there).
fn enter(set: &mut Vec<u64>, tid: u64) {
    if !set.contains(&tid) {
        set.push(tid);
    }
}

/// Takes `tid` out of `set`.
fn leave(set: &mut Vec<u64>, tid: u64) {
    if let Some(k) = set.iter().position(|&x| x == tid) {
        set.swap_remove(k);
    }
}

impl Foreign {
    /// Range `slot` of domain `domain` begun on `tid`: its node on top of the thread's chain
    /// of that domain.
    pub(super) fn begin(&mut self, tid: u64, domain: u32, slot: u32) {
        let chain = self.chains.entry((tid, domain)).or_default();
        chain.push(slot, &mut self.nodes);
        enter(self.domains.entry(domain).or_default(), tid);
    }

    /// Takes range `slot` out of `tid`'s chain of `domain` ([`Chain::remove`]): the closed
    /// node on top, to be settled.
    pub(super) fn remove(
        &mut self,
        tid: u64,
        domain: u32,
        slot: u32,
        renewed: impl FnMut(u32),
    ) -> Option<u32> {
        let chain = self.chains.get_mut(&(tid, domain))?;
        let top = chain.remove(slot, &mut self.nodes, renewed);
        if chain.open.is_empty() {
            self.chains.remove(&(tid, domain));
            if let Some(set) = self.domains.get_mut(&domain) {
                leave(set, tid);
                if set.is_empty() {
                    self.domains.remove(&domain);
                }
            }
        }
        top
    }

    /// The threads other than `tid` with a range open in a domain in which `tid` has none:
    /// those a launch of `tid` may be credited to (once their ranges that ended are sealed).
    pub(super) fn others(&self, tid: u64) -> Vec<u64> {
        let mut out = Vec::new();
        for (&domain, set) in &self.domains {
            if self.chains.contains_key(&(tid, domain)) {
                continue;
            }
            for &t in set.iter().filter(|&&t| t != tid) {
                enter(&mut out, t);
            }
        }
        out
    }

    /// The nodes a launch of `tid` is credited to: the top node of every other thread's chain
    /// of each domain in which `tid` has no range open. Its threads' ended ranges must be
    /// sealed first ([`Foreign::others`]).
    pub(super) fn targets(&self, tid: u64) -> Vec<u32> {
        let mut out = Vec::new();
        for (&domain, set) in &self.domains {
            if self.chains.contains_key(&(tid, domain)) {
                continue;
            }
            for &t in set.iter().filter(|&&t| t != tid) {
                if let Some(&n) = self.chains.get(&(t, domain)).and_then(|c| c.nodes.last()) {
                    out.push(n);
                }
            }
        }
        out
    }

    /// `tid`'s stack of external ids of `kind` is no longer empty (`pushed`), or is now empty.
    pub(super) fn external(&mut self, tid: u64, kind: u32, pushed: bool) {
        if pushed {
            enter(self.kinds.entry(kind).or_default(), tid);
        } else if let Some(set) = self.kinds.get_mut(&kind) {
            leave(set, tid);
            if set.is_empty() {
                self.kinds.remove(&kind);
            }
        }
    }

    /// The kinds of external id some thread other than `tid` has pushed, with those threads:
    /// `has(kind)` says whether `tid` has an id of that kind pushed itself.
    pub(super) fn external_others<'a>(
        &'a self,
        tid: u64,
        has: impl Fn(u32) -> bool + 'a,
    ) -> impl Iterator<Item = (u32, u64)> + 'a {
        (self.kinds.iter())
            .filter(move |(&k, _)| !has(k))
            .flat_map(move |(&k, set)| set.iter().filter(move |&&t| t != tid).map(move |&t| (k, t)))
    }
}
