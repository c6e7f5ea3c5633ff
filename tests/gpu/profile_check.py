"""Kernel profiling against Nsight Compute on the same binary (tests/gpu/run.sh, step
`profile`): every metric of every profiled launch in an rtrace trace (decoded by
tracefile.read_profiles, independently of the collector) compared with `ncu --metrics ... --csv
--print-units base --clock-control none` of the same program, launch by launch in launch order.

Tolerances (issue 18): counts (instructions, bytes, wavefronts, conflicts, cycles) within 1%;
percentages within 2 points; durations and rates (`.per_second`) within 5%; ratios within 1% or
0.01 (ncu prints two decimals). Noise allowances, each counted and printed, never silent: a count
whose values are both under 0.1% of the kernel's own scale (64 KiB for bytes, 1000 for other
counts) is background traffic, not the kernel's; a hit rate is compared only where its level
moved at least 1 MiB (`l1tex__t_bytes.sum`, `lts__t_bytes.sum`).

Usage: profile_check.py TRACE NCU_CSV  -> prints one line per disagreement and a summary JSON
line (with `by_class`: [compared, disagreeing] per class of metric); exit status 0 iff every
compared metric agrees.
"""

import csv
import json
import subprocess
import sys

import tracefile

BYTES_FLOOR = 64 << 10
COUNT_FLOOR = 1000
TRAFFIC_FLOOR = 1 << 20


def ncu_launches(path):
    """[(kernel name, {metric: (unit, value)})] in ncu's ID order."""
    launches, header = {}, None
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if row and row[0] == "ID":
                header = row
                continue
            if header is None or len(row) != len(header):
                continue
            r = dict(zip(header, row))
            k = int(r["ID"])
            name, metrics = launches.setdefault(k, (r["Kernel Name"], {}))
            v = r["Metric Value"].replace(",", "")
            try:
                metrics[r["Metric Name"]] = (r["Metric Unit"], float(v))
            except ValueError:
                pass
    return [launches[k] for k in sorted(launches)]


def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                             check=True).stdout.splitlines()
        return out if len(out) == len(names) else names
    except (OSError, subprocess.CalledProcessError):
        return names


def base_name(name):
    """A kernel's own identifier: without `void`, template arguments, parameters and namespaces
    (c++filt and Nsight Compute spell namespaces and template arguments differently)."""
    for anonymous in ("(anonymous namespace)", "<unnamed>"):
        name = name.replace(anonymous, "anon")
    name = name.removeprefix("void ").strip()
    for stop in ("<", "("):
        name = name.split(stop)[0]
    return name.split("::")[-1].strip()


def verdict(metric, unit, ours, theirs, values):
    """(agrees, how it was judged)."""
    diff = abs(ours - theirs)
    scale = max(abs(ours), abs(theirs))
    if metric.endswith("hit_rate.pct"):
        level = "l1tex__t_bytes.sum" if metric.startswith("l1tex") else "lts__t_bytes.sum"
        if values.get(level, 0.0) < TRAFFIC_FLOOR:
            return True, "skipped: under 1 MiB of traffic"
        return diff <= 2.0, "2 points"
    if "pct" in metric or unit == "%":
        return diff <= 2.0, "2 points"
    if metric.startswith("gpu__time_duration") or metric.endswith("per_second"):
        return diff <= 0.05 * scale, "5%"
    if metric.endswith(".ratio") or "per_cycle" in metric or metric.endswith("per_issue_active.ratio"):
        return diff <= max(0.01 * scale, 0.0051), "1% or 0.01"
    floor = BYTES_FLOOR if "bytes" in metric else COUNT_FLOOR
    if scale < floor:
        return True, f"noise: both under {floor}"
    return diff <= 0.01 * scale, "1%"


def metric_class(metric):
    """The class a metric is summarized under."""
    if metric.startswith(("dram__", "gpu__dram", "lts__")) or "memory" in metric:
        return "dram_l2_memory"
    if "duration" in metric or "cycles_elapsed" in metric or "per_second" in metric:
        return "time_cycles_rates"
    if "stalled" in metric or "latency" in metric:
        return "warp_stalls"
    if "inst" in metric or "wavefront" in metric or "conflict" in metric or "l1tex" in metric:
        return "instructions_l1_shared"
    return "sm_pipes_occupancy"


def main():
    trace, ncu_csv = sys.argv[1], sys.argv[2]
    _setups, profiles = tracefile.read_profiles(trace)
    profiles.sort(key=lambda p: p["launch"])
    theirs = ncu_launches(ncu_csv)
    names = demangle([p["name"] for p in profiles])
    summary = dict(launches_rtrace=len(profiles), launches_ncu=len(theirs), compared=0,
                   disagree=0, noise=0, skipped=0, name_mismatch=0, by_class={})
    if len(profiles) != len(theirs):
        print(f"launch counts differ: rtrace {len(profiles)}, ncu {len(theirs)}")
    for p, name, (ncu_name, metrics) in zip(profiles, names, theirs):
        if base_name(name) != base_name(ncu_name):
            summary["name_mismatch"] += 1
            print(f"launch {p['launch']}: rtrace {name!r} vs ncu {ncu_name!r}")
            continue
        for metric, value in p["values"].items():
            if metric not in metrics:
                continue
            unit, ncu_value = metrics[metric]
            ok, how = verdict(metric, unit, value, ncu_value, p["values"])
            summary["compared"] += 1
            c = summary["by_class"].setdefault(metric_class(metric), [0, 0])
            c[0] += 1
            c[1] += not ok
            if how.startswith("noise"):
                summary["noise"] += 1
            if how.startswith("skipped"):
                summary["skipped"] += 1
            if not ok:
                summary["disagree"] += 1
                print(f"launch {p['launch']} {ncu_name[:40]}: {metric}: rtrace {value:.6g} "
                      f"ncu {ncu_value:.6g} {unit} ({how})")
    print(json.dumps(summary))
    ok = (summary["disagree"] == 0 and summary["name_mismatch"] == 0 and summary["compared"] > 0
          and len(profiles) == len(theirs))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
