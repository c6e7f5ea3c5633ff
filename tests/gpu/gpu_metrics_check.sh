#!/usr/bin/env bash
# GPU metrics over time on the GPU (issue 21): tests/gpu/gpu_metrics_kernels.cu recorded with
# `rtrace record --gpu-metrics` (PM sampling, by the sampler process beside the program: its
# trace gm.gpu-metrics.bin beside the program's gm.bin), then checked through `rtrace report
# --format json --section gpu-metrics` of both:
#   - the DRAM read and write throughput the samples give the copy kernel (overlap-weighted over
#     its run) equal the bytes it moved over its duration (kernel record) within 5%;
#   - SM active follows kernel busy time: at least 90% over the FMA and the WMMA kernels, and
#     the GPU's average over the run within [0.5, 1.05] of its busy share;
#   - the tensor pipe is active (> 10%) over the WMMA kernel only (< 1% over the others);
#   - the NVTX ranges get their kernel's values;
#   - no sample lost (no decode stopped with its image full, no gap between samples);
#   - the program's trace holds no PM sampling of its own (the program never loads it);
#   - PyTorch (tests/gpu/gpu_metrics_matmul.py): the tensor pipe > 10% over the bf16 GEMM
#     kernels and their NVTX phase, < 1% over the elementwise ones (those that ran at least
#     ten samples' time) and theirs.
# Runs tests/gpu/pmsampling_probe.sh too with RUN_PROBE=1. Writes both traces to $OUT
# (gm.bin.gz, gm.gpu-metrics.bin.gz).
# About a minute (nvcc, three short runs of the kernels, one PyTorch step per mode).
#
#   OUT=dir bash tests/gpu/gpu_metrics_check.sh     (from the repository root, on the GPU machine)
#
# Prints PASS/FAIL lines and ends with "N passed, N failed".
set -u
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
RTRACE=$ROOT/target/release/rtrace
W=$(mktemp -d /tmp/rtrace-gpumetrics.XXXXXX)
. tests/gpu/cupti_env.sh
unset LD_PRELOAD CUDA_INJECTION64_PATH RTRACE_OUTPUT RTRACE_METRICS RTRACE_GPU_METRICS
PASS=0
FAIL=0
pass() { PASS=$((PASS + 1)); echo "PASS $1  ($2)"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $1  ($2)"; }

if [ "${RUN_PROBE:-0}" = 1 ]; then
    echo "== tests/gpu/pmsampling_probe.sh"
    OUT=$OUT/probe timeout 170 sh tests/gpu/pmsampling_probe.sh > "$OUT/probe.txt" 2>&1
    tail -n 1 "$OUT/probe.txt" | sed 's/^/    probe: /'
fi

cd "$W" || exit 2
if ! timeout 60 "$C/bin/nvcc" -O2 -arch=sm_90 -I"$C/include" -o kernels \
    "$ROOT/tests/gpu/gpu_metrics_kernels.cu" -ldl > build.txt 2>&1; then
    fail build "$(head -5 build.txt | tr '\n' ' ')"
    echo "$PASS passed, $FAIL failed"; exit 1
fi
plain=$(timeout 30 ./kernels)
# What each process holds on the GPU meanwhile (the sampler's context among them).
(sleep 3; timeout 20 nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader \
    > apps.txt 2>&1) &
timeout 40 "$RTRACE" record --gpu-metrics -o gm.bin -- ./kernels > traced.out 2> traced.err
rc=$?
wait
sed 's/^/    GPU memory: /' apps.txt
tail -n 5 traced.err | sed 's/^/    /'
if [ $rc = 0 ] && [ "$(cat traced.out)" = "$plain" ]; then
    pass record "exit 0, same output"
else
    fail record "exit $rc; $(head -3 traced.err | tr '\n' ' ')"
fi
for f in gm.bin gm.gpu-metrics.bin; do
    gzip -c "$f" > "$OUT/$f.gz" 2>/dev/null
    echo "    $f: $(stat -c %s "$f") bytes, gzipped $(stat -c %s "$OUT/$f.gz") bytes"
done
if [ -s gm.gpu-metrics.bin ] && [ -s gm.bin ]; then
    pass two-traces "the program's gm.bin and the sampler's gm.gpu-metrics.bin"
else
    fail two-traces "$(ls gm*)"
fi
own=$(timeout 30 "$RTRACE" report --format json --section gpu-metrics gm.bin 2>/dev/null |
    python3 -c 'import json,sys; g=json.load(sys.stdin).get("gpu_metrics") or {}; print(len(g.get("setups", [])))')
[ "$own" = 0 ] && pass program-samples-nothing "the program's trace: no PM sampling set-up" ||
    fail program-samples-nothing "the program's trace: $own set-ups"
timeout 30 "$RTRACE" report --section gpu-metrics gm.bin gm.gpu-metrics.bin > report.txt 2>&1
sed 's/^/    /' report.txt | head -40
timeout 30 "$RTRACE" report --format json gm.bin gm.gpu-metrics.bin > report.json 2> report.err ||
    fail report "$(head -3 report.err)"
cp report.txt report.json traced.err "$OUT/" 2>/dev/null

python3 - report.json > checks.txt 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
g = r.get("gpu_metrics")
def out(ok, name, detail):
    print(("PASS " if ok else "FAIL ") + name + "  (" + detail + ")")
if not g or not g.get("devices"):
    out(False, "samples", "no GPU metrics in the report: %s" % str(g and (g.get("notices"), g.get("errors"))))
    sys.exit(0)
m = g["metrics"]
col = lambda name: m.index(name) if name in m else None
def val(row, name):
    i = col(name)
    return None if i is None or row["values"][i] is None else row["values"][i]
s = g["setups"][0]
out(s["samples"] > 0, "samples", "%d samples every %d %s, %d metrics" % (s["samples"], s["interval"], s["interval_unit"], s["metrics"]))
kern = {k["name"].split("(")[0]: k for k in g["kernels"]}
# The kernels' own durations from the kernel summary.
ks = {k["name"].split("(")[0]: k for k in r.get("kernels", [])}
copy = kern.get("copy_kernel")
reps, gib = 40, 1 << 30
if copy:
    dur = ks["copy_kernel"]["total_ns"] if "copy_kernel" in ks else copy["span_ns"]
    want = reps * gib / (dur / 1e9)
    for name, metric in [("dram-read", "dram__bytes_read.sum.per_second"), ("dram-write", "dram__bytes_write.sum.per_second")]:
        got = val(copy, metric)
        ok = got is not None and abs(got / want - 1) < 0.05
        out(ok, name, "sampled %.1f GB/s, bytes/duration %.1f GB/s (%s), covered %.3f" % ((got or 0) / 1e9, want / 1e9, "%+.2f%%" % (100 * ((got or 0) / want - 1)), copy["covered"]))
else:
    out(False, "dram-read", "no copy_kernel row")
sm = "sm__cycles_active.avg.pct_of_peak_sustained_elapsed"
tensor = "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed"
for k in ["fma_kernel", "wmma_kernel"]:
    v = val(kern[k], sm) if k in kern else None
    out(v is not None and v >= 90, "sm-active-" + k, "%s%%" % v)
busy = sum(k["total_ns"] for k in r.get("kernels", []))
dev = g["devices"][0]
share = busy / dev["span_ns"] if dev["span_ns"] else 0
v = val(dev, sm)
out(v is not None and 0.5 * share <= v / 100 <= 1.05 * share, "sm-active-follows-busy",
    "GPU %.2f%% over the run; kernels busy %.2f%% of it" % (v or 0, 100 * share))
t_w = val(kern.get("wmma_kernel", {"values": []}), tensor) if "wmma_kernel" in kern else None
others = [val(kern[k], tensor) for k in ["copy_kernel", "fma_kernel"] if k in kern]
out(t_w is not None and t_w > 10 and all(o is not None and o < 1 for o in others), "tensor-only-wmma",
    "WMMA %s%%, others %s" % (t_w, others))
ranges = {n["name"]: n for n in g["nvtx"]}
ok = all(x in ranges for x in ["copy", "fma", "wmma"]) and val(ranges["fma"], sm) is not None
out(ok, "nvtx-ranges", ", ".join("%s %.1f%% SM" % (n, val(ranges[n], sm) or 0) for n in ranges))
tally = [n["message"] for n in g["notices"] if "decodes (" in n["message"]]
out(s["dropped"] == 0 and s["overflows"] == 0 and tally and " 0 lost," in tally[0]
    and "(0 with the image full," in tally[0], "nothing-lost",
    "%d lost, %d overflows; %s" % (s["dropped"], s["overflows"], tally))
PY

# A PyTorch step beside GPU activity and NVTX: same output, samples, and what each mode costs
# (wall time of one call each: plain, rtrace record, rtrace record --gpu-metrics).
if python3 -c 'import torch' 2>/dev/null; then
    wall() { local t0=$(date +%s%N); timeout 40 "$@" > step.out 2> step.err; local rc=$?
        echo "$(( ($(date +%s%N) - t0) / 1000000 )) $rc"; }
    read tp rcp < <(wall python3 "$ROOT/tests/gpu/pytorch_step.py"); cp step.out plain_step.out
    read tr rcr < <(wall "$RTRACE" record -o step-%p.bin -- python3 "$ROOT/tests/gpu/pytorch_step.py")
    read tg rcg < <(wall "$RTRACE" record --gpu-metrics -o stepgm-%p.bin -- python3 "$ROOT/tests/gpu/pytorch_step.py")
    samples=$(timeout 20 "$RTRACE" report --section gpu-metrics stepgm-*.bin 2>/dev/null | grep -o '^GPU metrics: [0-9]* samples' | head -1)
    if [ "$rcg" = 0 ] && cmp -s plain_step.out step.out && [ -n "$samples" ]; then
        pass pytorch-step "same output; $samples; wall ms: plain $tp, record $tr, record --gpu-metrics $tg"
    else
        fail pytorch-step "exit $rcg; ${samples:-no samples}; $(tail -2 step.err | tr '\n' ' ')"
    fi
    # The tensor pipe over a bf16 matmul only: the GEMM kernels > 10%, the elementwise
    # ones < 1%, each NVTX phase likewise.
    python3 "$ROOT/tests/gpu/gpu_metrics_matmul.py" > mm_plain.out 2>&1
    timeout 60 "$RTRACE" record --gpu-metrics -o mm-%p.bin -- python3 \
        "$ROOT/tests/gpu/gpu_metrics_matmul.py" > mm.out 2> mm.err
    rc=$?
    timeout 30 "$RTRACE" report --format json mm-*.bin > mm.json 2> mm_report.err
    timeout 30 "$RTRACE" report --section gpu-metrics mm-*.bin 2>&1 | sed 's/^/    /' | head -30
    python3 - mm.json "$rc" "$(cmp -s mm.out mm_plain.out && echo same)" >> checks.txt 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); g = r.get("gpu_metrics") or {}
