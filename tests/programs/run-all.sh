#!/usr/bin/env bash
# Builds simcuda, simcupti and the test programs, runs every program against simcuda (no tracer)
# and checks its output and exit status against the values documented in README.md.
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

if [ ! -f "$inc/cupti.h" ] || [ ! -f "$inc/crt/host_defines.h" ]; then
    echo "run-all: $inc lacks the CUPTI headers (cupti.h, crt/): run tools/setup-cuda.sh" >&2
    exit 2
fi
cargo build -q -p simcuda -p simcupti --manifest-path "$root/Cargo.toml"
mkdir -p "$work/lib" "$work/bin"
ln -sf "$target/debug/libcuda.so" "$work/lib/libcuda.so.1"
ln -sf "$target/debug/libcuda.so" "$work/lib/libcuda.so"
ln -sf "$target/debug/libcupti.so" "$work/lib/libcupti.so.13"
ln -sf "$target/debug/libcupti.so" "$work/lib/libcupti.so"

cflags=(-O1 -Wall -Werror -I"$inc")
for p in direct threads fork reexec exits killme errors profile closefds; do
    gcc "${cflags[@]}" -pthread "$here/$p.c" -o "$work/bin/$p" -L"$work/lib" -lcuda
done
gcc "${cflags[@]}" "$here/ranges.c" -o "$work/bin/ranges" -L"$work/lib" -lcuda -ldl
for p in procaddr dlsym deepbind dlsym_missing; do
    gcc "${cflags[@]}" "$here/$p.c" -o "$work/bin/$p" -ldl
done
# The plugin for deepbind and dlsym_missing: lazily bound calls only; with a pointer slot, every
# slot bound at load and read-only after; the same with its read-only pages sealed (mseal).
gcc "${cflags[@]}" -shared -fPIC -Wl,-z,lazy "$here/deepbind_plugin.c" \
    -o "$work/bin/libdeepbind_lazy.so" -L"$work/lib" -lcuda -ldl
gcc "${cflags[@]}" -shared -fPIC -DWITH_POINTER -Wl,-z,now -Wl,-z,relro "$here/deepbind_plugin.c" \
    -o "$work/bin/libdeepbind_now.so" -L"$work/lib" -lcuda -ldl
gcc "${cflags[@]}" -shared -fPIC -DWITH_POINTER -DSEAL_RELRO -Wl,-z,now -Wl,-z,relro \
    "$here/deepbind_plugin.c" -o "$work/bin/libdeepbind_sealed.so" -L"$work/lib" -lcuda -ldl
gcc "${cflags[@]}" -pthread "$here/cupti_client.c" -o "$work/bin/cupti_client" -L"$work/lib" \
    -lcupti -lcuda
gcc "${cflags[@]}" "$here/pcsampling_client.c" -o "$work/bin/pcsampling_client" -L"$work/lib" \
    -lcupti -lcuda
# The simulated CUDA runtime, beside the simulated driver, and a program of it.
gcc "${cflags[@]}" -shared -fPIC -Wl,-soname,libcudart.so.13 "$here/simcudart.c" \
    -o "$work/lib/libcudart.so.13" -ldl -pthread
