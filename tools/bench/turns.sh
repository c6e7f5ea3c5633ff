#!/usr/bin/env bash
# Commands taking turns: N rounds, each command once a round, in the order given, every run
# timed by /usr/bin/time; then per command the wall time and the CPU time (user + system) as
# min / median / max. Unpinned: for work that uses both cores (docs/benchmarks.md, session 16).
#
#     tools/bench/turns.sh N 'CMD A' 'CMD B' ...
#     tools/bench/turns.sh 8 'old/rtrace report t.bin' 'target/release/rtrace report t.bin'
#
# Each command runs through `sh -c`, its standard output to /dev/null; a command that fails
# is said and the script exits 1.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 N 'CMD' ['CMD'...]" >&2; exit 2; }
rounds=$1
shift
work=$(mktemp -d /tmp/rtrace-turns.XXXXXX)
trap 'rm -rf "$work"' EXIT
for ((r = 0; r < rounds; r++)); do
    for ((c = 1; c <= $#; c++)); do
        if ! /usr/bin/time -f "%e %U %S" -o "$work/t" sh -c "${!c}" >/dev/null 2>"$work/err"; then
            echo "failed: ${!c}" >&2
            tail -n 3 "$work/err" >&2
            exit 1
        fi
        cat "$work/t" >>"$work/$c.txt"
    done
done
echo "$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg), $rounds rounds"
for ((c = 1; c <= $#; c++)); do
    python3 - "$work/$c.txt" "${!c}" <<'PY'
import statistics, sys
runs = [tuple(map(float, line.split())) for line in open(sys.argv[1]) if line.strip()]
wall = [w for w, _, _ in runs]
cpu = [u + s for _, u, s in runs]
fmt = lambda v: f"{min(v):.3f} / {statistics.median(v):.3f} / {max(v):.3f}"
print(f"{sys.argv[2]}\n    wall s {fmt(wall)}    cpu s {fmt(cpu)}")
PY
done
