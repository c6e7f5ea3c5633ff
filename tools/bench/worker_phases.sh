#!/usr/bin/env bash
# Where rtrace's worker spends its CPU, phase by phase, on PyTorch's x.add_(1) (issue 20).
# Runs PROCS processes of each variant in turn (default 3), each pinned with all its threads
# to CPU $PIN (default 2), OPS ops a round (default 200 000), 2 timed rounds, rtrace's
# default mode (GPU activity, NVTX) with RTRACE_DEBUG=1, whose last lines say the worker's
# CPU time by phase (inject/src/worker_cpu.rs). Prints per process the rounds (µs/op) and
# each phase in ns per op (every op issued, the warm-up round's included). Variants: default;
# shm (the trace on /dev/shm). Run on the GPU machine from the repository root, with
# target/release/librtrace.so there:   bash tools/bench/worker_phases.sh
set -u
L=$PWD/target/release/librtrace.so
PROCS=${PROCS:-3}
PIN=${PIN:-2}
OPS=${OPS:-200000}
W=$(mktemp -d /tmp/wph.XXXX)
S=$(mktemp -d /dev/shm/wph.XXXX)
for rep in $(seq "$PROCS"); do
    for v in default shm; do
        dir=$W
        [ "$v" = shm ] && dir=$S
        out=$(env LD_PRELOAD="$L" RTRACE_GPU_ACTIVITY=1 RTRACE_NVTX=1 RTRACE_DEBUG=1 \
            RTRACE_OUTPUT="$dir/$v.$rep.%p.bin" taskset -c "$PIN" \
            python3 tools/bench/overhead_torch.py add plain "$OPS" 2 2>&1)
        echo "$out" | python3 -c '
import re, sys
v = sys.argv[1]
text = sys.stdin.read()
rounds = [l.split()[1] for l in text.splitlines() if l.startswith("round ")]
ops = [int(l.split()[1]) for l in text.splitlines() if l.startswith("ops ")]
line = [l for l in text.splitlines() if "worker CPU by phase" in l]
if not ops or not line:
    print(v, "no phase line or op count:", text.splitlines()[-3:])
    sys.exit()
n = ops[0]
body = line[-1].split("(µs): ", 1)[1]
parts = [p.strip() for p in re.split("[;,]", body)]
per = []
for p in parts:
    name, value = p.rsplit(" ", 1)
    per.append(f"{name.replace(chr(32), chr(95))}={int(value) * 1000 / n:.1f}" if name != "passes" else f"passes={value}")
print(v, "rounds", " ".join(rounds), "| ns/op:", " ".join(per))
' "$v"
    done
done
du -sh "$W" "$S"
rm -rf "$W" "$S"
