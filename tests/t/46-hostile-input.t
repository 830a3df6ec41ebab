#!/bin/sh
# The analyzer against traces and directories made by an attacker: what a
# trace holds must not reach the user's terminal as control sequences, and
# must not forge report lines (see tests/fault/README.md, "Hostile input").
. tests/t/lib.sh
GEN=$B/vtgen
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT

# Every string a text report prints from a trace carries ESC (clear screen,
# window title, an OSC 8 link), a newline that would start a fake verdict
# line, a C1 CSI (U+009B) and a bidi override (U+202E); one name is plain
# UTF-8, which stays as it is.
cat >$TMP/esc.vt <<'VT'
process pid=7 exe="/bin/x\x1b[2J" argv="a\x1b]0;owned\x07","b\nVERDICT: NO SPILL.","\xc2\x9b31m"
device 0 total=8GiB free=8GiB name="GPU\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\" uuid=00112233445566778899aabbccddeeff
module 1 base=0x400000 size=0x10000 path="/lib/m\x1b[31m.so" build_id=
frame 0x401000 module=1 offset=0x1000 function="f\nVERDICT: NO SPILL.\xe2\x80\xae"
frame 0x401100 module=1 offset=0x1100 function="caf\xc3\xa9"
frame 0x401200 module=1 offset=0x1200 function="</script><img src=x onerror=alert(1)>\x22'"
stack 3 parent=1 ip=0x401200
module 2 base=0x500000 size=0x10000 path="/lib/a;b\nc\x1b[2J.so" build_id=
stack 4 parent=1 ip=0x501000
stack 1 parent=0 ip=0x401100
stack 2 parent=1 ip=0x401000
event t=1000 api=cudaMalloc dev=0 ptr=0x7000000000 size=1GiB stack=2
event t=1500 api=cudaMalloc dev=0 ptr=0x7100000000 size=1MiB stack=3
event t=1600 api=cudaMalloc dev=0 ptr=0x7200000000 size=2MiB stack=4
end t=2000 events=1 dropped=0
VT
"$GEN" $TMP/esc.vt -o $TMP/esc.vtrace || nok "vtgen esc"
$VT report --wide --color never $TMP/esc.vtrace >$TMP/esc.txt 2>$TMP/esc.err
is "$?" 0 "escapes: report exits 0"
is "$(tr -d '\n -~' <$TMP/esc.txt | tr -d 'é' | wc -c)" 0 \
    "escapes: the text report holds no control byte, C1 or bidi control (only printable ASCII, newline and é)"
is "$(grep -c '^VERDICT' $TMP/esc.txt)" 1 "escapes: one VERDICT line, no forged one"
check "escapes: exe as \\xNN" grep -qF '== x\x1b[2J (pid 7) a\x1b]0;owned\x07 b\x0aVERDICT: NO SPILL. \xc2\x9b31m' $TMP/esc.txt
check "escapes: device name as \\xNN" grep -qF 'GPU 0 (GPU\x1b]8;;http://evil\x1b\link\x1b]8;;\x1b\)' $TMP/esc.txt
check "escapes: function name as \\xNN" grep -qF 'f\x0aVERDICT: NO SPILL.\xe2\x80\xae  [m\x1b[31m.so]' $TMP/esc.txt
check "escapes: valid UTF-8 printed as it is" grep -qF 'café' $TMP/esc.txt
$VT report --wide --color never --raw-strings $TMP/esc.vtrace >$TMP/raw.txt 2>&1
is "$(grep -c 'VERDICT: NO SPILL' $TMP/raw.txt)" 3 "--raw-strings: the trace's strings as they are"
$VT replay --wide --capacity 512MiB $TMP/esc.vtrace >$TMP/replay.txt 2>&1
is "$(tr -d '\n -~' <$TMP/replay.txt | tr -d 'é' | wc -c)" 0 "escapes: replay's text holds no control byte either"
check "escapes: replay names the function as \\xNN" grep -qF '#0  f\x0aVERDICT: NO SPILL.\xe2\x80\xae' $TMP/replay.txt
# Folded stacks: ';' and newline are the format's separators; an unresolved
# frame shows its module path, which is trace text too.
$VT export --format folded $TMP/esc.vtrace >$TMP/esc.folded 2>$TMP/folded.err
is "$?" 0 "folded: exits 0"
is "$(wc -l <$TMP/esc.folded)" 3 "folded: one line per site, none forged"
is "$(tr -d '\n -~' <$TMP/esc.folded | tr -d 'é' | wc -c)" 0 "folded: no control byte"
check "folded: the module path's separators are '_'" grep -qF 'café;0x501000@a_b_c_[2J.so 2097152' $TMP/esc.folded
# HTML: markup from a trace is text, never markup or the end of a script.
$VT report --html $TMP/esc.html $TMP/esc.vtrace 2>$TMP/html.err
is "$?" 0 "html: report exits 0"
is "$(grep -c '<img src=x' $TMP/esc.html)" 0 "html: a function name's markup is escaped"
is "$(grep -o '</script' $TMP/esc.html | wc -l)" "$(grep -o '<script' $TMP/esc.html | wc -l)" "html: no script closed by a trace string"
check "html: the name is shown escaped" grep -qF '&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;' $TMP/esc.html

