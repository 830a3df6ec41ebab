#!/bin/sh
# A fork that outwaits another thread's start-up: one thread sits 3 s in a
# dl_iterate_phdr callback (the loader's lock) while another makes the
# process's first CUDA call, whose start-up loads a library and so waits
# for the callback; the main thread forks 100 ms later. fork waits 2 s at
# most for a start-up in progress (74-fault-forkstart), then goes ahead: the
# child, with a shim half started by a thread it does not have, passes its
# calls through. It did so silently: no trace and no word of it. Now it
# says so once on stderr at its first CUDA call (nothing when it makes
# none). It does not start a trace of its own: what the parent's start-up
# waited for may be a lock the child inherits held (here the loader's
# write lock, which glibc does not reset in the child), so a start in the
# child could wait for ever.
. tests/t/lib.sh
. tests/fault/lib.sh
skip_fork_in_threads_under_sanitizer
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
plain $TMP/plain timeout 60 $FP forkslow 3000
mkdir $TMP/d
shimmed $TMP/out $TMP/d timeout 60 $FP forkslow 3000
unchanged $TMP/plain $TMP/out "fork during a start-up held 3 s: the child returns, output unchanged ($(tr '\n' ' ' <$TMP/out))"
is "$(grep -c '^vramtrace: pid [0-9]* is not traced: forked while another thread of its parent was starting the shim' $TMP/out.err)" 1 \
    "the child says once, at its first CUDA call, that it is not traced"
set -- $TMP/d/*.vtrace
is "$#" 1 "one trace: the parent's"
is "$(all_events $1)" 1 "the parent's trace holds its one call"

# The same with a start-up held 1 s, inside the 2 s fork waits, and a
# 10 kHz interval timer: its signals ended each 1 ms nap of the wait early,
# so the fork gave up after about 0.2 s and the child went untraced, its
# message claiming 2000 ms. The wait now reads the clock.
plain $TMP/plain-tick env FAULTPROG_ITIMER_US=100 timeout 60 $FP forkslow 1000
mkdir $TMP/tick
shimmed $TMP/out-tick $TMP/tick env FAULTPROG_ITIMER_US=100 timeout 60 $FP forkslow 1000
unchanged $TMP/plain-tick $TMP/out-tick "start-up held 1 s, 10 kHz timer: output unchanged"
is "$(grep -c 'is not traced' $TMP/out-tick.err)" 0 "start-up held 1 s, 10 kHz timer: the fork waited it out (nothing said)"
is "$(ls $TMP/tick | wc -l)" 2 "start-up held 1 s, 10 kHz timer: two traces, the child's too"
done_testing
