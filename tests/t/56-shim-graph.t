#!/bin/sh
# The shim's files call each other one way. preload/shim.h lists them in
# layers, top first (the wrappers, recording, the trace, stacks, the
# driver, resolution, the base), and a file may call only files listed
# after it: an edge going up, a file the list leaves out, or any circle
# fails (scripts/preload-graph.sh reads the objects' symbols). The layer
# that finds the real functions calls only the base: what it found never
# depends on what is being recorded.
. tests/t/lib.sh
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT
G=scripts/preload-graph.sh

# The order in preload/shim.h's opening comment: "FILE LAYER" a line, top
# first, from its "layer NAME:" lines and the "  FILE.c" lines under them.
order_of() {
    sed -n '1,/\*\//p' "$1" | awk '
        /^ \* layer [a-z]+:/ { layer = $3; sub(/:$/, "", layer); next }
        layer != "" && /^ \*   [a-z_]+\.c / { f = $2; sub(/\.c$/, "", f); print f, layer }'
}

# upward ORDER EDGES: the edges "a -> b" of EDGES (preload-graph.sh -e)
# that do not go down ORDER (b listed at or above a), and the files of an
# edge ORDER leaves out.
upward() {
    awk 'NR == FNR { rank[$1] = NR; next }
         $2 == "->" {
             for (i = 1; i <= 3; i += 2)
                 if (!($i in rank)) { print "unplaced: " $i; rank[$i] = 0 }
             if (rank[$1] && rank[$3] && rank[$3] <= rank[$1]) print "upward: " $1 " -> " $3
         }' "$1" "$2" | sort -u
}

# The checks can fail. Three objects in a circle, a -> b -> c -> a, and d
# called by a but calling nobody:
cat >$D/a.c <<'C'
void vt_b(void); void vt_d(void); void vt_a(void) { vt_b(); vt_d(); }
C
echo 'void vt_c(void); void vt_b(void) { vt_c(); }' >$D/b.c
echo 'void vt_a(void); void vt_c(void) { vt_a(); }' >$D/c.c
echo 'void vt_d(void) {}' >$D/d.c
echo 'void vt_c(void) {}' >$D/c_leaf.c
mkdir $D/obj $D/line
for f in a b c d c_leaf; do cc -c $D/$f.c -o $D/$f.o; done
for f in a b c d; do ln -s $D/$f.o $D/obj/$f.o; done
for f in a b d; do ln -s $D/$f.o $D/line/$f.o; done
ln -s $D/c_leaf.o $D/line/c.o
is "$(sh $G $D/obj)" "cycle: a b c" "a circle of three objects is found, and the leaf it calls is not in it"
sh $G -e $D/obj >$D/fake.edges
is "$(grep -c -- ' -> ' $D/fake.edges)" 4 "every call between two objects is an edge"
printf '%s\n' a b c d >$D/fake.order
is "$(upward $D/fake.order $D/fake.edges)" "upward: c -> a" "the edge that goes back up the order is found"
printf '%s\n' a b d >$D/fake.short
is "$(upward $D/fake.short $D/fake.edges)" "unplaced: c" "a file the order leaves out is found"
sh $G -e $D/line >$D/line.edges
is "$(upward $D/fake.order $D/line.edges)$(sh $G $D/line)" "" "a -> b -> c, a -> d goes down a b c d, with no circle"
printf '/*\n * layer top: the first\n *   a.c  one\n *   b.c  two\n * layer low: the rest\n *   c.c  three\n */\n *   d.c  not in the list\n' >$D/fake.h
is "$(order_of $D/fake.h | tr '\n' ' ')" "a top b top c low " "the order is read from the header's opening comment only"

# The shim: its objects as built, one per source (an object left behind by
# a renamed source is not the shim's).
order_of preload/shim.h >$D/order
mkdir $D/shim
for src in preload/*.c; do
    f=${src#preload/}
    ln -s $B/obj/preload/${f%.c}.o $D/shim/${f%.c}.o
done
is "$(cut -d' ' -f1 $D/order | sort | tr '\n' ' ')" "$(ls $D/shim | sed 's/\.o$//' | sort | tr '\n' ' ')" \
    "preload/shim.h places every file of preload/ in a layer, once"
sh $G -e $D/shim >$D/graph
# The graph was read: the writer drains the ring and the wrappers record.
check "the writer calls the ring" grep -q '^writer -> ring$' $D/graph
check "the wrappers call the recording API" grep -q '^hooks -> record$' $D/graph
is "$(upward $D/order $D/graph)" "" "every call goes down the layers of preload/shim.h"
is "$(sh $G $D/shim)" "" "no circle"
below=$(awk 'NR == FNR { layer[$1] = $2; next } $1 == "resolve" && layer[$3] != "base" { print $3 }' \
    $D/order $D/graph)
is "${below:-none}" none "finding the real function calls only the base"
awk '$2 != l { if (l != "") print line; l = $2; line = "# " l ":" } { line = line " " $1 } END { print line }' $D/order
done_testing
