#!/usr/bin/env bash
# Kernel profiling (issue 18): does CUPTI 13.0's user replay, with the Checkpoint API restoring
# memory between passes and an L2 flush of our own before each pass, give the DRAM/L2 values
# Nsight Compute gives in its default cache mode (`--cache-control all`)? What does a pass cost?
# Builds tests/gpu/userreplay_probe.cu, runs it in each mode (user-flush, user-noflush, kernel,
# none), runs ncu on mode `none` with the same metrics, default cache control and
# `--cache-control none` (both `--clock-control none`: rtrace does not lock clocks), and prints
# one comparison table (median over REPEATS launches of each kernel), then the cost of each mode.
#
#   OUT=dir bash tests/gpu/userreplay_probe.sh      (from anywhere, on the GPU machine)
#
# Needs the CUDA 13 toolkit (nvcc, ncu, CUPTI with libcheckpoint.so and libnvperf_host.so),
# python3. Env: CUDA_HOME (default /usr/local/cuda-13.0, else /usr/local/cuda), NCU, REPEATS
# (default 3), USERREPLAY_BUDGET_S (default 280: steps that would start later are skipped and
# counted failed), PROBE_* (passed to the probe: see the .cu). Verdict: user-flush against
# ncu-flush within the issue's tolerances (counts 1%, percentages 2 points, durations 5%); the
# increment kernel's sum right in every mode. Last line "N passed, N failed"; exit 0 iff none
# failed. Files in $OUT/userreplay/ when OUT is set: log.txt, each mode's output, ncu's CSVs.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPEATS=${REPEATS:-3}
BUDGET=${USERREPLAY_BUDGET_S:-280}
START=$(date +%s)
W=$(mktemp -d /tmp/userreplay.XXXXXX)
if [ -n "${OUT:-}" ]; then
    DEST=$OUT/userreplay
    mkdir -p "$DEST"
else
    DEST=
fi
LOG=$W/log.txt
: > "$LOG"
say() { printf '%s\n' "$*" | tee -a "$LOG"; }
PASS=0
FAIL=0
pass() { PASS=$((PASS + 1)); say "PASS $1  ($2)"; }
fail() { FAIL=$((FAIL + 1)); say "FAIL $1  ($2)"; }
elapsed() { echo $(( $(date +%s) - START )); }
# budget NAME SECONDS: true if a step of at most SECONDS still fits.
budget() {
    if [ $(( $(elapsed) + $2 )) -gt "$BUDGET" ]; then
        fail "$1" "skipped: $(elapsed) s spent, step may take $2 s, budget $BUDGET s"
        return 1
    fi
}
finish() {
    say "$PASS passed, $FAIL failed"
    if [ -n "$DEST" ]; then cp -f "$W"/*.txt "$W"/*.csv "$DEST"/ 2>/dev/null; fi
    [ "$FAIL" = 0 ]
    exit $?
}

unset LD_PRELOAD CUDA_INJECTION64_PATH RTRACE_OUTPUT RTRACE_METRICS
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0}
[ -x "$CUDA_HOME/bin/nvcc" ] || CUDA_HOME=/usr/local/cuda
NVCC=$CUDA_HOME/bin/nvcc
[ -x "$NVCC" ] || NVCC=$(command -v nvcc || true)
NCU=${NCU:-$CUDA_HOME/bin/ncu}
[ -x "$NCU" ] || NCU=$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu "$CUDA_HOME"/nsight-compute*/ncu 2>/dev/null | tail -1)
# CUPTI: headers and libraries, wherever this toolkit keeps them (as tests/gpu/run.sh looks).
CUPTI_INC=
for d in "$CUDA_HOME/extras/CUPTI/include" "$CUDA_HOME/targets/x86_64-linux/include" "$CUDA_HOME/include"; do
    [ -f "$d/cupti_checkpoint.h" ] && [ -f "$d/cupti_range_profiler.h" ] && { CUPTI_INC=$d; break; }
done
CUPTI_LIB=
for d in "$CUDA_HOME/extras/CUPTI/lib64" "$CUDA_HOME/targets/x86_64-linux/lib" "$CUDA_HOME/lib64"; do
    { [ -e "$d/libcupti.so.13" ] || [ -e "$d/libcupti.so" ]; } && { CUPTI_LIB=$d; break; }
