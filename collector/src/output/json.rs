//! `--format json`: `{"processes":[...],"api":[...],"resources":{"devices":[...],
//! "contexts":[...],"streams":[...],"modules":[...],"functions":[...]},
//! "kernels":[...],"memcpy":[...],"memset":[...],"utilisation":[...],
//! "latency":[...],"occupancy":[...]}`, then `"memory":[...],"sync":[...]` when
//! a trace holds memory or synchronization records, `"ranks":[...],"steps":[...]` when two or
//! more processes are compared, `"kernel_profiles":{...}` when
//! kernels were profiled or a notice says why not; written by hand (the shapes are small
//! and fixed).

use super::options::{RenderOptions, Section};
use crate::gpu_summary::resources;
use crate::model::Trace;
use crate::report::Sections;
use crate::text::json_string;
use std::fmt::Write;

mod gpu_metrics;
mod occupancy;
mod pcsamp;
mod process;
mod profiles;
mod ranks;
mod source_counters;
mod syntax;

use syntax::{array, list, opt};

/// The size keys of a copy or memset row.
fn size_keys(s: &crate::gpu_summary::SizeStats) -> String {
    format!(
        "\"mean_bytes\":{},\"median_bytes\":{},\"min_bytes\":{},\"max_bytes\":{},\
         \"stddev_bytes\":{}",
        s.mean_bytes, s.median_bytes, s.min_bytes, s.max_bytes, s.stddev_bytes
    )
}

fn kernels_key(out: &mut String, s: &Sections) {
    array(out, "kernels", &s.kernels, |out, k| {
        let _ = write!(
            out,
            "{{\"name\":{},\"count\":{},\"total_ns\":{},\"mean_ns\":{},\"median_ns\":{},\
             \"min_ns\":{},\"max_ns\":{},\"stddev_ns\":{},\"share_percent\":{},\
             \"grid_block\":{}}}",
            json_string(&k.name),
            k.count,
            k.total_ns,
            k.mean_ns,
            k.median_ns,
            k.min_ns,
            k.max_ns,
            k.stddev_ns,
            k.share_percent,
            json_string(&k.grid_block)
        );
    });
}

fn memcpy_key(out: &mut String, s: &Sections) {
    array(out, "memcpy", &s.memcpy, |out, m| {
        let _ = write!(
            out,
            "{{\"kind\":{},\"count\":{},\"bytes\":{},\"total_ns\":{},\"mean_ns\":{},\
             \"median_ns\":{},\"min_ns\":{},\"max_ns\":{},\"stddev_ns\":{},\
             \"share_percent\":{},\"bandwidth_gbps\":{},{}}}",
            json_string(m.kind.name()),
            m.count,
            m.bytes,
            m.total_ns,
            m.mean_ns,
            m.median_ns,
            m.min_ns,
            m.max_ns,
            m.stddev_ns,
            m.share_percent,
            opt(m.bandwidth_gbps),
            size_keys(&m.size)
        );
    });
}

fn memset_key(out: &mut String, s: &Sections) {
    let memsets: Vec<_> = s.memset.iter().cloned().collect();
    array(out, "memset", &memsets, |out, m| {
        let _ = write!(
            out,
            "{{\"count\":{},\"bytes\":{},\"total_ns\":{},\"mean_ns\":{},\"median_ns\":{},\
             \"min_ns\":{},\"max_ns\":{},\"stddev_ns\":{},\"share_percent\":{},{}}}",
            m.count,
            m.bytes,
            m.total_ns,
            m.mean_ns,
            m.median_ns,
            m.min_ns,
            m.max_ns,
            m.stddev_ns,
            m.share_percent,
            size_keys(&m.size)
        );
    });
}

fn utilisation_key(out: &mut String, s: &Sections) {
    array(out, "utilisation", &s.utilisation, |out, u| {
        let _ = write!(
            out,
            "{{\"pid\":{},\"device\":{},\"stream\":{},{}}}",
            u.pid,
            u.device,
            opt(u.stream),
            busy_keys(u)
        );
    });
}

