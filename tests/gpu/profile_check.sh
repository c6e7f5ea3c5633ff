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
# PROFILE_STEPS (default "metrics pytorch busy cost unprofiled"): the parts to run.
set -u
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
C=${CUDA_HOME:-/usr/local/cuda-13.0}
T=$C/targets/x86_64-linux
RTRACE=$ROOT/target/release/rtrace
STEPS=${PROFILE_STEPS:-metrics pytorch busy cost unprofiled}
W=$(mktemp -d /tmp/rtrace-profile.XXXXXX)
export LD_LIBRARY_PATH=$T/lib:$C/extras/CUPTI/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
unset LD_PRELOAD CUDA_INJECTION64_PATH RTRACE_OUTPUT RTRACE_PC_SAMPLING RTRACE_METRICS
PASS=0
FAIL=0
pass() { PASS=$((PASS + 1)); echo "PASS $1  ($2)"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $1  ($2)"; }
want() { [[ " $STEPS " == *" $1 "* ]]; }
now() { date +%s.%N; }
# secs T0 [T1]: seconds from T0 to T1 (default now), one decimal.
secs() { awk -v a="$1" -v b="${2:-$(now)}" 'BEGIN { printf "%.1f", b - a }'; }
SETS=SpeedOfLight,MemoryWorkloadAnalysis,ComputeWorkloadAnalysis,Occupancy,WarpStateStats,InstructionStats
cd "$W" || exit 2
cp "$ROOT/tests/gpu/profile_kernels.cu" "$ROOT/tests/gpu/profile_check.py" "$ROOT/tests/gpu/profile_rules.py" \
    "$ROOT/tests/gpu/tracefile.py" .
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
        pass profile.collected "$nprof launches profiled, $(echo "$metrics" | tr ',' '\n' | wc -l) metrics, $passes passes, chip $chip, $(secs "$t0" "$t1") s"
    else
        fail profile.collected "no profiles in the trace: $(grep -i profil traced.err | head -3 | tr '\n' ' ')"
    fi
    t0=$(now)
    # rtrace runs the program as it runs (no clock locking; CUPTI 13.0's kernel replay has no
    # cache control): Nsight Compute under the same conditions. A second ncu run gives ncu's own
    # run-to-run disagreement under the same tolerances, for scale.
    ncu --metrics "$metrics" --clock-control none --cache-control none --csv --print-units base ./kernels 1 > ncu.csv 2> ncu.err
    t1=$(now)
    echo "ncu --metrics (same list, --clock-control none --cache-control none): $(secs "$t0" "$t1") s"
    ncu --metrics "$metrics" --clock-control none --cache-control none --csv --print-units base ./kernels 1 > ncu2.csv 2>> ncu.err
    python3 -c '
import profile_check as pc, json
a, b = pc.ncu_launches("ncu.csv"), pc.ncu_launches("ncu2.csv")
n = bad = 0
for (_, ma), (_, mb) in zip(a, b):
    for k, (u, v) in ma.items():
        if k in mb:
            ok, _how = pc.verdict(k, u, v, mb[k][1], {kk: vv[1] for kk, vv in ma.items()})
            n += 1
            bad += not ok
print("ncu against itself (second run):", json.dumps(dict(compared=n, disagree=bad)))'
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
    ncu --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables --section Occupancy \
        --section WarpStateStats --section LaunchStats --clock-control none --cache-control none \
        ./kernels 1 > ncu-rules.txt 2>> ncu.err
    out=$(python3 profile_rules.py report.json ncu-rules.txt 2>&1)
    rc=$?
    printf '%s\n' "$out" | sed 's/^/    /'
    if [ $rc = 0 ]; then pass profile.rules-as-ncu "$(printf '%s\n' "$out" | tail -1)"; else fail profile.rules-as-ncu "$(printf '%s\n' "$out" | tail -1)"; fi
    # Fixture for CI: the Speed Of Light set of two launches (bank_conflicts, increment).
    "$RTRACE" record --metrics SpeedOfLight --kernel-regex 'bank_conflicts|increment' \
        -o "$OUT/profile-fixture.bin" -- ./kernels 1 > /dev/null 2> fixture.err
    [ -s "$OUT/profile-fixture.bin" ] && pass profile.fixture "$(stat -c %s "$OUT/profile-fixture.bin") bytes" ||
        fail profile.fixture "$(tail -3 fixture.err | tr '\n' ' ')"
fi

if want pytorch; then
    # A PyTorch training step's kernels (cuDNN convolutions, PyTorch's own), every one
    # profiled with the Speed Of Light and Memory Workload sets, against ncu on the same step.
    cp "$ROOT/tests/gpu/profile_step.py" .
    "$RTRACE" record --metrics SpeedOfLight,MemoryWorkloadAnalysis -o step.bin -- python3 profile_step.py 1 \
        > step.out 2> step.err
    M=$(python3 -c 'import tracefile; s, p = tracefile.read_profiles("step.bin"); print(",".join(s[0]["metrics"]))' 2>/dev/null)
    ncu --metrics "$M" --clock-control none --cache-control none --csv --print-units base \
        python3 profile_step.py 1 > step-ncu.csv 2> step-ncu.err
    out=$(python3 profile_check.py step.bin step-ncu.csv 2>&1)
    rc=$?
    printf '%s\n' "$out" | tail -n 12 | sed 's/^/    /'
    if [ $rc = 0 ]; then pass profile.pytorch-ncu-agrees "$(printf '%s\n' "$out" | tail -1)"; else fail profile.pytorch-ncu-agrees "$(printf '%s\n' "$out" | tail -1)"; fi
fi

if want busy; then
    # Counters already held: a program that profiles itself with CUPTI's range profiler
    # (tests/gpu/rangeprof_probe.cu enables it on its context first). Its output must not
    # change, tracing must go on, and the trace must say why rtrace's profiling is off.
    cp "$ROOT/tests/gpu/rangeprof_probe.cu" .
    $C/bin/nvcc -O2 -arch=sm_90 -o probe rangeprof_probe.cu -I$C/extras/CUPTI/include -L$C/extras/CUPTI/lib64 \
        -lcupti -lcuda >> build.log 2>&1
    mkdir -p probe-plain probe-traced
    # Its measured values vary run to run: the lines compared are those that do not.
    keep='^(context id|supported|chip|availability|metrics|counter data|x\[0\]|kernel activity records)'
    ./probe probe-plain gpu__time_duration.sum 2>&1 | grep -E "$keep" > busy-plain.out
    "$RTRACE" record --metrics SpeedOfLight -o busy.bin -- ./probe probe-traced gpu__time_duration.sum 2>busy.err |
        grep -E "$keep" > busy.out
    "$RTRACE" report --format json busy.bin > busy.json 2> busy-report.err
    out=$(python3 -c '
import json, tracefile
kernels = len(tracefile.read_gpu("busy.bin")[0])
_s, profiles = tracefile.read_profiles("busy.bin")
notices = [n["message"] for n in json.load(open("busy.json"))["kernel_profiles"]["notices"]]
why = [n for n in notices if n.startswith("kernel profiling off")]
print(kernels, len(profiles), (why or ["-"])[0][:240])' 2>&1)
    read -r nk np why <<< "$out"
    cmp -s busy-plain.out busy.out && same=same || same="differs: $(diff busy-plain.out busy.out | head -3 | tr '\n' ' ')"
    detail="output $same; $nk kernel records, $np profiles; notice: $why"
    if [ "$same" = same ] && [ "${nk:-0}" -ge 200 ] && [[ "$why" == "kernel profiling off"* ]]; then
        pass profile.counters-held "$detail"
    else
        fail profile.counters-held "$detail"
    fi
fi

if want cost; then
    # What profiling every kernel of a PyTorch training step costs: untraced, rtrace with the
    # Speed Of Light set, `ncu --set basic`; processes alternate, each pinned to the same cores.
    cp "$ROOT/tests/gpu/profile_step.py" .
    : > cost.txt
    for i in 1 2 3; do
        for mode in plain rtrace ncu; do
            t0=$(now)
            case $mode in
            plain) taskset -c 2-5 python3 profile_step.py > cost-$mode-$i.out 2> cost-$mode-$i.err ;;
            rtrace) taskset -c 2-5 "$RTRACE" record --metrics SpeedOfLight -o cost-$i.bin -- \
                python3 profile_step.py > cost-$mode-$i.out 2> cost-$mode-$i.err ;;
            ncu) taskset -c 2-5 ncu --set basic python3 profile_step.py > cost-$mode-$i.out 2> cost-$mode-$i.err ;;
            esac
            echo "$mode $i $(secs "$t0")" >> cost.txt
        done
    done
    out=$(python3 - <<'PY'
import statistics, tracefile
runs = {}
for line in open("cost.txt"):
    mode, _i, t = line.split()
    runs.setdefault(mode, []).append(float(t))
med = {m: statistics.median(v) for m, v in runs.items()}
for m, v in runs.items():
    print(f"{m}: min {min(v):.1f} s, median {med[m]:.1f} s, max {max(v):.1f} s")
_s, profiles = tracefile.read_profiles("cost-1.bin")
ncu = sum(1 for l in open("cost-ncu-1.out") if l.startswith("==PROF== Profiling"))
print(f"kernels profiled: rtrace {len(profiles)}, ncu {ncu}")
print(f"RATIO {med['rtrace'] / med['ncu']:.3f} {(med['rtrace'] - med['plain']) / (med['ncu'] - med['plain']):.3f} {len(profiles)} {ncu}")
PY
)
    printf '%s\n' "$out" | sed 's/^/    /'
    read -r _ ratio extra nr nn <<< "$(printf '%s\n' "$out" | grep '^RATIO')"
    same=yes
    for i in 1 2 3; do cmp -s cost-plain-1.out cost-rtrace-$i.out || same=no; done
    [ "$same" = yes ] && pass profile.cost-same-output "$(tail -2 cost-rtrace-1.out | head -1)" ||
        fail profile.cost-same-output "$(diff cost-plain-1.out cost-rtrace-1.out | head -3 | tr '\n' ' ')"
    detail="rtrace/ncu wall ${ratio:-?} (added time ${extra:-?}); kernels profiled rtrace ${nr:-?}, ncu ${nn:-?}; goal <= 0.333"
    if [ -n "${ratio:-}" ] && awk -v r="$ratio" 'BEGIN { exit !(r <= 0.3334) }'; then
        pass profile.cost-vs-ncu "$detail"
    else
        fail profile.cost-vs-ncu "$detail"
    fi
