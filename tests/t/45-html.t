#!/bin/sh
# `vramtrace report --html`: the page is self-contained, escapes everything
# from the trace, stays small for a long trace, and renders in a real
# headless browser (Debian's chromium) with no console error, a non-blank
# screenshot and the tipping marker. Without chromium the browser part is
# skipped with a visible "# SKIP chromium not installed".
. tests/t/lib.sh
GEN=$B/vtgen
for f in "$VT" "$GEN"; do
    [ -x "$f" ] || { echo "1..0 # SKIP $f not built (make test-bins)"; exit 0; }
done
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 needed"; exit 0; }
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT
STACKS=tests/golden/llama_stacks.vt

# -- a spill whose trace is hostile: markup in a symbol, argv and the exe ---
# 8 GiB card; weights 6 GiB fit, a 3 GiB KV cache fails, the hostile frame
# is the KV allocation's caller. U+2028 in argv must not break the script.
{
    echo 'process pid=77 ppid=1 exe="/opt/<b>evil</b>/llama-server" argv="llama-server","--x=</script><script>alert(2)</script>","\xe2\x80\xa8line" host=box start=1000000000'
    echo 'device 0 total=8GiB free=7.5GiB name="Sim <i>GPU</i>" uuid=0123456789abcdef0123456789abcdef t=0'
    cat "$STACKS"
    echo 'frame 0x401200 module=5 offset=0x10 function="</script><img src=x onerror=alert(1)>"'
    echo 'stack 40 parent=12 ip=0x401200'
    echo 'stack 41 parent=40 ip=0x7f0000001100'
    echo 'event t=1000 api=cudaMalloc dev=0 ptr=0x7000000000 size=6GiB stack=8'
    echo 'event t=2000 api=cudaMalloc dev=0 ptr=0x7200000000 size=512MiB stack=23'
    echo 'event t=3000 api=cuMemGetInfo_v2 dev=0 size=1GiB aux=8GiB flags=sample'
    echo 'event t=4000 api=cudaMalloc dev=0 size=3GiB result=2 stack=41'
    echo 'event t=5000 api=cudaMallocHost dev=-1 ptr=0x600000000000 size=3GiB stack=41'
    echo 'end t=9000 events=5 dropped=0'
} >"$D/evil.vt"
"$GEN" "$D/evil.vt" -o "$D/evil.vtrace" || nok "vtgen evil"
"$VT" report --html "$D/evil.html" "$D/evil.vtrace" >"$D/evil.out" 2>"$D/evil.err"
is "$?" 0 "--html exits 0"
is "$(wc -c <"$D/evil.out" | tr -d ' ')" 0 "nothing on stdout"
check "the page exists" test -s "$D/evil.html"
H=$D/evil.html
is "$(grep -c '<img' "$H")" 0 "no <img> element: the symbol name is escaped"
check "the symbol is shown, escaped as text" grep -q '&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;' "$H"
is "$(grep -o '<script' "$H" | wc -l | tr -d ' ')" 2 "exactly two <script> elements: the data and the code"
is "$(grep -c '</script>' "$H")" 2 "exactly two </script>: none from the trace"
check "argv is escaped" grep -q -- '--x=&lt;/script&gt;&lt;script&gt;alert(2)&lt;/script&gt;' "$H"
check "exe path is escaped" grep -q '&lt;b&gt;evil&lt;/b&gt;' "$H"
check "device name is escaped" grep -q 'Sim &lt;i&gt;GPU&lt;/i&gt;' "$H"
# The JSON inside <script> must hold no raw < > & or U+2028/2029.
python3 - "$H" >"$D/json.out" 2>&1 <<'PY'
import json, re, sys
html = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r'<script type="application/json" id="vt-data">(.*?)</script>', html, re.S)
raw = m.group(1)
bad = [c for c in "<>&\u2028\u2029" if c in raw]
d = json.loads(raw)
c = d["charts"]["p0d0"]
print("bad=%s tip=%s tag=%s total=%d points=%d" % (bad, c["tip"]["t"], d["tags"][2], c["total"], len(c["p"])))
PY
is "$(cat "$D/json.out")" "bad=[] tip=4000 tag=scratch total=8589934592 points=4" "chart data: script-safe JSON, tip at 4000 ns"
check "self-contained: nothing to fetch" sh -c "! grep -Eiq '(src|href)=\"(https?:)?//' '$H'"
check "a CSP forbids any fetch" grep -q "default-src 'none'" "$H"
check "tipping stack has its anchor" grep -q 'id="p0-tip"' "$H"

