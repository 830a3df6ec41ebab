#!/bin/sh
# The trace reader and `vramtrace dump`, end to end: traces written by
# build/vtgen with known numbers, damaged on purpose, and mutated at every
# byte. Needs build/vramtrace, build/vtgen and build/test_reader.
. tests/t/lib.sh
GEN=$B/vtgen
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT

# -- the reader's C unit tests ------------------------------------------------
if "$B/test_reader" >"$D/unit.out" 2>&1; then
    ok "reader unit tests ($(grep -c '^ok' "$D/unit.out") checks)"
else
    nok "reader unit tests"
    grep -v '^ok' "$D/unit.out" | sed 's/^/# /'
fi

# -- a valid multi-chunk trace round-trips with exact values -----------------
cat >"$D/a.vt" <<'VT'
process pid=100 ppid=1 exe=/usr/bin/llama-server argv=llama-server,-m,model.gguf host=box start=1000000 wall=1700000000000000000
device 0 total=24GiB free=23.5GiB name="Sim 24GB" uuid=00112233445566778899aabbccddeeff t=10
module 1 base=0x400000 size=0x100000 path=/usr/lib/libllama.so build_id=deadbeef
frame 0x401000 module=1 offset=0x10 function=_ZN11llama_model12load_tensorsERT_
stack 1 parent=0 ip=0x401000
stack 2 parent=1 ip=0x402000
event t=1000 api=cudaMalloc dev=0 ptr=0x10000000000 size=1GiB result=0 stack=2 flags=runtime tid=42
record type=200 payload=0102030405
chunk
VT
cat "$D/a.vt" >"$D/b.vt"
cat >>"$D/b.vt" <<'VT'
event t=900 api=cuMemAlloc_v2 ptr=0x20000000000 size=512MiB reserved=0x20000000 aux=0x7 flags=ptsz|at_peak|0x10000
event t=2000 api=cudaMalloc dev=1 size=80GiB result=2 stack=1 flags=runtime
event t=2100 api=#4000 dev=-1
note t=3000 text="tab\there \"q\" back\\slash \x01"
range t=3100 tid=7 depth=1 push name="load model"
range t=3200 tid=7 depth=1 pop name="load model"
dropped t=4000 total=3 stacks_lost=1 extra=00ff
chunk
VT
cat "$D/b.vt" >"$D/c.vt"
cat >>"$D/c.vt" <<'VT'
event t=4500 api=cudaFree ptr=0x10000000000 tid=42 flags=runtime
end t=5000 events=5 dropped=3
VT
for s in a b c; do "$GEN" "$D/$s.vt" -o "$D/$s.trace" || nok "vtgen $s.vt"; done
"$VT" dump "$D/c.trace" >"$D/c.out" 2>"$D/c.err"
is "$?" 0 "dump of a valid trace exits 0"
cat >"$D/c.want" <<'OUT'
process pid=100 ppid=1 exe=/usr/bin/llama-server argv=["llama-server","-m","model.gguf"] host=box shim=0.1.0 start_mono=1000000 start_wall=1700000000000000000
device ordinal=0 total=25769803776 free=25232932864 uuid=00112233445566778899aabbccddeeff name="Sim 24GB" t=10
module id=1 base=0x400000 size=0x100000 build_id=deadbeef path=/usr/lib/libllama.so
frame ip=0x401000 module=1 offset=0x10 function=_ZN11llama_model12load_tensorsERT_
stack node=1 parent=0 ip=0x401000
stack node=2 parent=1 ip=0x402000
event t=1000 api=cudaMalloc kind=alloc space=device tid=42 dev=0 ptr=0x10000000000 size=1073741824 reserved=0 aux=0x0 flags=runtime result=0 stack=2
event t=900 api=cuMemAlloc_v2 kind=alloc space=device tid=1 dev=0 ptr=0x20000000000 size=536870912 reserved=536870912 aux=0x7 flags=ptsz|at_peak|0x10000 result=0 stack=0
event t=2000 api=cudaMalloc kind=alloc space=device tid=1 dev=1 ptr=0x0 size=85899345920 reserved=0 aux=0x0 flags=runtime result=2 stack=1
event t=2100 api=#4000 kind=? space=? tid=1 dev=-1 ptr=0x0 size=0 reserved=0 aux=0x0 flags=0 result=0 stack=0
note t=3000 text="tab\x09here \"q\" back\\slash \x01"
range t=3100 tid=7 depth=1 push name="load model"
range t=3200 tid=7 depth=1 pop name="load model"
dropped t=4000 total=3 stacks_lost=1
event t=4500 api=cudaFree kind=free space=device tid=42 dev=0 ptr=0x10000000000 size=0 reserved=0 aux=0x0 flags=runtime result=0 stack=0
end t=5000 events=5 dropped=3
OUT
if cmp -s "$D/c.out" "$D/c.want"; then ok "dump prints every record exactly (3 chunks, unknown type skipped)"
else nok "dump prints every record exactly"; diff "$D/c.want" "$D/c.out" | sed 's/^/# /'; fi
is "$(cat "$D/c.err")" "" "nothing on stderr for a valid trace"

