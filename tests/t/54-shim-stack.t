#!/bin/sh
# The shim's stack use: CUDA calls on a thread whose stack is a mapping of
# exactly N KiB with a guard page below (tests/shim/smallstack.c), as
# fibers and coroutines give them. The stack's high-water mark with and
# without the shim bounds what the shim adds: on the process's first CUDA
# call (the shim starts its writer there) and on later ones. The bounds are
# the ones docs/robustness.md states.
. tests/t/lib.sh
P=$B/tests/shim/smallstack
[ -x "$P" ] || { echo "1..0 # SKIP $P not built (make test-bins)"; exit 0; }
if [ -n "${VT_SANITIZE:-}" ]; then
    echo "1..0 # SKIP sanitizers change every frame's size"
    exit 0
fi
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT
used() { sed -n 's/.*, used \([0-9]*\) bytes$/\1/p'; }
run() { # MODE KIB [shim]
    if [ -n "${3:-}" ]; then
        LD_LIBRARY_PATH=$SIM VRAMTRACE_DIR=$D LD_PRELOAD="$SHIM_PRELOAD" "$P" "$2" "$1" 2>/dev/null
    else
        LD_LIBRARY_PATH=$SIM "$P" "$2" "$1" 2>/dev/null
    fi
}
for mode in first later; do
    plain=$(run $mode 256 | used)
    shim=$(run $mode 256 shim | used)
    case $mode in first) bound=8192 ;; later) bound=6144 ;; esac
    if [ -n "$plain" ] && [ -n "$shim" ] && [ $((shim - plain)) -le $bound ]; then
        ok "$mode CUDA call: the shim adds $((shim - plain)) bytes of stack (bound $bound; $plain without it)"
    else
        nok "$mode CUDA call: the shim adds $((${shim:-0} - ${plain:-0})) bytes of stack (bound $bound)"
    fi
done
# The first call on a 32 KiB stack: the simulated driver's own start-up
# needs ~21 KB of it; with the shim it must still fit.
run first 32 shim >/dev/null
is "$?" 0 "first CUDA call on a 32 KiB stack, under the shim"
# Later calls on a 16 KiB stack (folly's fiber default).
run later 16 shim >/dev/null
is "$?" 0 "later CUDA calls on a 16 KiB stack, under the shim"
set -- $D/*.vtrace
check "the traces were written" test -s "$1"
done_testing
