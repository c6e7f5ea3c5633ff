#!/usr/bin/env bash
# Runs every test: installs the CUDA headers (tools/setup-cuda.sh test), builds the workspace
# (librtrace.so, the simulated driver, rtrace) and runs `cargo test`, whose integration tests
# run real programs under LD_PRELOAD=librtrace.so against the simulated driver. Ends with the
# totals over every test binary: "N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
CUDA_INCLUDE="$(tools/setup-cuda.sh test)"
export CUDA_INCLUDE
cargo build --workspace --all-targets
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --no-fail-fast 2>&1 | tee "$log" || status=$?
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "%d passed, %d failed\n", p, f }' "$log"
exit "$status"
