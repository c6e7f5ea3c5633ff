#!/usr/bin/env bash
# tests/gpu/run.sh — rtrace's proof on a real GPU.
#
# Run from anywhere (it changes to the repository root) on the GPU machine,
# with target/release/librtrace.so and target/release/rtrace built elsewhere
# and carried along.  Needs: nvidia driver, CUDA 13 toolkit (nvcc, CUPTI),
# gcc, python3 with PyTorch.  No network, no Rust.
#
# For each program (driver_api, vector_add with shared and with static cudart,
# a PyTorch training step) it runs the program untraced, then under
# librtrace.so and the CUPTI reference counter (tests/gpu/cupti_counter.so)
# at once, then under librtrace.so alone, and checks: same stdout and exit
# status as untraced, trace files written, `rtrace report` works, and
# rtrace's per-function call counts equal CUPTI's (tests/gpu/compare.py).
# `rtrace record` is exercised on one program, and for exit-status passing.
#
# Every step is a named check; the script never stops at a failure.  The last
# line is "N passed, N failed"; the exit status is 0 iff none failed.
#
# Files under $OUT (default ./gpu-out), few on purpose:
#   log.txt               everything this script printed
#   libcuda-exports.txt   nm -D --defined-only of libcuda.so.1, cu* symbols
#   report-<label>.txt    `rtrace report` table of the rtrace-alone run
#   all.tgz               the work directory: traces, JSON reports, CUPTI counts,
#                         program outputs, comparisons, build logs
# Variables: OUT; RTRACE_GPU_BUDGET_S (default 390: steps that would start
# later are skipped and counted as failed); RTRACE_GPU_DEBUG (default 1:
# RTRACE_DEBUG=1 in traced runs, its stderr kept in all.tgz); CUDA_HOME
# (default /usr/local/cuda-13.0); LIBCUDA (default: found); RTRACE_GPU_STEPS (default
# all: the steps to run, of build programs profiler activity shared compiled descriptors frameworks
# peer nvtx memsync python edge pcsamp profile crash record; the environment is always
# checked);
# RTRACE_OLD (an rtrace of the build before, for memsync's byte-for-byte comparison; without
# it that check is skipped and said).

set -u
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/log.txt
WORK=$(mktemp -d /tmp/rtrace-gpu.XXXXXX) || exit 2
BIN=$WORK/bin
mkdir -p "$BIN"
BUDGET=${RTRACE_GPU_BUDGET_S:-390}
STEPS=${RTRACE_GPU_STEPS:-all}
GPU_DEBUG=${RTRACE_GPU_DEBUG:-1}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0}
LIBRTRACE=$ROOT/target/release/librtrace.so
RTRACE=$ROOT/target/release/rtrace

# Nothing of a caller's tracing set-up may leak into the runs.
unset LD_PRELOAD CUDA_INJECTION64_PATH CUPTI_COUNT_OUTPUT RTRACE_OUTPUT RTRACE_DISABLE \
    RTRACE_DEBUG RTRACE_CUDA_LIBRARY RTRACE_SIMULATED NVTX_INJECTION64_PATH

PASS=0
FAIL=0
RESULTS=()

log() { printf '[%4ds] %s\n' "$SECONDS" "$*"; }
section() { printf '\n[%4ds] ==== %s ====\n' "$SECONDS" "$*"; }
pass() {
    PASS=$((PASS + 1))
    RESULTS+=("PASS $1${2:+  ($2)}")
    log "PASS $1${2:+  ($2)}"
}
fail() {
    FAIL=$((FAIL + 1))
    RESULTS+=("FAIL $1${2:+  ($2)}")
    log "FAIL $1${2:+  ($2)}"
}
# check NAME DETAIL CMD...: runs CMD, passes iff it exits 0.
check() {
    local name=$1 detail=$2
    shift 2
    if "$@"; then pass "$name" "$detail"; else fail "$name" "$detail"; fi
}
time_left() { echo $((BUDGET - SECONDS)); }
# want STEP: whether RTRACE_GPU_STEPS asks for STEP.
want() { [ "$STEPS" = all ] || [[ " $STEPS " == *" $1 "* ]]; }
# bounded N CMD...: CMD under a timeout of N seconds, or less if the budget is nearly spent.
bounded() {
    local n=$1 left
    shift
    left=$(time_left)
    [ "$left" -lt "$n" ] && n=$left
    [ "$n" -lt 15 ] && n=15
    timeout -k 5 "$n" "$@"
}
# indent FILE [N]: the last N (default 20) lines of FILE, indented.
tail_of() { [ -s "$1" ] && tail -n "${2:-20}" "$1" | sed 's/^/      | /'; }

# ---------------------------------------------------------------------------
step_environment() {
    section "environment"
    log "repo root: $ROOT; OUT=$OUT; work dir: $WORK; budget ${BUDGET}s"
    uname -a
    (ldd --version 2>&1 | head -n 1) || true
    if bounded 30 nvidia-smi -L; then
        pass env.nvidia-smi "$(bounded 30 nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>/dev/null | head -n 1)"
    else
        fail env.nvidia-smi "nvidia-smi -L failed"
    fi
    NVCC=$CUDA_HOME/bin/nvcc
    [ -x "$NVCC" ] || NVCC=$(command -v nvcc || echo nvcc)
    bounded 30 "$NVCC" --version || log "nvcc --version failed ($NVCC)"
    bounded 60 python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -n 1

    # The real driver.
    LIBCUDA=${LIBCUDA:-}
    if [ -z "$LIBCUDA" ]; then
        for c in /usr/local/nvidia/lib64/libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/lib64/libcuda.so.1; do
            [ -e "$c" ] && { LIBCUDA=$c; break; }
        done
    fi
    if [ -z "$LIBCUDA" ]; then
        LIBCUDA=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 .*x86-64/ {print $NF; exit}')
    fi
    log "libcuda: ${LIBCUDA:-not found} -> $(readlink -f "${LIBCUDA:-/nonexistent}" 2>/dev/null)"
    if [ -n "$LIBCUDA" ] && nm -D --defined-only "$LIBCUDA" | awk '$3 ~ /^cu/' >"$OUT/libcuda-exports.txt" &&
        [ -s "$OUT/libcuda-exports.txt" ]; then
        local total text ptx
        total=$(wc -l <"$OUT/libcuda-exports.txt")
        text=$(awk '$2=="T"' "$OUT/libcuda-exports.txt" | wc -l)
        ptx=$(awk '$2=="T" && $3 ~ /_(ptds|ptsz)$/' "$OUT/libcuda-exports.txt" | wc -l)
        pass env.libcuda-exports "$total cu* symbols, $text functions (T), $ptx _ptds/_ptsz"
    else
        fail env.libcuda-exports "could not list the exports of '${LIBCUDA:-}'"
    fi

    # The artifacts under test.
    if [ -f "$LIBRTRACE" ] && [ -x "$RTRACE" ]; then
        ls -l "$LIBRTRACE" "$RTRACE"
        local missing
        missing=$( (ldd "$LIBRTRACE"; ldd "$RTRACE") 2>&1 | grep -c 'not found')
        if [ "$missing" = 0 ]; then
            pass env.artifacts "librtrace.so and rtrace present, libraries resolve"
        else
            (ldd "$LIBRTRACE"; ldd "$RTRACE") 2>&1 | grep 'not found'
            fail env.artifacts "unresolved libraries"
        fi
    else
        fail env.artifacts "missing $LIBRTRACE or $RTRACE"
    fi
}

