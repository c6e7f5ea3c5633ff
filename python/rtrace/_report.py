"""`rtrace.load`: a trace's report as Python objects, from the packaged ``rtrace`` command's
``rtrace report --format json``."""

import json
import os
import shutil
import subprocess
from importlib import metadata


def rtrace_command():
    """The path of the ``rtrace`` command: ``$RTRACE_BIN``, else the one this package installed,
    else the first on ``PATH``."""
    explicit = os.environ.get("RTRACE_BIN")
    if explicit:
        return explicit
    try:
        files = metadata.distribution("rtrace").files or []
    except metadata.PackageNotFoundError:
        files = []
    for f in files:
        # The wheel installs the command among the scripts (bin/), librtrace.so beside it.
        if f.name == "rtrace" and f.parent.name == "bin":
            path = os.path.normpath(str(f.locate()))
            if os.access(path, os.X_OK):
                return path
    found = shutil.which("rtrace")
    if found:
        return found
    raise FileNotFoundError(
        "no rtrace command: install the rtrace package (pip install .), or set RTRACE_BIN"
    )


class Table(list):
    """One summary: a list of rows, each a dict (the keys of ``rtrace report --format json``,
    times in ns), convertible to a DataFrame when pandas or polars is installed."""

    def to_pandas(self):
        import pandas

        return pandas.DataFrame.from_records(list(self))

    def to_polars(self):
        import polars

        # An empty summary has no rows to tell its columns by: an empty frame.
        if not self:
            return polars.DataFrame()
        return polars.from_dicts(list(self), infer_schema_length=None)


def _wrap(value):
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return Table(value)
    if isinstance(value, dict):
        return {k: _wrap(v) for k, v in value.items()}
    return value


class Report:
    """A report: each summary of ``rtrace report --format json`` by its key, as an attribute
    and as an item (``report.api``, ``report["kernels"]``, ``report.resources["devices"]``).
    Lists of objects are `Table` s; nested objects are dicts of them."""

    def __init__(self, data):
        self.data = data
        self._sections = {k: _wrap(v) for k, v in data.items()}

    @property
    def sections(self):
        """The names of the summaries, in the report's order."""
        return list(self._sections)

    def __getitem__(self, name):
        return self._sections[name]

    def __contains__(self, name):
        return name in self._sections

    def __getattr__(self, name):
        sections = self.__dict__.get("_sections", {})
        if name in sections:
            return sections[name]
        raise AttributeError(f"this report has no summary {name!r}; it has {list(sections)}")

    def __repr__(self):
        sizes = ", ".join(
            f"{k}: {len(v)} rows" for k, v in self._sections.items() if isinstance(v, Table)
        )
        return f"<rtrace.Report {sizes}>"


def load(*paths, args=(), command=None):
    """Reads the traces at `paths` (files of one run, or one file) and returns their `Report`.

    `args` are more options for ``rtrace report`` (filters such as ``["--pid", "1234"]``).
    Raises ``RuntimeError`` with rtrace's message when the report fails.
    """
    if not paths:
        raise TypeError("rtrace.load: give at least one trace file")
    if isinstance(args, (str, bytes)):
        raise TypeError('rtrace.load: args is a list of options, e.g. ["--pid", "1234"]')
    argv = [command or rtrace_command(), "report", "--format", "json", *args, "--"]
    argv += [os.fspath(p) for p in paths]
    # Not the program's standard input: a path `-` names no file here.
    done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError(
            f"rtrace report failed (exit {done.returncode}): {done.stderr.strip()}"
        )
    return Report(json.loads(done.stdout))
