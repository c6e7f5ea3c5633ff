#!/usr/bin/env bash
# Regenerates collector/tests/data/occupancy_table.csv: the answers of the CUDA occupancy
# calculator (cudaOccMaxActiveBlocksPerMultiprocessor, the header-only cuda_occupancy.h of the
# pinned CUDA runtime wheel) for a deterministic sample of launches on several device profiles.
# collector/src/occupancy.rs is tested against it (`cargo test -p rtrace-collector occupancy`).
#
#     tools/occupancy-table.sh             rewrite the fixture
#     tools/occupancy-table.sh --sample N F  write N sampled launches per device profile (the
#                                          fixture's format) to F; check against it with
#                                          RTRACE_OCCUPANCY_SAMPLE=F and the same command as --full
#     tools/occupancy-table.sh --full F    write every H100 launch of the full grid (block
#                                          32..1024 step 32, registers 16..255, dynamic shared
#                                          memory 0..233472 step 96: ~18.7M lines, ~500 MB) to F,
#                                          then check rtrace's calculator against all of it:
#         RTRACE_OCCUPANCY_FULL=F cargo test --release -p rtrace-collector \
#             occupancy -- --ignored
#
# Needs g++ and the CUDA headers (tools/setup-cuda.sh, or $CUDA_INCLUDE).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
include="${CUDA_INCLUDE:-$("$repo/tools/setup-cuda.sh")}"
version="$("$repo/.venv/bin/python3" -c \
    'from importlib import metadata; print("nvidia-cuda-runtime " + metadata.version("nvidia-cuda-runtime"))' \
    2>/dev/null || echo "unknown CUDA version")"
bin="$(mktemp -d)/occupancy_table"
trap 'rm -rf "$(dirname "$bin")"' EXIT
g++ -std=c++17 -O2 -Wall -I"$include" -DCUDA_OCC_HEADER_VERSION="\"$version\"" \
    -o "$bin" "$repo/tools/occupancy/occupancy_table.cpp"

if [[ "${1:-}" == "--full" ]]; then
    out="${2:?--full needs an output file}"
    "$bin" full >"$out"
    echo "occupancy-table.sh: wrote $(wc -l <"$out") launches to $out" >&2
    exit 0
fi
if [[ "${1:-}" == "--sample" ]]; then
    out="${3:?--sample needs a count and an output file}"
    "$bin" sample "$2" >"$out"
    echo "occupancy-table.sh: wrote $(grep -c '^occ,' "$out") launches to $out" >&2
    exit 0
fi
out="$repo/collector/tests/data/occupancy_table.csv"
"$bin" >"$out"
echo "occupancy-table.sh: wrote $(grep -c '^occ,' "$out") launches to $out" >&2
