//! `--format csv`: one table, the API summary unless `--section` picks
//! another; one line per row, RFC 4180 quoting.

use super::options::Section;
use crate::report::Sections;
use crate::summary::FunctionSummary;
use std::fmt::Write;

/// The CSV header line of the API summary.
pub const HEADER: &str =
    "function,calls,errors,total_ns,mean_ns,median_ns,min_ns,max_ns,stddev_ns,share_percent";
/// The header of `--section kernels`.
pub const KERNELS_HEADER: &str =
    "name,count,total_ns,mean_ns,median_ns,min_ns,max_ns,stddev_ns,share_percent,grid_block";
/// The header of `--section memcpy`.
pub const MEMCPY_HEADER: &str = "kind,count,bytes,total_ns,mean_ns,median_ns,min_ns,max_ns,\
     stddev_ns,share_percent,bandwidth_gbps,mean_bytes,median_bytes,min_bytes,max_bytes,\
     stddev_bytes";
/// The header of `--section memset`.
pub const MEMSET_HEADER: &str = "count,bytes,total_ns,mean_ns,median_ns,min_ns,max_ns,stddev_ns,\
     share_percent,mean_bytes,median_bytes,min_bytes,max_bytes,stddev_bytes";
/// The header of `--section utilisation`.
pub const UTILISATION_HEADER: &str =
    "pid,device,stream,records,start_ns,end_ns,span_ns,busy_ns,busy_percent,gaps,idle_ns";
/// The header of `--section shared`.
pub const SHARED_HEADER: &str =
    "hostname,pci_address,processes,records,start_ns,end_ns,span_ns,busy_ns,busy_percent,gaps,idle_ns";
/// The header of `--section latency`.
pub const LATENCY_HEADER: &str =
    "pid,activity,name,function,correlation,api_start_ns,gpu_start_ns,latency_ns";
/// The header of `--section memory`.
pub const MEMORY_HEADER: &str =
    "kind,allocations,frees,bytes_allocated,peak_bytes,largest_bytes,live_bytes";
/// The header of `--section sync`.
pub const SYNC_HEADER: &str = "type,count,total_wait_ns,mean_wait_ns,max_wait_ns";
/// The header of `--section profiles`.
pub const PROFILES_HEADER: &str = "kernel,section,metric,label,unit,launches,mean,min,max";

/// The header of `--section ranks`.
pub const RANKS_HEADER: &str = "rank,rank_var,pid,hostname,gpu_busy_ns,gpu_idle_ns,steps,\
     steps_slowest,step_ns,collectives,collective_ns,collectives_matched,collective_matched_ns,\
     collective_wait_ns,wait_percent";

/// The header of `--section steps`.
pub const STEPS_HEADER: &str = "step,occurrence,ranks,fastest_rank,fastest_ns,median_ns,\
     slowest_rank,slowest_ns,lag_ns,spread_ns";

/// The header of `--section source-counters`.
pub const SOURCE_COUNTERS_HEADER: &str = "kernel,launches,finding,est_speedup_percent,excessive,total,file,line,offset,instruction,place_excessive";

/// `--section source-counters`: one line per kernel, finding and place (the kernel's line
/// with empty finding fields when it has none).
pub(super) fn source_counters(
    traces: &[crate::model::Trace],
    nvdisasm: Option<&std::path::Path>,
) -> String {
    let mut out = format!("{SOURCE_COUNTERS_HEADER}\n");
    let p = crate::source_counters::report_profile(traces, nvdisasm);
    for k in &p.kernels {
        let kernel = field(&k.demangled);
        let found = crate::source_counters::findings(k);
        if found.is_empty() {
            let _ = writeln!(out, "{kernel},{},,,,,,,,,", k.launches);
        }
        for f in &found {
            for pl in &f.places {
                let _ = writeln!(
                    out,
                    "{kernel},{},{},{:.2},{},{},{},{},{},{},{}",
                    k.launches,
                    f.rule.key(),
                    f.speedup_percent,
                    f.excessive,
                    f.total,
                    pl.line.as_ref().map(|(f, _)| field(f)).unwrap_or_default(),
                    pl.line
                        .as_ref()
                        .map(|(_, n)| n.to_string())
                        .unwrap_or_default(),
                    pl.offset.map(|o| o.to_string()).unwrap_or_default(),
                    pl.instruction.as_deref().map(field).unwrap_or_default(),
                    pl.excessive
                );
            }
        }
    }
    out
}
/// The header of `--section gpu-metrics`: one line per row and metric (`scope`: device,
/// process, kernel, nvtx).
pub const GPU_METRICS_HEADER: &str = "scope,pid,device,name,span_ns,covered,metric,value";

