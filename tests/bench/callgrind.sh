#!/bin/sh
# callgrind.sh: shim instructions per hotpath pair, deterministic.
#   sh tests/bench/callgrind.sh [SHIM.so ...]   (default: build/libvramtrace.so)
# For each shim (and untraced), runs `hotpath cu` (or HOTPATH_MODE) with 10k and 20k pairs
# under callgrind, one output per thread, and prints the busiest thread's
# Ir per pair as (Ir(20k) - Ir(10k)) / 10k, so start-up cancels. Extra
# hotpath arguments and VRAMTRACE_* come from HOTPATH_ARGS / the environment;
# HOTPATH_MODE=launch counts graph launches instead of pairs.
# KEEP=DIR copies each run's busiest-thread output to DIR/<n>.<pairs>.cg
# (n counts the runs, untraced first) for callgrind_annotate.
set -u
B=${B:-build}
ROOT=$(pwd)
HOT=$ROOT/$B/bench/hotpath
T=$(mktemp -d "${TMPDIR:-/tmp}/vtcg.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
[ $# -eq 0 ] && set -- "$ROOT/$B/libvramtrace.so"
ir() {  # ir PRELOAD PAIRS: Ir of the thread that ran the most instructions
    rm -f "$T"/cg.*
    LD_LIBRARY_PATH=$ROOT/$B/sim LD_PRELOAD=$1 VRAMTRACE_DIR=$T valgrind --tool=callgrind \
        --separate-threads=yes --callgrind-out-file="$T/cg.%p" "$HOT" "${HOTPATH_MODE:-cu}" "$2" ${HOTPATH_ARGS:-} \
        >/dev/null 2>&1
    best=$(for f in "$T"/cg.*; do echo "$(sed -n 's/^summary: //p' "$f") $f"; done | sort -g | tail -1)
    if [ -n "${KEEP:-}" ]; then
        mkdir -p "$KEEP"
        cp "${best#* }" "$KEEP/$run.$2.cg"
    fi
    echo "${best%% *}"
}
run=0
per_pair() { a=$(ir "$1" 10000); b=$(ir "$1" 20000); echo $(( (b - a) / 10000 )); }
base=$(per_pair "")
echo "untraced: $base Ir/pair"
for s in "$@"; do
    run=$((run + 1))
    p=$(per_pair "$s")
    echo "$s: $p Ir/pair traced, shim $((p - base))"
done
