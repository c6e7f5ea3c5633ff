"""Checks rtrace report's Memory and Synchronization sections on a real trace
(RTRACE_GPU_ACTIVITY=all, tests/gpu/memsync_step.py) against:

- the same summaries computed here, independently, from the raw memory, sync and API
  records of the trace file (tracefile.py): per memory kind the allocations, frees, bytes,
  peak in use (records in time order, file order at one time; an allocation at an address in
  use replaces it; a free of an unknown address changes nothing) and bytes never freed; per
  kind of synchronization the count, total, mean and longest wait, a sync linked to a
  cuStreamQuery/cuEventQuery call being a query;
- the other source in the same trace: CUPTI's context-synchronize records against the
  cuCtxSynchronize[_v2] calls rtrace intercepted, CUPTI's device allocations and frees against the
  cuMemAlloc/cuMemFree calls;
- the program: at least as many context synchronizes as torch.cuda.synchronize() calls, a
  device peak at least torch.cuda.max_memory_reserved();
- with --old RTRACE: the build before, byte for byte (table and JSON report, Chrome export
  events compared sorted).

    memsync_check.py RTRACE TRACE --line "total T syncs N max_reserved B" [--old RTRACE]

Prints "PASS|FAIL memsync.NAME (detail)" lines.
"""

import argparse
import json
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tracefile  # noqa: E402

MEMORY_KINDS = ["unknown", "pageable", "pinned", "device", "array", "managed",
                "device-static", "managed-static"]
SYNC_KINDS = ["unknown", "event synchronize", "stream wait event", "stream synchronize",
              "context synchronize"]
CORRELATED = 1


def result(ok, name, detail):
    print(f"{'PASS' if ok else 'FAIL'} memsync.{name} ({detail})")
    return ok


def raw(path):
    """(memory records, sync records) of the trace, in file order."""
    mem, syncs = [], []
    for kind, _tid, payload in tracefile.chunks(path):
        if kind == 11:
            for at in range(0, len(payload) - 95, 96):
                corr, ts, addr, nbytes = struct.unpack_from("<QQQQ", payload, at)
                device, = struct.unpack_from("<I", payload, at + 76)
                op, mkind, _pool, flags = struct.unpack_from("<BBBB", payload, at + 88)
                mem.append(dict(corr=corr, ts=ts, addr=addr, bytes=nbytes, device=device, op=op,
                                kind=MEMORY_KINDS[mkind] if mkind < 8 else "unknown",
                                flags=flags))
        elif kind == 12:
            for at in range(0, len(payload) - 47, 48):
                corr, start, end = struct.unpack_from("<QQQ", payload, at)
                skind, flags = struct.unpack_from("<BB", payload, at + 44)
                syncs.append(dict(corr=corr, start=start, end=end, flags=flags,
                                  kind=SYNC_KINDS[skind] if skind < 5 else "unknown"))
    return mem, syncs


def memory_rows(mem):
    rows = {}
    order = sorted(range(len(mem)), key=lambda i: (mem[i]["ts"], i))
    for i in order:
        m = mem[i]
        r = rows.setdefault(m["kind"], dict(kind=m["kind"], allocations=0, frees=0,
                                            bytes_allocated=0, peak_bytes=0, largest_bytes=0,
                                            live_bytes=0, live={}))
        if m["op"] == 1:
            r["allocations"] += 1
            r["bytes_allocated"] += m["bytes"]
            r["largest_bytes"] = max(r["largest_bytes"], m["bytes"])
            r["live_bytes"] -= r["live"].pop(m["addr"], 0)
            r["live"][m["addr"]] = m["bytes"]
            r["live_bytes"] += m["bytes"]
            r["peak_bytes"] = max(r["peak_bytes"], r["live_bytes"])
        elif m["op"] == 2:
            r["frees"] += 1
            r["live_bytes"] -= r["live"].pop(m["addr"], 0)
    out = []
    for r in rows.values():
        del r["live"]
        if r["allocations"] + r["frees"] > 0:
            out.append(r)
    return sorted(out, key=lambda r: (-r["bytes_allocated"], r["kind"]))


def sync_rows(syncs, calls):
    rows = {}
    for s in syncs:
        kind = s["kind"]
        f = calls.get(s["corr"]) if s["flags"] & CORRELATED else None
        if kind == "stream synchronize" and f and f.startswith(("cuStreamQuery", "cudaStreamQuery")):
            kind = "stream query"
        if kind == "event synchronize" and f and f.startswith(("cuEventQuery", "cudaEventQuery")):
            kind = "event query"
        r = rows.setdefault(kind, dict(type=kind, count=0, total_wait_ns=0, max_wait_ns=0))
        wait = max(0, s["end"] - s["start"])
        r["count"] += 1
        r["total_wait_ns"] += wait
        r["max_wait_ns"] = max(r["max_wait_ns"], wait)
    out = []
    for r in rows.values():
        r["mean_wait_ns"] = r["total_wait_ns"] // r["count"]
        out.append(r)
    return sorted(out, key=lambda r: (-r["total_wait_ns"], r["type"]))