# -- a long trace: 20000 events, the page stays small ---------------------
{
    echo 'process pid=5 exe=/bin/loop start=1000000000'
    echo 'device 0 total=8GiB free=7.5GiB name=Sim uuid=00112233445566778899aabbccddeeff t=0'
    cat "$STACKS"
    awk 'BEGIN { for (i = 0; i < 10000; i++) {
        printf "event t=%d api=cudaMalloc dev=0 ptr=%.0f size=%d stack=23\n", i * 1000, 2^36 + (i % 7) * 2^28, (i % 97 + 1) * 1048576
        printf "event t=%d api=cudaFree dev=0 ptr=%.0f\n", i * 1000 + 500, 2^36 + (i % 7) * 2^28 } }'
    echo 'end t=10000000 events=20000 dropped=0'
} >"$D/long.vt"
"$GEN" "$D/long.vt" -o "$D/long.vtrace" || nok "vtgen long"
"$VT" report --html "$D/long.html" "$D/long.vtrace" 2>"$D/long.err"
is "$?" 0 "long trace: --html exits 0"
python3 - "$D/long.html" >"$D/long.out" 2>&1 <<'PY'
import json, re, sys
html = open(sys.argv[1]).read()
d = json.loads(re.search(r'id="vt-data">(.*?)</script>', html, re.S).group(1))
p = d["charts"]["p0d0"]["p"]
print(len(p) <= 2000, max(sum(x[1:]) for x in p) // 1048576, len(html) < 400000)
PY
is "$(cat "$D/long.out")" "True 97 True" "long trace: <= 2000 points, the 97 MiB peak kept, page < 400 KB"

# -- hostile records do not break the page ----------------------------------
"$GEN" tests/golden/hostile.vt -o "$D/hostile.vtrace" || nok "vtgen hostile"
"$VT" report --html "$D/hostile.html" "$D/hostile.vtrace" >/dev/null 2>&1
is "$?" 0 "hostile trace: --html exits 0"
check "bad usage: --html with --json" sh -c "! '$VT' report --html x --json '$D/evil.vtrace' 2>/dev/null"

# -- the browser ------------------------------------------------------------
CHROME=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROME" ]; then
    echo "ok $((T+1)) # SKIP chromium not installed"
    T=$((T+1))
    done_testing
    exit $?
fi
browser() { # OUTFILE ARGS...: stderr to OUTFILE.log
    out=$1; shift
    prof=$(mktemp -d "$D/prof.XXXXXX")
    timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$prof" \
        --enable-logging=stderr --v=0 "$@" >"$out" 2>"$out.log"
}
browser "$D/dom.html" --dump-dom "file://$H"
is "$?" 0 "chromium ran"
check "the script ran: charts drawn" grep -q 'data-vt-rendered="[1-9]' "$D/dom.html"
check "the tipping marker is in the page" grep -q 'class="vt-tip-marker"' "$D/dom.html"
check "the marker links to the tipping stack" grep -q '<a href="#p0-tip" class="vt-tip-marker"' "$D/dom.html"
is "$(grep -c '<img' "$D/dom.html")" 0 "no <img> in the live DOM"
is "$(grep -c 'CONSOLE' "$D/dom.html.log")" 0 "no console message (errors included)"
grep 'CONSOLE' "$D/dom.html.log" | sed 's/^/# /'
browser "$D/shot.out" --screenshot="$D/shot.png" --window-size=1200,900 "file://$H"
python3 - "$D/shot.png" >"$D/colors.out" 2>&1 <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n"
pos, idat, w = 8, b"", 0
while pos < len(data):
    n, typ = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if typ == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
    elif typ == b"IDAT":
        idat += body
    pos += 12 + n
raw = zlib.decompress(idat)
bpp = {2: 3, 6: 4}[ctype]
stride, prev, colors, i = w * bpp, bytearray(w * bpp), set(), 0
for y in range(h):
    f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
    i += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b = prev[x]
        c = prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    if y % 3 == 0:
        for x in range(0, stride, bpp * 2):
            colors.add(bytes(line[x:x + 3]))
    prev = line
print(len(colors))
PY
N=$(cat "$D/colors.out")
check "the screenshot is not blank ($N distinct colours >= 20)" test "${N:-0}" -ge 20 2>/dev/null

# chart_geometry DOM: per drawn chart (svg with data-t0), its time window,
# the tipping marker's x (none when not drawn) and how many distinct pixel
# columns the stacked areas' corners fall in. The plot starts at x=78.
chart_geometry() {
    python3 - "$1" <<'PY'
import re, sys
dom = open(sys.argv[1]).read()
for svg in re.findall(r'<svg [^>]*data-t0=.*?</svg>', dom, re.S):
    t0, t1 = re.search(r'data-t0="([0-9.e+]+)" data-t1="([0-9.e+]+)"', svg).groups()
    tip = re.search(r'class="vt-tip-marker"><title>[^<]*</title><line x1="([0-9.]+)"', svg)
    cols = set()
    for pts in re.findall(r'<polygon points="([^"]*)"', svg):
        cols.update(int(float(p.split(",")[0])) for p in pts.split())
    print("%.0f-%.0f tip=%s columns=%d" % (float(t0), float(t1), round(float(tip.group(1))) if tip else "none", len(cols)))
PY
}
# The demo (story 1): the runner loads 40 of 81 layers, its KV cache and
# compute buffers, and nothing fails: no tipping marker, and the areas
# change in several columns. The screenshot is kept for a person to look
# at. A failure inside a run (story 2: the KV cache grows until a block
# does not fit) puts the marker well inside the chart, not on the axis.
if [ -x "$B/examples/ollama-serve" ] && [ -x "$B/examples/llama-server-chat" ]; then
    mkdir -p "$D/demo" "$D/kv" "$B/tests/html"
    under_shim "$D/demo" env VTSIM_DEVICES=24GiB "$B/examples/ollama-serve" -m llama-70b-q4_k_m -c 8192 >/dev/null 2>&1
    "$VT" report --html "$B/tests/html/demo.html" "$D/demo" >/dev/null 2>&1
    browser "$D/demo.dom" --dump-dom "file://$B/tests/html/demo.html"
    browser "$D/demo.shot" --screenshot="$B/tests/html/demo.png" --window-size=1280,900 "file://$B/tests/html/demo.html"
    chart_geometry "$D/demo.dom" >"$D/demo.geo"
    geo=$(head -1 "$D/demo.geo")
    echo "# demo chart: $geo (screenshot: $B/tests/html/demo.png)"
    cols=$(echo "$geo" | sed -n 's/.* columns=\([0-9]*\)$/\1/p')
    is "$(echo "$geo" | sed -n 's/.* tip=\([a-z0-9]*\) .*/\1/p')" none "demo: no tipping marker: no request failed"
    check "demo: the memory areas change in more than one pixel column ($cols >= 4)" test "${cols:-0}" -ge 4
    under_shim "$D/kv" env VTSIM_DEVICES=12GiB "$B/examples/llama-server-chat" -m llama-13b-q4_k_m --mmap -c 2048 \
        --kv-grow 1024 --turns 8 --turn-tokens 1000 >/dev/null 2>&1
    "$VT" report --html "$D/kv.html" "$D/kv" >/dev/null 2>&1
    browser "$D/kv.dom" --dump-dom "file://$D/kv.html"
    geo=$(chart_geometry "$D/kv.dom" | head -1)
    echo "# KV growth chart: $geo"
    tip=$(echo "$geo" | sed -n 's/.* tip=\([0-9]*\) .*/\1/p')
    cols=$(echo "$geo" | sed -n 's/.* columns=\([0-9]*\)$/\1/p')
    check "KV growth: the tipping marker is drawn away from the time axis's start (x=${tip:-none} > 100)" test "${tip:-0}" -gt 100
    check "KV growth: the memory areas change in more than one pixel column ($cols >= 4)" test "${cols:-0}" -ge 4
else
    T=$((T+1)); echo "ok $T # SKIP examples not built"
fi
# Events that crowd: a load that fails 10 ms into a 10 s run. The whole-run
# chart puts the failure in its first pixel columns; a second chart zooms on
# the failure and the back-off after it, with the marker inside.
{
    echo 'process pid=9 exe=/bin/server start=1000000000'
    echo 'device 0 total=8GiB free=7.5GiB name=Sim uuid=00112233445566778899aabbccddeeff t=0'
    cat "$STACKS"
    echo 'event t=10000000 api=cudaMalloc dev=0 size=9GiB result=2 stack=8'
    echo 'event t=10500000 api=cudaMalloc dev=0 ptr=0x7000000000 size=4GiB stack=8'
    echo 'event t=11000000 api=cudaMallocHost dev=-1 ptr=0x600000000000 size=5GiB stack=8'
    echo 'event t=12000000 api=cudaMalloc dev=0 ptr=0x7200000000 size=1GiB stack=23'
    echo 'event t=9000000000 api=cudaFree dev=0 ptr=0x7200000000'
    echo 'end t=10000000000 events=5 dropped=0'
} >"$D/crowd.vt"
"$GEN" "$D/crowd.vt" -o "$D/crowd.vtrace" || nok "vtgen crowd"
"$VT" report --html "$D/crowd.html" "$D/crowd.vtrace" >/dev/null 2>&1
browser "$D/crowd.dom" --dump-dom "file://$D/crowd.html"
chart_geometry "$D/crowd.dom" >"$D/crowd.geo"
is "$(sed -n 1p "$D/crowd.geo" | cut -d' ' -f1-2)" "0-10000000000 tip=79" "crowded: the whole run's chart has the marker at its start"
is "$(sed -n 2p "$D/crowd.geo" | cut -d' ' -f1)" "0-32000000" "crowded: a second chart zooms on the failure and the back-off"
tip=$(sed -n 2p "$D/crowd.geo" | sed -n 's/.* tip=\([0-9]*\) .*/\1/p')
check "crowded: in the zoom the marker is well inside (x=${tip:-none} > 200)" test "${tip:-0}" -gt 200
check "the zoom is captioned" grep -q 'zoomed on the failures: ' "$D/crowd.dom"
# The index names each process's verdict as the text report does: a probe
# that allocated nothing is "no GPU memory used" (and gets no chart), a
# spill says its tipping kind.
{
    echo 'process pid=11 exe=/bin/probe start=1000000000'
    echo 'device 0 total=8GiB free=7.5GiB name=Sim uuid=00112233445566778899aabbccddeeff t=0'
    echo 'end t=2000000 events=0 dropped=0'
} >"$D/probe.vt"
"$GEN" "$D/probe.vt" -o "$D/probe.vtrace" || nok "vtgen probe"
"$VT" report --html "$D/index.html" "$D/crowd.vtrace" "$D/probe.vtrace" >/dev/null 2>&1
is "$(grep -o '<li><a href="#p[0-9]">[^<]*</a>[^<]*' "$D/index.html" | sed 's/<[^>]*>//g')" "server (pid 9): $("$VT" report --json "$D/crowd.vtrace" | python3 -c 'import json, sys
print({"spill": "spill", "near_spill": "near spill", "failed": "out of memory"}[json.load(sys.stdin)["processes"][0]["verdict"]])') (oom)
probe (pid 11): no GPU memory used" "index: each process's verdict as the text report names it"
is "$(sed -n '/<section id="p1">/,/<\/section>/p' "$D/index.html" | grep -c 'data-chart')" 0 "a probe's section has no chart"
done_testing
