#!/usr/bin/env bash
# docs/parquet.md's analyses in every engine it shows, on one exported multi-rank dataset: the
# DuckDB queries against `rtrace report` (collector/tests/parquet_check.py, as CI runs them on
# its own job), then the Dask and Spark code, run as written, against the DuckDB queries
# (collector/tests/engines_check.py): the same rows, exactly.
#
#     tools/bench/engines_check.sh [RANKS] [RECORDS]     # default: 4 ranks of 200000 records
#
# The ranks are synthetic (collector/examples/synth.rs with SYNTH_RANK=r SYNTH_NVTX=1
# SYNTH_SYNC=1 SYNTH_SLOW=1, 8 threads on two devices, pid 10000 + r: NVTX `step` ranges, an
# NCCL collective every sixteenth kernel, copies, allocations and synchronizations).
# ENGINES (default "dask spark") picks the engines. PYTHON (default /tmp/engines-venv/bin/python3)
# must import duckdb, and dask.dataframe and pyspark for those engines (Spark needs Java 17 or
# later):
#     python3 -m venv /tmp/engines-venv
#     /tmp/engines-venv/bin/pip install duckdb 'dask[dataframe]' pyspark
# Prints each check, then `N passed, N failed`; exits 1 when any failed. Traces go to $WORK
# (default a temporary directory, removed at the end).
set -euo pipefail
cd "$(dirname "$0")/../.."
ranks=${1:-4}
records=${2:-200000}
ENGINES=${ENGINES:-dask spark}
PYTHON=${PYTHON:-/tmp/engines-venv/bin/python3}
. tools/bench/synth_env.sh engines

mkdir -p "$WORK/run"
nccl=()
for ((r = 0; r < ranks; r++)); do
    SYNTH_RANK=$r SYNTH_NVTX=1 SYNTH_SYNC=1 SYNTH_SLOW=1 "$SYNTH" \
        "$(printf '%s/run/rank-%05d.bin' "$WORK" "$r")" "$records" 8 $((10000 + r)) >/dev/null
    "$RTRACE" report --format json --pid $((10000 + r)) --kernel '(?i)nccl' "$WORK/run" >"$WORK/nccl-$r.json"
    nccl+=("$((10000 + r))=$WORK/nccl-$r.json")
done
"$RTRACE" export --format parquet -o "$WORK/train.parquet" "$WORK/run"
"$RTRACE" report --format json "$WORK/run" >"$WORK/report.json"
echo "engines check: $ranks ranks x $records records; $("$PYTHON" -c 'import duckdb; print("duckdb", duckdb.__version__)')"

passed=0 failed=0
# DuckDB against the report.
out=$("$PYTHON" collector/tests/parquet_check.py "$WORK/train.parquet" docs/parquet.md "$WORK/report.json" "${nccl[@]}")
echo "$out" | grep '^check '
ok=$(echo "$out" | grep -c '^check .*: ok$' || true)
bad=$(echo "$out" | grep '^check ' | grep -vc ': ok$' || true)
passed=$((passed + ok)) failed=$((failed + bad))
# Dask and Spark against DuckDB.
if [ -n "$ENGINES" ]; then
    # shellcheck disable=SC2086
    out=$("$PYTHON" collector/tests/engines_check.py "$WORK/train.parquet" docs/parquet.md $ENGINES 2>"$WORK/engines.log") || true
    echo "$out" | grep -v '^[0-9]* passed'
    summary=$(echo "$out" | tail -n 1)
    if [[ $summary =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
        passed=$((passed + BASH_REMATCH[1])) failed=$((failed + BASH_REMATCH[2]))
    else
        echo "engines_check.py did not finish:" >&2
        tail -n 20 "$WORK/engines.log" >&2
        failed=$((failed + 1))
    fi
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
