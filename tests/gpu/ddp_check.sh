#!/usr/bin/env bash
# A traced multi-rank NCCL training job (issue 23): tests/gpu/ddp_train.py under
# `torchrun --standalone --nproc-per-node=N` (N: the GPUs here, at most 8, or $NPROC), rank N-1
# slowed by SLOW_MS (default 20) ms a step. Two rounds, each the job untraced and then under
# `rtrace record -o ddpR-%q{RANK}.bin` (GPU activity and NVTX, the defaults); then
# tests/gpu/ddp_check.py checks the traces (see there) and prints `N passed, N failed`. With one
# GPU the checks that need two ranks are skipped and said. The traces of the last round go to
# $OUT/ddp-traces.tgz (for the Parquet and DuckDB check on a machine that has DuckDB).
#
#   OUT=dir bash tests/gpu/ddp_check.sh       (from the repository root, on the GPU machine)
set -u
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
RTRACE=$ROOT/target/release/rtrace
W=$(mktemp -d /tmp/rtrace-ddp.XXXXXX)
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
N=${NPROC:-$GPUS}
[ "$N" -gt 8 ] && N=8
[ "$N" -lt 1 ] && { echo "no GPU"; echo "0 passed, 1 failed"; exit 1; }
SLOW=-1
[ "$N" -ge 2 ] && SLOW=$((N - 1))
export SLOW_RANK=$SLOW SLOW_MS=${SLOW_MS:-20} STEPS=${STEPS:-30}
unset LD_PRELOAD RTRACE_OUTPUT
echo "GPUs $GPUS, ranks $N, slowed rank $SLOW by $SLOW_MS ms, $STEPS steps; $(python3 -c 'import torch; print("torch", torch.__version__, "nccl", ".".join(map(str, torch.cuda.nccl.version())))' 2>&1)"
job() { timeout 300 torchrun --standalone --nproc-per-node="$N" "$ROOT/tests/gpu/ddp_train.py"; }
cd "$W" || exit 2
for round in 1 2; do
    t0=$(date +%s%N)
    job > "plain$round.out" 2> "plain$round.err"
    echo "round $round untraced: exit $?, $(( ($(date +%s%N) - t0) / 1000000 )) ms"
    t0=$(date +%s%N)
    timeout 360 "$RTRACE" record -o "$W/ddp$round-%q{RANK}.bin" -- \
        torchrun --standalone --nproc-per-node="$N" "$ROOT/tests/gpu/ddp_train.py" \
        > "traced$round.out" 2> "traced$round.err"
    echo "round $round traced: exit $?, $(( ($(date +%s%N) - t0) / 1000000 )) ms"
    grep '^rtrace:' "traced$round.err" | head -12 | sed 's/^/    /'
done
python3 "$ROOT/tests/gpu/ddp_check.py" "$W" "$N" "$SLOW" "$RTRACE" 2>&1 | tee "$OUT/ddp-check.txt"
tar czf "$OUT/ddp-traces.tgz" ddp2-*.bin plain*.out traced*.out 2>/dev/null
cp plain1.err traced1.err "$OUT/" 2>/dev/null
rm -rf "$W"
