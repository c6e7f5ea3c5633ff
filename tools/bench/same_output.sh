#!/usr/bin/env bash
# Whether two builds of `rtrace` write the same bytes on the same traces: `rtrace report` as a
# table and JSON, CSV sections, filters and --jobs, and the Perfetto and Chrome exports, with
# the same exit status and standard error. Prints each difference and a count; exits 1 if any.
#
#     tools/bench/same_output.sh OLD_RTRACE NEW_RTRACE TRACE_OR_DIR...
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: $0 OLD_RTRACE NEW_RTRACE TRACE_OR_DIR..." >&2; exit 2; }
old=$1 new=$2
shift 2
work=$(mktemp -d /tmp/rtrace-same.XXXXXX)
trap 'rm -rf "$work"' EXIT
n=0 bad=0
# same ARGS...: both builds run with ARGS; compared.
same() {
    n=$((n + 1))
    "$old" "$@" >"$work/a" 2>"$work/a.err"
    local ra=$?
    "$new" "$@" >"$work/b" 2>"$work/b.err"
    local rb=$?
    if [ "$ra" != "$rb" ] || ! cmp -s "$work/a" "$work/b" || ! cmp -s "$work/a.err" "$work/b.err"; then
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
    same export --format perfetto -o - "$t"
    same export --format chrome -o - "$t"
done
echo "$n compared, $bad differ"
[ "$bad" = 0 ]