fi

if want unprofiled; then
    # Unprofiled kernels in a profiled run: one compute_bound launch profiled, every other
    # launch's duration against a run that profiles nothing (3 processes of each, alternating).
    for i in 1 2 3; do
        taskset -c 2 "$RTRACE" record --gpu-activity=kernel -o un-off-$i.bin -- ./kernels 20 > /dev/null 2>&1
        taskset -c 2 "$RTRACE" record --gpu-activity=kernel --metrics SpeedOfLight --kernel-regex compute_bound --kernel-count 1 \
            -o un-on-$i.bin -- ./kernels 20 > /dev/null 2>&1
    done
    out=$(python3 - <<'PY'
import statistics, tracefile
def durations(prefix):
    by = {}
    for i in (1, 2, 3):
        kernels, _copies, _sets = tracefile.read_gpu(f"{prefix}-{i}.bin")
        for k in kernels:
            if k["flags"] & 8:
                continue
            by.setdefault(k["name"], []).append(k["end"] - k["start"])
    return by
off, on = durations("un-off"), durations("un-on")
ratios = []
for name in sorted(off):
    if name in on and len(on[name]) > 5:
        r = statistics.median(on[name]) / statistics.median(off[name])
        ratios.append(r)
        print(f"{str(name)[:50]:50} off {statistics.median(off[name]):>10.0f} ns  on {statistics.median(on[name]):>10.0f} ns  x{r:.3f}")
print(f"RATIO {statistics.median(ratios):.4f} {min(ratios):.4f} {max(ratios):.4f} {len(ratios)}")
PY
)
    printf '%s\n' "$out" | sed 's/^/    /'
    read -r _ med lo hi n <<< "$(printf '%s\n' "$out" | grep '^RATIO')"
    detail="median unprofiled kernel duration, profiled run / unprofiled run: x${med:-?} over ${n:-?} kernels (min x${lo:-?}, max x${hi:-?})"
    if [ -n "${med:-}" ] && awk -v r="$med" 'BEGIN { exit !(r < 1.02 && r > 0.98) }'; then
        pass profile.unprofiled-untouched "$detail"
    else
        fail profile.unprofiled-untouched "$detail"
    fi
fi

cp report.txt "$OUT/profile-report.txt" 2>/dev/null
tar -C "$W" -czf "$OUT/profile.tgz" --exclude='*.bin' --exclude=kernels . 2>/dev/null
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
