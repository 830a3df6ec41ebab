#!/bin/sh
# A fork while another thread starts the shim: in a process that has made
# no CUDA call, one thread makes the first (cuMemGetInfo_v2) while the main
# thread forks, at a delay that differs each round; the child makes one
# cuMemGetInfo_v2 and exits. The fork handlers were registered only at the
# end of start-up: a child forked before that found the shim STARTING, with
# no thread left to finish it, and spun for ever in start_once (52, 89, 1
# and 100 of 100 children over four runs). Now they are registered before
# the state leaves IDLE, and fork waits (bounded) for a start-up in progress
# to end, so each child finds the shim started or not and traces its own
# call. Every process's trace holds its one call.
. tests/t/lib.sh
. tests/fault/lib.sh
# Not under a sanitizer: TSan does not support fork in a threaded process,
# and GCC 12's ASan does not lock its allocator across fork (libasan has no
# fork interceptor), so a child forked while a parent thread refills a
# size class or its free quarantine finds that lock held: the child's first
# thread (the shim's writer) then waits in ASan's own calloc for ever. Seen
# in 2-3 of 40 children; glibc's malloc takes its arena locks across fork.
case "${VT_SANITIZE:-}" in
*thread*|*address*)
    echo "1..0 # SKIP the sanitizer's allocator is not fork-safe in a threaded process"
    exit 0;;
esac
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
R=40
plain $TMP/plain timeout 300 $FP forkstart $R
mkdir $TMP/d
shimmed $TMP/out $TMP/d timeout 300 $FP forkstart $R
unchanged $TMP/plain $TMP/out "fork during start-up, $R rounds: every child returns ($(cat $TMP/out))"
set -- $TMP/d/*.vtrace
is "$#" $((2 * R)) "fork during start-up: $((2 * R)) traces, one per process"
bad=0
for f; do
    in=$(all_events $f)
    dropped=$("$VT" dump $f | sed -n 's/^end .* dropped=\([0-9]*\).*/\1/p')
    [ "$((in + ${dropped:-99}))" = 1 ] || { bad=$((bad + 1)); echo "# $f: $in in the trace, ${dropped:-no END} dropped"; }
done
is "$bad" 0 "fork during start-up: each trace is complete and holds its process's one call"
done_testing
