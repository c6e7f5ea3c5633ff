#!/usr/bin/env bash
# GPU overhead benchmark: what rtrace adds on a real GPU, side by side with the PyTorch profiler.
#
# Workloads (one process per run, 1 warm-up round + ROUNDS timed rounds each):
#   empty   tools/bench/overhead_empty.cu: back-to-back empty kernels, CUDA runtime API,
#           non-blocking stream, LAUNCHES launches per round, synchronised at its end (us/launch)
#   add     tools/bench/overhead_torch.py add: x.add_(1) on a 1-element CUDA tensor, OPS per
#           round (us/op), launch-bound
#   matmul  tools/bench/overhead_torch.py matmul: MATMULS bf16 N x N matmuls per round
#           (ms/matmul), GPU-bound
# Modes: untraced; rtrace-api (LD_PRELOAD=librtrace.so); rtrace-default (what `rtrace record`
# records by default: GPU activity, runtime API records, NVTX); rtrace-default-shm (the same,
# its trace written to /dev/shm, then moved beside the others); rtrace-interpose (the same with
# the runtime API recorded by interposing libcudart, RTRACE_RUNTIME_API=interpose;
# rtrace-interpose-b with $LIB_B); rtrace-default-heap (the same
# with CUPTI's buffers in heap memory); rtrace-default-b (the default with the library $LIB_B); rtrace-gpu (+ RTRACE_GPU_ACTIVITY=1,
# or rtrace-gpu:KINDS for RTRACE_GPU_ACTIVITY=KINDS); rtrace-gpu-nort (rtrace-gpu without
# runtime API records, RTRACE_RUNTIME_API=0: docs/runtime-api.md); rtrace-gpu-nort-heap (the same with
# CUPTI's buffers in heap memory, RTRACE_GPU_FILE_BUFFERS=0); rtrace-gpu-b (the same with the library
# $LIB_B, to compare two builds in one run); for add and matmul, profiler
# (torch.profiler.profile(activities=[CUDA]) around the timed rounds, its start and stop outside
# them) and cupti:OPTIONS (CUPTI alone, no rtrace: tools/bench/cupti_alone.c with OPTIONS;
# `cupti:ts,cb,res` asks CUPTI for what rtrace-gpu asks it for). Every process runs one workload
# in one mode; the
# modes alternate (PROCS rounds of all workloads x modes, the mode order rotating each time),
# and each mode's median is over all its timed rounds. The traces are read back with
# `rtrace report --format json` (API records, dropped) and a chunk reader (kernel records).
#
# Run on the GPU machine from a copy of the repository carrying target/release/librtrace.so
# and target/release/rtrace:
#     bash tools/bench/gpu_overhead.sh [PROCS=5] [ROUNDS=5]
# Environment: WORKLOADS ("empty add matmul"); MODES_EMPTY ("untraced rtrace-api rtrace-gpu"),
# MODES_ADD and MODES_MATMUL ("untraced rtrace-api rtrace-gpu profiler cupti:ts,cb,res");
# PIN: a CPU list (taskset -c) every process and all its threads are pinned to, for example 2
# (one core) or 2,3; unset: not pinned. LAUNCHES (20000), OPS (20000), MATMULS (50), MATMUL_N (8192); BUDGET_S (400:
# no process starts after that many seconds, so the whole run stays under 8 minutes);
# CUDA_HOME (/usr/local/cuda-13.0); NVCC_ARCH (sm_90); BENCH_BUFFER_RECORDS (sets
# RTRACE_BUFFER_RECORDS in traced runs; default: rtrace's own default); OUT: a copy of the
# tables goes to $OUT/overhead.txt (and the log to $OUT/overhead-log.txt).
# The tables are printed last. Logs, program outputs, traces and JSON reports stay in the work
# directory, /tmp/rtrace-overhead.XXXXXX (its path is printed first; about 100 MB).

