#!/usr/bin/env bash
# Installs the CUDA headers, the CUPTI headers (and crt/, which they include) as PyPI wheels
# pinned to the GPU machine's toolkit, libclang, and Perfetto's trace schema (the `perfetto`
# package's perfetto_trace_pb2, which collector/tests/export.rs decodes `rtrace export` output
# with), and nvdisasm (13.2.51, the oldest wheel; collector/tests/sass.rs runs it from the
# `bin/` beside the include directory), into <repo>/.venv, then prints the CUDA include
# directory on stdout:
#
#     export CUDA_INCLUDE="$(tools/setup-cuda.sh)"
#
# Safe to run again: it installs only the packages missing at the pinned versions.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"
packages=(nvidia-cuda-runtime==13.0.88 nvidia-nvtx==13.0.85 nvidia-cuda-cupti==13.0.85 nvidia-cuda-crt==13.0.88 nvidia-cuda-nvdisasm==13.2.51 libclang==18.1.1 perfetto==0.59.1 protobuf==7.36.2)

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
    "$venv/bin/python3" -m pip install --disable-pip-version-check --quiet "${specs[@]}" >&2
fi

for include in "$venv"/lib/python3*/site-packages/nvidia/cu13/include; do
    if [[ -f "$include/cuda.h" ]]; then
        echo "$include"
        exit 0
    fi
done
echo "setup-cuda.sh: no nvidia/cu13/include/cuda.h under $venv" >&2
exit 1
