#!/bin/sh
# `vramtrace serve`: Prometheus metrics of live traces. The KV-growth story
# (examples/README.md, story 2: 13B on 12 GiB, 2048 cells = 1600 MiB of KV,
# 3500 tokens = 4096 cells = 3200 MiB) runs as a server taking requests on
# stdin while the exporter is scraped: by curl, and by a real Prometheus
# (Debian's package) when one is installed, queried through its HTTP API.
. tests/t/lib.sh
EX=$B/examples
for f in "$SHIM" "$VT" "$EX/llama-server-chat"; do
    [ -e "$f" ] || { echo "1..0 # SKIP $f not built (make test-bins)"; exit 0; }
done
command -v curl >/dev/null || { echo "1..0 # SKIP curl needed to scrape"; exit 0; }
TMP=$(tmpdir)
PIDS=""
cleanup() {
    for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
    exec 3>&- 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
MiB=1048576
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# sample FILE NAME LABEL_FILTER: the value of the one sample of NAME whose
# labels contain LABEL_FILTER.
sample() { awk -v n="$2" -v f="$3" 'index($0, n "{") == 1 && index($0, f) { print $NF; exit }' "$1"; }
wait_for() { # SECONDS CMD...: retries CMD every 0.1 s
    t=$(($1 * 10)); shift
    while ! "$@" >/dev/null 2>&1 && [ $t -gt 0 ]; do sleep 0.1; t=$((t - 1)); done
    "$@" >/dev/null 2>&1
}

# ---- usage ----
"$VT" serve --metrics 70000 "$TMP" >/dev/null 2>$TMP/err
is "$?" 2 "a port out of range is refused"
"$VT" serve --once --metrics 0 "$TMP" >/dev/null 2>&1
is "$?" 2 "--once and --metrics together are refused"
"$VT" serve --metrics 0 --margin 150 "$TMP" >/dev/null 2>&1
is "$?" 2 "a bad --margin is refused before listening"
"$VT" serve --once tests/corrupt/bad-magic.trace >$TMP/bad.om 2>$TMP/bad.err
is "$?" 2 "--once on an unreadable trace exits 2"
is "$(grep -v '^#' $TMP/bad.om)" "vramtrace_up 0" "... and says vramtrace_up 0"
check "... with the reason on stderr" grep -q "bad-magic.trace" $TMP/bad.err

# ---- a live server ----
D=$TMP/traces
mkdir -p $D
mkfifo $TMP/in
(VTSIM_DEVICES=12GiB VRAMTRACE_FLUSH_MS=20 VRAMTRACE_DIR=$D LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SHIM_PRELOAD" \
    "$EX/llama-server-chat" -m llama-13b-q4_k_m --mmap -c 2048 --kv-grow 1024 --stdin <$TMP/in >$TMP/srv.out 2>&1) &
SRV=$!
exec 3>$TMP/in
"$VT" serve --metrics 0 $D 2>$TMP/serve.err 3>&- &
EXP=$!
PIDS="$EXP"
wait_for 10 grep -q "serving metrics on" $TMP/serve.err
URL=$(sed -n 's/.*serving metrics on \(http[^ ]*\).*/\1/p' $TMP/serve.err)
check "binds to the loopback by default ($URL)" sh -c "echo '$URL' | grep -q '^http://127.0.0.1:[0-9]*/metrics$'"
PORT=$(echo "$URL" | sed 's/.*:\([0-9]*\)\/metrics/\1/')

scrape() { curl -s -f -o "$1" "$URL"; }
kv_is() { scrape $TMP/now.om && [ "$(sample $TMP/now.om vramtrace_device_bytes 'tag="kv"')" = "$1" ]; }
echo 1000 >&3
wait_for 10 kv_is $((1600 * MiB))
is "$(sample $TMP/now.om vramtrace_device_bytes 'tag="kv"')" $((1600 * MiB)) "live: 1600 MiB of KV after the first request"
is "$(sample $TMP/now.om vramtrace_device_bytes 'tag="weights"')" $((7400 * MiB)) "live: 7400 MiB of weights"
is "$(sample $TMP/now.om vramtrace_process_ended '')" 0 "live: the process has not ended"
is "$(sample $TMP/now.om vramtrace_device_total_bytes '')" $((12 * 1024 * MiB)) "the card: 12 GiB"
is "$(tail -1 $TMP/now.om)" "# EOF" "the exposition ends with # EOF"
check "OpenMetrics content type" sh -c "curl -s -D - -o /dev/null '$URL' | grep -qi '^content-type: application/openmetrics-text; version=1.0.0'"
echo 2500 >&3
wait_for 10 kv_is $((3200 * MiB))
is "$(sample $TMP/now.om vramtrace_device_bytes 'tag="kv"')" $((3200 * MiB)) "live: the KV cache grew to 3200 MiB (4096 cells)"
is "$(sample $TMP/now.om vramtrace_device_peak_bytes 'tag="kv"')" $((3200 * MiB)) "live: peak KV 3200 MiB"
is "$(sample $TMP/now.om vramtrace_spills_total 'kind="oom"')" 0 "live: no OOM yet"

# ---- a real Prometheus scrapes it ----
PROM=$(command -v prometheus || true)
if [ -z "$PROM" ]; then
    for i in 1 2 3; do T=$((T + 1)); echo "ok $T # SKIP prometheus not installed (apt-get install prometheus)"; done
else
    PP=$(free_port)
    cat >$TMP/prom.yml <<EOF
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: vramtrace
    static_configs:
      - targets: ['127.0.0.1:$PORT']
EOF
    "$PROM" --config.file=$TMP/prom.yml --storage.tsdb.path=$TMP/tsdb --web.listen-address=127.0.0.1:$PP \
        >$TMP/prom.log 2>&1 3>&- &
    PIDS="$PIDS $!"
    promq() { # QUERY: the first result's value, or nothing
        curl -s -G "http://127.0.0.1:$PP/api/v1/query" --data-urlencode "query=$1" | python3 -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "")' 2>/dev/null
    }
    prom_has() { [ "$(promq "$1")" = "$2" ]; }
    wait_for 30 prom_has 'up{job="vramtrace"}' 1
    is "$(promq 'up{job="vramtrace"}')" 1 "Prometheus scrapes the exporter (up = 1)"
    wait_for 10 prom_has 'vramtrace_device_bytes{tag="kv",process="llama-server-chat"}' $((3200 * MiB))
    is "$(promq 'vramtrace_device_bytes{tag="kv",process="llama-server-chat"}')" $((3200 * MiB)) \
        "Prometheus holds the live KV bytes"
    is "$(promq 'sum(vramtrace_spills_total)')" 0 "Prometheus: the spill counters, summed"
    # Every query of the shipped Grafana dashboard parses and finds series
    # (its increase() needs two scrapes in the window).
    two_scrapes() { [ "$(promq 'count_over_time(vramtrace_up[5m])')" -ge 2 ] 2>/dev/null; }
    wait_for 10 two_scrapes
    bad=$(python3 - examples/grafana/vramtrace-dashboard.json "http://127.0.0.1:$PP" <<'PY'
import json, sys, urllib.parse, urllib.request
dash = json.load(open(sys.argv[1]))
bad = []
for panel in dash["panels"]:
    for t in panel["targets"]:
        q = t["expr"].replace("$instance", ".*").replace("$gpu", ".*")
        url = sys.argv[2] + "/api/v1/query?" + urllib.parse.urlencode({"query": q})
        r = json.load(urllib.request.urlopen(url))
        if r.get("status") != "success" or not r["data"]["result"]:
            bad.append(q)
print("; ".join(bad) or "none")
PY
)
    is "$bad" none "Prometheus answers every query of examples/grafana/vramtrace-dashboard.json"
fi
# Every series the dashboard names is one the exporter serves.
missing=$(grep -o 'vramtrace_[a-z_]*' examples/grafana/vramtrace-dashboard.json | sort -u | while read -r m; do
    grep -q "^$m[{ ]" $TMP/now.om || echo "$m"; done)
is "${missing:-none}" none "the dashboard names only series the exporter serves"

# ---- the server exits ----
exec 3>&-
wait $SRV
is "$?" 0 "the traced server exits 0"
wait_for 10 sh -c "curl -s '$URL' | grep -q '^vramtrace_process_ended{.*} 1$'"
scrape $TMP/end.om
is "$(sample $TMP/end.om vramtrace_process_ended '')" 1 "ended: the end record is seen"
is "$(sample $TMP/end.om vramtrace_device_bytes 'tag="kv"')" 0 "ended: the KV cache was freed"
"$VT" serve --once $D >$TMP/once.om
is "$?" 0 "--once exits 0"
# What the scrape read (the trace again, after wait_for's scrapes saw its
# END: nothing) is the one difference.
grep -v '^vramtrace_scrape_read_' $TMP/once.om >$TMP/once.cut
grep -v '^vramtrace_scrape_read_' $TMP/end.om >$TMP/end.cut
check "--once prints what a scrape serves" cmp -s $TMP/once.cut $TMP/end.cut
is "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/other")" 404 "other paths: 404"
is "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL")" 405 "POST: 405"
# A client that connects and says nothing costs the exporter its timeout,
# not its life.
python3 -c 'import socket, sys, time; s = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); time.sleep(6)' $PORT &
SILENT=$!
PIDS="$PIDS $SILENT"
sleep 0.3
check "a silent client does not stop the next scrape" scrape $TMP/after.om
wait $SILENT
kill -TERM $EXP
wait $EXP
is "$?" 0 "SIGTERM ends the exporter with status 0"
PIDS=$(echo "$PIDS" | sed "s/^$EXP//")