# -- dump --count: exact numbers, and the records dump prints -----------------
"$VT" dump --count "$D/c.trace" >"$D/count.out" 2>"$D/count.err"
is "$?" 0 "dump --count of a valid trace exits 0"
printf 'process 1\ndevice 1\nmodule 1\nframe 1\nstack 2\nevent 5\ndropped 1\nnote 1\nend 1\nrange 2\nrecords 16\n' >"$D/count.want"
if cmp -s "$D/count.out" "$D/count.want"; then ok "dump --count: each kind's exact count (unknown type skipped)"
else nok "dump --count: each kind's exact count"; diff "$D/count.want" "$D/count.out" | sed 's/^/# /'; fi
# --count reads events and stack nodes in bulk, the report's way: on a
# trace of many of both it must still count exactly what dump prints.
GENTRACE=$B/bench/gentrace
if [ -x "$GENTRACE" ]; then
    "$GENTRACE" -L -o "$D/g.trace" -e 30000 -l 500 -s 2000 >"$D/g.gen"
    "$VT" dump --count "$D/g.trace" >"$D/g.count"
    "$VT" dump "$D/g.trace" | awk '{n[$1]++} END {for (k in n) print k, n[k]}' | sort >"$D/g.lines"
    grep -v '^records ' "$D/g.count" | sort >"$D/g.count.sorted"
    check "dump --count on 30000 events / 2000 stacks: the same counts as dump's lines" cmp -s "$D/g.count.sorted" "$D/g.lines"
    is "$(sed -n 's/^event //p' "$D/g.count")" 30000 "dump --count: 30000 events, as gentrace wrote"
    is "$(sed -n 's/^stack //p' "$D/g.count")" "$(sed -n 's/.*nodes=//p' "$D/g.gen")" "dump --count: every stack node gentrace wrote"
else
    nok "dump --count in bulk: $GENTRACE not built"
fi
head -c $(( $(wc -c <"$D/c.trace") - 1 )) "$D/c.trace" >"$D/cut.trace"
"$VT" dump --count "$D/cut.trace" >"$D/cut.count" 2>"$D/cut.err"
is "$?" 2 "dump --count of a cut trace: exit 2"
is "$(sed -n 's/^records //p' "$D/cut.count")" 14 "dump --count of a cut trace: the 14 records of its 2 complete chunks"
check "dump --count of a cut trace: names the offset" grep -q "cut.trace: offset [0-9]*: trace ends in the middle of a chunk" "$D/cut.err"
"$VT" dump --count --stacks "$D/c.trace" >/dev/null 2>&1; is "$?" 2 "dump --count --stacks: exit 2"

"$VT" dump --stacks "$D/c.trace" >"$D/s.out"
is "$(sed -n '/t=1000 /,/^[a-z]/p' "$D/s.out" | sed -n '2,3p')" \
"    #0 0x402000 ?? (?)
    #1 0x401000 _ZN11llama_model12load_tensorsERT_ (/usr/lib/libllama.so)" "--stacks prints the stack innermost first"
is "$(grep -c '^    #' "$D/s.out")" 3 "--stacks: frames only under events with a stack"

# -- event flags: vtgen's names and dump's, each against the header's bits ----
# Bit k is flag k of trace_format.h's VT_EF_* list; an event by name and one
# by number must both come back as that name.
FLAGS="sample runtime ptsz via_procaddr via_dlsym first_on_device after_failure at_peak"
bit=1; : >"$D/flags.vt"
for f in $FLAGS; do
    echo "event t=1 api=cudaMalloc flags=$f" >>"$D/flags.vt"
    echo "event t=1 api=cudaMalloc flags=$bit" >>"$D/flags.vt"
    bit=$((bit * 2))
