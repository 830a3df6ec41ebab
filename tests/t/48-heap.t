#!/bin/sh
# What heaptrack users look for, on the examples (their allocations are
# written in examples/*.cpp): --leaks, --churn, --histogram, --sort and
# --filter, in text and JSON.
#  vmm-pool: ggml's VMM pool maps 2, 2, 2, 10, 2, 46 MiB (cuMemCreate),
#    kept to the end: 6 allocations, 64 MiB never freed, from two sites
#    (3 of 46+10+2 MiB, 3 of 2+2+2 MiB); the expandable segment maps 512
#    pages of 20 MiB and unmaps every one: 512 freed again, 10240 MiB.
#  llama-server-chat: the KV cache grows by 800 MiB three times (a fourth
#    request fails): 4 calls at one site, more than any other.
. tests/t/lib.sh
EX=$B/examples
for f in "$SHIM" "$VT" "$EX/vmm-pool" "$EX/llama-server-chat" "$SIM/libcudart.so.13"; do
    if [ ! -e "$f" ]; then
        echo "1..0 # SKIP $f not built (make test-bins)"
        exit 0
    fi
done
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 needed to read the JSON report"; exit 0; }

TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
MiB=1048576

traced() {
    dir=$1; shift
    mkdir -p "$dir"
    env -u VTSIM_SHARED -u VTSIM_EXTERNAL -u VTSIM_RESERVE -u VTSIM_GRANULARITY -u VTSIM_SYSMEM_FALLBACK \
        -u GGML_CUDA_ENABLE_UNIFIED_MEMORY -u GGML_CUDA_NO_VMM \
        VRAMTRACE_DIR="$dir" LD_LIBRARY_PATH="$SIM" LD_PRELOAD="$SHIM_PRELOAD" "$@" >"$dir.out" 2>"$dir.err"
}
# q JSON EXPR: a Python expression over p (the first process) and M (MiB).
q() {
    python3 - "$1" "$2" <<'PY' 2>&1
import json, sys
p = json.load(open(sys.argv[1]))["processes"][0]
M = 1 << 20
print(eval(sys.argv[2]))
PY
}

V=$TMP/vmm
VTSIM_DEVICES=24GiB traced $V "$EX/vmm-pool"
S=$TMP/chat
VTSIM_DEVICES=12GiB traced $S "$EX/llama-server-chat" -m llama-13b-q4_k_m --mmap -c 2048 --kv-grow 1024 --turns 8 --turn-tokens 1000

# ---- --leaks -----------------------------------------------------------------
"$VT" report --leaks $V >$V.txt 2>&1
is "$(grep '^Never freed' $V.txt)" "Never freed: 6 allocations holding 64.0 MiB, live when the process exited" \
    "leaks: 6 allocations, 64 MiB, at exit"
is "$(grep -A100 '^Never freed' $V.txt | grep -E '^ +[0-9]+\. ')" "   1.    58.0 MiB  in 3 of 3 allocations  scratch  GPU 0
   2.     6.0 MiB  in 3 of 3 allocations  scratch  GPU 0" "leaks: per site, most bytes first"
is "$(grep -A2 '^   1.    58.0 MiB  in 3' $V.txt | tail -1)" \
    "        #1  ggml_cuda_pool_alloc  ggml-cuda.cpp:351  [libggml-cuda.so]" "leaks: with the site's stack"
"$VT" report --json --leaks $V >$V.json 2>&1
is "$(q $V.json '[(l["live_allocations"], l["live_bytes"] // M, p["sites"][l["site"]]["tag"]) for l in p["leaks"]]')" \
    "[(3, 58, 'scratch'), (3, 6, 'scratch')]" "leaks JSON: per site, referring to sites"
is "$(q $V.json 'sum(s["live_bytes"] for s in p["sites"]) // M')" 64 "leaks JSON: the sites' live bytes add up to 64 MiB"
"$VT" report --leaks $S >$S.leaks 2>&1
is "$(grep '^Never freed' $S.leaks)" "Never freed: nothing; every allocation was freed before the process exited." \
    "leaks: the server frees everything"

# ---- --churn -----------------------------------------------------------------
"$VT" report --churn $V >$V.churn 2>&1
is "$(grep '^Freed again' $V.churn)" "Freed again (churn): 512 allocations, 10.00 GiB in all, by the number freed" \
    "churn: the 512 pages of 20 MiB"
is "$(grep -A1 '^Freed again' $V.churn | tail -1)" "  0 of them temporary: freed with no other allocation or free in between" \
    "churn: none temporary (each page's map comes between its creation and its release)"
is "$(grep -A2 '^Freed again' $V.churn | tail -1)" "   1.    512 of 512 freed (0 temporary), 10.00 GiB  unknown  GPU 0" "churn: one site"
"$VT" report --json --churn $V >$V.cjson 2>&1
is "$(q $V.cjson '[(c["freed"], c["allocations"], c["freed_bytes"] // M, c["temporary"]) for c in p["churn"]]')" "[(512, 512, 10240, 0)]" \
    "churn JSON: 512 of 512 freed, 10240 MiB, none temporary"
is "$(q $V.cjson '"leaks" in p or "size_histogram" in p')" False "churn JSON: no sections that were not asked for"

