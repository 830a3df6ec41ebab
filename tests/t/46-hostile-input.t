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
stack 1 parent=0 ip=0x401100
stack 2 parent=1 ip=0x401000
event t=1000 api=cudaMalloc dev=0 ptr=0x7000000000 size=1GiB stack=2
event t=1500 api=cudaMalloc dev=0 ptr=0x7100000000 size=1MiB stack=3
end t=2000 events=1 dropped=0
VT
"$GEN" $TMP/esc.vt -o $TMP/esc.vtrace || nok "vtgen esc"
$VT report --color never $TMP/esc.vtrace >$TMP/esc.txt 2>$TMP/esc.err
is "$?" 0 "escapes: report exits 0"
is "$(tr -d '\n -~' <$TMP/esc.txt | tr -d 'é' | wc -c)" 0 \
    "escapes: the text report holds no control byte, C1 or bidi control (only printable ASCII, newline and é)"
is "$(grep -c '^VERDICT' $TMP/esc.txt)" 1 "escapes: one VERDICT line, no forged one"
check "escapes: exe as \\xNN" grep -qF '== x\x1b[2J (pid 7) a\x1b]0;owned\x07 b\x0aVERDICT: NO SPILL. \xc2\x9b31m' $TMP/esc.txt
check "escapes: device name as \\xNN" grep -qF 'GPU 0 (GPU\x1b]8;;http://evil\x1b\link\x1b]8;;\x1b\)' $TMP/esc.txt
check "escapes: function name as \\xNN" grep -qF 'f\x0aVERDICT: NO SPILL.\xe2\x80\xae  [m\x1b[31m.so]' $TMP/esc.txt
check "escapes: valid UTF-8 printed as it is" grep -qF 'café' $TMP/esc.txt
$VT report --color never --raw-strings $TMP/esc.vtrace >$TMP/raw.txt 2>&1
is "$(grep -c 'VERDICT: NO SPILL' $TMP/raw.txt)" 3 "--raw-strings: the trace's strings as they are"
$VT replay --capacity 512MiB $TMP/esc.vtrace >$TMP/replay.txt 2>&1
is "$(tr -d '\n -~' <$TMP/replay.txt | tr -d 'é' | wc -c)" 0 "escapes: replay's text holds no control byte either"
check "escapes: replay names the function as \\xNN" grep -qF '#0  f\x0aVERDICT: NO SPILL.\xe2\x80\xae' $TMP/replay.txt
# HTML: markup from a trace is text, never markup or the end of a script.
$VT report --html $TMP/esc.html $TMP/esc.vtrace 2>$TMP/html.err
is "$?" 0 "html: report exits 0"
is "$(grep -c '<img src=x' $TMP/esc.html)" 0 "html: a function name's markup is escaped"
is "$(grep -o '</script' $TMP/esc.html | wc -l)" "$(grep -o '<script' $TMP/esc.html | wc -l)" "html: no script closed by a trace string"
check "html: the name is shown escaped" grep -qF '&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;' $TMP/esc.html

done_testing