ln -sf libcudart.so.13 "$work/lib/libcudart.so"
gcc "${cflags[@]}" "$here/runtime.c" -o "$work/bin/runtime" -L"$work/lib" -lcudart -lcuda
# cupti_profiler_host.h includes <string>: this client is compiled as C++.
g++ -x c++ "${cflags[@]}" "$here/rangeprof_client.c" -o "$work/bin/rangeprof_client" \
    -L"$work/lib" -lcupti -lcuda
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
expect deepbind-now 0 "deepbind ok mode=now early=0 calls=13" -- "$b/deepbind" now "$b/libdeepbind_now.so" 10
expect deepbind-lazy 0 "deepbind ok mode=lazy early=0 calls=12" -- "$b/deepbind" lazy "$b/libdeepbind_lazy.so" 10
expect deepbind-sealed 0 "deepbind ok mode=now early=0 calls=13" -- "$b/deepbind" now "$b/libdeepbind_sealed.so" 10
expect deepbind-load 0 "deepbind ok mode=load calls=1" -- env DEEPBIND_EARLY=3 "$b/deepbind" load "$b/libdeepbind_now.so"
expect deepbind-load-quiet 0 "deepbind ok mode=load calls=0" -- env DEEPBIND_EARLY=3 "$b/deepbind" load "$b/libdeepbind_now.so" quiet
expect deepbind-early 0 "deepbind ok mode=lazy early=3 calls=12" -- env DEEPBIND_EARLY=3 "$b/deepbind" lazy "$b/libdeepbind_lazy.so" 10
und() { echo "found=0 error=$1: undefined symbol: $2"; }
expect dlsym_missing 0 "default cuGraphCreate $(und "$b/dlsym_missing" cuGraphCreate)
default cuDriverGetVersion $(und "$b/dlsym_missing" cuDriverGetVersion)
default cuGraphCreate $(und "$b/dlsym_missing" cuGraphCreate)
next cuGraphCreate $(und "$b/dlsym_missing" cuGraphCreate)
program cuGraphCreate $(und "$b/dlsym_missing" cuGraphCreate)
driver cuGraphCreate $(und "$work/lib/libcuda.so.1" cuGraphCreate)
plugin cuGraphCreate $(und "$b/libdeepbind_lazy.so" cuGraphCreate)
default cuDriverGetVersion $(und "$b/dlsym_missing" cuDriverGetVersion)
next cuDriverGetVersion $(und "$b/dlsym_missing" cuDriverGetVersion)
program cuDriverGetVersion $(und "$b/dlsym_missing" cuDriverGetVersion)
driver cuDriverGetVersion found=1 error=(none)
plugin cuDriverGetVersion found=1 error=(none)
default cuPluginOwn $(und "$b/dlsym_missing" cuPluginOwn)
plugin cuPluginOwn found=1 error=(none)
global cuGraphCreate $(und "$b/dlsym_missing" cuGraphCreate)
global cuDriverGetVersion found=1 error=(none)
dlsym_missing ok calls=1" -- "$b/dlsym_missing" "$b/libdeepbind_lazy.so"
expect threads 0 "threads ok threads=4 per_thread=1000 calls=4036" -- "$b/threads"
expect threads-8x5000 0 "threads ok threads=8 per_thread=5000 calls=40068" -- "$b/threads" 8 5000
expect fork 0 "fork child ok child_calls=31
fork parent ok parent_calls=26 child_status=0" -- "$b/fork"
expect reexec 0 "reexec first ok calls=11
reexec second ok same_pid=1 calls=21" -- "$b/reexec" 10 20 0
expect exits-return 0 "exits mode=return calls=106" -- "$b/exits" return
expect closefds-low 0 "closefds mode=low fd=3 same=1 calls=2006" -- "$b/closefds" low "$work/closefds-low.txt" 1000
expect closefds-all 0 "closefds mode=all fd=3 same=1 calls=2006" -- "$b/closefds" all "$work/closefds-all.txt" 1000
expect exits-_exit 4 "exits mode=_exit calls=106" -- "$b/exits" _exit
expect exits-sigterm 143 "exits mode=sigterm calls=106" -- "$b/exits" sigterm
expect exits-sigint-handler 0 "handled
exits mode=sigint-handler calls=116" -- "$b/exits" sigint-handler
expect errors 0 "errors ok failed=22 calls=43" -- env SIMCUDA_FAIL="$fail_spec" "$b/errors"
expect errors-unset 2 "" -- "$b/errors"
expect profile 0 "profile ok first=21 second=7 calls=35" -- "$b/profile"
expect runtime 0 "runtime ok value=7 runtime_calls=16 driver_calls=2" -- "$b/runtime"
expect ranges 0 "ranges ok run=0 calls=28" -- "$b/ranges"
rm -f "$work/ranges-count"
expect ranges-run0 10 "ranges ok run=0 calls=28" -- "$b/ranges" same "$work/ranges-count"
expect ranges-run1 11 "ranges ok run=1 calls=32" -- "$b/ranges" extra-range "$work/ranges-count"
expect cupti_client 0 "streams legacy=2 s1=8 s2=9 per_thread=10
memcpy corr=1 HtoD pageable->device async=0 bytes=4096 start=15000 end=15410 dev=0 ctx=1 stream=2
memcpy corr=2 HtoD pinned->device async=1 bytes=4096 start=16410 end=16820 dev=0 ctx=1 stream=8
memset corr=3 value=0 device async=0 bytes=4096 start=17410 end=17820 dev=0 ctx=1 stream=2
kernel corr=4 name=vecadd_f32 start=18410 end=20410 completed=20410 dev=0 ctx=1 stream=8 grid=4,1,1 block=256,1,1 shared=0/0 regs=32 grid_id=1
memcpy corr=5 DtoH device->pinned async=1 bytes=4096 start=20410 end=20820 dev=0 ctx=1 stream=8
kernel corr=6 name=fill_u32 start=21820 end=22320 completed=22320 dev=0 ctx=1 stream=10 grid=2,1,1 block=512,1,1 shared=0/64 regs=32 grid_id=2
memset corr=7 value=90 device async=1 bytes=4096 start=22820 end=23230 dev=0 ctx=1 stream=9
memcpy corr=8 DtoD device->device async=0 bytes=4096 start=23820 end=24230 dev=0 ctx=1 stream=2
buffer 1: 8 records, 992 bytes
memcpy corr=9 HtoH pinned->pageable async=1 bytes=256 start=24820 end=24846 dev=0 ctx=1 stream=9
memcpy corr=10 DtoH device->pageable async=0 bytes=4096 start=25820 end=26230 dev=0 ctx=1 stream=2
buffer 2: 2 records, 192 bytes
external kind=3 id=42 corr=11
kernel corr=11 name=empty start=-1 end=-1 completed=-1 dev=0 ctx=1 stream=9 grid=1,1,1 block=32,1,1 shared=0/0 regs=32 grid_id=3
driver cbid=307 corr=11 start=27230 end=28230 result=0
buffer 3: 3 records, 280 bytes
driver cbid=126 corr=12 start=28230 end=29230 result=0
buffer 4: 1 records, 40 bytes
cupti_client ok dropped=0 calls=36" -- "$b/cupti_client"
expect pcsampling_client 0 "context created
stall reasons 9: 0 14 15 20 21 28 30 36 1
smsp__pcsamp_warps_issue_stalled_long_scoreboard
enabled ctx#0 period=9 hw=536870912
getdata pcs=3 remaining=1 total=268 dropped=0 non_user=0
  pc empty+0 fn=3 corr=0 14:20 15:10 28:2 30:24
  pc empty+32 fn=3 corr=0 14:40 15:20 28:2 30:18
  pc empty+64 fn=3 corr=0 14:60 15:30 28:2 30:12
