#!/usr/bin/env bash
# Runs every test: installs the CUDA headers (tools/setup-cuda.sh), builds the workspace
# (librtrace.so, the simulated driver, rtrace) and runs `cargo test`, whose integration tests
# run real programs under LD_PRELOAD=librtrace.so against the simulated driver.
set -euo pipefail
cd "$(dirname "$0")/.."
CUDA_INCLUDE="$(tools/setup-cuda.sh)"
export CUDA_INCLUDE
cargo build --workspace --all-targets
cargo test --workspace
