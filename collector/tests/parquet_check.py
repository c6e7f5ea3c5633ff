#!/usr/bin/env python3
"""Runs the DuckDB queries of docs/parquet.md on a Parquet dataset of `rtrace export` and
checks their results against `rtrace report --format json` (collector/tests/parquet.rs).

    parquet_check.py DATASET DOCS REPORT_JSON [PID=NCCL_REPORT_JSON ...]

DOCS' `sql` blocks whose first line is `-- query: NAME` are run in order, with the path
`train.parquet` replaced by DATASET (`setup` creates the views). Prints each result row as
`row NAME col=value ...`, then one line per comparison with the report: `check WHAT: ok` or
`check WHAT: MISMATCH ...`. REPORT_JSON is the report over every trace; each
PID=NCCL_REPORT_JSON is `rtrace report --format json --pid PID --kernel '(?i)nccl'`.
"""
import json
import re
import sys

import duckdb


def queries(docs):
    text = open(docs, encoding="utf-8").read()
    for block in re.findall(r"```sql\n(.*?)```", text, re.S):
        m = re.match(r"-- query: (\w+)\n", block)
        if m:
            yield m.group(1), block[m.end():]


def main():
    dataset, docs, report = sys.argv[1:4]
    nccl_reports = dict(a.split("=", 1) for a in sys.argv[4:])
    con = duckdb.connect()
    results = {}
    for name, sql in queries(docs):
        sql = sql.replace("train.parquet", dataset)
        if name == "setup":
            con.execute(sql)
            continue
        rel = con.sql(sql)
        cols = rel.columns
        rows = [dict(zip(cols, r)) for r in rel.fetchall()]
        results[name] = rows
        for r in rows:
            print("row", name, " ".join(f"{k}={v}" for k, v in r.items()))
    rep = json.load(open(report))

    def check(what, ok, detail=""):
        print(f"check {what}: " + ("ok" if ok else f"MISMATCH {detail}"))

    # Top kernels: each row's launches and total as the report's kernel row of that name.
    by_name = {k["name"]: (k["count"], k["total_ns"]) for k in rep["kernels"]}
    top = results["top_kernels"]
    check("top_kernels rows", len(top) == min(10, len(by_name)), f"{len(top)} vs {len(by_name)}")
    for r in top:
        want = by_name.get(r["name"])
        got = (r["launches"], r["total_ns"])
        check(f"top_kernels {r['name']}", want == got, f"query {got}, report {want}")
    # GPU idle: the report's utilisation rows of whole devices.
    util = {(u["pid"], u["device"]): u for u in rep["utilisation"] if u["stream"] is None}
    idle = results["gpu_idle_per_rank"]
    check("gpu_idle_per_rank keys", sorted(util) == sorted((r["pid"], r["device"]) for r in idle),
          f"{sorted(util)}")
    for r in idle:
        u = util.get((r["pid"], r["device"]), {})
        for col in ("records", "start_ns", "end_ns", "span_ns", "busy_ns", "idle_ns", "gaps"):
            check(f"gpu_idle_per_rank pid {r['pid']} device {r['device']} {col}",
                  u.get(col) == r[col], f"query {r[col]}, report {u.get(col)}")
    # Slowest rank per step: the report's NVTX row of the name.
    steps = results["slowest_rank_per_step"]
    for (domain, name) in sorted({(r["domain"], r["name"]) for r in steps}):
        mine = [r for r in steps if (r["domain"], r["name"]) == (domain, name)]
        row = next((n for n in rep["nvtx"]["ranges"]
                    if (n["domain"], n["name"]) == (domain, name)), {})
        check(f"slowest_rank_per_step {name} count", row.get("count") == sum(r["ranks"] for r in mine),
              f"report {row.get('count')}")
        check(f"slowest_rank_per_step {name} max_ns",
              row.get("max_ns") == max(r["slowest_ns"] for r in mine), f"report {row.get('max_ns')}")
        check(f"slowest_rank_per_step {name} min_ns",
              row.get("min_ns") == min(r["fastest_ns"] for r in mine), f"report {row.get('min_ns')}")
    # Every NVTX range name's count, time and projected GPU work, as the report's NVTX rows.
    cols = ["count", "total_ns", "gpu_records", "gpu_ns", "own_gpu_records", "own_gpu_ns",
            "process_gpu_records", "process_gpu_ns"]
    sums = con.sql(
        "SELECT domain, name, count(*), sum(duration_ns), sum(gpu_records), sum(gpu_ns), "
        "sum(own_gpu_records), sum(own_gpu_ns), sum(process_gpu_records), sum(process_gpu_ns) "
        "FROM nvtx_ranges GROUP BY domain, name ORDER BY domain, name").fetchall()
    nvtx_rows = {(n["domain"], n["name"]): n for n in rep["nvtx"]["ranges"]}
    check("nvtx_ranges names", sorted(nvtx_rows) == [tuple(r[:2]) for r in sums], f"{sorted(nvtx_rows)}")
    for r in sums:
        n = nvtx_rows.get(tuple(r[:2]), {})
        got = dict(zip(cols, (int(v) for v in r[2:])))
        want = {c: n.get(c) for c in cols}
        check(f"nvtx_ranges {r[1]}", got == want, f"query {got}, report {want}")
    # NCCL time per rank: the report of that rank's NCCL kernels.
    # A rank with no NCCL kernel has no row.
    nccl = {r["pid"]: r for r in results["nccl_time_per_rank"]}
    wanted = {}
    for pid, path in nccl_reports.items():
        kernels = json.load(open(path))["kernels"]
        wanted[int(pid)] = (sum(k["count"] for k in kernels), sum(k["total_ns"] for k in kernels))
    check("nccl_time_per_rank pids", sorted(nccl) == sorted(p for p, w in wanted.items() if w[0]),
          f"{sorted(nccl)}")
    for pid, want in sorted(wanted.items()):
        r = nccl.get(pid, {})
        got = (r.get("kernels", 0), r.get("nccl_ns", 0))
        check(f"nccl_time_per_rank pid {pid}", want == got, f"query {got}, report {want}")


if __name__ == "__main__":
    main()
