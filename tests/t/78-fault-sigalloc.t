#!/bin/sh
# A signal handler that allocates: a 10 kHz SIGALRM whose handler makes a
# cuMemAlloc/cuMemFree pair, landing anywhere in a loop of pairs, inside
# the shim too. The simulated driver blocks signals while it holds its lock
# (VTSIM_SIGNAL_SAFE), as a driver safe to call from a handler would:
# without it the handler deadlocks with or without the shim.
#  - sigalloc, a loop of driver pairs: a handler that entered a wrapper
#    while its thread was in the shim went through unrecorded and
#    uncounted (about 2,000 pairs in 5,000 missing from the trace, and the
#    report said "0 dropped"). Now those calls are counted as dropped.
#  - sigrt, a loop of cudaMalloc/cudaFree pairs: the handler's calls that
#    landed inside the runtime's own body were folded into the runtime
#    call's event, in neither the trace nor the dropped count (about 3,700
#    of 4,900). A driver call is now folded only through the slot wrappers
#    libcudart's lookups get; the handler's linked calls are recorded.
#  - sigrtlooked, the same with the handler calling through pointers the
#    program looked up on libcuda's handle: the shim hands a program the
#    exported wrapper for the definition its linked calls reach, which
#    never folds.
#  - sigrtentry, through pointers libcudart looked up for the program
#    (cudaGetDriverEntryPointByVersion, PyTorch's way): libcudart's own
#    lookup got the wrappers its calls fold through, and the handler's
#    calls were folded too (3,442 of 4,518 in neither the trace nor the
#    count). The shim now swaps what the runtime hands the program for the
#    wrapper the program's own lookup would get.
# Either way the trace plus the dropped count is every call.
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
export VTSIM_SIGNAL_SAFE=1
N=100000

# traced MODE: runs it plain and shimmed; sets H (the handler's pairs), f
# (the trace), dropped, and checks that trace + dropped = every call.
traced() {
    plain $TMP/$1.plain timeout 120 $FP $1 $N
    mkdir $TMP/$1
    shimmed $TMP/$1.out $TMP/$1 timeout 120 $FP $1 $N
    unchanged $TMP/$1.plain $TMP/$1.out "$1: handler allocating at 10 kHz: output unchanged, no deadlock (exit $(cat $TMP/$1.out.rc))"
    H=$(sed -n "s/^$1 handler pairs \([0-9]*\)$/\1/p" $TMP/$1.out.err)
    check "$1: the handler ran ($H pairs)" [ "${H:-0}" -gt 0 ]
    # the warm-up pair, the main loop's pairs and the handler's
    calls=$((2 + 2 * N + 2 * ${H:-0}))
    f=$(ls $TMP/$1/*.vtrace)
    in=$(all_events $f)
    "$VT" dump $f >$TMP/$1.dump
    dropped=$(sed -n 's/^end .* dropped=\([0-9]*\).*/\1/p' $TMP/$1.dump)
    echo "# $1: $calls calls: $in in the trace, $dropped dropped"
    is "$((in + dropped))" $calls "$1: events in the trace + dropped = all $calls calls"
}

traced sigalloc
is "$(not_in $TMP/sigalloc.out.err)" "$dropped" "sigalloc: stderr says the $dropped events not in the trace"
"$VT" report --wide $f >$TMP/report 2>&1
is "$(sed -n 's/^Events: .* \([0-9]*\) dropped.*/\1/p' $TMP/report | head -1)" "$dropped" \
    "sigalloc: the report says the $dropped events it does not count"
is "$(sed -n 's/^end .* lost=\(.*\)/\1/p' $TMP/sigalloc.dump)" \
    "buffer_full:0,signal_handler_in_shim:$dropped,call_not_returned:0,not_written:0" \
    "sigalloc: END says all $dropped came from a signal handler inside the shim"
is "$(grep -c "^NOTE: the shim lost $dropped events ($dropped from a signal handler inside the shim)" $TMP/report)" 1 \
    "sigalloc: the report's note says why"

for m in sigrt sigrtlooked sigrtentry; do
    traced $m
    is "$(grep '^event ' $TMP/$m.dump | grep -c 'api=cudaMalloc ')" $((N + 1)) "$m: every cudaMalloc is one event"
    handler=$(grep '^event ' $TMP/$m.dump | grep -c 'api=cuMemAlloc_v2 \|api=cuMemFree_v2 ')
    in_shim=$(sed -n 's/^end .*signal_handler_in_shim:\([0-9]*\).*/\1/p' $TMP/$m.dump)
    is "$((handler + in_shim))" $((2 * ${H:-0})) \
        "$m: the handler's $((2 * ${H:-0})) driver calls: $handler in the trace, $in_shim counted as made inside the shim"
done
done_testing
