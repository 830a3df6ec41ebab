#!/bin/sh
# A forked child traces itself as if it had started at its first CUDA call:
# nothing of the parent's samples, pools or live allocations carries into
# its trace (tests/shim/forkstate.c). Before, the child's trace sampled the
# parent's pool, lost its first peak sample under the parent's 64 MiB peak,
# and recorded its free of the parent's 4 MiB with no stack, as if the
# allocation were in its own trace.
. tests/t/lib.sh
P=$B/tests/shim/forkstate
[ -x "$P" ] || { echo "1..0 # SKIP $P not built (make test-bins)"; exit 0; }
if [ "${VT_SANITIZE:-}" = thread ]; then
    echo "1..0 # SKIP TSan does not support threads started after fork"
    exit 0
fi
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT
MiB=1048576

out=$(under_shim $D timeout 60 $P 2>&1)
is "$? $out" "0 forkstate child=ok" "the program and its child ran unchanged"
is "$(ls $D/*.vtrace | wc -l)" 2 "parent and child each leave a trace"
parent="" child=""
for f in $D/*.vtrace; do
    "$VT" dump "$f" >$f.dump
    [ "$(count_events $f.dump cuMemAlloc_v2 $((16 * MiB)) 0)" = 1 ] && child=$f.dump
    [ "$(count_events $f.dump cuMemAlloc_v2 $((64 * MiB)) 0)" = 1 ] && parent=$f.dump
done
check "the child's trace holds its own allocations" [ -n "$child" ]
check "the parent's trace holds its own allocations" [ -n "$parent" ]
[ -n "$child" ] && [ -n "$parent" ] || { done_testing; exit; }

# samples DUMP KIND: shim samples of one kind (meminfo or pool_usage) taken
# at a new peak.
samples() {
    grep '^event ' "$1" | grep " kind=$2 " | grep -c 'flags=sample|at_peak'
}
is "$(samples $parent meminfo)" 2 "parent: a peak sample at 8 MiB and at 64 MiB"
is "$(samples $parent pool_usage)" 4 "parent: each peak sample reads its pool (reserved, used)"
is "$(samples $child meminfo)" 2 "child: a peak sample at 16 MiB and at 96 MiB, not held back by the parent's 64 MiB peak"
is "$(samples $child pool_usage)" 0 "child: no sample of the parent's pool, which the child never used"
kept=$(grep '^event ' $parent | grep 'api=cuMemAlloc_v2 ' | grep " size=$((4 * MiB)) " | sed 's/.* ptr=\([^ ]*\) .*/\1/')
free_stack=$(grep '^event ' $child | grep 'api=cuMemFree_v2 ' | grep " ptr=$kept " | head -1 | sed 's/.* stack=//')
check "child: its free of the parent's 4 MiB ($kept) keeps its stack (got stack=$free_stack)" \
    [ "${free_stack:-0}" != 0 ]
done_testing