fn shared_key(out: &mut String, s: &Sections) {
    array(out, "shared_devices", &s.shared, |out, d| {
        let _ = write!(
            out,
            "{{\"hostname\":{},\"pci_address\":{},\"name\":{},\"processes\":[",
            json_string(&d.hostname),
            json_string(&d.pci_address),
            json_string(&d.name)
        );
        for (i, (pid, ordinal)) in d.processes.iter().enumerate() {
            let sep = if i > 0 { "," } else { "" };
            let _ = write!(out, "{sep}{{\"pid\":{pid},\"device\":{ordinal}}}");
        }
        let _ = write!(out, "],{}}}", busy_keys(&d.utilisation));
    });
}

/// `,\n"kern_exec":[...]`: the keys of the `kern-exec` CSV columns.
fn kern_exec_key(out: &mut String, s: &Sections) {
    let header = super::csv::kern_exec_header();
    let names: Vec<&str> = header.split(',').skip(4).collect();
    array(out, "kern_exec", &s.kern_exec, |out, r| {
        let _ = write!(
            out,
            "{{\"kernel\":{},\"function\":{},\"count\":{},\"queued\":{}",
            json_string(&r.kernel),
            json_string(&r.function),
            r.total.count,
            r.queue.count
        );
        let values = [&r.total, &r.api, &r.queue, &r.kernel_time]
            .into_iter()
            .flat_map(super::csv::part_fields);
        for (name, v) in names.iter().zip(values) {
            let _ = write!(out, ",\"{name}\":{v}");
        }
        out.push('}');
    });
}

fn latency_key(out: &mut String, s: &Sections) {
    let latencies = &s.latency;
    array(out, "latency", &latencies.slowest, |out, l| {
        let _ = write!(
            out,
            "{{\"pid\":{},\"activity\":{},\"name\":{},\"function\":{},\"correlation\":{},\
             \"api_start_ns\":{},\"gpu_start_ns\":{},\"latency_ns\":{}}}",
            l.pid,
            json_string(l.activity.name()),
            json_string(&l.name),
            json_string(&l.function),
            l.correlation,
            l.api_start_ns,
            l.gpu_start_ns,
            l.latency_ns
        );
    });
}

/// The `resources` key, after `api`, always: `{"devices":[...],"contexts":[...],
/// "streams":[...],"modules":[...],"functions":[...]}`.
fn resources_key(out: &mut String, traces: &[Trace]) {
    let r = resources(traces);
    out.push_str(",\n\"resources\":{");
    list(out, "devices", &r.devices, |out, d| {
        let _ = write!(
            out,
            "{{\"pid\":{},\"device\":{},\"name\":{},\"compute_capability\":{},\
             \"multiprocessors\":{},\"total_memory\":{},\"clock_khz\":{},\
             \"memory_clock_khz\":{}}}",
            d.pid,
            d.ordinal,
            json_string(&d.name),
            opt(d
                .compute_capability
                .map(|(major, minor)| json_string(&format!("{major}.{minor}")))),
            opt(d.multiprocessors),
            d.total_memory,
            opt(d.clock_khz),
            opt(d.memory_clock_khz)
        );
    });
    out.push(',');
    list(out, "contexts", &r.contexts, |out, c| {
        let _ = write!(
            out,
            "{{\"pid\":{},\"context\":{},\"device\":{},\"null_stream\":{},\
             \"parent_context\":{},\"green\":{},\"multiprocessors\":{},\"streams\":{},\
             \"modules\":{},\"functions\":{}}}",
            c.pid,
            c.context,
            c.device,
            c.null_stream,
            c.parent_context,
            c.is_green,
            c.multiprocessors,
            c.streams,
            c.modules,
            c.functions
        );
    });
    out.push(',');
    list(out, "streams", &r.streams, |out, s| {
        let _ = write!(
            out,
            "{{\"pid\":{},\"context\":{},\"stream\":{},\"flag\":{},\"priority\":{},\
             \"created_by\":{},\"correlation\":{}}}",
            s.pid,
            s.context,
            s.stream,
            json_string(s.flag.name()),
            s.priority,
            opt(s.created_by.as_deref().map(json_string)),
            opt(s.correlation)
        );
    });
    out.push(',');
    list(out, "modules", &r.modules, |out, m| {
        let _ = write!(
            out,
            "{{\"pid\":{},\"context\":{},\"module\":{},\"cubin_size\":{},\
             \"timestamp_ns\":{},\"functions\":{},\"loaded_by\":{},\"correlation\":{},\
             \"unloaded_ns\":{},\"unloaded_by\":{},\"unload_correlation\":{},\
             \"image_hash\":{},\"cubin_crc\":{},\"image_stored\":{},\"image_functions\":[{}]}}",
            m.pid,
            m.context,
            m.module,
            m.cubin_size,
            m.timestamp_ns,
            m.functions,
            opt(m.loaded_by.as_deref().map(json_string)),
            opt(m.correlation),
            opt(m.unloaded_ns),
            opt(m.unloaded_by.as_deref().map(json_string)),
            opt(m.unload_correlation),
            opt(m.image.map(|(h, _, _)| json_string(&format!("{h:016x}")))),
            opt(m.image.map(|(_, c, _)| c)),
            m.image.is_some_and(|(_, _, s)| s),
            m.image_functions
                .iter()
                .map(|f| format!(
                    "{{\"name\":{},\"offset\":{},\"size\":{}}}",
                    json_string(&f.name),
                    f.offset,
                    f.size
                ))
                .collect::<Vec<_>>()
                .join(",")
        );
    });
    out.push(',');
    list(out, "functions", &r.functions, |out, f| {
        let _ = write!(
            out,
            "{{\"pid\":{},\"context\":{},\"module\":{},\"function\":{},\"index\":{},\
             \"name\":{}}}",
            f.pid,
            f.context,
            f.module,
            f.function,
            f.index,
            json_string(&f.name)
        );
    });
    out.push('}');
}