# A trace directory anyone could write to: a FIFO named *.vtrace (opening it
# blocked `report DIR` forever), a symlink, garbage, a trace damaged in its
# second chunk; one good trace. Each bad one costs only its own section.
D=$TMP/dir; mkdir $D
cat >$TMP/good.vt <<'VT'
process pid=11 exe=/bin/good
device 0 total=8GiB free=8GiB name=G uuid=00000000000000000000000000000001
event t=1000 api=cudaMalloc dev=0 ptr=0x7000000000 size=3GiB
end t=2000 events=1 dropped=0
VT
cat >$TMP/damaged.vt <<'VT'
process pid=12 exe=/bin/damaged
device 0 total=8GiB free=8GiB name=G uuid=00000000000000000000000000000002
event t=1000 api=cudaMalloc dev=0 ptr=0x7000000000 size=1GiB
chunk
event t=2000 api=cudaMalloc dev=0 ptr=0x7100000000 size=2GiB
chunk magic=0x12345678
end t=3000 events=2 dropped=0
VT
"$GEN" $TMP/good.vt -o $D/b-good.vtrace && "$GEN" $TMP/damaged.vt -o $D/c-damaged.vtrace || nok "vtgen dir"
mkfifo $D/a-fifo.vtrace
head -c 5000 /dev/urandom | sed 's/^/junk/' >$D/d-junk.vtrace
ln -s $D/b-good.vtrace $D/e-link.vtrace
# A name is trace text too: it reaches stderr in the error message.
echo junk >"$D/$(printf 'f-\033]0;owned\007').vtrace"
timeout 20 $VT report --wide --color never $D >$TMP/dir.txt 2>$TMP/dir.err
is "$?" 2 "dir: a FIFO does not block, and bad traces make the exit status 2"
is "$(grep -c '^== ' $TMP/dir.txt)" 7 "dir: two sections, four files named as not reported, the GPUs"
check "dir: the good trace is reported" grep -q '^== good (pid 11)' $TMP/dir.txt
check "dir: the FIFO is named, not read" grep -qF "== $D/a-fifo.vtrace: NOT REPORTED: offset 0: cannot read file: not a regular file (a FIFO): not read" $TMP/dir.txt
check "dir: the symlink is named, not followed" grep -qF "== $D/e-link.vtrace: NOT REPORTED: offset 0: cannot read file: a symbolic link: not read in a directory" $TMP/dir.txt
check "dir: the junk is named" grep -qF "== $D/d-junk.vtrace: NOT REPORTED: offset 0: not a vramtrace trace (bad magic)" $TMP/dir.txt
check "dir: the damaged trace is reported up to the damage" grep -qF 'NOTE: the trace is damaged at offset 141 (corrupt trace: bad chunk magic 0x12345678' $TMP/dir.txt
is "$(grep -c "vramtrace: $D/[a-f]-.*: offset" $TMP/dir.err)" 5 "dir: stderr names each bad file and offset"
is "$(tr -d '\n -~' <$TMP/dir.err | wc -c)" 0 "dir: no control byte from a file name reaches stderr"
check "dir: the name is escaped on stderr" grep -qF 'f-\x1b]0;owned\x07.vtrace: offset 0' $TMP/dir.err
check "dir: and in the report" grep -qF 'f-\x1b]0;owned\x07.vtrace: NOT REPORTED' $TMP/dir.txt
timeout 20 $VT report --json $D >$TMP/dir.json 2>/dev/null
is "$?" 2 "dir --json: exit status 2"
is "$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print([p["pid"] for p in d["processes"]], [p["trace"]["damaged"] for p in d["processes"]],
      d["processes"][1]["trace"]["stopped_at_offset"], [(b["path"].rsplit("/", 1)[1], b["offset"]) for b in d["not_reported"]])' $TMP/dir.json)" \
    "[11, 12] [False, True] 141 [('a-fifo.vtrace', 0), ('d-junk.vtrace', 0), ('e-link.vtrace', 0), ('f-\\x1b]0;owned\\x07.vtrace', 0)]" \
    "dir --json: both traces, the damaged one flagged, four not reported"
