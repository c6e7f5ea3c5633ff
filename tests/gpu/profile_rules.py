"""Kernel profiling's findings against Nsight Compute's rules on the same kernels
(tests/gpu/profile_check.sh, part `metrics`): REPORT_JSON is `rtrace report --format json` of a
trace with every set, NCU_TXT is `ncu --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables
--section Occupancy --section WarpStateStats ...` of the same program. For each kernel both
profiled, compares: shared-memory bank conflicts (Nsight's rule text "bank conflict"), the
occupancy gap (Nsight's "theoretical occupancy" rule), and the bottleneck class of the Speed Of
Light rule (rtrace's Bottleneck; Nsight's text: "low compute throughput and memory bandwidth" =
latency, else high compute or memory utilization). Prints one line per kernel and a summary;
exit status 0 iff every comparison agrees.
"""

import json
import re
import sys


def ncu_kernels(path):
    """{short kernel name: text of its sections}."""
    out, name, lines = {}, None, []
    head = re.compile(r"^  (\S.*?) \(\d+, \d+, \d+\)x\(\d+, \d+, \d+\), Context \d+, Stream \d+")
    for line in open(path, errors="replace"):
        m = head.match(line)
        if m:
            if name:
                out.setdefault(short(name), "\n".join(lines))
            name, lines = m.group(1), []
        elif name:
            lines.append(line.rstrip())
    if name:
        out.setdefault(short(name), "\n".join(lines))
    return out


def short(name):
    return name.split("(")[0].split("<")[0].strip()


def ncu_verdicts(text):
    flat = " ".join(text.split())
    if re.search(r"low compute throughput and memory bandwidth utilization", flat):
        bound = "latency"
    elif "utilizing greater than 80.0% of the available compute or memory" in flat:
        bound = "high"
    else:
        bound = "-"
    stall = re.search(r"spends ([0-9.]+) cycles being stalled", flat)
    return dict(
        conflicts="bank conflict" in flat,
        # The achieved-occupancy rule (not the one on a low theoretical occupancy).
        occupancy="difference between calculated theoretical" in flat,
        bound=bound,
        stall=float(stall.group(1)) if stall else None,
    )


def rtrace_verdicts(kernel):
    rules = {f["rule"]: f for f in kernel.get("findings") or []}
    bound = "-"
    if "Bottleneck" in rules:
        msg = rules["Bottleneck"]["message"]
        bound = msg.split("-bound")[0] if "-bound" in msg else "-"
        bound = "high" if bound in ("compute", "memory") else bound
    stall = rules.get("DominantStall")
    return dict(conflicts="SharedMemoryConflicts" in rules, occupancy="AchievedOccupancy" in rules,
                bound=bound, stall=stall["numbers"]["stall_cycles"] if stall else None)


def main():
    report = json.load(open(sys.argv[1]))
    ncu = ncu_kernels(sys.argv[2])
    agree = disagree = 0
    for k in report["kernel_profiles"]["kernels"]:
        name = short(k["name"])
        if name not in ncu:
            print(f"{name}: not in ncu's output")
            continue
        ours, theirs = rtrace_verdicts(k), ncu_verdicts(ncu[name])
        for key in ("conflicts", "occupancy", "bound", "stall"):
            if key == "bound" and theirs[key] == "-":
                continue
            if key == "stall" and None not in (ours[key], theirs[key]):
                # Both name a dominant stall: its cycles per issued instruction within 10%.
                same = abs(ours[key] - theirs[key]) <= 0.1 * theirs[key] + 0.05
            else:
                same = (ours[key] is None) == (theirs[key] is None) if key == "stall" else ours[key] == theirs[key]
            agree += same
            disagree += not same
            print(f"{'ok  ' if same else 'DIFF'} {name[:40]:40} {key:10} rtrace {ours[key]!s:8} ncu {theirs[key]!s}")
    print(json.dumps(dict(agree=agree, disagree=disagree)))
    sys.exit(0 if disagree == 0 and agree > 0 else 1)


if __name__ == "__main__":
    main()
