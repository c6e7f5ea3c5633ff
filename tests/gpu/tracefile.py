"""A minimal, independent reader of rtrace's trace.bin (docs/format.md), for the GPU checks.

Reads the function-name table and the API records; checks chunk magic and lengths (not CRCs:
the collector does that). `read` returns (function name, result, start_ns, end_ns, thread,
correlation) tuples: the calls of chunk kinds 2 (times in ns) and 34 (times in ticks, with the
clock samples that convert them: format 3.0, docs/format.md), and those rebuilt from the file's
ring regions (chunk kind 25: what the process recorded but had not written when it ended,
docs/format.md "Ring regions");
`read_gpu` the GPU records.
"""

import bisect
import struct

MAGIC = b"RTRACE\0\x1a"


def read_gpu(path):
    """Kernel, memcpy and memset records: dicts with the fields of docs/format.md. Peer copies
    (chunk kind 17) are copies too, with src_device, src_context, dst_device, dst_context."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != MAGIC:
        raise ValueError(f"{path}: not an rtrace trace")
    (body_len,) = struct.unpack_from("<I", data, 12)
    off = 16 + body_len + 4
    names, kernels, copies, sets = {}, [], [], []
    while off + 40 <= len(data):
        magic, kind, _flags, plen, _crc, _tid, _seq, _dropped = struct.unpack_from("<IHHIIQQQ", data, off)
        payload = data[off + 40: off + 40 + plen]
        if magic != 0x4B4E4843 or len(payload) < plen:
            break
        off += 40 + plen
        if kind == 9:
            (count,) = struct.unpack_from("<I", payload, 0)
            at = 4
            for _ in range(count):
                nid, n = struct.unpack_from("<IH", payload, at)
                names[nid] = payload[at + 6: at + 6 + n].decode()
                at += 6 + n
        elif kind == 6:
            for at in range(0, len(payload), 112):
                f = struct.unpack_from("<QQQQIIIIII3i3i3IIIIII", payload, at)
                kernels.append(dict(correlation=f[0], start=f[1], end=f[2], graph_node=f[3],
                                    source_correlation=f[4], name=f[5], device=f[6],
                                    context=f[7], stream=f[8], graph=f[9], grid=f[10:13],
                                    block=f[13:16], cluster=f[16:19], dyn_smem=f[19],
                                    static_smem=f[20], registers=f[21], local_mem=f[22],
                                    flags=f[23]))
        elif kind in (7, 8, 17):
            size = 80 if kind == 17 else 64
            for at in range(0, len(payload), size):
                f = struct.unpack_from("<QQQQIIII", payload, at)
                rec = dict(correlation=f[0], start=f[1], end=f[2], bytes=f[3],
                           source_correlation=f[4], device=f[5], context=f[6], stream=f[7])
                if kind == 17:
                    (rec["src_device"], rec["src_context"], rec["dst_device"],
                     rec["dst_context"]) = struct.unpack_from("<IIII", payload, at + 64)
                if kind in (7, 17):
                    rec["kind"] = payload[at + 48]
                    rec["flags"] = payload[at + 51]
                    copies.append(rec)
                else:
                    sets.append(rec)
    for k in kernels:
        k["name"] = names.get(k["name"], f"kernel#{k['name']}")
    return kernels, copies, sets


def ring_calls(payload, reached):
    """The calls of a ring region (chunk 25) no chunk holds: (function id, result, start_ns,
    end_ns, tid, correlation), from max(tail, the furthest position a chunk of the thread
    reached) to head, ticks converted by the line through the live page's two clock pairs."""
    _layout, slot, cap, live_at, tsc = struct.unpack_from("<IIQII", payload, 0)
    page = payload[live_at: live_at + 4096]
    if slot != 32 or cap == 0 or len(page) < 4096:
        return []
    q = lambda at: struct.unpack_from("<Q", page, at)[0]
    head, tail, state, tid, base = q(0), q(128), q(152), q(160), q(168)
    t0, n0, t1, n1 = q(176), q(184), q(200), q(208)
    allocated = min(q(144), cap)
    if state == 0 or head < tail or head - tail > cap:
        return []
    per_tick = (n1 - n0) / (t1 - t0) if tsc and t1 > t0 and n1 > n0 else 1.0
    to_ns = (lambda t: n1 + round((t - t1) * per_tick)) if tsc else (lambda t: t)
    out = []
    for pos in range(max(tail, reached.get((tid, base >> 40), 0)), head):
        i = pos % cap
        if i >= allocated:
            break
        at = live_at + 4096 + 32 * i
        fid, result, start, end, corr = struct.unpack_from("<IIQQQ", payload, at)
        if fid >= 0xFFFFFE00:  # a link or an NVTX entry, not a call
            continue
        out.append((fid, result, to_ns(start), to_ns(end), tid, corr))
    return out


