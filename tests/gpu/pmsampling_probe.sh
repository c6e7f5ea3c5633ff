#!/bin/sh
# Builds pmsampling_probe.cu and runs it (issue 21): CUPTI's PM Sampling API on this GPU. Writes
# the probe's files (metric lists, config image, counter data images, samples.csv, kernels.csv,
# clocks.txt) and its output (probe.txt) to $OUT; prints the output, then "N passed, N failed".
#   OUT=dir sh tests/gpu/pmsampling_probe.sh
here=$(dirname "$0"); cuda=${CUDA_HOME:-/usr/local/cuda-13.0}; cupti=$cuda/extras/CUPTI
OUT=${OUT:-/tmp/pmsampling-out}; mkdir -p "$OUT"
bin=/tmp/pmsampling_probe.$$
if ! timeout 120 "$cuda/bin/nvcc" -O2 -arch=sm_90 -I"$cupti/include" "$here/pmsampling_probe.cu" -o $bin \
    -L"$cupti/lib64" -Xlinker -rpath,"$cupti/lib64" -lcupti -lcuda > "$OUT/build.txt" 2>&1; then
    cat "$OUT/build.txt"; echo "0 passed, 1 failed"; exit 1
fi
export LD_LIBRARY_PATH=$cupti/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
timeout 150 $bin "$OUT" > "$OUT/probe.txt" 2>&1; rc=$?
cat "$OUT/probe.txt"
rm -f $bin
pass=$(grep -c '^CHECK ok' "$OUT/probe.txt"); fail=$(grep -c '^CHECK bad' "$OUT/probe.txt")
[ $rc = 0 ] || { echo "probe exit $rc"; fail=$((fail + 1)); }
echo "$pass passed, $fail failed"
