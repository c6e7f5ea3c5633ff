# Sourced by the collector benchmarks on synthetic traces (collector_scale, parquet_export,
# ranks_scale, hta_side_by_side, engines_check), from the repository root:
#     . tools/bench/synth_env.sh NAME
# Builds the release `rtrace` and the `synth` example (CARGO_TARGET_DIR honoured) and sets
# RTRACE and SYNTH to them; sets WORK to $WORK if the caller gave one (kept), else to a new
# /tmp/rtrace-NAME.XXXXXX removed when the script exits.
cargo build --release -q -p rtrace-collector --bin rtrace --example synth
target=${CARGO_TARGET_DIR:-$PWD/target}
RTRACE=$target/release/rtrace
SYNTH=$target/release/examples/synth
own_work=0
if [ -z "${WORK:-}" ]; then
    WORK=$(mktemp -d "/tmp/rtrace-$1.XXXXXX")
    own_work=1
fi
cleanup() { [ "$own_work" = 1 ] && rm -rf "$WORK"; }
trap cleanup EXIT
