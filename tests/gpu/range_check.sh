#!/usr/bin/env bash
# Kernel profiling's range mode on the GPU (issue 18): two PyTorch training steps, each between
# cudaProfilerStart and cudaProfilerStop, each profiled as one unit by application replay
# (`rtrace record --metrics SpeedOfLight --replay application --capture-range cudaProfilerApi`),
# against Nsight Compute's range replay of the same range (`--replay-mode app-range`). Also runs
# tests/gpu/appreplay_probe.sh (CUPTI's application replay across processes, directly).
#
#   OUT=dir bash tests/gpu/range_check.sh        (from the repository root, on the GPU machine)
#
# Prints PASS/FAIL lines and ends with "N passed, N failed".
set -u
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
C=${CUDA_HOME:-/usr/local/cuda-13.0}
RTRACE=$ROOT/target/release/rtrace
W=$(mktemp -d /tmp/rtrace-range.XXXXXX)
export LD_LIBRARY_PATH=$C/extras/CUPTI/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
unset LD_PRELOAD CUDA_INJECTION64_PATH RTRACE_OUTPUT RTRACE_METRICS
PASS=0
FAIL=0
pass() { PASS=$((PASS + 1)); echo "PASS $1  ($2)"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $1  ($2)"; }
cp tests/gpu/profile_step.py tests/gpu/tracefile.py "$W/"
cd "$W" || exit 2

echo "== CUPTI's application replay, directly (tests/gpu/appreplay_probe.sh)"
MODES=session timeout 120 sh "$ROOT/tests/gpu/appreplay_probe.sh" > probe.txt 2>&1
tail -n 30 probe.txt | sed 's/^/    /'

python3 profile_step.py 2 range > plain.out 2> plain.err
timeout 300 "$RTRACE" record --metrics SpeedOfLight --replay application --capture-range cudaProfilerApi \
    -o range.bin -- python3 profile_step.py 2 range > traced.out 2> traced.err
rc=$?
tail -n 5 traced.err | sed 's/^/    /'
if [ $rc = 0 ] && cmp -s plain.out traced.out; then
    pass range.same-output "exit 0; $(grep -o 'ran [0-9]* times' traced.err)"
else
    fail range.same-output "exit $rc; $(diff plain.out traced.out | head -3 | tr '\n' ' ')"
fi
out=$(python3 -c '
import tracefile
s, p = tracefile.read_profiles("range.bin")
print(len(s), len(p), s[0]["replay"] if s else "-", s[0]["passes"] if s else "-")
finite = all(v == v for x in p for v in x["values"].values())
print("finite" if finite else "NaN")
for x in p:
    print(x["name"], x["range"], {k: round(v, 3) for k, v in x["values"].items()})' 2>&1)
printf '%s\n' "$out" | sed 's/^/    /'
read -r ns np replay passes <<< "$(printf '%s\n' "$out" | head -1)"
finite=$(printf '%s\n' "$out" | sed -n 2p)
if [ "${np:-0}" = 2 ] && [ "${replay:-}" = 1 ] && [ "$finite" = finite ]; then
    pass range.profiled "2 ranges, application replay, $passes passes, every value a number"
else
    fail range.profiled "setups ${ns:-?}, profiles ${np:-?}, replay ${replay:-?}, values: $finite"
fi
"$RTRACE" report range.bin > report.txt 2>&1
grep -A 30 "Kernel profiles" report.txt | head -40 | sed 's/^/    /'
# Nsight Compute's range replay of the same range, for the same metrics.
M=$(python3 -c 'import tracefile; s, p = tracefile.read_profiles("range.bin"); print(",".join(s[0]["metrics"]))' 2>/dev/null)
if [ -n "$M" ]; then
    timeout 300 ncu --replay-mode app-range --clock-control none --cache-control none \
        --metrics "$M" --csv --print-units base python3 profile_step.py 2 range > ncu.csv 2> ncu.err
    python3 - <<'PY'
import csv, tracefile
_s, p = tracefile.read_profiles("range.bin")
rows = [r for r in csv.reader(open("ncu.csv")) if len(r) > 5]
head = next((r for r in rows if r[0] == "ID"), None)
ncu = {}
for r in rows:
    if head and r != head and len(r) == len(head):
        d = dict(zip(head, r))
        try:
            ncu.setdefault(int(d["ID"]), {})[d["Metric Name"]] = float(d["Metric Value"].replace(",", ""))
        except ValueError:
            pass
for i, x in enumerate(p):
    theirs = ncu.get(i, {})
    print(f"    range {i} ({x['name']}): ncu {'has it' if theirs else 'has no result'}")
    for k, v in x["values"].items():
        if k in theirs:
            print(f"      {k:68} rtrace {v:16.4f} ncu {theirs[k]:16.4f}")
PY
fi
tar -czf "$OUT/range.tgz" --exclude='*.bin' . 2>/dev/null
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
