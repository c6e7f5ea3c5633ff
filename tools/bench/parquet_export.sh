#!/usr/bin/env bash
# Parquet export benchmark: `rtrace export --format parquet` on synthetic traces
# (collector/examples/synth.rs, as tools/bench/collector_scale.sh makes them; SYNTH_NVTX=1 in
# the environment adds NVTX ranges) of each size given, on this machine.
#
#     tools/bench/parquet_export.sh [RECORDS...]     # default: 1000000 10000000
#
# For each size: the trace's size, the best wall time of REPS runs (default 3, the file in the
# page cache after the first), records per second (API + GPU records / wall time), the peak
# resident memory (/usr/bin/time's maximum RSS) and the dataset's size; then, when a Python
# with duckdb is found (.venv/bin/python3, as tools/setup-cuda.sh test installs it), the time
# of each DuckDB query of docs/parquet.md on that dataset. Goal (issue 22): >= 5 million
# records/s, memory bounded whatever the size. Traces go to $WORK (default a temporary
# directory, removed at the end).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPS=${REPS:-3}
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000000 10000000)
PYTHON=${RTRACE_PYTHON:-$PWD/.venv/bin/python3}
. tools/bench/synth_env.sh parquet

echo "parquet export benchmark: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), best of $REPS runs${SYNTH_NVTX:+, SYNTH_NVTX=$SYNTH_NVTX}"
printf '%-10s %-9s %8s %12s %10s %9s\n' records trace "wall s" "records/s" "peak MiB" dataset
for n in "${sizes[@]}"; do
    trace=$WORK/synth-$n.bin
    "$SYNTH" "$trace" "$n" >/dev/null
    best="" rss=""
    for ((i = 0; i < REPS; i++)); do
        rm -rf "$WORK/ds"
        read -r wall kb < <(/usr/bin/time -f "%e %M" "$RTRACE" export --format parquet -o "$WORK/ds" "$trace" 2>&1 >/dev/null | tail -n 1)
        if [ -z "$best" ] || awk -v a="$wall" -v b="$best" 'BEGIN {exit !(a < b)}'; then
            best=$wall
            rss=$kb
        fi
    done
    printf '%-10s %-9s %8s %12s %10s %9s\n' "$n" "$(du -h "$trace" | cut -f1)" "$best" \
        "$(awk -v n="$n" -v w="$best" 'BEGIN {printf "%.2fM", (w > 0 ? n / w : 0) / 1e6}')" \
        "$(awk -v k="$rss" 'BEGIN {printf "%.0f", k / 1024}')" "$(du -sh "$WORK/ds" | cut -f1)"
    if "$PYTHON" -c "import duckdb" 2>/dev/null; then
        "$PYTHON" - "$WORK/ds" docs/parquet.md <<'PY'
import re, sys, time
import duckdb
dataset, docs = sys.argv[1:]
con = duckdb.connect()
for block in re.findall(r"```sql\n(.*?)```", open(docs).read(), re.S):
    m = re.match(r"-- query: (\w+)\n", block)
    if not m:
        continue
    sql = block[m.end():].replace("train.parquet", dataset)
    t = time.perf_counter()
    rows = con.execute(sql).fetchall() if m.group(1) != "setup" else con.execute(sql)
    if m.group(1) != "setup":
        print(f"  duckdb {m.group(1)}: {time.perf_counter() - t:.3f} s, {len(rows)} rows")
PY
    fi
    rm -f "$trace"
done
