#!/usr/bin/env bash
# What each recording mode costs a PyTorch program, side by side in one call (issue 21), on the
# GPU machine: tools/bench/mode_cost.py (a bf16 MLP training step, a 256 MiB scale, a bf16
# GEMM, each timed inside the program with CUDA events) untraced, under `rtrace record`
# (the default: GPU activity and NVTX), `rtrace record --gpu-metrics` (10 kHz, the sampler
# process beside it) and `rtrace record --source-counters`, the modes alternating, ROUNDS
# processes each. Prints each process's figures, then per mode and figure min / median / max
# over the processes and the median's ratio to untraced's.
#
#   ROUNDS=4 bash tools/bench/mode_cost.sh        (from the repository root; target/release built)
set -u
cd "$(dirname "$0")/../.." || exit 2
R=$PWD/target/release/rtrace
ROUNDS=${ROUNDS:-4}
W=$(mktemp -d /tmp/rtrace-modecost.XXXXXX)
. tests/gpu/cupti_env.sh
P="timeout 120 python3 tools/bench/mode_cost.py"
run_mode() { # mode round
    case $1 in
        untraced) $P ;;
        default) timeout 150 $R record -o "$W/d-$2-%p.bin" -- $P ;;
        gpu-metrics) timeout 150 $R record --gpu-metrics -o "$W/g-$2-%p.bin" -- $P ;;
        source-counters) timeout 150 $R record --source-counters -o "$W/s-$2-%p.bin" -- $P ;;
    esac
}
for r in $(seq "$ROUNDS"); do
    for m in untraced default gpu-metrics source-counters; do
        out=$(run_mode "$m" "$r" 2> "$W/err-$m-$r")
        echo "$m $r $(echo "$out" | grep _ms | tr '\n' ' ')"
        echo "$out" | grep _ms | sed "s/^/$m /" >> "$W/all.txt"
    done
done
python3 - "$W/all.txt" <<'PY'
import sys, statistics, collections
v = collections.defaultdict(list)
for l in open(sys.argv[1]):
    m, k, x = l.split()
    v[(m, k)].append(float(x))
base = {k: statistics.median(xs) for (m, k), xs in v.items() if m == "untraced"}
print("%-16s %-9s %5s %9s %9s %9s %7s" % ("mode", "figure", "procs", "min", "median", "max", "ratio"))
for (m, k), xs in v.items():
    med = statistics.median(xs)
    print("%-16s %-9s %5d %9.4f %9.4f %9.4f %7.3f" % (m, k, len(xs), min(xs), med, max(xs), med / base[k]))
PY
for m in default gpu-metrics source-counters; do tail -n 3 "$W/err-$m-1" | sed "s/^/  $m: /"; done
