"""Run by tests/harness/tests/wheel.rs with the rtrace wheel installed: loads the traces named
on the command line with rtrace.load() and prints, one per line, the API calls per function,
the kernels, the external correlation ids and the packaged command's place, for the test to
compare exactly."""

import os
import sys

import rtrace

report = rtrace.load(*sys.argv[1:])
print("sections:", " ".join(report.sections))
for row in sorted(report.api, key=lambda row: row["function"]):  # the report sorts by time
    print("api", row["function"], row["calls"])
for row in report["kernels"]:
    print("kernel", row["name"], row["count"], row["total_ns"])
for row in report.external:
    print("external", row["kind"], row["id"], row["calls"], row["gpu_records"], row["gpu_ns"])
print("devices", len(report.resources["devices"]))
command = rtrace.rtrace_command()
print("command beside python:", os.path.dirname(command) == os.path.dirname(sys.executable))
try:
    report.no_such_summary
except AttributeError:
    print("no such summary: AttributeError")
