#!/usr/bin/env python3
"""Compare rtrace's per-function call counts with CUPTI's (cupti_counter.so).

    compare.py --label NAME --rtrace-json REPORT.json --cupti FILE [FILE...]
               [--cbid-header cupti_driver_cbid.h] [--exports libcuda-exports.txt]
               [--strict]

REPORT.json is `rtrace report --format json TRACE...`:
    {"processes": [...], "api": [{"function": NAME, "calls": N, "errors": N, ...}, ...]}
Each CUPTI file is what cupti_counter.so writes: '#' header lines, then
"<callback name> <calls> [<errors>]" lines; several files (one per process)
are added up.

Names.  CUPTI names a callback after the entry point it instruments, the way
cupti_driver_cbid.h spells it (cuMemAlloc_v2, cuMemcpyHtoD_v2_ptds, ...):
mostly the exported symbol name.  Both sides are compared name by name
exactly.  A difference is then explained where possible:
  Two windows of rtrace's records are set aside first, because CUPTI cannot
  see them, and listed with their counts:
  * "before CUPTI was loaded": the driver loads the injection library inside
    the process's first cuInit, so calls that started before that cuInit
    returned (that cuInit included) are invisible to CUPTI.
  * "after the driver shut down": calls that returned
    CUDA_ERROR_DEINITIALIZED (4), made during process teardown once the
    driver (and CUPTI with it) had shut down.
  Everything else must match name by name, exactly, except:
  * "CUPTI never reports this function": cuGetExportTable has a callback id but
    CUPTI reports no call of it; tolerated when CUPTI's count is 0.
  * "no cbid": given --cbid-header, a name rtrace reports that has no CUPTI
    callback id cannot be counted by CUPTI; shown as tolerated.
  * "variant": the difference cancels out within the names that share one
    base (the name without _ptds/_ptsz and without a trailing _vN), i.e. the
    same calls were attributed to a different ABI variant.  That is still a
    difference (rtrace must name the variant the caller got); --group-variants
    tolerates it.
With --strict nothing is tolerated.  Error counts (non-CUDA_SUCCESS returns)
are compared too and shown, but only the call counts decide the verdict.

The last line is "MATCH <label>" (exit 0) or
"MISMATCH <label>: K functions differ" (exit 1); unreadable input also
ends in a MISMATCH line (exit 2).
"""

import argparse
import glob
import json
import os
import re
import sys
from collections import defaultdict

PREFIX = "CUPTI_DRIVER_TRACE_CBID_"
CUDA_ERROR_DEINITIALIZED = 4
# Functions CUPTI has a callback id for but never reports (seen on driver 580.159.04, CUPTI
# 13.0: libcudart's cuGetExportTable calls after cuInit come to 0 callbacks). Tolerated only
# when CUPTI counts none at all.
NOT_REPORTED_BY_CUPTI = {"cuGetExportTable"}


def norm(name):
    name = name.strip()
    if name.startswith(PREFIX):
        name = name[len(PREFIX):]
    return name


def base_name(name):
    n = norm(name)
    n = re.sub(r"_(ptds|ptsz)$", "", n)
    n = re.sub(r"_v[0-9]+$", "", n)
    return n


