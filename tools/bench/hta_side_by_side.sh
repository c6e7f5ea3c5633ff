#!/usr/bin/env bash
# Holistic Trace Analysis, `rtrace report` and DuckDB side by side, on the same synthetic rank
# traces: the time and memory each takes for the same two analyses (GPU time per kernel name
# over every rank; each rank's GPU idle time), and whether their numbers agree.
#
#     tools/bench/hta_side_by_side.sh [RANKS...]     # default: 1 8 (ranks of RECORDS records)
#
# For each number of ranks: writes the rank traces (collector/examples/synth.rs with
# SYNTH_RANK=r SYNTH_SLOW=1, 8 threads, pid 10000 + r: launches, copies, every sixteenth kernel
# an NCCL collective), exports each to Chrome JSON (`rtrace export --format chrome`, one file
# per rank, as HTA reads them) and the directory to one Parquet dataset (`rtrace export --format
# parquet`), then times REPS runs (default 3) of each of:
#   hta     tools/bench/hta_side_by_side.py hta JSON_DIR: TraceAnalysis (load every rank), then
#           get_gpu_kernel_breakdown and get_temporal_breakdown (HTA_DISABLE_NS_ROUNDING=1: the
#           JSON has whole ns; HTA's rounding to µs would change every duration);
#   rtrace  rtrace report --jobs 0 --format json --section kernels,utilisation,ranks BIN_DIR;
#   duckdb  tools/bench/hta_side_by_side.py duckdb DATASET: docs/parquet.md's top_kernels
#           (without its LIMIT) and gpu_idle_per_rank queries, in one Python process;
# with /usr/bin/time -f "%e %M" (wall s, peak resident KiB of the largest process). HTA parses
# ranks in a pool of processes: its peak is also taken as the sum of its processes' resident
# memory, sampled every 0.5 s; past HTA_LIMIT_GIB (default 16) GiB summed, it is stopped and the
# script says so. Then tools/bench/hta_side_by_side.py compare checks that the three found the
# same total per kernel name and the same idle and busy time per rank (in ns).
# PYTHON (default /tmp/hta-venv/bin/python3) must import hta (PyPI HolisticTraceAnalysis) and
# duckdb. RECORDS (default 1000000) records per rank. Traces go to $WORK (default a temporary
# directory under /tmp, removed at the end); a 1M-record rank is 57 MB, 340 MB as JSON.
set -euo pipefail
cd "$(dirname "$0")/../.."
ranks_list=("$@")
[ ${#ranks_list[@]} -gt 0 ] || ranks_list=(1 8)
RECORDS=${RECORDS:-1000000}
REPS=${REPS:-3}
PYTHON=${PYTHON:-/tmp/hta-venv/bin/python3}
HTA_LIMIT_GIB=${HTA_LIMIT_GIB:-16}
"$PYTHON" -c "import hta, duckdb" || {
    echo "hta_side_by_side.sh: $PYTHON cannot import hta and duckdb; make one with:" >&2
    echo "  python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install HolisticTraceAnalysis duckdb" >&2
    exit 2
}
HELPER=$PWD/tools/bench/hta_side_by_side.py
DOCS=$PWD/docs/parquet.md
. tools/bench/synth_env.sh hta

# min median max of the numbers on stdin.
stats() {
    sort -g | awk '{v[NR] = $1} END {printf "%s %s %s\n", v[1], (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), v[NR]}'
}

# Runs "$@" under /usr/bin/time in a process group of its own, sampling the group's summed
# resident memory; prints "WALL MAXRSS_KIB GROUP_PEAK_KIB" (WALL "stopped" when it went past
# the limit).
timed() {
    local log=$WORK/time.log peak=0 kib
    setsid /usr/bin/time -o "$log" -f "%e %M" "$@" >/dev/null 2>"$WORK/stderr.log" &
    local pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        kib=$(ps -o rss= -g "$pid" 2>/dev/null | awk '{s += $1} END {print s + 0}')
        [ "$kib" -gt "$peak" ] && peak=$kib
        if [ "$kib" -gt $((HTA_LIMIT_GIB * 1024 * 1024)) ]; then
            kill -- -"$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
            echo "stopped 0 $peak"
            return
        fi
        sleep 0.5
    done
    if ! wait "$pid"; then
        echo "hta_side_by_side.sh: failed: $*" >&2
        tail -n 20 "$WORK/stderr.log" >&2
        exit 1
    fi
    read -r wall kib <"$log"
    echo "$wall $kib $peak"
}

echo "HTA side by side: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/^Mem:/ {print $2}') GiB, $REPS runs each, $RECORDS records per rank"
echo "HTA $("$PYTHON" -c 'import importlib.metadata as m; print(m.version("HolisticTraceAnalysis"))'), duckdb $("$PYTHON" -c 'import duckdb; print(duckdb.__version__)'), pandas $("$PYTHON" -c 'import pandas; print(pandas.__version__)'); load: $(uptime | sed 's/.*load average/load average/')"
printf '%-6s %-7s %-28s %10s %12s\n' ranks engine "wall s min / median / max" "peak MiB" "group MiB"
status=0
for ranks in "${ranks_list[@]}"; do
    dir=$WORK/$ranks
    mkdir -p "$dir/bin" "$dir/json"
    for ((r = 0; r < ranks; r++)); do
        name=$(printf 'rank-%05d' "$r")
        SYNTH_RANK=$r SYNTH_SLOW=1 "$SYNTH" "$dir/bin/$name.bin" "$RECORDS" 8 $((10000 + r)) >/dev/null
        "$RTRACE" export --format chrome -o "$dir/json/$name.json" "$dir/bin/$name.bin" 2>/dev/null
    done
    "$RTRACE" export --format parquet -o "$dir/ds" "$dir/bin" 2>/dev/null
    echo "$ranks ranks: traces $(du -sh "$dir/bin" | cut -f1), Chrome JSON $(du -sh "$dir/json" | cut -f1), Parquet $(du -sh "$dir/ds" | cut -f1)"
    for engine in rtrace duckdb hta; do
        walls=() peak=0 group=0 stopped=0
        for ((i = 0; i < REPS; i++)); do
            case $engine in
                rtrace) out=$(timed sh -c "'$RTRACE' report --jobs 0 --format json --section kernels,utilisation,ranks '$dir/bin' >'$dir/report.json'") ;;
                duckdb) out=$(timed "$PYTHON" "$HELPER" duckdb "$dir/ds" "$DOCS" "$dir/duckdb.json") ;;
                hta) out=$(HTA_DISABLE_NS_ROUNDING=1 timed "$PYTHON" "$HELPER" hta "$dir/json" "$dir/hta.json") ;;
            esac
            read -r wall kib group_kib <<<"$out"
            [ "$group_kib" -gt "$group" ] && group=$group_kib
            if [ "$wall" = stopped ]; then
                stopped=1
                break
            fi
            walls+=("$wall")
            [ "$kib" -gt "$peak" ] && peak=$kib
        done
        if [ "$stopped" = 1 ]; then
            printf '%-6s %-7s %-28s %10s %12s\n' "$ranks" "$engine" "stopped past $HTA_LIMIT_GIB GiB" - "$((group / 1024))"
            continue
        fi
        read -r min median max < <(printf '%s\n' "${walls[@]}" | stats)
        printf '%-6s %-7s %-28s %10s %12s\n' "$ranks" "$engine" "$min / $median / $max" "$((peak / 1024))" "$((group / 1024))"
    done
    pids=()
    for ((r = 0; r < ranks; r++)); do pids+=("$((10000 + r))=$r"); done
    "$PYTHON" "$HELPER" rtrace "$dir/report.json" "$dir/rtrace.json" "${pids[@]}"
    if [ -f "$dir/hta.json" ]; then
        echo "HTA's own timing (last run): $("$PYTHON" -c "import json,sys; s=json.load(open(sys.argv[1]))['seconds']; print(f\"load {s['load']:.1f} s, analyses {s['analyses']:.1f} s\")" "$dir/hta.json")"
        "$PYTHON" "$HELPER" compare "$dir/rtrace.json" "$dir/duckdb.json" "$dir/hta.json" || status=1
    else
        "$PYTHON" "$HELPER" compare "$dir/rtrace.json" "$dir/duckdb.json" || status=1
    fi
    rm -rf "$dir"
done
exit $status
