"""Kernel names: rtrace's report (demangled by rtrace) against the PyTorch profiler's (Kineto's)
for the same run (collector/src/demangle.tsv holds c++filt's names for the CI test).

    names_check.py KINETO_JSON TRACE...

Prints "PASS/FAIL names.<check> (detail)" lines and "N passed, N failed"."""
import json
import subprocess
import sys


def main() -> int:
    kineto, traces = sys.argv[1], sys.argv[2:]
    with open(kineto) as f:
        theirs = {e["name"] for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel"}
    report = subprocess.run(["target/release/rtrace", "report", "--format", "json", *traces],
                            capture_output=True, text=True, check=True).stdout
    doc = json.loads(report[report.find("{"):])
    ours = {k["name"] for k in doc["kernels"]}
    passed = failed = 0

    def check(name, ok, detail):
        nonlocal passed, failed
        print(f"{'PASS' if ok else 'FAIL'} names.{name}  ({detail})")
        passed, failed = passed + ok, failed + (not ok)

    missing = sorted(theirs - ours)
    check("as-pytorch-profiler", not missing,
          f"{len(theirs)} distinct kernel names in the profiler's trace, {len(ours)} in rtrace's, "
          f"{len(missing)} of the profiler's not written the same")
    for n in missing[:5]:
        print(f"    profiler: {n}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
