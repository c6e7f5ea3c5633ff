"""Compares SASS metric counts per instruction with Nsight Compute's Source page.

    sassmetrics_compare.py probe PROBE_LOG TAG NCU_SOURCE_CSV
    sassmetrics_compare.py rtrace RTRACE_SASS_JSON NCU_SOURCE_CSV

probe: the `REC <TAG>-<kernel>-0 ...` lines of sassmetrics_probe's output (one launch of each
kernel, flushed alone). rtrace: `rtrace report --format json --section source-counters` of a trace
recorded with --source-counters (one launch of each kernel). NCU_SOURCE_CSV: `ncu -i REP --page source --csv
--print-units base --print-source sass` of a report with the SourceCounters section of one launch
of each kernel. Prints ncu's column names, then one PASS/FAIL line per kernel and counter: every
instruction's value equal (instructions with no record count as 0 on our side).
"""

import csv
import json
import re
import sys

KERNELS = ["bank_conflicts", "strided_reads", "divergent"]
# Our counter (rtrace's keys, rtrace_format::COUNTERS) -> ncu Source page column names it may
# have (first found wins).
COLUMNS = {
    "inst_executed": ["Instructions Executed"],
    "thread_inst_executed": ["Predicated-On Thread Instructions Executed"],
    "thread_inst_executed_all": ["Thread Instructions Executed"],
    "global_sectors": ["L2 Theoretical Sectors Global"],
    "global_sectors_ideal": ["L2 Theoretical Sectors Global Ideal", "L2 Ideal Sectors Global"],
    "shared_wavefronts": ["L1 Wavefronts Shared"],
    "shared_wavefronts_ideal": ["L1 Wavefronts Shared Ideal"],
    "divergent_branch_targets": ["Divergent Branches", "Branch Targets Threads Divergent"],
}


def role(metric):
    """A CUPTI SASS metric name (the probe's) or an rtrace key -> rtrace's key."""
    if "wavefronts_mem_shared" in metric:
        return "shared_wavefronts_ideal" if metric.endswith("_ideal") else "shared_wavefronts"
    return {
        "smsp__sass_inst_executed": "inst_executed",
        "smsp__sass_thread_inst_executed_pred_on": "thread_inst_executed",
        "smsp__sass_thread_inst_executed": "thread_inst_executed_all",
        "smsp__sass_sectors_mem_global": "global_sectors",
        "smsp__sass_sectors_mem_global_ideal": "global_sectors_ideal",
        "smsp__sass_branch_targets_threads_divergent": "divergent_branch_targets",
    }.get(metric, metric)


def num(s):
    s = s.replace(",", "").strip()
    try:
        return int(float(s))
    except ValueError:
        return None


def ncu_source(path):
    """kernel -> (header, {offset: row dict}); offsets from the kernel's first address."""
    out, kernel, header = {}, None, None
    for r in csv.reader(open(path, errors="replace")):
        if not r:
            continue
        if r[0] == "Kernel Name":
            kernel, header = r[1].split("(")[0], None
            out.setdefault(kernel, (None, {}))
            continue
        if r[0] in ("Address", "# Address"):
            header = r
            out[kernel] = (header, out[kernel][1])
            continue
        if header and kernel:
            d = dict(zip(header, r))
            try:
                addr = int(d.get("Address", d.get("# Address", "")), 16)
            except ValueError:
                continue
            out[kernel][1][addr] = d
    for k, (h, rows) in list(out.items()):
        base = min(rows) if rows else 0
        out[k] = (h, {a - base: d for a, d in rows.items()})
    return out


def probe_records(path, tag):
    """kernel -> {offset: {metric: value}} from REC lines of TAG-<kernel>-0."""
    out = {}
    for line in open(path, errors="replace"):
        if not line.startswith("REC "):
            continue
        f = line.split()
        m = re.match(re.escape(tag) + r"-(\w+)-0$", f[1])
        if not m:
            continue
        kern = m.group(1)
        kv = dict(x.split("=", 1) for x in f[2:] if "=" in x and not x.startswith("raw"))
        pc = int(kv.pop("pc"), 16)
        for k in ("crc", "fidx", "fn"):
            kv.pop(k, None)
        # CUPTI gives one record per instruction and metric: merged per instruction.
        row = out.setdefault(kern, {}).setdefault(pc, {})
        for k, v in kv.items():
            row[role(k)] = row.get(role(k), 0) + int(v)
    return out


def rtrace_records(path):
    """kernel -> {offset: {counter: value}} from `rtrace report --format json` (its
    "source_counters" key)."""
    out = {}
    data = json.load(open(path)).get("source_counters", {})
    for k in data.get("kernels", []):
        name = k.get("demangled", k.get("name", ""))
        short = next((s for s in KERNELS if s in name), None)
        if not short:
            continue
        for ins in k.get("instructions", []):
            out.setdefault(short, {})[ins["offset"]] = {role(m): v for m, v in ins["counters"].items()}
    return out


def main():
    if sys.argv[1] == "probe":
        ours, src = probe_records(sys.argv[2], sys.argv[3]), ncu_source(sys.argv[4])
    else:
        ours, src = rtrace_records(sys.argv[2]), ncu_source(sys.argv[3])
    passed = failed = 0
    for kern in KERNELS:
        ncu_kernel = next((k for k in src if kern in k), None)
        mine = ours.get(kern, {})
        if ncu_kernel is None or not mine:
            print(f"FAIL {kern}.present  (ncu {ncu_kernel is not None}, ours {len(mine)} PCs)")
            failed += 1
            continue
        header, rows = src[ncu_kernel]
        if kern == KERNELS[0]:
            print("ncu columns:", header)
        metrics = sorted({m for v in mine.values() for m in v})
        for metric in metrics:
            col = next((c for c in COLUMNS.get(metric, []) if c in header), None)
            if col is None:
                # ncu leaves a counter's columns out of a kernel's Source page when the kernel
                # has none of it (no shared memory access: no shared wavefront columns).
                total = sum(v.get(metric, 0) for v in mine.values())
                if total == 0:
                    print(f"PASS {kern}.{metric}  (ncu has no column for it, all {len(mine)} of ours 0)")
                    passed += 1
                else:
                    print(f"FAIL {kern}.{metric}  (no ncu column among {COLUMNS.get(metric)}, ours sum {total})")
                    failed += 1
                continue
            bad = []
            for off in sorted(set(rows) | set(mine)):
                a = mine.get(off, {}).get(metric, 0)
                b = num(rows[off].get(col, "")) if off in rows else None
                if b is None:
                    b = 0
                if a != b:
                    bad.append(f"0x{off:x}: ours {a} ncu {b}")
            total = sum(v.get(metric, 0) for v in mine.values())
            if bad:
                failed += 1
                print(f"FAIL {kern}.{metric}  ({len(bad)} differ: {'; '.join(bad[:4])})")
            else:
                passed += 1
                print(f"PASS {kern}.{metric}  ({len(rows)} instructions, sum {total}, column '{col}')")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
