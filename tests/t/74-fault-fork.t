#!/bin/sh
# fork and exec under load. 64 threads allocate while the main thread forks
# 30 times; each child allocates once and exits. No deadlock (a timeout
# bounds the run), every child leaves a readable trace holding its own
# allocation. Then an exec chain: sh runs a server, which fork+execs a
# runner: each traced process leaves its own trace, the shell none.
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
F=20

if [ -n "$SANITIZED" ]; then
    # ASan: glibc unmaps the dead threads' stacks in the child, ASan keeps
    # their poisoned shadow, and the child's next mmap there is reported
    # (a false positive in the shim's ELF reading). TSan does not support
    # fork in a multi-threaded process at all.
    skip "fork storm: $SANITIZED cannot follow fork from a 64-thread process"
else
    D=$TMP/storm; mkdir $D
    timeout 120 env LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SP" VRAMTRACE_DIR=$D $FP forkstorm $F >$TMP/out 2>$TMP/err
    rc=$?
    is "$rc" 0 "forkstorm: finished, no deadlock (exit $rc; 124 = timed out)"
    is "$(cat $TMP/out)" "forkstorm children=$F ok=$F" "forkstorm: every child allocated and exited 0"
    is "$(ls $D/*.vtrace | wc -l)" $((F + 1)) "forkstorm: one trace per process"
    unreadable=0 own=0
    for f in $D/*.vtrace; do
        "$VT" dump "$f" >$f.dump 2>$f.err || { unreadable=$((unreadable + 1)); sed 's/^/#   /' $f.err; }
        [ "$(count_events $f.dump cuMemAlloc_v2 69632 0)" = 1 ] && own=$((own + 1))
    done
    is $unreadable 0 "forkstorm: every trace reads cleanly"
    is $own $F "forkstorm: each child's allocation is in its own trace"
    check "forkstorm: each child trace has an END record" \
        sh -c "[ \$(grep -l '^end ' $D/*.dump | wc -l) = $((F + 1)) ]"
fi

# A fork while another thread's stack is being unwound, inside the shim's
# walk of the loaded modules (dl_iterate_phdr, held 300 ms by vtfault): the
# child must not inherit the loader's lock held (preload/loader_lock.c).
# Before, the child's first allocation waited on it forever.
if [ "$SANITIZED" = libtsan ]; then
    skip "fork during a module walk: TSan cannot follow fork from a threaded process"
else
    D=$TMP/walk.d; mkdir $D
    PRELOAD="$FAULT_PRELOAD" VTFAULT_SLOW_PHDR_MS=300 shimmed $TMP/walk $D $FP forkwalk
    is "$(cat $TMP/walk)" "forkwalk child=ok" "fork during a module walk: the child allocates (not hung on the loader's lock)"
    check "fork during a module walk: the walks were slowed ($(grep -c 'slow_walks=[1-9]' $TMP/walk.err) processes)" \
        grep -q 'slow_walks=[1-9]' $TMP/walk.err
    is "$(ls $D/*.vtrace | wc -l)" 2 "fork during a module walk: parent and child each leave a trace"
fi

# Exec chain: sh -> faultprog server -> (fork, exec) faultprog runner.
D=$TMP/chain; mkdir $D
plain $TMP/plain sh -c "$FP server"
shimmed $TMP/out $D sh -c "$FP server"
unchanged $TMP/plain $TMP/out "exec chain: output unchanged"
is "$(ls $D/*.vtrace | wc -l)" 2 "exec chain: server and runner each leave a trace, the shell none"
server="" runner=""
for f in $D/*.vtrace; do
    "$VT" dump --stacks "$f" >$f.dump
    grep -q 'argv=\[[^]]*"server"' $f.dump && server=$f
    grep -q 'argv=\[[^]]*"runner"' $f.dump && runner=$f
done
check "exec chain: the server's trace is the server's" [ -n "$server" ]
check "exec chain: the runner's trace is the runner's" [ -n "$runner" ]
if [ -n "$server" ] && [ -n "$runner" ]; then
    is "$(count_events $server.dump cudaMalloc 3145729 0)" 1 "exec chain: server allocation in the server's trace"
    is "$(count_events $runner.dump cudaMalloc 5242881 0)" 1 "exec chain: runner allocation in the runner's trace"
    is "$(count_events $server.dump cudaMalloc 5242881)" 0 "exec chain: no runner event in the server's trace"
    spid=$(sed -n 's/^process pid=\([0-9]*\) .*/\1/p' $server.dump)
    rppid=$(sed -n 's/^process pid=[0-9]* ppid=\([0-9]*\) .*/\1/p' $runner.dump)
    is "$rppid" "$spid" "exec chain: the runner's parent is the server"
    check "exec chain: the runner's stack names runner_alloc" grep -q ' runner_alloc ' $runner.dump
fi
done_testing