set -u
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
PROCS=${1:-5}
ROUNDS=${2:-5}
LAUNCHES=${LAUNCHES:-20000}
OPS=${OPS:-20000}
MATMULS=${MATMULS:-50}
MATMUL_N=${MATMUL_N:-8192}
BUDGET=${BUDGET_S:-400}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0}
NVCC_ARCH=${NVCC_ARCH:-sm_90}
LIB=$ROOT/target/release/librtrace.so
RTRACE=$ROOT/target/release/rtrace

# Nothing of the caller's tracing set-up may leak into the runs.
unset LD_PRELOAD CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH
for v in $(compgen -e); do
    case $v in RTRACE_*) unset "$v" ;; esac
done

WORK=$(mktemp -d /tmp/rtrace-overhead.XXXXXX) || exit 2
# rtrace-default-shm writes its traces here (tmpfs: what the file system costs the worker).
SHM=$(mktemp -d /dev/shm/rtrace-overhead.XXXXXX) || exit 2
trap 'rm -rf "$SHM"' EXIT
mkdir -p "$WORK"/{rounds,ops,procs,prof,traces,out,usage,threads} || exit 2
LOG=$WORK/log.txt

log() { printf '[%4ds] %s\n' "$SECONDS" "$*" | tee -a "$LOG"; }

for f in "$LIB" "$RTRACE"; do
    [ -e "$f" ] || { log "missing $f (build it elsewhere and carry it)"; exit 2; }
done
PY=$(python3 -c 'import sys; print(sys.executable)') || { log "no python3"; exit 2; }
NVCC=$CUDA_HOME/bin/nvcc
[ -x "$NVCC" ] || NVCC=$(command -v nvcc || echo nvcc)

log "work directory $WORK"
GPU=$(timeout 30 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
TORCH=$(timeout 60 "$PY" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' 2>/dev/null | tail -n 1)
log "GPU: ${GPU:-unknown}; torch ${TORCH:-unknown}; $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"

# Workload (a) binary; -cudart shared as PyTorch uses it, rpath so it finds libcudart.so.13.
EMPTY=$WORK/overhead_empty
if ! timeout 120 "$NVCC" -O2 -arch="$NVCC_ARCH" -cudart shared -Xlinker -rpath="$CUDA_HOME/lib64" \
    -o "$EMPTY" tools/bench/overhead_empty.cu >"$WORK/nvcc.log" 2>&1; then
    log "nvcc failed (workload (a) will be skipped):"
    tail -n 5 "$WORK/nvcc.log" | tee -a "$LOG"
    EMPTY=
fi

read -r -a WORKLOADS <<<"${WORKLOADS:-empty add matmul}"
TORCH_MODES="untraced rtrace-api rtrace-gpu profiler cupti:ts,cb,res"
mkdir -p "$WORK/modes"
for w in "${WORKLOADS[@]}"; do
    case $w in
    empty) ms=${MODES_EMPTY:-untraced rtrace-api rtrace-gpu} ;;
    add) ms=${MODES_ADD:-$TORCH_MODES} ;;
    matmul) ms=${MODES_MATMUL:-$TORCH_MODES} ;;
    *) log "unknown workload $w"; exit 2 ;;
    esac
    printf '%s\n' $ms >"$WORK/modes/$w"
