#!/bin/sh
# A child made without the fork handlers (glibc's _Fork, a raw clone
# system call) inherits the shim's state but not its writer thread: it
# must exit without waiting for that thread (it hung in exit()), must not
# write into the parent's trace, nor wait on a lock a thread of the parent
# held at the fork. The parent's trace stays complete.
. tests/t/lib.sh
P=$B/tests/shim/rawfork
[ -x "$P" ] || { echo "1..0 # SKIP $P not built (make test-bins)"; exit 0; }
if [ "${VT_SANITIZE:-}" = thread ]; then
    echo "1..0 # SKIP TSan does not support a child of a threaded process without fork handlers"
    exit 0
fi
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT
for how in _Fork clone; do
    for child in "" cuda; do
        T_DIR=$D/$how$child
        mkdir -p $T_DIR
        out=$(LD_LIBRARY_PATH=$SIM VRAMTRACE_DIR=$T_DIR LD_PRELOAD="$SHIM_PRELOAD" timeout 60 "$P" $how $child 2>&1)
        is "$? $out" "0 child exited 0" "$how${child:+ with a CUDA call in the child}: the child exits, no hang"
        set -- $T_DIR/*.vtrace
        is "$#" 1 "$how${child:+ (cuda)}: one trace, the parent's"
        got=$("$VT" report --json $T_DIR 2>/dev/null | python3 -c 'import json, sys
p = json.load(sys.stdin)["processes"][0]
print(p["trace"]["complete"], p["events"]["allocs"], p["events"]["frees"])' 2>&1)
        is "$got" "True 2 2" "$how${child:+ (cuda)}: the parent's trace is complete: its own 2 allocations, nothing of the child's"
    done
done

# The fork lands while the shim's writer is inside a walk of the modules
# (libvtfault holds its first callback 1 s, the loader's lock held): the
# child inherits that lock held, and nothing releases it there. Its first
# CUDA call looked for the real function with a walk of its own and
# waited for ever (about 1 run in 5 under ASan without the hold, every
# run with it). A child made without the fork handlers now walks nothing.
VTFAULT=$B/tests/fault/libvtfault.so
for how in _Fork clone; do
    T_DIR=$D/walk$how
    mkdir -p $T_DIR
    out=$(RAWFORK_DELAY_MS=100 VTFAULT_SLOW_PHDR_MS=1000 LD_LIBRARY_PATH=$SIM VRAMTRACE_DIR=$T_DIR \
          LD_PRELOAD="${VT_SAN_RT:+$VT_SAN_RT }$VTFAULT $SHIM" timeout 60 "$P" $how cuda 2>/dev/null)
    is "$? $out" "0 child exited 0" "$how during the writer's walk of the modules, a CUDA call in the child: it exits, no hang"
    set -- $T_DIR/*.vtrace
    is "$#" 1 "$how during the writer's walk: one trace, the parent's"
done

# The same child forks (fork(), its handlers run) and the grandchild
# makes a CUDA call: the grandchild's handlers took its loader state for
# its own, and its walk waited for ever on the lock it inherited held
# through two forks (3 of 3 runs). A process forked from one made
# without the handlers passes its calls through as that one does.
for how in _Fork clone; do
    for then in fork cudafork; do
        T_DIR=$D/grand$how$then
        mkdir -p $T_DIR
        out=$(RAWFORK_DELAY_MS=100 VTFAULT_SLOW_PHDR_MS=1000 LD_LIBRARY_PATH=$SIM VRAMTRACE_DIR=$T_DIR \
              LD_PRELOAD="${VT_SAN_RT:+$VT_SAN_RT }$VTFAULT $SHIM" timeout 60 "$P" $how $then 2>/dev/null)
        is "$? $out" "0 child exited 0" "$how, then fork() in the child$([ $then = cudafork ] && echo ' after a CUDA call'), a CUDA call in the grandchild, during the writer's walk: no hang"
        set -- $T_DIR/*.vtrace
        is "$#" 1 "$how then fork() ($then): one trace, the parent's"
    done
done
done_testing
