#!/usr/bin/env bash
# tests/gpu/occupancy_check.sh — rtrace's launch statistics and theoretical occupancy
# (`rtrace report`, key `occupancy`) against Nsight Compute's LaunchStats and Occupancy
# sections and the driver's cudaOccupancyMaxActiveBlocksPerMultiprocessor, on a real GPU.
#
# Run from anywhere on the GPU machine, with target/release/rtrace and librtrace.so built
# elsewhere and carried along.  Needs: nvidia driver, CUDA 13 toolkit (nvcc, ncu), python3.
#
# Builds tests/gpu/occupancy_kernels.cu (five kernels, each limited by a different resource:
# warps, registers, dynamic shared memory, static shared memory, the SM's block slots),
# runs it (1) plainly, printing the driver's own occupancy per kernel, (2) under
# `rtrace record` with RTRACE_GPU_ACTIVITY=1, and (3) under
# `ncu --clock-control none --section LaunchStats --section Occupancy --csv`, then compares
# per kernel: block, grid, threads, registers, static/dynamic/driver shared memory, the block
# limits (registers, shared memory, warps, SM), theoretical active warps, theoretical
# occupancy and waves per SM, and the active blocks per SM with the driver's
# cudaOccupancyMaxActiveBlocksPerMultiprocessor. rtrace assumes the driver's default
# shared-memory carveout (the largest); where ncu reports that the driver configured a
# smaller one, rtrace's shared-memory block limit is recomputed for that size and the
# difference is noted (occupancy and waves must still agree). ncu's "Registers Per Thread" is
# the allocation (a multiple of 8: 16 for a kernel of 12); a count that rounds up to it passes.
# ncu's "Block Limit Barriers" (32 on an H100/H200) is printed, not checked: the calculator
# rtrace follows (cuda_occupancy.h) counts 2 barriers per block slot on 9.0 (64); neither ever
# binds below the SM's block limit.
#
# Prints one PASS/FAIL line per check; the last line is "N passed, N failed"; exit status 0
# iff none failed.  Files under $OUT (default ./gpu-out/occupancy): the program's outputs,
# the trace, rtrace's table and JSON reports, ncu's CSV, compare.txt, log.txt.
# Variables: OUT; CUDA_HOME (default /usr/local/cuda-13.0); NCU (default $CUDA_HOME/bin/ncu);
# RTRACE (default target/release/rtrace); NVCC_ARCH (default: native).

set -u
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out/occupancy}
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0}
NVCC=$CUDA_HOME/bin/nvcc
[ -x "$NVCC" ] || NVCC=$(command -v nvcc || echo nvcc)
NCU=${NCU:-$CUDA_HOME/bin/ncu}
RTRACE=${RTRACE:-$ROOT/target/release/rtrace}
ARCH=${NVCC_ARCH:-native}

unset LD_PRELOAD CUDA_INJECTION64_PATH RTRACE_OUTPUT RTRACE_DISABLE RTRACE_CUDA_LIBRARY \
    RTRACE_SIMULATED NVTX_INJECTION64_PATH

exec > >(tee "$OUT/log.txt") 2>&1