/// The `memory` and `sync` keys, after `occupancy`; only when some trace holds memory or
/// synchronization records (traces without them read as before).
/// Whether any trace holds memory or synchronization records (their keys are left out
/// otherwise).
fn has_memory_or_sync(s: &Sections) -> bool {
    s.counts.iter().any(|c| c.memory + c.syncs > 0)
}

fn memory_key(out: &mut String, s: &Sections) {
    if !has_memory_or_sync(s) {
        return;
    }
    array(out, "memory", &s.memory, |out, m| {
        let _ = write!(
            out,
            "{{\"kind\":{},\"allocations\":{},\"frees\":{},\"bytes_allocated\":{},\
             \"peak_bytes\":{},\"largest_bytes\":{},\"live_bytes\":{}}}",
            json_string(m.kind.name()),
            m.allocations,
            m.frees,
            m.bytes_allocated,
            m.peak_bytes,
            m.largest_bytes,
            m.live_bytes
        );
    });
}

fn sync_key(out: &mut String, s: &Sections) {
    if !has_memory_or_sync(s) {
        return;
    }
    array(out, "sync", &s.sync, |out, s| {
        let _ = write!(
            out,
            "{{\"type\":{},\"count\":{},\"total_wait_ns\":{},\"mean_wait_ns\":{},\
             \"max_wait_ns\":{}}}",
            json_string(s.kind),
            s.count,
            s.total_wait_ns,
            s.mean_wait_ns,
            s.max_wait_ns
        );
    });
}