def load_rtrace(paths):
    """Counts per function from trace files, minus the two windows CUPTI cannot see."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import tracefile

    calls, errors = defaultdict(int), defaultdict(int)
    before, after = defaultdict(int), defaultdict(int)
    for path in paths:
        records = sorted(tracefile.read(path), key=lambda r: r[2])
        inits = [r for r in records if r[0] == "cuInit"]
        loaded_at = inits[0][3] if inits else None
        for name, result, start, end, _tid, _corr in records:
            if loaded_at is None or start <= loaded_at:
                before[name] += 1
            elif result == CUDA_ERROR_DEINITIALIZED:
                after[name] += 1
            else:
                calls[name] += 1
                errors[name] += int(result != 0)
    return calls, errors, len(paths), before, after


def load_cupti(paths):
    calls = defaultdict(int)
    errors = defaultdict(int)
    problems = []
    headers = []
    for path in paths:
        with open(path) as f:
            for lineno, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                if line.startswith("#"):
                    headers.append(f"{os.path.basename(path)}: {line}")
                    m = re.search(r"\binit=(-?\d+)", line)
                    if m and m.group(1) != "0":
                        problems.append(f"{path}: CUPTI initialisation failed: {line}")
                    m = re.search(r"\bout_of_range=(\d+)", line)
                    if m and m.group(1) != "0":
                        problems.append(f"{path}: {m.group(1)} callbacks with ids out of range")
                    continue
                parts = line.split()
                if len(parts) < 2:
                    problems.append(f"{path}:{lineno}: malformed line {line!r}")
                    continue
                calls[norm(parts[0])] += int(parts[1])
                if len(parts) > 2:
                    errors[norm(parts[0])] += int(parts[2])
    return calls, errors, problems, headers


def load_cbid_names(path):
    names = set()
    with open(path) as f:
        for m in re.finditer(PREFIX + r"([A-Za-z0-9_]+)\s*=", f.read()):
            names.add(m.group(1))
    names.discard("INVALID")
    names.discard("SIZE")
    names.discard("FORCE_INT")
    return names


def load_exports(path):
    names = set()
    with open(path) as f:
        for line in f:
            parts = line.split()
            if parts:
                names.add(parts[-1].split("@")[0])
    return names


def expand(paths):
    out = []
    for p in paths:
        if os.path.isfile(p):
            out.append(p)
        else:
            # A prefix as given to CUPTI_COUNT_OUTPUT: take its <prefix>.<pid> files.
            out.extend(sorted(q for q in glob.glob(glob.escape(p) + ".*")
                              if re.search(r"\.\d+$", q)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", required=True)
    ap.add_argument("--rtrace-trace", nargs="+", required=True, help="rtrace trace files")
    ap.add_argument("--cupti", nargs="+", required=True,
                    help="count files, or the CUPTI_COUNT_OUTPUT prefix")
    ap.add_argument("--cbid-header", help="cupti_driver_cbid.h, to know which names CUPTI can see")
    ap.add_argument("--exports", help="nm -D output of libcuda.so.1, to annotate names")
    ap.add_argument("--rtrace-own", default="",
                    help="NAME=N,...: calls rtrace makes itself that CUPTI counts (with GPU "
                         "activity, its description of each device), taken from CUPTI's counts")
    ap.add_argument("--strict", action="store_true", help="tolerate nothing")
    ap.add_argument("--group-variants", action="store_true",
                    help="tolerate differences that cancel within a base name")
    args = ap.parse_args()
    label = args.label

    def fail_input(msg):
        print(f"compare {label}: {msg}")
        print(f"MISMATCH {label}: unreadable input")
        sys.exit(2)

    try:
        r_calls, r_err, nproc, before, after = load_rtrace(expand(args.rtrace_trace))
    except (OSError, ValueError) as e:
        fail_input(f"rtrace report: {e}")
    files = expand(args.cupti)
    if not files:
        fail_input(f"no CUPTI count files for {args.cupti}")
    try:
        c_calls, c_err, problems, headers = load_cupti(files)
    except (OSError, ValueError) as e:
        fail_input(f"CUPTI counts: {e}")
    cbids = None
    if args.cbid_header:
        try:
            cbids = load_cbid_names(args.cbid_header)
        except OSError as e:
            print(f"compare {label}: cannot read {args.cbid_header}: {e}")
    exports = None
    if args.exports:
        try:
            exports = load_exports(args.exports)
        except OSError as e:
            print(f"compare {label}: cannot read {args.exports}: {e}")

    own = {}
    for item in filter(None, args.rtrace_own.split(",")):
        name, n = item.split("=")
        own[name] = int(n)
        c_calls[name] = c_calls.get(name, 0) - int(n)
        if c_calls[name] == 0:
            del c_calls[name]

    nfiles = len(files)
    print(f"== compare {label}: rtrace {nproc} trace(s) "
          f"vs CUPTI {nfiles} file(s) ==")
    for h in headers:
        print(f"   {h}")
    for title, window in (("before CUPTI was loaded", before), ("after the driver shut down", after),
                          ("rtrace's own calls, from CUPTI's counts", own)):
        if window:
            listed = ", ".join(f"{n} {c}" for n, c in sorted(window.items()))
            print(f"   set aside, {title}: {sum(window.values())} calls ({listed})")
    print(f"   rtrace: {len(r_calls)} functions, {sum(r_calls.values())} calls; "
          f"CUPTI: {len(c_calls)} functions, {sum(c_calls.values())} calls")

    names = sorted(set(r_calls) | set(c_calls))
    diff_names = [n for n in names if r_calls.get(n, 0) != c_calls.get(n, 0)]

    # Per-base totals, to recognise variant attribution differences.
    base_r = defaultdict(int)
    base_c = defaultdict(int)
    for n in names:
        base_r[base_name(n)] += r_calls.get(n, 0)
        base_c[base_name(n)] += c_calls.get(n, 0)

    rows = []
    counted = 0
    for n in diff_names:
        r, c = r_calls.get(n, 0), c_calls.get(n, 0)
        reason = ""
        tolerated = False
        if n in NOT_REPORTED_BY_CUPTI and c == 0:
            reason, tolerated = "CUPTI never reports this function", True
        elif cbids is not None and c == 0 and n not in cbids:
            reason, tolerated = "no cbid: CUPTI cannot see it", True
        elif base_r[base_name(n)] == base_c[base_name(n)]:
            reason = f"variant: same total within {base_name(n)}*"
            tolerated = args.group_variants
        else:
            if r and not c:
                reason = "rtrace only"
            elif c and not r:
                reason = "CUPTI only"
            else:
                reason = "rtrace missed calls" if r < c else "rtrace extra calls"
        if exports is not None and n not in exports:
            reason += "; not a libcuda export"
        if args.strict:
            tolerated = False
        if not tolerated:
            counted += 1
        rows.append((n, r, c, r - c, ("tolerated: " if tolerated else "") + reason))

    if rows:
        w = max(30, max(len(n) for n, *_ in rows))
        print(f"   {'function':<{w}} {'rtrace':>9} {'cupti':>9} {'diff':>7}  note")
        for n, r, c, d, note in rows:
            print(f"   {n:<{w}} {r:>9} {c:>9} {d:>+7}  {note}")
    else:
        print("   every function's call count is equal")

    err_rows = [(n, r_err.get(n, 0), c_err.get(n, 0)) for n in sorted(set(r_err) | set(c_err))
                if r_err.get(n, 0) != c_err.get(n, 0)]
    if err_rows:
        print(f"   note: error counts differ for {len(err_rows)} functions "
              "(informational; not part of the verdict):")
        for n, r, c in err_rows:
            print(f"     {n:<40} rtrace errors {r:>6}  CUPTI errors {c:>6}")

    grouped = sum(1 for b in set(base_r) | set(base_c) if base_r[b] != base_c[b])
    print(f"   exact names equal: {len(names) - len(diff_names)} of {len(names)}; "
          f"base names that differ in total: {grouped}")
    for p in problems:
        print(f"   problem: {p}")

    if counted == 0 and not problems:
        tol = len(rows)
        print(f"MATCH {label}" + (f" ({tol} tolerated differences)" if tol else ""))
        return 0
    extra = f" ({len(problems)} problems with the CUPTI counts)" if problems else ""
    print(f"MISMATCH {label}: {counted} functions differ{extra}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
