//! The `"kernel_profiles"` key of `--format json` ([`crate::profiles`]): only when something
//! was profiled or a notice says why not. Numbers are as recorded (`null` for NaN).

use crate::profiles::{ProfileSection, ProfiledKernel};
use crate::text::json_string;
use std::fmt::Write;

/// A metric value: the number, `null` for NaN or infinity.
pub(super) fn number(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".to_string()
    }
}

/// `,\n"kernel_profiles":{"setups":[...],"notices":[...],"kernels":[...]}`.
pub(super) fn key(out: &mut String, s: &ProfileSection) {
    if s.is_empty() {
        return;
    }
    out.push_str(",\n\"kernel_profiles\":{\"setups\":[");
    for (i, u) in s.setups.iter().enumerate() {
        let sep = if i > 0 { "," } else { "" };
        let _ = write!(
            out,
            "{sep}{{\"pid\":{},\"context\":{},\"device\":{},\"chip\":{},\"passes\":{},\
             \"metrics\":{},\"replay\":{}}}",
            u.pid,
            u.context,
            u.device,
            json_string(&u.chip),
            u.passes,
            u.metrics,
            json_string(u.replay)
        );
    }
    out.push_str("],\"notices\":[");
    for (i, n) in s.notices.iter().enumerate() {
        let sep = if i > 0 { "," } else { "" };
        let _ = write!(
            out,
            "{sep}{{\"pid\":{},\"message\":{}}}",
            n.pid,
            json_string(&n.message)
        );
    }
    out.push_str("],\"kernels\":[");
    for (i, k) in s.kernels.iter().enumerate() {
        out.push_str(if i == 0 { "\n  " } else { ",\n  " });
        kernel(out, k);
    }
    out.push_str(if s.kernels.is_empty() { "]}" } else { "\n]}" });
}

fn kernel(out: &mut String, k: &ProfiledKernel) {
    let _ = write!(out, "{{\"name\":{},\"launches\":[", json_string(&k.name));
    for (i, l) in k.launches.iter().enumerate() {
        let sep = if i > 0 { "," } else { "" };
        let kernel = match &l.kernel {
            Some(r) => format!(
                "{{\"device\":{},\"stream\":{},\"grid\":[{},{},{}],\"block\":[{},{},{}],\
                 \"start_ns\":{},\"duration_ns\":{}}}",
                r.device,
                r.stream,
                r.grid[0],
                r.grid[1],
                r.grid[2],
                r.block[0],
                r.block[1],
                r.block[2],
                r.start_ns,
                r.duration_ns
            ),
            None => "null".to_string(),
        };
        let values: Vec<String> = l
            .values
            .iter()
            .map(|(n, v)| format!("{}:{}", json_string(n), number(*v)))
            .collect();
        let evaluated = if l.evaluated.is_empty() {
            String::new()
        } else {
            let items: Vec<String> = l
                .evaluated
                .iter()
                .map(|(n, r)| match r {
                    Ok(v) => format!("{}:{}", json_string(n), number(*v)),
                    Err(e) => format!("{}:{{\"error\":{}}}", json_string(n), json_string(e)),
                })
                .collect();
            format!(",\"evaluated\":{{{}}}", items.join(","))
        };
        let _ = write!(
            out,
            "{sep}{{\"pid\":{},\"context\":{},\"correlation\":{},\"launch\":{},\"range\":{},\
             \"profiling_ns\":{},\"kernel\":{kernel},\"nvtx\":[{}],\"metrics\":{{{}}}{evaluated}}}",
            l.pid,
            l.context,
            l.correlation,
            l.launch,
            json_string(&l.range),
            l.profiling_ns,
            l.nvtx
                .iter()
                .map(|n| json_string(n))
                .collect::<Vec<_>>()
                .join(","),
            values.join(",")
        );
    }
    out.push_str("],\"sections\":[");
    for (i, b) in k.blocks.iter().enumerate() {
        let sep = if i > 0 { "," } else { "" };
        let _ = write!(
            out,
            "{sep}{{\"name\":{},\"metrics\":[",
            json_string(&b.title)
        );
        for (j, r) in b.rows.iter().enumerate() {
            let sep = if j > 0 { "," } else { "" };
            let _ = write!(
                out,
                "{sep}{{\"name\":{},\"label\":{},\"unit\":{},\"count\":{},\"mean\":{},\
                 \"min\":{},\"max\":{}}}",
                json_string(&r.metric),
                json_string(&r.label),
                json_string(r.unit.name()),
                r.count,
                number(r.mean),
                number(r.min),
                number(r.max)
            );
        }
        out.push_str("]}");
    }
    let _ = write!(
        out,
        "],\"theoretical_occupancy_pct\":{},\"findings\":[",
        k.theoretical_occupancy.map_or("null".to_string(), number)
    );
    for (i, f) in k.findings.iter().enumerate() {
        let sep = if i > 0 { "," } else { "" };
        let numbers: Vec<String> = f
            .numbers
            .iter()
            .map(|(n, v)| format!("{}:{}", json_string(n), number(*v)))
            .collect();
        let _ = write!(
            out,
            "{sep}{{\"rule\":{},\"message\":{},\"numbers\":{{{}}},\"speedup_pct\":{}}}",
            json_string(f.rule),
            json_string(&f.message),
            numbers.join(","),
            f.speedup_pct.map_or("null".to_string(), number)
        );
    }
    out.push(']');
    if !k.evaluation_errors.is_empty() {
        let errors: Vec<String> = k.evaluation_errors.iter().map(|e| json_string(e)).collect();
        let _ = write!(out, ",\"evaluation_errors\":[{}]", errors.join(","));
    }
    out.push('}');
}
