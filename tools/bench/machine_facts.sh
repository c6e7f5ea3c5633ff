#!/usr/bin/env bash
# What a benchmark's numbers depend on, printed before it runs (docs/benchmarks.md): the CPU and
# its topology (which logical CPUs share a core with CPU $1), NUMA nodes, the clock source,
# whether the CPU's own counters are exposed (a `cpu` PMU: without one, cycles and instructions
# cannot be counted there), the hypervisor's steal time so far, and the GPU's clocks. Reads
# only; changes nothing.
#     bash tools/bench/machine_facts.sh [CPU=2]
set -u
cd "$(dirname "$0")/../.." || exit 2
cpu=${1:-2}
echo "== cpu"
grep -m1 'model name' /proc/cpuinfo
grep -m1 -o 'hypervisor' /proc/cpuinfo || echo "no hypervisor flag"
echo "logical CPUs: $(nproc)"
echo "CPU $cpu shares its core with: $(cat /sys/devices/system/cpu/cpu"$cpu"/topology/thread_siblings_list 2>/dev/null || echo '?')"
echo "CPU $cpu package $(cat /sys/devices/system/cpu/cpu"$cpu"/topology/physical_package_id 2>/dev/null || echo '?')"
for n in /sys/devices/system/node/node*; do
    [ -d "$n" ] && echo "$(basename "$n"): CPUs $(cat "$n/cpulist")"
done
echo "scaling governor of CPU $cpu: $(cat /sys/devices/system/cpu/cpu"$cpu"/cpufreq/scaling_governor 2>/dev/null || echo 'none exposed')"
echo "perf_event_paranoid: $(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo '?')"
echo "PMUs: $(ls /sys/bus/event_source/devices 2>/dev/null | tr '\n' ' ')($( [ -e /sys/bus/event_source/devices/cpu ] && echo 'the CPU''s counters exposed' || echo 'no cpu PMU: no cycle or instruction counts'))"
echo "steal (jiffies, all CPUs) so far: $(awk '$1 == "cpu" {print $9}' /proc/stat)"
echo "clock source: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo '?')"
echo "== gpu"
timeout 30 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,pstate,power.draw \
    --format=csv 2>/dev/null || echo "no nvidia-smi"
