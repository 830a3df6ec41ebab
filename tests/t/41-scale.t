#!/bin/sh
# A directory of many runners: report's memory grows with what it keeps,
# not by a copy of every library's debug info per trace. One runner's trace
# (the example llama-server, built with -g, so its stacks have source
# lines), then 200 copies of it: report must stay within 4x the memory of
# the one, and say the same of each copy.
. tests/t/lib.sh
EX=$B/examples
for f in "$SHIM" "$VT" "$EX/llama-server"; do
    [ -e "$f" ] || { echo "1..0 # SKIP $f not built (make test-bins)"; exit 0; }
done
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
mkdir "$TMP/one" "$TMP/many"
env -u VTSIM_SHARED -u VTSIM_EXTERNAL -u VTSIM_RESERVE VTSIM_DEVICES=24GiB VRAMTRACE_DIR="$TMP/one" \
    LD_LIBRARY_PATH="$SIM" LD_PRELOAD="$SHIM_PRELOAD" "$EX/llama-server" -m llama-70b-q4_k_m -ngl 40 -c 8192 \
    >/dev/null 2>&1
set -- "$TMP"/one/*.vtrace
is "$#" 1 "one runner, one trace"
i=0
while [ $i -lt 200 ]; do cp "$1" "$TMP/many/r$i.vtrace"; i=$((i + 1)); done
# maxrss DIR: report's peak resident memory in KiB, from the kernel's
# accounting of the child (no GNU time needed).
maxrss() {
    python3 - "$VT" "$1" "$2" <<'PY'
import resource, subprocess, sys
with open(sys.argv[3], "w") as out:
    subprocess.run([sys.argv[1], "report", sys.argv[2]], stdout=out, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
}
one=$(maxrss "$TMP/one" "$TMP/one.txt")
many=$(maxrss "$TMP/many" "$TMP/many.txt")
if [ -n "${VT_SANITIZE:-}" ]; then
    # A sanitizer's shadow memory and quarantine are what it would measure.
    T=$((T+1)); echo "ok $T # SKIP memory under a sanitizer measures the sanitizer"
else
    check "report of 200 traces peaks at $many KiB, within 4x of one trace's $one KiB" test "$many" -le $((4 * one))
fi
is "$(grep -c '^VERDICT: PARTIAL OFFLOAD. 41 of 81 layers' "$TMP/many.txt")" 200 "and gives each of the 200 its verdict"
check "the source lines are still there" grep -q 'llama.cpp:[0-9]*  \[libllama.so\]' "$TMP/many.txt"
done_testing