# ---------------------------------------------------------------------------
step_coverage() {
    section "coverage of the driver's exports"
    local f=$WORK/check-coverage.txt
    if [ ! -f tools/check-coverage.py ]; then
        fail coverage "tools/check-coverage.py is missing"
        return
    fi
    bounded 120 python3 tools/check-coverage.py --wrapped "$LIBRTRACE" --driver "${LIBCUDA:-}" \
        --allow-missing >"$f" 2>&1
    local rc=$?
    tail_of "$f" 40
    # The count of exports that are not wrapped, however the tool words it.
    local n
    n=$(python3 - "$f" <<'EOF'
import re, sys
text = open(sys.argv[1], errors="replace").read()
pats = [r"(\d+)\s+(?:\w+\s+){0,3}not\s+wrapped", r"not\s+wrapped\W{0,3}(\d+)",
        r"(\d+)\s+(?:\w+\s+){0,2}missing", r"missing\W{0,3}(\d+)", r"unwrapped\s*[:=]?\s*(\d+)",
        r"(\d+)\s+unwrapped"]
for p in pats:
    m = re.search(p, text, re.I)
    if m:
        print(m.group(1)); break
else:
    print("?")
EOF
)
    if [ "$n" = 0 ]; then
        pass coverage "0 exports not wrapped (tool rc=$rc)"
    else
        fail coverage "not wrapped: $n (tool rc=$rc; see check-coverage.txt in all.tgz)"
    fi
}

# ---------------------------------------------------------------------------
step_build() {
    section "build"
    # CUPTI: headers and library, wherever this toolkit keeps them.
    CUPTI_INC=
    for d in "$CUDA_HOME/targets/x86_64-linux/include" "$CUDA_HOME/extras/CUPTI/include" "$CUDA_HOME/include"; do
        [ -f "$d/cupti.h" ] && { CUPTI_INC=$d; break; }
    done
    CUPTI_LIB=
    for d in "$CUDA_HOME/targets/x86_64-linux/lib" "$CUDA_HOME/extras/CUPTI/lib64" "$CUDA_HOME/lib64"; do
        [ -e "$d/libcupti.so.13" ] || [ -e "$d/libcupti.so" ] && { CUPTI_LIB=$d; break; }
    done
    CUDA_INC=$CUDA_HOME/include
    [ -f "$CUDA_INC/cuda.h" ] || CUDA_INC=$CUDA_HOME/targets/x86_64-linux/include
    log "CUPTI include: ${CUPTI_INC:-not found}; CUPTI lib: ${CUPTI_LIB:-not found}; cuda.h in $CUDA_INC"

    local cupti_link=-lcupti
    [ -n "$CUPTI_LIB" ] && [ ! -e "$CUPTI_LIB/libcupti.so" ] && cupti_link=-l:libcupti.so.13
    check build.cupti_counter "gcc -shared, $cupti_link" \
        bounded 60 gcc -shared -fPIC -O2 -Wall -o "$BIN/cupti_counter.so" tests/gpu/cupti_counter.c \
        -I"${CUPTI_INC:-$CUDA_INC}" -I"$CUDA_INC" -L"${CUPTI_LIB:-$CUDA_HOME/lib64}" "$cupti_link" \
        -Wl,-rpath,"${CUPTI_LIB:-$CUDA_HOME/lib64}"
    [ -f "$BIN/cupti_counter.so" ] && nm -D --defined-only "$BIN/cupti_counter.so" | grep -w InitializeInjection

    # sm_90 machine code for the H100/H200, and compute_75 PTX for any other GPU.
    local arch=(-gencode "arch=compute_90,code=sm_90" -gencode "arch=compute_75,code=compute_75")
    check build.vector_add_shared "nvcc -cudart shared" \
        bounded 120 "$NVCC" -O2 "${arch[@]}" -cudart shared -Xlinker -rpath -Xlinker "$CUDA_HOME/lib64" \
        -o "$BIN/vector_add" samples/vector_add.cu
    [ -f "$BIN/vector_add" ] && (ldd "$BIN/vector_add" | grep -E 'cudart|cuda\.so') || true
    check build.vector_add_static "nvcc, static cudart" \
        bounded 120 "$NVCC" -O2 "${arch[@]}" -o "$BIN/vector_add_static" samples/vector_add.cu

    local cuda_link=(-L"$CUDA_HOME/lib64/stubs" -lcuda)
    if [ ! -e "$CUDA_HOME/lib64/stubs/libcuda.so" ]; then
        cuda_link=(-L"$(dirname "${LIBCUDA:-/usr/local/nvidia/lib64/libcuda.so.1}")" -l:libcuda.so.1)
    fi
    check build.driver_api "gcc ${cuda_link[*]}" \
        bounded 60 gcc -O2 -Wall -I"$CUDA_INC" -o "$BIN/driver_api" samples/driver_api.c "${cuda_link[@]}" -lm
    [ -f "$BIN/driver_api" ] && (ldd "$BIN/driver_api" | grep -E 'cuda') || true
}

# ---------------------------------------------------------------------------
# run_mode LABEL MODE TIMEOUT [NAME=VALUE...] -- CMD...: runs CMD with those
# variables, stdout/stderr/status to $WORK/LABEL-MODE.{out,err,rc}.
run_mode() {
    local label=$1 mode=$2 tmo=$3
    shift 3
    local envs=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        envs+=("$1")
        shift
    done
    shift
    local left
    left=$(time_left)
    [ "$tmo" -gt "$left" ] && tmo=$left
    if [ "$tmo" -lt 10 ]; then
        log "  skip $label/$mode: time budget spent"
        echo skipped >"$WORK/$label-$mode.rc"
        return 125
    fi
    local t0=$SECONDS
    timeout -k 5 "$tmo" env "${envs[@]}" "$@" >"$WORK/$label-$mode.out" 2>"$WORK/$label-$mode.err" </dev/null
    local rc=$?
    echo "$rc" >"$WORK/$label-$mode.rc"
    log "  ran $label/$mode: exit $rc in $((SECONDS - t0)) s${envs[*]:+ with ${envs[*]}}"
    # 137 is also a program killed on purpose (the crash step's SIGKILL): a time-out only
    # when the time was up.
    if [ "$rc" = 124 ] || { [ "$rc" = 137 ] && [ $((SECONDS - t0)) -ge "$tmo" ]; }; then
        log "  $label/$mode: TIMED OUT after ${tmo}s"
    fi
    return "$rc"
}

# same_as_untraced LABEL MODE: stdout and exit status equal to the untraced run's.
same_as_untraced() {
    local label=$1 mode=$2
    local rc0 rc1
    rc0=$(cat "$WORK/$label-untraced.rc" 2>/dev/null)
    rc1=$(cat "$WORK/$label-$mode.rc" 2>/dev/null)
    if [ "$rc0" = "$rc1" ] && cmp -s "$WORK/$label-untraced.out" "$WORK/$label-$mode.out"; then
        pass "$label.$mode.same-output" "exit $rc1, $(wc -l <"$WORK/$label-$mode.out") stdout lines"
    else
        fail "$label.$mode.same-output" "exit $rc1 vs untraced $rc0"
        diff "$WORK/$label-untraced.out" "$WORK/$label-$mode.out" | head -n 20 | sed 's/^/      diff| /'
        log "    stderr of $label/$mode:"
        tail_of "$WORK/$label-$mode.err" 25
    fi
}

