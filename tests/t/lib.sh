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
nok() { T=$((T+1)); FAILED=$((FAILED+1)); echo "not ok $T - $*"; }
check() { desc=$1; shift; if "$@"; then ok "$desc"; else nok "$desc"; fi; }
# is GOT WANT DESC: exact comparison, prints both on failure.
is() { if [ "$1" = "$2" ]; then ok "$3"; else nok "$3"; echo "#   got '$1', want '$2'"; fi; }
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