TICKS_TSC = 1  # kind 34's trailer flag: the ticks are time-stamp-counter ticks
U64 = (1 << 64) - 1


def ticks_calls(payload):
    """The records of a kind-34 payload, (function id, result, start_ns, end_ns, correlation),
    each time converted as the format says (piecewise linear over the chunk's clock samples,
    each segment's slope in 32.32 fixed point, rounded to the nearest ns), written here again
    from docs/format.md so that the check does not take the collector's word for it."""
    if len(payload) < 8:
        raise ValueError("API records in ticks: no trailer")
    k, flags = struct.unpack_from("<II", payload, len(payload) - 8)
    rec_len = len(payload) - 8 - 16 * k
    if rec_len < 0 or rec_len % 32:
        raise ValueError(f"API records in ticks: a malformed payload of {len(payload)} bytes")
    samples = [struct.unpack_from("<QQ", payload, rec_len + 16 * i) for i in range(k)]
    ticks = [t for t, _ in samples]

    def ns(t):
        if not flags & TICKS_TSC or k == 0:
            return t
        if k == 1:
            return samples[0][1]
        i = max(0, min(bisect.bisect_right(ticks, t) - 1, k - 2))
        (t0, n0), (t1, n1) = samples[i], samples[i + 1]
        per_tick = (((n1 - n0) << 32) + (t1 - t0) // 2) // (t1 - t0)
        scaled = lambda dt: (dt * per_tick + (1 << 31)) >> 32 & U64
        return min(n0 + scaled(t - t0), U64) if t >= t0 else max(n0 - scaled(t0 - t), 0)

    out = []
    for at in range(0, rec_len, 32):
        fid, result, start, end, corr = struct.unpack_from("<IIQQQ", payload, at)
        out.append((fid, result, ns(start), ns(end), corr))
    return out


# API record `function` bits (docs/format.md, kind 2): a runtime call (the bits below bit 29:
# CUPTI's runtime callback id); a driver call made inside one (the bits below: its function).
RUNTIME_FUNCTION = 1 << 30
IN_RUNTIME = 1 << 29


def runtime_name(cbid):
    """The runtime function of CUPTI runtime callback id `cbid` as rtrace names it
    (cudaStreamQuery), from the repository's table (inject/format/src/generated/runtime_api.rs);
    None when the table or the id is missing."""
    import os
    import re
    if not hasattr(runtime_name, "table"):
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inject",
                            "format", "src", "generated", "runtime_api.rs")
        try:
            with open(path) as f:
                runtime_name.table = re.findall(r'^\s*"(\w*)",$', f.read(), re.M)
        except OSError:
            runtime_name.table = []
    t = runtime_name.table
    if cbid >= len(t) or not t[cbid]:
        return None
    return re.sub(r"_v\d+$", "", t[cbid])


def function_name(fid, names):
    """The name of API record function `fid`: a runtime call's is "runtime#<cbid>"."""
    if fid & RUNTIME_FUNCTION:
        return f"runtime#{fid & (IN_RUNTIME - 1)}"
    base = fid & ~IN_RUNTIME
    return names.get(base, f"function#{base}")


