#!/usr/bin/env bash
# PC sampling on the GPU (issue 6): rtrace's samples of kernels with known problems against
# Nsight Compute's, what sampling costs, and a trace kept as a CI fixture.
#
#   OUT=dir bash tests/gpu/pcsamp_check.sh        (from the repository root, on the GPU machine)
#
# Needs target/release/{librtrace.so,rtrace} carried along, the CUDA toolkit (nvcc, ncu,
# nvdisasm), python3 with PyTorch. Prints PASS/FAIL lines and ends with "N passed, N failed".
# Files: $OUT/pcsamp.tgz (traces, reports, ncu output, logs), $OUT/pcsamp-fixture.bin.
set -u
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
C=${CUDA_HOME:-/usr/local/cuda-13.0}
T=$C/targets/x86_64-linux
RTRACE=$ROOT/target/release/rtrace
W=$(mktemp -d /tmp/rtrace-pcsamp.XXXXXX)
export LD_LIBRARY_PATH=$T/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
unset LD_PRELOAD CUDA_INJECTION64_PATH RTRACE_OUTPUT RTRACE_PC_SAMPLING
PASS=0
FAIL=0
pass() { PASS=$((PASS + 1)); echo "PASS $1  ($2)"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $1  ($2)"; }
cd "$W" || exit 2
cp "$ROOT/tests/gpu/pcsamp_kernels.cu" .
$C/bin/nvcc -arch=sm_90 -lineinfo -o kernels pcsamp_kernels.cu > build.log 2>&1 ||
    { fail pcsamp.build "$(tail -3 build.log)"; echo "$PASS passed, $FAIL failed"; exit 1; }

# Same output traced as untraced; the samples' trace.
./kernels all 3 > plain.out 2> plain.err
"$RTRACE" record --pc-sampling -o traced.bin -- ./kernels all 3 > traced.out 2> traced.err
rc=$?
if [ $rc = 0 ] && cmp -s plain.out traced.out; then
    pass pcsamp.same-output "$(wc -l < traced.out) lines, exit 0"
else
    fail pcsamp.same-output "exit $rc; $(diff plain.out traced.out | head -3 | tr '\n' ' ')"
fi
"$RTRACE" report --nvdisasm $C/bin/nvdisasm --width 160 traced.bin > report.txt 2> report.err
"$RTRACE" report --nvdisasm $C/bin/nvdisasm --format json traced.bin > report.json 2>> report.err
sed -n '/^PC sampling/,$p' report.txt | head -60
"$RTRACE" sass --nvdisasm $C/bin/nvdisasm --kernel bank_conflicts traced.bin > sass.txt 2>&1
grep -m3 -- "<-" sass.txt

# Nsight Compute on the same kernels.
timeout 150 $C/bin/ncu --csv --metrics group:smsp__pcsamp_warp_stall_reasons,group:smsp__pcsamp_warp_stall_reasons_not_issued \
    ./kernels all 1 > ncu_metrics.csv 2> ncu_metrics.err
timeout 200 $C/bin/ncu --section SourceCounters --section WarpStateStats -f -o rep ./kernels all 1 > ncu_run.log 2>&1
$C/bin/ncu -i rep.ncu-rep --page source --csv --print-source sass > ncu_source.csv 2> ncu_source.err
python3 "$ROOT/tests/gpu/pcsamp_check.py" report.json ncu_metrics.csv ncu_source.csv > check.txt 2>&1
cat check.txt
PASS=$((PASS + $(grep -c '^PASS' check.txt)))
FAIL=$((FAIL + $(grep -c '^FAIL' check.txt)))

# A program that samples its own context (tests/gpu/pcsamp_probe.inc, an independent CUPTI
# PC-sampling client): alone, then under rtrace without and with --pc-sampling. CUPTI samples
# a context for one client: what each gets is printed.
$C/bin/nvcc -arch=sm_90 -lineinfo -DPCSAMP_PROBE -I$T/include -L$T/lib -o probe pcsamp_kernels.cu \
    -I"$ROOT/tests/gpu" -lcupti -lcuda >> build.log 2>&1
./probe bank 1 > probe.alone.out 2>&1; echo "probe alone: exit $? $(grep totals probe.alone.out)"
"$RTRACE" record --gpu-activity -o probe.gpu.bin -- ./probe bank 1 > probe.gpu.out 2>&1
echo "probe under rtrace --gpu-activity: exit $? $(grep totals probe.gpu.out)"
"$RTRACE" record --pc-sampling -o probe.pc.bin -- ./probe bank 1 > probe.pc.out 2>&1
echo "probe under rtrace --pc-sampling: exit $? $(grep -E 'totals|failed' probe.pc.out | head -2)"
"$RTRACE" report probe.pc.bin 2>&1 | grep -E "PC sampling" | head -3

# The sampling period against the cost on the kernel that suffers most (bank conflicts).
for period in 11 14 17 20; do
    "$RTRACE" record --pc-sampling=$period -o bank.$period.bin -- ./kernels bank 3 > /dev/null 2> bank.$period.err
    samples=$("$RTRACE" report --format json bank.$period.bin 2>/dev/null | python3 -c 'import json,sys; print(sum(k["samples"] for k in json.load(sys.stdin)["pc_sampling"]["kernels"]))')
    echo "period 2^$period: $(grep bank_conflicts bank.$period.err) ms, $samples samples"
done
./kernels bank 3 2>&1 >/dev/null | grep bank_conflicts | sed 's/^/untraced: /'

# Costs: kernel time (cudaEvents) and a PyTorch training step, untraced / rtrace with GPU
# activity / rtrace with GPU activity and PC sampling, interleaved, 3 rounds.
for round in 1 2 3; do
    ./kernels all 3 > /dev/null 2> k.plain.$round
    "$RTRACE" record --gpu-activity -o k.gpu.$round.bin -- ./kernels all 3 > /dev/null 2> k.gpu.$round
    "$RTRACE" record --gpu-activity --pc-sampling -o k.pc.$round.bin -- ./kernels all 3 > /dev/null 2> k.pc.$round
    python3 "$ROOT/tests/gpu/pcsamp_train.py" > t.plain.$round 2>&1
    "$RTRACE" record --gpu-activity -o t.gpu.$round.bin -- python3 "$ROOT/tests/gpu/pcsamp_train.py" > t.gpu.$round 2>&1
    "$RTRACE" record --gpu-activity --pc-sampling -o t.pc.$round.bin -- python3 "$ROOT/tests/gpu/pcsamp_train.py" > t.pc.$round 2>&1
done
python3 - <<'PY'
import glob
def best(pattern, key):
    vals = []
    for f in glob.glob(pattern):
        for line in open(f, errors="replace"):
            p = line.split()
            if len(p) >= 2 and p[0] == key[0] and (len(key) == 1 or p[1] == key[1]):
                vals.append(float(p[-1]))
    return min(vals) if vals else float("nan")
print("cost of PC sampling (best of 3 rounds)")
print(f"{'what':<28}{'untraced':>12}{'rtrace gpu':>12}{'+pc sampling':>14}{'pc/untraced':>13}")
for k in ["bank_conflicts", "strided_reads", "fma_chain"]:
    a, b, c = (best(f"k.{m}.[0-9]", ("time", k)) for m in ("plain", "gpu", "pc"))
    print(f"{k + ' ms (3 launches)':<28}{a:>12.3f}{b:>12.3f}{c:>14.3f}{c / a:>13.3f}")
a, b, c = (best(f"t.{m}.[0-9]", ("ms_per_step",)) for m in ("plain", "gpu", "pc"))
print(f"{'PyTorch step ms':<28}{a:>12.3f}{b:>12.3f}{c:>14.3f}{c / a:>13.3f}")
PY
"$RTRACE" report --nvdisasm $C/bin/nvdisasm t.pc.1.bin > t.pc.report.txt 2>&1
sed -n '/^PC sampling/,/^$/p' t.pc.report.txt | head -4
grep "PC sampling" t.pc.report.txt | grep -v "^PC sampling" | head -5

# A small trace for CI's fixtures: one launch of each kernel.
"$RTRACE" record --pc-sampling -o fixture.bin -- ./kernels all 1 > /dev/null 2>&1 && cp fixture.bin "$OUT/pcsamp-fixture.bin"
RTRACE_DEBUG=1 "$RTRACE" record --pc-sampling -o debug.bin -- ./kernels all 2 > /dev/null 2> debug.err
grep "pc sampling" debug.err | tail -1
tar czf "$OUT/pcsamp.tgz" --exclude='*.ncu-rep' --exclude='t.*.bin' --exclude='k.*.bin' . 2>/dev/null
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
