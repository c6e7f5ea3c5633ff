"""Checks a trace of tests/gpu/nvtx_step.py (GPU activity on) against rtrace's NVTX ranges.

    python3 tests/gpu/nvtx_check.py ranges|emit|capture|edges RTRACE TRACE... [--iters N] [--kernels-per-iter K]

Rebuilds the NVTX ranges from the trace's events (tracefile.py, independently of the
collector), attributes each kernel to the innermost range open on the thread of the call that
launched it, and checks:
  ranges:  every iteration has its three sub-ranges; every kernel launched by the main thread
           while an "iter" range was open lies in exactly one of forward/backward/optimizer;
           rtrace report's per-name GPU records (kernels, copies, memsets launched by the
           range's thread inside it, nested ranges included) equal this attribution; all
           iterations launched the same number of kernels; prints kernels-per-iter, counted over
           every thread (autograd launches the backward kernels from a thread of its own);
           the process view (process_gpu_records, process_gpu_ns: docs/nvtx.md) equals this
           one's, and `backward` holds more in it than on its own thread;
           rtrace export --format chrome draws every range on its thread's NVTX track (name,
           duration, start one offset from the event's), lanes nesting properly, and spans of
           GPU work on the projected tracks only for names of ranges.
  emit:    ranges are aten:: operators; every kernel launched inside an iteration's operators
           lies in an aten:: range of its own thread; the Chrome export draws them (as above).
  capture: (RTRACE_NVTX_CAPTURE="iter 3") only iteration 3's range and kernels are recorded:
           the kernel count equals --kernels-per-iter.
  edges:   (nvtx_step.py edges, RTRACE_CAPTURE_RANGE=cudaProfilerApi) every pop recorded is
           its own push's (the level it carries is the innermost open push's), "forward" (popped
           while paused) is recorded with its pop and "hidden" (pushed while paused) not at all;
           "forward" ends before recording resumed, and each "async" range (started while
           recording, ended while paused) ends;
           every iteration has its four ranges; rtrace report holds no open range, and its
           GPU records per name equal this attribution (as in ranges).
Prints PASS/FAIL lines.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tracefile  # noqa: E402


def main():
    mode, rtrace = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    opts = {}
    while len(args) >= 2 and args[-2].startswith("--"):
        opts[args[-2][2:]] = int(args[-1])
        args = args[:-2]
    traces = args
    failed = 0

    def check(name, ok, detail):
        nonlocal failed
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} nvtx.{mode}.{name}  ({detail})")

    kernels, work, api, ranges = [], [], {}, []
    for t in traces:
        k, c, m = tracefile.read_gpu(t)
        kernels += k
        work += k + c + m  # what rtrace's projection counts: kernels, copies, memsets
        for (fn, _res, start, end, tid, corr) in tracefile.read(t, runtime=True):
            api[corr] = (fn, start, end, tid)
        ranges += tracefile.read_nvtx_ranges(t)
    pushes = [r for r in ranges if r["kind"] == "push"]
    # The innermost push range of the launching thread around each kernel's launch call.
    by_tid = {}
    for r in pushes:
        by_tid.setdefault(r["tid"], []).append(r)

    def innermost(tid, t):
        best = None
        for r in by_tid.get(tid, []):
            if r["start"] <= t <= r["end"] and (best is None or r["level"] > best["level"]):
                best = r
        return best

    def enclosing(tid, t, name_pred):
        return [r for r in by_tid.get(tid, []) if r["start"] <= t <= r["end"] and name_pred(r["name"])]

    attributed = []
    for k in kernels:
        call = api.get(k["correlation"])
        if call is None:
            attributed.append((k, None, None))
            continue
        attributed.append((k, call, innermost(call[3], call[1])))
    names = sorted({r["name"] for r in pushes})
    if mode == "ranges":
        iters = [r for r in pushes if r["name"].startswith("iter ")]
        check("iterations", len(iters) == opts.get("iters", 5), f"{len(iters)} iter ranges; names {names[:8]}")
        per_iter = []
        misplaced = 0
        for it in sorted(iters, key=lambda r: r["start"]):
            inside = [(k, c, r) for (k, c, r) in attributed if c and c[3] == it["tid"] and it["start"] <= c[1] <= it["end"]]
            per_iter.append(len(inside))
            misplaced += sum(1 for (_, _, r) in inside if r is None or r["name"] not in ("forward", "backward", "optimizer"))
        check("kernels-attributed", misplaced == 0 and sum(per_iter) > 0,
              f"{sum(per_iter)} kernels launched by the main thread inside iterations, {misplaced} not inside "
              f"forward/backward/optimizer; per iteration {per_iter}")
        check("iterations-alike", len(set(per_iter)) == 1, f"kernels per iteration {per_iter}")
        # Kernels launched during each iteration by any thread (autograd runs backward on its
        # own): what a capture range of one iteration records.
        all_threads = [sum(1 for (k, c, _) in attributed if c and it["start"] <= c[1] <= it["end"])
                       for it in sorted(iters, key=lambda r: r["start"])]
        print(f"    kernels per iteration, every thread: {all_threads}")
        print(f"kernels-per-iter {all_threads[-1] if all_threads else 0}")
        rep = check_report_projection(check, rtrace, traces, pushes, api, work)
        check_process_view(check, rep, traces)
        check_export(check, rtrace, traces, pushes + [r for r in ranges if r["kind"] == "start"])
    elif mode == "emit":
        aten = [r for r in pushes if "aten::" in r["name"]]
        check("operator-ranges", len(aten) > 0, f"{len(aten)} operator ranges, e.g. {sorted({r['name'] for r in aten})[:3]}")
        inside = [(k, c, r) for (k, c, r) in attributed if c and r is not None]
        bad = [r["name"] for (_, _, r) in inside if "aten::" not in r["name"]]
        check("kernels-attributed", len(inside) > 0 and not bad,
              f"{len(inside)} of {len(kernels)} kernels launched inside a range, all in an operator's range"
              + (f"; others {bad[:3]}" if bad else ""))
        threads = len({c[3] for (_, c, r) in inside})
        print(f"    kernels attributed on {threads} thread(s)")
        check_export(check, rtrace, traces, pushes + [r for r in ranges if r["kind"] == "start"])
    elif mode == "edges":
        check_edges(check, traces, opts.get("iters", 5), pushes)
        rep = check_report_projection(check, rtrace, traces, ranges, api, work)
        check("no-open-range", rep["nvtx"]["open"] == 0, f"{rep['nvtx']['open']} ranges never ended")
    else:
        iters = sorted({r["name"] for r in pushes if r["name"].startswith("iter ")})
        want = opts.get("kernels-per-iter", -1)
        check("only-iteration-3", iters == ["iter 3"], f"iteration ranges recorded {iters}")
        check("kernels", len(kernels) == want,
              f"{len(kernels)} kernel records, {want} launched per iteration")
        unlinked = sum(1 for (k, c, _) in attributed if c is None)
        check("linked", unlinked == 0, f"{unlinked} kernel records not linked to a recorded call")
    return failed


def check_report_projection(check, rtrace, traces, pushes, api, work):
    """rtrace's own attribution (report JSON), inclusive of nested ranges, against the one
    rebuilt here: every GPU record whose call the range's (starting) thread made inside it.
    `pushes`: the ranges to compare (push/pop ones, and start/end ones where the program makes
    them). Returns the report."""
    rep = json.loads(subprocess.run([rtrace, "report", "--format", "json", *traces], capture_output=True,
                                    text=True, check=True).stdout)
    ours = {(r["name"]): r["gpu_records"] for r in rep["nvtx"]["ranges"]}
    calls = [api.get(w["correlation"]) for w in work]
    mine = {}
    for r in pushes:
        n = sum(1 for c in calls if c and c[3] == r["tid"] and r["start"] <= c[1] <= r["end"])
        mine[r["name"]] = mine.get(r["name"], 0) + n
    diff = {n: (ours.get(n), mine.get(n)) for n in set(ours) | set(mine) if ours.get(n) != mine.get(n)}
    check("report-projection", not diff and ours.get("forward", 0) > 0,
          f"rtrace report GPU records per range equal the checker's for {len(ours)} names"
          + (f"; differences {list(diff.items())[:4]}" if diff else
             f"; forward {ours.get('forward')}, backward {ours.get('backward')}, optimizer {ours.get('optimizer')}"))
    return rep


def check_edges(check, traces, iters, pushes):
    """The pops and ends of ranges that cross a capture range's edges, in the raw events."""
    names, mismatched, orphans, pops, started, ended = [], 0, 0, 0, {}, 0
    for t in traces:
        strings, events = tracefile.read_nvtx_events(t)
        stacks = {}
        for e in events:
            stack = stacks.setdefault((e["tid"], e["domain"]), [])
            if e["kind"] == 1:
                stack.append(e["value"])
                names.append(strings.get(e["message"], ""))
            elif e["kind"] == 2:
                pops += 1
                if not stack:
                    orphans += 1
                elif stack.pop() != e["value"]:
                    mismatched += 1
            elif e["kind"] == 3:
                started[e["value"]] = strings.get(e["message"], "")
            elif e["kind"] == 4:
                ended += started.pop(e["value"], None) == "async"
    check("pops-paired", pops > 0 and mismatched == 0 and orphans == 0,
          f"{pops} pops, {mismatched} with another level than their push's, {orphans} with no push open")
    want = sorted([f"iter {i}" for i in range(iters)] + ["forward", "backward", "optimizer"] * iters)
    check("ranges", sorted(names) == want,
          f"{len(names)} pushes recorded, {names.count('forward')} forward, {names.count('hidden')} hidden")
    # "forward" was popped while paused: its range holds the cuProfilerStop before its pop and
    # no cuProfilerStart (the pop of "hidden", made after recording resumed, is not its end).
    calls = [c for t in traces for c in tracefile.read(t)]  # driver calls: (name, result, start, ...)
    stops = [c[2] for c in calls if c[0] == "cuProfilerStop"]
    starts = [c[2] for c in calls if c[0] == "cuProfilerStart"]
    fwd = [r for r in pushes if r["name"] == "forward"]
    wrong = [r for r in fwd if sum(r["start"] <= t <= r["end"] for t in stops) != 1
             or any(r["start"] <= t <= r["end"] for t in starts)]
    check("pop-while-paused", len(fwd) == iters and not wrong,
          f"{len(fwd)} forward ranges, {len(wrong)} not ended before recording resumed; "
          f"{len(stops)} cuProfilerStop, {len(starts)} cuProfilerStart recorded")
    check("end-while-paused", ended == iters and not started,
          f"{ended} of {iters} 'async' ranges ended while paused recorded, {len(started)} left open")


