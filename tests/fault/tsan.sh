#!/bin/sh
# tsan.sh BUILD: ThreadSanitizer over the shim's multi-threaded paths, with
# BUILD made by `make B=BUILD SANITIZE=thread` (`make tsan` does both).
# Runs 16 threads of alloc/free pairs (tests/shim/paths threads, faultprog
# pairs) and the 16-thread soak through 10,000 stacks, and fails on any
# ThreadSanitizer report, printing each distinct one once.
#
# Stacks on: the cached rule walk (stacks.c) serves these stacks without
# libunwind, whose per-thread cache destructor used to run at thread exit
# after TSan had torn the thread down and crash inside TSan (uninstrumented
# libunwind, not a shim race); the runs were VRAMTRACE_DEPTH=0 then. Now the
# rule cache, the stack tree and its per-thread caches are raced for real.
# No fork here: TSan does not support fork in a multi-threaded process.
# Exit racing allocating threads (faultprog exitrace) and a module walk
# (exitwalk) run here too, and the other ends of a trace: exec, _exit, a
# failed exec, a cancelled thread (faultprog image, cancel), abort and a
# raw exit after a failed request (faultprog oom); failed graph launches
# and samples inside a capture (drvcases graph-oom, graph-global).
set -u
B=$1
SIM=$B/sim
out=$(mktemp -d "${TMPDIR:-/tmp}/vt-tsan.XXXXXX")
trap 'rm -rf "$out"' EXIT
export TSAN_OPTIONS="halt_on_error=0 exitcode=66 second_deadlock_stack=1 history_size=4"
status=0 n=0
run() {
    n=$((n + 1))
    D=$out/$n; mkdir $D
    env LD_LIBRARY_PATH=$SIM LD_PRELOAD=$B/libvramtrace.so VRAMTRACE_DIR=$D \
        VRAMTRACE_RING=1048576 timeout 600 "$@" >$D/out 2>$D/err
    rc=$?
    races=$(grep -c 'WARNING: ThreadSanitizer' $D/err)
    echo "tsan: $* -> exit $rc, $races reports"
    if [ "$races" != 0 ] || [ $rc != 0 ]; then
        status=1
        # One line per distinct report: its kind and the first frame of
        # each of the two accesses.
        awk '/WARNING: ThreadSanitizer/ { kind = $0; sub(/ \(pid=.*/, "", kind); f = ""; k = 0 }
             /^    #0 / && ++k <= 2 { f = f " | " $2 " " $3 }
             /^SUMMARY/ { print "    " kind f }' $D/err | sort | uniq -c
    fi
}
run $B/tests/shim/paths threads 16
run $B/tests/fault/faultprog pairs 3000 16
run $B/tests/fault/faultprog soak 200000 16
# exit while 4 threads allocate (the ring closed under them, their calls
# parked), and exit while another thread sits in a module walk
run env FAULTPROG_COUNT_FILE=$out/counts $B/tests/fault/faultprog exitrace 4 200
run env VRAMTRACE_FLUSH_MS=1000 $B/tests/fault/faultprog exitwalk 5000
run env VRAMTRACE_FLUSH_MS=1000 $B/tests/fault/faultprog exitwalk 5000 early
# the trace ended by exec and by _exit with two threads allocating, an
# exec that fails while they go on, and threads cancelled inside the shim
run $B/tests/fault/faultprog image 100 execv
run $B/tests/fault/faultprog image 100 missing
run sh -c "$B/tests/fault/faultprog image 100 _exit; test \$? = 3"
run $B/tests/fault/faultprog cancel start
run $B/tests/fault/faultprog cancel $B/tests/fault
# a failed request written before it returns, then abort (and a SIGABRT
# handler jumping out of it) or a raw exit
run sh -c "VTSIM_DEVICES=4GiB $B/tests/fault/faultprog oom abort; test \$? = 134"
run env VTSIM_DEVICES=4GiB $B/tests/fault/faultprog oom longjmp
run sh -c "VTSIM_DEVICES=4GiB $B/tests/fault/faultprog oom exit_group; test \$? = 1"
# failed graph launches written before they return, and the shim's samples
# inside a global-mode capture
run $B/tests/fault/drvcases graph-oom
run env VRAMTRACE_SAMPLE_MS=1 $B/tests/fault/drvcases graph-global
[ $status = 0 ] && echo "tsan: no reports" || echo "tsan: FAILED"
exit $status
