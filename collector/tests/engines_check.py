#!/usr/bin/env python3
"""Runs the code of docs/parquet.md, "The same analyses in DuckDB, Spark and Dask", as written
(but for the dataset's path) on a Parquet dataset of `rtrace export`, and checks that Dask and
Spark give exactly the rows the DuckDB queries give (tools/bench/engines_check.sh).

    engines_check.py DATASET DOCS ENGINE...      ENGINE: dask, spark

The DuckDB `sql` blocks run first (`-- query: NAME`); then each engine's `python` block (the
first after the heading `### Spark (PySpark)` or `### Dask`) is run with `exec`, and its
variables `top`, `per_rank`, `slowest` and `nccl` (a Spark DataFrame, or a pandas one for Dask)
are read as the queries `top_kernels`, `gpu_idle_per_rank`, `slowest_rank_per_step` and
`nccl_time_per_rank`: same columns, same rows in the same order, same values. Prints one line
per check (`check ENGINE QUERY ...: ok` or `... MISMATCH ...`), then `N passed, N failed`; exits
1 when any failed. An engine that cannot be imported is a failure, not a skip.
"""
import re
import sys
import time

import duckdb

QUERIES = {
    "top": "top_kernels",
    "per_rank": "gpu_idle_per_rank",
    "slowest": "slowest_rank_per_step",
    "nccl": "nccl_time_per_rank",
}


def duckdb_results(dataset, text):
    con = duckdb.connect()
    results = {}
    for block in re.findall(r"```sql\n(.*?)```", text, re.S):
        m = re.match(r"-- query: (\w+)\n", block)
        if not m:
            continue
        sql = block[m.end():].replace("train.parquet", dataset)
        if m.group(1) == "setup":
            con.execute(sql)
            continue
        rel = con.sql(sql)
        results[m.group(1)] = (rel.columns, [tuple(r) for r in rel.fetchall()])
    return results


def engine_code(text, heading):
    section = text[text.index(heading):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def rows_of(engine, frame, columns):
    """The rows of `frame` as tuples of plain Python values, in `columns`' order."""
    if engine == "spark":
        frame = frame.toPandas()
    else:
        # Dask's results are pandas already (computed); grouping keys may be in the index.
        frame = frame.reset_index() if any(c not in frame.columns for c in columns) else frame
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        return None, f"columns {missing} missing (has {list(frame.columns)})"

    def plain(v):
        if hasattr(v, "item"):
            v = v.item()
        return v

    return [tuple(plain(v) for v in r) for r in frame[columns].itertuples(index=False)], None


def main():
    dataset, docs = sys.argv[1:3]
    engines = sys.argv[3:]
    text = open(docs, encoding="utf-8").read()
    want = duckdb_results(dataset, text)
    passed = failed = 0

    def check(what, ok, detail=""):
        nonlocal passed, failed
        print(f"check {what}: " + ("ok" if ok else f"MISMATCH {detail}"))
        if ok:
            passed += 1
        else:
            failed += 1

    for engine in engines:
        heading = {"spark": "### Spark (PySpark)", "dask": "### Dask"}[engine]
        code = engine_code(text, heading).replace("train.parquet", dataset)
        scope = {}
        t = time.perf_counter()
        try:
            exec(compile(code, f"{docs}: {heading}", "exec"), scope)
        except Exception as e:  # the documented code failed: a failure of each query
            for name in QUERIES.values():
                check(f"{engine} {name} runs", False, f"{type(e).__name__}: {e}")
            continue
        print(f"{engine}: the documented code ran in {time.perf_counter() - t:.1f} s")
        for var, name in QUERIES.items():
            columns, rows = want[name]
            if var not in scope:
                check(f"{engine} {name} defined", False, f"no variable {var}")
                continue
            got, error = rows_of(engine, scope[var], columns)
            if error:
                check(f"{engine} {name} columns", False, error)
                continue
            check(f"{engine} {name} rows", len(got) == len(rows), f"{len(got)} vs duckdb {len(rows)}")
            for i, (g, w) in enumerate(zip(got, rows)):
                check(f"{engine} {name} row {i}", g == w, f"{engine} {g}, duckdb {w}")
        if engine == "spark" and "spark" in scope:
            scope["spark"].stop()
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
