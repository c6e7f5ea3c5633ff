//! The "Launch statistics and occupancy" section of `--format table`
//! ([`crate::occupancy`]): shown only when the traces hold kernel records and
//! device descriptions.

use super::layout::{columns, plural, Align, Align::Left, Page};
use crate::model::Trace;
use crate::occupancy::{OccupancyRow, OCCUPANCY_ROWS};
use crate::report::Sections;
use rtrace_format::attr;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Writes the section, preceded by a blank line; nothing when no trace has both
/// kernel records and a DeviceInfo.
pub(super) fn section(out: &mut Page, traces: &[Trace], s: &Sections) {
    if !traces
        .iter()
        .zip(&s.counts)
        .any(|(t, c)| c.kernels > 0 && !t.devices.is_empty())
    {
        return;
    }
    let mut r = s.occupancy.clone();
    let configurations = r.rows.len();
    let kernels = {
        let mut names: Vec<&str> = r.rows.iter().map(|r| r.name.as_str()).collect();
        names.dedup();
        names.len()
    };
    r.more = configurations.saturating_sub(OCCUPANCY_ROWS);
    r.rows.truncate(OCCUPANCY_ROWS);
    out.push('\n');
    let _ = writeln!(
        out,
        "Launch statistics and occupancy: {configurations} launch {} of {kernels} {}",
        plural(configurations as u64, "configuration", "configurations"),
        plural(kernels as u64, "kernel", "kernels"),
    );
    devices(out, traces, &r.rows);
    if r.rows.is_empty() {
        let _ = writeln!(
            out,
            "  no kernel ran on a described device ({} {} on devices without a description)",
            r.undescribed_launches,
            plural(r.undescribed_launches, "launch", "launches")
        );
        return;
    }
    out.push_str(
        "  shared memory per block, bytes: static, dynamic, driver (reserved); \
         waves/SM: grid / (active blocks per SM x SMs)\n",
    );
    let headers = [
        "kernel", "device", "launches", "block", "grid", "threads", "regs", "static", "dynamic",
        "driver", "waves/SM",
    ];
    let rows: Vec<Vec<String>> = r
        .rows
        .iter()
        .map(|row| {
            let o = &row.occupancy;
            vec![
                row.name.clone(),
                row.device.to_string(),
                row.launches.to_string(),
                dims(row.launch.block),
                dims(row.launch.grid),
                o.threads.to_string(),
                o.registers_per_thread.to_string(),
                o.static_shared_memory.to_string(),
                o.dynamic_shared_memory.to_string(),
                o.driver_shared_memory.to_string(),
                match &o.theoretical {
                    Ok(t) => t.waves_per_sm.map_or("-".to_string(), |w| w.to_string()),
                    Err(_) => "-".to_string(),
                },
            ]
        })
        .collect();
    columns(out, &headers, &[Left], &rows);
    out.push_str(
        "  theoretical occupancy, default shared-memory carveout; block limits in blocks per \
         SM: regs, smem, warps, SM (block slots)\n",
    );
    let headers = [
        "kernel",
        "device",
        "regs",
        "smem",
        "warps",
        "SM",
        "warps/SM",
        "occupancy",
        "limited by",
    ];
    let limit = |l: Option<u32>| l.map_or("-".to_string(), |l| l.to_string());
    let rows: Vec<Vec<String>> = r
        .rows
        .iter()
        .map(|row| {
            let mut cells = vec![row.name.clone(), row.device.to_string()];
            match &row.occupancy.theoretical {
                Ok(t) => cells.extend([
                    limit(t.block_limit_registers),
                    limit(t.block_limit_shared_memory),
                    t.block_limit_warps.to_string(),
                    t.block_limit_sm.to_string(),
                    format!("{}/{}", t.active_warps_per_sm, t.max_warps_per_sm),
                    format!("{}%", t.occupancy_percent),
                    match t.limited_by() {
                        None => "-".to_string(),
                        Some(_) if t.active_blocks_per_sm == 0 => {
                            format!("cannot run: {}", t.limited_by().unwrap_or_default())
                        }
                        Some(l) => l,
                    },
                ]),
                Err(e) => {
                    cells.extend(std::iter::repeat_n("-".to_string(), 6));
                    cells.push(e.to_string());
                }
            }
            cells
        })
        .collect();
    let mut align = [Align::Right; 9];
    align[0] = Left;
    align[8] = Left;
    columns(out, &headers, &align, &rows);
    if r.more > 0 {
        let _ = writeln!(
            out,
            "  … and {} more {} (--format json lists them)",
            r.more,
            plural(r.more as u64, "configuration", "configurations")
        );
    }
    if r.undescribed_launches > 0 {
        let _ = writeln!(
            out,
            "  {} {} on devices without a description are not shown",
            r.undescribed_launches,
            plural(r.undescribed_launches, "launch", "launches")
        );
    }
}

/// One line per device the rows use: its name and the limits occupancy depends on.
fn devices(out: &mut Page, traces: &[Trace], rows: &[OccupancyRow]) {
    let mut seen: BTreeMap<(u32, &str), String> = BTreeMap::new();
    for t in traces {
        for (ordinal, d) in &t.devices {
            if !rows
                .iter()
                .any(|r| r.device == *ordinal && r.device_name == d.name)
            {
                continue;
            }
            let a = |id: i32| d.attribute(id).map_or("?".to_string(), |v| v.to_string());
            let smem = d
                .attribute(attr::MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)
                .map_or("?".to_string(), |b| match b % 1024 {
                    0 => format!("{} KiB", b / 1024),
                    _ => format!("{b} B"),
                });
            let line = format!(
                "compute capability {}.{}, {} SMs\n    per SM: {} threads, {} blocks, {} \
                 registers, {smem} shared memory",
                a(attr::COMPUTE_CAPABILITY_MAJOR),
                a(attr::COMPUTE_CAPABILITY_MINOR),
                a(attr::MULTIPROCESSOR_COUNT),
                a(attr::MAX_THREADS_PER_MULTIPROCESSOR),
                a(attr::MAX_BLOCKS_PER_MULTIPROCESSOR),
                a(attr::MAX_REGISTERS_PER_MULTIPROCESSOR),
            );
            seen.entry((*ordinal, d.name.as_str())).or_insert(line);
        }
    }
    for ((ordinal, name), line) in seen {
        let _ = writeln!(out, "  device {ordinal}: {name}, {line}");
    }
}

/// `(x,y,z)`.
fn dims(d: [i32; 3]) -> String {
    format!("({},{},{})", d[0], d[1], d[2])
}
