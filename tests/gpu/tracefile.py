"""A minimal, independent reader of rtrace's trace.bin (docs/format.md), for the GPU checks.

Reads the function-name table and the API records; checks chunk magic and lengths (not CRCs:
the collector does that). Yields (pid, function name, result, start_ns, end_ns, thread).
"""

import struct

MAGIC = b"RTRACE\0\x1a"


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != MAGIC:
        raise ValueError(f"{path}: not an rtrace trace")
    (body_len,) = struct.unpack_from("<I", data, 12)
    off = 16 + body_len + 4
    names, records = {}, []
    while off + 40 <= len(data):
        magic, kind, _flags, plen, _crc, tid, _seq, _dropped = struct.unpack_from("<IHHIIQQQ", data, off)
        if magic != 0x4B4E4843:
            raise ValueError(f"{path}: bad chunk at byte {off}")
        payload = data[off + 40: off + 40 + plen]
        if len(payload) < plen:
            break  # truncated: keep what was whole
        off += 40 + plen
        if kind == 1:
            (count,) = struct.unpack_from("<I", payload, 0)
            at = 4
            for _ in range(count):
                fid, n = struct.unpack_from("<IH", payload, at)
                names[fid] = payload[at + 6: at + 6 + n].decode()
                at += 6 + n
        elif kind == 2:
            for at in range(0, len(payload), 32):
                fid, result, start, end, _corr = struct.unpack_from("<IIQQQ", payload, at)
                records.append((names.get(fid, f"function#{fid}"), result, start, end, tid))
    return records
