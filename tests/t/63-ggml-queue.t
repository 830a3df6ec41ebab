#!/bin/sh
# ggml's record queue (preload/ggml_queue.c) under a flood: two threads mark
# their buffers 12000 times while the shim is idle, so the queue's 4096
# records fill and the rest are lost, counted by both threads at once (a
# data race ThreadSanitizer reported once); the WEIGHTS mark that follows
# starts the shim, whose writer writes the 4096 and one GGML_LOST.
# Then bursts once the shim runs: the writer looked at the queue only as
# often as CUDA's events made it look (every 1 s here, with no CUDA call),
# so three bursts of 3000 records 50 ms apart lost at least 1,904 of them;
# a quarter-full queue now wakes it. And one burst of 20,000, faster than
# a woken writer drains: it lost about 1,000; a record that finds the
# queue full now waits for the writer (ggml_buffers.c, queue_note).
. tests/t/lib.sh
P=$B/tests/shim/ggmlflood
for f in "$SHIM" "$VT" "$P"; do
    [ -e "$f" ] || { echo "1..0 # SKIP $f not built (make test-bins)"; exit 0; }
done
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT
out=$(under_shim "$D" "$P" 2>"$D/err"); rc=$?
is "$rc" 0 "ggmlflood exits 0 under the shim"
is "$out" "marks=12001" "ggmlflood made its 12001 marks"
is "$(cat "$D/err")" "vramtrace: ggml's buffers and tensors come faster than the trace is written; some are lost (the report says so)" \
    "the loss is said once, and nothing else is (no sanitizer report)"
set -- "$D"/*.vtrace
is "$#" 1 "one trace"
"$VT" dump --count "$1" >"$D/count" 2>&1
is "$(awk '$1 == "ggml_buffer" || $1 == "ggml_lost" { printf "%s %s;", $1, $2 }' "$D/count")" "ggml_buffer 4096;ggml_lost 1;" \
    "the queue's 4096 records and one GGML_LOST are written"
"$VT" dump "$1" >"$D/dump" 2>&1
is "$(awk '$1 == "ggml_lost" { sub(/.* lost=/, ""); print }' "$D/dump")" 7905 "GGML_LOST counts the 7905 marks that found the queue full"
is "$(grep -c ' usage=WEIGHTS ' "$D/dump")" 0 "the WEIGHTS mark found it full too"
"$VT" report --json "$1" >"$D/json" 2>/dev/null
is "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["processes"][0]["placement"]["records_lost"])' "$D/json" 2>/dev/null)" 7905 \
    "report --json: placement's records_lost is 7905"

# none_lost NAME MARKS DESC ARGS...: ggmlflood ARGS after start-up (the
# writer's own look every 1 s) writes all MARKS records, none lost.
none_lost() {
    name=$1 marks=$2 desc=$3; shift 3
    mkdir "$D/$name"
    out=$(VRAMTRACE_FLUSH_MS=1000 under_shim "$D/$name" "$P" "$@" 2>"$D/$name.err"); rc=$?
    is "$rc/$out" "0/marks=$marks" "ggmlflood $*: made its $marks marks"
    set -- "$D/$name"/*.vtrace
    "$VT" dump --count "$1" >"$D/$name.count" 2>&1
    is "$(awk '$1 == "ggml_buffer" || $1 == "ggml_lost" { printf "%s %s;", $1, $2 }' "$D/$name.count")" "ggml_buffer $marks;" \
        "$desc: all $marks records written, none lost"
    is "$(cat "$D/$name.err")" "" "$desc: no loss said on stderr"
}
none_lost bursts 9001 "three bursts of 3,000 after start-up" bursts
none_lost burst 20001 "one burst of 20,000 after start-up" burst 20000
done_testing