# traces_of GLOB...: the existing, non-empty files among the glob's matches.
traces_of() {
    local f
    for f in "$@"; do [ -s "$f" ] && echo "$f"; done
}

# report_json LABEL MODE FILE...: rtrace report --format json → $WORK/LABEL-MODE.json; check.
report_json() {
    local label=$1 mode=$2
    shift 2
    local j=$WORK/$label-$mode.json
    bounded 60 "$RTRACE" report --format json "$@" >"$j" 2>"$WORK/$label-$mode.report.err"
    local rc=$?
    local summary
    summary=$(python3 - "$j" <<'EOF' 2>&1
import json, sys
text = open(sys.argv[1]).read()
doc = json.loads(text[text.find("{"):])
api = doc["api"]
procs = doc.get("processes", [])
dropped = sum(int(p.get("dropped") or 0) for p in procs)
print(f"{len(procs)} processes, {len(api)} functions, {sum(int(r['calls']) for r in api)} calls, "
      f"{sum(int(r.get('errors') or 0) for r in api)} errors, dropped {dropped}")
sys.exit(0 if api else 1)
EOF
)
    local ok=$?
    if [ "$rc" = 0 ] && [ "$ok" = 0 ]; then
        pass "$label.$mode.report" "$summary"
        return 0
    fi
    fail "$label.$mode.report" "rtrace report rc=$rc; $summary"
    tail_of "$WORK/$label-$mode.report.err" 10
    return 1
}

# compare_cupti LABEL MODE CUPTI_PREFIX: compare.py on LABEL-MODE.json.
compare_cupti() {
    local label=$1 mode=$2 prefix=$3
    shift 3
    local c=$WORK/compare-$label-$mode.txt
    local extra=("$@")
    [ -n "${CUPTI_INC:-}" ] && [ -f "$CUPTI_INC/cupti_driver_cbid.h" ] && extra+=(--cbid-header "$CUPTI_INC/cupti_driver_cbid.h")
    [ -s "$OUT/libcuda-exports.txt" ] && extra+=(--exports "$OUT/libcuda-exports.txt")
    bounded 60 python3 tests/gpu/compare.py --label "$label.$mode" --rtrace-trace "$WORK/rtrace-$label-$mode-"*.bin \
        --cupti "$prefix" "${extra[@]}" >"$c" 2>&1
    local rc=$?
    sed 's/^/    /' "$c" | head -n 80
    local verdict
    verdict=$(tail -n 1 "$c")
    if [ "$rc" = 0 ] && [[ "$verdict" == MATCH* ]]; then
        pass "$label.$mode.cupti-match" "$verdict"
    else
        fail "$label.$mode.cupti-match" "$verdict"
    fi
}

# rtrace_vs_rtrace LABEL: informational: which counts CUPTI's presence changed.
rtrace_vs_rtrace() {
    local label=$1
    [ -s "$WORK/$label-both.json" ] && [ -s "$WORK/$label-rtrace.json" ] || return 0
    python3 - "$WORK/$label-rtrace.json" "$WORK/$label-both.json" <<'EOF'
import json, sys
def load(p):
    t = open(p).read(); d = json.loads(t[t.find("{"):])
    out = {}
    for r in d["api"]:
        out[r["function"]] = out.get(r["function"], 0) + int(r["calls"])
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
diff = [(n, a.get(n, 0), b.get(n, 0)) for n in sorted(set(a) | set(b)) if a.get(n, 0) != b.get(n, 0)]
print(f"    info: rtrace alone vs rtrace+CUPTI: {len(diff)} functions with different counts")
for n, x, y in diff[:25]:
    print(f"      {n:<40} alone {x:>7}  with CUPTI {y:>7}")
EOF
}

# one_program LABEL TIMEOUT CMD...
one_program() {
    local label=$1 tmo=$2
    shift 2
    section "program $label: $*"
    if [ "$(time_left)" -lt 20 ]; then
        fail "$label" "skipped: time budget spent"
        return
    fi
    local dbg=()
    [ "$GPU_DEBUG" = 1 ] && dbg=(RTRACE_DEBUG=1)

    # 1. untraced
    run_mode "$label" untraced "$tmo" -- "$@"
    local rc0=$?
    if [ "$rc0" = 0 ] && grep -q ': OK$' "$WORK/$label-untraced.out"; then
        pass "$label.untraced" "$(grep ': OK$' "$WORK/$label-untraced.out")"
    else
        fail "$label.untraced" "exit $rc0; the program itself fails"
        tail_of "$WORK/$label-untraced.err" 20
    fi

    # 2. rtrace and CUPTI together
    run_mode "$label" both "$tmo" \
        CUDA_INJECTION64_PATH="$BIN/cupti_counter.so" CUPTI_COUNT_OUTPUT="$WORK/cupti-$label-both" \
        RTRACE_OUTPUT="$WORK/rtrace-$label-both-%p.bin" LD_PRELOAD="$LIBRTRACE" "${dbg[@]}" -- "$@"
    same_as_untraced "$label" both
    local files
    mapfile -t files < <(traces_of "$WORK/rtrace-$label-both-"*.bin)
    if [ "${#files[@]}" -gt 0 ]; then
        pass "$label.both.trace" "${#files[@]} file(s), $(du -ch "${files[@]}" | tail -n 1 | cut -f1)"
        report_json "$label" both "${files[@]}" && compare_cupti "$label" both "$WORK/cupti-$label-both"
    else
        fail "$label.both.trace" "no trace file $WORK/rtrace-$label-both-*.bin"
        tail_of "$WORK/$label-both.err" 15
    fi

    # 3. rtrace alone
    run_mode "$label" rtrace "$tmo" \
        RTRACE_OUTPUT="$WORK/rtrace-$label-rtrace-%p.bin" LD_PRELOAD="$LIBRTRACE" "${dbg[@]}" -- "$@"
    same_as_untraced "$label" rtrace
    mapfile -t files < <(traces_of "$WORK/rtrace-$label-rtrace-"*.bin)
    if [ "${#files[@]}" -gt 0 ]; then
        pass "$label.rtrace.trace" "${#files[@]} file(s), $(du -ch "${files[@]}" | tail -n 1 | cut -f1)"
        report_json "$label" rtrace "${files[@]}"
        if bounded 60 "$RTRACE" report --format table "${files[@]}" >"$OUT/report-$label.txt" 2>"$WORK/$label-table.err" ||
            bounded 60 "$RTRACE" report "${files[@]}" >"$OUT/report-$label.txt" 2>>"$WORK/$label-table.err"; then
            pass "$label.rtrace.report-table" "$(wc -l <"$OUT/report-$label.txt") lines in report-$label.txt"
        else
            fail "$label.rtrace.report-table" "rtrace report (table) failed"
            tail_of "$WORK/$label-table.err" 10
        fi
        rtrace_vs_rtrace "$label"
    else
        fail "$label.rtrace.trace" "no trace file $WORK/rtrace-$label-rtrace-*.bin"
        tail_of "$WORK/$label-rtrace.err" 15
    fi
}

