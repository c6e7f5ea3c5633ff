#!/usr/bin/env bash
# tests/gpu/run_long.sh [SECONDS]: rtrace's GPU times against CUPTI's over a long run (default
# 600 s). tests/gpu/accuracy_long.cu launches a ~50 us kernel and a 64 KiB copy every 5 ms
# under rtrace (GPU activity on) with an injected CUPTI client that times on its own clock
# (tests/gpu/cupti_dump.c, the TSC); tests/gpu/cupti_match.py then compares every record.
# On the GPU machine, with target/release/librtrace.so carried along. Prints PASS/FAIL lines.
set -u
cd "$(dirname "$0")/../.." || exit 2
SECONDS_TO_RUN=${1:-600}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0}
C=$CUDA_HOME/targets/x86_64-linux
WORK=${WORK:-$(mktemp -d /tmp/rtrace-long.XXXXXX)}
mkdir -p "$WORK"
"$CUDA_HOME/bin/nvcc" -O2 -o "$WORK/accuracy_long" tests/gpu/accuracy_long.cu || exit 2
gcc -O2 -shared -fPIC -pthread -o "$WORK/cupti_dump.so" tests/gpu/cupti_dump.c -I"$C/include" \
    -I"$CUDA_HOME/include" -L"$C/lib" -lcupti -Wl,-rpath,"$C/lib" || exit 2
echo "run: $SECONDS_TO_RUN s, work in $WORK"
env RTRACE_GPU_ACTIVITY=1 RTRACE_OUTPUT="$WORK/rtrace-long-%p.bin" \
    CUDA_INJECTION64_PATH="$WORK/cupti_dump.so" CUPTI_DUMP_OUTPUT="$WORK/long-dump.txt" \
    LD_PRELOAD="$PWD/target/release/librtrace.so" "$WORK/accuracy_long" "$SECONDS_TO_RUN"
echo "exit status $?"
ls -la "$WORK"
python3 tests/gpu/cupti_match.py long dump "$WORK/long-dump.txt" "$WORK"/rtrace-long-*.bin
