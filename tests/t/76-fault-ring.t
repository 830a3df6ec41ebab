#!/bin/sh
# Events behind a free that has not returned. A release claims its ring slot
# before the real call (a free is ordered before the allocation that reuses
# its address), and the writer drains in order: a free still blocked in the
# driver at exit, or its thread cancelled inside it, hid every event made
# after it, uncounted ("1 allocs, 0 frees, 0 dropped"). At stop the slot is
# counted as dropped and the events behind it are written.
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
export VTSIM_SLOW_FREE_MS=1500

for how in blocked cancel; do
    if [ $how = cancel ] && [ -n "$SANITIZED" ]; then
        # ASan reports the cancelled thread's unwound stack (in the program
        # alone, without the shim): a sanitizer false positive.
        for i in 1 2 3 4 5; do skip "free cancelled at exit: $SANITIZED cannot follow pthread_cancel"; done
        continue
    fi
    D=$TMP/$how; mkdir $D
    arg=$([ $how = cancel ] && echo cancel)
    plain $TMP/$how.plain $FP slowfree 3000 $arg
    shimmed $TMP/$how.out $D $FP slowfree 3000 $arg
    unchanged $TMP/$how.plain $TMP/$how.out "free $how at exit: output unchanged"
    "$VT" dump $D/*.vtrace >$TMP/$how.dump
    is "$(count_events $TMP/$how.dump cudaMalloc 4096 0)" 3000 "free $how at exit: every allocation made after it is traced"
    is "$(count_events $TMP/$how.dump cudaFree)" 3001 "free $how at exit: every cudaFree traced (3000 and the context's)"
    is "$(sed -n 's/^end .* dropped=\([0-9]*\).*/\1/p' $TMP/$how.dump)" 1 "free $how at exit: the unreturned free counted as dropped"
    is "$(not_in $TMP/$how.out.err)" 1 "free $how at exit: stderr says 1 event not in the trace"
done
done_testing
