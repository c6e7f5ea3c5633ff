#!/bin/sh
# Builds cupti_filebuf_probe.cu and runs it for each (launches, sleep ms, flush period ms): what
# CUPTI left in the file-backed buffers when the process was killed (issue 19).
here=$(dirname "$0"); cuda=${CUDA_HOME:-/usr/local/cuda-13.0}; cupti=$cuda/extras/CUPTI
nvcc -O2 -I"$cupti/include" "$here/cupti_filebuf_probe.cu" -o /tmp/cupti_filebuf_probe \
    -L"$cupti/lib64" -Xlinker -rpath,"$cupti/lib64" -lcupti || exit 1
for run in ${RUNS:-"200 0 0" "200 300 0" "200 0 10" "200 300 10" "5000 0 0" "5000 0 10" "5000 300 10" "20000 100 10"}; do
    set -- $run; f=/tmp/filebuf.$$; echo "== launches $1 sleep_ms $2 flush_period_ms $3"
    out=$(/tmp/cupti_filebuf_probe $f $1 $2 $3); echo "$out"
    s=$(echo "$out" | awk '/^stride/ { print $3, $5, $7 }')
    python3 "$here/cupti_filebuf_probe.py" $f $s; rm -f $f
done
