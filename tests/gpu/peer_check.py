"""Compares a trace of tests/gpu/peer_sample.cu (RTRACE_GPU_ACTIVITY=1, two GPUs) with what the
sample says it issued: one peer-to-peer copy record (PtoP, source and destination devices) per
copy, the bytes, links to the copying calls, and a kernel on each device. Prints every copy
record, then PASS/FAIL lines; exits 1 on any failure.
    python3 tests/gpu/peer_check.py "<sample's last stdout line>" TRACE...
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tracefile  # noqa: E402

CORRELATED, PTOP = 2, 10


def main():
    m = re.search(r"peer copies (\d+) bytes (\d+) kernels (\d+) devices (\d+)", sys.argv[1])
    if not m:
        print(f"FAIL peer.sample  (no summary line: {sys.argv[1]!r})")
        return 1
    copies_want, bytes_want, kernels_want = int(m.group(1)), int(m.group(2)), int(m.group(3))
    kernels, copies, api = [], [], []
    for path in sys.argv[2:]:
        k, c, _ = tracefile.read_gpu(path)
        kernels += k
        copies += c
        api += tracefile.read(path, runtime=True)
    by_corr = {r[5]: r for r in api}
    failed = 0

    def check(name, ok, detail):
        nonlocal failed
        print(("PASS " if ok else "FAIL ") + f"peer.{name}  ({detail})")
        failed += not ok

    # The sample's own memsets (cudaMemset) are not copies; its copies are all between devices.
    for c in copies:
        call = by_corr.get(c["correlation"], ("-",))[0]
        print(f"    copy kind {c['kind']} bytes {c['bytes']} device {c['device']} "
              f"src {c.get('src_device', '-')} dst {c.get('dst_device', '-')} by {call}")
    peer = [c for c in copies if "src_device" in c]
    check("copies", len(peer) == copies_want,
          f"{len(peer)} peer copy records, {copies_want} copies issued; {len(copies)} copy records in all")
    check("bytes", sum(c["bytes"] for c in peer) == bytes_want,
          f"{sum(c['bytes'] for c in peer)} bytes in peer copy records, {bytes_want} copied")
    kinds = {c["kind"] for c in peer}
    check("kind", kinds == {PTOP}, f"copy kinds {sorted(kinds)} (PtoP is {PTOP})")
    devices = sorted({(c["src_device"], c["dst_device"]) for c in peer})
    check("devices", devices == [(0, 1), (1, 0)], f"(source, destination) devices {devices}")
    linked = [c for c in peer if c["flags"] & CORRELATED and c["correlation"] in by_corr]
    # A runtime call's name is "runtime#<cbid>" here (GPU work made inside it may carry its id).
    right = [c for c in linked if ("Memcpy" in by_corr[c["correlation"]][0]
                                   or by_corr[c["correlation"]][0].startswith("runtime#"))
             and c["start"] >= by_corr[c["correlation"]][2]]
    check("linked", len(right) == len(peer),
          f"{len(right)} of {len(peer)} linked to a memcpy call that began before the copy; "
          f"calls {sorted({by_corr[c['correlation']][0] for c in linked})}")
    on = sorted(k["device"] for k in kernels)
    check("kernels", on == list(range(kernels_want)), f"kernels on devices {on}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
