#!/usr/bin/env bash
# Issue 20 checks on the GPU machine that tests/gpu/run.sh does not make: runtime API records
# (tests/gpu/runtime_probe.sh), kernel names against the PyTorch profiler's
# (tests/gpu/names_check.py on tests/gpu/kineto_step.py), and trace sizes of a PyTorch step
# with module images left out (the default), stored, and with PC sampling.
# Run from a copy of the repository carrying target/release/{librtrace.so,rtrace}:
#     OUT=/some/dir bash tests/gpu/issue20_probe.sh
set -u
cd "$(dirname "$0")/../.." || exit 2
OUT=${OUT:-/tmp/issue20}
mkdir -p "$OUT"
R=$PWD/target/release/rtrace
echo "== runtime API records"
OUT=$OUT/runtime timeout 200 bash tests/gpu/runtime_probe.sh 2>&1 | grep -E "^(==|    PASS|    FAIL|[0-9]+ failed)"
echo "== kernel names"
rm -f "$OUT"/names-*.bin
timeout 120 "$R" record -o "$OUT/names-%p.bin" -- python3 tests/gpu/kineto_step.py "$OUT/kineto.json" \
    >"$OUT/names.out" 2>&1
python3 tests/gpu/names_check.py "$OUT/kineto.json" "$OUT"/names-*.bin
echo "== trace sizes of tests/gpu/pytorch_step.py"
for opts in "-t cuda,nvtx" "" "--module-images"; do
    d=$(mktemp -d /tmp/sizes.XXXX)
    timeout 120 "$R" record -o "$d/t-%p.bin" $opts -- python3 tests/gpu/pytorch_step.py >"$d/out" 2>&1
    echo "rtrace record ${opts:-(default)}: $(du -cb "$d"/t-*.bin | tail -1 | cut -f1) bytes apparent, $(du -c "$d"/t-*.bin | tail -1 | cut -f1) KiB on disk; $("$R" report "$d" 2>/dev/null | grep -m1 'module images' | sed 's/^ *//')"
done
