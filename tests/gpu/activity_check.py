"""Compares a trace of tests/gpu/activity_sample.cu (RTRACE_GPU_ACTIVITY=1) with what the sample
says it issued. Prints PASS/FAIL lines and exits 1 on any failure.
    python3 tests/gpu/activity_check.py "<sample's last stdout line>" TRACE...
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tracefile  # noqa: E402

IN_GRAPH, CORRELATED = 1, 2
KINDS = {1: "HtoD", 2: "DtoH", 8: "DtoD", 9: "HtoH", 10: "PtoP"}


def main():
    want = dict(re.findall(r"(\w+)=(\d+)", sys.argv[1]))
    want = {k: int(v) for k, v in want.items()}
    kernels, copies, sets, api = [], [], [], []
    for path in sys.argv[2:]:
        k, c, s = tracefile.read_gpu(path)
        kernels += k
        copies += c
        sets += s
        api += tracefile.read(path, runtime=True)
    # GPU work made inside a runtime call may carry the runtime call's id (docs/runtime-api.md).
    by_corr = {r[5]: r for r in api}
    api = [r for r in api if not r[0].startswith("runtime#")]
    failed = 0

    def check(name, ok, detail):
        nonlocal failed
        print(("PASS " if ok else "FAIL ") + f"activity.{name}  ({detail})")
        failed += not ok

    plain = [k for k in kernels if not k["flags"] & IN_GRAPH]
    graph = [k for k in kernels if k["flags"] & IN_GRAPH]
    launch_calls = [r for r in api if r[0].startswith("cuLaunch")]
    check("kernels", len(plain) == want["launches"],
          f"{len(plain)} kernel records outside graphs, {want['launches']} launched")
    # Launches captured into the graph are API calls too; they run when the graph is launched.
    check("launch-calls", len(launch_calls) == want["launches"] + want["graph_kernels"],
          f"{len(launch_calls)} launch API records: {want['launches']} launched, "
          f"{want['graph_kernels']} captured into the graph")
    check("graph-kernels", len(graph) == want["graph_kernels"] and len({k["graph"] for k in graph}) == 1,
          f"{len(graph)} kernel records with a graph id, graphs {sorted({k['graph'] for k in graph})}")
    linked = [k for k in kernels if k["flags"] & CORRELATED and k["correlation"] in by_corr]
    check("kernels-linked", len(linked) == len(kernels),
          f"{len(linked)} of {len(kernels)} linked to an API record")
    wrong = [k for k in linked
             if not by_corr[k["correlation"]][0].startswith(("cuLaunch", "cuGraphLaunch", "runtime#"))
             or k["start"] < by_corr[k["correlation"]][2]]
    to_runtime = sum(1 for k in linked if by_corr[k["correlation"]][0].startswith("runtime#"))
    print(f"INFO activity.kernels-link-layer  ({to_runtime} linked to runtime calls, "
          f"{len(linked) - to_runtime} to driver calls)")
    check("kernels-linked-right", not wrong, f"{len(wrong)} linked to a non-launch call or starting before it")
    graph_launchers = {by_corr[k["correlation"]][0] for k in graph if k["correlation"] in by_corr}
    check("graph-kernels-linked", graph_launchers == {"cuGraphLaunch"} or graph_launchers == {"cuGraphLaunch_ptsz"}
          or (len(graph_launchers) == 1 and next(iter(graph_launchers)).startswith("runtime#")),
          f"graph kernels launched by {sorted(graph_launchers)}")
    streams = {k["stream"] for k in plain}
    check("streams", len(streams) == 3, f"plain kernels on {len(streams)} streams (legacy + 2 thread streams)")
    check("copies", len(copies) == want["copies"], f"{len(copies)} copy records, {want['copies']} issued")
    kinds = sorted({KINDS.get(c["kind"], str(c["kind"])) for c in copies})
    check("copy-kinds", kinds == ["DtoD", "DtoH", "HtoD"], f"kinds {kinds}")
    copies_linked = sum(1 for c in copies if c["correlation"] in by_corr)
    check("copies-linked", copies_linked == len(copies), f"{copies_linked} of {len(copies)} linked")
    check("memsets", len(sets) == want["memsets"], f"{len(sets)} memset records, {want['memsets']} issued")
    ordered = all(k["start"] <= k["end"] for k in kernels + copies + sets)
    check("times", ordered and all(k["start"] > 0 for k in kernels), "every record has start <= end, start > 0")
    print(f"{sum(1 for _ in kernels)} kernels, {len(copies)} copies, {len(sets)} memsets; {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
