#!/usr/bin/env bash
# Collector scale benchmark: `rtrace report` and `rtrace export --format perfetto` on synthetic
# traces (collector/examples/synth.rs: 8 threads of launch iterations, API + kernel + copy
# records, chunked as librtrace.so writes them) of each size given, on this machine.
#
#     tools/bench/collector_scale.sh [RECORDS...]     # default: 1000000 10000000
#
# For each size: the trace's size on disk, then for report and export the best wall time of
# REPS runs (default 3, the file in the page cache after the first), records per second
# (API + GPU records / wall time) and the peak resident memory (/usr/bin/time's maximum RSS).
# Goals (issue 4): report >= 5 million records/s; peak memory < 512 MiB whatever the size.
# Traces go to $WORK (default a temporary directory, removed at the end).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPS=${REPS:-3}
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000000 10000000)
. tools/bench/synth_env.sh scale

# best_of CMD...: runs CMD REPS times; prints "<best wall s> <peak RSS KiB of that run>".
best_of() {
    local best="" rss="" out
    for ((i = 0; i < REPS; i++)); do
        out=$(/usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -n 1)
        read -r wall kb <<<"$out"
        if [ -z "$best" ] || awk -v a="$wall" -v b="$best" 'BEGIN {exit !(a < b)}'; then
            best=$wall
            rss=$kb
        fi
    done
    echo "$best $rss"
}

echo "collector scale benchmark: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), best of $REPS runs"
printf '%-10s %-9s %-8s %8s %12s %10s\n' records file what "wall s" "records/s" "peak MiB"
for n in "${sizes[@]}"; do
    trace=$WORK/synth-$n.bin
    "$SYNTH" "$trace" "$n" >/dev/null
    size=$(du -h "$trace" | cut -f1)
    read -r wall kb < <(best_of "$RTRACE" report "$trace")
    printf '%-10s %-9s %-8s %8s %12s %10s\n' "$n" "$size" report "$wall" \
        "$(awk -v n="$n" -v w="$wall" 'BEGIN {printf "%.2fM", (w > 0 ? n / w : 0) / 1e6}')" \
        "$(awk -v k="$kb" 'BEGIN {printf "%.0f", k / 1024}')"
    report_rate=$(awk -v n="$n" -v w="$wall" 'BEGIN {print (w > 0 ? n / w : 0)}')
    report_mib=$(awk -v k="$kb" 'BEGIN {print k / 1024}')
    read -r wall kb < <(best_of "$RTRACE" export --format perfetto --force-overwrite --output "$WORK/out.pftrace" "$trace")
    printf '%-10s %-9s %-8s %8s %12s %10s\n' "$n" "$size" export "$wall" \
        "$(awk -v n="$n" -v w="$wall" 'BEGIN {printf "%.2fM", (w > 0 ? n / w : 0) / 1e6}')" \
        "$(awk -v k="$kb" 'BEGIN {printf "%.0f", k / 1024}')"
    export_mib=$(awk -v k="$kb" 'BEGIN {print k / 1024}')
    rm -f "$trace" "$WORK/out.pftrace"
done
echo "goals, largest size: report $(awk -v r="$report_rate" 'BEGIN {printf "%.2fM", r / 1e6}') records/s" \
    "($(awk -v r="$report_rate" 'BEGIN {print (r >= 5e6 ? "met" : "NOT met")}') for >= 5M)," \
    "peak $(printf '%.0f' "$report_mib") MiB ($(awk -v m="$report_mib" 'BEGIN {print (m < 512 ? "met" : "NOT met")}') for < 512 MiB);" \
    "export peak $(printf '%.0f' "$export_mib") MiB ($(awk -v m="$export_mib" 'BEGIN {print (m < 512 ? "met" : "NOT met")}') for < 512 MiB)"