done
modes_of() { # workload -> its modes, rotated by $2
    local -a ms
    mapfile -t ms <"$WORK/modes/$1"
    local k=$(($2 % ${#ms[@]}))
    echo "${ms[@]:k}" "${ms[@]:0:k}"
}

# CUPTI alone (cupti:* modes).
CUPTI_ALONE=$WORK/cupti_alone.so
if ! timeout 60 gcc -O2 -shared -fPIC -I"$CUDA_HOME/include" -o "$CUPTI_ALONE" tools/bench/cupti_alone.c -ldl \
    >"$WORK/gcc.log" 2>&1; then
    log "gcc failed (cupti modes will fail):"
    tail -n 5 "$WORK/gcc.log" | tee -a "$LOG"
fi

SKIPPED=0
FAILED=0
# run_one WORKLOAD MODE REP: one process; appends its rounds, ops and status.
run_one() {
    local w=$1 m=$2 i=$3 key=$1.$2 limit=120 rc
    local -a cmd env_=()
    case $w in
    empty)
        [ -n "$EMPTY" ] || { echo "fail nvcc" >>"$WORK/procs/$key"; FAILED=$((FAILED + 1)); return; }
        cmd=("$EMPTY" "$LAUNCHES" "$ROUNDS")
        limit=60
        ;;
    add) cmd=("$PY" tools/bench/overhead_torch.py add plain "$OPS" "$ROUNDS") ;;
    matmul) cmd=("$PY" tools/bench/overhead_torch.py matmul plain "$MATMULS" "$ROUNDS" "$MATMUL_N") ;;
    esac
    case $m in
    untraced) ;;
    rtrace-api | rtrace-gpu | rtrace-gpu:* | rtrace-gpu-b | rtrace-gpu-nort | rtrace-gpu-nort-heap | rtrace-default | rtrace-default-shm | rtrace-default-heap | rtrace-default-b | rtrace-interpose | rtrace-interpose-b)
        env_=(LD_PRELOAD="$LIB" RTRACE_OUTPUT="$WORK/traces/$key.$i.%p.bin")
        case $m in
        rtrace-gpu) env_+=(RTRACE_GPU_ACTIVITY=1) ;;
        rtrace-default) env_+=(RTRACE_GPU_ACTIVITY=1 RTRACE_NVTX=1) ;;
        rtrace-default-shm) env_+=(RTRACE_GPU_ACTIVITY=1 RTRACE_NVTX=1 RTRACE_OUTPUT="$SHM/$key.$i.%p.bin") ;;
        rtrace-interpose) env_+=(RTRACE_GPU_ACTIVITY=1 RTRACE_NVTX=1 RTRACE_RUNTIME_API=interpose) ;;
        rtrace-interpose-b) env_+=(LD_PRELOAD="${LIB_B:?rtrace-interpose-b needs LIB_B}" RTRACE_GPU_ACTIVITY=1 RTRACE_NVTX=1 RTRACE_RUNTIME_API=interpose) ;;
        rtrace-default-heap) env_+=(RTRACE_GPU_ACTIVITY=1 RTRACE_NVTX=1 RTRACE_GPU_FILE_BUFFERS=0) ;;
        rtrace-default-b) env_+=(LD_PRELOAD="${LIB_B:?rtrace-default-b needs LIB_B}" RTRACE_GPU_ACTIVITY=1 RTRACE_NVTX=1) ;;
        rtrace-gpu-nort) env_+=(RTRACE_GPU_ACTIVITY=1 RTRACE_RUNTIME_API=0) ;;
        rtrace-gpu-nort-heap) env_+=(RTRACE_GPU_ACTIVITY=1 RTRACE_RUNTIME_API=0 RTRACE_GPU_FILE_BUFFERS=0) ;;
        rtrace-gpu-b) env_+=(LD_PRELOAD="${LIB_B:?rtrace-gpu-b needs LIB_B}" RTRACE_GPU_ACTIVITY=1) ;;
        rtrace-gpu:*) env_+=(RTRACE_GPU_ACTIVITY="${m#rtrace-gpu:}") ;;
        esac
        [ -n "${BENCH_BUFFER_RECORDS:-}" ] && env_+=(RTRACE_BUFFER_RECORDS="$BENCH_BUFFER_RECORDS")
        ;;
    profiler | cupti*)
        [ "$w" = empty ] && { echo "fail mode" >>"$WORK/procs/$key"; FAILED=$((FAILED + 1)); return; }
        cmd[3]=$m
        env_=(CUPTI_ALONE_LIB="$CUPTI_ALONE")
        ;;
    *) echo "fail mode" >>"$WORK/procs/$key"; FAILED=$((FAILED + 1)); return ;;
    esac
    local left=$((BUDGET + 60 - SECONDS))
    [ "$left" -lt "$limit" ] && limit=$left
    [ "$limit" -lt 20 ] && limit=20
    local out=$WORK/out/$key.$i
    local t0=$SECONDS
    local -a pin=()
    [ -n "${PIN:-}" ] && pin=(taskset -c "$PIN")
    timeout -k 5 "$limit" "${pin[@]}" env "${env_[@]}" "${cmd[@]}" >"$out.stdout" 2>"$out.stderr"
    rc=$?
    # rtrace-default-shm's trace, written to /dev/shm, joins the others (outside the timing).
    [ "$m" = rtrace-default-shm ] && mv "$SHM/$key.$i".*.bin "$WORK/traces/" 2>/dev/null
    awk '$1 == "round" {print $2}' "$out.stdout" >>"$WORK/rounds/$key"
    awk '$1 == "usage" {print $2, $3, $4, $5}' "$out.stdout" >>"$WORK/usage/$key"
    awk '$1 == "ops" {print $2}' "$out.stdout" >>"$WORK/ops/$key"
    awk '$1 == "threads" {$1 = ""; print substr($0, 2)}' "$out.stdout" >>"$WORK/threads/$key"
    awk '$1 == "profiler_kernels" || $1 == "cupti_kernels" {print $2}' "$out.stdout" >>"$WORK/prof/$key"
    local med
    med=$(awk '$1 == "round" {print $2}' "$out.stdout" | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "-"}')
    if [ "$rc" = 0 ]; then
        echo ok >>"$WORK/procs/$key"
        log "$w $m #$i: median $med ($((SECONDS - t0))s)"
    else
        echo "fail rc=$rc" >>"$WORK/procs/$key"
        FAILED=$((FAILED + 1))
        log "$w $m #$i: FAILED rc=$rc ($((SECONDS - t0))s; rounds so far: median $med); stderr tail:"
        tail -n 5 "$out.stderr" | sed 's/^/      | /' | tee -a "$LOG"
    fi
}

