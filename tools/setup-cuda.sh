#!/usr/bin/env bash
# Installs what the CUDA parts of the build, the tests and CI need, as PyPI wheels pinned to the
# GPU machine's toolkit, into <repo>/.venv, then prints the CUDA include directory on stdout:
#
#     export CUDA_INCLUDE="$(tools/setup-cuda.sh [demo|test|all])"
#
# - demo: the CUDA headers (cuda.h; nvidia-cuda-runtime, 2 MB): all tools/demo.sh compiles.
# - test: also the CUPTI headers (and crt/, which they include), NVTX's headers, nvdisasm (13.2.51,
#   the oldest wheel; collector/tests/sass.rs runs it from the `bin/` beside the include
#   directory) and Perfetto's trace schema (the `perfetto` package's perfetto_trace_pb2, which
#   collector/tests/export.rs decodes `rtrace export` output with), DuckDB (which
#   collector/tests/parquet.rs runs docs/parquet.md's queries with) and Dask with pandas and
#   pyarrow (which it runs docs/parquet.md's Dask code with; about 30 s to install): what
#   tools/test.sh needs.
# - all (the default): also libclang, for the generators' checks (tools/gen-*/gen.py, .ci/run).
#
# Safe to run again: it installs only the packages missing at the pinned versions.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"
demo=(nvidia-cuda-runtime==13.0.88)
test=("${demo[@]}" nvidia-nvtx==13.0.85 nvidia-cuda-cupti==13.0.85 nvidia-cuda-crt==13.0.88 nvidia-cuda-nvdisasm==13.2.51 perfetto==0.59.1 protobuf==7.36.2 duckdb==2.0.0 dask==2026.8.0 pandas==3.1.1 pyarrow==26.0.1)
all=("${test[@]}" libclang==18.1.1)
case "${1:-all}" in
    demo) packages=("${demo[@]}") ;;
    test) packages=("${test[@]}") ;;
    all) packages=("${all[@]}") ;;
    *)
        echo "usage: tools/setup-cuda.sh [demo|test|all]" >&2
        exit 2
        ;;
esac

if [[ ! -x "$venv/bin/python3" ]]; then
    echo "setup-cuda.sh: creating $venv" >&2
    python3 -m venv "$venv"
fi

# The pinned packages not installed at their pinned version, one per line.
missing="$("$venv/bin/python3" - "${packages[@]}" <<'EOF'
import sys
from importlib import metadata

for spec in sys.argv[1:]:
    name, version = spec.split("==")
    try:
        installed = metadata.version(name)
    except metadata.PackageNotFoundError:
        installed = None
    if installed != version:
        print(spec)
EOF
)"

if [[ -n "$missing" ]]; then
    mapfile -t specs <<<"$missing"
    echo "setup-cuda.sh: installing ${specs[*]}" >&2
    "$venv/bin/python3" -m pip install --disable-pip-version-check --progress-bar on "${specs[@]}" >&2
fi

for include in "$venv"/lib/python3*/site-packages/nvidia/cu13/include; do
    if [[ -f "$include/cuda.h" ]]; then
        echo "$include"
        exit 0
    fi
done
echo "setup-cuda.sh: no nvidia/cu13/include/cuda.h under $venv" >&2
exit 1
