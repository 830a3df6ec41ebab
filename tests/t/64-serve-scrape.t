#!/bin/sh
# `vramtrace serve` keeps what it read between scrapes: a trace unchanged
# since the last scrape is not opened again, a trace that grew is read on
# from its last complete chunk (only the new bytes: a chunk left partial
# by its writer is read again whole once complete), and a trace replaced
# or cut is read afresh. Each scrape is the exposition a fresh `serve
# --once` gives, but for the two self-metrics that say what the scrape
# read; `top` keeps its traces the same way.
. tests/t/lib.sh
for f in "$VT" "$B/vtgen"; do
    [ -e "$f" ] || { echo "1..0 # SKIP $f not built (make test-bins)"; exit 0; }
done
command -v curl >/dev/null || { echo "1..0 # SKIP curl needed to scrape"; exit 0; }
TMP=$(tmpdir)
EXP=
trap '[ -n "$EXP" ] && kill -TERM "$EXP" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$TMP"' EXIT
D=$TMP/traces
mkdir -p $D

# A process that ended, and one whose trace grows by a chunk: b1 is the
# first chunk of b2, byte for byte (the shim appends whole chunks).
cat >$TMP/a.vt <<'VT'
process pid=76 ppid=1 exe=/usr/bin/done argv=done host=box start=1000000000
device 0 total=24GiB free=23GiB name="NVIDIA Sim" uuid=0123456789abcdef0123456789abcdef t=0
event t=1000 api=cudaMalloc dev=0 ptr=0x7000000000 size=5GiB
end t=9000 events=1 dropped=0
VT
cat >$TMP/b1.vt <<'VT'
process pid=77 ppid=1 exe=/usr/bin/growing argv=growing host=box start=1000000000
device 0 total=24GiB free=23GiB name="NVIDIA Sim" uuid=0123456789abcdef0123456789abcdef t=0
module 0 base=0x400000 size=0x100000 path=/usr/bin/growing
frame 0x401000 module=0 offset=0x1000 function=grow
stack 1 parent=0 ip=0x401000
event t=1000 api=cudaMalloc dev=0 ptr=0x7000000000 size=1GiB stack=1
event t=2000 api=cudaMalloc dev=0 ptr=0x7100000000 size=2GiB stack=1
chunk
VT
{
    cat $TMP/b1.vt
    echo 'event t=3000 api=cudaMalloc dev=0 ptr=0x7200000000 size=3GiB stack=1'
    echo 'event t=4000 api=cudaFree dev=0 ptr=0x7000000000'
    echo 'chunk'
    echo 'end t=9000 events=4 dropped=0'
} >$TMP/b2.vt
sed 's/pid=77/pid=78/; s/size=2GiB/size=7GiB/' $TMP/b1.vt >$TMP/c.vt
for n in a b1 b2 c; do "$B/vtgen" -o $TMP/$n.vtrace $TMP/$n.vt || nok "vtgen $n"; done
s1=$(stat -c %s $TMP/b1.vtrace) s2=$(stat -c %s $TMP/b2.vtrace)
is "$(cmp -n $s1 $TMP/b1.vtrace $TMP/b2.vtrace && echo prefix)" prefix "b1 is the start of b2"
cp $TMP/a.vtrace $D/a.vtrace
cp $TMP/b1.vtrace $D/b.vtrace

"$VT" serve --metrics 0 $D 2>$TMP/serve.err &
EXP=$!
t=100
while ! grep -q "serving metrics on" $TMP/serve.err && [ $t -gt 0 ]; do sleep 0.1; t=$((t - 1)); done
URL=$(sed -n 's/.*serving metrics on \(http[^ ]*\).*/\1/p' $TMP/serve.err)
n=0
# scrape: the next scrape into $TMP/sN.om; fresh: serve --once now, into
# $TMP/fN.om; same N: the two without the read self-metrics.
scrape() { n=$((n + 1)); curl -s -f -o $TMP/s$n.om "$URL"; "$VT" serve --once $D >$TMP/f$n.om 2>/dev/null; }
same() {
    grep -v '^vramtrace_scrape_read_' $TMP/s$1.om >$TMP/s$1.cut
    grep -v '^vramtrace_scrape_read_' $TMP/f$1.om >$TMP/f$1.cut
    cmp -s $TMP/s$1.cut $TMP/f$1.cut
}
read_of() { grep -E '^vramtrace_scrape_read_(traces|bytes) ' $TMP/s$1.om | awk '{ printf "%s ", $2 }'; }
events_of() { sample $TMP/s$1.om vramtrace_events_total "pid=\"$2\""; }
sample() { awk -v n="$2" -v f="$3" 'index($0, n "{") == 1 && index($0, f) { print $NF; exit }' "$1"; }

scrape
is "$(read_of 1)" "2 $(( $(stat -c %s $D/a.vtrace) + s1 )) " "first scrape: both traces read, all their bytes"
check "first scrape: the exposition of a fresh read" same 1
is "$(events_of 1 77)" 2 "first scrape: the growing trace's 2 events"

scrape
is "$(read_of 2)" "0 0 " "nothing changed: nothing read"
check "nothing changed: the exposition of a fresh read" same 2

# The shim appends the next chunk and END.
tail -c +$((s1 + 1)) $TMP/b2.vtrace >>$D/b.vtrace
scrape
is "$(read_of 3)" "1 $((s2 - s1)) " "grown: only the growing trace's new bytes read"
is "$(events_of 3 77) $(sample $TMP/s3.om vramtrace_process_ended 'pid="77"')" "4 1" \
    "grown: its 4 events counted once (not 2 + 4), and its END"
check "grown: the exposition of a fresh read" same 3

