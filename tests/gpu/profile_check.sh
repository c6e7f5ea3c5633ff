#!/usr/bin/env bash
# Kernel profiling on the GPU (issue 18): rtrace's metrics of kernels with known behaviour
# (tests/gpu/profile_kernels.cu) against Nsight Compute's on the same binary, the findings
# against Nsight Compute's rules, what profiling costs against `ncu --set basic` on a PyTorch
# step, the slowdown of unprofiled kernels in a profiled run, and traces kept as CI fixtures.
#
#   OUT=dir bash tests/gpu/profile_check.sh        (from the repository root, on the GPU machine)
#
# Needs target/release/{librtrace.so,rtrace} carried along, the CUDA toolkit (nvcc, ncu, cuBLAS),
# python3 with PyTorch. Prints PASS/FAIL lines and ends with "N passed, N failed".
# Files: $OUT/profile.tgz (reports, ncu output, logs), $OUT/profile-fixture.bin.
# PROFILE_STEPS (default "metrics rules cost unprofiled"): the parts to run.
set -u
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
C=${CUDA_HOME:-/usr/local/cuda-13.0}
T=$C/targets/x86_64-linux
RTRACE=$ROOT/target/release/rtrace
STEPS=${PROFILE_STEPS:-metrics rules cost unprofiled}
W=$(mktemp -d /tmp/rtrace-profile.XXXXXX)
export LD_LIBRARY_PATH=$T/lib:$C/extras/CUPTI/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
unset LD_PRELOAD CUDA_INJECTION64_PATH RTRACE_OUTPUT RTRACE_PC_SAMPLING RTRACE_METRICS
PASS=0
FAIL=0
pass() { PASS=$((PASS + 1)); echo "PASS $1  ($2)"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $1  ($2)"; }
want() { [[ " $STEPS " == *" $1 "* ]]; }
now() { date +%s.%N; }
SETS=SpeedOfLight,MemoryWorkloadAnalysis,ComputeWorkloadAnalysis,Occupancy,WarpStateStats,InstructionStats
cd "$W" || exit 2
cp "$ROOT/tests/gpu/profile_kernels.cu" "$ROOT/tests/gpu/profile_check.py" "$ROOT/tests/gpu/tracefile.py" .
$C/bin/nvcc -O2 -arch=sm_90 -o kernels profile_kernels.cu -lcublas > build.log 2>&1 ||
    { fail profile.build "$(tail -3 build.log)"; echo "$PASS passed, $FAIL failed"; exit 1; }

if want metrics; then
    # Same output and status traced as untraced (replay restores device memory: the increment
    # kernel's sum would be off otherwise); every kernel profiled with every set.
    ./kernels 1 > plain.out 2> plain.err
    prc=$?
    t0=$(now)
    "$RTRACE" record --metrics $SETS -o sets.bin -- ./kernels 1 > traced.out 2> traced.err
    rc=$?
    t1=$(now)
    if [ $rc = $prc ] && cmp -s plain.out traced.out; then
        pass profile.same-output "exit $rc, '$(head -1 traced.out)'"
    else
        fail profile.same-output "exit $rc (untraced $prc); $(diff plain.out traced.out | head -3 | tr '\n' ' ')"
    fi
    metrics=$(python3 -c 'import tracefile; s, p = tracefile.read_profiles("sets.bin"); print(",".join(s[0]["metrics"]) if s else ""); import sys; print(len(p), s[0]["passes"] if s else 0, s[0]["chip"] if s else "", file=sys.stderr)' 2> setup.txt)
    read -r nprof passes chip < setup.txt
    if [ -n "$metrics" ] && [ "${nprof:-0}" -gt 0 ]; then
        pass profile.collected "$nprof launches profiled, $(echo "$metrics" | tr ',' '\n' | wc -l) metrics, $passes passes, chip $chip, $(printf '%.1f' "$(echo "$t1 - $t0" | bc)") s"
    else
        fail profile.collected "no profiles in the trace: $(grep -i profil traced.err | head -3 | tr '\n' ' ')"
    fi
    t0=$(now)
    ncu --metrics "$metrics" --clock-control none --csv --print-units base ./kernels 1 > ncu.csv 2> ncu.err
    t1=$(now)
    echo "ncu --metrics (same list, --clock-control none): $(printf '%.1f' "$(echo "$t1 - $t0" | bc)") s"
    out=$(python3 profile_check.py sets.bin ncu.csv 2>&1)
    rc=$?
    printf '%s\n' "$out" | tail -n 25 | sed 's/^/    /'
    if [ $rc = 0 ]; then pass profile.ncu-agrees "$(printf '%s\n' "$out" | tail -1)"; else fail profile.ncu-agrees "$(printf '%s\n' "$out" | tail -1)"; fi
    "$RTRACE" report sets.bin > report.txt 2> report.err
    "$RTRACE" report --format json sets.bin > report.json 2>> report.err
    if grep -q "Kernel profiles" report.txt && python3 -c 'import json; json.load(open("report.json"))'; then
        pass profile.report "$(grep -c . report.txt) lines"
    else
        fail profile.report "$(head -3 report.err | tr '\n' ' ')"
    fi
    # Fixture for CI: the Speed Of Light set of two launches (bank_conflicts, increment).
    "$RTRACE" record --metrics SpeedOfLight --kernel-regex 'bank_conflicts|increment' \
        -o "$OUT/profile-fixture.bin" -- ./kernels 1 > /dev/null 2> fixture.err
    [ -s "$OUT/profile-fixture.bin" ] && pass profile.fixture "$(stat -c %s "$OUT/profile-fixture.bin") bytes" ||
        fail profile.fixture "$(tail -3 fixture.err | tr '\n' ' ')"
fi

tar -C "$W" -czf "$OUT/profile.tgz" --exclude='*.bin' --exclude=kernels . 2>/dev/null
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
