#!/bin/sh
# A process image that ends without exit(): exec, _exit, quick_exit (glibc
# calls its own _exit after the at_quick_exit handlers). None runs exit
# handlers or the shim's destructor, and exec ends every thread, the
# writer's too. A process that allocated 100 MiB, with two threads making
# pairs beside it, and then exec'd within a flush interval left a trace
# with no event and no END, and the report said "NO GPU MEMORY USED. This
# process allocated nothing through CUDA." Now each exec function and
# _exit end the trace first, as exit does: the 100 allocations, a NOTE
# naming the call, END (which counts a free the exec caught inside the
# driver as a call not returned). An exec that fails leaves the process going on
# untraced, said once on stderr, with no call held up by the ended trace.
# (vfork children calling exec and _exit: 74-fault-vfork.)
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
# No chunk goes out on its own before the exec: what the trace holds is
# what the exec wrapper wrote.
export VRAMTRACE_SAMPLE_MS=0 VRAMTRACE_FLUSH_MS=10000
MiB=1048576

# first_trace DIR: the trace of the process that exec'd (the exec'd image,
# traced under the same pid, gets a name with a suffix).
first_trace() { ls "$1"/*.vtrace | grep -v '\.[0-9]*\.[0-9]*\.vtrace$' | head -1; }
allocs_of() { "$VT" dump "$1" 2>/dev/null | grep -c "^event .*api=cudaMalloc .*size=$MiB "; }
end_of() { "$VT" dump "$1" 2>/dev/null | sed -n 's/^end t=[0-9]* //p'; }
# end_whole DESC FILE BY: END is there, says the call that ended the
# image (BY: "by=exec", "by=_exit"), and the only calls it counts as lost
# are ones still inside the driver when the trace ended (the pair-making
# threads' frees, which the exec ends before they return).
end_whole() {
    end=$(end_of "$2")
    case "$end" in
    "events="*" lost=buffer_full:0,signal_handler_in_shim:0,call_not_returned:"*",not_written:0 $3") ok "$1 ($end)";;
    *) nok "$1"; echo "#   got '$end'";;
    esac
}
# quiet DESC ERRFILE: nothing on stderr but the count of those calls.
quiet() {
    if grep -v 'events not in .*, lost ([0-9]* call not returned at exit)$' "$2" | grep -q .; then
        nok "$1"; sed 's/^/#   /' "$2"
    else ok "$1"; fi
}

# ended HOW NOTE: runs the image ending by HOW with and without the shim;
# the trace must hold the 100 allocations, then a NOTE matching NOTE, then
# END. Leaves the trace's name in $f.
ended() {
    plain $TMP/plain-$1 $FP image 100 $1
    mkdir $TMP/$1
    shimmed $TMP/out-$1 $TMP/$1 $FP image 100 $1
    unchanged $TMP/plain-$1 $TMP/out-$1 "$1: arguments, environment, output and exit status ($(cat $TMP/out-$1.rc)) as without the shim"
    f=$(first_trace $TMP/$1)
    is "$(allocs_of $f)" 100 "$1: the trace holds the 100 allocations made before it"
    "$VT" dump $f >$TMP/dump-$1 2>&1
    check "$1: a NOTE names the call before END" grep -q "^note .* text=\"$2\"" $TMP/dump-$1
    by=$(case $1 in _*|quick_exit) echo _exit;; *) echo exec;; esac)
    end_whole "$1: END, by=$by, nothing lost but calls it cut short" $f by=$by
    # The report says how the allocations were still live at the end, and
    # JSON names the call.
    "$VT" report --leaks --wide $f >$TMP/leaks-$1 2>&1
    check "$1: the report says how the process ended while the allocations were live ($by)" \
        grep -q "live when the process $([ $by = exec ] && echo 'replaced its image (exec)' || echo 'exited through _exit')" $TMP/leaks-$1
    is "$("$VT" report --json $f | ended_by)" \
       "$by" "$1: JSON trace.ended_by is $by"
}

for how in execv execve execvp execvpe execl execle execlp fexecve execveat search; do
    ended $how '[a-z]* [^"]*: the trace ends at this call, which replaces the process image'
    # The functions that pass the environment on keep LD_PRELOAD: the new
    # image is traced in a file of its own.
    # "search": a PATH search of its own (an execv that fails, then one
    # that works, no CUDA call between) says nothing of the failure.
    case $how in execve|execvpe|execle|fexecve|execveat) want=1;; *) want=2;; esac
    is "$(ls $TMP/$how | wc -l)" $want "$how: $want trace(s)"
    quiet "$how: nothing said on stderr but that count" $TMP/out-$how.err
done

# The directory's report: the process that exec'd first, then the image
# it started (its trace is numbered after it for the same pid, and name
# order put it first).
# (JSON, whose argv is whole: the text cuts a long command line.)
is "$("$VT" report --json $TMP/execv 2>/dev/null | python3 -c 'import json, sys
print(" ".join(p["argv"][1] for p in json.load(sys.stdin)["processes"]))')" \
   "image shown" "execv: the report lists the process that exec'd, then the image it started"
"$VT" report $(first_trace $TMP/execv) >$TMP/report 2>&1
check "execv: the report's verdict reads the 100 MiB" grep -q "^VERDICT: NO SPILL" $TMP/report
check "execv: the report shows the peak" grep -q "peak 100.0 MiB" $TMP/report

for how in _exit _Exit quick_exit; do
    ended $how "$how(3): the process ended without exit handlers"
done

# An exec that fails: the process goes on. Its threads' calls must not
# wait for an end that is not coming (each waited 1 s), and it says once
# that it is no longer traced.
plain $TMP/plain-missing $FP image 100 missing
mkdir $TMP/missing
shimmed $TMP/out-missing $TMP/missing $FP image 100 missing
unchanged $TMP/plain-missing $TMP/out-missing "failed exec: the program goes on as without the shim"
is "$(grep -c 'exec /nonexistent/faultprog failed (No such file or directory); the trace ended before it' $TMP/out-missing.err)" 1 \
   "failed exec: said once on stderr"
slow=$(sed -n 's/^faultprog: slowest call after the failed exec \([0-9]*\) ms/\1/p' $TMP/out-missing.err)
check "failed exec: no call waits on the ended trace (slowest ${slow:-?} ms)" test "${slow:-9999}" -lt 500
f=$(first_trace $TMP/missing)
is "$(allocs_of $f)" 100 "failed exec: the trace holds the 100 allocations before it, and ends there"
end_whole "failed exec: END, nothing lost but calls inside the driver when it ended" $f by=exec
done_testing
