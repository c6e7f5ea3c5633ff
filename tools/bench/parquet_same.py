#!/usr/bin/env python3
"""Whether two Parquet datasets written by `rtrace export --format parquet` hold the same
tables: the same files (table, host and pid partition, part number), README.md and
_schema.json byte for byte, and for every Parquet file

- the Arrow schema pyarrow reads, its metadata included (rtrace.* key-value metadata), and the
  Parquet schema (types, logical types, repetition, the root's name);
- the row groups: their count and rows, and per column chunk the statistics readers prune by
  (min, max, null count, whether min and max are set);
- the rows: equal in file order, and equal once both are sorted by every column (a full key).

Prints each difference and a count of files compared; exits 1 if any differ.

    python3 tools/bench/parquet_same.py OLD_DATASET NEW_DATASET
    tools/bench/parquet_same.sh OLD_RTRACE NEW_RTRACE TRACE_OR_DIR...   # exports, then this
"""
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq


def files(root):
    out = []
    for dirpath, _, names in os.walk(root):
        for n in names:
            out.append(os.path.relpath(os.path.join(dirpath, n), root))
    return sorted(out)


def chunk_stats(meta):
    rows = []
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        cols = []
        for c in range(rg.num_columns):
            col = rg.column(c)
            s = col.statistics
            stats = None
            if s is not None:
                stats = (s.has_min_max, s.min if s.has_min_max else None,
                         s.max if s.has_min_max else None, s.null_count)
            cols.append((col.path_in_schema, col.physical_type, col.num_values, stats))
        rows.append((rg.num_rows, cols))
    return rows


def parquet_schema(f):
    # Its text without the first line (the Python object's address).
    return str(f.schema).split("\n", 1)[1]


def sorted_rows(table):
    if table.num_rows == 0 or table.num_columns == 0:
        return table
    return table.sort_by([(name, "ascending") for name in table.column_names])


def compare_file(a, b):
    why = []
    fa, fb = pq.ParquetFile(a), pq.ParquetFile(b)
    if not fa.schema_arrow.equals(fb.schema_arrow, check_metadata=True):
        why.append(f"arrow schema:\n{fa.schema_arrow}\n--\n{fb.schema_arrow}")
    if parquet_schema(fa) != parquet_schema(fb):
        why.append(f"parquet schema:\n{fa.schema}\n--\n{fb.schema}")
    if fa.metadata.metadata != fb.metadata.metadata:
        why.append(f"key-value metadata: {fa.metadata.metadata} != {fb.metadata.metadata}")
    sa, sb = chunk_stats(fa.metadata), chunk_stats(fb.metadata)
    if sa != sb:
        for g, (ra, rb) in enumerate(zip(sa, sb)):
            if ra != rb:
                why.append(f"row group {g}: {ra} != {rb}")
                break
        else:
            why.append(f"row groups: {len(sa)} != {len(sb)}")
    ta, tb = fa.read(), fb.read()
    if not ta.equals(tb, check_metadata=True):
        why.append("rows differ in file order")
    if not sorted_rows(ta).equals(sorted_rows(tb)):
        why.append("rows differ sorted by every column")
    return why, ta.num_rows


def main():
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} OLD_DATASET NEW_DATASET")
    old, new = sys.argv[1:]
    fo, fn = files(old), files(new)
    bad = 0
    if fo != fn:
        print(f"differ: file lists: only old {sorted(set(fo) - set(fn))}, "
              f"only new {sorted(set(fn) - set(fo))}")
        bad += 1
    parquet = rows = 0
    for rel in sorted(set(fo) & set(fn)):
        a, b = os.path.join(old, rel), os.path.join(new, rel)
        if not rel.endswith(".parquet"):
            if open(a, "rb").read() != open(b, "rb").read():
                print(f"differ: {rel} (bytes)")
                bad += 1
            continue
        why, n = compare_file(a, b)
        parquet += 1
        rows += n
        if why:
            bad += 1
            print(f"differ: {rel}")
            for w in why:
                print("    " + w.replace("\n", "\n    "))
    print(f"{new}: {parquet} Parquet files ({rows} rows) and {len(fo) - parquet} others "
          f"compared, {bad} differ")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
