#!/bin/sh
# Builds appreplay_probe.cu and runs it once per replay pass until CUPTI says all passes are
# submitted (STATE/done), for MODE session (what librtrace.so does), run, samename: see the .cu.
set -e; here=$(dirname "$0"); cuda=${CUDA_HOME:-/usr/local/cuda-13.0}; cupti=$cuda/extras/CUPTI
nvcc -O2 -I"$cupti/include" "$here/appreplay_probe.cu" -o /tmp/appreplay_probe \
    -L"$cupti/lib64" -Xlinker -rpath,"$cupti/lib64" -lcupti -lcuda
for mode in ${MODES:-session run samename}; do
    state=$(mktemp -d); pass=0; echo "== mode $mode"
    while [ ! -e "$state/done" ] && [ $pass -lt 64 ]; do
        echo "-- pass $pass"; /tmp/appreplay_probe $pass "$state" $mode || break; pass=$((pass + 1)); done
    rm -rf "$state"; done
