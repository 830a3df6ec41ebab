#!/bin/sh
# ggml-hooks.sh: row 7 of `make bench`, runnable alone. The shim's ggml
# hooks on the real libggml-base.so of node-llama-cpp 3.21.1 (installed by
# tests/t/63-llama-real.t; never installed here): tests/bench/ggmlhooks.c,
# compiled against it and run untraced and traced in turn, with 1 and with
# 64 tensors a buffer. Prints what a buffer costs (the 1-tensor round, 4
# records) and what each further tensor costs (the slope to 64), medians
# of ROUNDS paired runs, and the traced/untraced ratio of a 64-tensor
# buffer. #25's target is about a microsecond a buffer.
#
#   sh tests/bench/ggml-hooks.sh [ROUNDS]     default 7 (run from the root)
set -u
B=${B:-build}
ROOT=$(pwd)
SHIM=$ROOT/$B/libvramtrace.so
ROUNDS=${1:-7}
GGML=${VT_LLAMA_CACHE:-${HOME:-/tmp}/.cache/vramtrace/llama-3.21.1}/shipped/node_modules/@node-llama-cpp/linux-x64-cuda/bins/linux-x64-cuda
if [ ! -e "$GGML/libggml-base.so" ]; then
    echo "   skipped: no libggml-base.so in $GGML (make test installs it)"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/vtggml.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
PROG=$T/ggmlhooks
${CC:-cc} -O2 -o "$PROG" tests/bench/ggmlhooks.c -L"$GGML" -l:libggml-base.so -Wl,-rpath,"$GGML" || exit 1
calc() { awk "BEGIN { printf \"%.${2:-1}f\", $1 }"; }
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "nan"}'; }
# per_round PRELOAD TENSORS: ns per round, fastest of 20 batches of 40.
# A batch of 64-tensor rounds is 2,680 records: a quarter-full queue wakes
# the writer, which empties it between batches, so no record is lost and
# the traced side does all its work (the loss check below says otherwise).
per_round() {
    rm -rf "$T/vt"; mkdir "$T/vt"
    env VRAMTRACE_DIR="$T/vt" LD_PRELOAD="$1" "$PROG" "$2" 40 20 | sed -n 's/^ns_per_round //p'
}
round=0
while [ $round -lt "$ROUNDS" ]; do
    u1=$(per_round "" 1); t1=$(per_round "$SHIM" 1)
    u64=$(per_round "" 64); t64=$(per_round "$SHIM" 64)
    if [ -n "$u1" ] && [ -n "$t1" ] && [ -n "$u64" ] && [ -n "$t64" ]; then
        echo "$u1 $t1 $u64 $t64" | awk '{ b = $2 - $1; printf "%.0f %.1f %.3f\n", b, (($4 - $3) - b) / 63, $4 / $3 }' >>"$T/rounds"
    fi
    # A record the queue lost would make the traced side look cheaper.
    if "$ROOT/$B/vramtrace" dump "$T/vt"/*.vtrace 2>/dev/null | grep -q '^ggml_lost'; then
        echo "   ggml records lost during the timing: the figures are low" >>"$T/warn"
    fi
    round=$((round + 1))
done
[ -s "$T/rounds" ] || { echo "   every run failed"; exit 1; }
buf=$(cut -d' ' -f1 "$T/rounds" | median)
ten=$(cut -d' ' -f2 "$T/rounds" | median)
ratio=$(cut -d' ' -f3 "$T/rounds" | median)
verdict=$(awk -v v="$buf" 'BEGIN { print (v <= 1000 ? "met" : "MISSED") }')
printf "   %-44s %8s ns   target <= 1000 ns (about 1 us)  %s\n" "a buffer (1 tensor: 4 records)" "$buf" "$verdict"
printf "   %-44s %8s ns\n" "each further tensor" "$ten"
printf "   %-44s %8sx   (info)\n" "a 64-tensor buffer, traced / untraced" "$ratio"
[ -s "$T/warn" ] && sort -u "$T/warn"
exit 0