# ---------------------------------------------------------------------------
# rtrace_own_calls JSON: the driver calls rtrace makes itself with GPU activity on (it describes
# each device: CUPTI's counter counts those calls), for compare.py --rtrace-own.
rtrace_own_calls() {
    local devices attrs
    devices=$(python3 -c 'import json,sys; t=open(sys.argv[1]).read(); print(len(json.loads(t[t.find("{"):])["resources"]["devices"]))' "$1" 2>/dev/null || echo 0)
    attrs=$(awk '/pub const DEVICE_ATTRIBUTES/,/^];/' inject/format/src/device.rs | grep -c '^ *(')
    echo "cuDeviceGetCount=1,cuDeviceGet=$devices,cuDeviceGetName=$devices,cuDeviceTotalMem_v2=$devices,cuDeviceGetAttribute=$((devices * attrs))"
}

step_record() {
    local label=$1 tmo=$2
    shift 2
    section "rtrace record: $label"
    if [ "$(time_left)" -lt 20 ]; then
        fail "$label.record" "skipped: time budget spent"
        return
    fi
    # The same program through the CLI, with CUPTI alongside.
    run_mode "$label" record "$tmo" \
        CUDA_INJECTION64_PATH="$BIN/cupti_counter.so" CUPTI_COUNT_OUTPUT="$WORK/cupti-$label-record" \
        -- "$RTRACE" record --output "$WORK/rtrace-$label-record-%p.bin" -- "$@"
    same_as_untraced "$label" record
    local files
    mapfile -t files < <(traces_of "$WORK/rtrace-$label-record-"*.bin)
    if [ "${#files[@]}" -gt 0 ]; then
        pass "$label.record.trace" "${#files[@]} file(s)"
        # rtrace record records GPU activity by default: rtrace's own calls are set aside.
        report_json "$label" record "${files[@]}" &&
            compare_cupti "$label" record "$WORK/cupti-$label-record" --rtrace-own "$(rtrace_own_calls "$WORK/$label-record.json")"
    else
        fail "$label.record.trace" "no trace file $WORK/rtrace-$label-record-*.bin"
        tail_of "$WORK/$label-record.err" 15
    fi

    # Exit status passing: a program that exits 3, and one killed by a signal.
    run_mode exit3 record 30 -- "$RTRACE" record --output "$WORK/rtrace-exit3-%p.bin" -- sh -c 'echo hi; exit 3'
    local rc=$?
    check record.exit-status "rtrace record -- sh -c 'exit 3' returned $rc" test "$rc" = 3
    run_mode sigterm record 30 -- "$RTRACE" record --output "$WORK/rtrace-sigterm-%p.bin" -- sh -c 'kill -TERM $$'
    rc=$?
    # A shell reports a child killed by SIGTERM as 128+15.
    check record.signal-status "rtrace record -- (killed by SIGTERM) returned $rc, want 143" test "$rc" = 143
}

# ---------------------------------------------------------------------------
# The PyTorch profiler (a CUPTI client) inside a traced program must keep working, with and
# without GPU activity (rtrace interposes cuptiSubscribe and cuptiActivityRegisterCallbacks).
step_profiler() {
    section "PyTorch profiler inside traced programs"
    local want got mode
    want=$(bounded 120 python3 tests/gpu/profiler_step.py 2>"$WORK/profiler-untraced.err" | tail -n 1)
    log "untraced: $want"
    for mode in api gpu; do
        local extra=()
        [ "$mode" = gpu ] && extra=(RTRACE_GPU_ACTIVITY=1)
        got=$(bounded 120 env RTRACE_OUTPUT="$WORK/rtrace-profiler-$mode-%p.bin" RTRACE_DEBUG=1 "${extra[@]}" \
            LD_PRELOAD="$LIBRTRACE" python3 tests/gpu/profiler_step.py 2>"$WORK/profiler-$mode.err" | tail -n 1)
        check "profiler.$mode" "rtrace ($mode): '$got', untraced: '$want'" \
            test -n "$want" -a "$got" = "$want" -a "${want#profiler kernels 0 }" = "$want"
    done
    grep -h "gpu activity" "$WORK/profiler-gpu.err" | sed 's/^/    /' | head -n 5
}

# ---------------------------------------------------------------------------
# GPU activity (RTRACE_GPU_ACTIVITY=1) on a sample with streams, threads, a graph, every copy
# direction and memsets: every record present and linked to its call.
step_activity() {
    section "GPU activity: streams, threads, a graph, copies, memsets"
    if ! bounded 120 "$CUDA_HOME/bin/nvcc" -O2 -o "$BIN/activity_sample" tests/gpu/activity_sample.cu \
        >"$WORK/build-activity.log" 2>&1; then
        fail activity.build "nvcc failed"
        tail_of "$WORK/build-activity.log" 10
        return
    fi
    local line
    line=$(bounded 60 env RTRACE_GPU_ACTIVITY=1 RTRACE_OUTPUT="$WORK/rtrace-activity-%p.bin" \
        LD_PRELOAD="$LIBRTRACE" "$BIN/activity_sample" 2>"$WORK/activity.err" | tail -n 1)
    log "sample: $line"
    local out
    out=$(python3 tests/gpu/activity_check.py "$line" "$WORK"/rtrace-activity-*.bin 2>&1)
    checks_from "$out"
    # Modules: the driver-API sample loads one (cuModuleLoadData) and unloads it.
    if [ -x "$BIN/driver_api" ]; then
        bounded 60 env RTRACE_GPU_ACTIVITY=1 RTRACE_MODULE_IMAGES=1 RTRACE_OUTPUT="$WORK/rtrace-modules-%p.bin" \
            LD_PRELOAD="$LIBRTRACE" "$BIN/driver_api" >/dev/null 2>"$WORK/modules.err"
        local modules
        modules=$(bounded 60 "$RTRACE" report --format json "$WORK"/rtrace-modules-*.bin 2>"$WORK/modules-report.err" |
            python3 -c 'import json, sys
m = json.load(sys.stdin)["resources"]["modules"]
print(" ".join("%s->%s:%s" % (x["loaded_by"], x["unloaded_by"], x["functions"]) for x in m))' 2>&1)
        check activity.module-unload "modules (loaded by -> unloaded by: functions): $modules" \
            test "$modules" = "cuModuleLoadData->cuModuleUnload:2"
        local images
        images=$(python3 -c 'import sys; sys.path.insert(0, "tests/gpu"); import tracefile
imgs = [i for f in sys.argv[1:] for i in tracefile.read_module_images(f)]
print(" ".join("size=%d crc=%x elf=%s" % (i["size"], i["crc"], "zstd" if i["bytes"] is None and i["zstd"] else i["bytes"] is not None and i["bytes"][:4] == b"\x7fELF" and len(i["bytes"]) == i["size"]) for i in imgs))' \
            "$WORK"/rtrace-modules-*.bin 2>&1)
        # A zstd frame this machine's Python cannot open (no zstd module, no zstd tool): rtrace
        # itself decompresses it and reads its ELF when `rtrace sass` lists the module's kernels
        # with their instructions.
        case "$images" in
        *"elf=zstd"*)
            local listed
            local nvdisasm=()
            [ -x "$CUDA_HOME/bin/nvdisasm" ] && nvdisasm=(--nvdisasm "$CUDA_HOME/bin/nvdisasm")
            listed=$(bounded 60 "$RTRACE" sass "${nvdisasm[@]}" "$WORK"/rtrace-modules-*.bin 2>&1 | grep -c ' instructions')
            images="$images; rtrace sass: $listed functions listed"
            [ "$listed" -gt 0 ] && images=${images//elf=zstd/elf=True}
            ;;
        esac
        check activity.module-image "images: $images" \
            sh -c 'case "$1" in "size="*" crc="*" elf=True"*) ! echo "$1" | grep -q "crc=0 ";; *) false;; esac' _ "$images"
    fi
}

# Runs tests/gpu/cupti_match.py with ARGS... and records its PASS/FAIL lines as checks.
match_checks() {
    checks_from "$(python3 tests/gpu/cupti_match.py "$@" 2>&1)"
}

# Prints a checker's output TEXT indented and records its "PASS|FAIL name (detail)" lines.
checks_from() {
    local out=$1 verdict name rest
    printf '%s\n' "$out" | sed 's/^/    /'
    while read -r verdict name rest; do
        rest=${rest#(}
        rest=${rest%)}
        case $verdict in
        PASS) pass "$name" "$rest" ;;
        FAIL) fail "$name" "$rest" ;;
        esac
    done <<<"$out"
}

