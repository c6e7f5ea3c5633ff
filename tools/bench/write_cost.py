"""What appending to a file costs the kernel, per byte: the worker's writes of a trace.

    python3 tools/bench/write_cost.py [DIR ...]     (default: /tmp /dev/shm)

Per directory, appends CHUNK-byte writes (256 KiB, about what the worker writes a drain) to a
new file until TOTAL bytes (512 MiB), twice (the second file written after the first is
removed), and prints the wall and system time per byte (getrusage) and what that comes to for
a trace of BYTES_PER_OP bytes an operation (508: the default mode on PyTorch's x.add_(1)).
Environment: CHUNK, TOTAL, BYTES_PER_OP."""
import os
import resource
import sys
import time

CHUNK = int(os.environ.get("CHUNK", 256 << 10))
TOTAL = int(os.environ.get("TOTAL", 512 << 20))
PER_OP = int(os.environ.get("BYTES_PER_OP", 508))


def one(path):
    buf = b"\x5a" * CHUNK
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        n = 0
        while n < TOTAL:
            n += os.write(fd, buf)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        os.close(fd)
        os.unlink(path)
    return wall / n * 1e9, (r1.ru_stime - r0.ru_stime) / n * 1e9


def main():
    dirs = sys.argv[1:] or ["/tmp", "/dev/shm"]
    print(f"appends of {CHUNK} bytes to {TOTAL >> 20} MiB; per byte, and per op of {PER_OP} bytes")
    for d in dirs:
        for run in (1, 2):
            wall, system = one(os.path.join(d, f"rtrace-write-cost.{os.getpid()}"))
            print(f"{d:<12} run {run}: wall {wall:.2f} ns/byte, system {system:.2f} ns/byte"
                  f" = {system * PER_OP / 1000:.3f} us/op")


if __name__ == "__main__":
    main()