getdata pcs=1 remaining=0 total=0 dropped=0 non_user=0
  pc empty+96 fn=3 corr=0 14:80 15:40 28:2 30:6
context created
enabled ctx#1 period=9 hw=536870912
context destroy starting
destroyed pcs=2 remaining=2 total=134 dropped=0 non_user=0
  pc empty+0 fn=3 corr=0 14:10 28:1
  pc empty+32 fn=3 corr=0 14:20 28:1
disabled pcs=0 remaining=0 total=0 dropped=0 non_user=0
context destroy starting
pcsampling_client ok contexts=2 calls=16" -- "$b/pcsampling_client"
expect pcsampling_client-unsupported 0 "context created
enable not supported
context created
enable not supported
context destroy starting
context destroy starting
pcsampling_client ok contexts=2 calls=16" -- env SIMCUPTI_PC_SAMPLING=unsupported "$b/pcsampling_client"
expect rangeprof_client 0 "supported=3 architecture=3
chip=GH100 availability=64 bytes
config=160 bytes passes=2
profile 0: all_passes=1
gemm_tile: ranges=1 dropped=0
  range 0: 2500.00 4950.00 4331.25 53.95 347798.00
profile 1: all_passes=1
reduce_rows: ranges=1 dropped=0
  range 0: 1500.00 2970.00 2598.75 47.86 23387.00
session: ranges=2 dropped=1
  range 0: 1500.00 2970.00 2598.75 47.86 23387.00
  range 1: 2500.00 4950.00 4331.25 53.95 347798.00
user replay: passes=2 last_pass=1
user: ranges=1 dropped=0
  range step: 4000.00 7920.00 6930.00 68.54 452603.00
kernel records=10: gemm_tile=0 reduce_rows=0 reduce_rows=0 gemm_tile=0 empty=1000 empty=1000 gemm_tile=2500 reduce_rows=1500 gemm_tile=2500 reduce_rows=1500
rangeprof_client ok knob= calls=19" -- "$b/rangeprof_client"
for knob in privileges:35 busy:26 unsupported:27 mps:27; do
    k=${knob%:*} code=${knob#*:}
    supported=3 avail="availability=64 bytes"
    [ "$k" = unsupported ] && supported=1
    case $k in privileges | busy) avail="availability error $code" ;; esac
    expect "rangeprof_client-$k" 0 "supported=$supported architecture=$supported
chip=GH100 $avail
config=160 bytes passes=2
enable error $code
kernel records=1: gemm_tile=2500
rangeprof_client ok knob=$k calls=10" -- env SIMCUPTI_PROFILER="$k" "$b/rangeprof_client"
done

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
