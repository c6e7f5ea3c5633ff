"""Workloads (b) and (c) of tools/bench/gpu_overhead.sh, one process per run.

    python3 tools/bench/overhead_torch.py add    MODE [OPS=20000] [ROUNDS=5]
    python3 tools/bench/overhead_torch.py matmul MODE [OPS=50] [ROUNDS=5] [N=8192]
MODE: plain, profiler, or cupti[:OPTIONS] (CUPTI alone: tools/bench/cupti_alone.c, built as
$CUPTI_ALONE_LIB, started with OPTIONS before the warm-up round).

add:    x.add_(1) on a 1-element CUDA tensor (launch-bound), OPS per round, us per op.
matmul: torch.mm of two N x N bf16 matrices into a preallocated output (GPU-bound), OPS per
        round, ms per matmul.
One warm-up round, then ROUNDS timed rounds; each round starts and ends with
torch.cuda.synchronize(), and its time includes the final one. `profiler` runs the timed rounds
inside torch.profiler.profile(activities=[ProfilerActivity.CUDA]); the profiler's start and stop
are outside every round. `cupti` starts its CUPTI collection after the first CUDA call and
flushes it after the last round. Prints, for gpu_overhead.sh:
    round <value>            one line per timed round
    usage <cpu> <minflt> <vcsw> <ivcsw>
                             per timed round, per op: CPU time of the whole process (every
                             thread: the program's, CUDA's, CUPTI's, a tracer's) in the unit
                             of the round's value, minor page faults, voluntary and involuntary
                             context switches (getrusage)
    ops <n>                  operations issued in all, warm-up included
    profiler_kernels <n>     (profiler mode) GPU kernel events the profiler reported
    profiler_stop_s <s>      (profiler mode) time the profiler took to stop and parse its records
    cupti_kernels <n>        (cupti mode) kernel records CUPTI delivered, warm-up included
    threads <name>=<us> ...  CPU time per op each thread spent over the timed rounds, in the
                             round's unit (/proc/self/task: schedstat's ns where the kernel
                             keeps them, else 10 ms clock ticks; threads of one name summed),
                             busiest first; NAME:sys the system time of those threads (10 ms
                             clock ticks: coarse, sum or take medians over many processes);
                             NAME:faults its minor page faults per op (add workload)
"""
import ctypes
import os
import resource
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile


def thread_times():
    """CPU seconds of each live thread, by thread name: the scheduler's account of the time each
    ran (schedstat, in ns) where the kernel keeps one, else user and system time (in clock
    ticks, 10 ms: a rough figure); as NAME:sys, the system part (clock ticks); as NAME:faults,
    the minor page faults, over 1e6 (so that the add workload prints them per op)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        task = f"/proc/self/task/{tid}"
        try:
            with open(f"{task}/stat") as f:
                st = f.read()
            name = st[st.index("(") + 1:st.rindex(")")]
            fields = st[st.rindex(")") + 2:].split()
            system = int(fields[12]) / tick
            try:
                with open(f"{task}/schedstat") as f:
                    secs = int(f.read().split()[0]) / 1e9
            except (OSError, ValueError, IndexError):
                secs = int(fields[11]) / tick + system
        except (OSError, ValueError, IndexError):
            continue
        out[name] = out.get(name, 0.0) + secs
        out[name + ":sys"] = out.get(name + ":sys", 0.0) + system
        # Minor page faults, scaled so that the per-op figure printed is faults per op.
        out[name + ":faults"] = out.get(name + ":faults", 0.0) + int(fields[7]) / 1e6
    return out


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("add", "matmul") or \
            sys.argv[2].split(":")[0] not in ("plain", "profiler", "cupti"):
        sys.exit(__doc__)
    work, mode = sys.argv[1], sys.argv[2]
    cupti = None
    ops = int(sys.argv[3]) if len(sys.argv) > 3 else (20000 if work == "add" else 50)
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    n = int(sys.argv[5]) if len(sys.argv) > 5 else 8192

    if work == "add":
        x = torch.zeros(1, device="cuda")
        scale = 1e6  # us per op

        def body():
            for _ in range(ops):
                x.add_(1)
    else:
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        scale = 1e3  # ms per matmul

        def body():
            for _ in range(ops):
                torch.mm(a, b, out=c)

    usages = []

    def one_round():
        torch.cuda.synchronize()
        u0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        body()
        torch.cuda.synchronize()
        t = (time.perf_counter() - t0) / ops * scale
        u1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (u1.ru_utime + u1.ru_stime - u0.ru_utime - u0.ru_stime) / ops * scale
        usages.append((cpu, (u1.ru_minflt - u0.ru_minflt) / ops, (u1.ru_nvcsw - u0.ru_nvcsw) / ops,
                       (u1.ru_nivcsw - u0.ru_nivcsw) / ops))
        return t

    if mode.startswith("cupti"):
        cupti = ctypes.CDLL(os.environ["CUPTI_ALONE_LIB"])
        cupti.cupti_alone_stop.restype = ctypes.c_long
        options = mode.split(":", 1)[1] if ":" in mode else ""
        rc = cupti.cupti_alone_start(options.encode())
        if rc != 0:
            sys.exit(f"cupti_alone_start({options!r}) failed: {rc}")
        mode = "plain"
    one_round()  # warm-up
    threads0 = thread_times()
    times = []
    if mode == "plain":
        for _ in range(rounds):
            times.append(one_round())
    else:
        prof = profile(activities=[ProfilerActivity.CUDA])
        prof.start()
        for _ in range(rounds):
            times.append(one_round())
        t0 = time.perf_counter()
        prof.stop()
        stop_s = time.perf_counter() - t0
    threads1 = thread_times()
    spent = {n: v - threads0.get(n, 0.0) for n, v in threads1.items()}
    print("threads " + " ".join(f"{n.replace(' ', '_')}={v / (ops * rounds) * scale:.4f}" for n, v in
                                sorted(spent.items(), key=lambda kv: -kv[1]) if v > 0))
    for t in times:
        print(f"round {t:.4f}")
    for u in usages[1:]:  # the timed rounds
        print("usage " + " ".join(f"{v:.6f}" for v in u))
    print(f"ops {ops * (rounds + 1)}")
    if cupti is not None:
        print(f"cupti_kernels {cupti.cupti_alone_stop()}")
    if mode == "profiler":
        try:
            kernels = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
            print(f"profiler_kernels {kernels}")
        except Exception as e:  # the timings above stand without it
            print(f"profiler_kernels ? ({type(e).__name__}: {e})", file=sys.stderr)
        print(f"profiler_stop_s {stop_s:.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
