#!/bin/sh
# The program's descriptors are the program's: one that closes every fd
# above 2 (close_range) or dup2()s its own file over all of them after its
# first CUDA call must find its file holding exactly what it wrote, and the
# trace must still hold every allocation (the shim's fd lives high and is
# checked to be the trace before every write, and reopened by path when it
# is not). tests/shim/closefds.c.
. tests/t/lib.sh
P=$B/tests/shim/closefds
[ -x "$P" ] || { echo "1..0 # SKIP $P not built (make test-bins)"; exit 0; }
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT
for how in close_range dup2; do
    mkdir -p $D/$how
    out=$(VRAMTRACE_FLUSH_MS=5 LD_LIBRARY_PATH=$SIM VRAMTRACE_DIR=$D/$how LD_PRELOAD="$SHIM_PRELOAD" \
        "$P" $how $D/$how.own 4000 2>&1)
    is "$? $out" "0 $D/$how.own has 6 bytes" "$how: the program's own file holds exactly what it wrote"
    got=$("$VT" report --json $D/$how 2>/dev/null | python3 -c 'import json, sys
p = json.load(sys.stdin)["processes"][0]
print(p["trace"]["complete"], p["events"]["allocs"], p["events"]["frees"], p["events"]["dropped"])' 2>&1)
    is "$got" "True 4001 4001 0" "$how: the trace is complete with all 4001 allocations"
done
# The trace descriptor is none of 0-2 and far from the low numbers.
mkdir -p $D/fdnum
LD_LIBRARY_PATH=$SIM VRAMTRACE_DIR=$D/fdnum LD_PRELOAD="$SHIM_PRELOAD" python3 -c '
import ctypes, os
rt = ctypes.CDLL("libcudart.so.13")
p = ctypes.c_void_p()
rt.cudaMalloc(ctypes.byref(p), 1 << 20)
for f in os.listdir("/proc/self/fd"):
    try:
        if os.readlink("/proc/self/fd/" + f).endswith(".vtrace"):
            print(f)
    except OSError:
        pass
' >$D/fdnum.out 2>&1
n=$(head -1 $D/fdnum.out)
check "the trace fd is high ($n)" test "${n:-0}" -ge 64
done_testing
