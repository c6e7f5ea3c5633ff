#!/usr/bin/env python3
"""Turns cupti_counter.so's live counts (CUPTI_COUNT_LIVE=1: "<prefix>.<pid>.live", counts in a
shared mapping that outlives a killed process, and "<prefix>.<pid>.names") into the text files
compare.py reads ("<prefix>.<pid>": "<callback name> <calls> <errors>" lines).

    live_counts.py PREFIX
"""

import glob
import struct
import sys

MAX_CBID = 8192


def main() -> int:
    prefix = sys.argv[1]
    done = 0
    for live in sorted(glob.glob(glob.escape(prefix) + ".*.live")):
        stem = live[: -len(".live")]
        names = {}
        with open(stem + ".names") as f:
            for line in f:
                cbid, name = line.split()
                names[int(cbid)] = name
        data = open(live, "rb").read()
        calls = struct.unpack_from(f"<{MAX_CBID}Q", data, 0)
        errors = struct.unpack_from(f"<{MAX_CBID}Q", data, 8 * MAX_CBID)
        with open(stem, "w") as out:
            out.write(f"# cupti_counter live counts from {live}\n")
            for cbid in range(MAX_CBID):
                if calls[cbid] or errors[cbid]:
                    out.write(f"{names.get(cbid, f'cbid_{cbid}')} {calls[cbid]} {errors[cbid]}\n")
        done += 1
    print(f"{done} live count file(s) converted")
    return 0 if done else 1


if __name__ == "__main__":
    sys.exit(main())
