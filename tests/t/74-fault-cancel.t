#!/bin/sh
# pthread_cancel of a thread while it waits inside the shim. A condition
# wait is a cancellation point, and a thread cancelled there goes with the
# wait's mutex taken back. Cancelled inside the process's first CUDA call
# (start-up waits for the writer thread to open the trace, which another
# thread's module walk held up 1 s), it left the writer's lock held and
# the state STARTING: the main thread's next call waited for ever.
# Cancelled inside dlclose (which first waits for the writer to name the
# library's frames; VTFAULT_SLOW_PHDR_MS holds that naming up), it left
# the same lock held: exit waited for ever. Cancelled in a fork that waits
# for another thread's start-up, it left a lock of the program's own fork
# handlers held. Now none of these waits can be cancelled; the cancel lands at the thread's next cancellation point, as
# without the shim.
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
export VRAMTRACE_SAMPLE_MS=0

plain $TMP/plain-start timeout 30 $FP cancel start
mkdir $TMP/start
shimmed $TMP/out-start $TMP/start timeout 30 $FP cancel start
unchanged $TMP/plain-start $TMP/out-start "cancelled in the first CUDA call: the program goes on as without the shim (exit $(cat $TMP/out-start.rc))"
f=$(ls $TMP/start/*.vtrace 2>/dev/null | head -1)
is "$("$VT" dump "$f" 2>/dev/null | grep -c '^end ')" 1 "cancelled in the first CUDA call: the trace ends with END"

# Cancelled in a fork that waits for another thread's start-up: the fork
# handlers of the program's own, registered after the shim's, had taken
# their lock in their prepare handler, and the thread went with it: the
# program's next fork waited for ever. (Not under a sanitizer: its
# allocator is not fork-safe in a threaded process, tests/fault/lib.sh.)
case "${VT_SANITIZE:-}" in
*thread*|*address*) skip "fork in a threaded process under a sanitizer";;
*)
    plain $TMP/plain-fork timeout 30 $FP cancel fork
    mkdir $TMP/fork
    shimmed $TMP/out-fork $TMP/fork timeout 30 $FP cancel fork
    unchanged $TMP/plain-fork $TMP/out-fork "cancelled in a fork's wait for start-up: the program forks again as without the shim (exit $(cat $TMP/out-fork.rc))";;
esac

DIR=$B/tests/fault
plain $TMP/plain-dlclose timeout 30 $FP cancel $DIR
mkdir $TMP/dlclose
PRELOAD="${VT_SAN_RT:+$VT_SAN_RT }$VTFAULT $SHIM" VTFAULT_SLOW_PHDR_MS=1000 \
    shimmed $TMP/out-dlclose $TMP/dlclose timeout 30 $FP cancel $DIR
unchanged $TMP/plain-dlclose $TMP/out-dlclose "cancelled in dlclose: the program goes on and exits as without the shim (exit $(cat $TMP/out-dlclose.rc))"
check "cancelled in dlclose: the writer's naming was held up (libvtfault slowed a walk)" \
    grep -q 'slow_walks=[1-9]' $TMP/out-dlclose.err
done_testing
