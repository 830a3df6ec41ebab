#!/bin/sh
# `make bench` in its quick mode prints every row of its table. A smoke
# test only: the figures of a 1-repetition run on a shared machine mean
# nothing, so nothing here compares them with a target.
. tests/t/lib.sh
if [ -n "${VT_SANITIZE:-}" ]; then
    echo "1..0 # SKIP a benchmark under a sanitizer measures the sanitizer (and heaptrack waits forever)"; exit 0
fi
out=$(BENCH_QUICK=1 BENCH_EVENTS=50000 sh tests/bench/run.sh 2>&1)
rc=$?
is "$rc" 0 "bench quick mode runs cleanly"
for section in "1. HOT PATH" "2. NO CUDA" "3. TRACE SIZE" "4. ANALYZER" "6. SERVE SCRAPE" "7. GGML HOOKS"; do
    if echo "$out" | grep -q "^$section"; then ok "table has section $section"; else nok "table has section $section"; fi
done
for row in "cuMemAlloc_v2/cuMemFree_v2" "cudaMalloc/cudaFree" "VRAMTRACE_DEPTH=0" "8-thread / 1-thread" \
           "/bin/true" "shell script" "16 idle threads" "files written" "threads started" \
           "hot path (fixed sizes" "random sizes" "events, 10k live" "events, 100k stacks" \
           "nothing changed" "one small trace grown among 100"; do
    if echo "$out" | grep -qF -- "$row"; then ok "row: $row"; else nok "row: $row"; fi
done
# Each analyzer trace's text row: the spread of its runs, then its floor.
is "$(echo "$out" | grep -c '(runs: [0-9.]*-[0-9.]* Mev/s)$')" 2 "analyzer: both text rows give their runs' spread"
is "$(echo "$out" | grep -c 'reading alone (dump --count): [0-9]* ms cpu, [0-9.]* Mev/s; the rest (model, printing) [0-9.]* ns/event')" 2 \
    "analyzer: both text rows are followed by their reading floor"
# What a scrape read is exact too: nothing when nothing changed, one trace
# when one grew.
is "$(echo "$out" | awk '/nothing changed/ { print $4, $5 }')" "0 0" "scrape: nothing changed, nothing read"
is "$(echo "$out" | awk '/one trace grew/ { print $(NF-2) }' | tr '\n' ' ')" "1 1 " "scrape: one trace grew, one read"
# The no-CUDA guarantees are exact, so they are checked even here.
if echo "$out" | grep -q "files written (all runs) *0 "; then ok "no CUDA: no file written"; else nok "no CUDA: no file written"; fi
if echo "$out" | grep -q "threads started *0 "; then ok "no CUDA: no thread started"; else nok "no CUDA: no thread started"; fi
# Row 7 needs the real libggml-base.so that 63-llama-real.t installs; it
# says when it skips.
if echo "$out" | grep -q "a buffer (1 tensor: 4 records) *-\{0,1\}[0-9]* ns" || echo "$out" | grep -q "skipped: no libggml-base.so"; then
    ok "row: ggml hooks (or its skip)"
else
    nok "row: ggml hooks (or its skip)"
fi
echo "$out" | grep -q "^errors:" && echo "$out" | sed 's/^/# /'

# gentrace -z draws stacks with Zipf weights (docs/CHANGELOG.md,
# bcaf07e): the most used of 1,000 stacks takes 1/H(1000) = 13.4 % of the
# allocations, against 23 of ~10,000 when drawn uniformly. Its seed is
# fixed, so the counts are exact.
T0=$(tmpdir)
alloc_stacks() {   # distinct allocation stacks, and the busiest one's count
    "$VT" dump "$1" | awk '$1 == "event" && / api=cudaMalloc / { for (i = 2; i <= NF; i++) if ($i ~ /^stack=/) c[$i]++ }
        END { n = 0; m = 0; for (k in c) { n++; if (c[k] > m) m = c[k] }; print n, m }'
}
"$B/bench/gentrace" -L -z -o "$T0/z.vtrace" -e 20000 -l 100 -s 1000 >/dev/null
is "$(alloc_stacks "$T0/z.vtrace")" "904 1319" "gentrace -z: 904 of 1000 stacks used, the busiest by 1319 allocations"
"$B/bench/gentrace" -L -o "$T0/u.vtrace" -e 20000 -l 100 -s 1000 >/dev/null
is "$(alloc_stacks "$T0/u.vtrace")" "1000 23" "gentrace uniform: every stack used, the busiest by 23"
"$VT" report "$T0/z.vtrace" >/dev/null 2>&1
is "$?" 0 "gentrace -z: the report reads its trace"
rm -rf "$T0"
done_testing