# ---- label values from a hostile trace ----
E=$TMP/evil
mkdir -p $E "$TMP/bin"
NAME='evil"q\x'
cp "$B/tests/shim/paths" "$TMP/bin/$NAME"
LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SHIM_PRELOAD" VRAMTRACE_DIR=$E "$TMP/bin/$NAME" runtime >/dev/null 2>&1
"$VT" serve --once $E >$TMP/evil.om
check "a quote and a backslash in a process name are escaped" grep -q 'process="evil\\"q\\\\x"' $TMP/evil.om
# ---- GPU probes: ended, allocated nothing ----
# ollama's discovery starts one short-lived process per GPU library; a
# server's directory gathers them. Each is counted, with no series of its
# own. A live probe (no END yet) keeps its series until it ends.
P=$TMP/probes
mkdir -p $P
LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SHIM_PRELOAD" VRAMTRACE_DIR=$P "$B/tests/shim/paths" runtime >/dev/null 2>&1
gpu_probe $P
gpu_probe $P
"$VT" serve --once $P >$TMP/probes.om
is "$(grep -E '^vramtrace_(idle_)?processes ' $TMP/probes.om)" "vramtrace_processes 3
vramtrace_idle_processes 2" "probes: 3 traces, 2 of them idle"
is "$(grep -c 'process="python3' $TMP/probes.om)" 0 "probes: no series of their own"
is "$(grep -c '^vramtrace_process_ended{' $TMP/probes.om)" 1 "probes: the allocating process keeps its series"
# A probe SIGKILLed before its END: while it runs it keeps its series; once
# its pid is gone (on this machine) it has ended, and is counted idle as
# report (no tables) and top (no row) count it.
K=$TMP/killed
mkdir -p $K
# env execs python3, so $! is the probe's pid (a shell function would fork).
env LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SHIM_PRELOAD" VRAMTRACE_DIR=$K VRAMTRACE_FLUSH_MS=20 python3 -c '
import ctypes, time
rt = ctypes.CDLL("libcudart.so.13")
f = ctypes.c_size_t(); t = ctypes.c_size_t()
rt.cudaMemGetInfo(ctypes.byref(f), ctypes.byref(t))
time.sleep(60)
' &
KP=$!
PIDS="$PIDS $KP"
wait_for 10 sh -c "ls $K/*.vtrace && \"$VT\" dump --count $K/*.vtrace | grep -q '[1-9]'"
"$VT" serve --once $K >$TMP/killed-live.om 2>/dev/null
is "$(grep -E '^vramtrace_(idle_)?processes |^vramtrace_process_ended' $TMP/killed-live.om | sed 's/{.*}/{}/')" "vramtrace_processes 1
vramtrace_idle_processes 0
vramtrace_process_ended{} 0" "a running probe keeps its series"
kill -KILL $KP; wait $KP 2>/dev/null
"$VT" serve --once $K >$TMP/killed.om 2>/dev/null
is "$(grep -v '^#' $TMP/killed.om | grep -vc '^vramtrace_scrape_read_')" 3 \
    "the probe killed: three samples (up, processes, idle), no series of its own"
is "$(grep -E '^vramtrace_(idle_)?processes ' $TMP/killed.om)" "vramtrace_processes 1
vramtrace_idle_processes 1" "... counted idle"
"$VT" top --once $K >$TMP/killed.top 2>&1
check "top agrees: no row, one ended process not shown" grep -q '^(not shown: 1 ended process that allocated nothing' $TMP/killed.top
"$VT" report --color never $K >$TMP/killed.txt 2>&1
check "report agrees: its verdict, no device table" sh -c "grep -q 'VERDICT: NO GPU MEMORY USED' $TMP/killed.txt && ! grep -q 'context reserve  ' $TMP/killed.txt"
# Killed, its trace has no END: "nothing" is said of the chunks only.
check "report: the killed probe's verdict is said of its chunks, not of the whole process" sh -c \
    "grep -q \"^VERDICT: NO GPU MEMORY USED up to the trace's last chunk. The trace has no\" $TMP/killed.txt &&
     ! grep -q 'This process allocated nothing through CUDA' $TMP/killed.txt"
done_testing