done
# libcheckpoint.so and libnvperf_host.so: beside libcupti normally, found wherever they are.
libdir() {
    local f
    for d in "$CUPTI_LIB" "$CUDA_HOME/extras/CUPTI/lib64" "$CUDA_HOME/targets/x86_64-linux/lib" "$CUDA_HOME/lib64"; do
        [ -n "$d" ] && ls "$d"/$1 > /dev/null 2>&1 && { echo "$d"; return; }
    done
    f=$(find "$CUDA_HOME"/ -name "$1" 2>/dev/null | head -1)
    [ -n "$f" ] && dirname "$f"
}
CKPT_LIB=$(libdir 'libcheckpoint.so*')
NVPERF_LIB=$(libdir 'libnvperf_host.so*')
say "== userreplay probe: $(date -u +%FT%TZ), REPEATS=$REPEATS, work dir $W"
say "nvcc: ${NVCC:-not found}; ncu: ${NCU:-not found}"
say "CUPTI include: ${CUPTI_INC:-not found}; libcupti: ${CUPTI_LIB:-not found}; libcheckpoint: ${CKPT_LIB:-not found}; libnvperf_host: ${NVPERF_LIB:-not found}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null | sed 's/^/GPU: /' | tee -a "$LOG"
if [ -z "$NVCC" ] || [ -z "$CUPTI_INC" ] || [ -z "$CUPTI_LIB" ] || [ -z "$CKPT_LIB" ]; then
    fail userreplay.build "toolkit parts missing (see above)"
    finish
fi
LIBS=$CUPTI_LIB
for d in "$CKPT_LIB" "$NVPERF_LIB"; do
    [ -n "$d" ] && [[ ":$LIBS:" != *":$d:"* ]] && LIBS=$LIBS:$d
