#!/bin/sh
# run.sh: `make bench`. Prints the overhead table of docs/performance.md:
# every figure is a ratio or a difference against a baseline measured in
# this same run (the machines are shared and noisy), repeated, with medians.
#
#   BENCH_QUICK=1     smoke sizes (~30 s): checks every row prints
#   BENCH_EVENTS=N    events in the analyzer's big trace (default 50M)
#   BENCH_REPS=N      repetitions of each hot-path run (default 5, quick 1)
#   row 5 alone:      sh tests/bench/llama-load.sh [ROUNDS] (see its header)
#   row 6 alone:      python3 tests/bench/scrape.py build/vramtrace build/bench/gentrace N [REPS]
#   row 7 alone:      sh tests/bench/ggml-hooks.sh [ROUNDS]
#
# Run from the repository root after `make`; needs nothing from the network.
# heaptrack is the anchor of rows 1 and 3; without it those columns say how
# to install it and are skipped.
set -u
B=${B:-build}
ROOT=$(pwd)
SHIM=$ROOT/$B/libvramtrace.so
EMPTY=$ROOT/$B/bench/libempty.so
HOT=$ROOT/$B/bench/hotpath
SPAWN=$ROOT/$B/bench/vtspawn
GEN=$ROOT/$B/bench/gentrace
VT=$ROOT/$B/vramtrace
SIM=$ROOT/$B/sim

QUICK=${BENCH_QUICK:-}
if [ -n "$QUICK" ] && [ "$QUICK" != 0 ]; then
    QUICK=1; PAIRS=5000; REPS=${BENCH_REPS:-1}; STARTN=10; EVENTS=${BENCH_EVENTS:-200000}
    STACK_EVENTS=200000; RPAIRS=5000; AREPS=1
else
    QUICK=0; PAIRS=200000; REPS=${BENCH_REPS:-5}; STARTN=200; EVENTS=${BENCH_EVENTS:-50000000}
    # AREPS 5, not 3: a median of three let one slow stretch of this shared
    # machine decide the 50M row (18.6 against 20.4 Mev/s in one pair of runs).
    STACK_EVENTS=5000000; RPAIRS=100000; AREPS=5
fi
# The 8-thread run does twice the single thread's pairs in total.
TPAIRS=$((PAIRS / 4))
RING=4194304   # 4M events: nothing drops even at depth 0 between flushes

T=$(mktemp -d "${TMPDIR:-/tmp}/vtbench.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM

# ---- helpers -------------------------------------------------------------

# heaptrack: the anchor. Installed when root and not quick, else skipped.
HT=$(command -v heaptrack || true)
if [ -z "$HT" ] && [ "$QUICK" = 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get install -y heaptrack >/dev/null 2>&1 && HT=$(command -v heaptrack || true)
fi
[ -z "$HT" ] && HT_NOTE="heaptrack not installed: run 'apt-get install -y heaptrack' (column skipped)"

field() {   # field NAME LINE: the value of NAME=... in LINE
    echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -1
}
median() {  # median of the numbers on stdin
    sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "nan"}'
}
calc() { awk "BEGIN { printf \"%.${2:-1}f\", $1 }"; }
# verdict VALUE OP TARGET UNIT: "met" or "MISSED by X UNIT (Y%)"
verdict() {
    awk -v v="$1" -v op="$2" -v t="$3" -v u="${4:-}" 'BEGIN {
        if (v == "nan" || v == "") { print "n/a"; exit }
        ok = (op == "<=") ? (v <= t) : (v >= t)
        if (ok) { print "met"; exit }
        d = (op == "<=") ? v - t : t - v
        printf "MISSED by %.3g%s (%.0f%%)\n", d, u, 100 * d / t }'
}