/// The report as one JSON object: the keys of the sections `options` want, in the order the
/// table report prints them.
pub(super) fn render(traces: &[Trace], s: &Sections, options: &RenderOptions) -> String {
    let nvdisasm = options.nvdisasm.as_deref();
    let mut parts: Vec<String> = Vec::new();
    let mut part = |section: Section, write: &dyn Fn(&mut String)| {
        if options.wants(section) {
            let mut p = String::new();
            write(&mut p);
            // The writers start each key with the comma that follows the one before.
            let p = p.strip_prefix(',').unwrap_or(&p);
            if !p.is_empty() {
                parts.push(p.to_string());
            }
        }
    };
    part(Section::Processes, &|out| {
        process::processes_key(out, traces, s)
    });
    part(Section::Api, &|out| {
        api_list(out, "api", &s.api);
        // Driver calls made inside runtime calls: only with runtime API records.
        if !s.api_in_runtime.is_empty() {
            out.push(',');
            api_list(out, "api_in_runtime", &s.api_in_runtime);
        }
    });
    part(Section::Resources, &|out| resources_key(out, traces));
    part(Section::Kernels, &|out| kernels_key(out, s));
    part(Section::Memcpy, &|out| memcpy_key(out, s));
    part(Section::Memset, &|out| memset_key(out, s));
    part(Section::Utilisation, &|out| utilisation_key(out, s));
    part(Section::Shared, &|out| shared_key(out, s));
    part(Section::Latency, &|out| latency_key(out, s));
    part(Section::KernExec, &|out| kern_exec_key(out, s));
    part(Section::Occupancy, &|out| occupancy::key(out, s));
    part(Section::Memory, &|out| memory_key(out, s));
    part(Section::Sync, &|out| sync_key(out, s));
    part(Section::Ranks, &|out| ranks::ranks_key(out, &s.ranks));
    part(Section::Steps, &|out| ranks::steps_key(out, &s.ranks));
    part(Section::Nvtx, &|out| nvtx_key(out, &s.nvtx));
    part(Section::External, &|out| {
        external_key(out, &s.nvtx.external)
    });
    part(Section::Profiles, &|out| profiles::key(out, &s.profiles));
    part(Section::GpuMetrics, &|out| {
        gpu_metrics::key(out, &s.gpu_metrics)
    });
    part(Section::Pcsamp, &|out| pcsamp::key(out, traces, nvdisasm));
    part(Section::SourceCounters, &|out| {
        source_counters::key(out, traces, nvdisasm)
    });
    format!("{{{}}}\n", parts.join(","))
}

