//! The `"ranks"` and `"steps"` keys of `--format json` ([`crate::report::ranks`]): only when
//! two or more processes are compared.

use super::syntax::array;
use crate::report::ranks::RankSection;
use crate::text::json_string;
use std::fmt::Write;

/// `,"ranks":[...]`: one object per rank.
pub(super) fn ranks_key(out: &mut String, s: &RankSection) {
    if s.ranks.is_empty() {
        return;
    }
    array(out, "ranks", &s.ranks, |out, r| {
        let _ = write!(
            out,
            "{{\"rank\":{},\"rank_var\":{},\"pid\":{},\"hostname\":{},\"gpu_busy_ns\":{},\
             \"gpu_idle_ns\":{},\"steps\":{},\"steps_slowest\":{},\"step_ns\":{},\
             \"steps_dropped\":{},\"collectives\":{},\"collective_ns\":{},\
             \"collectives_matched\":{},\"collective_matched_ns\":{},\
             \"collective_wait_ns\":{},\"wait_percent\":{}}}",
            json_string(&r.rank),
            json_string(&r.rank_var),
            r.pid,
            json_string(&r.hostname),
            r.gpu_busy_ns,
            r.gpu_idle_ns,
            r.steps,
            r.steps_slowest,
            r.step_ns,
            r.steps_dropped,
            r.collectives,
            r.collective_ns,
            r.collectives_matched,
            r.collective_matched_ns,
            r.collective_wait_ns,
            r.wait_percent
        );
    });
}

/// `,"steps":[...]`: one object per step compared.
pub(super) fn steps_key(out: &mut String, s: &RankSection) {
    if s.ranks.is_empty() {
        return;
    }
    array(out, "steps", &s.steps, |out, r| {
        let _ = write!(
            out,
            "{{\"step\":{},\"occurrence\":{},\"ranks\":{},\"fastest_rank\":{},\"fastest_ns\":{},\
             \"median_ns\":{},\"slowest_rank\":{},\"slowest_ns\":{},\"lag_ns\":{},\
             \"spread_ns\":{}}}",
            json_string(&r.name),
            r.occurrence,
            r.ranks,
            json_string(&r.fastest_rank),
            r.fastest_ns,
            r.median_ns,
            json_string(&r.slowest_rank),
            r.slowest_ns,
            r.lag_ns,
            r.spread_ns
        );
    });
}