done
"$GEN" "$D/flags.vt" -o "$D/flags.trace" || nok "vtgen flags.vt"
is "$("$VT" dump "$D/flags.trace" | sed -n 's/^event .* flags=\([^ ]*\) .*/\1/p' | tr '\n' ' ')" \
    "$(for f in $FLAGS; do printf '%s %s ' $f $f; done)" "each of the 8 event flags, by name and by bit, dumps as its name"

# -- what the shim writes: version 3 with zstd chunks, 4 with stored ones ----
"$GEN" --stored "$D/c.vt" -o "$D/c-stored.trace" || nok "vtgen --stored c.vt"
version_of() { od -A n -t u2 -j 8 -N 2 "$1" | tr -d ' '; }
chunk_magic_of() { dd if="$1" bs=1 skip=$((16 + $(od -A n -t u4 -j 12 -N 4 "$1"))) count=4 2>/dev/null; }
is "$(version_of "$D/c.trace") $(chunk_magic_of "$D/c.trace")" "3 VTCK" "vtgen: format version 3, zstd chunks (the shim with libzstd)"
is "$(version_of "$D/c-stored.trace") $(chunk_magic_of "$D/c-stored.trace")" "4 VTCS" \
    "vtgen --stored: format version 4, stored chunks (the shim without libzstd)"
"$VT" dump "$D/c-stored.trace" >"$D/c-stored.out" 2>&1
check "dump reads version 4 stored chunks as the same records as version 3 zstd ones" cmp -s "$D/c.out" "$D/c-stored.out"
"$VT" report "$D/c.trace" >"$D/c.report" 2>&1; "$VT" report "$D/c-stored.trace" >"$D/c-stored.report" 2>&1
check "report: the same for both (but the file name)" \
    sh -c "sed 's/c-stored.trace/c.trace/g' '$D/c-stored.report' | cmp -s - '$D/c.report'"

# Hostile strings never reach the terminal raw.
printf '%s\n' 'process exe="/opt/my app/\x1b[31mred" argv="a b","\"q\"" host="h\nx"' \
    'note t=1 text="\x1b]0;pwned\x07"' >"$D/esc.vt"
"$GEN" "$D/esc.vt" -o "$D/esc.trace"
"$VT" dump "$D/esc.trace" >"$D/esc.out"
is "$(head -1 "$D/esc.out" | cut -d" " -f4-7)" 'exe=/opt/my\x20app/\x1b[31mred argv=["a b","\"q\""] host=h\x0ax' \
    "strings are escaped (bare fields never hold a space)"
check "no control bytes in dump output" sh -c "! LC_ALL=C grep -q '[[:cntrl:]]' '$D/esc.out'"

# -- truncation: records of complete chunks, then exit 2 at the chunk offset --
A=$(wc -c <"$D/a.trace"); Bs=$(wc -c <"$D/b.trace"); C=$(wc -c <"$D/c.trace")
"$VT" dump "$D/a.trace" >"$D/a.out"; "$VT" dump "$D/b.trace" >"$D/b.out"
for cut in $((A + 1)) $((A + 15)) $((A + 16)) $((A + 17)) $((Bs - 1)) $((Bs + 3)) $((C - 1)); do
    if [ $cut -lt $Bs ]; then want=a; at=$A; n=1; else want=b; at=$Bs; n=2; fi
    head -c $cut "$D/c.trace" >"$D/cut.trace"
    "$VT" dump "$D/cut.trace" >"$D/cut.out" 2>"$D/cut.err"
    is "$?" 2 "cut at $cut: exit 2"
    check "cut at $cut: every record of the $n complete chunks printed" cmp -s "$D/cut.out" "$D/$want.out"
    check "cut at $cut: error names offset $at" grep -q "cut.trace: offset $at: trace ends in the middle of a chunk" "$D/cut.err"
    check "cut at $cut: says $n complete chunks were read" grep -q "records of $n complete chunks" "$D/cut.err"
done
head -c $A "$D/c.trace" >"$D/cut.trace"
"$VT" dump "$D/cut.trace" >"$D/cut.out" 2>&1
is "$?" 0 "cut exactly on a chunk boundary is a shorter valid trace"
for cut in 1 7 15 16 40; do
    head -c $cut "$D/c.trace" >"$D/cut.trace"
    "$VT" dump "$D/cut.trace" >/dev/null 2>"$D/cut.err"
    is "$?" 2 "cut inside the prelude/header at $cut: exit 2"