# build_cupti_dump LABEL: builds tests/gpu/cupti_dump.c (an injected CUPTI client) once; a
# failure is LABEL.build's.
build_cupti_dump() {
    [ -s "$BIN/cupti_dump.so" ] && return 0
    local c=$CUDA_HOME/targets/x86_64-linux
    if ! bounded 60 gcc -O2 -shared -fPIC -pthread -o "$BIN/cupti_dump.so" tests/gpu/cupti_dump.c \
        -I"$c/include" -I"$CUDA_HOME/include" -L"$c/lib" -lcupti -Wl,-rpath,"$c/lib" \
        >"$WORK/build-dump.log" 2>&1; then
        fail "$1.build" "gcc failed"
        tail_of "$WORK/build-dump.log" 10
        return 1
    fi
}

# ---------------------------------------------------------------------------
# Launch routes and memory kinds the other programs do not use (tests/gpu/edge_cases.cu:
# cluster, cooperative and per-thread-stream launches, managed and stream-ordered memory,
# captured and built graphs with a host node, a host function, an invalid launch, a driver
# context of its own), through with_client: output and exit status as untraced, API counts
# CUPTI's, every kernel, copy and memset the injected client's one to one.
step_edge() {
    section "edge cases: tests/gpu/edge_cases.cu"
    local cuda_link=(-L"$CUDA_HOME/lib64/stubs" -lcuda)
    if [ ! -e "$CUDA_HOME/lib64/stubs/libcuda.so" ]; then
        cuda_link=(-L"$(dirname "${LIBCUDA:-/usr/local/nvidia/lib64/libcuda.so.1}")" -l:libcuda.so.1)
    fi
    if ! bounded 180 "$NVCC" -O2 -gencode arch=compute_90,code=sm_90 -o "$BIN/edge_cases" \
        tests/gpu/edge_cases.cu "${cuda_link[@]}" >"$WORK/build-edge.log" 2>&1; then
        fail edge.build "nvcc failed"
        tail_of "$WORK/build-edge.log" 15
        return
    fi
    pass edge.build "nvcc, sm_90"
    with_client edge 120 "$BIN/edge_cases"
    tail_of "$WORK/edge-gpu.out" 12
}

# ---------------------------------------------------------------------------
# The Python package (docs/python.md) on the GPU: the wheel packed from the carried binaries
# (RTRACE_WHEEL_ARTIFACTS: no cargo here) and installed with pip under a prefix of its own for
# the Python that has PyTorch (as `pip install .` into the program's environment would; a
# virtual environment made from it would not see its packages where it is one itself); its
# PyTorch example (docs/examples/pytorch_training.py) run untraced (the package's calls warn
# once and do nothing) and under the wheel's own `rtrace record --capture-range
# cudaProfilerApi` beside an injected CUPTI client, checked by tests/gpu/python_check.py with
# the package's `rtrace.load`.
step_python() {
    section "the Python package: docs/examples/pytorch_training.py"
    local prefix=$WORK/pyprefix log=$WORK/python-install.log site
    site=$(python3 -c 'import sys, sysconfig; print(sysconfig.get_path("purelib", vars={"base": sys.argv[1], "platbase": sys.argv[1]}))' "$prefix")
    if ! RTRACE_WHEEL_ARTIFACTS=$(dirname "$RTRACE") bounded 120 python3 -m pip wheel . -w "$WORK/dist" \
        --no-deps --no-build-isolation --no-index >"$log" 2>&1 ||
        ! bounded 120 python3 -m pip install --no-deps --no-index --prefix "$prefix" "$WORK"/dist/rtrace-*.whl \
            >>"$log" 2>&1; then
        fail python.install "the wheel could not be built or installed"
        tail_of "$log" 15
        return
    fi
    local rc
    check python.install "$("$prefix/bin/rtrace" --version 2>&1); the module's command: $(cd / && PYTHONPATH=$site \
        python3 -c 'import rtrace; print(rtrace.rtrace_command())' 2>&1)" test -x "$prefix/bin/rtrace"
    PYTHONPATH=$site bounded 200 python3 docs/examples/pytorch_training.py >"$WORK/python-untraced.out" \
        2>"$WORK/python-untraced.err"
    rc=$?
    check python.untraced "rc=$rc; $(grep -c 'not running under rtrace' "$WORK/python-untraced.err") warning line(s)" \
        sh -c '[ "$1" = 0 ] && grep -q "not running under rtrace" "$2"' _ "$rc" "$WORK/python-untraced.err"
    tail_of "$WORK/python-untraced.err" 5
    build_cupti_dump python || return
    PYTHONPATH=$site bounded 300 env CUDA_INJECTION64_PATH="$BIN/cupti_dump.so" \
        CUPTI_DUMP_OUTPUT="$WORK/python-dump.txt" "$prefix/bin/rtrace" record --capture-range cudaProfilerApi \
        -o "$WORK/train-%p.bin" -- python3 docs/examples/pytorch_training.py \
        >"$WORK/python-traced.out" 2>"$WORK/python-traced.err"
    rc=$?
    check python.traced "rc=$rc: $(tail -n 1 "$WORK/python-traced.err")" test "$rc" = 0
    tail_of "$WORK/python-traced.err" 8
    local files
    mapfile -t files < <(traces_of "$WORK/train-"*.bin)
    checks_from "$(cd "$WORK" && PYTHONPATH=$site bounded 120 python3 "$ROOT/tests/gpu/python_check.py" \
        "$WORK/python-dump.txt" "${files[@]}" 2>&1)"
}

# ---------------------------------------------------------------------------
# with_client LABEL TIMEOUT CMD...: a program the checks have not been written around, in full:
# untraced, traced with a CUPTI callback counter beside (API counts) and alone (one_program);
# then traced with GPU activity beside an injected CUPTI client (tests/gpu/cupti_dump.c),
# whose kernels (graphs' nodes among them), copies and memsets must be rtrace's one to one,
# with the same names, grids, blocks, bytes and times. The traces of that run are left in
# $WORK/rtrace-LABEL-gpu-*.bin, the client's records in $WORK/LABEL-dump.txt.
with_client() {
    local label=$1 tmo=$2
    shift 2
    one_program "$label" "$tmo" "$@"
    section "$label: rtrace's GPU records against an injected CUPTI client's"
    if [ "$(time_left)" -lt 20 ]; then
        fail "$label.gpu" "skipped: time budget spent"
        return 1
    fi
    build_cupti_dump "$label" || return 1
    bounded "$tmo" env RTRACE_GPU_ACTIVITY=1 RTRACE_OUTPUT="$WORK/rtrace-$label-gpu-%p.bin" \
        CUDA_INJECTION64_PATH="$BIN/cupti_dump.so" CUPTI_DUMP_OUTPUT="$WORK/$label-dump.txt" \
        LD_PRELOAD="$LIBRTRACE" "$@" >"$WORK/$label-gpu.out" 2>"$WORK/$label-gpu.err"
    local rc=$?
    check "$label.gpu-status" "$* with GPU activity and an injected client: rc=$rc, $(tail -n 1 "$WORK/$label-gpu.out")" \
        test $rc -eq 0
    local files
    mapfile -t files < <(traces_of "$WORK/rtrace-$label-gpu-"*.bin)
    match_checks "$label" dump "$WORK/$label-dump.txt" "${files[@]}"
}