# Replaced by another run (a new file, a new inode) of the same size class.
cp $TMP/c.vtrace $D/b.vtrace.new
mv $D/b.vtrace.new $D/b.vtrace
scrape
is "$(read_of 4)" "1 $(stat -c %s $TMP/c.vtrace) " "replaced: read afresh"
is "$(events_of 4 78)/$(grep -c 'pid="77"' $TMP/s4.om)" "2/0" "replaced: the new process, nothing left of the old"
check "replaced: the exposition of a fresh read" same 4

# Cut in place (the same inode, smaller): read afresh, as far as it goes.
cp $TMP/b2.vtrace $D/b.vtrace
scrape
truncate -s $((s1 + 10)) $D/b.vtrace
scrape
is "$(read_of 6)" "1 $((s1 + 10)) " "cut in place: read afresh"
is "$(events_of 6 77) $(sample $TMP/s6.om vramtrace_trace_partial 'pid="77"')" "2 1" \
    "cut in place: the first chunk's 2 events, the trace partial"
check "cut in place: the exposition of a fresh read" same 6

rm $D/b.vtrace
scrape
is "$(grep -E '^vramtrace_processes ' $TMP/s7.om)" "vramtrace_processes 1" "removed: gone from the scrape"
check "removed: the exposition of a fresh read" same 7

# A trace of many chunks (a gentrace run: 300,000 events, new stacks
# defined as they are first used, its fragmentation and sites' peaks
# carried across chunks) grows a chunk at a time, once with a chunk cut in
# the middle first, as a writer leaves it between two writes.
if [ -x "$B/bench/gentrace" ]; then
    G=$TMP/g.vtrace
    "$B/bench/gentrace" -L -o $G -e 300000 -l 2000 -s 300 >/dev/null
    set -- $(python3 - $G <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
off = 16 + struct.unpack_from("<I", d, 12)[0]
while off + 16 <= len(d):
    print(off)
    off += 16 + struct.unpack_from("<I", d, off + 4)[0]
print(len(d))
PY
)
    # $1: the first chunk's start, ... the last value: the file's size;
    # gentrace's process is pid 4242.
    is "$#" 5 "gentrace: 4 chunks, the last with END"
    grow_to() { tail -c +$(($(stat -c %s $D/g.vtrace) + 1)) $G | head -c $(($1 - $(stat -c %s $D/g.vtrace))) >>$D/g.vtrace; }
    head -c $2 $G >$D/g.vtrace
    scrape
    g=$n
    is "$(read_of $g)" "1 $2 " "chunked: the header and first chunk read"
    check "chunked, 1 chunk: the exposition of a fresh read" same $g
    grow_to $3
    scrape
    is "$(read_of $n)" "1 $(($3 - $2)) " "chunked, 2 chunks: only the second chunk's bytes read"
    check "chunked, 2 chunks: the exposition of a fresh read" same $n
    half=$(($3 + ($4 - $3) / 2))
    grow_to $half
    scrape
    is "$(read_of $n) $(sample $TMP/s$n.om vramtrace_trace_partial 'pid="4242"')" "1 $((half - $3))  1" \
        "chunked, the third chunk half written: its bytes read, the trace partial"
    check "chunked, the third half written: the exposition of a fresh read" same $n
    grow_to $4
    scrape
    is "$(read_of $n) $(sample $TMP/s$n.om vramtrace_trace_partial 'pid="4242"')" "1 $(($4 - $3))  0" \
        "chunked, the third chunk complete: read again from its start, whole, the trace no longer partial"
    check "chunked, 3 chunks: the exposition of a fresh read" same $n
    grow_to $5
    scrape
    is "$(read_of $n) $(sample $TMP/s$n.om vramtrace_process_ended 'pid="4242"')" "1 $(($5 - $4))  1" \
        "chunked, the last chunk and END: only its bytes read, the process ended"
    check "chunked, all 4: the exposition of a fresh read" same $n
    is "$(sample $TMP/s$n.om vramtrace_events_total 'pid="4242"')" 300000 "chunked: every event counted once"
    scrape
    is "$(read_of $n)" "0 0 " "chunked, ended and unchanged: nothing read"
    check "chunked, ended: the exposition of a fresh read" same $n
else
    echo "# gentrace not built: the chunked growth checks are skipped"
fi
kill -TERM $EXP; wait $EXP 2>/dev/null; EXP=

# top keeps its traces the same way: its frames, before and after a trace
# grew, are `top --once`'s of the directory as it was (the clock aside).
TD=$TMP/top
mkdir -p $TD
cp $TMP/a.vtrace $TD/a.vtrace
cp $TMP/b1.vtrace $TD/b.vtrace
"$VT" top --once $TD | sed 1d >$TMP/top1.want
"$VT" top --interval 0.2 $TD </dev/null >$TMP/top.out 2>&1 &
EXP=$!
sleep 1
tail -c +$((s1 + 1)) $TMP/b2.vtrace >>$TD/b.vtrace
"$VT" top --once $TD | sed 1d >$TMP/top2.want
sleep 1
kill -TERM $EXP; wait $EXP 2>/dev/null; EXP=
# The frames, each after the screen's home-and-clear, the clock line cut.
python3 - $TMP/top.out $TMP/frame <<'PY'
import sys
frames = open(sys.argv[1]).read().split("\033[H\033[2J")[1:]
for name, f in (("first", frames[0]), ("last", frames[-1])):
    open(sys.argv[2] + "." + name, "w").write(f.split("\n", 1)[1])
PY
check "top: the first frame is top --once's" cmp -s $TMP/frame.first $TMP/top1.want
check "top: the last frame, after the trace grew, is top --once's then" cmp -s $TMP/frame.last $TMP/top2.want
check "top: the grown trace's third allocation shows (3 GiB more live)" test "$(cat $TMP/top1.want)" != "$(cat $TMP/top2.want)"
done_testing
