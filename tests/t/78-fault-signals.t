#!/bin/sh
# Signals and interrupted writes. A program under a 1 kHz SIGALRM itimer
# whose handler has no SA_RESTART (its own blocking calls see EINTR) runs
# unchanged and fully traced: the writer thread blocks every signal, and the
# hooks make no blocking call. Then write(2) itself returns EINTR every
# other or third call, and short counts (tests/fault/vtfault.c): the trace
# still holds every event.
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
N=20000
export VRAMTRACE_SAMPLE_MS=0 VRAMTRACE_RING=1048576 VRAMTRACE_FLUSH_MS=1 FAULTPROG_PACE_US=2000

D=$TMP/itimer; mkdir $D
plain $TMP/plain $FP eintr $N
shimmed $TMP/out $D $FP eintr $N
unchanged $TMP/plain $TMP/out "1 kHz SIGALRM without SA_RESTART: program unchanged"
sed -n 's/^eintr: /#   with the shim: /p' $TMP/out.err
check "1 kHz SIGALRM: the program really was interrupted" grep -q 'eintr: [1-9][0-9]* alarms, [1-9]' $TMP/out.err
"$VT" dump $D/*.vtrace >$TMP/dump
is "$?" 0 "1 kHz SIGALRM: trace reads cleanly"
is "$(count_events $TMP/dump cudaMalloc "" 0)" $N "1 kHz SIGALRM: every allocation traced"
is "$(count_events $TMP/dump cudaFree "" 0)" $N "1 kHz SIGALRM: every free traced"

plain $TMP/plain $FP pairs $N
for fault in "VTFAULT_EINTR=2" "VTFAULT_EINTR=3 VTFAULT_SHORT=1" "VTFAULT_SHORT=1"; do
    D=$TMP/$(echo $fault | tr ' =' '__'); mkdir $D
    env $fault PRELOAD="$FAULT_PRELOAD" sh -c '. tests/t/lib.sh; . tests/fault/lib.sh; shimmed "$@"' - $TMP/out $D $FP pairs $N
    unchanged $TMP/plain $TMP/out "$fault: program unchanged"
    check "$fault: faults were injected ($(grep vtfault: $TMP/out.err))" grep -q 'vtfault: \(eintr=[1-9]\|.*short=[1-9]\)' $TMP/out.err
    "$VT" dump $D/*.vtrace >$TMP/dump
    is "$?" 0 "$fault: trace reads cleanly"
    is "$(grep -c '^event ' $TMP/dump)" $((2 * N)) "$fault: every event is in the trace"
    is "$(grep -c '^vramtrace:' $TMP/out.err)" 0 "$fault: nothing to say (the writer retried)"
done
done_testing
