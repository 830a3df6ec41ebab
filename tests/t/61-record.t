#!/bin/sh
# `vramtrace record`: runs CMD under the shim into a directory, passes
# SIGINT/SIGTERM on to CMD, returns CMD's exit status, prints the verdict.
. tests/t/lib.sh
if ! "$VT" record --help >/dev/null 2>&1; then
    echo "1..0 # SKIP vramtrace has no record command yet (dispatch in analyzer/commands/main.c)"
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

out=$(cd "$TMP" && LD_PRELOAD=libm.so.6 "$VT" record -o rel -- sh -c 'echo "$LD_PRELOAD|$VRAMTRACE_DIR|$(stat -c %a "$VRAMTRACE_DIR")"' 2>/dev/null | head -1)
is "$out" "$(readlink -f "$SHIM"):libm.so.6|$(readlink -f "$TMP")/rel|700" "shim prepended to LD_PRELOAD; VRAMTRACE_DIR absolute, created 0700"

# A run that leaves no trace leaves no directory record made; a directory
# that was there before, or holds what CMD wrote, stays.
mkdir "$TMP/cwd"
out=$(cd "$TMP/cwd" && "$VT" record -- sh -c 'echo "$VRAMTRACE_DIR"' 2>"$TMP/true.err")
case $out in "$(readlink -f "$TMP")/cwd/vramtrace-2"*) ok "default dir ./vramtrace-YYYYmmdd-HHMMSS" ;;
    *) nok "default dir ./vramtrace-YYYYmmdd-HHMMSS"; echo "#   got '$out'" ;; esac
is "$(ls -A "$TMP/cwd")" "" "no traces: the default directory is removed"
check "... and record says so" grep -q "^  (the empty $out was removed)\$" "$TMP/true.err"
"$VT" record -o "$TMP/made" -- true 2>/dev/null
check "no traces: an empty -o DIR record created is removed" test ! -e "$TMP/made"
mkdir "$TMP/existing"
"$VT" record -o "$TMP/existing" -- true 2>/dev/null
check "an -o DIR that existed before stays" test -d "$TMP/existing"
"$VT" record -o "$TMP/wrote" -- sh -c 'echo log >"$VRAMTRACE_DIR/log"' 2>/dev/null
check "an -o DIR holding what CMD wrote stays" test -f "$TMP/wrote/log"

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

# The README's command without the simulated GPU on the library path: the
# example runs CPU-only (its runtime finds no libcuda.so.1). It still marks
# its model's weights, so the shim starts there (preload/ggml_buffers.c),
# and its named weights in the mapped model file say every layer ran on
# the CPU.
if [ -x "$B/examples/llama-cli" ] && [ -e "$SIM/libcuda.so.1" ]; then
    mkdir "$TMP/nogpu"
    (cd "$TMP/nogpu" && env -u LD_LIBRARY_PATH "$VT" record -- "$B/examples/llama-cli" -m llama-70b-q4_k_m -ngl 99 >/dev/null 2>"$TMP/nogpu.err")
    is "$?" 0 "an example without the driver: CMD's status"
    is "$(ls "$TMP"/nogpu/*/*.vtrace | wc -l)" 1 "a model loaded without CUDA leaves one trace"
    "$VT" report --json "$TMP"/nogpu/* >"$TMP/nogpu.json" 2>/dev/null
    is "$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); p=r["processes"][0]; print(p["verdict"], p["events"]["allocs"], p["ggml_marks"]["read"])' "$TMP/nogpu.json")" \
        "cpu_only 0 2" "its report: it ran on the CPU, no allocation, the two marks ggml made"
    # As the README writes it.
    LD_LIBRARY_PATH=$SIM VTSIM_DEVICES=24GiB "$VT" record -o "$TMP/demo" -- "$B/examples/ollama-serve" -m llama-70b-q4_k_m -c 8192 >"$TMP/demo.out" 2>&1
    is "$?" 0 "with LD_LIBRARY_PATH=build/sim the example runs on the simulated GPU"
    is "$(grep -c '^VERDICT: PARTIAL OFFLOAD' "$TMP/demo.out")" 1 "and record prints its runner's verdict"
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

# A program that cannot be run: record says so once, and no word of the
# driver; the empty directory goes.
mkdir "$TMP/norun"
(cd "$TMP/norun" && "$VT" record -- /nonexistent/prog >/dev/null 2>"$TMP/norun.err")
is "$?" 127 "record -- /nonexistent/prog: the shell's 127"
is "$(grep -c 'cannot run /nonexistent/prog' "$TMP/norun.err")/$(grep -c -e 'no traces' -e libcuda "$TMP/norun.err")" "1/0" \
    "it says it cannot run the program, and blames no driver"
is "$(ls -A "$TMP/norun")" "" "and leaves no empty directory behind"
# A directory the traces cannot go to: said before the program runs, exit 2.
mkdir "$TMP/ro"
if mount -t tmpfs -o ro tmpfs "$TMP/ro" 2>/dev/null; then
    "$VT" record -o "$TMP/ro" -- touch "$TMP/ran" >/dev/null 2>"$TMP/ro.err"
    rc=$?
    umount "$TMP/ro"
    is "$rc/$(head -1 "$TMP/ro.err")" "2/vramtrace record: cannot write traces into $TMP/ro: Read-only file system" \
        "a read-only trace directory: one line naming it, exit 2"
    check "... and the program was not run" test ! -e "$TMP/ran"
else
    T=$((T+1)); echo "ok $T # SKIP cannot mount a read-only tmpfs here"
    T=$((T+1)); echo "ok $T # SKIP cannot mount a read-only tmpfs here"
fi
done_testing
