#!/usr/bin/env bash
# Second SASS metrics probe (issue 21): which way of using CUPTI's SASS Metric API counts every
# launch alone (sassmetrics_probe.sh found only the first function launched after the first
# cuptiSassMetricsEnable counted, unless CONCURRENT_KERNEL activity was on, and nothing with
# the context/stream/function/memcpy/memset kinds on). Each recipe launches b b s s d d, each
# synchronized and flushed after it, and says how many of the 6 launches came back with one
# launch's instructions of their own function.
#
#   OUT=dir bash tests/gpu/sassmetrics_recipes.sh     (on the GPU machine; about a minute)
set -u
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
C=${CUDA_HOME:-/usr/local/cuda-13.0}
T=$C/targets/x86_64-linux
W=$(mktemp -d /tmp/rtrace-sassrecipes.XXXXXX)
export LD_LIBRARY_PATH=$T/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
unset LD_PRELOAD CUDA_INJECTION64_PATH
main() {
cd "$W" || exit 2
$C/bin/nvcc -arch=sm_90 -lineinfo -O2 -I$T/include -o probe "$here/sassmetrics_probe.cu" \
    -L$T/lib -Xlinker -rpath,$T/lib -lcupti -lcuda > build.log 2>&1 &&
$C/bin/nvcc -arch=sm_90 -O2 -DSASS_INJECT -shared -Xcompiler -fPIC -I$T/include -o inj.so \
    "$here/sassmetrics_probe.cu" -L$T/lib -Xlinker -rpath,$T/lib -lcupti -lcuda >> build.log 2>&1 ||
    { echo "FAIL build $(tail -3 build.log)"; return; }
i=0
for opts in toggle toggle,cycle toggle,cb,cycle "" cycle unset lazy0 act act,cycle act,unset act,lazy0 cb cb,cycle cb,unset \
    kind=CONTEXT kind=STREAM kind=FUNCTION kind=MEMCPY kind=MEMSET \
    kind=CONTEXT,kind=STREAM,kind=FUNCTION,cb kind=CONTEXT,kind=STREAM,kind=FUNCTION,cb,cycle \
    act,kind=CONTEXT,kind=STREAM,kind=FUNCTION,cb act,kind=CONTEXT,kind=STREAM,kind=FUNCTION,kind=MEMCPY,kind=MEMSET,cb,cycle; do
    i=$((i + 1))
    timeout 30 ./probe recipe "$opts" > recipe.$i.out 2>&1
    rc=$?
    echo "== recipe '$opts': exit $rc"
    grep -E '^(RECIPE|LAUNCH|CUDAERR)|RC cuptiActivityEnable|RC cuptiSassMetrics(SetConfig|Enable|UnsetConfig) [1-9]|RC cuptiEnableCallback [1-9]' recipe.$i.out | sort -u -k1,3 | head -12
done
PY='import torch, time
t = time.time(); x = torch.randn(512, 512, device="cuda")
for i in range(20):
    y = x @ x; x = (y / y.norm()).add_(1); z = torch.relu(x) + 0.5
torch.cuda.synchronize(); print("torch ok", float(z.sum()), round(time.time() - t, 3), "s")'
for envs in "INJ_NOTHREAD=1" "INJ_ACTIVITY=1 INJ_NOTHREAD=1" "INJ_ACTIVITY=1"; do
    timeout 60 env CUDA_INJECTION64_PATH=$W/inj.so $envs python3 -c "$PY" > torch.out 2>&1
    rc=$?
    echo "== torch with SASS metrics injected, $envs: exit $rc (124 hung, 139 segfault)"
    grep -E '^(INJ|torch ok|RC cuptiActivityEnable)' torch.out
    grep '^SUM inj' torch.out | awk '{print $3}' | sort -u | wc -l | sed 's/^/functions counted: /'
    tail -2 torch.out
done
}
main 2>&1 | tee "$OUT/sassrecipes.log"
cd "$W" && tar czf "$OUT/sassrecipes.tgz" --exclude=probe --exclude=inj.so . 2>/dev/null