# run_hot TAG ENV... -- ARGS: one hotpath run; appends wall ns/pair to $T/TAG
# and the process's CPU ns/pair (every thread, the writer's too) to $T/TAG.cpu.
# ENV "shim" preloads the shim into $T/vt/TAG.N, "heaptrack" runs under
# heaptrack into $T/ht/TAG.N.
run_hot() {
    tag=$1; how=$2; shift 2
    n=$(($(cat "$T/$tag.n" 2>/dev/null || echo 0) + 1)); echo $n >"$T/$tag.n"
    case $how in
    base) line=$(LD_LIBRARY_PATH=$SIM "$HOT" "$@" 2>>"$T/errors") ;;
    shim) mkdir -p "$T/vt/$tag.$n"
          line=$(env LD_LIBRARY_PATH=$SIM LD_PRELOAD=$SHIM VRAMTRACE_DIR="$T/vt/$tag.$n" \
                 VRAMTRACE_RING=$RING ${HOT_ENV:-} "$HOT" "$@" 2>>"$T/errors") ;;
    heaptrack) mkdir -p "$T/ht"
          line=$("$HT" -o "$T/ht/$tag.$n" "$HOT" "$@" 2>&1 | tee "$T/ht/$tag.$n.log" | grep '^threads=') ;;
    esac
    w=$(field wall_ns "$line"); p=$(field pairs "$line")
    if [ -z "$w" ] || [ -z "$p" ]; then echo "bench: $tag run $n failed: $line" >>"$T/errors"; return; fi
    calc "$w / $p" 2 >>"$T/$tag"; echo >>"$T/$tag"
    c=$(field cpu_ns "$line")
    [ -n "$c" ] && { calc "$c / $p" 2 >>"$T/$tag.cpu"; echo >>"$T/$tag.cpu"; }
}
# paired_overhead A B: median over repetitions of (B_i - A_i), ns/pair
paired_overhead() {
    paste "$T/$1" "$T/$2" | awk 'NF == 2 { print $2 - $1 }' | median
}
med() { median <"$T/$1"; }
# dropped events in every shim trace of TAG (from each END record)
dropped() {
    total=0
    for f in "$T"/vt/"$1".*/*.vtrace; do
        [ -f "$f" ] || continue
        d=$("$VT" dump "$f" 2>/dev/null | sed -n 's/^end .*dropped=\([0-9]*\).*/\1/p')
        total=$((total + ${d:-0}))
    done
    echo $total
}
# bytes per event of a shim trace (events from its END record)
vt_bpe() {
    f=$(ls "$1"/*.vtrace 2>/dev/null | head -1)
    [ -f "$f" ] || { echo nan; return; }
    ev=$("$VT" dump "$f" 2>/dev/null | sed -n 's/^end .*events=\([0-9]*\).*/\1/p')
    calc "$(wc -c <"$f") / ${ev:-0}" 3
}
# bytes per event of a heaptrack file: events = allocations + frees
ht_bpe() {
    log=$1.log; f=$1.zst
    [ -f "$f" ] || { echo nan; return; }
    a=$(sed -n 's/^[[:space:]]*allocations:[[:space:]]*\([0-9]*\).*/\1/p' "$log" | head -1)
    l=$(sed -n 's/^[[:space:]]*leaked allocations:[[:space:]]*\([0-9]*\).*/\1/p' "$log" | head -1)
    calc "$(wc -c <"$f") / (2 * ${a:-0} - ${l:-0})" 3
}

CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "vramtrace bench: $(nproc) CPUs ($CPU), $(uname -r), quick=$QUICK"
echo "hot path: $PAIRS pairs x $REPS reps, depth 20, 64 live, VRAMTRACE_RING=$RING; medians of paired runs"
[ -n "${HT_NOTE:-}" ] && echo "$HT_NOTE"

# ---- 1. hot path -----------------------------------------------------------
# Every repetition runs every variant once, interleaved, so drift in the
# machine's load hits all of them alike.
for r in $(seq 1 "$REPS"); do
    run_hot cu_base base cu $PAIRS
    run_hot cu_shim shim cu $PAIRS
    run_hot rt_base base rt $PAIRS
    run_hot rt_shim shim rt $PAIRS
    HOT_ENV=VRAMTRACE_DEPTH=0 run_hot d0_shim shim cu $PAIRS
    run_hot t8_base base cu $TPAIRS threads=8
    run_hot t8_shim shim cu $TPAIRS threads=8
    run_hot m_base base malloc $PAIRS
    [ -n "$HT" ] && run_hot m_ht heaptrack malloc $PAIRS
done
NCPU=$(nproc)
EFF=$((NCPU < 8 ? NCPU : 8))
cu_o=$(paired_overhead cu_base cu_shim)
rt_o=$(paired_overhead rt_base rt_shim)
d0_o=$(paired_overhead cu_base d0_shim)
# 8 threads against 1, in CPU time of the whole process per pair (every
# thread, the shim's writer included, until it has drained the loop): the
# same unit on both sides. Wall time would not be: a single thread leaves a
# core idle for the writer, 8 threads on a small machine do not, so wall x
# cores charges the writer's work to the 8-thread run alone. A lock convoy
# still shows: spinning, cache-line transfers and the futex round trips of
# blocked threads are all CPU time. Wall x cores is printed beside it.
t1c_o=$(paired_overhead cu_base.cpu cu_shim.cpu)
t8c_o=$(paired_overhead t8_base.cpu t8_shim.cpu)
t8_o=$(paste "$T/t8_base" "$T/t8_shim" | awk -v c=$EFF 'NF == 2 { print ($2 - $1) * c }' | median)
ht_o=nan
[ -n "$HT" ] && ht_o=$(paired_overhead m_base m_ht)

echo
echo "1. HOT PATH (ns per alloc+free pair)        baseline   traced  overhead   target                 verdict"
row1() { printf "   %-38s %8s %8s %9s   %-22s %s\n" "$@"; }
row1 "cuMemAlloc_v2/cuMemFree_v2 (depth 20)" "$(med cu_base)" "$(med cu_shim)" "$cu_o" "" "dropped=$(dropped cu_shim)"
row1 "cudaMalloc/cudaFree (depth 20)" "$(med rt_base)" "$(med rt_shim)" "$rt_o" "" "dropped=$(dropped rt_shim)"
if [ -n "$HT" ]; then
    row1 "malloc/free under heaptrack (depth 20)" "$(med m_base)" "$(med m_ht)" "$ht_o" "(the anchor)" ""
    ratio=$(calc "$cu_o / $ht_o" 2); rratio=$(calc "$rt_o / $ht_o" 2)
    row1 "ours / heaptrack, driver API" "" "" "${ratio}x" "<= 0.5x" "$(verdict "$ratio" "<=" 0.5 x)"
    row1 "ours / heaptrack, runtime API" "" "" "${rratio}x" "<= 0.5x" "$(verdict "$rratio" "<=" 0.5 x)"
else
    row1 "ours / heaptrack" "" "" "n/a" "<= 0.5x" "skipped (no heaptrack)"
fi
row1 "VRAMTRACE_DEPTH=0 (cu)" "$(med cu_base)" "$(med d0_shim)" "$d0_o" "<= 100 ns" \
    "$(verdict "$d0_o" "<=" 100 " ns") dropped=$(dropped d0_shim)"
t8r=$(calc "$t8c_o / $t1c_o" 2)
row1 "1 thread (cu), CPU ns/pair, all threads" "$(med cu_base.cpu)" "$(med cu_shim.cpu)" "$t1c_o" "" ""
row1 "8 threads (cu), CPU ns/pair, all threads" "$(med t8_base.cpu)" "$(med t8_shim.cpu)" "$t8c_o" "" "dropped=$(dropped t8_shim)"
row1 "8-thread / 1-thread overhead (CPU)" "" "" "${t8r}x" "<= 2x" "$(verdict "$t8r" "<=" 2 x)"
row1 "8 threads, wall x $EFF cores (info)" "$(med t8_base)" "$(med t8_shim)" "$t8_o" "" "$(calc "$t8_o / $cu_o" 2)x the 1-thread wall figure"

# ---- 2. processes that never touch CUDA -------------------------------------
NC=$T/nocuda; mkdir -p "$NC"
cat >"$T/script.sh" <<'EOF'
#!/bin/sh
# a wrapper script's shape: builtins, a command substitution, two children
x=$(echo hello)
for i in 1 2 3; do y="$x$i"; done
/bin/true
cat /dev/null
EOF
chmod +x "$T/script.sh"
echo
echo "2. NO CUDA (startup, median of $STARTN interleaved runs)  base us  empty.so  shim us  shim/base  floor   target   verdict"
row2() {
    out=$(VRAMTRACE_DIR=$NC "$SPAWN" -n $STARTN -d "$NC" -p "$EMPTY" -p "$SHIM" -- "$@" 2>>"$T/errors")
    b=$(field med_ns "$(echo "$out" | grep '^base ')"); e=$(field med_ns "$(echo "$out" | grep '^preload1 ')")
    s=$(field med_ns "$(echo "$out" | grep '^preload2 ')")
    if [ -z "$b" ] || [ -z "$s" ]; then printf "   %-30s failed\n" "$LABEL"; return; fi
    ratio=$(calc "$s / $b" 3); floor=$(calc "$e / $b" 3)
    printf "   %-30s %8s %9s %8s %9sx %6sx   <= 1.05x %s\n" "$LABEL" "$(calc "$b / 1000")" "$(calc "$e / 1000")" \
        "$(calc "$s / 1000")" "$ratio" "$floor" "$(verdict "$ratio" "<=" 1.05 x)"
}
LABEL="/bin/true"; row2 /bin/true
LABEL="shell script (3 execs)"; row2 "$T/script.sh"
LABEL="16 idle threads"; row2 "$HOT" none 0 threads=16 settle_ms=0
files=$(ls -A "$NC" | wc -l)
tb=$(field tasks "$(LD_LIBRARY_PATH=$SIM "$HOT" none 0 threads=16 settle_ms=0)")
ts=$(field tasks "$(cd "$NC" && VRAMTRACE_DIR=$NC LD_PRELOAD=$SHIM "$HOT" none 0 threads=16 settle_ms=0)")
printf "   %-30s %s\n" "files written (all runs)" "$files   target 0: $( [ "$files" = 0 ] && echo met || echo MISSED)"
printf "   %-30s %s\n" "threads started" "$((ts - tb)) (tasks $tb without, $ts with)   target 0: $( [ "$ts" = "$tb" ] && echo met || echo MISSED)"

# ---- 3. trace size ------------------------------------------------------------
echo
echo "3. TRACE SIZE (compressed bytes per event)             ours  heaptrack   ours/heaptrack  target  verdict"
mkdir -p "$T/vt/rand.1"
env LD_LIBRARY_PATH=$SIM LD_PRELOAD=$SHIM VRAMTRACE_DIR="$T/vt/rand.1" VRAMTRACE_RING=$RING \
    "$HOT" cu $RPAIRS stacks=4096 sizes=random settle_ms=0 >/dev/null 2>>"$T/errors"
[ -n "$HT" ] && "$HT" -o "$T/ht/rand.1" "$HOT" malloc $RPAIRS stacks=4096 sizes=random settle_ms=0 >"$T/ht/rand.1.log" 2>&1
row3() {
    ours=$1; theirs=$2
    if [ "$theirs" = nan ] || [ -z "$HT" ]; then r=nan; v="skipped (no heaptrack)"
    else r=$(calc "$ours / $theirs" 2); v=$(verdict "$r" "<=" 1 x); fi
    printf "   %-48s %7s %9s %13sx  <= 1x   %s\n" "$LABEL" "$ours" "$theirs" "$r" "$v"
}
HTB=nan; [ -n "$HT" ] && HTB=$(ht_bpe "$T/ht/m_ht.1")
LABEL="hot path (fixed sizes, one stack)"; row3 "$(vt_bpe "$T/vt/cu_shim.1")" "$HTB"
HTB=nan; [ -n "$HT" ] && HTB=$(ht_bpe "$T/ht/rand.1")
LABEL="random sizes, 4096 stacks ($RPAIRS pairs)"; row3 "$(vt_bpe "$T/vt/rand.1")" "$HTB"

# ---- 4. analyzer --------------------------------------------------------------
echo
# -L: each stack's nodes just before its first event, as the shim writes
# them (the report's lookahead must read on past them).
g0=$(date +%s.%N)
"$GEN" -L -o "$T/big.vtrace" -e "$EVENTS" -l 10000 -s 1000 >/dev/null || echo "bench: gentrace failed" >>"$T/errors"
g1=$(date +%s.%N)
"$GEN" -L -o "$T/stacks.vtrace" -e "$STACK_EVENTS" -l 10000 -s 100000 >/dev/null || echo "bench: gentrace failed" >>"$T/errors"
# The two traces are ~450 MB of dirty page cache: flushed here, so their
# writeback cannot land in the first rows' timing (unsynced, the text row,
# timed first, came out 6-9 % slower than --json, which does more;
# alternated by hand the two were equal).
sync
echo "4. ANALYZER (vramtrace report; $AREPS rounds, formats interleaved; medians; big trace generated in $(calc "$g1 - $g0" 1) s)"
# The LTO build's speed depends on gcc inlining the per-event helpers into
# the replay loop (analyzer/model/model_events.c, vt_model_prefetch): say so when it did not.
OUTLINED=$(nm "$VT" 2>/dev/null | sed -n 's/.* [tT] \(vt_model_prefetch\|vt_reader_events\|vt_model_feed_event\)[.a-z_0-9]*$/\1/p' | sort -u | tr '\n' ' ')
[ -n "$OUTLINED" ] && echo "   note: out of line in this build, the figures below may be low: $OUTLINED"
echo "   trace                                   format   wall s   Mev/s wall  Mev/s cpu  peak RSS MB  vs text  verdict"
HAS_HTML=0
"$VT" report --help 2>/dev/null | grep -q -- '--html' && HAS_HTML=1
FORMATS="text json count"
[ $HAS_HTML = 1 ] && FORMATS="text json html count"
# measure4 TRACE: AREPS rounds, each running the text report, --json,
# --html and `dump --count` (reading alone: it reads the way the report
# does, in bulk, and keeps nothing) once, in an order that rotates every
# round, so a slow stretch of this shared machine lands on every format
# alike. Per run: $T/a4.FMT.{w,c} (wall and CPU ns), $T/a4.FMT.rss (KiB),
# $T/a4.FMT.fail; $T/a4.FMT.rel, its CPU time over the same round's text.
measure4() {
    rm -f "$T"/a4.*
    round=0
    while [ $round -lt $AREPS ]; do
        order=$(echo $FORMATS | tr ' ' '\n' | awk -v r=$round '{f[NR-1]=$0} END {for (i = 0; i < NR; i++) print f[(i + r) % NR]}')
        for fmt in $order; do
            case $fmt in
            text) out=$("$SPAWN" -n 1 -- "$VT" report "$1" 2>>"$T/errors") ;;
            json) out=$("$SPAWN" -n 1 -- "$VT" report --json "$1" 2>>"$T/errors") ;;
            html) out=$("$SPAWN" -n 1 -- "$VT" report --html "$T/report.html" "$1" 2>>"$T/errors") ;;
            count) out=$("$SPAWN" -n 1 -- "$VT" dump --count "$1" 2>>"$T/errors") ;;
            esac
            out=$(echo "$out" | grep '^base ')
            if [ -z "$out" ] || [ "$(field fails "$out")" != 0 ]; then echo 1 >>"$T/a4.$fmt.fail"; continue; fi
            cpu=$(field cpu_med_ns "$out")
            field med_ns "$out" >>"$T/a4.$fmt.w"
            echo "$cpu" >>"$T/a4.$fmt.c"
            field maxrss_kb "$out" >>"$T/a4.$fmt.rss"
            eval "cpu_$fmt=$cpu"
        done
        for fmt in json html; do
            eval "cpu=\${cpu_$fmt:-}"
            [ -n "$cpu" ] && [ -n "${cpu_text:-}" ] && echo "$(calc "$cpu / $cpu_text" 4)" >>"$T/a4.$fmt.rel"
        done
        unset cpu_text cpu_json cpu_html cpu_count
        round=$((round + 1))
    done
}
row4() {   # row4 LABEL EVENTS FMT, after measure4
    label=$1; events=$2; fmt=$3
    if [ -s "$T/a4.$fmt.fail" ] || [ ! -s "$T/a4.$fmt.c" ]; then printf "   %-40s %-8s failed\n" "$label" "$fmt"; return; fi
    w=$(median <"$T/a4.$fmt.w"); c=$(median <"$T/a4.$fmt.c"); rss=$(sort -g "$T/a4.$fmt.rss" | tail -1)
    eps=$(calc "$events / $w * 1000" 1); epc=$(calc "$events / $c * 1000" 1); mb=$(calc "$rss / 1024" 1)
    if [ "$fmt" = text ]; then
        rel=1.00
        # The spread of the runs behind the median: this machine's noise,
        # so a row near the line can be read from one bench run.
        lo=$(sort -g "$T/a4.text.c" | tail -1); hi=$(sort -g "$T/a4.text.c" | head -1)
        v="$(verdict "$epc" ">=" 20 " Mev/s"), RSS $(verdict "$mb" "<=" 100 " MB") (runs: $(calc "$events / $lo * 1000" 1)-$(calc "$events / $hi * 1000" 1) Mev/s)"
        if [ -s "$T/a4.count.c" ] && [ ! -s "$T/a4.count.fail" ]; then
            fc=$(median <"$T/a4.count.c")
            FLOOR_NOTE="reading alone (dump --count): $(calc "$fc / 1e6" 0) ms cpu, $(calc "$events / $fc * 1000" 1) Mev/s; the rest (model, printing) $(calc "($c - $fc) / $events" 1) ns/event"
        fi
        fmtname=text
    else
        # The median of each round's CPU ratio to the text report's.
        rel=$(calc "$(median <"$T/a4.$fmt.rel")" 2); v=$(verdict "$rel" "<=" 1.2 x)
        fmtname=--$fmt
    fi
    printf "   %-40s %-8s %7s %11s %10s %12s %7sx  %s\n" "$label" "$fmtname" "$(calc "$w / 1e9" 2)" "$eps" "$epc" "$mb" "$rel" "$v"
    if [ -n "${FLOOR_NOTE:-}" ]; then printf "   %-40s %s\n" "" "$FLOOR_NOTE"; FLOOR_NOTE=; fi
}
for which in big stacks; do
    if [ $which = big ]; then label="$EVENTS events, 10k live"; ev=$EVENTS
    else label="$STACK_EVENTS events, 100k stacks"; ev=$STACK_EVENTS; fi
    measure4 "$T/$which.vtrace"
    row4 "$label" "$ev" text
    row4 "" "$ev" json
    if [ $HAS_HTML = 1 ]; then row4 "" "$ev" html
    else printf "   %-40s %-8s n/a (vramtrace report has no --html yet)\n" "" "--html"; fi
