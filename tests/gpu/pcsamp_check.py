"""Compares rtrace's PC sampling of tests/gpu/pcsamp_kernels.cu with Nsight Compute's.

    pcsamp_check.py REPORT_JSON NCU_METRICS_CSV NCU_SOURCE_SASS_CSV

REPORT_JSON: `rtrace report --format json` of a run recorded with --pc-sampling.
NCU_METRICS_CSV: `ncu --csv --metrics group:smsp__pcsamp_warp_stall_reasons` of the same
program. NCU_SOURCE_SASS_CSV: `ncu -i REP --page source --csv --print-source sass` of a report
with the SourceCounters section.

For each of the three kernels, one PASS/FAIL line per check:
  <kernel>.stall-ranking  rtrace's two largest stall reasons are ncu's two largest, in order
  <kernel>.hottest-pc     rtrace's hottest instruction is among ncu's three hottest, and ncu's
                          hottest is among rtrace's three
  <kernel>.hottest-line   the source line with the most samples is the same (ncu's samples per
                          instruction summed per line with rtrace's instruction-to-line map)
Prints the distributions side by side. Exit status 1 if any check failed.
"""

import csv
import json
import sys

PREFIX = "smsp__pcsamp_warps_issue_stalled_"
KERNELS = {"bank_conflicts": "_Z14bank_conflictsPfi",
           "strided_reads": "_Z13strided_readsPKfPfji",
           "fma_chain": "_Z9fma_chainPfi"}


def ncu_metrics(path):
    by = {}
    rows = [r for r in csv.reader(open(path)) if r]
    header = next((r for r in rows if r[0] == "ID"), None)
    if header is None:
        return by
    for r in rows[rows.index(header) + 1:]:
        d = dict(zip(header, r))
        name = d.get("Kernel Name", "").split("(")[0]
        metric = d.get("Metric Name", "")
        if not metric.startswith(PREFIX) or metric.endswith("_not_issued"):
            continue
        try:
            value = float(d["Metric Value"].replace(",", ""))
        except ValueError:
            continue
        by.setdefault(name, {})[metric[len(PREFIX):]] = value
    return by


def ncu_source(path):
    """kernel -> {offset: samples} (all samples), offsets from the kernel's first address."""
    out, kernel, header = {}, None, None
    for r in csv.reader(open(path)):
        if not r:
            continue
        if r[0] == "Kernel Name":
            kernel, header = r[1].split("(")[0], None
            out[kernel] = {}
            continue
        if r[0] == "Address":
            header = r
            continue
        if header and kernel:
            d = dict(zip(header, r))
            try:
                addr = int(d["Address"], 16)
                n = int(d["Warp Stall Sampling (All Samples)"])
            except (KeyError, ValueError):
                continue
            out[kernel][addr] = n
    for k, rows in out.items():
        if rows:
            base = min(rows)
            out[k] = {a - base: n for a, n in rows.items()}
    return out


def main():
    report = json.load(open(sys.argv[1]))
    metrics = ncu_metrics(sys.argv[2])
    source = ncu_source(sys.argv[3])
    kernels = {k["name"]: k for k in report.get("pc_sampling", {}).get("kernels", [])}
    failed = 0

    def result(ok, name, detail):
        nonlocal failed
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} pcsamp.{name}  ({detail})")

    for short, mangled in KERNELS.items():
        k = kernels.get(mangled)
        m = metrics.get(short, {})
        s = source.get(short, {})
        if k is None or not m or not s:
            result(False, f"{short}.present",
                   f"rtrace kernel {k is not None}, ncu metrics {bool(m)}, ncu source {bool(s)}")
            continue
        total = sum(n for _, n in k["stalls"]) or 1
        mine = [(name, n / total) for name, n in k["stalls"]]
        ncu_total = sum(m.values()) or 1
        theirs = sorted(((v / ncu_total, name) for name, v in m.items()), reverse=True)
        theirs = [(name, share) for share, name in theirs]
        print(f"{short}: rtrace {k['samples']} samples, ncu {int(ncu_total)}")
        for i in range(5):
            a = f"{mine[i][0]} {mine[i][1]:.1%}" if i < len(mine) else ""
            b = f"{theirs[i][0]} {theirs[i][1]:.1%}" if i < len(theirs) else ""
            print(f"    {a:<34} {b}")
        result([n for n, _ in mine[:2]] == [n for n, _ in theirs[:2]], f"{short}.stall-ranking",
               f"rtrace {[n for n, _ in mine[:3]]}, ncu {[n for n, _ in theirs[:3]]}")
        my_pcs = [p["offset"] for p in k["pcs"]]
        their_pcs = sorted(s, key=lambda o: (-s[o], o))
        result(my_pcs[:1] and my_pcs[0] in their_pcs[:3] and their_pcs[0] in my_pcs[:3],
               f"{short}.hottest-pc",
               f"rtrace {[hex(o) for o in my_pcs[:3]]}, ncu {[hex(o) for o in their_pcs[:3]]}")
        line_of = {p["offset"]: (p["file"], p["line"]) for p in k["pcs"] if p["line"] is not None}
        ncu_lines = {}
        for o, n in s.items():
            if o in line_of:
                ncu_lines[line_of[o]] = ncu_lines.get(line_of[o], 0) + n
        my_line = (k["lines"][0]["file"], k["lines"][0]["line"]) if k["lines"] else None
        their_line = max(ncu_lines, key=ncu_lines.get) if ncu_lines else None
        result(my_line is not None and my_line == their_line, f"{short}.hottest-line",
               f"rtrace line {my_line[1] if my_line else None} "
               f"({k['lines'][0]['samples'] if k['lines'] else 0} samples), "
               f"ncu line {their_line[1] if their_line else None}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
