"""The tables of tools/bench/gpu_overhead.sh, from its work directory.

    python3 tools/bench/overhead_summary.py WORK RTRACE PROCS ROUNDS LAUNCHES OPS MATMULS N

WORK holds, per workload W and mode M (written by gpu_overhead.sh):
    rounds/W.M      one timed round's value per line (all processes of the mode)
    ops/W.M         operations issued, one line per process that finished
    procs/W.M       "ok" or "fail ..." per process started
    prof/W.M        the profiler's kernel event count, one line per process (profiler mode), or
                    the kernel records CUPTI alone delivered, warm-up included (cupti modes)
    threads/W.M     per process: `NAME=CPU` per op for each of its threads (by name) over the
                    timed rounds (add and matmul)
    usage/W.M       per timed round: CPU time of the process per op (all threads), minor faults,
                    voluntary and involuntary context switches per op (add and matmul)
    modes/W         the workload's modes, one per line
    traces/W.M.*.bin  rtrace traces (rtrace modes)
API records and dropped records come from `RTRACE report --format json` over a mode's traces;
kernel records are counted here, from the trace files' kernel chunks (kind 6, 112-byte records).
"""
import json
import os
import statistics
import struct
import subprocess
import sys

MAGIC = b"RTRACE\0\x1a"
CHUNK = 0x4B4E4843  # "CHNK"


def lines(path):
    try:
        with open(path) as f:
            return [l.strip() for l in f if l.strip()]
    except FileNotFoundError:
        return []