done

# ---- 5. real llama.cpp ------------------------------------------------------
# tests/bench/llama-load.sh, which runs alone too: see its header.
LREPS=$([ "$QUICK" = 1 ] && echo 1 || echo 9)
echo
echo "5. REAL LLAMA.CPP MODEL LOAD ($LREPS rounds, untraced and traced interleaved; medians)"
B=$B sh tests/bench/llama-load.sh "$LREPS" || echo "real llama.cpp load failed" >>"$T/errors"

# ---- 6. serve's scrape of a directory -----------------------------------------
# tests/bench/scrape.py: one growing trace among many, read by a serve that
# keeps what it read between scrapes.
SCRAPEN=$([ "$QUICK" = 1 ] && echo 100 || echo 1000)
SREPS=$([ "$QUICK" = 1 ] && echo 1 || echo 5)
echo
echo "6. SERVE SCRAPE ($SCRAPEN traces, one growing; wall ms from the client, medians of $SREPS)"
python3 tests/bench/scrape.py "$VT" "$GEN" "$SCRAPEN" "$SREPS" || echo "serve scrape failed" >>"$T/errors"

# ---- 7. ggml's buffer hooks ----------------------------------------------------
# tests/bench/ggml-hooks.sh, which runs alone too: see its header.
GREPS=$([ "$QUICK" = 1 ] && echo 1 || echo 7)
echo
echo "7. GGML HOOKS (real libggml-base.so; $GREPS rounds, untraced and traced interleaved; medians)"
B=$B sh tests/bench/ggml-hooks.sh "$GREPS" || echo "ggml hooks bench failed" >>"$T/errors"

if [ -s "$T/errors" ]; then
    echo
    echo "errors:"; sed 's/^/   /' "$T/errors" | head -20
    exit 1
fi
exit 0