def check_process_view(check, rep, traces):
    """rtrace report's process view of each range name (docs/nvtx.md, "Which thread's work")
    against this one: a launch (its call) of thread U at time t goes to every range open at t
    of U's, and of any other thread of the process in a domain where U has no range open at t;
    GPU records and GPU time (sum of end - start) per name."""
    mine, mine_ns = {}, {}
    for t in traces:
        k, c, m = tracefile.read_gpu(t)
        calls = {corr: (start, tid) for (_fn, _res, start, _end, tid, corr) in tracefile.read(t, runtime=True)}
        rs = tracefile.read_nvtx_ranges(t)
        for r in rs:
            mine.setdefault(r["name"], 0)
            mine_ns.setdefault(r["name"], 0)
        for w in k + c + m:
            call = calls.get(w["correlation"])
            if call is None:
                continue
            at, u = call
            open_at = [r for r in rs if r["start"] <= at <= r["end"]]
            own_domains = {r["domain"] for r in open_at if r["tid"] == u}
            for r in open_at:
                if r["tid"] == u or r["domain"] not in own_domains:
                    mine[r["name"]] += 1
                    mine_ns[r["name"]] += max(0, w["end"] - w["start"])
    rows = rep["nvtx"]["ranges"]
    ours = {r["name"]: r["process_gpu_records"] for r in rows}
    ours_ns = {r["name"]: r["process_gpu_ns"] for r in rows}
    thread = {r["name"]: r["gpu_records"] for r in rows}
    diff = {n: ((ours.get(n), ours_ns.get(n)), (mine.get(n), mine_ns.get(n)))
            for n in set(ours) | set(mine)
            if ours.get(n) != mine.get(n) or ours_ns.get(n) != mine_ns.get(n)}
    b = "backward"
    check("report-process-view", not diff and ours.get(b, 0) > thread.get(b, 0),
          f"process_gpu_records and process_gpu_ns per range equal the checker's for {len(ours)} names"
          + (f"; differences (ours, checker's) {list(diff.items())[:4]}" if diff else
             f"; {b}: {thread.get(b)} GPU records on its thread, {ours.get(b)} in the process view "
             f"({ours_ns.get(b)} ns); forward {ours.get('forward')}, optimizer {ours.get('optimizer')}"))


