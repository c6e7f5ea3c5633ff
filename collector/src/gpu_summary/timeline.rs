//! Time on the GPU: per-device and per-stream utilisation, and launch-to-start latency.

use super::common::*;

/// The union of `intervals` (sorted in place): (busy ns, number of gaps
/// between the merged intervals). Touching intervals merge (no gap).
pub(super) fn union(intervals: &mut [(u64, u64)]) -> (u64, u64) {
    intervals.sort_unstable();
    let mut busy = 0u64;
    let mut gaps = 0u64;
    let mut current: Option<(u64, u64)> = None;
    for &(start, end) in intervals.iter() {
        current = match current {
            Some((s, e)) if start <= e => Some((s, e.max(end))),
            Some((s, e)) => {
                busy = busy.saturating_add(e - s);
                gaps += 1;
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    if let Some((s, e)) = current {
        busy = busy.saturating_add(e - s);
    }
    (busy, gaps)
}

fn utilisation_row(
    pid: u32,
    device: u32,
    stream: Option<u32>,
    iv: &mut [(u64, u64)],
) -> Utilisation {
    let start_ns = iv.iter().map(|i| i.0).min().unwrap_or(0);
    let end_ns = iv.iter().map(|i| i.1).max().unwrap_or(0);
    let span_ns = end_ns - start_ns;
    let (busy_ns, gaps) = union(iv);
    Utilisation {
        pid,
        device,
        stream,
        records: iv.len() as u64,
        start_ns,
        end_ns,
        span_ns,
        busy_ns,
        busy_percent: Hundredths::percent(u128::from(busy_ns), u128::from(span_ns)),
        gaps,
        idle_ns: span_ns - busy_ns,
    }
}

/// Per traced process (in `traces` order), for each device (ascending): a row
/// for the device (`stream: None`), then one for each of its streams
/// (ascending). Processes are not merged: device and stream ids are each
/// process's own.
pub fn utilisation(traces: &[Trace]) -> Vec<Utilisation> {
    let mut rows = Vec::new();
    for trace in traces {
        // device → stream → intervals; an end before its start counts as the start.
        let mut by_device: BTreeMap<u32, BTreeMap<u32, Vec<(u64, u64)>>> = BTreeMap::new();
        let mut add = |device: u32, stream: u32, start: u64, end: u64| {
            by_device
                .entry(device)
                .or_default()
                .entry(stream)
                .or_default()
                .push((start, end.max(start)));
        };
        for k in &trace.kernels {
            add(k.device, k.stream, k.start_ns, k.end_ns);
        }
        for m in &trace.memcpys {
            add(m.device, m.stream, m.start_ns, m.end_ns);
        }
        for s in &trace.memsets {
            add(s.device, s.stream, s.start_ns, s.end_ns);
        }
        let pid = trace.header.pid;
        for (device, streams) in by_device {
            let mut all: Vec<(u64, u64)> = streams.values().flatten().copied().collect();
            rows.push(utilisation_row(pid, device, None, &mut all));
            for (stream, mut iv) in streams {
                rows.push(utilisation_row(pid, device, Some(stream), &mut iv));
            }
        }
    }
    rows
}

/// How busy one physical GPU was over the traced processes of its host that ran work on it,
/// where two or more did (their device ordinals may differ: `CUDA_VISIBLE_DEVICES`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedDevice {
    pub hostname: String,
    /// `domain:bus:device.0`, as `nvidia-smi` writes it.
    pub pci_address: String,
    pub name: String,
    /// (pid, the device's ordinal in that process) of each process that ran work on it, in
    /// the order of the traces.
    pub processes: Vec<(u32, u32)>,
    /// The union of all their records' intervals (`pid` 0, `device` the first process's
    /// ordinal, `stream` `None`).
    pub utilisation: Utilisation,
}

impl SharedDevice {
    /// `PID:DEVICE` of each process, separated by spaces.
    pub fn processes_text(&self) -> String {
        let p: Vec<String> = self
            .processes
            .iter()
            .map(|(pid, ordinal)| format!("{pid}:{ordinal}"))
            .collect();
        p.join(" ")
    }
}

/// The physical GPUs that two or more of `traces` ran work on: per GPU (same host boot id and
/// PCI address), the (trace index, device ordinal) pairs of `ran` on it, sorted by host name,
/// then PCI address. `ran`: the (trace index, ordinal) pairs with GPU records.
pub fn shared_groups(
    traces: &[Trace],
    ran: impl IntoIterator<Item = (usize, u32)>,
) -> Vec<Vec<(usize, u32)>> {
    let mut groups: BTreeMap<(String, String, String), Vec<(usize, u32)>> = BTreeMap::new();
    for (ti, ordinal) in ran {
        let Some(t) = traces.get(ti) else { continue };
        let Some(pci) = t.devices.get(&ordinal).and_then(|d| d.pci_address()) else {
            continue;
        };
        let h = &t.header;
        let key = (h.hostname.clone(), pci, h.boot_id.clone());
        groups.entry(key).or_default().push((ti, ordinal));
    }
    groups
        .into_values()
        .filter(|g| {
            let mut tis: Vec<usize> = g.iter().map(|m| m.0).collect();
            tis.dedup();
            tis.len() > 1
        })
        .collect()
}

/// The row of `group` ([`shared_groups`]), from the union of its records' intervals.
pub fn shared_row(
    traces: &[Trace],
    group: &[(usize, u32)],
    union: super::union::Union,
) -> SharedDevice {
    let (ti, ordinal) = group[0];
    let t = &traces[ti];
    let d = t.devices.get(&ordinal);
    SharedDevice {
        hostname: t.header.hostname.clone(),
        pci_address: d.and_then(|d| d.pci_address()).unwrap_or_default(),
        name: d.map(|d| d.name.clone()).unwrap_or_default(),
        processes: group
            .iter()
            .map(|&(ti, o)| (traces[ti].header.pid, o))
            .collect(),
        utilisation: union.row(0, ordinal, None),
    }
}

/// [`SharedDevice`] rows of `traces` held in memory.
pub fn shared_devices(traces: &[Trace]) -> Vec<SharedDevice> {
    let mut ran = Vec::new();
    for (ti, t) in traces.iter().enumerate() {
        let mut devices: Vec<u32> = t.kernels.iter().map(|k| k.device).collect();
        devices.extend(t.memcpys.iter().map(|m| m.device));
        devices.extend(t.memsets.iter().map(|m| m.device));
        devices.sort_unstable();
        devices.dedup();
        ran.extend(devices.into_iter().map(|d| (ti, d)));
    }
    shared_groups(traces, ran)
        .into_iter()
        .map(|group| {
            let mut u = super::union::Union::default();
            for &(ti, ordinal) in &group {
                let t = &traces[ti];
                let k = t.kernels.iter().filter(|k| k.device == ordinal);
                let k = k.map(|k| (k.start_ns, k.end_ns));
                let c = t.memcpys.iter().filter(|m| m.device == ordinal);
                let c = c.map(|m| (m.start_ns, m.end_ns));
                let s = t.memsets.iter().filter(|m| m.device == ordinal);
                let s = s.map(|m| (m.start_ns, m.end_ns));
                for (start, end) in k.chain(c).chain(s) {
                    u.add(start, end);
                }
            }
            shared_row(traces, &group, u)
        })
        .collect()
}

/// The `limit` largest launch-to-start latencies over all `traces`.
///
/// A kernel or copy is matched when it has [`FLAG_CORRELATED`] and its
/// `correlation` is that of an API record of the same trace. Memset records
/// carry no flags, so a memset is matched by a non-zero `correlation`.
pub fn launch_latency(traces: &[Trace], limit: usize) -> Latencies {
    let mut top = super::latency::Top::new(limit);
    for (ti, trace) in traces.iter().enumerate() {
        launch_latency_into(&mut top, ti, trace);
    }
    top.finish(traces)
}

/// Adds the matched GPU records of `trace` (trace `ti` of the report) to `top`.
pub(crate) fn launch_latency_into(top: &mut super::latency::Top, ti: usize, trace: &Trace) {
    use super::latency::Work;
    let kernels = trace
        .kernels
        .iter()
        .filter(|k| k.flags & FLAG_CORRELATED != 0)
        .map(|k| k.correlation);
    let copies = trace
        .memcpys
        .iter()
        .filter(|m| u32::from(m.flags) & FLAG_CORRELATED != 0)
        .map(|m| m.correlation);
    let sets = trace
        .memsets
        .iter()
        .filter(|s| s.correlation != 0)
        .map(|s| s.correlation);
    let api = trace.api_records_for(kernels.chain(copies).chain(sets));
    let mut check = |work, index: usize, flagged: bool, correlation: u64, start: u64| {
        if let Some(r) = flagged.then(|| api.get(correlation)).flatten() {
            top.matched(
                ti,
                work,
                index as u64,
                correlation,
                start,
                r.start_ns,
                r.function,
            );
        }
    };
    for (i, k) in trace.kernels.iter().enumerate() {
        let flagged = k.flags & FLAG_CORRELATED != 0;
        check(Work::Kernel(k.name), i, flagged, k.correlation, k.start_ns);
    }
    for (i, m) in trace.memcpys.iter().enumerate() {
        let flagged = u32::from(m.flags) & FLAG_CORRELATED != 0;
        check(Work::Memcpy(m.kind), i, flagged, m.correlation, m.start_ns);
    }
    for (i, s) in trace.memsets.iter().enumerate() {
        check(
            Work::Memset,
            i,
            s.correlation != 0,
            s.correlation,
            s.start_ns,
        );
    }
}
