#!/usr/bin/env bash
# Fuzzes the trace reader, the report and the export with AFL++ (cargo-afl)
# for SECONDS (default 300), seeded with the golden fixtures, each twice
# (mode byte 0: read as is; 1: checksums recomputed, see src/read_report.rs).
# Findings land in out/findings/default/crashes/; replay one with
#   target/release/read_report < out/findings/default/crashes/id:...
# Needs `cargo install cargo-afl` (stable Rust).
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-300}
cargo afl build --release
rm -rf out/seeds
mkdir -p out/seeds
for f in ../tests/fixtures/*.bin; do
    name=$(basename "$f" .bin)
    { printf '\000'; cat "$f"; } > "out/seeds/raw-$name"
    { printf '\001'; cat "$f"; } > "out/seeds/fixed-$name"
done
# Resume an earlier run's queue when there is one.
input=out/seeds
if [ -d out/findings/default/queue ]; then input=-; fi
AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1 \
    cargo afl fuzz -V "$secs" -i "$input" -o out/findings target/release/read_report
