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
# call. Every process's trace holds its one call. Waiting while the state
# said STARTING left a window: a fork whose prepare handler found the
# state IDLE went on while another thread began start-up (79 traces of 80,
# about 1 run in 40 under load); start-up and fork now exclude each other
# with a lock.
. tests/t/lib.sh
. tests/fault/lib.sh
skip_fork_in_threads_under_sanitizer
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
R=40
plain $TMP/plain timeout 300 $FP forkstart $R
mkdir $TMP/d
shimmed $TMP/out $TMP/d timeout 300 $FP forkstart $R
unchanged $TMP/plain $TMP/out "fork during start-up, $R rounds: every child returns ($(cat $TMP/out))"
set -- $TMP/d/*.vtrace
is "$#" $((2 * R)) "fork during start-up: $((2 * R)) traces, one per process"
# (Missing one now and then: what the shim said, and which processes wrote,
# for the next time it happens.)
[ "$#" = $((2 * R)) ] || { sed 's/^/#   stderr: /' $TMP/out.err; ls $TMP/d | tr '\n' ' ' | sed 's/^/#   traces: /'; echo; } >&2
bad=0
for f; do
    in=$(all_events $f)
    dropped=$("$VT" dump $f | sed -n 's/^end .* dropped=\([0-9]*\).*/\1/p')
    [ "$((in + ${dropped:-99}))" = 1 ] || { bad=$((bad + 1)); echo "# $f: $in in the trace, ${dropped:-no END} dropped"; }
done
is "$bad" 0 "fork during start-up: each trace is complete and holds its process's one call"
done_testing
