#!/usr/bin/env bash
# Replays fuzz inputs against this build and compares it with another build of `rtrace`.
#
#     collector/fuzz/replay.sh OLD_RTRACE INPUT_DIR...
#
# For each input file (queue, crashes or hangs of a campaign, or the seeds): the fuzz target of
# this tree reads it (a crash, an abort or 10 s is a failure); then the trace it stands for
# (`RTRACE_FUZZ_WRITE`, checksums recomputed as its mode byte says) is given to
# target/release/rtrace of this tree and to OLD_RTRACE: `report` as a table, as CSV and as JSON,
# and `export --format chrome`, filtered as the target filters when its mode byte says so. Both
# builds must print the same bytes, on stdout and on stderr, exit with the same status and write
# the same export. Prints a line per difference and the totals; exits 1 if anything differed or
# failed. Used to show that a restructure changed nothing on damaged input (docs/benchmarks.md).
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OLD_RTRACE INPUT_DIR..." >&2; exit 2; }
old=$(realpath "$1")
shift
here=$(cd "$(dirname "$0")" && pwd)
(cd "$here" && cargo afl build --release -q) || exit 2
(cd "$here/../.." && cargo build --release -q -p rtrace-collector --bin rtrace) || exit 2
target=$here/target/release/read_report
new=$here/../../target/release/rtrace
work=$(mktemp -d /tmp/rtrace-replay.XXXXXX)
trap 'rm -rf "$work"' EXIT

# outcome BIN NAME ARGS...: runs BIN in $work/NAME/ on in.bin; keeps stdout, stderr, status.
outcome() {
    local bin=$1 dir=$work/$2
    shift 2
    rm -rf "$dir" && mkdir -p "$dir"
    (cd "$dir" && cp ../in.bin . && timeout 60 "$bin" "$@" >out 2>err; echo $? >status)
}

inputs=0 failed=0 differed=0 compared=0
for dir in "$@"; do
    for f in "$dir"/*; do
        [ -f "$f" ] || continue
        inputs=$((inputs + 1))
        if ! timeout 10 "$target" <"$f" >/dev/null 2>&1; then
            echo "FAIL (fuzz target): $f"
            failed=$((failed + 1))
            continue
        fi
        RTRACE_FUZZ_WRITE=$work/in.bin "$target" <"$f" || { echo "FAIL (write): $f"; failed=$((failed + 1)); continue; }
        filter=()
        mode=$(head -c 1 "$f" | od -An -tu1 | tr -d ' ')
        [ $((${mode:-0} & 2)) = 0 ] || filter=(--from 1us --to 50ms --device 0 --stream 7,13 --kernel 'a|_Z')
        for job in table csv json chrome; do
            case $job in
            chrome) args=(export --format chrome -o x.json "${filter[@]}" in.bin) ;;
            *) args=(report --format "$job" "${filter[@]}" in.bin) ;;
            esac
            outcome "$old" old "${args[@]}"
            outcome "$new" new "${args[@]}"
            compared=$((compared + 1))
            if ! diff -rq "$work/old" "$work/new" >/dev/null; then
                echo "DIFFERENT ($job): $f"
                differed=$((differed + 1))
            fi
        done
    done
done
echo "replayed $inputs inputs: fuzz target failed on $failed; $compared comparisons with $old, $differed different"
[ "$failed" = 0 ] && [ "$differed" = 0 ]