/// `\n"KEY":[...]`: one object per function of an API summary.
fn api_list(out: &mut String, key: &str, rows: &[crate::summary::FunctionSummary]) {
    let _ = write!(out, "\n\"{key}\":[");
    for (i, s) in rows.iter().enumerate() {
        out.push_str(if i == 0 { "\n  " } else { ",\n  " });
        let _ = write!(
            out,
            "{{\"function\":{},\"calls\":{},\"errors\":{},\"total_ns\":{},\"mean_ns\":{},\
             \"median_ns\":{},\"min_ns\":{},\"max_ns\":{},\"stddev_ns\":{},\
             \"share_percent\":{},\"error_codes\":{{{}}}}}",
            json_string(&s.function),
            s.calls,
            s.errors,
            s.total_ns,
            s.mean_ns,
            s.median_ns,
            s.min_ns,
            s.max_ns,
            s.stddev_ns,
            s.share_percent,
            s.error_codes
                .iter()
                .map(|(code, n)| format!("\"{code}\":{n}"))
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    out.push_str(if rows.is_empty() { "]" } else { "\n]" });
}

/// `,\n"external":[...]`: one object per pushed external correlation id; `calls`,
/// `gpu_records`, `gpu_ns`: its thread's, `process_*`: the process view (docs/nvtx.md).
fn external_key(out: &mut String, rows: &[crate::nvtx::ExternalSummary]) {
    out.push_str(",\n\"external\":[");
    for (i, r) in rows.iter().enumerate() {
        out.push_str(if i == 0 { "\n  " } else { ",\n  " });
        let _ = write!(
            out,
            "{{\"pid\":{},\"kind\":{},\"id\":{},\"calls\":{},\"gpu_records\":{},\"gpu_ns\":{},\
             \"process_calls\":{},\"process_gpu_records\":{},\"process_gpu_ns\":{}}}",
            r.pid,
            r.kind,
            r.id,
            r.calls,
            r.gpu_records,
            r.gpu_ns,
            r.process_calls,
            r.process_gpu_records,
            r.process_gpu_ns
        );
    }
    out.push_str(if rows.is_empty() { "]" } else { "\n]" });
}

/// `,\n"nvtx":{"ranges":[...],"open":N,"marks":N}`: one object per range name and domain;
/// `gpu_*`, `own_gpu_*`: the work its thread launched, `process_*`: the process view
/// (docs/nvtx.md).
fn nvtx_key(out: &mut String, s: &crate::nvtx::NvtxSection) {
    let (rows, open, marks) = (&s.rows, s.open, s.marks);
    out.push_str(",\n\"nvtx\":{\"ranges\":[");
    for (i, r) in rows.iter().enumerate() {
        out.push_str(if i == 0 { "\n  " } else { ",\n  " });
        let _ = write!(
            out,
            "{{\"domain\":{},\"name\":{},\"count\":{},\"total_ns\":{},\"mean_ns\":{},\
             \"median_ns\":{},\"min_ns\":{},\"max_ns\":{},\"stddev_ns\":{},\
             \"share_percent\":{},\"gpu_records\":{},\"gpu_ns\":{},\
             \"own_gpu_records\":{},\"own_gpu_ns\":{},\"process_gpu_records\":{},\
             \"process_gpu_ns\":{},\"process_own_gpu_records\":{},\"process_own_gpu_ns\":{}}}",
            json_string(&r.domain),
            json_string(&r.name),
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
            r.own_gpu_ns,
            r.process_gpu_records,
            r.process_gpu_ns,
            r.process_own_gpu_records,
            r.process_own_gpu_ns
        );
    }
    out.push_str(if rows.is_empty() { "]" } else { "\n]" });
    let _ = write!(out, ",\"open\":{open},\"marks\":{marks}}}");
}

/// The `records` ... `idle_ns` keys of a utilisation row.
fn busy_keys(u: &crate::gpu_summary::Utilisation) -> String {
    format!(
        "\"records\":{},\"start_ns\":{},\"end_ns\":{},\"span_ns\":{},\"busy_ns\":{},\
         \"busy_percent\":{},\"gaps\":{},\"idle_ns\":{}",
        u.records, u.start_ns, u.end_ns, u.span_ns, u.busy_ns, u.busy_percent, u.gaps, u.idle_ns
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sections of `traces`, without the API summary.
    fn no_api(traces: &[Trace]) -> Sections {
        Sections {
            api: Vec::new(),
            ..Sections::of(traces)
        }
    }

    #[test]
    fn memory_and_sync_keys_are_exact_and_only_with_such_records() {
        let t = crate::gpu_summary::samples::memory_and_sync();
        let json = render(
            std::slice::from_ref(&t),
            &no_api(std::slice::from_ref(&t)),
            &RenderOptions::default(),
        );
        let tail = &json[json.find("\"occupancy\"").unwrap()..];
        let expected = concat!(
            "\"occupancy\":[],\n",
            "\"memory\":[\n",
            "  {\"kind\":\"device\",\"allocations\":3,\"frees\":2,\"bytes_allocated\":1056768,",
            "\"peak_bytes\":1052672,\"largest_bytes\":1048576,\"live_bytes\":4096},\n",
            "  {\"kind\":\"pinned\",\"allocations\":1,\"frees\":1,\"bytes_allocated\":8192,",
            "\"peak_bytes\":8192,\"largest_bytes\":8192,\"live_bytes\":0}\n",
            "],\n",
            "\"sync\":[\n",
            "  {\"type\":\"stream synchronize\",\"count\":2,\"total_wait_ns\":5100,",
            "\"mean_wait_ns\":2550,\"max_wait_ns\":5000},\n",
            "  {\"type\":\"context synchronize\",\"count\":1,\"total_wait_ns\":2000,",
            "\"mean_wait_ns\":2000,\"max_wait_ns\":2000},\n",
            "  {\"type\":\"event synchronize\",\"count\":1,\"total_wait_ns\":500,",
            "\"mean_wait_ns\":500,\"max_wait_ns\":500}\n",
            "],\n",
            "\"nvtx\":{\"ranges\":[],\"open\":0,\"marks\":0},\n\"external\":[]}\n"
        );
        assert_eq!(tail, expected);
        let plain = render(
            &[Trace::default()],
            &no_api(&[Trace::default()]),
            &RenderOptions::default(),
        );
        assert!(
            plain
                .ends_with("\"occupancy\":[],\n\"nvtx\":{\"ranges\":[],\"open\":0,\"marks\":0},\n\"external\":[]}\n"),
            "{plain}"
        );
    }
}
