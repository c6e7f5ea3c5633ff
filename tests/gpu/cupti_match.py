"""Compares rtrace's GPU records with a CUPTI client's from the same run (rtrace shares CUPTI
with the program's own client): one to one by CUPTI correlation id, kernels by name, grid and
block, copies by bytes, and in time.

usage: cupti_match.py LABEL (dump FILE | kineto FILE) TRACE...

Times: the client's clock is its own (TSC ticks for tests/gpu/cupti_dump.c, Kineto's
microseconds since the epoch), so reference times are put on rtrace's clock by a least-squares
line over all starts (offset and rate: how the two clocks are defined, not an error of either);
every start and end must then lie within max(1 us, 2% of the duration) of rtrace's. The line's
rate and the worst difference are printed. Prints PASS/FAIL lines and exits 1 on a
failure."""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import tracefile  # noqa: E402


def read_dump(path):
    kernels, copies, sets = [], [], []
    with open(path) as f:
        for line in f:
            p = line.split()
            if p[0] == "K":
                kernels.append(dict(corr=int(p[1]), start=int(p[2]), end=int(p[3]),
                                    grid=tuple(map(int, p[4:7])), block=tuple(map(int, p[7:10])),
                                    graph=int(p[10]), name=" ".join(p[11:])))
            elif p[0] == "C":
                copies.append(dict(corr=int(p[1]), start=int(p[2]), end=int(p[3]), bytes=int(p[4])))
            elif p[0] == "P":
                copies.append(dict(corr=int(p[1]), start=int(p[2]), end=int(p[3]), bytes=int(p[4]),
                                   src_device=int(p[6]), dst_device=int(p[7])))
            elif p[0] == "S":
                sets.append(dict(corr=int(p[1]), start=int(p[2]), end=int(p[3]), bytes=int(p[4])))
    return kernels, copies, sets


def read_kineto(path):
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    kernels, copies, sets = [], [], []
    for e in events:
        cat, args = e.get("cat"), e.get("args", {})
        if cat not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        # Kineto writes microseconds with nanosecond decimals.
        start = round(float(e["ts"]) * 1000)
        rec = dict(corr=int(args["correlation"]), start=start, end=start + round(float(e["dur"]) * 1000))
        if cat == "kernel":
            rec.update(name=e["name"], grid=tuple(args["grid"]), block=tuple(args["block"]), graph=0)
            kernels.append(rec)
        else:
            rec["bytes"] = int(args.get("bytes", -1))
            (copies if cat == "gpu_memcpy" else sets).append(rec)
    return kernels, copies, sets


def demangle(names):
    # c++filt writes names as libstdc++'s demangler does, which is what Kineto uses.
    tool = shutil.which("c++filt") or shutil.which("cu++filt")
    if not tool:
        return {n: n for n in names}
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
    return dict(zip(names, out))


def key(recs):
    """(correlation id, index among the records of that id in start order) -> record."""
    by = {}
    for r in sorted(recs, key=lambda r: (r["corr"], r["start"])):
        by.setdefault(r["corr"], []).append(r)
    return {(c, i): r for c, rs in by.items() for i, r in enumerate(rs)}


def main():
    label, fmt, ref_path, traces = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    ref = read_dump(ref_path) if fmt == "dump" else read_kineto(ref_path)
    ours = [[], [], []]
    for t in traces:
        k, c, s = tracefile.read_gpu(t)
        ours[0] += k
        ours[1] += c
        ours[2] += s
    for recs in ours:
        for r in recs:
            r["corr"] = r["source_correlation"]
    failed = 0

    def check(name, ok, detail):
        nonlocal failed
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {label}.{name}  ({detail})")

    if fmt == "kineto":
        names = demangle(sorted({k["name"] for k in ours[0]}))
        for k in ours[0]:
            k["name"] = names[k["name"]]
    pairs = []
    for what, mine, theirs in zip(("kernels", "copies", "memsets"), ours, ref):
        # Only what the client saw: it may have collected for part of the run.
        a, b = key(mine), key(theirs)
        missing = [k for k in b if k not in a]
        # The injected client collects for the whole run: then the two must be one to one.
        whole = fmt == "dump"
        some = len(b) > 0 or what != "kernels"
        check(f"{what}-present", not missing and some and (not whole or len(a) == len(b)),
              f"client {len(b)}, rtrace {len(a)} ({len(a) - len(b)} outside the client's window), "
              f"{len(missing)} of the client's missing in rtrace")
        bad = []
        for k, r in b.items():
            if k not in a:
                continue
            m = a[k]
            if what == "kernels":
                same = (m["name"] == r["name"] and tuple(m["grid"]) == r["grid"]
                        and tuple(m["block"]) == r["block"])
            else:
                same = r["bytes"] in (-1, m["bytes"])
                # A peer copy: the same devices on both sides.
                if "src_device" in r:
                    same = same and (m.get("src_device"), m.get("dst_device")) == (r["src_device"],
                                                                                   r["dst_device"])
            if not same:
                bad.append((k, m.get("name", m.get("bytes")), r.get("name", r.get("bytes"))))
            if m["start"] and r["start"] and m["end"] > m["start"]:
                pairs.append((m, r))
        detail = "names, grid and block" if what == "kernels" else "bytes"
        check(f"{what}-fields", not bad, f"{len(b) - len(bad)} of {len(b)} equal in {detail}"
              + (f"; first difference {bad[0]}" if bad else ""))
    if len(pairs) < 2:
        check("times", False, "fewer than 2 timed records")
        return failed
    xs = [r["start"] for _, r in pairs]
    ys = [m["start"] for m, _ in pairs]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    rate = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 1.0
    off = my - rate * mx
    worst, over = 0.0, []
    for m, r in pairs:
        for a, b in ((m["start"], r["start"]), (m["end"], r["end"])):
            err = abs(a - (rate * b + off))
            worst = max(worst, err)
            if err > max(1000.0, 0.02 * (m["end"] - m["start"])):
                over.append((m["corr"], round(err)))
    span = (max(ys) - min(ys)) / 1e9
    check("times", not over,
          f"{len(pairs)} records over {span:.1f} s: worst start/end difference {worst:.0f} ns "
          f"after a line of rate {rate:.9f} ns per client unit; {len(over)} beyond max(1 us, 2%)"
          + (f", first {over[:3]}" if over else ""))
    return failed


if __name__ == "__main__":
    sys.exit(1 if main() else 0)