PASS=0
FAIL=0
pass() { PASS=$((PASS + 1)); echo "PASS $*"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $*"; }
finish() {
    echo "$PASS passed, $FAIL failed"
    [ "$FAIL" = 0 ]
    exit $?
}

BIN=$OUT/occupancy_kernels
echo "== build ($NVCC -arch=$ARCH)"
if "$NVCC" -O2 -arch="$ARCH" -o "$BIN" tests/gpu/occupancy_kernels.cu >"$OUT/build.txt" 2>&1; then
    pass build "occupancy_kernels.cu"
else
    cat "$OUT/build.txt"
    fail build "nvcc failed"
    finish
fi
# Register counts the compiler chose, for the log.
"$CUDA_HOME/bin/cuobjdump" -res-usage "$BIN" 2>/dev/null | grep -E "Function|REG" || true

echo "== plain run (the driver's cudaOccupancyMaxActiveBlocksPerMultiprocessor)"
if timeout 120 "$BIN" >"$OUT/plain.txt" 2>&1; then
    cat "$OUT/plain.txt"
    pass plain-run
else
    cat "$OUT/plain.txt"
    fail plain-run "the program failed untraced"
    finish
fi

echo "== under rtrace (RTRACE_GPU_ACTIVITY=1)"
rm -f "$OUT"/trace-*.bin
if RTRACE_GPU_ACTIVITY=1 timeout 120 "$RTRACE" record -o "$OUT/trace-%p.bin" -- "$BIN" \
    >"$OUT/rtrace-stdout.txt" 2>"$OUT/rtrace-stderr.txt"; then
    pass rtrace-run
else
    cat "$OUT/rtrace-stdout.txt" "$OUT/rtrace-stderr.txt"
    fail rtrace-run "the program failed under rtrace"
fi
if "$RTRACE" report --format json "$OUT"/trace-*.bin >"$OUT/report.json" 2>"$OUT/report-stderr.txt" &&
    "$RTRACE" report "$OUT"/trace-*.bin >"$OUT/report.txt" 2>>"$OUT/report-stderr.txt"; then
    pass rtrace-report
    sed -n '/^Launch statistics and occupancy/,$p' "$OUT/report.txt"
else
    cat "$OUT/report-stderr.txt"
    fail rtrace-report "rtrace report failed"
    finish
fi

echo "== under ncu"
# (With --log-file, ncu would write the CSV there: it goes to stdout, between the program's
# lines and ncu's ==PROF== lines, which the comparison skips.)
if timeout 300 "$NCU" --clock-control none --section LaunchStats --section Occupancy --csv \
    --print-units base "$BIN" >"$OUT/ncu.csv" 2>"$OUT/ncu-stderr.txt"; then
    pass ncu-run
else
    tail -n 20 "$OUT/ncu.csv" "$OUT/ncu-stderr.txt" 2>/dev/null
    fail ncu-run "ncu failed"
    finish
fi

echo "== compare"
python3 - "$OUT/report.json" "$OUT/ncu.csv" "$OUT/plain.txt" >"$OUT/compare.txt" <<'PY'
import csv, json, re, sys

report, ncu_csv, plain = sys.argv[1:4]
KERNELS = ["k_warps", "k_registers", "k_dynamic_smem", "k_static_smem", "k_blocks"]

def base(name):
    return name.split("(")[0].strip()

rows = {}
for r in json.load(open(report)).get("occupancy", []):
    rows.setdefault(base(r["name"]), r)

# ncu: one metric per CSV line, after the header line that starts with "ID".
ncu = {}
with open(ncu_csv, newline="") as f:
    lines = [l for l in f if l.startswith('"')]
table = list(csv.reader(lines))
header = next((r for r in table if r and r[0] == "ID"), None)
if header:
    col = {h: i for i, h in enumerate(header)}
    need = max(col["Kernel Name"], col["Metric Name"], col["Metric Unit"], col["Metric Value"])
    for r in table:
        # Metric lines are shorter than the header (no rule fields); rule lines have no metric.
        if r is header or len(r) <= need or not r[col["Metric Name"]]:
            continue
        ncu.setdefault(base(r[col["Kernel Name"]]), {})[r[col["Metric Name"]]] = (
            r[col["Metric Value"]], r[col["Metric Unit"]])

driver = {}
for line in open(plain):
    m = re.match(r"(\w+): (\d+) registers, (\d+) B static shared memory, (\d+) active blocks", line)
    if m:
        driver[m.group(1)] = int(m.group(4))

SCALE = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "KB": 1e3, "Kibyte": 1024, "KiB": 1024}

def value(metrics, name):
    v = metrics.get(name)
    if v is None:
        return None
    text, unit = v
    try:
        x = float(text.replace(",", ""))
    except ValueError:
        return None
    return x * SCALE.get(unit, 1)

results = []
def check(ok, what, detail):
    results.append(("PASS" if ok else "FAIL", what, detail))

