#!/bin/sh
# `vramtrace top` as a person uses it: in a terminal (tmux), while a traced
# server's KV cache grows (examples/README.md story 2: 1600 MiB of KV at
# 2048 cells, 3200 MiB at 4096), read from the screen; q quits and gives
# the terminal back. It never writes to the traces.
. tests/t/lib.sh
EX=$B/examples
for f in "$VT" "$SHIM" "$EX/llama-server-chat"; do
    [ -e "$f" ] || { echo "1..0 # SKIP $f not built (make test-bins)"; exit 0; }
done
command -v tmux >/dev/null || { echo "1..0 # SKIP tmux not installed (apt-get install tmux)"; exit 0; }
TMP=$(tmpdir)
S=vt-top-$$
cleanup() { tmux kill-session -t $S 2>/dev/null; exec 3>&- 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
wait_for() { t=$(($1 * 10)); shift; while ! "$@" >/dev/null 2>&1 && [ $t -gt 0 ]; do sleep 0.1; t=$((t - 1)); done; "$@" >/dev/null 2>&1; }
screen() { tmux capture-pane -p -t $S 2>/dev/null; }
shows() { screen | grep -q "$1"; }

"$VT" top --interval 0 "$TMP" >/dev/null 2>&1
is "$?" 2 "--interval 0 is refused"

D=$TMP/traces
mkdir -p $D
mkfifo $TMP/in
(VTSIM_DEVICES=12GiB VRAMTRACE_FLUSH_MS=20 VRAMTRACE_DIR=$D LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SHIM_PRELOAD" \
    "$EX/llama-server-chat" -m llama-13b-q4_k_m --mmap -c 2048 --kv-grow 1024 --stdin <$TMP/in >$TMP/srv.out 2>&1) &
SRV=$!
exec 3>$TMP/in
echo 1000 >&3
wait_for 10 sh -c "ls $D/*.vtrace"
tmux new-session -d -s $S -x 132 -y 30 "'$VT' top --interval 0.2 $D; echo top-exited-\$?; sleep 30" 3>&-
# The whole row is waited for: '1.56 GiB' alone matched the free column's
# "11.56 GiB" before the server allocated anything (a loaded machine).
wait_for 10 shows 'llama-server-chat .* 7.23 GiB  *1.56 GiB'
check "the screen shows the 1600 MiB KV cache live" shows 'llama-server-chat .* 7.23 GiB  *1.56 GiB'
check "... with the card and the margin" shows 'GPU 0 (vramtrace sim GPU (12 GiB)): 12.00 GiB total, about .* free, .* the 15% margin'
echo 2500 >&3
wait_for 10 shows 'llama-server-chat .* 7.23 GiB  *3.12 GiB'
check "the KV cache grows to 3200 MiB on screen, no restart" shows 'llama-server-chat .* 7.23 GiB  *3.12 GiB'
size_before=$(cat $D/*.vtrace | wc -c)
tmux send-keys -t $S q
wait_for 10 shows 'top-exited-0'
check "q quits with status 0" shows 'top-exited-0'
exec 3>&-
wait $SRV
is "$?" 0 "the server exits 0"
"$VT" top --once $D >$TMP/once.txt
is "$?" 0 "--once prints a frame and exits 0"
check "--once: the ended process" grep -q ' ended$' $TMP/once.txt
check "top wrote nothing to the traces (only the server did)" test "$(ls $D | wc -l)" = 1
# Processes that ended having allocated nothing (GPU probes) are one line,
# not rows.
gpu_probe $D
gpu_probe $D
"$VT" top --once $D >$TMP/probes.txt
is "$(grep -c ' ended$' $TMP/probes.txt) $(grep -c '^(not shown: 2 ended processes that allocated nothing, such as GPU probes)$' $TMP/probes.txt) $(grep -c '^pid ' $TMP/probes.txt)" "1 1 1" \
    "--once: two ended probes are one line; the server keeps its row and GPU line"
done_testing
