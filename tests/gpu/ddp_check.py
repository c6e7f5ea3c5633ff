"""Checks of tests/gpu/ddp_check.sh (issue 23) on a work directory holding, for rounds 1 and 2,
plainR.out / tracedR.out (one JSON line per rank from tests/gpu/ddp_train.py) and the traces
ddpR-RANK.bin.

    python3 ddp_check.py WORKDIR RANKS SLOWED_RANK RTRACE

- job: every rank printed its line, untraced and traced, and the traced losses equal the
  untraced ones;
- traces: one per rank, named by its RANK (beside the launcher's, named by an empty RANK),
  none dropped anything, each with kernels on its own
  device and STEPS `train_step` ranges;
- with two ranks or more: NCCL kernels on every device, NCCL's NVTX ranges on every rank, one
  timeline (the k-th NCCL kernel of each rank overlaps the others' in the Chrome export), and
  the cross-rank report names the slowed rank the slowest of (almost) every step with its lag
  within 10% of the lag the ranks measured themselves around the same code;
- cost: each rank's median step wall time untraced and traced, both rounds (printed).
Prints PASS/FAIL/SKIP lines and `N passed, N failed`.
"""
import glob
import json
import os
import statistics
import subprocess
import sys

work, ranks, slow, rtrace = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
steps = int(os.environ.get("STEPS", "30"))
passed = failed = 0


def out(ok, name, detail):
    global passed, failed
    if ok is None:
        print(f"SKIP {name}  ({detail})")
        return
    passed += ok
    failed += not ok
    print(("PASS " if ok else "FAIL ") + f"{name}  ({detail})")


def lines(path):
    rows = {}
    try:
        for line in open(path):
            if line.startswith("{"):
                r = json.loads(line)
                rows[r["rank"]] = r
    except OSError:
        pass
    return rows


def report(*files, extra=()):
    p = subprocess.run([rtrace, "report", "--format", "json", *extra, *files],
                       capture_output=True, text=True, timeout=300)
    return json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr.strip()[:300]}


# The job itself.
for rnd in (1, 2):
    plain, traced = lines(f"{work}/plain{rnd}.out"), lines(f"{work}/traced{rnd}.out")
    out(len(plain) == ranks and len(traced) == ranks, f"job.round{rnd}",
        f"{len(plain)} untraced and {len(traced)} traced ranks reported of {ranks}")
    same = all(plain.get(r, {}).get("loss") == traced.get(r, {}).get("loss") for r in range(ranks))
    out(same, f"job.round{rnd}.same-loss",
        "losses " + ", ".join(f"{plain.get(r, {}).get('loss')}/{traced.get(r, {}).get('loss')}"
                               for r in range(ranks)))

# Each rank's trace (the second round's).
files = {r: f"{work}/ddp2-{r}.bin" for r in range(ranks)}
# torchrun's launcher, which has no RANK, makes driver calls too: its trace is `ddp2-.bin`.
found = sorted(os.path.basename(f) for f in glob.glob(f"{work}/ddp2-[0-9]*.bin"))
launcher = os.path.exists(f"{work}/ddp2-.bin")
out(all(os.path.exists(f) for f in files.values()) and len(found) == ranks, "traces.one-per-rank",
    ", ".join(found) + (" (and the launcher's, ddp2-.bin)" if launcher else ""))
per_rank = {}
for r, f in files.items():
    if not os.path.exists(f):
        continue
    j = report(f)
    per_rank[r] = j
    if "error" in j:
        out(False, f"rank{r}.report", j["error"])
        continue
    p = j["processes"][0]
    kernels = j.get("kernels", [])
    nccl = sum(k["count"] for k in kernels if k["name"].startswith("nccl"))
    devices = sorted({d["device"] for d in j.get("utilisation", []) if "device" in d})
    out(p["dropped"] == 0 and p["kernel_records"] > 0 and p["api_records"] > 0,
        f"rank{r}.complete", f"{p['api_records']} API records, {p['kernel_records']} kernels, "
        f"dropped {p['dropped']}, ended by {p.get('end_reason')}")
    out(devices == [r], f"rank{r}.device", f"GPU work on devices {devices}")
    ranges = {x["name"]: x for x in j.get("nvtx", {}).get("ranges", [])}
    out(ranges.get("train_step", {}).get("count") == steps, f"rank{r}.step-ranges",
        f"{ranges.get('train_step', {}).get('count')} train_step ranges, {steps} steps")
    if ranks < 2:
        out(None, f"rank{r}.nccl", "one rank: no collective")
        continue
    out(nccl > 0, f"rank{r}.nccl-kernels", f"{nccl} NCCL kernels")
    nccl_ranges = [n for n in ranges if "allreduce" in n.lower() or n.lower().startswith("nccl")]
    out(bool(nccl_ranges), f"rank{r}.nccl-nvtx", ", ".join(nccl_ranges[:4]) or "none")

