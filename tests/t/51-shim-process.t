#!/bin/sh
# The shim inside someone else's process: nothing for processes that never
# touch CUDA, its own trace for forked and exec'd children, a readable trace
# after SIGKILL, many threads, and a pass-through when it cannot write.
. tests/t/lib.sh
P=$B/tests/shim/paths

# No CUDA: no file, no thread.
D=$(tmpdir)
out=$(under_shim $D $P nocuda)
is "$out" "threads 1" "no CUDA: no thread started"
under_shim $D /bin/true
under_shim $D sh -c 'echo hi >/dev/null'
is "$(ls -A $D | wc -l)" 0 "no CUDA (paths, /bin/true, sh): no file written"

# fork: the child writes its own trace with its own pid. Not under
# ThreadSanitizer, which cannot start the child's writer thread after a
# fork of a threaded process (it dies, or with die_after_fork=0 reports a
# "dup thread" and the child's call fails).
if [ "${VT_SANITIZE:-}" = thread ]; then
    T=$((T+1)); echo "ok $T # SKIP TSan does not support threads started after fork"
else
    D=$(tmpdir)
    under_shim $D $P fork
    is "$?" 0 "fork: program ran unchanged"
    is "$(ls $D/*.vtrace | wc -l)" 2 "fork: parent and child each leave a trace"
    parent=0; child=0
    for f in $D/*.vtrace; do
        $VT dump "$f" >$f.dump
        [ "$(count_events $f.dump cudaMalloc 167937 0)" = 1 ] && parent=$((parent+1))
        [ "$(count_events $f.dump cudaMalloc 172033 0)" = 1 ] && child=$((child+1))
        pid=$(sed -n 's/^process pid=\([0-9]*\) .*/\1/p' $f.dump)
        case "$f" in *".$pid.vtrace") ok "fork: $(basename $f) is named after its own pid";;
                     *) nok "fork: $(basename $f) is named after its own pid $pid";; esac
    done
    is "$parent" 1 "fork: the parent's allocation is in exactly one trace"
    is "$child" 1 "fork: the child's allocation is in exactly one trace"
fi

# fork right after the first CUDA call, many times: the writer thread may be
# starting or inside malloc, and the child must not inherit its locks (under
# ASan, whose allocator is not reset at fork, 7 forks in 300 hung before the
# shim made fork wait for the thread to be between chunks).
D=$(tmpdir); hung=0; short=0
for i in $(seq 1 150); do
    mkdir $D/$i
    under_shim $D/$i timeout -k 2 5 $P fork >/dev/null 2>&1
    [ $? = 124 ] && hung=$((hung+1))
    [ "$(ls $D/$i | wc -l)" = 2 ] || short=$((short+1))
done
is "$hung" 0 "fork x150: no parent or child hangs"
is "$short" 0 "fork x150: every run leaves two traces"

