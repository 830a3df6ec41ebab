#!/bin/sh
# The service recipes of examples/systemd and examples/containers: the
# systemd units parse (systemd-analyze verify, where installed), and the
# service's command line, run with exactly the environment the drop-in
# gives it, writes traces the admin can report on, with the metrics unit's
# command serving them. A llama-server-shaped example stands in for ollama.
. tests/t/lib.sh
EX=$B/examples
for f in "$SHIM" "$VT" "$EX/llama-server-chat"; do
    [ -e "$f" ] || { echo "1..0 # SKIP $f not built (make test-bins)"; exit 0; }
done
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
MiB=1048576
DROPIN=examples/systemd/vramtrace.conf
UNIT=examples/systemd/vramtrace-metrics.service

# ---- the units parse ----
if command -v systemd-analyze >/dev/null 2>&1; then
    mkdir -p $TMP/units/ollama.service.d
    printf '[Unit]\nDescription=stand-in for ollama\n[Service]\nExecStart=/bin/true\n' >$TMP/units/ollama.service
    cp $DROPIN $TMP/units/ollama.service.d/
    # The exporter's command as installed is not here: point it at the build.
    sed "s|/usr/local/bin/vramtrace|$VT|" $UNIT >$TMP/units/vramtrace-metrics.service
    for u in ollama.service vramtrace-metrics.service; do
        SYSTEMD_UNIT_PATH=$TMP/units: systemd-analyze verify --man=no $TMP/units/$u >$TMP/verify.$u 2>&1
        rc=$?
        # Complaints about our files (not the stand-in's own lines).
        n=$(grep -E 'vramtrace|ollama\.service\.d' $TMP/verify.$u | grep -civ 'not safe')
        is "$rc $n" "0 0" "systemd-analyze verify: $u with the drop-in"
        [ "$n" = 0 ] || sed 's/^/#  /' $TMP/verify.$u
    done
else
    T=$((T + 2)); echo "ok $((T - 1)) # SKIP systemd-analyze not installed"; echo "ok $T # SKIP systemd-analyze not installed"
fi
if command -v sh >/dev/null && sh -n examples/containers/docker-run.sh; then ok "docker-run.sh parses"; else nok "docker-run.sh parses"; fi
check "the pod spec names the shim and the trace directory" \
    sh -c "grep -q 'value: /opt/vramtrace/libvramtrace.so' examples/containers/kubernetes-pod.yaml &&
           grep -q 'value: /vramtrace' examples/containers/kubernetes-pod.yaml"

# ---- the drop-in's environment, exactly ----
# Environment= lines, with the install paths mapped to this build and the
# state directory made as systemd would (StateDirectoryMode).
STATE=$TMP/state/vramtrace/ollama
mode=$(sed -n 's/^StateDirectoryMode=//p' $DROPIN)
mkdir -p $STATE && chmod "$mode" $STATE
set --
for kv in $(sed -n 's/^Environment=//p' $DROPIN); do
    kv=$(echo "$kv" | sed "s|/usr/local/lib/vramtrace/libvramtrace.so|$SHIM_PRELOAD|; s|/var/lib/vramtrace/ollama|$STATE|")
    set -- "$@" "$kv"
done
is "$#" 2 "the drop-in sets two variables (LD_PRELOAD, VRAMTRACE_DIR)"
printf '1000\n2500\n' | env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH=$SIM VTSIM_DEVICES=12GiB "$@" \
    "$EX/llama-server-chat" -m llama-13b-q4_k_m --mmap -c 2048 --kv-grow 1024 --stdin >$TMP/out 2>&1
is "$?" 0 "the service runs unchanged under the drop-in's environment"
set -- $STATE/*.vtrace
is "$#" 1 "one trace in the state directory"
is "$(stat -c %a "$1")" 600 "the trace is private to the service's user (0600)"
is "$(stat -c %a $STATE)" 700 "the directory is the service user's alone (StateDirectoryMode=0700)"
"$VT" report --json $STATE >$TMP/r.json 2>$TMP/r.err
is "$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))["processes"][0]["devices"][0]
print(d["peak"]["by_tag"]["kv"] // (1 << 20))' $TMP/r.json)" 3200 "the admin's report: peak KV 3200 MiB"
# The exporter's ExecStart, pointed at this build and the state directory.
cmd=$(sed -n 's/^ExecStart=//p' $UNIT | sed "s|/usr/local/bin/vramtrace|$VT|; s|--metrics [^ ]*|--once|; s|/var/lib/vramtrace/ollama|$STATE|")
$cmd >$TMP/m.om
is "$?" 0 "the metrics unit's command reads the service's traces"
check "... and serves its KV bytes" grep -q "^vramtrace_device_peak_bytes{.*tag=\"kv\"} $((3200 * MiB))\$" $TMP/m.om
done_testing