/// The header of `--section nvtx`.
pub const NVTX_HEADER: &str = "domain,name,count,total_ns,mean_ns,median_ns,min_ns,max_ns,\
     stddev_ns,share_percent,gpu_records,gpu_ns,own_gpu_records,own_gpu_ns";

/// The CSV table of `section`; empty for the sections without one (`rtrace report` refuses
/// them: [`Section::has_csv`]).
pub(super) fn render(s: &Sections, section: Section) -> String {
    match section {
        Section::Api => api(&s.api),
        Section::Nvtx => nvtx(s),
        Section::KernExec => kern_exec(s),
        Section::Processes
        | Section::External
        | Section::Resources
        | Section::Occupancy
        | Section::Pcsamp
        | Section::SourceCounters => String::new(),
        Section::Kernels => kernels(s),
        Section::Memcpy => memcpy(s),
        Section::Memset => memset(s),
        Section::Utilisation => utilisation_rows(s),
        Section::Shared => shared_rows(s),
        Section::Latency => latency(s),
        Section::Memory => memory(s),
        Section::Sync => sync(s),
        Section::Ranks => ranks(s),
        Section::Steps => steps(s),
        Section::Profiles => profiles(s),
        Section::GpuMetrics => gpu_metrics(s),
    }
}

fn gpu_metrics(s: &Sections) -> String {
    let g = &s.gpu_metrics;
    let mut out = format!("{GPU_METRICS_HEADER}\n");
    let num = |v: f64| {
        if v.is_finite() {
            format!("{v}")
        } else {
            String::new()
        }
    };
    for (scope, rows) in [
        ("device", &g.devices),
        ("process", &g.processes),
        ("kernel", &g.kernels),
        ("nvtx", &g.nvtx),
    ] {
        for r in rows {
            for (m, v) in g.metrics.iter().zip(&r.values) {
                let _ = writeln!(
                    out,
                    "{scope},{},{},{},{},{},{},{}",
                    r.pid,
                    r.device,
                    field(&r.name),
                    r.span_ns,
                    num(r.covered),
                    field(m),
                    num(*v)
                );
            }
        }
    }
    out
}

fn profiles(s: &Sections) -> String {
    let mut out = format!("{PROFILES_HEADER}\n");
    let num = |v: f64| {
        if v.is_finite() {
            format!("{v}")
        } else {
            String::new()
        }
    };
    for k in &s.profiles.kernels {
        for b in &k.blocks {
            for r in &b.rows {
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{}",
                    field(&k.name),
                    field(&b.title),
                    field(&r.metric),
                    field(&r.label),
                    field(r.unit.name()),
                    r.count,
                    num(r.mean),
                    num(r.min),
                    num(r.max)
                );
            }
        }
    }
    out
}

/// The header of `--section kern-exec`: per part (`total`, `api`, `queue`, `kernel`) its
/// mean, median, min, max and standard deviation.
pub fn kern_exec_header() -> String {
    let mut h = String::from("kernel,function,count,queued");
    for part in ["total", "api", "queue", "kernel"] {
        for stat in ["mean", "median", "min", "max", "stddev"] {
            let _ = write!(h, ",{part}_{stat}_ns");
        }
    }
    h
}

