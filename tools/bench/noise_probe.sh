#!/usr/bin/env bash
# Where the spread between processes of one benchmark mode comes from (docs/benchmarks.md,
# "Noise"): the untraced PyTorch x.add_(1) loop of tools/bench/overhead_torch.py, every process
# pinned to CPU $PIN, PROCS processes per variant, the variants alternating:
#   plain    as gpu_overhead.sh runs it
#   seed0    PYTHONHASHSEED=0 (the interpreter's string hashes fixed)
#   noaslr   setarch -R (no address-space randomization)
#   both     seed0 and noaslr
#   seedK    with noaslr, PYTHONHASHSEED=K for K in $SEEDS (does the seed pick the cluster?)
# Prints each process's per-round values, then per variant min / median / max of the
# per-process medians.
#     PIN=2 PROCS=6 SEEDS="1 2 3" bash tools/bench/noise_probe.sh
set -u
cd "$(dirname "$0")/../.." || exit 2
PIN=${PIN:-2}
PROCS=${PROCS:-6}
OPS=${OPS:-20000}
SEEDS=${SEEDS:-}
PY=$(command -v python3)
work=$(mktemp -d)
variants="plain seed0 noaslr both"
for k in $SEEDS; do variants="$variants seed$k-noaslr"; done
for ((i = 0; i < PROCS; i++)); do
    for v in $variants; do
        pre=()
        case $v in
        plain) ;;
        seed0) pre=(env PYTHONHASHSEED=0) ;;
        noaslr) pre=(setarch "$(uname -m)" -R) ;;
        both) pre=(setarch "$(uname -m)" -R env PYTHONHASHSEED=0) ;;
        seed*-noaslr) k=${v#seed}; pre=(setarch "$(uname -m)" -R env PYTHONHASHSEED="${k%-noaslr}") ;;
        esac
        vals=$(taskset -c "$PIN" "${pre[@]}" "$PY" tools/bench/overhead_torch.py add plain "$OPS" 3 2>/dev/null |
            awk '$1 == "round" {printf "%s ", $2}')
        echo "$v #$i: $vals"
        echo "$vals" | tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}' >>"$work/$v"
    done
done
echo "variant          procs   min    median   max   (per-process medians, us/op)"
for v in $variants; do
    sort -g "$work/$v" | awk -v v="$v" '{a[NR]=$1} END {if (NR) printf "%-16s %5d %7.3f %7.3f %7.3f\n", v, NR, a[1], a[int((NR+1)/2)], a[NR]}'
done
rm -rf "$work"
