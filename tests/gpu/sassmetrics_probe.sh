#!/usr/bin/env bash
# How CUPTI 13's SASS Metric API behaves on this GPU (issue 21, source counters): builds
# sassmetrics_probe.cu (the probe and, with -DSASS_INJECT, an injection library), runs each
# experiment under timeout, runs Nsight Compute's SourceCounters on the same kernels and
# compares per instruction. No rtrace involved.
#
#   OUT=dir bash tests/gpu/sassmetrics_probe.sh      (on the GPU machine; about 2 minutes)
#
# Files: $OUT/sassmetrics.log (everything printed), $OUT/sassmetrics.tgz (each experiment's
# output, ncu's CSVs, ncu's SourceCounters section and rule files).
set -u
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
C=${CUDA_HOME:-/usr/local/cuda-13.0}
T=$C/targets/x86_64-linux
W=$(mktemp -d /tmp/rtrace-sassmetrics.XXXXXX)
export LD_LIBRARY_PATH=$T/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
unset LD_PRELOAD CUDA_INJECTION64_PATH
PASS=0
FAIL=0
pass() { PASS=$((PASS + 1)); echo "PASS $1  ($2)"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $1  ($2)"; }
main() {
cd "$W" || exit 2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$C/bin/nvcc -arch=sm_90 -lineinfo -O2 -I$T/include -o probe "$here/sassmetrics_probe.cu" \
    -L$T/lib -Xlinker -rpath,$T/lib -lcupti -lcuda > build.log 2>&1 &&
$C/bin/nvcc -arch=sm_90 -O2 -DSASS_INJECT -shared -Xcompiler -fPIC -I$T/include -o inj.so \
    "$here/sassmetrics_probe.cu" -L$T/lib -Xlinker -rpath,$T/lib -lcupti -lcuda >> build.log 2>&1
if [ $? != 0 ]; then fail build "$(tail -5 build.log | tr '\n' ' ')"; return; fi
pass build "probe and inj.so"

# run NAME SECONDS ARGS...: the probe's output in NAME.out, exit status and time said.
run() {
    local name=$1 secs=$2; shift 2
    local a=$(date +%s.%N)
    timeout "$secs" "$@" > "$name.out" 2>&1
    local rc=$? b=$(date +%s.%N)
    echo "== $name: exit $rc in $(awk "BEGIN{printf \"%.2f\", $b - $a}") s: $*"
    return $rc
}

run list 30 ./probe list
grep -E '^(RC|CHIP|METRICS)' list.out
grep '^METRIC ' list.out | cut -c1-200
n=$(grep -c '^METRIC ' list.out)
[ "$n" -gt 0 ] && pass list "$n metrics" || fail list "$(grep -E 'RC' list.out | tail -2 | tr '\n' ' ')"

for args in "1 each" "0 each" "1 end" "1 cycle" "1 nosync" "1 each smsp"; do
    name=collect-$(echo $args | tr ' ' '-')
    run $name 40 ./probe collect $args
    rc=$?
    grep -E '^(CHOSEN|MISSING|NOMETRIC|RC cuptiSassMetrics(SetConfig|Enable|Disable|UnsetConfig)|DATA|DISABLE|TIME|CUDAERR|DONE)' $name.out | sort | uniq -c | sort -k2 | head -60
    grep '^SUM' $name.out
    kernels=$(grep '^REC ' $name.out | grep -o 'fn=[^ ]*' | sort -u | wc -l)
    [ $rc = 0 ] && [ "$kernels" -ge 3 ] && pass $name "records for $kernels functions" ||
        fail $name "exit $rc, records for $kernels functions"
done
echo "-- the records of one launch each (lazy 1, flush after each kernel):"
grep -E '^REC lazy1-each-[a-z_]+-0 ' collect-1-each.out | cut -c1-300

# The counters tell the three problems apart (values summed over the kernel, lazy1-each).
s() { grep "^SUM lazy1-each .*$1.* $2 " collect-1-each.out | awk '{print $5}' | head -1; }
wf=$(s bank_conflicts wavefronts_mem_shared); wfi=$(s bank_conflicts wavefronts_mem_shared_ideal)
sec=$(s strided_reads smsp__sass_sectors_mem_global); seci=$(s strided_reads smsp__sass_sectors_mem_global_ideal)
div=$(s divergent smsp__sass_branch_targets_threads_divergent)
[ -n "$wf" ] && [ -n "$wfi" ] && [ "$wf" -gt "$wfi" ] && pass bank.wavefronts "$wf > ideal $wfi" || fail bank.wavefronts "'$wf' vs ideal '$wfi'"
[ -n "$sec" ] && [ -n "$seci" ] && [ "$sec" -gt "$seci" ] && pass strided.sectors "$sec > ideal $seci" || fail strided.sectors "'$sec' vs ideal '$seci'"
[ -n "$div" ] && [ "$div" -gt 0 ] && pass divergent.targets "$div" || fail divergent.targets "'$div'"

for order in act-first sass-first other-kinds; do
    run activity-$order 40 ./probe activity $order; rc=$?
    grep -E '^(RC|ACTIVITY|DATA|CUDAERR|DONE)' activity-$order.out | sort | uniq -c
    echo "exit $rc"
done
for order in pc-first sass-first; do
    run pcsamp-$order 40 ./probe pcsamp $order; rc=$?
    grep -E '^(RC|DATA|CUDAERR|DONE)' pcsamp-$order.out | sort | uniq -c
    echo "exit $rc"
done

run streams 60 ./probe streams 300; rc=$?
grep -E '^(STREAMS|CHECK|CUDAERR|RC cuptiSassMetricsFlushData)' streams.out | sort | uniq -c | head -20
grep -q 'CHECK streams-sums ok' streams.out && [ $rc = 0 ] && pass streams "$(grep '^STREAMS launches' streams.out)" ||
    fail streams "exit $rc $(grep -E '^(STREAMS launches|CHECK)' streams.out | tr '\n' ' ')"

# PyTorch: a few matmuls and adds, untraced, with SASS metrics injected, and with kernel
# activity on too (field reports say the last can hang).
PY='import torch, time
t = time.time(); x = torch.randn(512, 512, device="cuda")
for i in range(20):
    y = x @ x; x = (y / y.norm()).add_(1); z = torch.relu(x) + 0.5
torch.cuda.synchronize(); print("torch ok", float(z.sum()), round(time.time() - t, 3), "s")'
run torch-plain 60 python3 -c "$PY"; echo "exit $? $(grep 'torch ok' torch-plain.out)"
run torch-sass 60 env CUDA_INJECTION64_PATH=$W/inj.so python3 -c "$PY"; rc=$?
grep -E '^(RC|INJ|torch ok|Traceback)' torch-sass.out | sort | uniq -c; tail -3 torch-sass.out
[ $rc = 0 ] && grep -q 'torch ok' torch-sass.out && pass torch-sass "$(grep '^INJ' torch-sass.out)" || fail torch-sass "exit $rc"
run torch-sass-activity 60 env CUDA_INJECTION64_PATH=$W/inj.so INJ_ACTIVITY=1 python3 -c "$PY"; rc=$?
grep -E '^(RC|INJ|torch ok|Traceback)' torch-sass-activity.out | sort | uniq -c; tail -3 torch-sass-activity.out
echo "torch with SASS metrics and kernel activity: exit $rc (124 = hung, killed by timeout)"

# Nsight Compute on one launch of each kernel.
run ncu 120 $C/bin/ncu --section SourceCounters -f -o rep ./probe plain 1; rc=$?
tail -5 ncu.out
$C/bin/ncu -i rep.ncu-rep --page source --csv --print-units base --print-source sass > ncu_source.csv 2> ncu_source.err
$C/bin/ncu -i rep.ncu-rep --page details --csv --print-units base > ncu_details.csv 2> ncu_details.err
$C/bin/ncu -i rep.ncu-rep --page raw --csv --print-units base > ncu_raw.csv 2> ncu_raw.err
echo "-- ncu details (SourceCounters):"; cut -c1-220 ncu_details.csv | head -60
echo "-- ncu raw: smsp__sass metric names"
head -1 ncu_raw.csv | tr ',' '\n' | grep -i sass | tr -d '"' | tr '\n' ' '; echo
echo "-- ncu source page header and first rows:"; grep -m1 -A3 '^"Address\|^"# Address' ncu_source.csv | cut -c1-600
python3 "$here/sassmetrics_compare.py" probe collect-1-each.out lazy1-each ncu_source.csv > compare.txt 2>&1
cat compare.txt
PASS=$((PASS + $(grep -c '^PASS' compare.txt)))
FAIL=$((FAIL + $(grep -c '^FAIL' compare.txt)))
sec=$(find $C/ -name SourceCounters.section 2>/dev/null | head -1)
[ -n "$sec" ] && cp -r "$(dirname "$sec")" ncu-sections && echo "ncu sections from $(dirname "$sec"): $(ls ncu-sections | wc -l) files"
}
main 2>&1 | tee "$OUT/sassmetrics.log"
cd "$W" && tar czf "$OUT/sassmetrics.tgz" --exclude=probe --exclude=inj.so --exclude='*.ncu-rep' . 2>/dev/null
PASS=$(grep -c '^PASS ' "$OUT/sassmetrics.log"); FAIL=$(grep -c '^FAIL ' "$OUT/sassmetrics.log")
echo "$PASS passed, $FAIL failed" | tee -a "$OUT/sassmetrics.log"
[ "$FAIL" = 0 ]
