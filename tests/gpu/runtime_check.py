#!/usr/bin/env python3
"""Check rtrace's runtime API records on the GPU machine (docs/runtime-api.md).

    runtime_check.py --cbid-header .../cupti_runtime_cbid.h [--cupti FILE...] TRACE...

- Counts: rtrace's runtime records per CUPTI runtime callback id against an independent
  CUPTI runtime-domain counter (cupti_counter.so run with CUPTI_COUNT_DOMAIN=runtime, one
  file per process; the same program run separately, or in the same process), id by id,
  exactly. Without --cupti only rtrace's counts are printed.
- Nesting: for each runtime function, how many driver calls lie inside its calls (same
  thread, inside the interval), e.g. one cuLaunchKernel in each cudaLaunchKernel.
- Links: how many kernels, copies and memsets are linked to a runtime call and how many to a
  driver call (work made outside runtime calls); none may be unlinked.

Lines "PASS runtime.<check>  (detail)" / "FAIL ..."; the last line is "N failed" (exit 1 if
N > 0, 2 on unreadable input).
"""

import argparse
import os
import re
import sys
from collections import Counter, defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tracefile  # noqa: E402


def cbid_names(header):
    names = {}
    with open(header) as f:
        for m in re.finditer(r"CUPTI_RUNTIME_TRACE_CBID_(\w+)\s*=\s*(\d+)", f.read()):
            names[int(m.group(2))] = m.group(1)
    return names


def cupti_counts(paths):
    calls = Counter()
    for p in paths:
        with open(p) as f:
            for line in f:
                if line.startswith("#"):
                    if "domain=runtime" not in line:
                        raise ValueError(f"{p}: not a runtime-domain count (CUPTI_COUNT_DOMAIN=runtime)")
                    continue
                parts = line.split()
                if len(parts) >= 2 and parts[0].startswith("cbid_"):
                    calls[int(parts[0][5:])] += int(parts[1])
    return calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cbid-header", required=True)
    ap.add_argument("--cupti", nargs="*", default=[])
    ap.add_argument("traces", nargs="+")
    a = ap.parse_args()
    try:
        names = cbid_names(a.cbid_header)
        records = []
        gpu = []
        for t in a.traces:
            records += [(t, *r) for r in tracefile.read(t, runtime=True)]
            k, c, s = tracefile.read_gpu(t)
            gpu += [("kernel", x) for x in k] + [("copy", x) for x in c] + [("memset", x) for x in s]
        cupti = cupti_counts(a.cupti) if a.cupti else None
    except (OSError, ValueError) as e:
        print(f"runtime_check: {e}")
        print("1 failed")
        return 2
    failed = 0

    def check(name, ok, detail):
        nonlocal failed
        print(("PASS " if ok else "FAIL ") + f"runtime.{name}  ({detail})")
        failed += not ok

    def cbid_of(name):
        return int(name.split("#")[1]) if name.startswith("runtime#") else None

    runtime = [r for r in records if cbid_of(r[1]) is not None]
    driver = [r for r in records if cbid_of(r[1]) is None]
    ours = Counter(cbid_of(r[1]) for r in runtime)
    check("recorded", len(runtime) > 0, f"{len(runtime)} runtime calls of {len(ours)} functions")
    for cbid, n in ours.most_common(12):
        print(f"  {names.get(cbid, f'cbid {cbid}')}: {n}")
    if cupti is not None:
        diff = {c: (ours[c], cupti[c]) for c in set(ours) | set(cupti) if ours[c] != cupti[c]}
        for c, (o, u) in sorted(diff.items()):
            print(f"  {names.get(c, f'cbid {c}')}: rtrace {o}, CUPTI {u}")
        check("counts", not diff,
              f"{sum(ours.values())} rtrace, {sum(cupti.values())} CUPTI; {len(diff)} functions differ")

    # Nesting: driver calls inside each runtime call, per runtime function.
    by_thread = defaultdict(list)
    for r in records:
        by_thread[(r[0], r[5])].append(r)
    inside = defaultdict(Counter)
    for recs in by_thread.values():
        recs.sort(key=lambda r: (r[3], -r[4]))
        open_rt = None
        for r in recs:
            if cbid_of(r[1]) is not None:
                open_rt = r
                inside[names.get(cbid_of(r[1]), r[1])][()] += 0
            elif open_rt is not None and r[3] >= open_rt[3] and r[4] <= open_rt[4]:
                inside[names.get(cbid_of(open_rt[1]), open_rt[1])][r[1]] += 1
    launches = [n for n in inside if n.startswith("cudaLaunchKernel")]
    for n in launches:
        calls = ours[[c for c in ours if names.get(c) == n][0]] if any(names.get(c) == n for c in ours) else 0
        # cudaLaunchKernel calls cuLaunchKernel(_ptsz), cudaLaunchKernelExC cuLaunchKernelEx(_ptsz).
        got = sum(v for k, v in inside[n].items() if str(k).startswith("cuLaunchKernel"))
        check(f"nested.{n}", got == calls, f"{got} driver launches inside {calls} calls")
    # Links: which layer's call each GPU record is linked to.
    rt_ids = {(r[0], r[6]) for r in runtime}
    drv_ids = {(r[0], r[6]) for r in driver}
    both = rt_ids | drv_ids
    layers = Counter()
    for kind, x in gpu:
        key = next(((t, x["correlation"]) for t in a.traces if (t, x["correlation"]) in both), None)
        layer = "runtime" if key in rt_ids else "driver" if key in drv_ids else "none"
        layers[(kind, layer)] += 1
    detail = ", ".join(f"{k} {l}: {n}" for (k, l), n in sorted(layers.items()))
    check("linked", not any(l == "none" for (_, l) in layers), detail)
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