def run(cmd):
    return subprocess.run(cmd, capture_output=True, check=True).stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rtrace")
    ap.add_argument("trace")
    ap.add_argument("--line", required=True)
    ap.add_argument("--old")
    a = ap.parse_args()
    words = a.line.split()
    program_syncs, max_reserved = int(words[3]), int(words[5])
    report = json.loads(run([a.rtrace, "report", "--format", "json", a.trace]))
    mem, syncs = raw(a.trace)
    api = tracefile.read(a.trace, runtime=True)
    # Synchronizations made inside a runtime call may carry its id: named as rtrace names it.
    calls = {corr: (tracefile.runtime_name(int(name[8:])) or name) if name.startswith("runtime#") else name
             for name, _res, _s, _e, _tid, corr in api}
    api = [r for r in api if not r[0].startswith("runtime#")]
    want_mem, want_sync = memory_rows(mem), sync_rows(syncs, calls)
    got_mem, got_sync = report.get("memory", []), report.get("sync", [])
    result(got_mem == want_mem and len(mem) > 0, "memory-rows",
           f"{len(mem)} memory records; rtrace {[(r['kind'], r['allocations'], r['frees'], r['peak_bytes']) for r in got_mem]}, "
           f"here {[(r['kind'], r['allocations'], r['frees'], r['peak_bytes']) for r in want_mem]}")
    result(got_sync == want_sync and len(syncs) > 0, "sync-rows",
           f"{len(syncs)} sync records; rtrace {[(r['type'], r['count'], r['total_wait_ns']) for r in got_sync]}, "
           f"here {[(r['type'], r['count'], r['total_wait_ns']) for r in want_sync]}")
    ok_calls = [name for name, res, *_ in api if res == 0]
    # cudart 13 calls cuCtxSynchronize_v2.
    ctx_calls = sum(1 for n in ok_calls if n in ("cuCtxSynchronize", "cuCtxSynchronize_v2"))
    ctx = next((r["count"] for r in got_sync if r["type"] == "context synchronize"), 0)
    result(ctx == ctx_calls and ctx >= program_syncs, "context-syncs",
           f"CUPTI's context synchronizes {ctx}, cuCtxSynchronize[_v2] calls {ctx_calls}, "
           f"torch.cuda.synchronize() calls {program_syncs}")
    dev = next((r for r in got_mem if r["kind"] == "device"), None)
    allocs = sum(1 for n in ok_calls if n in ("cuMemAlloc_v2", "cuMemAlloc"))
    frees = sum(1 for n in ok_calls if n in ("cuMemFree_v2", "cuMemFree"))
    result(dev is not None and dev["allocations"] == allocs and dev["frees"] == frees,
           "device-allocations",
           f"device allocations {dev and dev['allocations']} / cuMemAlloc calls {allocs}, "
           f"frees {dev and dev['frees']} / cuMemFree calls {frees}")
    result(dev is not None and dev["peak_bytes"] >= max_reserved, "device-peak",
           f"rtrace's device peak {dev and dev['peak_bytes']} B, "
           f"torch.cuda.max_memory_reserved() {max_reserved} B")
    if a.old:
        same = []
        for fmt in ("table", "json"):
            same.append(run([a.rtrace, "report", "--format", fmt, a.trace])
                        == run([a.old, "report", "--format", fmt, a.trace]))
        new = sorted(run([a.rtrace, "export", "--format", "chrome", a.trace]).splitlines())
        old = sorted(run([a.old, "export", "--format", "chrome", a.trace]).splitlines())
        same.append(new == old)
        result(all(same), "same-as-before",
               f"table, JSON, Chrome export events equal to the build before: {same}; "
               f"{len(new)} export lines")
    with open(a.trace, "rb") as f:
        piped = subprocess.run([a.rtrace, "report", "-"], stdin=f, capture_output=True,
                               check=True)
    table = run([a.rtrace, "report", a.trace]).decode()
    copy = piped.stderr.decode().strip().rsplit(" ", 1)[-1]
    result(piped.stdout.decode() == table.replace(a.trace, copy), "standard-input",
           f"rtrace report - < TRACE equals the file's report (read as {copy})")


if __name__ == "__main__":
    main()
