#!/bin/sh
# Does CUPTI's PM sampling in one process see the GPU work of another (issue 21: a sampler of
# its own beside the traced program, so the program never loads PM sampling)? Builds
# pmsampling_probe.cu, starts `pmsampling_probe watch 5` (device 0 sampled every 100 us, no work
# of its own), then runs `pmsampling_probe load` (8 copies of 1 GiB, idle, an FMA kernel, idle,
# a WMMA kernel) as a second process, and compares: DRAM bytes the samples counted over the
# copies against the bytes copied (5%), SM active over the FMA kernel and in the idle gap, the
# tensor pipe over the WMMA kernel only. Prints "N passed, N failed".
#   OUT=dir sh tests/gpu/pmsampling_cross.sh
here=$(dirname "$0"); cuda=${CUDA_HOME:-/usr/local/cuda-13.0}; cupti=$cuda/extras/CUPTI
OUT=${OUT:-/tmp/pmsampling-cross}; mkdir -p "$OUT"
bin=/tmp/pmsampling_probe.$$
if ! timeout 120 "$cuda/bin/nvcc" -O2 -arch=sm_90 -I"$cupti/include" "$here/pmsampling_probe.cu" -o $bin \
    -L"$cupti/lib64" -Xlinker -rpath,"$cupti/lib64" -lcupti -lcuda > "$OUT/build.txt" 2>&1; then
    cat "$OUT/build.txt"; echo "0 passed, 1 failed"; exit 1
fi
export LD_LIBRARY_PATH=$cupti/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
timeout 60 $bin watch 5 > "$OUT/watch.txt" 2>&1 &
watcher=$!
sleep 1.5
timeout 60 $bin load > "$OUT/load.txt" 2>&1; lrc=$?
wait $watcher; wrc=$?
rm -f $bin
echo "watch exit $wrc, load exit $lrc; $(grep -c '^S ' "$OUT/watch.txt") samples; $(grep -c '^K ' "$OUT/load.txt") kernels"
grep -v '^[SK] ' "$OUT/watch.txt" | head -20
python3 - "$OUT/watch.txt" "$OUT/load.txt" "$wrc" "$lrc" <<'EOF'
import sys
watch, load, wrc, lrc = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
names, samples, kernels, per_copy = [], [], [], 0
for line in open(watch):
    f = line.split()
    if f[:1] == ["M"]: names.append(f[1])
    elif f[:1] == ["S"]: samples.append((int(f[1]), int(f[2]), [float(x) for x in f[3:]]))
for line in open(load):
    f = line.split()
    if f[:1] == ["K"]: kernels.append((f[1], int(f[2]), int(f[3])))
    elif f[:1] == ["bytes-per-copy"]: per_copy = int(f[1])
kernels.sort(key=lambda k: k[1])
ok = fail = 0
def check(good, name, detail):
    global ok, fail
    print(("PASS " if good else "FAIL ") + name + ": " + detail)
    ok, fail = ok + good, fail + (not good)
check(wrc == 0 and lrc == 0, "exits", f"watch {wrc}, load {lrc}")
check(len(samples) > 100 and len(kernels) == 11, "data", f"{len(samples)} samples, {len(kernels)} kernels")
if samples and len(kernels) == 11:
    col = {n: i for i, n in enumerate(names)}
    def avg(c, a, b):
        s = w = 0.0
        for lo, hi, v in samples:
            o = min(b, hi) - max(a, lo)
            if o > 0: s += v[c] * o; w += o
        return s / w if w else float("nan"), w / (b - a)
    def total(c, a, b):
        return sum(v[c] * (min(b, hi) - max(a, lo)) / (hi - lo) for lo, hi, v in samples if min(b, hi) > max(a, lo) and hi > lo)
    copies = kernels[1:9]
    a, b = copies[0][1], copies[-1][2]
    rd, wr = total(col["dram__bytes_read.sum"], a, b), total(col["dram__bytes_write.sum"], a, b)
    want = 8 * per_copy
    check(abs(rd / want - 1) < 0.05, "dram-read", f"{rd:.4g} B counted over the copies, {want} copied ({100 * (rd / want - 1):+.2f}%)")
    check(abs(wr / want - 1) < 0.05, "dram-write", f"{wr:.4g} B counted, {want} written ({100 * (wr / want - 1):+.2f}%)")
    fma, wmma = kernels[9], kernels[10]
    sm = col["sm__cycles_active.avg.pct_of_peak_sustained_elapsed"]
    tp = col["sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed"]
    sm_f, cov = avg(sm, fma[1], fma[2])
    sm_idle, _ = avg(sm, b + 5_000_000, fma[1] - 5_000_000)
    check(sm_f > 90 and cov > 0.99, "sm-active-fma", f"{sm_f:.2f}% over the FMA kernel ({cov:.3f} of it sampled)")
    check(sm_idle < 5, "sm-idle", f"{sm_idle:.2f}% in the idle gap")
    t_w, _ = avg(tp, wmma[1], wmma[2]); t_f, _ = avg(tp, fma[1], fma[2])
    check(t_w > 10 and t_f < 1, "tensor-wmma-only", f"{t_w:.2f}% over WMMA, {t_f:.2f}% over FMA")
print(f"{ok} passed, {fail} failed")
EOF
