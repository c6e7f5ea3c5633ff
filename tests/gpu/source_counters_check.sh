#!/usr/bin/env bash
# Source counters on the GPU (issue 21): rtrace record --source-counters against Nsight
# Compute's SourceCounters per instruction, on the three kernels of sassmetrics_probe.cu (shared
# bank conflicts, strided global loads, divergent branches), the refusals, a PyTorch run (no
# hang), and a trace kept as a CI fixture.
#
#   OUT=dir bash tests/gpu/source_counters_check.sh     (from the repository root, on the GPU machine)
#
# Needs target/release/{librtrace.so,rtrace} carried along, the CUDA toolkit (nvcc, ncu,
# nvdisasm), python3 with PyTorch. Prints PASS/FAIL lines and ends with "N passed, N failed".
# Files: $OUT/source-counters.tgz (traces, reports, ncu output, logs),
# $OUT/source-counters-fixture.bin (one launch of each kernel, for collector/tests/).
set -u
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
C=${CUDA_HOME:-/usr/local/cuda-13.0}
T=$C/targets/x86_64-linux
RTRACE=$ROOT/target/release/rtrace
W=$(mktemp -d /tmp/rtrace-sc.XXXXXX)
export LD_LIBRARY_PATH=$T/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
unset LD_PRELOAD CUDA_INJECTION64_PATH RTRACE_OUTPUT RTRACE_SOURCE_COUNTERS
PASS=0
FAIL=0
pass() { PASS=$((PASS + 1)); echo "PASS $1  ($2)"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $1  ($2)"; }
cd "$W" || exit 2
$C/bin/nvcc -arch=sm_90 -lineinfo -O2 -I$T/include -o probe "$ROOT/tests/gpu/sassmetrics_probe.cu" \
    -L$T/lib -Xlinker -rpath,$T/lib -lcupti -lcuda > build.log 2>&1 ||
    { fail sc.build "$(tail -3 build.log | tr '\n' ' ')"; echo "$PASS passed, $FAIL failed"; exit 1; }

# One launch of each kernel, counted; the same output as untraced.
./probe plain 1 > plain.out 2>&1
timeout 120 "$RTRACE" record --source-counters -o sc.bin -- ./probe plain 1 > traced.out 2> traced.err
rc=$?
cat traced.err
if [ $rc = 0 ] && [ "$(grep -c '^TIME' traced.out)" = 3 ]; then
    pass sc.record "exit 0, $(grep -c '^TIME' traced.out) kernels ran"
else
    fail sc.record "exit $rc; $(tail -3 traced.err | tr '\n' ' ')"
fi
"$RTRACE" report --nvdisasm $C/bin/nvdisasm --width 160 sc.bin > report.txt 2> report.err
"$RTRACE" report --nvdisasm $C/bin/nvdisasm --format json --section source-counters sc.bin > sc.json 2>> report.err
"$RTRACE" report --nvdisasm $C/bin/nvdisasm --format csv --section source-counters sc.bin > sc.csv 2>> report.err
for k in bank_conflicts strided_reads divergent; do
    "$RTRACE" sass --nvdisasm $C/bin/nvdisasm --source-dir "$ROOT/tests/gpu" --kernel "^$k" sc.bin > sass.$k.txt 2>&1
done
sed -n '/^Source counters/,$p' report.txt | head -60
grep -E "source counters" report.txt | head -5
head -40 sass.bank_conflicts.txt
launches=$(python3 -c 'import json,sys; print(json.load(open("sc.json"))["source_counters"]["launches"])' 2>/dev/null)
[ "$launches" = 3 ] && pass sc.launches "3 launches counted" || fail sc.launches "'$launches' launches counted"
# The findings: the strided kernel's uncoalesced loads, the bank conflicts' extra wavefronts.
python3 - <<'PY' > findings.txt 2>&1
import json
d = json.load(open("sc.json"))["source_counters"]
for k in d["kernels"]:
    for f in k["findings"]:
        top = f["places"][0] if f["places"] else {}
        print(k["demangled"].split("(")[0], f["rule"], f["est_speedup_percent"], f["excessive"], f["total"],
              top.get("line"), top.get("offset"))
PY
cat findings.txt
grep -q '^strided_reads uncoalesced_global' findings.txt && pass sc.finding.global "$(grep '^strided_reads uncoalesced_global' findings.txt)" || fail sc.finding.global "none for strided_reads"
grep -q '^bank_conflicts uncoalesced_shared' findings.txt && pass sc.finding.shared "$(grep '^bank_conflicts uncoalesced_shared' findings.txt)" || fail sc.finding.shared "none for bank_conflicts"

# Nsight Compute on the same launches; every counter equal per instruction.
timeout 150 $C/bin/ncu --section SourceCounters -f -o rep ./probe plain 1 > ncu_run.log 2>&1
$C/bin/ncu -i rep.ncu-rep --page source --csv --print-units base --print-source sass > ncu_source.csv 2> ncu_source.err
$C/bin/ncu -i rep.ncu-rep --page details --csv --print-units base > ncu_details.csv 2> ncu_details.err
python3 "$ROOT/tests/gpu/sassmetrics_compare.py" rtrace sc.json ncu_source.csv > compare.txt 2>&1
cat compare.txt
PASS=$((PASS + $(grep -c '^PASS' compare.txt)))
FAIL=$((FAIL + $(grep -c '^FAIL' compare.txt)))

# The kernel controls: only the second kernel.
timeout 120 "$RTRACE" record --source-counters --kernel-regex strided -o regex.bin -- ./probe plain 2 > /dev/null 2> regex.err
n=$("$RTRACE" report --format json --section source-counters regex.bin 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin)["source_counters"]; print(d["launches"], ",".join(k["name"] for k in d["kernels"]))')
[ "$n" = "2 _Z13strided_readsPKfPfi" ] && pass sc.kernel-regex "$n" || fail sc.kernel-regex "'$n'"

# Refused combinations: exit 2 with a one-line reason.
for opts in "--pc-sampling" "--metrics SpeedOfLight" "-t cuda,gpu,nvtx" "--gpu-activity=kernel"; do
    "$RTRACE" record --source-counters $opts -o refused.bin -- ./probe plain 1 > /dev/null 2> refused.err
    rc=$?
    [ $rc = 2 ] && [ "$(wc -l < refused.err)" = 1 ] && pass "sc.refuses $opts" "$(cat refused.err)" ||
        fail "sc.refuses $opts" "exit $rc: $(head -2 refused.err | tr '\n' ' ')"
done

# PyTorch under source counters (a few kernels chosen): finishes, no hang.
PY='import torch
x = torch.randn(256, 256, device="cuda")
for i in range(10):
    x = torch.relu(x @ x / 256) + 0.5
torch.cuda.synchronize(); print("torch ok", float(x.sum()))'
timeout 180 "$RTRACE" record --source-counters --kernel-count 4 -o torch.bin -- python3 -c "$PY" > torch.out 2> torch.err
rc=$?
n=$("$RTRACE" report --format json --section source-counters torch.bin 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["source_counters"]["launches"])' 2>/dev/null)
[ $rc = 0 ] && grep -q 'torch ok' torch.out && [ "$n" = 4 ] && pass sc.pytorch "exit 0, $n launches counted" ||
    fail sc.pytorch "exit $rc (124: hung), '$n' launches; $(tail -2 torch.err | tr '\n' ' ')"

# Cost: the three kernels untraced and counted (cudaEvent ms per kernel).
./probe plain 3 > cost.plain 2>&1
"$RTRACE" record --source-counters -o cost.bin -- ./probe plain 3 > cost.sc 2>/dev/null
paste <(grep '^TIME' cost.plain) <(grep '^TIME' cost.sc) | awk '{print "cost", $3, "untraced", $4, "ms; counted", $8, "ms"}'

cp sc.bin "$OUT/source-counters-fixture.bin"
tar czf "$OUT/source-counters.tgz" --exclude='*.ncu-rep' --exclude=probe . 2>/dev/null
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