/// A part's columns of `--section kern-exec`.
pub(super) fn part_fields(p: &crate::gpu_summary::PartStats) -> [u64; 5] {
    [p.mean_ns, p.median_ns, p.min_ns, p.max_ns, p.stddev_ns]
}

fn kern_exec(s: &Sections) -> String {
    let mut out = kern_exec_header();
    out.push('\n');
    for r in &s.kern_exec {
        let _ = write!(
            out,
            "{},{},{},{}",
            field(&r.kernel),
            field(&r.function),
            r.total.count,
            r.queue.count
        );
        for p in [&r.total, &r.api, &r.queue, &r.kernel_time] {
            for v in part_fields(p) {
                let _ = write!(out, ",{v}");
            }
        }
        out.push('\n');
    }
    out
}

fn nvtx(s: &Sections) -> String {
    let mut out = format!("{NVTX_HEADER}\n");
    for r in &s.nvtx.rows {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            field(&r.domain),
            field(&r.name),
            r.count,
            r.total_ns,
            r.mean_ns,
            r.median_ns,
            r.min_ns,
            r.max_ns,
            r.stddev_ns,
            r.share_percent,
            r.gpu_records,
            r.gpu_ns,
            r.own_gpu_records,
            r.own_gpu_ns
        );
    }
    out
}

fn memory(s: &Sections) -> String {
    let mut out = format!("{MEMORY_HEADER}\n");
    for m in &s.memory {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{}",
            m.kind.name(),
            m.allocations,
            m.frees,
            m.bytes_allocated,
            m.peak_bytes,
            m.largest_bytes,
            m.live_bytes
        );
    }
    out
}

fn ranks(s: &Sections) -> String {
    let mut out = format!("{RANKS_HEADER}\n");
    for r in &s.ranks.ranks {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            field(&r.rank),
            field(&r.rank_var),
            r.pid,
            field(&r.hostname),
            r.gpu_busy_ns,
            r.gpu_idle_ns,
            r.steps,
            r.steps_slowest,
            r.step_ns,
            r.collectives,
            r.collective_ns,
            r.collectives_matched,
            r.collective_matched_ns,
            r.collective_wait_ns,
            r.wait_percent
        );
    }
    out
}

fn steps(s: &Sections) -> String {
    let mut out = format!("{STEPS_HEADER}\n");
    for r in &s.ranks.steps {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{}",
            field(&r.name),
            r.occurrence,
            r.ranks,
            field(&r.fastest_rank),
            r.fastest_ns,
            r.median_ns,
            field(&r.slowest_rank),
            r.slowest_ns,
            r.lag_ns,
            r.spread_ns
        );
    }
    out
}

fn sync(s: &Sections) -> String {
    let mut out = format!("{SYNC_HEADER}\n");
    for s in &s.sync {
        let _ = writeln!(
            out,
            "{},{},{},{},{}",
            s.kind, s.count, s.total_wait_ns, s.mean_wait_ns, s.max_wait_ns
        );
    }
    out
}

fn kernels(s: &Sections) -> String {
    let mut out = format!("{KERNELS_HEADER}\n");
    for k in &s.kernels {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{}",
            field(&k.name),
            k.count,
            k.total_ns,
            k.mean_ns,
            k.median_ns,
            k.min_ns,
            k.max_ns,
            k.stddev_ns,
            k.share_percent,
            field(&k.grid_block)
        );
    }
    out
}

fn memcpy(s: &Sections) -> String {
    let mut out = format!("{MEMCPY_HEADER}\n");
    for m in &s.memcpy {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            m.kind.name(),
            m.count,
            m.bytes,
            m.total_ns,
            m.mean_ns,
            m.median_ns,
            m.min_ns,
            m.max_ns,
            m.stddev_ns,
            m.share_percent,
            m.bandwidth_gbps.map_or(String::new(), |b| b.to_string()),
            sizes(&m.size)
        );
    }
    out
}

