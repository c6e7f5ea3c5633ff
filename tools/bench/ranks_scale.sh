#!/usr/bin/env bash
# Cross-rank scale benchmark: `rtrace report` over the traces of many ranks of one job.
#
#     tools/bench/ranks_scale.sh [RANKS] [RECORDS]     # default: 256 ranks of 1000000 records
#
# Writes RANKS synthetic rank traces (collector/examples/synth.rs with SYNTH_RANK=r,
# SYNTH_NVTX=1 (NVTX=0: none) and SYNTH_SLOW=1: 8 threads of launch iterations, NVTX `step` ranges, a
# collective kernel every sixteenth iteration, RANK and LOCAL_RANK in the header), then times
# `rtrace report` over the directory (REPS runs, default 3, the files in the page cache when
# they fit) and reads its peak resident memory from /usr/bin/time: records per second (API +
# GPU records of every rank / wall time), min/median/max wall time over the runs.
# JOBS (default 0: all cores) is passed as --jobs; JOBS=1 reads one trace at a time.
# NVTX=0 writes the traces without NVTX events (no steps: the report's NVTX projection, which
# reads a trace with NVTX events twice more, is then left out).
# Goal (issue 22): peak memory under 1 GiB whatever the number of ranks.
# A rank of 1M records is about 57 MB: when the free space of $WORK's file system (less 8 GB
# left free) cannot hold RANKS of them, fewer ranks are written, and the script says so.
# Traces go to $WORK (default a temporary directory under /tmp, removed at the end).
set -euo pipefail
cd "$(dirname "$0")/../.."
ranks=${1:-256}
records=${2:-1000000}
REPS=${REPS:-3}
JOBS=${JOBS:-0}
NVTX=${NVTX:-1}
. tools/bench/synth_env.sh ranks

# Room: one rank's size measured, then as many ranks as fit beside 8 GB kept free.
SYNTH_RANK=0 SYNTH_NVTX=$NVTX SYNTH_SLOW=1 "$SYNTH" "$WORK/rank-00000.bin" "$records" 8 10000 >/dev/null
one=$(stat -c %s "$WORK/rank-00000.bin")
free=$(( $(df -B1 --output=avail "$WORK" | tail -n 1) - 8 * 1024 * 1024 * 1024 ))
fit=$(( free > 0 ? free / one + 1 : 1 ))
if [ "$fit" -lt "$ranks" ]; then
    echo "note: $ranks ranks of $one bytes do not fit beside 8 GB left free; writing $fit" >&2
    ranks=$fit
fi
start=$(date +%s.%N)
for ((r = 1; r < ranks; r++)); do
    SYNTH_RANK=$r SYNTH_NVTX=$NVTX SYNTH_SLOW=1 "$SYNTH" "$(printf '%s/rank-%05d.bin' "$WORK" "$r")" \
        "$records" 8 $((10000 + r)) >/dev/null
done
written=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {printf "%.1f", e - s}')
total=$((ranks * records))
size=$(du -sh "$WORK" | cut -f1)

echo "ranks scale benchmark: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $REPS runs, --jobs $JOBS, NVTX=$NVTX"
echo "$ranks ranks x $records records = $total records, $size on disk (written in $written s)"
walls=()
peak=0
for ((i = 0; i < REPS; i++)); do
    out=$(/usr/bin/time -f "%e %M" "$RTRACE" report --jobs "$JOBS" --format csv --section ranks "$WORK" 2>&1 >/dev/null | tail -n 1)
    read -r wall kb <<<"$out"
    walls+=("$wall")
    [ "$kb" -gt "$peak" ] && peak=$kb
done
sorted=$(printf '%s\n' "${walls[@]}" | sort -g)
min=$(echo "$sorted" | head -n 1)
max=$(echo "$sorted" | tail -n 1)
median=$(echo "$sorted" | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}')
printf '%-8s %-12s %8s %8s %8s %14s %10s\n' ranks records "min s" "median s" "max s" "records/s" "peak MiB"
printf '%-8s %-12s %8s %8s %8s %14s %10s\n' "$ranks" "$total" "$min" "$median" "$max" \
    "$(awk -v n="$total" -v w="$median" 'BEGIN {printf "%.2fM", (w > 0 ? n / w : 0) / 1e6}')" \
    "$(awk -v k="$peak" 'BEGIN {printf "%.0f", k / 1024}')"
echo "goal: peak $(awk -v k="$peak" 'BEGIN {printf "%.0f", k / 1024}') MiB ($(awk -v k="$peak" 'BEGIN {print (k < 1048576 ? "met" : "NOT met")}') for < 1024 MiB)"
# The report's ranks section, first lines, for a look.
"$RTRACE" report --jobs "$JOBS" --section ranks,steps "$WORK" | head -n 12