done
check "a cut prelude is reported as truncated" grep -q "trace ends in the middle" "$D/cut.err"

# -- committed damaged samples ------------------------------------------------
for t in tests/corrupt/*.trace; do
    name=$(basename "$t" .trace)
    if [ -f "tests/corrupt/$name.vt" ]; then
        want=$(sed -n '1s/^# expect: //p' "tests/corrupt/$name.vt")
    else
        want="not a vramtrace trace"
    fi
    "$VT" dump "$t" >/dev/null 2>"$D/err"
    is "$?" 2 "corrupt/$name: exit 2"
    check "corrupt/$name: says '$want'" grep -qF "$want" "$D/err"
    check "corrupt/$name: error names file and offset" grep -q "^vramtrace: $t: offset [0-9]*: " "$D/err"
done

# -- not traces, and the command line -----------------------------------------
: >"$D/empty"
"$VT" dump "$D/empty" 2>"$D/err"; is "$?" 2 "empty file: exit 2"
check "empty file: not a trace" grep -q "offset 0: not a vramtrace trace" "$D/err"
head -c 3000 /dev/urandom >"$D/noise"
"$VT" dump "$D/noise" >/dev/null 2>&1; is "$?" 2 "random bytes: exit 2"
"$VT" dump "$D" 2>"$D/err"; is "$?" 2 "directory: exit 2"
check "directory: says so" grep -q "is a directory" "$D/err"
"$VT" dump "$D/missing" 2>/dev/null; is "$?" 2 "missing file: exit 2"
"$VT" dump 2>/dev/null; is "$?" 2 "dump without TRACE: exit 2"
"$VT" dump --bogus "$D/c.trace" 2>/dev/null; is "$?" 2 "dump unknown option: exit 2"
"$VT" >/dev/null 2>&1; is "$?" 2 "no command: exit 2"
"$VT" frobnicate >/dev/null 2>&1; is "$?" 2 "unknown command: exit 2"
"$VT" --help >"$D/help"; is "$?" 0 "--help: exit 0"
check "--help lists dump and report" sh -c "grep -q '^  dump ' '$D/help' && grep -q '^  report ' '$D/help'"
"$VT" dump --help >"$D/help"; is "$?" 0 "dump --help: exit 0"
check "dump --help shows usage" grep -q "usage: vramtrace dump" "$D/help"
is "$("$VT" --version)" "vramtrace $(sed -n 's/^VERSION := //p' Makefile)" "--version"

# -- every cut and every flipped byte: exit 0 or 2, never a signal -----------
MUTATE='
    my ($vt, $in, $dir) = @ARGV;
    open my $f, "<:raw", $in or die; local $/; my $data = <$f>; close $f;
    my ($n, $bad) = (0, 0);
    for my $i (0 .. length($data) - 1) {
        for my $mut (substr($data, 0, $i), do { my $d = $data; substr($d, $i, 1) ^= "\xff"; $d }) {
            open my $o, ">:raw", "$dir/m.trace" or die; print $o $mut; close $o;
            system("$vt dump --stacks $dir/m.trace >/dev/null 2>&1");
            $n++;
            my ($sig, $rc) = ($? & 127, $? >> 8);
            if ($sig || ($rc != 0 && $rc != 2)) {
                $bad++;
                print "# byte $i: signal $sig exit $rc (kept as $dir/../vt-crash-$i.trace)\n";
                system("cp $dir/m.trace $dir/../vt-crash-$i.trace");
            }
        }
    }
    print "# $n mutants\n";
    exit($bad ? 1 : 0);
'
perl -e "$MUTATE" "$VT" "$D/c.trace" "$D"
is "$?" 0 "every cut and byte flip of a trace: exit 0 or 2, no crash"
# Without the zstd checksum, damage inside a chunk reaches the record decoder
# and dump's printing instead of stopping at the checksum.
"$GEN" --no-checksum "$D/c.vt" -o "$D/nock.trace"
perl -e "$MUTATE" "$VT" "$D/nock.trace" "$D"
is "$?" 0 "the same without zstd checksums: exit 0 or 2, no crash"

done_testing