# PyTorch beyond eager mode (tests/gpu/compiled_step.py): torch.compile's Triton kernels,
# launched by Triton's own launcher, and a CUDA graph replayed; both must be among the
# client's kernels, and the report must count the Triton kernels as the client does.
step_compiled() {
    with_client compiled 400 python3 tests/gpu/compiled_step.py || return
    local graph triton
    graph=$(awk '$1 == "K" && $11 != 0' "$WORK/compiled-dump.txt" | wc -l)
    triton=$(awk '$1 == "K" && $12 ~ /^triton_/' "$WORK/compiled-dump.txt" | wc -l)
    check compiled.kinds "the client saw $triton Triton kernels and $graph kernels in graphs" \
        test "$triton" -gt 0 -a "$graph" -gt 0
    local files summary
    mapfile -t files < <(traces_of "$WORK/rtrace-compiled-gpu-"*.bin)
    bounded 120 "$RTRACE" report --format json "${files[@]}" >"$WORK/compiled-gpu.json" 2>"$WORK/compiled-gpu-report.err"
    summary=$(python3 -c 'import json, sys
t = open(sys.argv[1]).read()
r = json.loads(t[t.find("{"):])
print(sum(k["count"] for k in r["kernels"] if k["name"].startswith("triton_")))' "$WORK/compiled-gpu.json" 2>&1)
    check compiled.report-triton "rtrace report: $summary Triton kernel runs, the client $triton" \
        test "$summary" = "$triton"
}

# A PyTorch program that puts a file of its own at the trace's descriptor number after CUDA's
# start (tests/gpu/descriptors_step.py: what a program that closes every descriptor it did not
# open and then opens files gets): its file must hold only its own line, the traces every call
# and kernel (with_client), and each trace the notice that the file was opened again.
step_descriptors() {
    with_client descriptors 200 python3 tests/gpu/descriptors_step.py || return
    local files said
    mapfile -t files < <(traces_of "$WORK/rtrace-descriptors-"{both,rtrace,gpu}-*.bin)
    said=$(for f in "${files[@]}"; do
        bounded 60 "$RTRACE" report --format json "$f" 2>/dev/null | python3 -c 'import json, sys
t = sys.stdin.read()
r = json.loads(t[t.find("{"):])
n = [m["message"] for p in r["processes"] for m in p.get("notices", [])]
print(sum(m.startswith("the program closed or replaced the trace file") for m in n))'
    done | sort | uniq -c | tr '\n' ' ')
    check descriptors.reopened "traces by how many times each says the file was opened again: $said(${#files[@]} traces)" \
        test "$(echo "$said" | tr -s ' ')" = " ${#files[@]} 1 "
}

# JAX (tests/gpu/jax_step.py: XLA's kernels, cuBLAS, a scan on the device), CuPy
# (tests/gpu/cupy_step.py: NVRTC kernels through a static runtime, a RawKernel, cuBLAS,
# cuFFT, a stream) and a PyTorch loop fed by DataLoader workers forked after CUDA's start
# (tests/gpu/loader_step.py: cuDNN, autocast, pinned memory), each in full (with_client); a
# framework this machine lacks is a failure.
step_frameworks() {
    with_client loader 300 python3 tests/gpu/loader_step.py
    local fw
    for fw in jax cupy; do
        if ! python3 -c "import $fw" 2>/dev/null; then
            fail "$fw" "python3 cannot import $fw"
            continue
        fi
        # JAX takes 75% of the GPU's memory by default; twice at once would not fit.
        XLA_PYTHON_CLIENT_PREALLOCATE=false with_client "$fw" 300 python3 "tests/gpu/${fw}_step.py"
    done
}

# ---------------------------------------------------------------------------
# rtrace shares CUPTI with the program's own CUPTI client (GPU activity on): an injected client
# with its own clock (tests/gpu/cupti_dump.c) on the activity sample, and the PyTorch profiler
# on a training step, each get their records, which match rtrace's one to one and in time.
step_shared() {
    section "CUPTI shared with the program's own client"
    build_cupti_dump shared || return
    if [ -x "$BIN/activity_sample" ]; then
        bounded 60 env RTRACE_GPU_ACTIVITY=1 RTRACE_OUTPUT="$WORK/rtrace-shared-%p.bin" \
            CUDA_INJECTION64_PATH="$BIN/cupti_dump.so" CUPTI_DUMP_OUTPUT="$WORK/shared-dump.txt" \
            LD_PRELOAD="$LIBRTRACE" "$BIN/activity_sample" >"$WORK/shared-sample.out" 2>"$WORK/shared-sample.err"
        local rc=$?
        check shared.sample-status "activity_sample with an injected CUPTI client, under rtrace: rc=$rc" test $rc -eq 0
        match_checks sample dump "$WORK/shared-dump.txt" "$WORK"/rtrace-shared-*.bin
    else
        fail shared.sample "activity_sample not built"
    fi
    local want got
    want=$(bounded 120 python3 tests/gpu/kineto_step.py "$WORK/kineto-untraced.json" 2>"$WORK/kineto-untraced.err" | tail -n 1)
    got=$(bounded 120 env RTRACE_GPU_ACTIVITY=1 RTRACE_OUTPUT="$WORK/rtrace-kineto-%p.bin" RTRACE_DEBUG=1 \
        LD_PRELOAD="$LIBRTRACE" python3 tests/gpu/kineto_step.py "$WORK/kineto.json" 2>"$WORK/kineto.err" | tail -n 1)
    check shared.pytorch-output "traced: '$got', untraced: '$want'" test -n "$want" -a "$got" = "$want"
    grep -h "gpu activity" "$WORK/kineto.err" | sed 's/^/    /' | head -n 6
    match_checks pytorch kineto "$WORK/kineto.json" "$WORK"/rtrace-kineto-*.bin
}

# ---------------------------------------------------------------------------
# Peer-to-peer copies between two GPUs (tests/gpu/peer_sample.cu): rtrace's peer copy records
# against what the sample issued, and against an injected CUPTI client's from the same run.
# Skipped (and said) on a machine with one GPU.
step_peer() {
    section "peer-to-peer copies between two GPUs"
    local gpus
    gpus=$(bounded 30 nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    if [ "${gpus:-0}" -lt 2 ]; then
        log "SKIPPED: ${gpus:-0} GPU(s) here; peer copies need 2"
        return
    fi
    if ! bounded 120 "$CUDA_HOME/bin/nvcc" -O2 -o "$BIN/peer_sample" tests/gpu/peer_sample.cu -lcuda \
        >"$WORK/build-peer.log" 2>&1; then
        fail peer.build "nvcc failed"
        tail_of "$WORK/build-peer.log" 10
        return
    fi
    local -a inject=()
    [ -e "$BIN/cupti_dump.so" ] && inject=(CUDA_INJECTION64_PATH="$BIN/cupti_dump.so" CUPTI_DUMP_OUTPUT="$WORK/peer-dump.txt")
    local line
    line=$(bounded 60 env RTRACE_GPU_ACTIVITY=1 RTRACE_OUTPUT="$WORK/rtrace-peer-%p.bin" "${inject[@]}" \
        LD_PRELOAD="$LIBRTRACE" "$BIN/peer_sample" 2>"$WORK/peer.err" | tail -n 1)
    log "sample: $line"
    tail_of "$WORK/peer.err" 5
    checks_from "$(python3 tests/gpu/peer_check.py "$line" "$WORK"/rtrace-peer-*.bin 2>&1)"
    if [ -s "$WORK/peer-dump.txt" ]; then
        match_checks peer dump "$WORK/peer-dump.txt" "$WORK"/rtrace-peer-*.bin
    else
        fail peer.cupti "no CUPTI client dump to compare with"
    fi
}

# ---------------------------------------------------------------------------
# NVTX (tests/gpu/nvtx_step.py, GPU activity on): a PyTorch loop with torch.cuda.nvtx ranges,
# the same under emit_nvtx, a capture range of one iteration, and ranges across the edges of
# cudaProfilerStart/Stop capture ranges; tests/gpu/nvtx_check.py
# rebuilds the ranges from the trace and attributes every kernel to its range.
step_nvtx() {
    section "NVTX: PyTorch ranges, emit_nvtx, an NVTX capture range"
    local want line out kpi
    want=$(bounded 150 python3 tests/gpu/nvtx_step.py ranges 5 2>"$WORK/nvtx-untraced.err" | tail -n 1)
    line=$(bounded 150 env RTRACE_GPU_ACTIVITY=1 RTRACE_OUTPUT="$WORK/rtrace-nvtx-%p.bin" \
        LD_PRELOAD="$LIBRTRACE" python3 tests/gpu/nvtx_step.py ranges 5 2>"$WORK/nvtx.err" | tail -n 1)
    check nvtx.same-output "traced: '$line', untraced: '$want'" test -n "$want" -a "$line" = "$want"
    out=$(python3 tests/gpu/nvtx_check.py ranges "$RTRACE" "$WORK"/rtrace-nvtx-*.bin --iters 5 2>&1)
    checks_from "$out"
    kpi=$(printf '%s\n' "$out" | awk '$1 == "kernels-per-iter" {print $2}')
    line=$(bounded 150 env RTRACE_GPU_ACTIVITY=1 RTRACE_OUTPUT="$WORK/rtrace-emit-%p.bin" \
        LD_PRELOAD="$LIBRTRACE" python3 tests/gpu/nvtx_step.py emit 3 2>"$WORK/emit.err" | tail -n 1)
    log "emit_nvtx: $line"
    checks_from "$(python3 tests/gpu/nvtx_check.py emit "$RTRACE" "$WORK"/rtrace-emit-*.bin 2>&1)"
    line=$(bounded 150 env RTRACE_GPU_ACTIVITY=1 RTRACE_OUTPUT="$WORK/rtrace-capture-%p.bin" \
        RTRACE_NVTX_CAPTURE="iter 3" LD_PRELOAD="$LIBRTRACE" python3 tests/gpu/nvtx_step.py ranges 5 \
        2>"$WORK/capture.err" | tail -n 1)
    log "capture: $line"
    checks_from "$(python3 tests/gpu/nvtx_check.py capture "$RTRACE" "$WORK"/rtrace-capture-*.bin \
        --kernels-per-iter "${kpi:-0}" 2>&1)"
    # Ranges across a capture range's edges: pops recorded exactly when their pushes were.
    want=$(bounded 150 python3 tests/gpu/nvtx_step.py edges 5 2>"$WORK/edges-untraced.err" | tail -n 1)
    line=$(bounded 150 env RTRACE_GPU_ACTIVITY=1 RTRACE_CAPTURE_RANGE=cudaProfilerApi \
        RTRACE_OUTPUT="$WORK/rtrace-edges-%p.bin" LD_PRELOAD="$LIBRTRACE" python3 tests/gpu/nvtx_step.py edges 5 \
        2>"$WORK/edges.err" | tail -n 1)
    check nvtx.edges.same-output "traced: '$line', untraced: '$want'" test -n "$want" -a "$line" = "$want"
    checks_from "$(python3 tests/gpu/nvtx_check.py edges "$RTRACE" "$WORK"/rtrace-edges-*.bin --iters 5 2>&1)"
    "$RTRACE" report "$WORK"/rtrace-nvtx-*.bin 2>/dev/null | sed -n '/^NVTX ranges/,/^$/p' | head -n 12
    # The trace and its Perfetto export come back, to be decoded with Perfetto's schema where
    # the perfetto package is (collector/tests/perfetto_decode.py).
    check nvtx.export-perfetto "rtrace export --format perfetto of the PyTorch NVTX trace" \
        "$RTRACE" export --format perfetto -o "$OUT/nvtx.pftrace" "$WORK"/rtrace-nvtx-*.bin
    cp "$WORK"/rtrace-nvtx-*.bin "$OUT/" 2>/dev/null
}

# Allocations, frees and synchronizations (RTRACE_GPU_ACTIVITY=all) of a PyTorch loop
# (tests/gpu/memsync_step.py): rtrace report's Memory and Synchronization sections against the
# same computed from the raw records, against the intercepted calls and the program, and (with
# RTRACE_OLD) byte for byte against the build before; the trace read from standard input.
step_memsync() {
    section "Memory and synchronization: a PyTorch loop with RTRACE_GPU_ACTIVITY=all"
    local want line old=()
    want=$(bounded 120 python3 tests/gpu/memsync_step.py 20 2>"$WORK/memsync-untraced.err" | tail -n 1)
    line=$(bounded 120 env RTRACE_GPU_ACTIVITY=all RTRACE_OUTPUT="$WORK/rtrace-memsync-%p.bin" \
        LD_PRELOAD="$LIBRTRACE" python3 tests/gpu/memsync_step.py 20 2>"$WORK/memsync.err" | tail -n 1)
    check memsync.same-output "traced: '$line', untraced: '$want'" test -n "$want" -a "$line" = "$want"
    local trace
    trace=$(ls -S "$WORK"/rtrace-memsync-*.bin 2>/dev/null | head -n 1)
    if [ -z "$trace" ]; then
        fail memsync.trace "no trace written"
        return
    fi
    if [ -n "${RTRACE_OLD:-}" ] && [ -x "$RTRACE_OLD" ]; then
        old=(--old "$RTRACE_OLD")
    else
        log "RTRACE_OLD not given: no comparison with the build before"
    fi
    checks_from "$(bounded 120 python3 tests/gpu/memsync_check.py "$RTRACE" "$trace" --line "$line" "${old[@]}" 2>&1)"
    "$RTRACE" report "$trace" 2>/dev/null | sed -n '/^Memory:/,$p' | head -n 16
    "$RTRACE" report --format json "$trace" >"$OUT/memsync.json" 2>/dev/null
}

# PC sampling (tests/gpu/pcsamp_check.sh): kernels with known problems sampled by rtrace and
# by Nsight Compute, same ranking of stall reasons, same hottest instructions and lines; the
# cost of sampling. Its own archive goes into the work directory.
step_profile() {
    section "Kernel profiling: rtrace against Nsight Compute"
    local out
    out=$(bounded 560 env OUT="$WORK/profile" bash tests/gpu/profile_check.sh 2>&1)
    printf '%s\n' "$out" | grep -v -E '^(PASS|FAIL) ' | tail -n 60
    checks_from "$(printf '%s\n' "$out" | grep -E '^(PASS|FAIL) ')"
    cp "$WORK/profile/profile-fixture.bin" "$OUT/" 2>/dev/null
}

# A PyTorch step that dies mid-step (SIGSEGV, SIGKILL) under rtrace record with GPU activity:
# same exit as untraced; every driver call CUPTI saw (counted in a shared mapping that outlives
# the process: cupti_counter.so with CUPTI_COUNT_LIVE=1) is in the trace, the last ones rebuilt
# from the rings in the file (read by the collector and by the independent tests/gpu/tracefile.py);
# the kernel records the trace holds (timed, and those CUPTI had not timed when the process
# died, rebuilt from its buffers in the file): one for each launch.
step_crash() {
    section "Crashes: a PyTorch step killed mid-step, with GPU activity"
    local mode rc rc0 want files j kernels
    for mode in exit segv kill; do
        run_mode crash "$mode-untraced" 180 -- python3 tests/gpu/crash_step.py "$mode" 5
        rc0=$?
        run_mode crash "$mode" 240 \
            CUDA_INJECTION64_PATH="$BIN/cupti_counter.so" CUPTI_COUNT_OUTPUT="$WORK/cupti-crash-$mode" \
            CUPTI_COUNT_LIVE=1 -- "$RTRACE" record --gpu-activity=kernel,memcpy,memset \
            --output "$WORK/rtrace-crash-$mode-%p.bin" -- python3 tests/gpu/crash_step.py "$mode" 5
        rc=$?
        case $mode in exit) want=0 ;; segv) want=139 ;; kill) want=137 ;; esac
        check "crash.$mode.exit-status" "rtrace record returned $rc, untraced $rc0, want $want" \
            test "$rc" = "$want" -a "$rc0" = "$want"
        check "crash.$mode.same-output" "stdout as untraced" \
            cmp -s "$WORK/crash-$mode.out" "$WORK/crash-$mode-untraced.out"
        mapfile -t files < <(ls "$WORK/rtrace-crash-$mode-"*.bin 2>/dev/null)
        if [ "${#files[@]}" = 0 ]; then
            fail "crash.$mode.trace" "no trace"
            tail_of "$WORK/crash-$mode.err" 15
            continue
        fi
        j=$WORK/crash-$mode.json
        bounded 60 "$RTRACE" report --format json "${files[@]}" >"$j" 2>"$WORK/crash-$mode.report.err"
        local own
        own=$(rtrace_own_calls "$j")
        kernels=$(python3 - "$j" <<'PYEOF'
import json, sys
text = open(sys.argv[1]).read()
doc = json.loads(text[text.find("{"):])
p = doc["processes"][0]
launches = sum(r["calls"] for r in doc["api"] + doc.get("api_in_runtime", [])
               if r["function"].startswith("cuLaunch") and "HostFunc" not in r["function"])
u = p["untimed_gpu_work"]
named = sum(n["count"] for n in u["kernel_names"] if n["name"] is not None)
print(f"{p['api_records']} API records ({p['salvaged_records']} from the rings), "
      f"{p['dropped']} dropped, {p['kernel_records']} kernel records "
      f"({p['salvaged_gpu_records']} GPU records from CUPTI's buffers) + {u['kernel']} "
      f"never timed ({named} named) for {launches} launches, end: {p['end_reason']}, "
      f"damage: {p.get('damage')}")
print("EQUAL" if p["kernel_records"] + u["kernel"] == launches else "DIFFERENT")
PYEOF
)
        check "crash.$mode.gpu-work" "$(head -1 <<<"$kernels")" test "$(tail -1 <<<"$kernels")" = EQUAL
        if python3 tests/gpu/live_counts.py "$WORK/cupti-crash-$mode" >/dev/null 2>&1; then
            compare_cupti crash "$mode" "$WORK/cupti-crash-$mode" --rtrace-own "$own"
        else
            fail "crash.$mode.cupti-counts" "no live CUPTI counts"
        fi
    done
}