# exec: the exec'd image traces itself.
D=$(tmpdir)
under_shim $D $P exec
is "$?" 0 "exec: program ran unchanged"
is "$(ls $D/*.vtrace | wc -l)" 2 "exec: before and after exec each leave a trace"
cat $D/*.vtrace >/dev/null
n=0; for f in $D/*.vtrace; do $VT dump "$f" >$f.dump; n=$((n + $(count_events $f.dump cudaMalloc 86017 0))); done
is "$n" 1 "exec: the exec'd program's allocations are traced"

# SIGKILL after the flush interval: everything older is readable.
D=$(tmpdir)
# env execs the program, so $! is the program itself.
env LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SHIM_PRELOAD" VRAMTRACE_DIR=$D $P hold >$D/out &
pid=$!
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do grep -q ready $D/out 2>/dev/null && break; sleep 0.1; done
sleep 0.4
kill -KILL $pid; wait $pid 2>/dev/null
f=$(ls $D/*.vtrace)
$VT dump "$f" >$D/dump; rc=$?
is "$rc" 0 "SIGKILL: trace reads cleanly up to its last complete chunk"
is "$(count_events $D/dump cudaMalloc 208897 0)" 1 "SIGKILL: the allocation older than VRAMTRACE_FLUSH_MS is there"
check "SIGKILL: no end record (the process did not exit)" sh -c "! grep -q '^end ' $D/dump"

# 16 threads x 1000 pairs: every event accounted for.
D=$(tmpdir)
VRAMTRACE_RING=1048576 under_shim $D $P threads 16
is "$?" 0 "threads: program ran unchanged"
$VT dump $D/*.vtrace >$D/dump
is "$(count_events $D/dump cudaMalloc 245761 0)" 16000 "threads: 16000 allocations recorded"
is "$(count_events $D/dump cudaFree "" 0)" 16001 "threads: 16001 frees recorded"
check "threads: nothing dropped" grep -q "^end .* dropped=0" $D/dump

# Cannot write: a pass-through, said once.
D=$(tmpdir); touch $D/file
under_shim $D/file/sub $P runtime 2>$D/err
is "$?" 0 "unwritable VRAMTRACE_DIR: program ran unchanged"
is "$(grep -c vramtrace: $D/err)" 1 "unwritable VRAMTRACE_DIR: said once on stderr"

# Bad environment values: defaults, program unchanged.
D=$(tmpdir)
VRAMTRACE_DEPTH=-5 VRAMTRACE_FLUSH_MS=garbage VRAMTRACE_RING=99999999999 under_shim $D $P runtime 2>$D/err
is "$?" 0 "bad env values: program ran unchanged"
is "$(ls $D/*.vtrace | wc -l)" 1 "bad env values: still traced with defaults"
is "$(grep -c 'ignoring VRAMTRACE_' $D/err)" 3 "bad env values: one warning each"

# The constructor gives NVTX its path without setenv (no malloc in processes
# that never touch CUDA): every later edit of the environment still works.
D=$(tmpdir)
out=$(env -u NVTX_INJECTION64_PATH HOME=/h LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SHIM_PRELOAD" VRAMTRACE_DIR=$D $P environ)
is "$out" "nvtx=shim a=3 b=2 home=unset
after clearenv c=4 path=unset" "environ: setenv, putenv, unsetenv and clearenv behave after the shim's constructor"
$VT dump $D/*.vtrace >$D/dump
is "$(count_events $D/dump cudaMalloc 286721 0)" 1 "environ: the allocation after the edits is traced"
out=$(env -u NVTX_INJECTION64_PATH LD_PRELOAD="$SHIM_PRELOAD" sh -c 'env' | grep -c "^NVTX_INJECTION64_PATH=$SHIM\$")
is "$out" 1 "environ: children see NVTX_INJECTION64_PATH naming the shim"

# A symlink planted at the trace path is not followed; the file is 0600.
D=$(tmpdir); V=$(tmpdir)/victim; echo precious >$V
under_shim $D sh -c "ln -s $V $D/paths.\$\$.vtrace; exec $P runtime"
is "$(cat $V)" precious "planted symlink: its target is untouched"
is "$(find $D -name '*.vtrace' -type f | wc -l)" 1 "planted symlink: the trace went to another name"
is "$(stat -c %a $(find $D -name '*.vtrace' -type f))" 600 "trace file mode is 0600"
D=$(tmpdir)/new
under_shim $D $P runtime
is "$(stat -c %a $D)" 700 "a missing VRAMTRACE_DIR is created 0700"

# The first CUDA call inside dlopen, from a library's constructor: the
# shim waits there for its writer thread to open the trace.
D=$(tmpdir)
out=$(under_shim $D timeout 20 $B/tests/shim/ctoralloc $B/tests/shim/libctoralloc.so 2>&1)
is "$? $out" "0 dlopen ok" "first CUDA call in a constructor under dlopen: no hang"
$VT dump $D/*.vtrace >$D/dump
is "$(count_events $D/dump cudaMalloc 1048576 0)" 1 "first CUDA call in a constructor under dlopen: traced"
done_testing