log "$PROCS processes x $ROUNDS timed rounds per mode; budget ${BUDGET}s for starting processes; pinned to: ${PIN:-nothing}"
for ((i = 0; i < PROCS; i++)); do
    for w in "${WORKLOADS[@]}"; do
        for m in $(modes_of "$w" "$i"); do
            if [ "$SECONDS" -ge "$BUDGET" ]; then
                SKIPPED=$((SKIPPED + 1))
                continue
            fi
            run_one "$w" "$m" "$i"
        done
    done
done
[ "$SKIPPED" -gt 0 ] && log "time budget reached: $SKIPPED processes not started"

log "reading traces back"
TABLES=$WORK/overhead.txt
{
    echo "=== rtrace GPU overhead ($(date -u +%Y-%m-%dT%H:%MZ); GPU: ${GPU:-unknown}; torch ${TORCH:-unknown}) ==="
    timeout 300 "$PY" tools/bench/overhead_summary.py "$WORK" "$RTRACE" "$PROCS" "$ROUNDS" \
        "$LAUNCHES" "$OPS" "$MATMULS" "$MATMUL_N" 2>&1 || echo "overhead_summary.py failed (exit $?)"
    echo "failed processes: $FAILED; not started (budget): $SKIPPED; total time ${SECONDS}s"
} >"$TABLES"
cat "$TABLES" >>"$LOG"
if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT" && cp "$TABLES" "$OUT/overhead.txt" && cp "$LOG" "$OUT/overhead-log.txt"
fi
echo
cat "$TABLES"
[ "$FAILED" = 0 ] && [ "$SKIPPED" = 0 ]
