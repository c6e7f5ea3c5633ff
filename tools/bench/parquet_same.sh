#!/usr/bin/env bash
# Whether two builds of `rtrace` export the same Parquet datasets: each TRACE_OR_DIR exported by
# both (as it is, and with --kernel and --from/--to filters), the exit status and standard
# error compared (the dataset's size in `wrote DIR (SIZE)` aside: the files' bytes may differ,
# their tables may not), then the datasets by tools/bench/parquet_same.py (files, schemas,
# metadata, row groups and their statistics, rows). Exits 1 if any differ.
#
#     tools/bench/parquet_same.sh OLD_RTRACE NEW_RTRACE TRACE_OR_DIR...
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: $0 OLD_RTRACE NEW_RTRACE TRACE_OR_DIR..." >&2; exit 2; }
old=$1 new=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
PYTHON=${RTRACE_PYTHON:-$here/../../.venv/bin/python3}
work=$(mktemp -d /tmp/rtrace-pqsame.XXXXXX)
trap 'rm -rf "$work"' EXIT
n=0 bad=0
# same ARGS...: both builds export with ARGS to a dataset each; compared.
same() {
    n=$((n + 1))
    rm -rf "$work/a" "$work/b"
    "$old" export --format parquet -o "$work/a" "$@" >/dev/null 2>"$work/a.err"
    local ra=$?
    "$new" export --format parquet -o "$work/b" "$@" >/dev/null 2>"$work/b.err"
    local rb=$?
    sed -i -e "s#$work/[ab]#DIR#g" -e 's#(\([0-9.]* [kMG]*B\))#(SIZE)#' "$work/a.err" "$work/b.err"
    if [ "$ra" != "$rb" ] || ! cmp -s "$work/a.err" "$work/b.err"; then
        bad=$((bad + 1))
        echo "differ: export $* (exit $ra, $rb; standard error below)"
        diff "$work/a.err" "$work/b.err"
        return
    fi
    if [ "$ra" != 0 ]; then
        echo "export $*: both exit $ra"
        return
    fi
    echo "export $*: $(du -sb "$work/a" | cut -f1) and $(du -sb "$work/b" | cut -f1) bytes"
    "$PYTHON" "$here/parquet_same.py" "$work/a" "$work/b" | sed 's/^/    /'
    [ "${PIPESTATUS[0]}" = 0 ] || bad=$((bad + 1))
}
for t in "$@"; do
    same "$t"
    same --kernel '.*gemm.*' "$t"
    same --from 1ms --to 50ms "$t"
done
echo "$n compared, $bad differ"
[ "$bad" = 0 ]