if ranks >= 2:
    # One timeline: the Chrome export of every rank, the k-th NCCL kernel of each rank.
    chrome = f"{work}/ddp2.json"
    subprocess.run([rtrace, "export", "--format", "chrome", "-o", chrome, *files.values()],
                   capture_output=True, timeout=300)
    try:
        events = json.load(open(chrome))
        events = events["traceEvents"] if isinstance(events, dict) else events
    except (OSError, ValueError) as e:
        events = []
        out(False, "timeline.export", str(e))
    by_pid = {}
    for e in events:
        if e.get("ph") == "X" and e.get("name", "").startswith("nccl"):
            by_pid.setdefault(e["pid"], []).append((e["ts"], e["ts"] + e["dur"]))
    seqs = [sorted(v) for v in by_pid.values()]
    k = min((len(s) for s in seqs), default=0)
    overlap = sum(1 for i in range(k)
                  if max(s[i][0] for s in seqs) <= min(s[i][1] for s in seqs))
    out(len(seqs) == ranks and k > 0 and overlap >= 0.9 * k, "timeline.collectives-overlap",
        f"{overlap} of {k} matched NCCL kernels overlap on all {len(seqs)} ranks")
    # The straggler, against the ranks' own measurements.
    j = report(*files.values(), extra=("--steps", "^train_step$"))
    rows = [s for s in j.get("steps", []) if s["step"] == "train_step"]
    named = sum(1 for s in rows if s["slowest_rank"] == str(slow))
    out(len(rows) == steps and named >= 0.9 * steps, "ranks.slowest-named",
        f"rank {slow} slowest in {named} of {len(rows)} steps")
    traced = lines(f"{work}/traced2.out")

    def lag(durations):
        d = sorted(durations)
        m = len(d) // 2
        med = d[m] if len(d) % 2 else (d[m - 1] + d[m]) / 2
        return d[-1] - med

    if len(traced) == ranks:
        own = statistics.mean(lag([traced[r]["range_ms"][i] for r in range(ranks)])
                              for i in range(steps))
        got = statistics.mean(s["lag_ns"] for s in rows) / 1e6 if rows else 0.0
        out(own > 0 and abs(got / own - 1) <= 0.10, "ranks.lag",
            f"report {got:.3f} ms, the ranks' own {own:.3f} ms ({100 * (got / own - 1):+.1f}%)")
    rank_rows = {r["rank"]: r for r in j.get("ranks", [])}
    waits = ", ".join(f"rank {r} {rank_rows[r]['wait_percent']}%" for r in sorted(rank_rows))
    out(len(rank_rows) == ranks, "ranks.rows", f"collective wait: {waits}")
else:
    out(None, "timeline and straggler", "one GPU: needs two ranks")

# Cost: median step wall time per rank, untraced and traced, both rounds.
for rnd in (1, 2):
    plain, traced = lines(f"{work}/plain{rnd}.out"), lines(f"{work}/traced{rnd}.out")
    parts = []
    for r in range(ranks):
        if r in plain and r in traced:
            a, b = statistics.median(plain[r]["wall_ms"]), statistics.median(traced[r]["wall_ms"])
            parts.append(f"rank {r} {a:.2f} -> {b:.2f} ms ({100 * (b / a - 1):+.1f}%)")
    print(f"cost round {rnd}: step wall median, untraced -> traced: " + "; ".join(parts))
print(f"{passed} passed, {failed} failed")