def micros_ns(text):
    """A Chrome trace time (µs with three decimals, as rtrace writes it) in ns, exactly."""
    whole, _, frac = text.partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3])


def check_export(check, rtrace, traces, ranges):
    out = subprocess.run([rtrace, "export", "--format", "chrome", *traces],
                         capture_output=True, text=True, check=True).stdout
    events = json.loads(out, parse_float=str)["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    drawn, projected, lanes, open_ = [], [], {}, []
    for e in events:
        if e.get("cat") != "nvtx":
            continue
        track = names.get((e["pid"], e["tid"]), "")
        start = micros_ns(e["ts"])
        if e["ph"] == "B":
            open_.append((e["name"], start))
            continue
        dur = micros_ns(e["dur"])
        if track.startswith("NVTX projected: "):
            projected.append(e["name"])
        elif track.startswith("NVTX: "):
            drawn.append((start, e["name"], dur))
        lanes.setdefault((e["pid"], e["tid"]), []).append((start, start + dur))
    want = sorted((r["start"], r["name"], r["end"] - r["start"]) for r in ranges)
    drawn.sort()
    same = len(drawn) == len(want) and all(a[1:] == b[1:] for a, b in zip(drawn, want))
    offsets = {a[0] - b[0] for a, b in zip(drawn, want)}
    bad_nesting = 0
    for spans in lanes.values():
        stack = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= start:
                stack.pop()
            bad_nesting += bool(stack and end > stack[-1])
            stack.append(end)
    range_names = {r["name"] for r in ranges}
    stray = [n for n in projected if n not in range_names]
    check("export-tracks", same and len(offsets) == 1 and bad_nesting == 0 and not stray and projected,
          f"Chrome export: {len(drawn)} NVTX slices for {len(want)} ranges, names and durations "
          f"{'equal' if same else 'differ'}, start offsets {sorted(offsets)[:3]}, {len(lanes)} lanes, "
          f"{bad_nesting} slices overlapping their lane's, {len(projected)} projected spans "
          f"({len(stray)} not named as a range), {len(open_)} open")


if __name__ == "__main__":
    sys.exit(1 if main() else 0)