def read(path, runtime=False):
    """The driver calls (with `runtime`, the runtime calls too, named "runtime#<cbid>")."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != MAGIC:
        raise ValueError(f"{path}: not an rtrace trace")
    (body_len,) = struct.unpack_from("<I", data, 12)
    off = 16 + body_len + 4
    names, records, rings, reached = {}, [], [], {}
    while off + 40 <= len(data):
        magic, kind, _flags, plen, _crc, tid, seq, _dropped = struct.unpack_from("<IHHIIQQQ", data, off)
        if magic != 0x4B4E4843:
            raise ValueError(f"{path}: bad chunk at byte {off}")
        payload = data[off + 40: off + 40 + plen]
        if len(payload) < plen:
            break  # truncated: keep what was whole
        off += 40 + plen
        if kind in (2, 19, 34) and seq >> 40:
            key = (tid, seq >> 40)
            reached[key] = max(reached.get(key, 0), seq)
        if kind == 1:
            (count,) = struct.unpack_from("<I", payload, 0)
            at = 4
            for _ in range(count):
                fid, n = struct.unpack_from("<IH", payload, at)
                names[fid] = payload[at + 6: at + 6 + n].decode()
                at += 6 + n
        elif kind == 2:
            for at in range(0, len(payload), 32):
                fid, result, start, end, corr = struct.unpack_from("<IIQQQ", payload, at)
                if runtime or not fid & RUNTIME_FUNCTION:
                    records.append((function_name(fid, names), result, start, end, tid, corr))
        elif kind == 34:
            for fid, result, start, end, corr in ticks_calls(payload):
                if fid < 0xFFFFFE00 and (runtime or not fid & RUNTIME_FUNCTION):
                    records.append((function_name(fid, names), result, start, end, tid, corr))
        elif kind == 25:
            rings.append(payload)
    for payload in rings:
        for fid, result, start, end, tid, corr in ring_calls(payload, reached):
            if runtime or not fid & RUNTIME_FUNCTION:
                records.append((function_name(fid, names), result, start, end, tid, corr))
    return records


def chunks(path):
    """(kind, thread, payload) of each whole chunk of a trace file, in order."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != MAGIC:
        raise ValueError(f"{path}: not an rtrace trace")
    (body_len,) = struct.unpack_from("<I", data, 12)
    off = 16 + body_len + 4
    while off + 40 <= len(data):
        magic, kind, _flags, plen, _crc, tid, _seq, _dropped = struct.unpack_from("<IHHIIQQQ", data, off)
        payload = data[off + 40: off + 40 + plen]
        if magic != 0x4B4E4843 or len(payload) < plen:
            return
        off += 40 + plen
        yield kind, tid, payload


def read_nvtx_events(path):
    """A trace's NVTX strings (id -> text) and events (chunks 18 and 19), in file order: dicts
    with kind (1 push, 2 pop, 3 start, 4 end, ...), message, time, value, domain, tid."""
    strings, events = {}, []
    for kind, tid, payload in chunks(path):
        if kind == 18:
            (count,) = struct.unpack_from("<I", payload, 0)
            at = 4
            for _ in range(count):
                sid, n = struct.unpack_from("<IH", payload, at)
                strings[sid] = payload[at + 6: at + 6 + n].decode("utf-8", "replace")
                at += 6 + n
        elif kind == 19:
            for at in range(0, len(payload), 48):
                k, _pt, _ct, msg, time_ns, value, domain, category = struct.unpack_from("<HBBIQQII", payload, at)
                events.append(dict(kind=k, message=msg, time=time_ns, value=value, domain=domain, tid=tid))
    return strings, events


