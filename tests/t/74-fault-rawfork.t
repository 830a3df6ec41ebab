#!/bin/sh
# A child made without the fork handlers (glibc's _Fork, a raw clone
# system call) inherits the shim's state but not its writer thread: it
# must exit without waiting for that thread (it hung in exit()), and must
# not write into the parent's trace. The parent's trace stays complete.
. tests/t/lib.sh
P=$B/tests/shim/rawfork
[ -x "$P" ] || { echo "1..0 # SKIP $P not built (make test-bins)"; exit 0; }
if [ "${VT_SANITIZE:-}" = thread ]; then
    echo "1..0 # SKIP TSan does not support a child of a threaded process without fork handlers"
    exit 0
fi
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT
for how in _Fork clone; do
    for child in "" cuda; do
        T_DIR=$D/$how$child
        mkdir -p $T_DIR
        out=$(LD_LIBRARY_PATH=$SIM VRAMTRACE_DIR=$T_DIR LD_PRELOAD="$SHIM_PRELOAD" timeout 60 "$P" $how $child 2>&1)
        is "$? $out" "0 child exited 0" "$how${child:+ with a CUDA call in the child}: the child exits, no hang"
        set -- $T_DIR/*.vtrace
        is "$#" 1 "$how${child:+ (cuda)}: one trace, the parent's"
        got=$("$VT" report --json $T_DIR 2>/dev/null | python3 -c 'import json, sys
p = json.load(sys.stdin)["processes"][0]
print(p["trace"]["complete"], p["events"]["allocs"], p["events"]["frees"])' 2>&1)
        is "$got" "True 2 2" "$how${child:+ (cuda)}: the parent's trace is complete: its own 2 allocations, nothing of the child's"
    done
done
done_testing
