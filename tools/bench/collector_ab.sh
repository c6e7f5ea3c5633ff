#!/usr/bin/env bash
# Two builds of `rtrace` side by side on the same traces: report and Perfetto export, each pinned
# to one core, the builds taking turns, REPS runs each (default 5). For every trace and job it
# prints each build's wall time and peak resident memory as min / median / max, and checks that
# both builds wrote the same bytes (`cmp`). Used to show a restructure changed neither output nor
# speed (docs/benchmarks.md).
#
#     tools/bench/collector_ab.sh OLD_RTRACE NEW_RTRACE TRACE...
#
# Traces come from collector/examples/synth.rs (SYNTH_NVTX=1, SYNTH_SYNC=1 for the NVTX- and
# sync-heavy kinds). CPU picks the core (default 1). Outputs go to a temporary directory.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 OLD_RTRACE NEW_RTRACE TRACE..." >&2; exit 2; }
old=$1 new=$2
shift 2
REPS=${REPS:-5}
CPU=${CPU:-1}
work=$(mktemp -d /tmp/rtrace-ab.XXXXXX)
trap 'rm -rf "$work"' EXIT

# run BUILD JOB TRACE OUT: one pinned run; appends "wall_s rss_kib" to $work/BUILD-JOB.txt.
run() {
    local build=$1 job=$2 trace=$3 out=$4 bin
    if [ "$build" = old ]; then bin=$old; else bin=$new; fi
    local args=(report "$trace")
    # The export's file from the run before goes first (rtrace export replaces no file).
    [ "$job" = report ] || { args=(export --format perfetto --output "$out" "$trace"); rm -f "$out"; }
    if [ "$job" = report ]; then
        /usr/bin/time -f "%e %M" -o "$work/time" taskset -c "$CPU" "$bin" "${args[@]}" >"$out" 2>"$work/stderr"
    else
        /usr/bin/time -f "%e %M" -o "$work/time" taskset -c "$CPU" "$bin" "${args[@]}" >/dev/null 2>"$work/stderr"
    fi
    tail -n 1 "$work/time" >>"$work/$build-$job.txt"
}

# spread FILE COLUMN SCALE: "min / median / max" of one column.
spread() {
    awk -v c="$2" -v s="$3" '{print $c / s}' "$1" | sort -g |
        awk '{a[NR]=$1} END {printf "%.2f / %.2f / %.2f", a[1], (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2, a[NR]}'
}

echo "collector A/B: $(nproc) CPUs, pinned to CPU $CPU, $REPS runs per build, builds alternating"
echo "old: $old"
echo "new: $new"
for trace in "$@"; do
    for job in report export; do
        rm -f "$work"/old-*.txt "$work"/new-*.txt
        for ((i = 0; i < REPS; i++)); do
            run old "$job" "$trace" "$work/old.out"
            run new "$job" "$trace" "$work/new.out"
        done
        if cmp -s "$work/old.out" "$work/new.out"; then same=identical; else same=DIFFERENT; fi
        printf '%s %s: output %s\n' "$(basename "$trace")" "$job" "$same"
        printf '  old  wall s %-24s peak MiB %s\n' "$(spread "$work/old-$job.txt" 1 1)" "$(spread "$work/old-$job.txt" 2 1024)"
        printf '  new  wall s %-24s peak MiB %s\n' "$(spread "$work/new-$job.txt" 1 1)" "$(spread "$work/new-$job.txt" 2 1024)"
    done
done
