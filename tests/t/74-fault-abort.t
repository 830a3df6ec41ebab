#!/bin/sh
# A process whose last act follows a failed request: ggml's CUDA_CHECK
# aborts when its pool's cudaMalloc fails mid-inference (GGML_ABORT ->
# abort()), a C program's assert() does the same, Go's os.Exit leaves
# through a raw exit_group (ollama's runner), a supervisor SIGKILLs. None
# runs the shim's destructor, and the trace lost its last flush interval,
# the failed request with it: the report said "NO GPU MEMORY USED up to
# the trace's last chunk" of a process that held 3 GiB and failed a 2 GiB
# request. Now abort() and __assert_fail end the trace first (END
# by=abort), and a failed device request is on disk before the call
# returns, so even a raw exit or SIGKILL right after it leaves it in the
# trace. A SIGABRT handler that jumps out of abort() leaves the process
# going on untraced, said once.
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
# No chunk goes out on its own: what the trace holds, the shim wrote
# because of the failure or the end.
export VRAMTRACE_SAMPLE_MS=0 VRAMTRACE_FLUSH_MS=10000 VTSIM_DEVICES=4GiB
GiB=1073741824

allocs_of() { "$VT" dump "$1" 2>/dev/null | grep -c "^event .*api=cudaMalloc .*size=$GiB .*result=0 "; }
failed_of() { "$VT" dump "$1" 2>/dev/null | grep -c "^event .*api=cudaMalloc .*size=$((2 * GiB)) .*result=2 "; }
end_by() { "$VT" dump "$1" 2>/dev/null | sed -n 's/^end t=[0-9]* events=[0-9]* dropped=0 .* by=\([a-z_]*\)$/\1/p'; }
# says DESC FILE PATTERN: PATTERN in FILE's text with its lines joined (the
# report wraps at 80 columns).
says() {
    if tr '\n' ' ' <"$2" | tr -s ' ' | grep -q "$3"; then ok "$1"; else nok "$1"; sed 's/^/#   /' "$2" | head -12; fi
}

# run HOW [fits]: the program with and without the shim; leaves the trace in $f.
run() {
    name=$1${2:+-$2}
    plain $TMP/plain-$name $FP oom "$@"
    mkdir $TMP/$name
    shimmed $TMP/out-$name $TMP/$name $FP oom "$@"
    unchanged $TMP/plain-$name $TMP/out-$name "$name: output and exit status ($(cat $TMP/out-$name.rc)) as without the shim"
    f=$(ls $TMP/$name/*.vtrace)
    "$VT" report $f >$TMP/report-$name 2>&1
}

for how in abort assert longjmp; do
    run $how
    is "$(allocs_of $f)/$(failed_of $f)" 3/1 "$how: the trace holds the three 1 GiB allocations and the failed 2 GiB one"
    is "$(end_by $f)" abort "$how: END, by=abort, nothing dropped"
    is "$("$VT" report --json $f 2>/dev/null | ended_by)" abort "$how: JSON trace.ended_by is abort"
    check "$how: the verdict is OUT OF MEMORY, tipped by the 2 GiB request" \
        grep -q "^  Tipped by: cudaMalloc of 2.00 GiB for unknown failed" $TMP/report-$how
    says "$how: the verdict is OUT OF MEMORY" $TMP/report-$how \
        "VERDICT: OUT OF MEMORY\. .* and the process allocated nothing after it: "
    check "$how: the report says the trace ends with the abort" \
        grep -q "^  The trace ends with the process aborting (abort(): SIGABRT) at [0-9<]* ms\.$" $TMP/report-$how
done
check "abort: a NOTE names the call" sh -c "'$VT' dump $TMP/abort/*.vtrace | grep -q '^note .* text=\"abort(): the process aborted (SIGABRT)\"'"
check "assert: a NOTE quotes the assertion" sh -c "'$VT' dump $TMP/assert/*.vtrace | grep -q '^note .* text=\"assertion failed: err == cudaSuccess && \\\\\"the pool.s allocation\\\\\" (tests/fault/faultprog.c:[0-9]*, mode_oom): the process aborted (SIGABRT)\"'"
# A SIGABRT handler that jumps out of abort(): the process goes on with
# its trace ended; its calls pass through at once, said once.
is "$(grep -c '^vramtrace: abort() returned to the program (a SIGABRT handler jumped out of it); the trace ended before it' $TMP/out-longjmp.err)" 1 \
   "longjmp: said once on stderr that the process goes on untraced"
slow=$(sed -n 's/^faultprog: slowest call after the abort \([0-9]*\) ms/\1/p' $TMP/out-longjmp.err)
check "longjmp: no call waits on the ended trace (slowest ${slow:-?} ms)" test "${slow:-9999}" -lt 500

# A raw exit or a SIGKILL right after the failure: no END, but the failure
# was written before the call returned.
for how in exit_group kill; do
    run $how
    is "$(allocs_of $f)/$(failed_of $f)" 3/1 "$how: the trace holds the three 1 GiB allocations and the failed 2 GiB one"
    is "$(end_by $f)" "" "$how: no END"
    check "$how: OUT OF MEMORY, tipped by the 2 GiB request" grep -q "^  Tipped by: cudaMalloc of 2.00 GiB for unknown failed" $TMP/report-$how
    says "$how: 'nothing after it' is said of the trace's chunks only" $TMP/report-$how \
        "VERDICT: OUT OF MEMORY\. .* and the process allocated nothing after it up to the trace's last chunk (no clean end):"
done

# Without a failure and without END, NO SPILL and the margin kept are said
# of the chunks only: a request after the last one may have failed. (An
# 8 GiB card: the 3 GiB stay above the 15% margin.)
VTSIM_DEVICES=8GiB VRAMTRACE_FLUSH_MS=50 run exit_group fits
is "$(allocs_of $f)/$(failed_of $f)" 3/0 "exit_group fits: the trace holds the three allocations"
says "exit_group fits: NO SPILL is said up to the trace's last chunk" $TMP/report-exit_group-fits \
    "VERDICT: NO SPILL up to the trace's last chunk: every device allocation in it succeeded within the card's free memory\. The trace has no clean end: whether a later request failed is unknown\."
check "exit_group fits: not the whole run's NO SPILL" sh -c "! grep -q 'VERDICT: NO SPILL\.' $TMP/report-exit_group-fits"
check "exit_group fits: the margin kept is said up to the trace's last chunk" \
    grep -q "^    Stayed above the 15% margin up to the trace's last chunk: " $TMP/report-exit_group-fits
# top's STATE: aborted where END says so; gone where there is no END and
# the process is no longer there.
check "abort: top says aborted" sh -c "'$VT' top --once $TMP/abort | grep -q ' aborted\$'"
check "kill: top says gone" sh -c "'$VT' top --once $TMP/kill | grep -q ' gone\$'"

# One truth in every view (report, top, serve, the HTML page, the gate,
# diff) for an abort, a raw exit after the failure, and one without it.
for d in abort exit_group exit_group-fits; do
    is "$(views_disagree $TMP/$d)" "" "$d: report, top, serve, the HTML page, the gate and diff agree"
done
done_testing
