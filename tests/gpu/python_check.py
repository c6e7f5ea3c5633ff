"""The Python package's PyTorch example (docs/examples/pytorch_training.py) recorded with the
wheel's own `rtrace record --capture-range cudaProfilerApi` beside an injected CUPTI client
(tests/gpu/cupti_dump.c), checked with the package's `rtrace.load` and against the client.

usage: python_check.py DUMP TRACE...   (run with the Python the wheel is installed in)

The example records steps 5 to 19 of 20 (its `rtrace.start()` after step 4's warm-up, its
`rtrace.stop()` after the last), each step inside `rtrace.external_id(step)` and an NVTX range
`step N`. Checks, printed as PASS/FAIL lines:
- every kernel, copy and memset of the trace is one of the client's (by CUPTI correlation id),
  with the same kernel name, grid and block, and none of the client's inside the captured span
  (in the client's own times, from the first captured record's start to the last one's end)
  is missing: the capture holds the steps' GPU work, whole;
- the client's records outside that span are those the trace's notice says were left out;
- `rtrace.load`: the external ids are 5 to 19, each with the same number of GPU records in the
  process view (the autograd thread's backward kernels credited to the step), adding up to the
  trace's GPU records; the NVTX ranges are `step 5` to `step 19`, once each; the kernels
  summary counts the trace's kernels.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
import tracefile  # noqa: E402
from cupti_match import key, read_dump  # noqa: E402

import rtrace  # noqa: E402

STEPS = range(5, 20)


def main():
    dump, traces = sys.argv[1], sys.argv[2:]
    failed = 0

    def check(name, ok, detail):
        nonlocal failed
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} python.{name}  ({detail})")

    theirs = read_dump(dump)
    ours = [[], [], []]
    for t in traces:
        for i, recs in enumerate(tracefile.read_gpu(t)):
            for r in recs:
                r["corr"] = r["source_correlation"]
            ours[i] += recs
    matched = 0
    # The client's records rtrace has, and those it has not, all kinds together.
    kept, rest = [], []
    for what, mine, client in zip(("kernels", "copies", "memsets"), ours, theirs):
        a, b = key(mine), key(client)
        strangers = [k for k in a if k not in b]
        bad = [k for k, m in a.items() if k in b and what == "kernels" and (
            m["name"] != b[k]["name"] or tuple(m["grid"]) != b[k]["grid"]
            or tuple(m["block"]) != b[k]["block"])]
        check(f"{what}-of-the-client", not strangers and not bad,
              f"rtrace {len(a)}, the client {len(b)}; {len(strangers)} not the client's, "
              f"{len(bad)} differing in name, grid or block")
        matched += len(a)
        kept += [r for k, r in b.items() if k in a]
        rest += [r for k, r in b.items() if k not in a]
    if not kept:
        check("captured", False, "the trace holds no GPU record of the client's")
        return failed
    # The captured span, in the client's own times.
    lo, hi = min(r["start"] for r in kept), max(r["end"] for r in kept)
    inside = sum(1 for r in rest if not (r["end"] < lo or r["start"] > hi))
    outside = len(rest) - inside
    check("capture-whole", inside == 0,
          f"{matched} GPU records captured; of the client's {len(rest)} others, {inside} "
          f"inside the captured span, {outside} outside it")

    report = rtrace.load(*traces)
    notices = [n["message"] for p in report.processes for n in p.get("notices", [])]
    left = [int(m.group(1)) for n in notices
            for m in [re.search(r"capture: (\d+) GPU records? left out", n)] if m]
    check("left-out-notice", left == [outside],
          f"the trace's notice says {left or 'nothing'} left out; the client's records outside "
          f"the capture: {outside}")
    ext = {row["id"]: row for row in report.external}
    per_step = {row["process_gpu_records"] for row in ext.values()}
    total = sum(row["process_gpu_records"] for row in ext.values())
    check("external-ids", sorted(ext) == list(STEPS) and len(per_step) == 1 and total == matched,
          f"ids {sorted(ext)}; GPU records a step (process view) {sorted(per_step)}, "
          f"{total} in all against {matched} in the trace; own thread "
          f"{sorted({row['gpu_records'] for row in ext.values()})}")
    ranges = {row["name"]: row["count"] for row in report.nvtx["ranges"]}
    want = {f"step {s}": 1 for s in STEPS}
    odd = sorted(set(ranges.items()) ^ set(want.items()))
    check("nvtx-steps", ranges == want,
          f"{len(ranges)} range names, {len(want)} wanted; differing (name, count): {odd[:4]}")
    kernels = sum(row["count"] for row in report.kernels)
    check("load-kernels", kernels == len(ours[0]),
          f"rtrace.load's kernels summary {kernels}, the trace {len(ours[0])}")
    return failed


if __name__ == "__main__":
    sys.exit(1 if main() else 0)