# ---- --histogram -------------------------------------------------------------
"$VT" report --histogram $V >$V.hist 2>&1
is "$(grep -A6 '^Allocation sizes' $V.hist | tail -5)" "       2.0 MiB      4.0 MiB        4     8.0 MiB  #
       4.0 MiB      8.0 MiB        0         0 B
       8.0 MiB     16.0 MiB        1    10.0 MiB  #
      16.0 MiB     32.0 MiB      512   10.00 GiB  ########################
      32.0 MiB     64.0 MiB        1    46.0 MiB  #" "histogram: 4 x 2 MiB, 10 MiB, 512 x 20 MiB, 46 MiB"
"$VT" report --json --histogram $V >$V.hjson 2>&1
is "$(q $V.hjson '[(h["min_bytes"] // M, (h["max_bytes"] + 1) // M, h["count"], h["bytes"] // M) for h in p["size_histogram"]]')" \
    "[(2, 4, 4, 8), (8, 16, 1, 10), (16, 32, 512, 10240), (32, 64, 1, 46)]" "histogram JSON: the non-empty buckets"

# ---- --sort ------------------------------------------------------------------
"$VT" report --top 2 $S >$S.peak 2>&1
"$VT" report --top 2 --sort calls $S >$S.calls 2>&1
"$VT" report --top 2 --sort bytes $S >$S.bytes 2>&1
is "$(grep -E '^ +1\. ' $S.peak | cut -c1-51)" "   1.    7.23 GiB  weights  GPU 0            1 call" "sort peak (default): the 7400 MiB weights first"
is "$(grep -E '^ +1\. ' $S.calls | cut -c1-51)" "   1.    2.34 GiB  kv       GPU 0            4 call" "sort calls: the KV growth's 4 calls first"
is "$(grep '^Top allocation sites' $S.calls)" "Top allocation sites (by calls; bytes live at peak)" "sort calls: said in the title"
is "$(grep '^Top allocation sites' $S.bytes)" "Top allocation sites (by bytes allocated over the run)" "sort bytes: said in the title"
"$VT" report --json --sort calls $S >$S.json 2>&1
is "$(q $S.json '[(s["calls"], s["total_bytes"] // M) for s in p["sites"][:2]]')" "[(4, 2400), (1, 7400)]" "sort calls JSON: sites in that order"
check "sort: anything else is bad usage" sh -c "! '$VT' report --sort size $S >/dev/null 2>&1"

# ---- --filter ----------------------------------------------------------------
"$VT" report --wide --filter ExpandableSegment $V >$V.filter 2>&1
is "$(grep -cE '^ +[0-9]+\. ' $V.filter)" 1 "filter: one site has ExpandableSegment in its stack"
is "$(grep '^Top allocation sites' $V.filter)" \
    "Top allocation sites (by bytes live at peak), stacks with a frame matching 'ExpandableSegment'" "filter: said in the title"
"$VT" report --wide --leaks --filter ExpandableSegment $V >$V.filter-leaks 2>&1
is "$(grep '^Never freed' $V.filter-leaks)" "Never freed: nothing; every allocation of the matching sites was freed before the process exited." \
    "filter: applies to --leaks"
"$VT" report --json --leaks --filter ggml_cuda_pool_vmm $V >$V.fjson 2>&1
is "$(q $V.fjson '(len(p["sites"]), [l["site"] for l in p["leaks"]])')" "(2, [0, 1])" "filter JSON: only the pool's two sites"
"$VT" report --filter no_such_function $V >$V.none 2>&1
is "$(grep -c "^No allocation site has a frame matching 'no_such_function'.$" $V.none)" 1 "filter: none matching is said"
# ---- heaptrack's temporaries, on a trace with a known order -----------------
# A freed at once (temporary); B and C made, then B freed (C came between)
# and C freed (B's free came between); D freed at once (temporary).
GEN=$B/vtgen
{
    echo 'process pid=7 exe=/usr/bin/app'
    echo 'device 0 total=24GiB free=23GiB name="NVIDIA Sim" uuid=0123456789abcdef0123456789abcdef t=0'
    echo 'module 0 base=0x400000 size=0x100000 path=/usr/bin/app'
    echo 'frame 0x401000 module=0 offset=0x1000 function=app_alloc'
    echo 'stack 1 parent=0 ip=0x401000'
    echo 'event t=1000 api=cudaMalloc dev=0 ptr=0xa0000 size=1MiB stack=1'
    echo 'event t=2000 api=cudaFree dev=0 ptr=0xa0000 stack=1'
    echo 'event t=3000 api=cudaMalloc dev=0 ptr=0xb0000 size=2MiB stack=1'
    echo 'event t=4000 api=cudaMalloc dev=0 ptr=0xc0000 size=4MiB stack=1'
    echo 'event t=5000 api=cudaFree dev=0 ptr=0xb0000 stack=1'
    echo 'event t=6000 api=cudaFree dev=0 ptr=0xc0000 stack=1'
    echo 'event t=7000 api=cudaMalloc dev=0 ptr=0xd0000 size=8MiB stack=1'
    echo 'event t=8000 api=cudaFree dev=0 ptr=0xd0000 stack=1'
    echo 'end t=9000 events=8 dropped=0'
} >$TMP/temp.vt
"$GEN" $TMP/temp.vt -o $TMP/temp.vtrace
"$VT" report --json --churn $TMP/temp.vtrace >$TMP/temp.json 2>&1
is "$(q $TMP/temp.json '[(c["freed"], c["temporary"], c["temporary_bytes"] // M) for c in p["churn"]]')" "[(4, 2, 9)]" \
    "temporaries: of 4 frees, the 1 MiB and the 8 MiB freed at once (9 MiB)"
done_testing
