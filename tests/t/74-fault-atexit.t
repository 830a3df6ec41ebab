#!/bin/sh
# Frees made at exit by handlers the program registered before its first
# CUDA call (atexit, and C++ static destructors, which run the same way)
# are traced: the shim finishes the trace from its ELF destructor, after
# every such handler, not from an atexit handler of its own registered
# later (which ran first, and left "live at end 96 MiB" for a program that
# freed everything). tests/shim/atexitfree.c.
. tests/t/lib.sh
P=$B/tests/shim/atexitfree
[ -x "$P" ] || { echo "1..0 # SKIP $P not built (make test-bins)"; exit 0; }
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT
LD_LIBRARY_PATH=$SIM VRAMTRACE_DIR=$D LD_PRELOAD="$SHIM_PRELOAD" "$P"
is "$?" 0 "the program exits 0"
got=$("$VT" report --json $D 2>/dev/null | python3 -c 'import json, sys
p = json.load(sys.stdin)["processes"][0]
print(p["trace"]["complete"], p["events"]["allocs"], p["events"]["frees"], p["devices"][0]["live_bytes"])' 2>&1)
is "$got" "True 2 2 0" "both frees made by the atexit handler are in the trace; nothing live at the end"
done_testing
