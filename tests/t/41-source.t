#!/bin/sh
# file:line in the report's stacks (analyzer/dwarf_lines.c): read from the DWARF
# of the binaries on this machine, and only when the file's build id is the
# one the trace recorded. The example programs are built with -g; expected
# lines are found by grepping their sources, never hard-coded.
. tests/t/lib.sh
EX=$B/examples
for f in "$SHIM" "$VT" "$B/vtgen" "$EX/llama-cli" "$EX/libggml-cuda.so" "$SIM/libcudart.so.13"; do
    if [ ! -e "$f" ]; then
        echo "1..0 # SKIP $f not built (make test-bins)"
        exit 0
    fi
done
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 needed to read the JSON report"; exit 0; }

TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
SRC=examples/ggml/ggml-cuda.cpp

# j JSON EXPR: a Python expression over r (the report) and e (the first
# process's tipping event); samefile(a, b) compares paths.
j() {
    python3 - "$1" "$2" <<'PY' 2>&1
import json, os, sys
r = json.load(open(sys.argv[1]))
e = (r["processes"][0].get("spill") or {}).get("event", {})
# schema /3: a stack is an entry of its process's prefix table "stacks"
def st(o):
    p, i, out = r["processes"][0], o["stack"], []
    while i is not None:
        out.append(p["frames"][p["stacks"]["frame"][i]])
        i = p["stacks"]["prefix"][i]
    return out
def samefile(a, b):
    try: return os.path.samefile(a, b)
    except OSError: return False
print(eval(sys.argv[2]))
PY
}

# The line that calls cudaMalloc in ggml_cuda_device_malloc, and the line
# that calls ggml_cuda_device_malloc in the buffer type's alloc_buffer.
LINE0=$(grep -n 'return cudaMalloc(' $SRC | head -1 | cut -d: -f1)
LINE1=$(grep -n '= ggml_cuda_device_malloc(' $SRC | head -1 | cut -d: -f1)
check "expected lines found in $SRC ($LINE0, $LINE1)" [ -n "$LINE0" -a -n "$LINE1" ]

# ---- 1. a real trace: llama-cli 70B on a 24 GiB card, the tipping oom ------
D=$TMP/s1
mkdir -p $D
VTSIM_DEVICES=24GiB under_shim $D "$EX/llama-cli" -m llama-70b-q4_k_m -ngl 99 -c 8192 --no-mmap >$D.out 2>$D.err
"$VT" report --wide $D >$D.txt 2>$D.rerr
is "$?" 0 "report exits 0"
is "$(sed -n '/^Tipping event/{n;p;q}' $D.txt | sed 's/^ *//')" \
    "#0  ggml_cuda_device_malloc(void**, unsigned long, int)  ggml-cuda.cpp:$LINE0  [libggml-cuda.so]" \
    "text: tipping frame #0 shows the cudaMalloc line"
is "$(sed -n '/^Tipping event/{n;n;p;q}' $D.txt | sed 's/^ *//')" \
    "#1  ggml_backend_cuda_buffer_type_alloc_buffer(ggml_backend_buffer_type*, unsigned long)  ggml-cuda.cpp:$LINE1  [libggml-cuda.so]" \
    "text: frame #1 shows the line that called it"
check "text: the top site's stack has file:line too" \
    grep -q "^        #0  ggml_cuda_device_malloc(void\*\*, unsigned long, int)  ggml-cuda.cpp:$LINE0  " $D.txt
check "no message on stderr" [ ! -s $D.rerr ]

"$VT" report --json $D >$D.json 2>$D.jerr
is "$(j $D.json 'st(e)[0]["line"]')" "$LINE0" "json: tipping frame 0 line"
is "$(j $D.json 'samefile(st(e)[0]["file"], "'$SRC'")')" True "json: tipping frame 0 file is $SRC"
is "$(j $D.json 'st(e)[0]["file"].startswith("/")')" True "json: file is absolute (compile dir joined)"
is "$(j $D.json 'st(e)[1]["line"]')" "$LINE1" "json: tipping frame 1 line"
is "$(j $D.json 'all(f["line"] > 0 for s in r["processes"][0]["sites"] for f in st(s)[:3])')" True \
    "json: every site's 3 innermost frames have a line"

"$VT" report --html $D.html $D 2>$D.herr
check "html: stacks show file:line" grep -q ">ggml-cuda.cpp:$LINE0</span>" $D.html
check "html: the whole path in the tooltip" grep -q "title=\"[^\"]*examples/ggml/ggml-cuda.cpp\">ggml-cuda.cpp:$LINE0" $D.html

"$VT" report --wide --no-source $D >$D.nosrc 2>&1
check "--no-source: no file:line in text" sh -c "! grep -q 'ggml-cuda.cpp:' $D.nosrc"
is "$(sed -n '/^Tipping event/{n;p;q}' $D.nosrc | sed 's/^ *//')" \
    "#0  ggml_cuda_device_malloc(void**, unsigned long, int)  [libggml-cuda.so]" "--no-source: names only"
"$VT" report --json --no-source $D >$D.nosrc.json 2>&1
is "$(j $D.nosrc.json '(st(e)[0]["file"], st(e)[0]["line"])')" "('', 0)" "--no-source: json file \"\", line 0"

