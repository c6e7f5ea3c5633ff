#!/usr/bin/env python3
"""The analyses of tools/bench/hta_side_by_side.sh, one engine per run, each writing what it
found in one shape, and the comparison of those results.

    hta_side_by_side.py hta JSON_DIR OUT.json        Holistic Trace Analysis on Chrome JSON
    hta_side_by_side.py duckdb DATASET DOCS OUT.json docs/parquet.md's DuckDB queries
    hta_side_by_side.py rtrace REPORT.json OUT.json [PID=RANK...]   `rtrace report` JSON read
    hta_side_by_side.py compare A.json B.json ...    same kernels and idle times?

Each OUT.json holds "kernels" {name: total_ns}: GPU time per kernel name over every rank
(kernels only: copies and memsets left out); and GPU idle and busy time between the first GPU
record's start and the last one's end (kernels, copies and memsets), per rank and device
("device_idle", "device_busy" {"RANK/DEVICE": ns}: the report's "GPU utilisation" rows,
docs/parquet.md's gpu_idle_per_rank) or per rank over all its devices together ("rank_idle",
"rank_busy" {RANK: ns}: HTA's temporal breakdown, the same query grouped by rank alone). HTA
gives times in µs as floats (rtrace's Chrome JSON has whole ns: three decimals); they are
rounded to whole ns here. `compare` compares the first file's values with each other file's,
key by key, for what both hold; it prints one line per difference and `N passed, N failed`.
"""
import json
import sys
import time


def hta(json_dir, out):
    from hta.trace_analysis import TraceAnalysis

    t0 = time.perf_counter()
    analysis = TraceAnalysis(trace_dir=json_dir)
    loaded = time.perf_counter()
    # Every kernel by name (no "others" lumped): duration_ratio 1, a large num_kernels.
    _, per_kernel = analysis.get_gpu_kernel_breakdown(
        visualize=False, duration_ratio=1.0, num_kernels=1 << 20, include_memory_kernels=True
    )
    temporal = analysis.get_temporal_breakdown(visualize=False)
    done = time.perf_counter()
    kernels = {}
    for row in per_kernel.to_dict("records"):
        if row["kernel_type"] != "MEMORY":
            kernels[row["name"]] = kernels.get(row["name"], 0) + row["sum (us)"]
    ranks = temporal.to_dict("records")
    us = lambda v: round(v * 1000)  # noqa: E731
    result = {
        "kernels": {k: us(v) for k, v in kernels.items()},
        "rank_idle": {str(int(r["rank"])): us(r["idle_time(us)"]) for r in ranks},
        "rank_busy": {
            str(int(r["rank"])): us(r["kernel_time(us)"] - r["idle_time(us)"]) for r in ranks
        },
        "compute": {str(int(r["rank"])): us(r["compute_time(us)"]) for r in ranks},
        "seconds": {"load": loaded - t0, "analyses": done - loaded},
    }
    json.dump(result, open(out, "w"), indent=1, sort_keys=True)


def duckdb_queries(dataset, docs, out):
    import re

    import duckdb

    con = duckdb.connect()
    results = {}
    text = open(docs, encoding="utf-8").read()
    for block in re.findall(r"```sql\n(.*?)```", text, re.S):
        m = re.match(r"-- query: (\w+)\n", block)
        if not m or m.group(1) not in ("setup", "top_kernels", "gpu_idle_per_rank"):
            continue
        sql = block[m.end():].replace("train.parquet", dataset)
        if m.group(1) == "setup":
            con.execute(sql)
            continue
        # Every kernel, not the first ten.
        sql = sql.replace("LIMIT 10", "")
        rel = con.sql(sql)
        results[m.group(1)] = [dict(zip(rel.columns, r)) for r in rel.fetchall()]
    ranks = dict(
        con.sql(
            "SELECT pid, rank FROM read_parquet("
            f"'{dataset}/processes/*/*/*.parquet', hive_partitioning = true)"
        ).fetchall()
    )
    # The same query over all of a rank's devices together: HTA's idle time of a rank.
    idle = [b for b in re.findall(r"```sql\n(.*?)```", text, re.S) if "gpu_idle_per_rank" in b]
    sql = idle[0].split("\n", 1)[1].replace("train.parquet", dataset)
    sql = sql.replace("host, pid, device", "host, pid")
    rel = con.sql(sql)
    whole = [dict(zip(rel.columns, r)) for r in rel.fetchall()]
    result = {
        "kernels": {r["name"]: int(r["total_ns"]) for r in results["top_kernels"]},
        "device_idle": {
            f"{ranks[r['pid']]}/{r['device']}": int(r["idle_ns"]) for r in results["gpu_idle_per_rank"]
        },
        "device_busy": {
            f"{ranks[r['pid']]}/{r['device']}": int(r["busy_ns"]) for r in results["gpu_idle_per_rank"]
        },
        "rank_idle": {ranks[r["pid"]]: int(r["idle_ns"]) for r in whole},
        "rank_busy": {ranks[r["pid"]]: int(r["busy_ns"]) for r in whole},
    }
    json.dump(result, open(out, "w"), indent=1, sort_keys=True)


def rtrace(report, out, *pid_ranks):
    rep = json.load(open(report))
    # The report's ranks section names each process's rank; a report of one process has none:
    # then PID=RANK arguments do.
    ranks = {int(p): r for p, r in (a.split("=") for a in pid_ranks)}
    ranks.update({p["pid"]: p["rank"] for p in rep.get("ranks") or []})
    devices = [u for u in rep["utilisation"] if u["stream"] is None]
    result = {
        "kernels": {k["name"]: k["total_ns"] for k in rep["kernels"]},
        "device_idle": {f"{ranks[u['pid']]}/{u['device']}": u["idle_ns"] for u in devices},
        "device_busy": {f"{ranks[u['pid']]}/{u['device']}": u["busy_ns"] for u in devices},
    }
    json.dump(result, open(out, "w"), indent=1, sort_keys=True)


def compare(paths):
    runs = [(p, json.load(open(p))) for p in paths]
    passed = failed = 0
    base_path, base = runs[0]
    for path, other in runs[1:]:
        for what in sorted(set(base) & set(other) - {"seconds", "compute"}):
            keys = sorted(set(base[what]) | set(other[what]))
            for k in keys:
                a, b = base[what].get(k), other[what].get(k)
                if a == b:
                    passed += 1
                else:
                    failed += 1
                    print(f"differ: {what} {k}: {base_path} {a}, {path} {b}")
    print(f"{passed} passed, {failed} failed")
    return failed == 0


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "hta":
        hta(*args)
    elif cmd == "duckdb":
        duckdb_queries(*args)
    elif cmd == "rtrace":
        rtrace(*args)
    elif cmd == "compare":
        sys.exit(0 if compare(args) else 1)
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
