"""rtrace from Python: capture control, external correlation ids and reports.

Run the program under rtrace (``rtrace record -- python3 train.py``); inside it:

    import rtrace

    rtrace.start()                      # cuProfilerStart: recording begins (with
    for step in range(10):              #   `rtrace record --capture-range cudaProfilerApi`)
        with rtrace.external_id(step):  # the GPU work launched inside is linked to `step`
            train_step()
    rtrace.stop()                       # cuProfilerStop: recording ends

Afterwards, from any Python:

    report = rtrace.load("rtrace-1234.bin")
    report.kernels.to_pandas()          # or .to_polars(), or the rows as dicts

Without rtrace the capture and correlation calls do nothing (a warning says so once), so the
program runs the same either way. See docs/python.md.
"""

from ._capture import (
    CUSTOM0,
    external_id,
    pop_external_id,
    push_external_id,
    start,
    stop,
    under_rtrace,
)
from ._report import Report, Table, load, rtrace_command

__all__ = [
    "CUSTOM0",
    "Report",
    "Table",
    "external_id",
    "load",
    "pop_external_id",
    "push_external_id",
    "rtrace_command",
    "start",
    "stop",
    "under_rtrace",
]
