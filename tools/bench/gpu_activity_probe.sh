set -u
C=/usr/local/cuda-13.0
W=/tmp/gw; rm -rf $W; mkdir -p $W
nvcc -O2 -cudart shared -o $W/va samples/vector_add.cu 2>&1 | tail -2
gcc -O2 -I$C/include samples/driver_api.c -o $W/da -L$C/lib64/stubs -lcuda
L=$PWD/target/release/librtrace.so
for p in "$W/va" "$W/da" "python3 tests/gpu/pytorch_step.py"; do
  n=$(basename ${p%% *})
  RTRACE_GPU_ACTIVITY=1 RTRACE_DEBUG=1 RTRACE_OUTPUT=$W/$n-%p.bin LD_PRELOAD=$L $p > $W/$n.out 2> $W/$n.err; echo "$n rc=$? $(tail -1 $W/$n.out)"; grep -i "gpu activity" $W/$n.err | head -3
  python3 - $W/$n-*.bin <<'PY'
import sys, collections
sys.path.insert(0, 'tests/gpu'); import tracefile
for f in sys.argv[1:]:
    k, c, s = tracefile.read_gpu(f)
    api = tracefile.read(f)
    launches = sum(1 for r in api if r[0].startswith('cuLaunch'))
    print(f, 'kernels', len(k), 'memcpy', len(c), 'memset', len(s), 'launch API calls', launches)
    names = collections.Counter(x['name'][:60] for x in k)
    for nm, cnt in names.most_common(4): print('   ', cnt, nm)
    by_corr = {r[5]: r for r in api}
    linked = [x for x in k if x['flags'] & 2]
    bad = [x for x in linked if x['correlation'] not in by_corr
           or not by_corr[x['correlation']][0].startswith(('cuLaunch', 'cuGraphLaunch'))
           or x['start'] < by_corr[x['correlation']][2]]
    cl = [x for x in c if x['correlation'] in by_corr]
    print('    kernels linked to their launch call:', len(linked), 'of', len(k), '; wrong links:', len(bad),
          '; copies linked:', len(cl), 'of', len(c))
    if linked:
        lat = sorted(x['start'] - by_corr[x['correlation']][2] for x in linked)
        print('    launch-to-start latency ns: min', lat[0], 'median', lat[len(lat)//2], 'max', lat[-1])
    if k:
        x = k[0]; print('    first:', {kk: x[kk] for kk in ('start','end','grid','block','registers','static_smem','dyn_smem','stream','device','source_correlation')})
        t0 = min(r[2] for r in api); print('    first kernel starts', (x['start']-t0)/1e6, 'ms after first API call; durations ns', sorted(y['end']-y['start'] for y in k)[:3])
PY
done
# Conflict: the PyTorch profiler in a program traced with GPU activity on
cat > $W/prof.py <<'PY'
import torch
from torch.profiler import profile, ProfilerActivity
x = torch.zeros(1000, device='cuda')
with profile(activities=[ProfilerActivity.CUDA]) as p:
    for _ in range(10): x.add_(1)
    torch.cuda.synchronize()
print('profiler kernels', sum(1 for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA))
print('sum', float(x.sum()))
PY
RTRACE_GPU_ACTIVITY=1 RTRACE_DEBUG=1 RTRACE_OUTPUT=$W/prof-%p.bin LD_PRELOAD=$L python3 $W/prof.py 2>&1 | grep -v Warn | tail -5; echo "prof rc=$?"
python3 -c "
import sys; sys.path.insert(0,'tests/gpu'); import tracefile, glob
for f in glob.glob('$W/prof-*.bin'):
    k,c,s = tracefile.read_gpu(f); print('rtrace kernels with profiler running:', len(k))"
