#!/usr/bin/env bash
# Whether two builds of `rtrace` write the same bytes on the same traces: `rtrace report` as a
# table and JSON, CSV sections, filters and --jobs, and the Chrome export, with the same exit
# status and standard error. The Perfetto export is compared as what it means: where the bytes
# differ (its encoding changed), both are decoded with Perfetto's schema
# (collector/tests/perfetto_decode.py --events: every track descriptor and event in file order,
# timestamps absolute, names and strings resolved) and those lines compared. Prints each
# difference and a count; exits 1 if any.
#
#     tools/bench/same_output.sh OLD_RTRACE NEW_RTRACE TRACE_OR_DIR...
#
# Each export is compared unfiltered and with --from/--to, --kernel, --device and --stream
# ($EXPORT_FILTERS, one set of options a line, an empty line for none, replaces them).
#
# The decoding needs a Python with the `perfetto` package: $RTRACE_PYTHON, else the
# repository's .venv/bin/python3, else python3.
set -uo pipefail
set -f # the filters below are split into words, never globbed
[ $# -ge 3 ] || { echo "usage: $0 OLD_RTRACE NEW_RTRACE TRACE_OR_DIR..." >&2; exit 2; }
old=$1 new=$2
shift 2
work=$(mktemp -d /tmp/rtrace-same.XXXXXX)
trap 'rm -rf "$work"' EXIT
repo=$(cd "$(dirname "$0")/../.." && pwd)
python=${RTRACE_PYTHON:-$repo/.venv/bin/python3}
[ -x "$python" ] || python=python3
# The exports' filters ($EXPORT_FILTERS: one a line; the default below).
mapfile -t filters <<<"${EXPORT_FILTERS-$'\n--from 1ms --to 50ms\n--kernel .*gemm.*\n--device 0\n--stream 7'}"
n=0 bad=0
# same [--decoded] ARGS...: both builds run with ARGS; compared (with --decoded, a Perfetto
# trace on standard output, compared decoded where the bytes differ).
same() {
    local decoded=0
    if [ "$1" = --decoded ]; then
        decoded=1
        shift
    fi
    n=$((n + 1))
    "$old" "$@" >"$work/a" 2>"$work/a.err"
    local ra=$?
    "$new" "$@" >"$work/b" 2>"$work/b.err"
    local rb=$?
    local out=0
    if cmp -s "$work/a" "$work/b"; then
        out=1
    elif [ $decoded = 1 ] &&
        "$python" "$repo/collector/tests/perfetto_decode.py" --events "$work/a" >"$work/a.ev" &&
        "$python" "$repo/collector/tests/perfetto_decode.py" --events "$work/b" >"$work/b.ev" &&
        cmp -s "$work/a.ev" "$work/b.ev"; then
        out=1
    fi
    if [ "$ra" != "$rb" ] || [ $out = 0 ] || ! cmp -s "$work/a.err" "$work/b.err"; then
        bad=$((bad + 1))
        echo "differ: rtrace $*"
    fi
}
for t in "$@"; do
    same report "$t"
    same report --format json "$t"
    same report --format json --jobs 1 "$t"
    same report --format json --jobs 3 "$t"
    same report --kernel '.*gemm.*' "$t"
    same report --from 1ms --to 50ms "$t"
    for s in api kernels memcpy kern-exec latency sync utilisation ranks steps nvtx; do
        same report --format csv --section "$s" "$t"
    done
    for f in "${filters[@]}"; do
        # shellcheck disable=SC2086 # the filter's words
        same --decoded export --format perfetto $f -o - "$t"
        # shellcheck disable=SC2086
        same export --format chrome $f -o - "$t"
    done
done
echo "$n compared, $bad differ"
[ "$bad" = 0 ]
