#!/bin/sh
# llama-load.sh: row 5 of `make bench`, runnable alone. node-llama-cpp
# 3.21.1's prebuilt CUDA llama.cpp loads a 346 MiB model onto the simulated
# GPU, untraced and traced in turn each round (tests/bench/llama-load.mjs).
# The figure is the median of each round's traced/untraced load time
# (llama.loadModel's wall time, measured inside node), with the lowest and
# highest round beside it; the same for the CPU time the whole process
# spent during the load, which a busy machine disturbs less. Uses the
# packages tests/t/63-llama-real.t installed; never installs them.
#
#   sh tests/bench/llama-load.sh [ROUNDS]     default 9 (run from the root)
#   LLAMA_ENV="VRAMTRACE_UNWIND=fp"           extra environment, traced side
#   LLAMA_BASE=shim-disabled                  untraced side preloads the shim
#                                             with VRAMTRACE_DISABLE=1
# Prints one result line; exit 1 when a load failed, 0 when skipped.
set -u
B=${B:-build}
ROOT=$(pwd)
SHIM=$ROOT/$B/libvramtrace.so
SIM=$ROOT/$B/sim
ROUNDS=${1:-9}
MODULES=${VT_LLAMA_CACHE:-${HOME:-/tmp}/.cache/vramtrace/llama-3.21.1}/shipped/node_modules
if [ ! -d "$MODULES/node-llama-cpp" ] || ! command -v node >/dev/null; then
    echo "   skipped: no node or no node-llama-cpp in $MODULES (make test installs it)"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/vtllama.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
calc() { awk "BEGIN { printf \"%.${2:-1}f\", $1 }"; }
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "nan"}'; }

python3 tests/llama/make_gguf.py "$T/llama.gguf" 4
load_ms() {   # load_ms PRELOAD ENV...: "WALL CPU" of one load, in ms, or nothing
    pre=$1; shift
    mkdir -p "$T/vt"
    env "$@" VTSIM_DEVICES=24GiB GGML_CUDA_DISABLE_GRAPHS=1 VRAMTRACE_DIR="$T/vt" LD_LIBRARY_PATH="$SIM" \
        LD_PRELOAD="$pre" node tests/bench/llama-load.mjs "$MODULES" "$T/llama.gguf" 2>/dev/null |
        awk '$1 == "load_ms" && $3 == "cpu_ms" { print $2, $4 }'
    rm -rf "$T/vt"
}
untraced() {
    if [ "${LLAMA_BASE:-}" = shim-disabled ]; then load_ms "$SHIM" VRAMTRACE_DISABLE=1
    else load_ms ""; fi
}
# shellcheck disable=SC2086  # LLAMA_ENV is a list of NAME=VALUE words
traced() { load_ms "$SHIM" ${LLAMA_ENV:-}; }

untraced >/dev/null   # page cache and node's compile cache warm for both sides
fails=0 round=0
while [ $round -lt "$ROUNDS" ]; do
    # Which side goes first alternates, so a side is not always the one
    # that follows the other's exit (its page cache, its writeback).
    if [ $((round % 2)) = 0 ]; then u=$(untraced); t=$(traced)
    else t=$(traced); u=$(untraced); fi
    if [ -n "$u" ] && [ -n "$t" ]; then
        echo "$u $t" | awk '{ printf "%s %s %s %s %.4f %.4f\n", $1, $2, $3, $4, $3 / $1, $4 / $2 }' >>"$T/rounds"
    else
        fails=$((fails + 1))
    fi
    round=$((round + 1))
done
[ -s "$T/rounds" ] || { echo "   real llama.cpp load failed in every round"; exit 1; }
col() { awk -v c="$1" '{ print $c }' "$T/rounds" | median; }
lo=$(awk '{ print $5 }' "$T/rounds" | sort -g | head -1); hi=$(awk '{ print $5 }' "$T/rounds" | sort -g | tail -1)
r=$(col 5)
v=$(awk -v r="$r" 'BEGIN { if (r <= 1.02) print "met"; else printf "MISSED by %.3gx (%.0f%%)\n", r - 1.02, 100 * (r - 1.02) / 1.02 }')
printf "   wall: untraced %s ms, traced %s ms, traced/untraced %sx (rounds %s-%s)   target <= 1.02x: %s\n" \
    "$(col 1)" "$(col 3)" "$(calc "$r" 3)" "$(calc "$lo" 3)" "$(calc "$hi" 3)" "$v"
lo=$(awk '{ print $6 }' "$T/rounds" | sort -g | head -1); hi=$(awk '{ print $6 }' "$T/rounds" | sort -g | tail -1)
printf "   cpu:  untraced %s ms, traced %s ms, traced/untraced %sx (rounds %s-%s)\n" \
    "$(col 2)" "$(col 4)" "$(calc "$(col 6)" 3)" "$(calc "$lo" 3)" "$(calc "$hi" 3)"
[ -n "${LLAMA_RAW:-}" ] && sed 's/^/   round (wall, cpu untraced; wall, cpu traced; ratios): /' "$T/rounds"
[ $fails = 0 ] || { echo "   real llama.cpp load failed in $fails of $ROUNDS rounds"; exit 1; }
exit 0
