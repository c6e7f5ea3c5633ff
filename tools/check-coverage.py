#!/usr/bin/env python3
"""Check that librtrace.so exports a wrapper for every `cu*` function the CUDA driver exports.

    tools/check-coverage.py --wrapped target/release/librtrace.so --driver /usr/lib/.../libcuda.so.1
    tools/check-coverage.py --wrapped target/release/librtrace.so \\
        --exports tools/gen-wrappers/driver-exports-580.159.04.txt \\
        --ignore tools/gen-wrappers/unwrappable.txt

Exits 1 when a driver function is not wrapped (unless --allow-missing); names matched by --ignore
are listed but not counted. Wrapped names the driver lacks are listed for information.
"""

import argparse
import fnmatch
import subprocess
import sys
from pathlib import Path

PER_THREAD = ("_ptds", "_ptsz")


def exported_cu_functions(library):
    """Defined `cu*` functions in the dynamic symbol table (nm types T and W)."""
    try:
        proc = subprocess.run(
            ["nm", "-D", "--defined-only", str(library)],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        sys.exit("check-coverage.py: nm not found (binutils)")
    if proc.returncode != 0:
        sys.exit(f"check-coverage.py: nm failed on {library}: {proc.stderr.strip()}")
    names = set()
    for line in proc.stdout.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1] in ("T", "W") and fields[2].startswith("cu"):
            names.add(fields[2].split("@")[0])
    return names


def names_from_file(path):
    """One name per line; blank lines and `#` comments are skipped."""
    names = set()
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(line)
    return names


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wrapped", required=True, type=Path, help="the built librtrace.so")
    driver = parser.add_mutually_exclusive_group(required=True)
    driver.add_argument("--driver", type=Path, help="the real libcuda.so.1, read with nm -D")
    driver.add_argument("--exports", type=Path, help="a file of driver export names, one per line")
    parser.add_argument(
        "--ignore",
        type=Path,
        action="append",
        default=[],
        help="a file of names or shell patterns known to be unwrappable (repeatable)",
    )
    parser.add_argument(
        "--allow-missing",
        action="store_true",
        help="exit 0 even when driver functions are not wrapped",
    )
    args = parser.parse_args()

    wrapped = exported_cu_functions(args.wrapped)
    if args.driver:
        exports = exported_cu_functions(args.driver)
    else:
        exports = {n for n in names_from_file(args.exports) if n.startswith("cu")}
    patterns = set().union(*(names_from_file(p) for p in args.ignore))

    missing = sorted(exports - wrapped)
    ignored = [n for n in missing if any(fnmatch.fnmatchcase(n, p) for p in patterns)]
    missing = [n for n in missing if n not in ignored]
    extra = sorted(wrapped - exports)

    per_thread = sum(n.endswith(PER_THREAD) for n in exports)
    print(f"wrapped: {len(wrapped)} entry points")
    print(f"driver exports: {len(exports)} cu* functions ({per_thread} _ptds/_ptsz)")
    print(f"not wrapped: {len(missing)}")
    for name in missing:
        print(f"  {name}")
    if ignored:
        print(f"not wrapped, ignored: {len(ignored)}")
        for name in ignored:
            print(f"  {name}")
    if extra:
        print(f"wrapped, not exported by the driver: {len(extra)}")
        for name in extra:
            print(f"  {name}")
    return 1 if missing and not args.allow_missing else 0


if __name__ == "__main__":
    sys.exit(main())