done
export LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cupti_link=-lcupti
[ -e "$CUPTI_LIB/libcupti.so" ] || cupti_link=-l:libcupti.so.13
ckpt_link=-lcheckpoint
[ -e "$CKPT_LIB/libcheckpoint.so" ] || ckpt_link=-l:$(cd "$CKPT_LIB" && ls libcheckpoint.so* | head -1)
RPATH=
for d in ${LIBS//:/ }; do RPATH="$RPATH -Xlinker -rpath,$d"; done
PROBE=$W/userreplay_probe
budget userreplay.build 90 || finish
# shellcheck disable=SC2086
if timeout 90 "$NVCC" -O2 -std=c++17 -arch=sm_90 -I"$CUPTI_INC" -o "$PROBE" "$HERE/userreplay_probe.cu" \
    -L"$CUPTI_LIB" -L"$CKPT_LIB" $RPATH "$cupti_link" "$ckpt_link" -lcuda > "$W/build.txt" 2>&1; then
    pass userreplay.build "nvcc -arch=sm_90, $cupti_link $ckpt_link"
else
    fail userreplay.build "$(tail -3 "$W/build.txt" | tr '\n' ' ')"
    finish
fi

# The probe's own modes. Wall time of each process, for the cost table.
for mode in none kernel user-noflush user-flush; do
    budget "userreplay.run-$mode" 60 || continue
    t0=$(date +%s.%N)
    timeout 60 "$PROBE" "$mode" "$REPEATS" > "$W/mode-$mode.txt" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" -v m="$mode" 'BEGIN { printf "WALL %s %.3f\n", m, b - a }' >> "$W/walls.txt"
    check=$(grep '^CHECK ' "$W/mode-$mode.txt" | head -1)
    errs=$(grep -E '^(ERROR|WARN)' "$W/mode-$mode.txt" | head -3 | tr '\n' ' ')
    if [ $rc = 0 ] && [[ "$check" == *" PASS "* ]]; then
        pass "userreplay.run-$mode" "exit 0; $check${errs:+; $errs}"
    else
        fail "userreplay.run-$mode" "exit $rc; ${check:-no CHECK line}; ${errs:-$(tail -2 "$W/mode-$mode.txt" | tr '\n' ' ')}"
    fi
done

# Nsight Compute on mode `none`: default cache control (flush before every pass) and none.
# The probe's default list (userreplay_probe.cu's DEFAULT_METRICS) unless PROBE_METRICS says.
METRICS=${PROBE_METRICS:-dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed}
say "metrics: $METRICS"
for cache in flush noflush; do
    budget "userreplay.ncu-$cache" 90 || continue
    if [ -z "$NCU" ]; then fail "userreplay.ncu-$cache" "ncu not found"; continue; fi
    extra=()
    [ $cache = noflush ] && extra=(--cache-control none)
    t0=$(date +%s.%N)
    # Mode `none` launches only the five kernels (no flush kernel): ncu profiles every launch.
    timeout 90 "$NCU" --metrics "$METRICS" --clock-control none ${extra[@]+"${extra[@]}"} \
        --csv --print-units base "$PROBE" none "$REPEATS" > "$W/ncu-$cache.csv" 2> "$W/ncu-$cache.err.txt"
    rc=$?
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" -v m="ncu-$cache" 'BEGIN { printf "WALL %s %.3f\n", m, b - a }' >> "$W/walls.txt"
    check=$(grep -h '^CHECK ' "$W/ncu-$cache.csv" | head -1)
    if [ $rc = 0 ] && grep -q '"Metric Value"' "$W/ncu-$cache.csv" && [[ "$check" == *" PASS "* ]]; then
        pass "userreplay.ncu-$cache" "exit 0; $(grep -c '^"[0-9]' "$W/ncu-$cache.csv") CSV rows; $check"
    else
        fail "userreplay.ncu-$cache" "exit $rc; ${check:-no CHECK line}; $(grep -h -E 'ERR|WARN' "$W/ncu-$cache.err.txt" "$W/ncu-$cache.csv" | head -3 | tr '\n' ' ')"
    fi
done

# The table and the verdicts.
budget userreplay.compare 30 || finish
python3 - "$W" "$REPEATS" > "$W/compare.txt" 2>&1 <<'PY'
import csv, re, statistics, sys, os

w = sys.argv[1]
KERNELS = ["increment", "coalesced_load", "coalesced_sum", "strided_load", "compute_bound"]
MODES = ["user-flush", "user-noflush", "kernel"]

def med(v):
    v = [x for x in v if x == x]
    return statistics.median(v) if v else float("nan")

def probe(mode):
    """{(kernel, metric): [values]}, {kernel: [passes]}, {kernel: [cost dicts]}"""
    vals, passes, costs = {}, {}, {}
    path = os.path.join(w, f"mode-{mode}.txt")
    if not os.path.exists(path):
        return vals, passes, costs
    for line in open(path):
        f = line.split()
        if not f:
            continue
        if f[0] == "METRIC" and len(f) == 6:
            vals.setdefault((f[2], f[4]), []).append(float(f[5]))
        elif f[0] == "PASSES" and len(f) == 6:
            passes.setdefault(f[2], []).append(int(f[4]))
        elif f[0] == "COST" and len(f) >= 4:
            costs.setdefault(f[2], []).append({k: float(v) for k, v in (x.split("=") for x in f[4:])})
    return vals, passes, costs

def base(name):
    name = name.removeprefix("void ").strip()
    for stop in ("(", "<"):
        name = name.split(stop)[0]
    return name.split("::")[-1].strip()

def ncu(cache):
    """{(kernel, metric): [values]} and {kernel: passes} from ncu's CSV and its ==PROF== lines."""
    vals, passes, header = {}, {}, None
    path = os.path.join(w, f"ncu-{cache}.csv")
    if not os.path.exists(path):
        return vals, passes
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if row and row[0] == "ID":
                header = row
                continue
            if header is None or len(row) != len(header):
                continue
            r = dict(zip(header, row))
            try:
                v = float(r["Metric Value"].replace(",", ""))
            except ValueError:
                v = float("nan")
            vals.setdefault((base(r["Kernel Name"]), r["Metric Name"]), []).append(v)
    for p in (path, os.path.join(w, f"ncu-{cache}.err.txt")):
        if os.path.exists(p):
            for line in open(p, errors="replace"):
                m = re.search(r'==PROF== Profiling "([^"]+)".*?(\d+) pass', line)
                if m:
                    passes.setdefault(base(m.group(1)), int(m.group(2)))
    return vals, passes

metric_order = []
probes = {m: probe(m) for m in MODES}
ncus = {c: ncu(c) for c in ("flush", "noflush")}
for src in [p[0] for p in probes.values()] + [n[0] for n in ncus.values()]:
    for (_k, m) in src:
        if m not in metric_order:
            metric_order.append(m)

def verdict(metric, ours, theirs, row):
    """(agree, how) for user-flush against ncu-flush: the issue's tolerances."""
    if ours != ours or theirs != theirs:
        return False, "missing"
    diff, scale = abs(ours - theirs), max(abs(ours), abs(theirs))
    if metric.endswith("hit_rate.pct"):
        sectors = row.get("lts__t_sectors_srcunit_tex_op_read.sum", float("nan"))
        if sectors == sectors and sectors < 32768:
            return True, "low traffic (<1 MiB read)"
        return diff <= 2.0, "2 points"
    if "pct" in metric:
        return diff <= 2.0, "2 points"
    if metric.startswith("gpu__time_duration") or metric.endswith(".per_second"):
        return diff <= 0.05 * scale, "5%"
    if "bytes" in metric and scale < 65536:
        return True, "under 64 KiB"
    if "bytes" not in metric and scale < 1000:
        return True, "under 1000"
    return diff <= 0.01 * scale, "1%"

def fmt(v):
    if v != v:
        return "-"
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e4, "k")):
        if abs(v) >= div:
            return f"{v / div:.4g}{suffix}"
    return f"{v:.2f}"

print("Medians over the launches of each kernel (REPEATS); bytes, ns, %, sectors.")
print(f"{'kernel':<15} {'metric':<66} {'ncu-flush':>10} {'ncu-noflush':>11} {'user-flush':>10} "
      f"{'user-noflush':>12} {'kernel':>10}  verdict (user-flush vs ncu-flush)")