step_pcsamp() {
    section "PC sampling: rtrace against Nsight Compute"
    local out
    out=$(bounded 420 env OUT="$WORK/pcsamp" bash tests/gpu/pcsamp_check.sh 2>&1)
    printf '%s\n' "$out" | grep -v -E '^(PASS|FAIL) ' | tail -n 40
    checks_from "$(printf '%s\n' "$out" | grep -E '^(PASS|FAIL) ')"
}

# ---------------------------------------------------------------------------
main() {
    log "rtrace GPU proof: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
    step_environment
    log "steps: $STEPS"
    if want build; then
        step_coverage
        step_build
    fi

    if want programs; then
        if [ -x "$BIN/driver_api" ]; then one_program driver_api 60 "$BIN/driver_api"; else fail driver_api "not built"; fi
        if [ -x "$BIN/vector_add" ]; then one_program vector_add_shared 60 "$BIN/vector_add"; else fail vector_add_shared "not built"; fi
        if [ -x "$BIN/vector_add_static" ]; then
            one_program vector_add_static 60 "$BIN/vector_add_static"
        else
            fail vector_add_static "not built"
        fi
        one_program pytorch 150 python3 tests/gpu/pytorch_step.py
    fi
    want profiler && step_profiler
    want activity && step_activity
    want shared && step_shared
    want compiled && step_compiled
    want descriptors && step_descriptors
    want frameworks && step_frameworks
    want peer && step_peer
    want nvtx && step_nvtx
    want memsync && step_memsync
    want python && step_python
    want edge && step_edge
    want pcsamp && step_pcsamp
    want profile && step_profile
    want crash && step_crash
    if want record; then
        if [ -x "$BIN/vector_add" ]; then
            step_record vector_add_shared 60 "$BIN/vector_add"
        else
            fail vector_add_shared.record "not built"
        fi
    fi

    section "report of driver_api (rtrace alone)"
    if [ -s "$OUT/report-driver_api.txt" ]; then
        cat "$OUT/report-driver_api.txt"
    else
        log "(no report-driver_api.txt)"
    fi

    section "saving"
    cp "$OUT/libcuda-exports.txt" "$WORK/" 2>/dev/null
    # Binaries stay out; traces too if the archive would be too large to fetch.
    tar -C "$(dirname "$WORK")" -czf "$OUT/all.tgz" --exclude=bin "$(basename "$WORK")" 2>&1 | tail -n 3
    local size
    size=$(stat -c %s "$OUT/all.tgz" 2>/dev/null || echo 0)
    if [ "$size" -gt 15000000 ]; then
        log "all.tgz is $size bytes: again without trace files"
        tar -C "$(dirname "$WORK")" -czf "$OUT/all.tgz" --exclude=bin --exclude='*.bin' "$(basename "$WORK")"
        size=$(stat -c %s "$OUT/all.tgz" 2>/dev/null || echo 0)
    fi
    log "all.tgz: $size bytes; files in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"

    section "summary"
    local r
    for r in "${RESULTS[@]}"; do echo "  $r"; done
    log "total time ${SECONDS}s"
    echo "$PASS passed, $FAIL failed"
    [ "$FAIL" = 0 ]
}

main 2>&1 | tee "$LOG"
exit "${PIPESTATUS[0]}"
