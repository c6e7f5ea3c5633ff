#!/usr/bin/env python3
"""Instructions per op of each thread of a callgrind run, split by object and by rtrace's
function groups, from callgrind's own output files (`--separate-threads=yes`: one file per
thread, `callgrind.out.PID-NN`).

    callgrind_split.py OPS FILE...                       (per op: a run's totals / OPS)
    callgrind_split.py OPS1 FILE... -- OPS2 FILE...      (per op: (run 2 - run 1) / (OPS2 - OPS1))

The second form takes start-up and exit out: two runs of the same program that differ only in
their number of ops; threads are paired by their names below.

Per thread: its instructions (exclusive, so each instruction counts once) per op, by object
(librtrace.so, the dynamic loader's `__tls_get_addr`, libc, the simulated driver, CUPTI and
runtime, the program), the part of librtrace.so in each function group (GROUPS below, first
match wins), and the system calls per op (when run with `--collect-systime=yes`). A thread is
named by what it runs: `main` (the program's first), `worker` (rtrace's), `cupti` (the
simulated CUPTI's thread), else its number. "rtrace's own" on the program's thread is
librtrace.so plus what it calls in the loader (`__tls_get_addr`) and in libc (memcpy and the
like), counted inclusively from its call sites; on the worker, the whole thread. callgrind counts
each iteration of a `rep movs`/`rep stos` as an instruction: libc's memcpy and memset figures
overstate their time."""

import re
import sys
from collections import defaultdict

GROUPS = [
    ("record encoding (format crate)", r"rtrace_format::.*(to_bytes|from_bytes|encode)"),
    ("cupti callback", r"cupti::callbacks|cupti::share|runtime_api::|thread::link_current"),
    ("driver wrappers (hook)", r"generated::|hook::|interpose|procaddr|capture::|actions::"),
    ("ring push", r"ring::Ring::(push|make_room|wait_for_room)"),
    ("worker: ring drain", r"ring::Ring::drain|ring::hand_over|drain::|ring::Ring::(release|len|is_)"),
    ("worker: GPU records, links", r"gpu_batch|cupti::records|cupti::buffers|cupti::activity|cupti::modules|kernel_names|LinkTable"),
    ("worker: output, chunks", r"output::|rtrace_format::|codec|chunk"),
    ("worker: loop, clock", r"session::|clock::|sys::|std::thread|park|sleep"),
]


def short_object(path):
    base = path.rsplit("/", 1)[-1]
    if "librtrace" in base:
        return "librtrace.so"
    if base.startswith("ld-linux") or base.startswith("ld-"):
        return "ld.so"
    if base.startswith("libc.so") or base.startswith("libc-"):
        return "libc"
    if base.startswith("libcudart"):
        return "libcudart (sim)"
    if base.startswith("libcuda"):
        return "libcuda (sim)"
    if base.startswith("libcupti"):
        return "libcupti (sim)"
    if base.startswith("libcudart"):
        return "libcudart (sim)"
    return base or "?"


def parse(path):
    """Per (object, function): exclusive cost by event; calls made by each librtrace.so
    function into other objects, with their inclusive cost; the event names."""
    names = {"ob": {}, "fl": {}, "fn": {}}
    events = []
    excl = defaultdict(lambda: defaultdict(int))
    called_from_rtrace = defaultdict(int)  # object -> inclusive Ir of calls from librtrace.so
    calls = defaultdict(int)  # (object, function) -> times called
    ob = fn = None
    cob = cfn = None
    pending_call = None
    thread = None

    def name(kind, rest):
        m = re.match(r"\((\d+)\)(?: (.*))?", rest)
        if not m:
            return rest
        if m.group(2) is not None:
            names[kind][m.group(1)] = m.group(2)
        return names[kind].get(m.group(1), "?")

    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                vals = line.split()
                costs = [int(v) for v in vals[1:]]
                if pending_call is not None:
                    key = (short_object(cob or ob), cfn)
                    calls[key] += pending_call
                    if short_object(ob) == "librtrace.so" and short_object(cob or ob) != "librtrace.so":
                        called_from_rtrace[short_object(cob or ob)] += costs[0] if costs else 0
                    pending_call = None
                    cob = cfn = None
                    continue
                for i, v in enumerate(costs):
                    excl[(short_object(ob), fn)][i] += v
                continue
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("thread:"):
                thread = int(line.split()[1])
            elif line.startswith("ob="):
                ob = name("ob", line[3:])
            elif line.startswith("fn="):
                fn = name("fn", line[3:])
                cob = None
            elif line.startswith("fl=") or line.startswith("fi=") or line.startswith("fe="):
                name("fl", line[3:])
            elif line.startswith("cob="):
                cob = name("ob", line[4:])
            elif line.startswith("cfi=") or line.startswith("cfl="):
                name("fl", line[4:])
            elif line.startswith("cfn="):
                cfn = name("fn", line[4:])
            elif line.startswith("calls="):
                pending_call = int(line[6:].split()[0])
    return thread, events, excl, called_from_rtrace, calls


