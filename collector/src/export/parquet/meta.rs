//! The rows of the small tables, from what a trace's first read keeps ([`Trace`]): the process,
//! its threads, devices, contexts, streams and modules, its PC samples and kernel metrics.

use super::columns::TableFile;
use crate::model::Trace;
use rtrace_format::{attr, ID_NONE};
use std::collections::HashMap;
use std::io;

/// The trace's own times are put on the dataset's clock by adding this.
fn shift(t: &Trace) -> i64 {
    t.clock_shift.as_ref().map_or(0, |s| s.ns)
}

fn id(v: u32) -> Option<i64> {
    (v != ID_NONE).then_some(i64::from(v))
}

/// The `processes` row of `t` (times already shifted).
pub fn process(out: &mut TableFile, t: &Trace) -> io::Result<()> {
    let h = &t.header;
    let rank = h.rank();
    out.str(Some(&t.path.display().to_string()))
        .int(i64::from(h.ppid))
        .opt_int(h.forked_from.map(i64::from))
        .str(Some(&crate::text::shell_join(&h.command_line)))
        .str(Some(&h.executable))
        .str(Some(&h.boot_id))
        .u64(h.start.monotonic_ns)
        .u64(h.start.realtime_ns)
        .opt_int(t.end.as_ref().map(|e| e.end.monotonic_ns as i64))
        .int(shift(t))
        .str(Some(&format!(
            "{}.{}",
            t.format_version.0, t.format_version.1
        )))
        .str(Some(&h.writer_version))
        .u64(t.dropped)
        .str(t.damage.as_deref())
        .str(rank.map(|(n, _)| n))
        .str(rank.map(|(_, v)| v))
        .end()
}

/// The `threads`, `devices`, `contexts`, `streams` and `modules` rows of `t`.
pub struct Resources<'a> {
    pub threads: &'a mut TableFile,
    pub devices: &'a mut TableFile,
    pub contexts: &'a mut TableFile,
    pub streams: &'a mut TableFile,
    pub modules: &'a mut TableFile,
}

impl Resources<'_> {
    pub fn write(self, t: &Trace) -> io::Result<()> {
        for th in t.threads.values() {
            self.threads
                .u64(th.tid)
                .str(th.name.as_deref())
                .u64(th.dropped)
                .end()?;
        }
        for d in t.devices.values() {
            let a = |id| d.attribute(id).map(i64::from);
            self.devices
                .int(i64::from(d.ordinal))
                .str(Some(&d.name))
                .str(
                    d.compute_capability()
                        .map(|(ma, mi)| format!("{ma}.{mi}"))
                        .as_deref(),
                )
                .opt_int(a(attr::MULTIPROCESSOR_COUNT))
                .u64(d.total_memory)
                .opt_int(a(attr::CLOCK_RATE))
                .opt_int(a(attr::MEMORY_CLOCK_RATE))
                .str(d.pci_address().as_deref())
                .end()?;
        }
        for c in &t.contexts {
            self.contexts
                .int(i64::from(c.context))
                .int(i64::from(c.device))
                .opt_int(id(c.null_stream))
                .opt_int((c.is_green).then_some(i64::from(c.parent_context)))
                .bool(c.is_green)
                .int(i64::from(c.num_multiprocessors))
                .end()?;
        }
        for s in &t.streams {
            self.streams
                .int(i64::from(s.stream))
                .int(i64::from(s.context))
                .int(i64::from(s.priority))
                .str(Some(s.flag.name()))
                .opt_int((s.correlation != 0).then_some(s.correlation as i64))
                .end()?;
        }
        for (event, list) in [("load", &t.modules), ("unload", &t.module_unloads)] {
            for m in list {
                self.modules
                    .int(i64::from(m.module))
                    .int(i64::from(m.context))
                    .str(Some(event))
                    .u64(m.timestamp_ns)
                    .u64(m.cubin_size)
                    .opt_int((m.correlation != 0).then_some(m.correlation as i64))
                    .end()?;
            }
        }
        Ok(())
    }
}

/// The `pc_samples` rows of `t`: a row per read, instruction and stall reason.
pub fn pc_samples(out: &mut TableFile, t: &Trace) -> io::Result<()> {
    let reasons: HashMap<(u32, u32), String> = t
        .pc_configs
        .iter()
        .flat_map(|c| {
            c.stall_reasons.iter().map(move |(i, n)| {
                let short = n
                    .strip_prefix("smsp__pcsamp_warps_issue_stalled_")
                    .unwrap_or(n);
                ((c.context, *i), crate::pcsamp::warp_state(short))
            })
        })
        .collect();
    let mut demangled: HashMap<&str, String> = HashMap::new();
    for b in &t.pc_batches {
        let time = crate::clocks::shifted(b.time_ns, shift(t));
        for pc in &b.pcs {
            let raw = b
                .functions
                .get(pc.function as usize)
                .map_or("", String::as_str);
            let name = demangled
                .entry(raw)
                .or_insert_with(|| crate::demangle::demangle(raw).into_owned());
            for &(reason, samples) in &pc.stalls {
                let why = reasons
                    .get(&(b.context, reason))
                    .cloned()
                    .unwrap_or_else(|| format!("reason#{reason}"));
                out.int(i64::from(b.context))
                    .u64(time)
                    .str(Some(name))
                    .int(i64::from(pc.function_index))
                    .u64(pc.cubin_crc)
                    .u64(pc.pc_offset)
                    .str(Some(&why))
                    .int(i64::from(samples))
                    .end()?;
            }
        }
    }
    Ok(())
}

/// The `kernel_metrics` rows of `t`: a row per profiled launch and metric (the metrics of
/// the last set-up of its context before it, as the report pairs them).
pub fn kernel_metrics(out: &mut TableFile, t: &Trace) -> io::Result<()> {
    for p in &t.kernel_profiles {
        let setup = t
            .profiler_setups
            .iter()
            .rev()
            .find(|s| s.context == p.context);
        let names = setup.map_or(&[][..], |s| &s.metrics[..]);
        let kernel = crate::demangle::demangle(&p.name).into_owned();
        for (i, metric) in names.iter().enumerate() {
            let value = p.values.get(i).copied().filter(|v| !v.is_nan());
            out.u64(p.correlation)
                .int(i64::from(p.context))
                .u64(p.launch)
                .str(Some(&kernel))
                .str(Some(&p.range))
                .str(Some(metric))
                .float(value)
                .end()?;
        }
    }
    Ok(())
}