fn memset(s: &Sections) -> String {
    let mut out = format!("{MEMSET_HEADER}\n");
    if let Some(s) = &s.memset {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{}",
            s.count,
            s.bytes,
            s.total_ns,
            s.mean_ns,
            s.median_ns,
            s.min_ns,
            s.max_ns,
            s.stddev_ns,
            s.share_percent,
            sizes(&s.size)
        );
    }
    out
}

/// The size columns: `mean_bytes,median_bytes,min_bytes,max_bytes,stddev_bytes`.
fn sizes(s: &crate::gpu_summary::SizeStats) -> String {
    format!(
        "{},{},{},{},{}",
        s.mean_bytes, s.median_bytes, s.min_bytes, s.max_bytes, s.stddev_bytes
    )
}

fn utilisation_rows(s: &Sections) -> String {
    let mut out = format!("{UTILISATION_HEADER}\n");
    for u in &s.utilisation {
        let stream = u.stream.map_or(String::new(), |s| s.to_string());
        let _ = writeln!(out, "{},{},{stream},{}", u.pid, u.device, busy_fields(u));
    }
    out
}

/// `records,start_ns,end_ns,span_ns,busy_ns,busy_percent,gaps,idle_ns` of a utilisation row.
fn busy_fields(u: &crate::gpu_summary::Utilisation) -> String {
    format!(
        "{},{},{},{},{},{},{},{}",
        u.records, u.start_ns, u.end_ns, u.span_ns, u.busy_ns, u.busy_percent, u.gaps, u.idle_ns
    )
}

/// `processes` is `PID:DEVICE` pairs separated by spaces.
fn shared_rows(s: &Sections) -> String {
    let mut out = format!("{SHARED_HEADER}\n");
    for d in &s.shared {
        let _ = writeln!(
            out,
            "{},{},{},{}",
            field(&d.hostname),
            field(&d.pci_address),
            d.processes_text(),
            busy_fields(&d.utilisation)
        );
    }
    out
}

fn latency(s: &Sections) -> String {
    let mut out = format!("{LATENCY_HEADER}\n");
    for l in &s.latency.slowest {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{}",
            l.pid,
            l.activity.name(),
            field(&l.name),
            field(&l.function),
            l.correlation,
            l.api_start_ns,
            l.gpu_start_ns,
            l.latency_ns
        );
    }
    out
}

fn api(summary: &[FunctionSummary]) -> String {
    let mut out = String::new();
    out.push_str(HEADER);
    out.push('\n');
    for s in summary {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{}",
            field(&s.function),
            s.calls,
            s.errors,
            s.total_ns,
            s.mean_ns,
            s.median_ns,
            s.min_ns,
            s.max_ns,
            s.stddev_ns,
            s.share_percent
        );
    }
    out
}

/// A CSV field: quoted (with `"` doubled) when it holds `,`, `"` or a line break.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Trace;

    #[test]
    fn quotes_only_when_needed() {
        assert_eq!(field("cuInit"), "cuInit");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }

    #[test]
    fn memory_and_sync_sections_are_exact() {
        let traces = [crate::gpu_summary::samples::memory_and_sync()];
        let render = |traces: &[Trace], section| render(&Sections::of(traces), section);
        assert_eq!(
            render(&traces, Section::Memory),
            "kind,allocations,frees,bytes_allocated,peak_bytes,largest_bytes,live_bytes\n\
             device,3,2,1056768,1052672,1048576,4096\n\
             pinned,1,1,8192,8192,8192,0\n"
        );
        assert_eq!(
            render(&traces, Section::Sync),
            "type,count,total_wait_ns,mean_wait_ns,max_wait_ns\n\
             stream synchronize,2,5100,2550,5000\n\
             context synchronize,1,2000,2000,2000\n\
             event synchronize,1,500,500,500\n"
        );
        let none = [Trace::default()];
        assert_eq!(render(&none, Section::Memory), format!("{MEMORY_HEADER}\n"));
        assert_eq!(render(&none, Section::Sync), format!("{SYNC_HEADER}\n"));
    }
}
