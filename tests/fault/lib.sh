# Helpers of the fault tests (tests/t/7x-*.t), sourced after tests/t/lib.sh.
FP=$B/tests/fault/faultprog
VTFAULT=$B/tests/fault/libvtfault.so
# LD_PRELOAD for the shim, and for the fault injector in front of it; in a
# sanitized build (tests/tests.mk) the sanitizer runtime comes first.
SP=${SHIM_PRELOAD:-$SHIM}
FAULT_PRELOAD="${VT_SAN_RT:+$VT_SAN_RT }$VTFAULT $SHIM"
# Non-empty when the shim is built with ASan or TSan.
SANITIZED=$(ldd "$SHIM" 2>/dev/null | grep -o 'lib[at]san' | head -1)

skip() { T=$((T+1)); echo "ok $T # SKIP $*"; }

# plain OUT CMD...: runs CMD on the simulated GPU without the shim; stdout
# to OUT, exit status to OUT.rc.
plain() {
    out=$1; shift
    env -u LD_PRELOAD LD_LIBRARY_PATH=$SIM "$@" >"$out" 2>"$out.err"
    echo $? >"$out.rc"
}
# shimmed OUT DIR CMD...: the same under the shim, tracing into DIR, with
# whatever VRAMTRACE_* the caller exported; stderr to OUT.err.
shimmed() {
    out=$1 dir=$2; shift 2
    LD_LIBRARY_PATH=$SIM LD_PRELOAD=${PRELOAD:-$SP} VRAMTRACE_DIR=$dir "$@" >"$out" 2>"$out.err"
    echo $? >"$out.rc"
}
# unchanged A B DESC: same stdout and exit status.
unchanged() {
    if [ "$(cat $1.rc)" = "$(cat $2.rc)" ] && cmp -s "$1" "$2"; then ok "$3"
    else nok "$3"; echo "#   exit $(cat $1.rc) vs $(cat $2.rc)"; diff "$1" "$2" | head -5 | sed 's/^/#   /'; fi
}
# Number of EVENT records in a trace, samples included (all the shim wrote).
# Program events only: the shim's own meminfo samples are not counted as
# dropped either.
all_events() { "$VT" dump "$1" 2>/dev/null | grep '^event ' | grep -vc 'flags=[^ ]*sample'; }
# The N of "vramtrace: N events not in ..." on stderr file $1, 0 if absent.
not_in() { sed -n 's/^vramtrace: \([0-9]*\) events not in .*/\1/p' "$1" | head -1 | grep . || echo 0; }
# skip_fork_in_threads_under_sanitizer: ends a script that forks while
# other threads run, under a sanitizer. TSan does not support fork in a
# threaded process, and GCC 12's ASan does not lock its allocator across
# fork (libasan has no fork interceptor): a child forked while a parent
# thread refills a size class or its free quarantine finds that lock held,
# and the child's first thread (the shim's writer) waits in ASan's own
# calloc for ever (2-3 of 40 children in 74-fault-forkstart). glibc's
# malloc takes its arena locks across fork.
skip_fork_in_threads_under_sanitizer() {
    case "${VT_SANITIZE:-}" in
    *thread*|*address*)
        echo "1..0 # SKIP the sanitizer's allocator is not fork-safe in a threaded process"
        exit 0;;
    esac
}