def label_of(thread, excl):
    fns = " ".join(fn or "" for (_, fn) in excl)
    if thread == 1:
        return "main"
    if "run_worker" in fns:
        return "worker"
    if any(o == "libcupti (sim)" for (o, _) in excl) and not any(
        o == "librtrace.so" for (o, _) in excl
    ):
        return "cupti"
    return f"thread {thread}"


def threads(paths):
    """label -> (events, exclusive costs, inclusive costs of calls from librtrace.so by object)"""
    out = {}
    for path in paths:
        thread, events, excl, from_rtrace, _ = parse(path)
        out[label_of(thread, excl)] = (events, excl, from_rtrace)
    return out


def minus(a, b):
    """a - b, key by key (b may lack keys; the smaller run's costs)."""
    out = defaultdict(lambda: defaultdict(int))
    for k, d in a.items():
        for i, v in d.items():
            out[k][i] = v - b.get(k, {}).get(i, 0)
    return out


def report(label, events, excl, from_rtrace, ops):
    ir = lambda d: d.get(0, 0)
    total = sum(ir(d) for d in excl.values())
    by_obj = defaultdict(int)
    for (o, _), d in excl.items():
        by_obj[o] += ir(d)
    tls = sum(ir(d) for (o, fn), d in excl.items() if o == "ld.so" and fn and "tls_get_addr" in fn)
    print(f"== {label}: {total / ops:.1f} instructions per op")
    for o, v in sorted(by_obj.items(), key=lambda kv: -kv[1]):
        if abs(v / ops) >= 0.05:
            print(f"   {o:<26} {v / ops:10.1f}")
    rt = by_obj.get("librtrace.so", 0)
    tls_rt = from_rtrace.get("ld.so", 0)
    libc_rt = from_rtrace.get("libc", 0)
    own = total if label == "worker" else rt + tls_rt + libc_rt
    print(f"   rtrace's own               {own / ops:10.1f}   (librtrace.so {rt / ops:.1f}, "
          f"__tls_get_addr from it {tls_rt / ops:.1f} of {tls / ops:.1f}, libc from it "
          f"{libc_rt / ops:.1f})")
    groups = defaultdict(int)
    for (o, fn), d in excl.items():
        if o != "librtrace.so":
            continue
        g = next((g for g, pat in GROUPS if re.search(pat, fn or "")), "other")
        groups[g] += ir(d)
    for g, v in sorted(groups.items(), key=lambda kv: -kv[1]):
        if abs(v / ops) >= 0.05:
            print(f"     {g:<30} {v / ops:8.1f}")
    top = sorted(((ir(d), fn) for (o, fn), d in excl.items() if o == "librtrace.so"), reverse=True)
    for v, fn in top[:TOP]:
        if abs(v / ops) >= 1:
            print(f"       {v / ops:8.1f}  {(fn or '?')[:110]}")
    if "sysCount" in events:
        k = events.index("sysCount")
        sc = sum(d.get(k, 0) for d in excl.values())
        print(f"   system calls               {sc / ops:10.4f}")
        top = sorted(((d.get(k, 0), fn) for (o, fn), d in excl.items() if d.get(k, 0) > 0), reverse=True)
        for n, fn in top[:6]:
            print(f"     {n / ops:10.4f}  {fn}")


TOP = 12


def main():
    args = sys.argv[1:]
    if "--" in args:
        i = args.index("--")
        (n1, files1), (n2, files2) = (int(args[0]), args[1:i]), (int(args[i + 1]), args[i + 2:])
    else:
        (n1, files1), (n2, files2) = (0, []), (int(args[0]), args[1:])
    small, large = threads(files1), threads(files2)
    ops = n2 - n1
    for label, (events, excl, from_rtrace) in large.items():
        if label in small:
            _, e1, f1 = small[label]
            excl = minus(excl, e1)
            from_rtrace = {k: v - f1.get(k, 0) for k, v in from_rtrace.items()}
        total = sum(d.get(0, 0) for d in excl.values())
        if total < ops:  # a thread that did next to nothing
            continue
        report(label, events, excl, from_rtrace, ops)


if __name__ == "__main__":
    main()
