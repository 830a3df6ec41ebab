#!/bin/sh
# `vramtrace record`: runs CMD under the shim into a directory, passes
# SIGINT/SIGTERM on to CMD, returns CMD's exit status, prints the verdict.
. tests/t/lib.sh
if ! "$VT" record --help >/dev/null 2>&1; then
    echo "1..0 # SKIP vramtrace has no record command yet (dispatch in analyzer/main.c)"
    exit 0
fi
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
# A non-interactive shell starts background jobs with SIGINT ignored, and
# record hands CMD the dispositions it got; `dfl` restores the default first,
# as for a command started from an interactive shell.
# Run as `( dfl CMD... ) &` so $! is CMD's pid: every step execs.
dfl() { exec perl -e '$SIG{INT} = $SIG{QUIT} = "DEFAULT"; exec @ARGV or die "exec: $!"' -- "$@"; }
unset VRAMTRACE_DIR VTSIM_SHARED VTSIM_EXTERNAL

check "--help prints usage" sh -c "'$VT' record --help | grep -q 'usage: vramtrace record'"
"$VT" record -o "$TMP/none" >/dev/null 2>&1
is "$?" 2 "no command: exit 2"
"$VT" record --lib "$TMP/missing.so" -- true >/dev/null 2>&1
is "$?" 2 "--lib that does not exist: exit 2"

"$VT" record -o "$TMP/a" -- sh -c 'exit 3' >/dev/null 2>&1
is "$?" 3 "returns CMD's exit status"
"$VT" record -o "$TMP/b" -- sh -c 'kill -TERM $$' >/dev/null 2>&1
is "$?" 143 "CMD killed by SIGTERM: 128+15"
"$VT" record -o "$TMP/c" -- "$TMP/no-such-program" >/dev/null 2>&1
is "$?" 127 "CMD not found: 127"

out=$(cd "$TMP" && LD_PRELOAD=libm.so.6 "$VT" record -o rel -- sh -c 'echo "$LD_PRELOAD|$VRAMTRACE_DIR"' 2>/dev/null | head -1)
is "$out" "$(readlink -f "$SHIM"):libm.so.6|$(readlink -f "$TMP")/rel" "shim prepended to LD_PRELOAD; VRAMTRACE_DIR absolute"
is "$(stat -c %a "$TMP/rel")" 700 "trace dir created 0700"

(cd "$TMP" && "$VT" record true >/dev/null 2>&1)
set -- "$TMP"/vramtrace-2*
check "default dir ./vramtrace-YYYYmmdd-HHMMSS" test -d "$1"

# sig NAME STATUS: CMD traps NAME and exits STATUS; record gets NAME.
sig() {
    rm -f "$TMP/ready"
    ( dfl "$VT" record -o "$TMP/sig$1" -- sh -c "trap 'exit $2' $1; : >'$TMP/ready'; while :; do sleep 0.05; done" >/dev/null 2>&1 ) &
    rec=$!
    i=0
    while [ ! -e "$TMP/ready" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
    kill -"$1" $rec
    wait $rec
    is "$?" "$2" "SIG$1 to record reaches CMD, whose status comes back"
}
sig TERM 42
sig INT 43

# A traced program: traces land in DIR, the verdict is printed, and Ctrl-C
# (SIGINT to record) stops a holder cleanly, leaving a complete trace.
# Not under ThreadSanitizer: record puts the shim first in LD_PRELOAD, and
# a TSan-built shim in an uninstrumented program needs the TSan runtime
# loaded before it (its writer thread then dies in __tsan_func_entry).
if [ "${VT_SANITIZE:-}" = thread ]; then
    T=$((T+1)); echo "ok $T # SKIP TSan: record cannot put the TSan runtime before the shim"
elif [ -x "$B/examples/gpu-hog" ] && [ -e "$SIM/libcudart.so.13" ]; then
    ( VTSIM_DEVICES=24GiB LD_LIBRARY_PATH="$SIM" dfl "$VT" record -o "$TMP/hog" -- "$B/examples/gpu-hog" 1024 >"$TMP/hog.out" 2>"$TMP/hog.err" ) &
    rec=$!
    i=0
    while ! grep -q ready "$TMP/hog.out" 2>/dev/null && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
    kill -INT $rec
    wait $rec
    is "$?" 0 "gpu-hog stopped by a forwarded SIGINT exits 0"
    set -- "$TMP"/hog/gpu-hog.*.vtrace
    check "its trace is in DIR" test -f "$1"
    check "the verdict is printed" grep -q "VERDICT" "$TMP/hog.out"
    check "and the command for the full report" grep -q "report $TMP/hog" "$TMP/hog.out"
    ended=$("$VT" report --json "$TMP/hog" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["processes"][0]["trace"]["ended"])' 2>&1)
    is "$ended" True "the trace is complete (END record)"
else
    T=$((T+1)); echo "ok $T # SKIP examples not built"
fi

# Two processes on one GPU (ollama's server and its runner): the combined
# per-GPU section comes with its contents, not as a lone heading.
if [ -x "$B/examples/ollama-serve" ]; then
    LD_LIBRARY_PATH=$SIM VTSIM_DEVICES=24GiB "$VT" record -o "$TMP/ollama" -- "$B/examples/ollama-serve" >"$TMP/ollama.out" 2>&1
    is "$?" 0 "ollama-serve under record exits 0"
    is "$(grep -c '^== GPUs across all 2 processes' "$TMP/ollama.out")" 1 "the combined GPU section is printed"
    check "... with its GPU's combined peak under it" sh -c "grep -A3 '^== GPUs across all' '$TMP/ollama.out' | grep -q 'combined peak'"
else
    T=$((T+1)); echo "ok $T # SKIP examples not built"
fi

done_testing
