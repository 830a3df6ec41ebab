# Shared helpers for the TAP scenario scripts (sourced, not run).
# Paths are relative to the repository root, where prove runs.
set -u
ROOT=$(pwd)
B=${VT_B:-$ROOT/build}
SHIM=$B/libvramtrace.so
# What LD_PRELOAD gets wherever a script runs the shim: in a sanitized
# build the sanitizer runtime goes first (tests/tests.mk sets VT_SAN_RT).
SHIM_PRELOAD=${VT_SAN_RT:+$VT_SAN_RT }$SHIM
VT=$B/vramtrace
SIM=$B/sim
T=0
FAILED=0
ok() { T=$((T+1)); echo "ok $T - $*"; }
# A failure is said on stderr too, which prove shows without -v: a flake in
# CI's log then says what it got, not only its number.
nok() { T=$((T+1)); FAILED=$((FAILED+1)); echo "not ok $T - $*"; echo "# failed $T - $*" >&2; }
check() { desc=$1; shift; if "$@"; then ok "$desc"; else nok "$desc"; fi; }
# says FILE PATTERN: FILE's text, its line breaks and runs of spaces
# folded (the report wraps its sentences), matches PATTERN (grep's).
says() { tr '\n' ' ' <"$1" | tr -s ' ' | grep -q "$2"; }
# is GOT WANT DESC: exact comparison, prints both on failure (stderr too).
is() { if [ "$1" = "$2" ]; then ok "$3"; else nok "$3"; echo "#   got '$1', want '$2'" | tee /dev/stderr; fi; }
done_testing() { echo "1..$T"; [ $FAILED -eq 0 ]; }
tmpdir() { mktemp -d "${TMPDIR:-/tmp}/vt-test.XXXXXX"; }

# Program events in a `vramtrace dump --stacks` output (shim samples left out).
# count_events DUMP API [SIZE [RESULT]]
count_events() {
    awk -v api="$2" -v size="${3:-}" -v res="${4:-}" '
        $1 == "event" && $0 !~ /flags=[^ ]*sample/ {
            a = ""; s = ""; r = ""
            for (i = 2; i <= NF; i++) {
                split($i, kv, "=")
                if (kv[1] == "api") a = kv[2]
                if (kv[1] == "size") s = kv[2]
                if (kv[1] == "result") r = kv[2]
            }
            if (a == api && (size == "" || s == size) && (res == "" || r == res)) n++
        }
        END { print n + 0 }' "$1"
}
# The stack lines printed under the first event with this api and size.
stack_of() {
    awk -v api="$2" -v size="$3" '
        $1 == "event" { inside = ($0 ~ (" api=" api " ") && $0 ~ (" size=" size " ")) && !done; if (inside) done = 1; next }
        inside && /^ / { print; next }
        { inside = 0 }' "$1"
}
# Runs a program under the shim into directory $1 with the simulated GPU.
under_shim() {
    dir=$1; shift
    LD_LIBRARY_PATH=$SIM${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} LD_PRELOAD="$SHIM_PRELOAD" VRAMTRACE_DIR=$dir "$@"
}
# A GPU probe under the shim, into directory $1: a process that asks for the
# device count and free memory and allocates nothing, as each of ollama's
# discovery subprocesses does.
gpu_probe() {
    under_shim "$1" python3 -c '
import ctypes
rt = ctypes.CDLL("libcudart.so.13")
n = ctypes.c_int(); f = ctypes.c_size_t(); t = ctypes.c_size_t()
rt.cudaGetDeviceCount(ctypes.byref(n))
rt.cudaMemGetInfo(ctypes.byref(f), ctypes.byref(t))
'
}

# vtgen lines of a llama-shaped process for tests of ggml's placement:
# ggml_header PID ARGV TOTAL FREE [nodevice]: the process, its device (left
# out with nodevice), a module and two stacks (1: the CUDA buffer
# allocator, 2: llama_kv_cache under it).
ggml_header() {
    echo "process pid=$1 ppid=1 exe=/usr/bin/llama-cli argv=$2 host=box start=1000000000"
    [ "${5:-}" = nodevice ] ||
        echo "device 0 total=$3 free=$4 name=\"NVIDIA Sim\" uuid=0123456789abcdef0123456789abcdef t=0"
    echo 'module 0 base=0x400000 size=0x100000 path=/usr/bin/llama-cli'
    echo 'frame 0x401000 module=0 offset=0x1000 function=ggml_backend_cuda_buffer_type_alloc_buffer'
    echo 'frame 0x402000 module=0 offset=0x2000 function=llama_kv_cache::llama_kv_cache'
    echo 'stack 1 parent=0 ip=0x401000'
    echo 'stack 2 parent=1 ip=0x402000'
}
# ggml_blocks BUFFER FIRST LAST DATA: blocks FIRST..LAST, 4 weights of
# 128 MiB each, placed from address DATA on.
ggml_blocks() {
    b=$1 i=$2 d=$4
    while [ "$i" -le "$3" ]; do
        for w in attn_q attn_k attn_v ffn_up; do
            echo "ggml_tensor t=1500000 buffer=$b data=$d nbytes=128MiB name=blk.$i.$w.weight"
            d=$((d + 128 * 1048576))
        done
        i=$((i + 1))
    done
}
# ggml_kv BUFFER FIRST LAST DATA MIB: MIB of K and MIB of V a layer.
ggml_kv() {
    b=$1 i=$2 d=$4
    while [ "$i" -le "$3" ]; do
        echo "ggml_tensor t=2500000 buffer=$b data=$d nbytes=${5}MiB name=cache_k_l$i"
        echo "ggml_tensor t=2500000 buffer=$b data=$((d + $5 * 1048576)) nbytes=${5}MiB name=cache_v_l$i"
        d=$((d + 2 * $5 * 1048576)) i=$((i + 1))
    done
}
# ended_by: the first process's trace.ended_by in the report JSON on stdin.
ended_by() { python3 -c 'import json, sys; print(json.load(sys.stdin)["processes"][0]["trace"]["ended_by"])'; }
# views_disagree DIR: every view over the traces of DIR (report --json,
# top --once, serve --once, the HTML page, the --fail-on-spill gate with and
# without --accept-offload, diff --json of DIR against itself), compared by tests/tools/views_agree.py: prints
# each disagreement on a verdict, a layer count, a peak, the least free
# memory or the number of processes; nothing when they agree. The views are left in
# DIR.views.* (the report's JSON in DIR.views.json).
views_disagree() {
    v=$1.views
    "$VT" report --json "$1" >"$v.json" 2>/dev/null
    "$VT" top --once "$1" >"$v.top" 2>/dev/null
    "$VT" serve --once "$1" >"$v.om" 2>/dev/null
    "$VT" report --html "$v.html" "$1" 2>/dev/null
    "$VT" report --fail-on-spill "$1" >/dev/null 2>&1; vgate=$?
    "$VT" report --fail-on-spill --accept-offload "$1" >/dev/null 2>&1; vaccept=$?
    "$VT" diff --json "$1" "$1" >"$v.diff" 2>/dev/null
    python3 tests/tools/views_agree.py "$v.json" "$v.top" "$v.om" "$v.html" $vgate $vaccept "$v.diff"
}
