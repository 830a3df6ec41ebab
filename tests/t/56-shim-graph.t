#!/bin/sh
# The shim's files call each other one way, except inside the hub: the
# wrappers (hooks.c), the real functions and dlsym (interpose.c) and the
# recording API (record.c) may call each other; every other file is a leaf
# that calls only files below it. A circle that reaches outside the hub
# would mean a utility depends on the lifecycle again
# (scripts/preload-graph.sh reads the objects' symbols).
. tests/t/lib.sh
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT
G=scripts/preload-graph.sh
HUB="hooks interpose record"

# The script sees a circle where there is one: three objects, a -> b -> c
# -> a, and d called by a but calling nobody.
cat >$D/a.c <<'C'
void vt_b(void); void vt_d(void); void vt_a(void) { vt_b(); vt_d(); }
C
echo 'void vt_c(void); void vt_b(void) { vt_c(); }' >$D/b.c
echo 'void vt_a(void); void vt_c(void) { vt_a(); }' >$D/c.c
echo 'void vt_d(void) {}' >$D/d.c
mkdir $D/obj
for f in a b c d; do cc -c $D/$f.c -o $D/obj/$f.o; done
is "$(sh $G $D/obj)" "cycle: a b c" "a circle of three objects is found, and the leaf it calls is not in it"
is "$(sh $G -e $D/obj | grep -c -- ' -> ')" 4 "every call between two objects is an edge"

# The shim: its objects as built.
sh $G -e $B/obj/preload >$D/graph
# The graph was read: the writer drains the ring and the wrappers record.
check "the writer calls the ring" grep -q '^writer -> ring$' $D/graph
check "the wrappers call the recording API" grep -q '^hooks -> record$' $D/graph
outside=$(sed -n 's/^cycle: //p' $D/graph | tr ' ' '\n' | while read -r f; do
    case " $HUB " in *" $f "*) ;; *) printf '%s ' "$f" ;; esac
done)
is "${outside:-none}" none "no circle reaches outside the hub ($HUB)"
sed -n 's/^/# /p' $D/graph | grep 'cycle' || true
done_testing
