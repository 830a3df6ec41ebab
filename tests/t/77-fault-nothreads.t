#!/bin/sh
# The shim cannot start its writer thread: pthread_create fails with EAGAIN,
# as when a container's pids.max or RLIMIT_NPROC is reached
# (tests/fault/vtfault.c, VTFAULT_NO_THREADS): for the shim's thread only,
# and for every thread (the program's own then fail as they would without
# the shim). The program runs unchanged, the shim says so once on stderr
# and writes nothing.
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
# shim: 2 threads of the program make 1000 pairs each; all: a program of
# one thread (its calls on the main thread), the injector in both runs.
prog_shim="$FP pairs 1000 2"
prog_all="$B/tests/fault/drvcases graph"
plain $TMP/plain $prog_shim
LD_LIBRARY_PATH=$SIM LD_PRELOAD="${VT_SAN_RT:+$VT_SAN_RT }$VTFAULT" VTFAULT_NO_THREADS=all $prog_all \
    >$TMP/plain-all 2>$TMP/plain-all.err
echo $? >$TMP/plain-all.rc
for how in shim all; do
    if [ $how = shim ] && [ -n "${VT_SANITIZE:-}" ]; then
        # The sanitizer's pthread_create stands between the shim and the
        # injector, which then cannot tell the shim's call from others.
        for i in 1 2 3 4 5; do skip "no thread ($how): the sanitizer's pthread_create hides the caller"; done
        continue
    fi
    ref=$TMP/plain
    [ $how = all ] && ref=$TMP/plain-all
    mkdir $TMP/$how
    eval prog=\$prog_$how
    VTFAULT_NO_THREADS=$how PRELOAD="$FAULT_PRELOAD" shimmed $TMP/$how.out $TMP/$how $prog
    unchanged $ref $TMP/$how.out "no thread ($how): output and exit status unchanged"
    grep -q 'no_threads=[1-9]' $TMP/$how.out.err
    is "$?" 0 "no thread ($how): the fault was injected"
    is "$(grep -c '^vramtrace: cannot start the writer thread; tracing is off, the program runs unchanged$' $TMP/$how.out.err)" 1 \
        "no thread ($how): the shim says so once on stderr"
    is "$(grep -c '^vramtrace:' $TMP/$how.out.err)" 1 "no thread ($how): and nothing else"
    is "$(ls $TMP/$how | wc -l)" 0 "no thread ($how): no trace written"
done
done_testing