# ---- 2. made-up traces naming the same binary ------------------------------
# The frame's ip and the module's build id come from the real trace, so the
# only difference between the cases is what the module record says.
"$VT" dump $D/*.vtrace >$D.dump
MOD=$(grep '^module ' $D.dump | grep '/libggml-cuda.so$' | head -1)
MID=$(echo "$MOD" | sed 's/.* id=\([0-9]*\) .*/\1/')
MBASE=$(echo "$MOD" | sed 's/.* base=\(0x[0-9a-f]*\) .*/\1/')
BID=$(echo "$MOD" | sed 's/.* build_id=\([0-9a-f]*\) .*/\1/')
FRAME=$(grep "^frame .* module=$MID .*function=_Z23ggml_cuda_device_malloc" $D.dump | head -1)
FIP=$(echo "$FRAME" | sed 's/.* ip=\(0x[0-9a-f]*\) .*/\1/')
OFF=$((FIP - MBASE))
check "the real trace names libggml-cuda.so with a build id ($BID) and the frame (+$OFF)" \
    [ -n "$BID" -a "$OFF" -gt 0 ]

# made NAME PATH BUILD_ID: a trace whose tipping stack is that one frame of
# module PATH (loaded at another base) with BUILD_ID; its JSON report.
made() {
    base=0x500000000
    {
        echo "process pid=7 exe=/usr/bin/x"
        echo "device 0 total=24GiB free=23GiB name=Sim uuid=00112233445566778899aabbccddeeff t=0"
        echo "module 1 base=$base size=64KiB path=\"$2\" build_id=$3"
        printf 'frame 0x%x module=1 offset=0 function=_Z23ggml_cuda_device_mallocPPvmi\n' $((base + OFF))
        printf 'stack 1 parent=0 ip=0x%x\n' $((base + OFF))
        echo "event t=1000 api=cudaMalloc dev=0 size=30GiB result=2 stack=1"
        echo "end t=2000 events=1 dropped=0"
    } >$TMP/$1.vt
    "$B/vtgen" -o $TMP/$1.vtrace $TMP/$1.vt || nok "vtgen $1"
    timeout 20 "$VT" report --json $TMP/$1.vtrace >$TMP/$1.json 2>$TMP/made.$1.err
}
src_of() { j $TMP/$1.json '(st(e)[0]["line"], st(e)[0]["file"].endswith("/'$SRC'"))'; }

made match "$EX/libggml-cuda.so" $BID
is "$(src_of match)" "($LINE0, True)" "same build id, other load address: the line"
BAD=$(echo $BID | sed 's/^\(..\)/ff/; s/^ffff/00ff/')
[ "$BAD" = "$BID" ] && BAD=00$(echo $BID | cut -c3-)
made mismatch "$EX/libggml-cuda.so" $BAD
is "$?" 0 "other build id: report exits 0"
is "$(src_of mismatch)" "(0, False)" "other build id than the file on disk: no file:line"
check "other build id: no message" [ ! -s $TMP/made.mismatch.err ]
"$VT" report --wide $TMP/mismatch.vtrace >$TMP/mismatch.txt 2>&1
check "other build id: text shows the name, no file:line" \
    grep -q '^    #0  ggml_cuda_device_malloc(void\*\*, unsigned long, int)  \[libggml-cuda.so\]$' $TMP/mismatch.txt
made noid "$EX/libggml-cuda.so" ""
is "$(src_of noid)" "(0, False)" "no build id in the trace: no file:line"
made shortid "$EX/libggml-cuda.so" $(echo $BID | cut -c1-16)
is "$(src_of shortid)" "(0, False)" "a prefix of the build id: no file:line"
made missing "$TMP/gone/libggml-cuda.so" $BID
is "$(src_of missing)" "(0, False)" "binary not on this machine: no file:line"

# Hostile module paths: never opened (a fifo would block open(), a device
# would feed libelf forever); each report must end quickly and quietly.
mkfifo $TMP/fifo.so
made fifo $TMP/fifo.so $BID
is "$?" 0 "a fifo as the module path: report ends, exit 0"
is "$(src_of fifo)" "(0, False)" "a fifo: no file:line"
made dev /dev/zero $BID
is "$?" 0 "/dev/zero as the module path: report ends"
made dir "$TMP" $BID
is "$?" 0 "a directory as the module path: report ends"
: >$TMP/empty.so
made empty $TMP/empty.so $BID
is "$(src_of empty)" "(0, False)" "an empty file: no file:line"
head -c 4096 "$EX/libggml-cuda.so" >$TMP/cut.so
made cut $TMP/cut.so $BID
is "$?" 0 "a truncated copy of the binary: report exits 0"
is "$(src_of cut)" "(0, False)" "a truncated copy: no file:line"
ln -s "$EX/libggml-cuda.so" $TMP/link.so
made link $TMP/link.so $BID
is "$(src_of link)" "($LINE0, True)" "a symlink to the right binary: the line"
check "no hostile case printed anything" sh -c "cat $TMP/made.*.err | { ! grep -q .; }"

done_testing