npass = nfail = 0
for k in KERNELS:
    row_uf = {m: med(probes["user-flush"][0].get((k, m), [])) for m in metric_order}
    for m in metric_order:
        nf = med(ncus["flush"][0].get((k, m), []))
        nn = med(ncus["noflush"][0].get((k, m), []))
        uf = row_uf[m]
        un = med(probes["user-noflush"][0].get((k, m), []))
        kr = med(probes["kernel"][0].get((k, m), []))
        ok, how = verdict(m, uf, nf, row_uf)
        npass += ok
        nfail += not ok
        print(f"{k:<15} {m:<66} {fmt(nf):>10} {fmt(nn):>11} {fmt(uf):>10} {fmt(un):>12} {fmt(kr):>10}  "
              f"{'agree' if ok else 'DIFFER'} ({how})")
print()
# For scale, the other pairs under the same tolerances (information only, not counted).
for ours, theirs in (("user-noflush", "noflush"), ("kernel", "noflush"), ("kernel", "flush")):
    n = bad = 0
    for k in KERNELS:
        row = {m: med(probes[ours][0].get((k, m), [])) for m in metric_order}
        for m in metric_order:
            ok, _how = verdict(m, row[m], med(ncus[theirs][0].get((k, m), [])), row)
            n += 1
            bad += not ok
    print(f"info: {ours} against ncu-{theirs}: {n - bad} of {n} agree")
print()
print("Passes per launch:")
for k in KERNELS:
    cells = [f"ncu-{c} {ncus[c][1].get(k, '-')}" for c in ("flush", "noflush")]
    cells += [f"{m} {med(probes[m][1].get(k, [])):.0f}" if probes[m][1].get(k) else f"{m} -" for m in MODES]
    print(f"  {k:<15} " + ", ".join(cells))
print()
walls = {}
if os.path.exists(os.path.join(w, "walls.txt")):
    for line in open(os.path.join(w, "walls.txt")):
        f = line.split()
        walls[f[1]] = float(f[2])
print("Cost of profiling one launch (medians over kernels x REPEATS), ms:")
print(f"  {'mode':<13} {'launch':>9} {'pass':>8} {'passes':>6} {'setconfig':>9} {'save':>7} {'restore':>8} "
      f"{'flush':>7} {'run':>8} {'decode':>7} {'eval':>6} {'free':>6}  process wall s")
for m in ["none"] + MODES:
    _v, _p, costs = probe(m)
    allc = [c for k in KERNELS for c in costs.get(k, [])]
    if not allc:
        print(f"  {m:<13} -")
        continue
    g = lambda key: med([c.get(key, float("nan")) for c in allc])
    print(f"  {m:<13} {g('total_ms'):>9.3f} {g('per_pass_ms'):>8.3f} {g('passes'):>6.0f} {g('setconfig_ms'):>9.3f} "
          f"{g('save_ms'):>7.3f} {g('restore_ms'):>8.3f} {g('flush_ms'):>7.3f} {g('run_ms'):>8.3f} "
          f"{g('decode_ms'):>7.3f} {g('eval_ms'):>6.3f} {g('free_ms'):>6.3f}  {walls.get(m, float('nan')):.1f}")
    for k in KERNELS:
        cs = costs.get(k, [])
        if cs:
            print(f"      {k:<15} launch {med([c['total_ms'] for c in cs]):9.3f} ms, "
                  f"pass {med([c['per_pass_ms'] for c in cs]):8.3f} ms, passes {med([c['passes'] for c in cs]):.0f}")
nlaunch = len(KERNELS) * int(sys.argv[2])
for c in ("flush", "noflush"):
    if f"ncu-{c}" in walls and "none" in walls:
        added = walls[f"ncu-{c}"] - walls["none"]
        p = med(list(ncus[c][1].values())) if ncus[c][1] else float("nan")
        print(f"  ncu-{c:<9} process wall {walls[f'ncu-{c}']:.1f} s (none: {walls['none']:.1f} s): "
              f"{1000 * added / nlaunch:.1f} ms a launch, {1000 * added / nlaunch / p if p == p and p else float('nan'):.1f} ms a pass "
              f"({nlaunch} launches, {p:.0f} passes each; includes ncu's start-up)")
print(f"COMPARE {npass} {nfail}")
PY
sed '/^COMPARE /d' "$W/compare.txt" | tee -a "$LOG"
read -r _ cpass cfail <<< "$(grep '^COMPARE ' "$W/compare.txt")"
if [ -n "${cpass:-}" ]; then
    PASS=$((PASS + cpass))
    FAIL=$((FAIL + cfail))
    say "comparison user-flush against ncu-flush: $cpass agree, $cfail differ (counted below)"
else
    fail userreplay.compare "no comparison: $(tail -3 "$W/compare.txt" | tr '\n' ' ')"
fi
finish