def read_nvtx_ranges(path):
    """The push/pop and start/end ranges of a trace's NVTX events: dicts with kind
    ("push"/"start"), name, domain, tid, start, end, level (push only). A pop ends the
    innermost push of its thread and domain."""
    strings, events = read_nvtx_events(path)
    ranges, stacks, started = [], {}, {}
    for e in events:
        if e["kind"] == 1:
            stacks.setdefault((e["tid"], e["domain"]), []).append(e)
        elif e["kind"] == 2:
            st = stacks.get((e["tid"], e["domain"]))
            if st:
                p = st.pop()
                ranges.append(dict(kind="push", name=strings.get(p["message"], ""), domain=p["domain"],
                                   tid=p["tid"], start=p["time"], end=e["time"], level=p["value"]))
        elif e["kind"] == 3:
            started[e["value"]] = e
        elif e["kind"] == 4 and e["value"] in started:
            s = started.pop(e["value"])
            ranges.append(dict(kind="start", name=strings.get(s["message"], ""), domain=s["domain"],
                               tid=s["tid"], start=s["time"], end=e["time"], level=None))
    return ranges


def _unzstd(data):
    """A zstd frame's content, with whichever decoder this Python has (None: none)."""
    for name in ("compression.zstd", "zstandard"):
        try:
            mod = __import__(name, fromlist=["x"])
        except ImportError:
            continue
        if hasattr(mod, "decompress"):
            return mod.decompress(data)
        return mod.ZstdDecompressor().decompress(data)
    import shutil
    import subprocess
    if shutil.which("zstd"):
        return subprocess.run(["zstd", "-dc"], input=data, capture_output=True, check=True).stdout
    return None


def read_module_images(path):
    """The module images of a trace (chunk 20): dicts with module, context, hash, crc, size,
    zstd (whether the image is stored as a zstd frame) and bytes (None where an earlier chunk,
    or another trace of the run, holds the same content; or a compressed image this Python
    cannot decompress)."""
    out = []
    for kind, _tid, payload in chunks(path):
        if kind == 20:
            module, context, h, crc, size, stored = struct.unpack_from("<IIQQQI", payload, 0)
            # stored: bit 0 the image as it is, bit 1 a zstd frame of it, neither: named only.
            data = payload[40:] if stored & 1 else _unzstd(payload[40:]) if stored & 2 else None
            out.append(dict(module=module, context=context, hash=h, crc=crc, size=size,
                            zstd=bool(stored & 2), bytes=data))
    return out


class _Bincode:
    """bincode 2's standard configuration, as the format crate writes serde values: varint
    integers (< 251 one byte; 251/252/253: u16/u32/u64 follow), length-prefixed strings and
    sequences, little-endian f64, enum variants as varint indices."""

    def __init__(self, b):
        self.b, self.at = b, 0

    def uint(self):
        v = self.b[self.at]
        self.at += 1
        if v < 251:
            return v
        size = {251: 2, 252: 4, 253: 8}[v]
        (v,) = struct.unpack_from({2: "<H", 4: "<I", 8: "<Q"}[size], self.b, self.at)
        self.at += size
        return v

    def bytes(self):
        n = self.uint()
        out = self.b[self.at: self.at + n]
        self.at += n
        return out

    def string(self):
        return self.bytes().decode("utf-8", "replace")

    def f64(self):
        (v,) = struct.unpack_from("<d", self.b, self.at)
        self.at += 8
        return v


def read_profiles(path):
    """Kernel profiling's chunks (23: set-up per context, 24: one per profiled launch), decoded
    independently of the collector: (setups, profiles), lists of dicts. A profile's `values`
    maps its set-up's metric names to the values the library evaluated."""
    setups, profiles = [], []
    for kind, _tid, payload in chunks(path):
        d = _Bincode(payload)
        if kind == 23:
            setups.append(dict(context=d.uint(), device=d.uint(), time=d.uint(), chip=d.string(),
                               metrics=[d.string() for _ in range(d.uint())], passes=d.uint(),
                               replay=d.uint()))
        elif kind == 24:
            p = dict(context=d.uint(), correlation=d.uint(), launch=d.uint(), start=d.uint(),
                     end=d.uint(), name=d.string(), range=d.string())
            p["values"] = [d.f64() for _ in range(d.uint())]
            p["counter_data"] = d.bytes()
            profiles.append(p)
    for p in profiles:
        s = next((s for s in setups if s["context"] == p["context"]), None)
        if s is not None:
            p["values"] = dict(zip(s["metrics"], p["values"]))
    return setups, profiles
