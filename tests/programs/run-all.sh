#!/usr/bin/env bash
# Builds simcuda and the test programs, runs every program against simcuda (no tracer) and checks
# its output and exit status against the values documented in README.md.
#   tests/programs/run-all.sh [WORKDIR]       (CUDA_INCLUDE: the CUDA 13 include directory)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
inc=${CUDA_INCLUDE:-$(ls -d "$root"/.venv/lib/python3*/site-packages/nvidia/cu13/include 2>/dev/null | head -n1 || true)}
if [ ! -f "$inc/cuda.h" ]; then
    echo "run-all: set CUDA_INCLUDE to the directory holding cuda.h (CUDA 13)" >&2
    exit 2
fi
work=${1:-$(mktemp -d)}
target=${CARGO_TARGET_DIR:-$root/target}

cargo build -q -p simcuda --manifest-path "$root/Cargo.toml"
mkdir -p "$work/lib" "$work/bin"
ln -sf "$target/debug/libcuda.so" "$work/lib/libcuda.so.1"
ln -sf "$target/debug/libcuda.so" "$work/lib/libcuda.so"

cflags=(-O1 -Wall -Werror -I"$inc")
for p in direct threads fork exits killme errors; do
    gcc "${cflags[@]}" -pthread "$here/$p.c" -o "$work/bin/$p" -L"$work/lib" -lcuda
done
for p in procaddr dlsym; do
    gcc "${cflags[@]}" "$here/$p.c" -o "$work/bin/$p" -ldl
done
export LD_LIBRARY_PATH=$work/lib

failures=0
# expect NAME STATUS EXPECTED-OUTPUT -- COMMAND...
expect() {
    local name=$1 want_status=$2 want_out=$3
    shift 4
    local out status=0
    out=$("$@" 2>"$work/$name.err") || status=$?
    if [ "$status" != "$want_status" ] || [ "$out" != "$want_out" ]; then
        echo "FAIL $name: status $status (want $want_status), output:" >&2
        printf '%s\n' "$out" >&2
        echo "want:" >&2
        printf '%s\n' "$want_out" >&2
        sed 's/^/  stderr: /' "$work/$name.err" >&2
        failures=$((failures + 1))
    else
        echo "ok   $name"
    fi
}

b=$work/bin
fail_spec='cuMemAlloc_v2=2@2,cuLaunchKernel=719@*,cuCtxGetCurrent=201@3,cuStreamSynchronize=999@2+'
expect direct 0 "direct ok driver=13000 sms=132 cc=9.0 elapsed_ms=0.003000 calls=44" -- "$b/direct"
expect procaddr 0 "procaddr ok elapsed_ms=0.002000 calls=85" -- "$b/procaddr"
expect dlsym 0 "dlsym ok calls=41" -- "$b/dlsym"
expect threads 0 "threads ok threads=4 per_thread=1000 calls=4036" -- "$b/threads"
expect threads-8x5000 0 "threads ok threads=8 per_thread=5000 calls=40068" -- "$b/threads" 8 5000
expect fork 0 "fork child ok child_calls=31
fork parent ok parent_calls=26 child_status=0" -- "$b/fork"
expect exits-return 0 "exits mode=return calls=106" -- "$b/exits" return
expect exits-_exit 4 "exits mode=_exit calls=106" -- "$b/exits" _exit
expect exits-sigterm 143 "exits mode=sigterm calls=106" -- "$b/exits" sigterm
expect exits-sigint-handler 0 "handled
exits mode=sigint-handler calls=116" -- "$b/exits" sigint-handler
expect errors 0 "errors ok failed=22 calls=43" -- env SIMCUDA_FAIL="$fail_spec" "$b/errors"
expect errors-unset 2 "" -- "$b/errors"

# exits exit: status 3, calls >= 1156 (another thread is still calling)
status=0
out=$("$b/exits" exit) || status=$?
n=${out#exits mode=exit calls=}
if [ "$status" = 3 ] && [ "$n" -ge 1156 ] 2>/dev/null; then echo "ok   exits-exit"; else
    echo "FAIL exits-exit: status $status, output $out" >&2
    failures=$((failures + 1))
fi

# killme: wait for "ready", then SIGKILL
fifo=$work/killme.out
rm -f "$fifo"
"$b/killme" 60 >"$fifo" &
pid=$!
for _ in $(seq 100); do
    grep -q '^ready$' "$fifo" 2>/dev/null && break
    sleep 0.05
done
kill -KILL "$pid"
status=0
{ wait "$pid"; } 2>/dev/null || status=$?
if [ "$status" = 137 ] && [ "$(cat "$fifo")" = ready ]; then echo "ok   killme"; else
    echo "FAIL killme: status $status, output $(cat "$fifo")" >&2
    failures=$((failures + 1))
fi

if [ "$failures" -ne 0 ]; then
    echo "run-all: $failures failure(s); programs and logs in $work" >&2
    exit 1
fi
echo "run-all: all programs passed ($work)"