def count_chunks(path):
    """(api records, kernel records, memcpy records, memset records, dropped from chunk headers)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != MAGIC or len(data) < 16:
        raise ValueError(f"{path}: not an rtrace trace")
    (body_len,) = struct.unpack_from("<I", data, 12)
    off = 16 + body_len + 4
    api = kernels = copies = sets = dropped = 0
    while off + 40 <= len(data):
        magic, kind, _flags, plen, _crc, _tid, _seq, drop = struct.unpack_from("<IHHIIQQQ", data, off)
        if magic != CHUNK or off + 40 + plen > len(data):
            break  # a truncated tail: keep what was whole
        off += 40 + plen
        dropped += drop
        if kind == 2:
            api += plen // 32
        elif kind == 34 and plen >= 8:  # calls in ticks: records, then clock samples, then (k, flags)
            (k,) = struct.unpack_from("<I", data, off - 8)
            api += (plen - 8 - 16 * k) // 32
        elif kind == 6:
            kernels += plen // 112
        elif kind == 7:
            copies += plen // 64
        elif kind == 8:
            sets += plen // 64
    return api, kernels, copies, sets, dropped


def trace_counts(work, rtrace, key):
    """Sums over a mode's traces, or None where there are none."""
    d = os.path.join(work, "traces")
    files = sorted(os.path.join(d, f) for f in os.listdir(d) if f.startswith(key + ".") and f.endswith(".bin")) \
        if os.path.isdir(d) else []
    if not files:
        return None
    out = dict(files=len(files), api=0, kernels=0, copies=0, sets=0, dropped=0, chunk_dropped=0,
               json_kernels=None, notices=[], report_error=None)
    for f in files:
        try:
            a, k, c, s, dr = count_chunks(f)
            out["kernels"] += k
            out["copies"] += c
            out["sets"] += s
            out["chunk_dropped"] += dr
            out["api_chunks"] = out.get("api_chunks", 0) + a
        except (OSError, ValueError, struct.error) as e:
            out["report_error"] = f"reader: {e}"
    try:
        r = subprocess.run([rtrace, "report", "--format", "json", *files], capture_output=True, text=True,
                           timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"rtrace report exit {r.returncode}: {r.stderr.strip()[-300:]}")
        with open(os.path.join(work, f"report-{key}.json"), "w") as fh:
            fh.write(r.stdout)
        procs = json.loads(r.stdout)["processes"]
        out["api"] = sum(p.get("api_records", 0) for p in procs)
        out["dropped"] = sum(p.get("dropped", 0) for p in procs)
        if all("kernel_records" in p for p in procs):
            out["json_kernels"] = sum(p["kernel_records"] for p in procs)
        seen = {}
        for p in procs:
            for n in p.get("notices", []):
                m = n.get("message", "")
                seen[m] = seen.get(m, 0) + 1
        out["notices"] = sorted(seen.items(), key=lambda kv: -kv[1])
    except (OSError, RuntimeError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
        out["report_error"] = str(e)
        out["api"] = out.get("api_chunks", 0)
        out["dropped"] = out["chunk_dropped"]
    return out


def fmt(v, digits):
    return "-" if v is None else f"{v:.{digits}f}"


def usage_table(work, w, modes, rounds, unit, dg):
    """Per mode: the spread of its processes' medians, and what the process spent per op (CPU time
    of all its threads, page faults, context switches), medians over the timed rounds."""
    rows = []
    for m in modes:
        vals = [float(v) for v in lines(os.path.join(work, "rounds", f"{w}.{m}"))]
        per_proc = [statistics.median(vals[i:i + rounds]) for i in range(0, len(vals) - rounds + 1, rounds)]
        use = [[float(x) for x in l.split()] for l in lines(os.path.join(work, "usage", f"{w}.{m}"))]
        use = [u for u in use if len(u) == 4]
        if not per_proc and not use:
            continue
        med = [statistics.median(col) for col in zip(*use)] if use else [None] * 4
        rows.append((m, per_proc, med))
    if not rows:
        return
    print(f"  per process medians ({unit}) and per op usage (median of timed rounds):")
    print(f"  {'mode':<22} {'procs':>5} {'min':>9} {'median':>9} {'max':>9} {'cpu ' + unit:>12} {'cpu added':>10} "
          f"{'minflt/op':>10} {'vcsw/op':>9} {'ivcsw/op':>9}")
    base_cpu = next((r[2][0] for r in rows if r[0] == "untraced"), None)
    for m, pp, med in rows:
        lo, mid, hi = (min(pp), statistics.median(pp), max(pp)) if pp else (None, None, None)
        cpu_add = None if med[0] is None or base_cpu is None or m == "untraced" else med[0] - base_cpu
        print(f"  {m:<22} {len(pp):>5} {fmt(lo, dg):>9} {fmt(mid, dg):>9} {fmt(hi, dg):>9} {fmt(med[0], dg):>12} "
              f"{('-' if m == 'untraced' else fmt(cpu_add, dg)):>10} {fmt(med[1], 4):>10} {fmt(med[2], 4):>9} "
              f"{fmt(med[3], 4):>9}")


def threads_table(work, w, modes, unit, dg):
    """Per mode, the CPU time per op of each kind of thread (by name: the program's, CUDA's,
    CUPTI's, rtrace's worker), min / median / max over the mode's processes."""
    rows = []
    for m in modes:
        per = {}
        procs = lines(os.path.join(work, "threads", f"{w}.{m}"))
        for line in procs:
            for item in line.split():
                name, _, v = item.rpartition("=")
                try:
                    per.setdefault(name, []).append(float(v))
                except ValueError:
                    continue
        for name, vals in sorted(per.items(), key=lambda kv: -statistics.median(kv[1])):
            # A thread missing from some processes ran nothing there worth a line.
            vals = vals + [0.0] * (len(procs) - len(vals))
            rows.append((m, name, len(procs), min(vals), statistics.median(vals), max(vals)))
    if not rows:
        return
    print(f"  CPU time per op of each thread (by name), over the processes of a mode ({unit}):")
    print(f"  {'mode':<22} {'thread':<18} {'procs':>5} {'min':>9} {'median':>9} {'max':>9}")
    for m, name, n, lo, mid, hi in rows:
        print(f"  {m:<22} {name[:18]:<18} {n:>5} {lo:>9.{dg}f} {mid:>9.{dg}f} {hi:>9.{dg}f}")


def main():
    work, rtrace = sys.argv[1], sys.argv[2]
    procs, rounds, launches, ops, matmuls, n = (int(a) for a in sys.argv[3:9])
    workloads = [
        ("empty", f"(a) empty kernels, CUDA runtime API, non-blocking stream: {launches} launches per round",
         "us/launch", 3),
        ("add", f"(b) PyTorch x.add_(1) on a 1-element CUDA tensor: {ops} ops per round", "us/op", 3),
        ("matmul", f"(c) PyTorch bf16 matmul {n}x{n}: {matmuls} per round", "ms/matmul", 4),
    ]
    print(f"GPU overhead benchmark: per mode up to {procs} processes x {rounds} timed rounds (after 1 warm-up "
          "round), modes alternating; median over all timed rounds of a mode")
    ratio_line = None
    for w, title, unit, dg in workloads:
        modes = lines(os.path.join(work, "modes", w))
        if not modes:
            continue
        print()
        print(title)
        hdr = (f"{'mode':<18} {'procs':>7} {'rounds':>6} {unit + ' med':>13} {'p25..p75':>17} {'added':>9} "
               f"{'added%':>7} {'API recs':>10} {'kernels':>9} {'dropped':>8} {'ops issued':>10}")
        print(hdr)
        base = None
        added = {}
        notes = []
        for m in modes:
            key = f"{w}.{m}"
            vals = [float(v) for v in lines(os.path.join(work, "rounds", key))]
            st = lines(os.path.join(work, "procs", key))
            ok = sum(1 for s in st if s == "ok")
            issued = sum(int(v) for v in lines(os.path.join(work, "ops", key)))
            med = statistics.median(vals) if vals else None
            if len(vals) >= 2:
                q = statistics.quantiles(vals, n=4)
                spread = f"{q[0]:.{dg}f}..{q[2]:.{dg}f}"
            else:
                spread = "-"
            if m == "untraced":
                base = med
            add = None if (med is None or base is None or m == "untraced") else med - base
            added[m] = add
            pct = None if add is None or not base else add / base * 100
            api = kern = drop = "-"
            if m.startswith("rtrace"):
                tc = trace_counts(work, rtrace, key)
                if tc is None:
                    api = kern = drop = "none"
                    notes.append(f"  {m}: no trace files")
                else:
                    api, kern, drop = str(tc["api"]), str(tc["kernels"]), str(tc["dropped"])
                    if tc["json_kernels"] is not None and tc["json_kernels"] != tc["kernels"]:
                        notes.append(f"  {m}: rtrace report counts {tc['json_kernels']} kernel records, "
                                     f"the chunk reader {tc['kernels']}")
                    if tc["report_error"]:
                        notes.append(f"  {m}: {tc['report_error']} (counts from the chunk reader)")
                    if m.startswith("rtrace-gpu"):
                        notes.append(f"  {m}: {tc['files']} trace files; also {tc['copies']} memcpy and "
                                     f"{tc['sets']} memset records")
                    for msg, cnt in tc["notices"][:3]:
                        notes.append(f"  {m} notice (x{cnt}): {msg[:200]}")
            elif m == "profiler" or m.startswith("cupti"):
                pk = lines(os.path.join(work, "prof", key))
                if pk:
                    mark = "*" if m == "profiler" else "**"
                    kern = str(sum(int(v) for v in pk if v.isdigit())) + mark
                    notes.append(f"  {mark} {m}: kernel events the profiler itself reported (timed rounds only)"
                                 if m == "profiler" else
                                 f"  {mark} {m}: CUPTI alone, no rtrace: kernel records it delivered (warm-up "
                                 "included)")
            print(f"{m:<18} {f'{ok}/{len(st)}':>7} {len(vals):>6} {fmt(med, dg):>13} {spread:>17} "
                  f"{('-' if m == 'untraced' else fmt(add, dg)):>9} "
                  f"{('-' if m == 'untraced' else fmt(pct, 1)):>7} {api:>10} {kern:>9} {drop:>8} {issued:>10}")
        for line in notes:
            print(line)
        usage_table(work, w, modes, rounds, unit, dg)
        threads_table(work, w, modes, unit, dg)
        if w == "add":
            a, p = added.get("rtrace-gpu"), added.get("profiler")
            if a is None or p is None:
                ratio_line = "(b) rtrace-gpu added / profiler added: n/a (missing data)"
            elif p <= 0:
                ratio_line = (f"(b) rtrace-gpu added / profiler added: n/a (profiler added {p:.3f} us/op, not > 0); "
                              f"rtrace-gpu added {a:.3f} us/op")
            else:
                r = a / p
                ratio_line = (f"(b) rtrace-gpu added / profiler added = {a:.3f} / {p:.3f} = {r:.2f} "
                              f"(goal <= 0.5: {'met' if r <= 0.5 else 'NOT met'})")
            print(ratio_line)
            b = added.get("rtrace-gpu-b")
            if b is not None and p:
                print(f"(b) rtrace-gpu-b (LIB_B) added / profiler added = {b:.3f} / {p:.3f} = {b / p:.2f}")
            for r, c in (("rtrace-gpu", "cupti:ts,cb,res"), ("rtrace-default", "cupti:ts,cb,res,rt"),
                         ("rtrace-interpose", "cupti:ts,cb,res"), ("rtrace-interpose", "cupti:ts,cb,res,rt")):
                a, b = added.get(r), added.get(c)
                if a is not None and b is not None:
                    print(f"(b) {r} added beyond CUPTI alone ({c}) = {a:.3f} - {b:.3f} = {a - b:.3f} us/op")
    if ratio_line:
        print()
        print("goal " + ratio_line)


if __name__ == "__main__":
    main()
