"""Reads cupti_filebuf_probe's buffer file: per kind, the records CUPTI wrote and how many have
both GPU timestamps. Usage: cupti_filebuf_probe.py FILE KERNEL_STRIDE MEMCPY_STRIDE MEMSET_STRIDE"""
import struct
import sys

BUF, NBUF = 4 << 20, 16
KERNEL, MEMCPY, MEMSET = 10, 1, 2
path, strides = sys.argv[1], dict(zip((KERNEL, MEMCPY, MEMSET), map(int, sys.argv[2:5])))
data = open(path, "rb").read()
seen = {}
for b in range(NBUF):
    buf, at = data[b * BUF:(b + 1) * BUF], 0
    while at + 32 <= BUF:
        raw = struct.unpack_from("<I", buf, at)[0]
        kind, flagged = raw & 0x7FFFFFFF, raw >> 31
        if kind == 0:
            break
        if kind not in strides:
            seen.setdefault("unknown kind %d" % kind, [0, 0])[0] += 1
            break
        start, end = struct.unpack_from("<QQ", buf, at + 16)
        s = seen.setdefault((kind, flagged), [0, 0])
        s[0] += 1
        s[1] += start != 0 and end != 0 and end >= start
        at += strides[kind]
for k, (n, timed) in sorted(seen.items(), key=str):
    print("kind, high bit %s records %d timed %d" % (k, n, timed))