for k in KERNELS:
    r, m = rows.get(k), ncu.get(k)
    if r is None or m is None:
        check(False, f"{k}.present",
              f"rtrace row: {'yes' if r else 'no'} (DeviceInfo and kernel records needed), "
              f"ncu metrics: {'yes' if m else 'no'}")
        continue
    if r.get("error"):
        check(False, f"{k}.computed", r["error"])
        continue
    exact = [
        ("block-size", "Block Size", r["block_size"]),
        ("grid-size", "Grid Size", r["grid_size"]),
        ("threads", "Threads", r["threads"]),
        ("static-smem", "Static Shared Memory Per Block", r["static_shared_memory"]),
        ("dynamic-smem", "Dynamic Shared Memory Per Block", r["dynamic_shared_memory"]),
        ("driver-smem", "Driver Shared Memory Per Block", r["driver_shared_memory"]),
        ("block-limit-registers", "Block Limit Registers", r["block_limit_registers"]),
        ("block-limit-warps", "Block Limit Warps", r["block_limit_warps"]),
        ("block-limit-sm", "Block Limit SM", r["block_limit_sm"]),
        ("active-warps", "Theoretical Active Warps per SM", r["active_warps_per_sm"]),
    ]
    for what, metric, ours in exact:
        theirs = value(m, metric)
        if theirs is None:
            check(False, f"{k}.{what}", f"ncu has no '{metric}'")
            continue
        check(ours is not None and abs(theirs - ours) < 0.5, f"{k}.{what}",
              f"rtrace {ours}, ncu {theirs:g}")
    # ncu gives the registers allocated per thread: whole warps of 256, 8 per thread.
    theirs, ours = value(m, "Registers Per Thread"), r["registers_per_thread"]
    check(theirs is not None and (theirs == ours or theirs == -(-ours // 8) * 8),
          f"{k}.registers", f"rtrace {ours}, ncu {theirs}")
    for what, metric, ours in [
        ("theoretical-occupancy", "Theoretical Occupancy", r["occupancy_percent"]),
        ("waves-per-sm", "Waves Per SM", r["waves_per_sm"]),
    ]:
        theirs = value(m, metric)
        check(theirs is not None and ours is not None and abs(theirs - ours) <= 0.011,
              f"{k}.{what}", f"rtrace {ours}, ncu {theirs}")
    # Shared memory: ncu's limit is for the carveout the driver configured.
    theirs = value(m, "Block Limit Shared Mem")
    config = value(m, "Shared Memory Configuration Size")
    ours = r["block_limit_shared_memory"]
    if theirs is None:
        check(False, f"{k}.block-limit-smem", "ncu has no 'Block Limit Shared Mem'")
    elif config is None or round(config) == r["shared_memory_configuration"]:
        check(ours is not None and abs(theirs - ours) < 0.5, f"{k}.block-limit-smem",
              f"rtrace {ours}, ncu {theirs:g}")
    else:
        alloc = r["allocated_shared_memory_per_block"]
        recomputed = int(round(config)) // alloc if alloc else None
        check(recomputed is not None and abs(theirs - recomputed) < 0.5,
              f"{k}.block-limit-smem",
              f"ncu {theirs:g} with the driver's {config:g} B carveout; rtrace {recomputed} "
              f"for that carveout ({ours} for the {r['shared_memory_configuration']} B "
              f"default it assumes)")
    if k in driver:
        check(driver[k] == r["active_blocks_per_sm"], f"{k}.active-blocks-vs-driver",
              f"rtrace {r['active_blocks_per_sm']}, "
              f"cudaOccupancyMaxActiveBlocksPerMultiprocessor {driver[k]}")
    else:
        check(False, f"{k}.active-blocks-vs-driver", "no line from the program")
    print(f"INFO {k}: rtrace {r['occupancy_percent']}% limited by {', '.join(r['limiters'])}; "
          f"ncu {value(m, 'Theoretical Occupancy')}%; barrier limit: rtrace "
          f"{r['block_limit_barriers']}, ncu {value(m, 'Block Limit Barriers')} (not checked)")

for status, what, detail in results:
    print(f"{status} {what}  ({detail})")
PY
rc=$?
cat "$OUT/compare.txt"
[ "$rc" = 0 ] || fail compare "the comparison script failed (exit $rc)"
PASS=$((PASS + $(grep -c '^PASS ' "$OUT/compare.txt")))
FAIL=$((FAIL + $(grep -c '^FAIL ' "$OUT/compare.txt")))
finish