timeout 20 $VT report --html $TMP/dir.html $D 2>/dev/null
is "$?" 2 "dir --html: exit status 2"
is "$(grep -c 'not reported: offset 0' $TMP/dir.html)" 4 "dir --html: the four files are listed"
# Named on the command line, a FIFO is the user's choice and still read.
timeout 20 $VT report --color never $D/b-good.vtrace >/dev/null 2>&1
is "$?" 0 "one good trace: exit 0"
timeout 20 $VT report $D/d-junk.vtrace >$TMP/junk.txt 2>&1
is "$?" 2 "only bad traces: exit 2"
is "$(grep -c 'VERDICT' $TMP/junk.txt)" 0 "only bad traces: no report"

# --json stays proportional to the trace: 1,991 sites of 30 frames name 58
# distinct frames and 2,239 stack entries, each written once (schema /3: a
# stack is one entry of a prefix table); writing every site's whole stack
# made 8.7 MB of JSON from this 173 KB trace, its frame indices (/2) 1.33 MB,
# the table 1.18 MB.
"$B/bench/gentrace" -o $TMP/many.vtrace -e 20000 -l 2000 -s 2000 -d 30 >/dev/null || nok "gentrace"
$VT report --json $TMP/many.vtrace >$TMP/many.json 2>$TMP/many.err
is "$?" 0 "json: many sites: exit 0"
is "$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); p = d["processes"][0]; st = p["stacks"]
n = len(st["frame"])
print(d["schema"], len(p["sites"]), len(p["frames"]), n, len(st["prefix"]) == n,
      all(isinstance(f, int) and 0 <= f < len(p["frames"]) for f in st["frame"]),
      all(q is None or 0 <= q < i for i, q in enumerate(st["prefix"])),
      all(isinstance(s["stack"], int) and 0 <= s["stack"] < n for s in p["sites"]))' $TMP/many.json)" \
    "vramtrace-report/3 1991 58 2239 True True True True" \
    "json: 1991 sites, 58 frames, 2239 stack entries, every index in range, every prefix before its entry"
is "$(( $(stat -c %s $TMP/many.json) < 8 * $(stat -c %s $TMP/many.vtrace) ))" 1 "json: under 8x the trace ($(stat -c %s $TMP/many.json) bytes from $(stat -c %s $TMP/many.vtrace))"

# 300,000 allocations at addresses aimed at the address map's fixed
# multiplier (analyzer/base/u64map.h), then their frees, in a 1 KB trace:
# each put and each free walked the whole run (quadratic: 100,000 took
# 5.4 s, 300,000 about 48 s); with the random multiplier drawn after the
# first long run, 0.2 s. The limit only catches the quadratic case.
python3 - >$TMP/aimed.vtg <<'PY'
mul = 0x9e3779b97f4a7c15
inv = pow(mul, -1, 1 << 64)
print("device 0 total=80GiB free=79GiB")
n = 300000
for i in range(1, n + 1):
    print(f"event t={i * 10} api=cudaMalloc ptr={i * inv % (1 << 64):#x} size=1MiB")
for i in range(1, n + 1):
    print(f"event t={(n + i) * 10} api=cudaFree ptr={i * inv % (1 << 64):#x}")
print(f"end t={(2 * n + 1) * 10} events={2 * n} dropped=0")
PY
"$B/vtgen" -o $TMP/aimed.vtrace $TMP/aimed.vtg
timeout 20 "$VT" report $TMP/aimed.vtrace >$TMP/out 2>&1
is "$?" 0 "a trace of 300,000 aimed addresses is reported within 20 s"
check "with every allocation counted" grep -q "300000 allocs, 300000 frees" $TMP/out

# 200,000 allocations live on GPU 1, then 100,000 pairs of an allocation
# and a cudaDeviceReset on GPU 0, in a 250 KB trace: each teardown visited
# every live allocation (about 42 s); now only its own device's, 0.13 s.
python3 - >$TMP/resets.vtg <<'PY'
print("device 0 total=80GiB free=79GiB")
print("device 1 total=80GiB free=79GiB")
t = 10
for i in range(1, 200001):
    print(f"event t={t} api=cudaMalloc dev=1 ptr={0x100000000 + i * 4096:#x} size=1MiB"); t += 10
for i in range(100000):
    print(f"event t={t} api=cudaMalloc dev=0 ptr={0x900000000000 + i * 4096:#x} size=1MiB"); t += 10
    print(f"event t={t} api=cudaDeviceReset dev=0"); t += 10
print(f"end t={t} events=400000 dropped=0")
PY
"$B/vtgen" -o $TMP/resets.vtrace $TMP/resets.vtg
timeout 20 "$VT" report --json $TMP/resets.vtrace >$TMP/resets.json 2>&1
is "$?" 0 "100,000 teardowns beside 200,000 live allocations on another GPU are reported within 20 s"
is "$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["processes"][0]; print(p["events"]["teardown_frees"], *[d["live_bytes"] for d in p["devices"]])' $TMP/resets.json)" \
    "100000 0 209715200000" "each teardown freed its own GPU's allocation and none of the other's"

done_testing