m = g.get("metrics", [])
t = "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed"
i = m.index(t) if t in m else None
def tensor(row):
    return None if i is None else row["values"][i]
def shown(v):
    return "-" if v is None else "%.3f%%" % v
# cuBLAS's GEMM kernels: nvjet_* (CUDA 12.8+), sm90_xmma_gemm_*, cutlass_*.
gemm = [k for k in g.get("kernels", []) if any(w in k["name"].lower() for w in ("gemm", "xmma", "cutlass", "nvjet"))]
# Kernels of at least ten samples' time (a shorter one's values are mostly its neighbours').
interval = (g.get("setups") or [{"interval": 100000}])[0]["interval"]
elem = [k for k in g.get("kernels", []) if "elementwise" in k["name"].lower() and k["span_ns"] >= 10 * interval]
ok = sys.argv[2] == "0" and sys.argv[3] == "same"
print(("PASS " if ok else "FAIL ") + "matmul-record  (exit %s, output %s)" % (sys.argv[2], sys.argv[3] or "differs"))
ok = gemm and elem and all((tensor(k) or 0) > 10 for k in gemm) and all(tensor(k) is not None and tensor(k) < 1 for k in elem)
print(("PASS " if ok else "FAIL ") + "tensor-only-matmul  (GEMM %s; elementwise %s)" % (
    ["%s %s (covered %.2f)" % (k["name"][:40], shown(tensor(k)), k["covered"]) for k in gemm],
    ["%s %s (covered %.2f)" % (k["name"][:40], shown(tensor(k)), k["covered"]) for k in elem]))
ph = {n["name"]: n for n in g.get("nvtx", [])}
ok = ("matmul" in ph and "elementwise" in ph and (tensor(ph["matmul"]) or 0) > 10
      and tensor(ph["elementwise"]) is not None and tensor(ph["elementwise"]) < 1)
print(("PASS " if ok else "FAIL ") + "tensor-nvtx-phases  (%s)" % ", ".join("%s %s" % (n, shown(tensor(v))) for n, v in ph.items()))
PY
else
    echo "    (no PyTorch: pytorch-step skipped)"
fi
cat checks.txt
PASS=$((PASS + $(grep -c '^PASS' checks.txt)))
FAIL=$((FAIL + $(grep -c '^FAIL' checks.txt)))
grep -q Traceback checks.txt && FAIL=$((FAIL + 1))
echo "$PASS passed, $FAIL failed"
