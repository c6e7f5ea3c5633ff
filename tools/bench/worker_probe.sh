#!/usr/bin/env bash
# Where rtrace's worker spends its CPU on PyTorch's x.add_(1) (issue 20): three processes of
# each variant in turn, each pinned to CPU 2 with all its threads, 2 rounds of 200 000 ops,
# rtrace's default mode (GPU activity, NVTX); per process the rounds (us/op) and, from
# tools/bench/overhead_torch.py, the worker's CPU per op, its system part (10 ms clock ticks)
# and its minor page faults per op. Variants: default; heap (CUPTI's buffers in heap memory,
# RTRACE_GPU_FILE_BUFFERS=0); shm (the trace on /dev/shm); bigring (RTRACE_BUFFER_RECORDS=2^20);
# flush50 (RTRACE_FLUSH_MS=50). Run on the GPU machine from the repository root, with
# target/release/librtrace.so there:   bash tools/bench/worker_probe.sh
set -u
L=$PWD/target/release/librtrace.so
W=$(mktemp -d /tmp/wp.XXXX); S=$(mktemp -d /dev/shm/wp.XXXX)
for rep in 1 2 3; do
for v in default heap shm bigring flush50; do
  envs="LD_PRELOAD=$L RTRACE_GPU_ACTIVITY=1 RTRACE_NVTX=1 RTRACE_OUTPUT=$W/$v.$rep.%p.bin"
  case $v in heap) envs="$envs RTRACE_GPU_FILE_BUFFERS=0";; shm) envs="$envs RTRACE_OUTPUT=$S/$v.$rep.%p.bin";; bigring) envs="$envs RTRACE_BUFFER_RECORDS=1048576";; flush50) envs="$envs RTRACE_FLUSH_MS=50";; esac
  out=$(env $envs taskset -c 2 python3 tools/bench/overhead_torch.py add plain 200000 2 2>&1)
  echo "$v $rep $(echo "$out" | awk '$1=="round"{r=r" "$2} END{print "rounds" r}') $(echo "$out" | grep '^threads' | tr ' ' '\n' | grep -E 'rtrace-worker|python3(:sys|:faults)?=' | tr '\n' ' ')"
done; done
ls -la $W | head -3; du -sh $W $S; rm -rf $W $S
