#!/bin/sh
# ggml's buffer marks as a witness in the report (analyzer/model_witness.c):
# a GGML_BUFFER record tags the allocation live at its base at its time,
# wherever it sits in the file; user rules beat the mark, the mark beats
# the built-in rules; every site says what decided it, and where a mark and
# a rule disagree the report says both. Traces written by build/vtgen with
# exact numbers.
. tests/t/lib.sh
GEN=$B/vtgen
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT
GiB=1073741824
MiB=1048576

j() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); v=eval(sys.argv[2]); print(json.dumps(v) if isinstance(v,(dict,list,bool)) or v is None else v)' "$@"; }
# like TEXT WANT DESC: WANT is a substring of TEXT.
like() { case "$1" in *"$2"*) ok "$3" ;; *) nok "$3"; echo "#   '$2' not in:"; echo "$1" | sed 's/^/#   /' ;; esac; }
gen() { "$GEN" "$D/$1.vt" -o "$D/$1.vtrace" || nok "vtgen $1"; }
json() { name=$1; shift; "$VT" report --json "$@" "$D/$name.vtrace" >"$D/$name.json" 2>"$D/$name.jerr"; }

# Stacks: 1 = a cgo gate (no rule matches: ollama's Go engine), 2 = under
# llama.cpp's KV cache constructor (a built-in kv rule).
header() {
    echo "process pid=$1 ppid=1 exe=/usr/bin/ollama argv=ollama,runner host=box start=1000000000"
    echo 'device 0 total=24GiB free=23.5GiB name="NVIDIA Sim" uuid=0123456789abcdef0123456789abcdef t=0'
    echo 'module 0 base=0x400000 size=0x100000 path=/usr/bin/ollama'
    echo 'frame 0x401000 module=0 offset=0x1000 function=ggml_backend_alloc_ctx_tensors_from_buft'
    echo 'frame 0x402000 module=0 offset=0x2000 function=_cgo_gate'
    echo 'frame 0x403000 module=0 offset=0x3000 function=llama_kv_cache::llama_kv_cache'
    echo 'stack 1 parent=0 ip=0x402000'
    echo 'stack 10 parent=1 ip=0x401000'
    echo 'stack 2 parent=0 ip=0x403000'
    echo 'stack 20 parent=2 ip=0x401000'
}

# -- 1. the shim's order: every event first, the marks after the frees ----
# weights 4 GiB at 0x10000000000 (t 1 ms), KV 1 GiB (never marked), compute
# 256 MiB; a CPU buffer's mark names memory no CUDA call made.
{
    header 100
    echo 'event t=1000000 api=cudaMalloc dev=0 ptr=0x10000000000 size=4GiB stack=10 flags=runtime'
    echo 'event t=2000000 api=cudaMalloc dev=0 ptr=0x10100000000 size=1GiB stack=10 flags=runtime'
    echo 'event t=3000000 api=cudaMalloc dev=0 ptr=0x10140000000 size=256MiB stack=10 flags=runtime'
    echo 'event t=9000000 api=cudaFree dev=0 ptr=0x10000000000 stack=10 flags=runtime'
    echo 'event t=9000000 api=cudaFree dev=0 ptr=0x10100000000 stack=10 flags=runtime'
    echo 'event t=9000000 api=cudaFree dev=0 ptr=0x10140000000 stack=10 flags=runtime'
    echo 'ggml_buffer t=1400000 buffer=0x1 usage=WEIGHTS base=0x10000000000 size=4GiB name=CUDA0'
    echo 'ggml_buffer t=3700000 buffer=0x3 usage=COMPUTE base=0x10140000000 size=256MiB name=CUDA0'
    echo 'ggml_buffer t=3800000 buffer=0x4 usage=WEIGHTS base=0x7f0000000000 size=64MiB name=CPU'
    echo 'end t=10000000 events=6 dropped=0'
} >"$D/late.vt"
gen late
json late; is "$?" 0 "marks after frees: report exits 0"
P='d["processes"][0]'
is "$(j "$D/late.json" "$P[\"devices\"][0][\"peak\"][\"by_tag\"]")" \
   "{\"weights\": $((4 * GiB)), \"kv\": 0, \"scratch\": $((256 * MiB)), \"unknown\": $GiB}" \
   "marks after frees: weights 4 GiB and scratch 256 MiB by ggml's marks, the unmarked 1 GiB unknown"
is "$(j "$D/late.json" "$P[\"ggml_marks\"]")" '{"read": 3, "matched": 2, "unmatched": 1, "remarked": 0}' \
   "marks after frees: 3 read, 2 on traced allocations, the CPU buffer's on memory not traced"
is "$(j "$D/late.json" "[(s['tag'], s['decided_by'], s['ggml_mark'], s['peak_bytes']) for s in $P['sites']]")" \
   "[[\"weights\", \"ggml_mark\", \"WEIGHTS\", $((4 * GiB))], [\"unknown\", \"nothing\", null, $GiB], [\"scratch\", \"ggml_mark\", \"COMPUTE\", $((256 * MiB))]]" \
   "marks after frees: one cgo stack makes one site per mark (weights, compute) and one unmarked"
"$VT" report --wide "$D/late.vtrace" >"$D/late.out" 2>&1
like "$(cat "$D/late.out")" "weights  GPU 0            1 call   ggml mark: WEIGHTS" "text: the site says ggml's mark decided"
"$VT" report --html "$D/late.html" "$D/late.vtrace" >/dev/null 2>&1
like "$(cat "$D/late.html")" "<summary>ggml mark: WEIGHTS</summary>" "html: the site says ggml's mark decided"
like "$(cat "$D/late.out")" "ggml buffer marks: 3 read, 2 on traced allocations (they set those tags), 1 on memory not traced" \
   "text: the marks' count line"

# diff by call site: the marked weights and the unmarked 1 GiB share one
# stack, and stay two sites (a single row would blur them).
"$VT" diff --json "$D/late.vtrace" "$D/late.vtrace" >"$D/self.json" 2>"$D/self.err"
is "$(j "$D/self.json" "sorted((s['tag'], s['a'], s['b']) for s in d['sites'])")" \
   "[[\"scratch\", $((256 * MiB)), $((256 * MiB))], [\"unknown\", $GiB, $GiB], [\"weights\", $((4 * GiB)), $((4 * GiB))]]" \
   "diff: the marked weights and the unmarked buffer of one stack are two sites"

# -- 2. the same marks before their allocations in the file ----------------
{
    header 101
    echo 'ggml_buffer t=1400000 buffer=0x1 usage=WEIGHTS base=0x10000000000 size=4GiB name=CUDA0'
    echo 'ggml_buffer t=3700000 buffer=0x3 usage=COMPUTE base=0x10140000000 size=256MiB name=CUDA0'
    echo 'event t=1000000 api=cudaMalloc dev=0 ptr=0x10000000000 size=4GiB stack=10 flags=runtime'
    echo 'event t=2000000 api=cudaMalloc dev=0 ptr=0x10100000000 size=1GiB stack=10 flags=runtime'
    echo 'event t=3000000 api=cudaMalloc dev=0 ptr=0x10140000000 size=256MiB stack=10 flags=runtime'
    echo 'end t=10000000 events=3 dropped=0'
} >"$D/early.vt"
gen early
json early
is "$(j "$D/early.json" "$P[\"devices\"][0][\"peak\"][\"by_tag\"]")" \
   "{\"weights\": $((4 * GiB)), \"kv\": 0, \"scratch\": $((256 * MiB)), \"unknown\": $GiB}" \
   "marks before their allocations: the same tags"

# -- 3. an address reused: the mark names the allocation live at its time --
# A (1 GiB, t 1-2 ms) and B (2 GiB, t 5 ms) at one base, the mark at 5.5 ms:
# B only. C and D at another base, freed and made within one grain of the
# mark: nothing tells which one ggml marked, so the mark is not used.
{
    header 102
    echo 'event t=1000000 api=cudaMalloc dev=0 ptr=0x20000000000 size=1GiB stack=10 flags=runtime'
    echo 'event t=2000000 api=cudaFree dev=0 ptr=0x20000000000 stack=10 flags=runtime'
    echo 'event t=5000000 api=cudaMalloc dev=0 ptr=0x20000000000 size=2GiB stack=10 flags=runtime'
    echo 'event t=7000000 api=cudaMalloc dev=0 ptr=0x30000000000 size=512MiB stack=10 flags=runtime'
    echo 'event t=7000000 api=cudaFree dev=0 ptr=0x30000000000 stack=10 flags=runtime'
    echo 'event t=7000000 api=cudaMalloc dev=0 ptr=0x30000000000 size=512MiB stack=10 flags=runtime'
    echo 'ggml_buffer t=5500000 buffer=0x1 usage=COMPUTE base=0x20000000000 size=2GiB name=CUDA0'
    echo 'ggml_buffer t=7500000 buffer=0x2 usage=WEIGHTS base=0x30000000000 size=512MiB name=CUDA0'
    echo 'end t=10000000 events=6 dropped=0'
} >"$D/reuse.vt"
gen reuse
json reuse
is "$(j "$D/reuse.json" "sorted([(s['tag'], s['calls'], s['total_bytes']) for s in $P['sites']])")" \
   "[[\"scratch\", 1, $((2 * GiB))], [\"unknown\", 3, $((2 * GiB))]]" \
   "reused address: the 2 GiB live at the mark's time is scratch; the earlier 1 GiB and both 512 MiB stay unknown"
is "$(j "$D/reuse.json" "$P[\"ggml_marks\"]")" '{"read": 2, "matched": 1, "unmatched": 1, "remarked": 0}' \
   "reused address: the ambiguous mark is counted unmatched, not guessed"

# -- 4. a mark against a built-in rule, a user rule against a mark, a mark twice
{
    header 103
    echo 'event t=1000000 api=cudaMalloc dev=0 ptr=0x40000000000 size=2GiB stack=20 flags=runtime'
    echo 'event t=2000000 api=cudaMalloc dev=0 ptr=0x41000000000 size=3GiB stack=10 flags=runtime'
    echo 'event t=3000000 api=cudaMalloc dev=0 ptr=0x42000000000 size=1GiB stack=10 flags=runtime'
    echo 'ggml_buffer t=1500000 buffer=0x1 usage=WEIGHTS base=0x40000000000 size=2GiB name=CUDA0'
    echo 'ggml_buffer t=2500000 buffer=0x2 usage=WEIGHTS base=0x41000000000 size=3GiB name=CUDA0'
    echo 'ggml_buffer t=3200000 buffer=0x3 usage=WEIGHTS base=0x42000000000 size=1GiB name=CUDA0'
    echo 'ggml_buffer t=3400000 buffer=0x3 usage=COMPUTE base=0x42000000000 size=1GiB name=CUDA0'
    echo 'end t=10000000 events=3 dropped=0'
} >"$D/argue.vt"
gen argue
json argue
is "$(j "$D/argue.json" "[(s['tag'], s['decided_by'], s['ggml_mark'], s.get('stack_rule_tag')) for s in $P['sites']]")" \
   '[["weights", "ggml_mark", "WEIGHTS", null], ["weights", "ggml_mark", "WEIGHTS", "kv"], ["scratch", "ggml_mark", "COMPUTE", null]]' \
   "a mark beats a built-in rule (kv there) and the site keeps what the rule said; of two marks the later counts"
is "$(j "$D/argue.json" "$P[\"ggml_marks\"][\"remarked\"]")" 1 "an allocation marked twice with two usages is counted"
"$VT" report --wide "$D/argue.vtrace" >"$D/argue.out" 2>&1
like "$(cat "$D/argue.out")" "ggml mark: WEIGHTS (disagrees with rule: builtin:llama.cpp kv llama_kv_cache::llama_kv_cache @ frame 1)" \
   "text: a mark and a built-in rule that disagree are both named"
printf 'kv _cgo_gate\n' >"$D/user.rules"
json argue --rules "$D/user.rules"
is "$(j "$D/argue.json" "sorted([(s['tag'], s['decided_by'], s['ggml_mark'], s['peak_bytes']) for s in $P['sites']])")" \
   "[[\"kv\", \"user_rule\", \"COMPUTE\", $GiB], [\"kv\", \"user_rule\", \"WEIGHTS\", $((3 * GiB))], [\"weights\", \"ggml_mark\", \"WEIGHTS\", $((2 * GiB))]]" \
   "a user rule beats the mark (not on a stack it does not match)"
"$VT" report --wide --rules "$D/user.rules" "$D/argue.vtrace" >"$D/argue.out" 2>&1
like "$(cat "$D/argue.out")" "rule: $D/user.rules:1 kv _cgo_gate @ frame 1 (disagrees with ggml mark: WEIGHTS)" \
   "text: a user rule that overrides a mark says so"

# -- 5. several traces: the one with marks is matched, the merged view agrees
json late
"$VT" report --json "$D/late.vtrace" "$D/argue.vtrace" >"$D/two.json" 2>"$D/two.err"
is "$?" 0 "two traces, both with marks: exit 0"
is "$(j "$D/two.json" "[p['devices'][0]['peak']['by_tag']['weights'] for p in d['processes']]")" \
   "[$((4 * GiB)), $((5 * GiB))]" "two traces: each process's weights from its own marks"

# -- 6. a trace that cannot be read twice: the rules' tags, said so ---------
cat "$D/late.vtrace" | "$VT" report --json /dev/stdin >"$D/pipe.json" 2>"$D/pipe.err"
rc=$?
if [ $rc = 0 ]; then
    like "$(cat "$D/pipe.err")" "cannot read it a second time" "from a pipe: says the marks are not used"
    is "$(j "$D/pipe.json" "$P[\"devices\"][0][\"peak\"][\"by_tag\"][\"weights\"]")" 0 \
       "from a pipe: nothing tagged by a mark it could not match"
else
    is "$rc" 2 "from a pipe: the reader refuses it (exit 2)"
    ok "# SKIP the reader does not read pipes"
fi

# -- 7. ggml's examples through the shim: the marks tag what the stacks cannot
EX=$B/examples
if [ -x "$EX/ollama-engine" ] && [ -e "$SHIM" ]; then
    O=$D/oe
    mkdir -p "$O"
    VTSIM_DEVICES=24GiB under_shim "$O" "$EX/ollama-engine" >/dev/null 2>"$O.err"
    "$VT" report --json "$O" >"$O.json" 2>"$O.jerr"
    is "$(j "$O.json" "$P[\"devices\"][0][\"peak\"][\"by_tag\"]")" \
       "{\"weights\": $((4 * GiB)), \"kv\": 0, \"scratch\": $((256 * MiB)), \"unknown\": $GiB}" \
       "ollama-engine: weights and compute by ggml's marks; its KV cache (never marked, one cgo gate) unknown"
    is "$(j "$O.json" "$P[\"host_pinned\"][\"by_tag\"]")" \
       "{\"weights\": $((512 * MiB)), \"kv\": 0, \"scratch\": $((32 * MiB)), \"unknown\": 0}" \
       "ollama-engine: pinned weights and compute by ggml's marks"
    L=$D/lc
    mkdir -p "$L"
    # Every layer on a card that holds them, mmap off: weights (CUDA0,
    # CUDA_Host) and compute buffers, all marked.
    VTSIM_DEVICES=48GiB under_shim "$L" "$EX/llama-cli" -m llama-70b-q4_k_m -ngl 99 -c 8192 --no-mmap >/dev/null 2>"$L.err"
    "$VT" report --json "$L" >"$L.json" 2>"$L.jerr"
    is "$(j "$L.json" "sorted(s['ggml_mark'] for s in $P['sites'] if s['ggml_mark'])")" '["COMPUTE", "COMPUTE", "WEIGHTS", "WEIGHTS"]' \
       "llama-cli: its two weights and two compute buffers are marked sites"
    is "$(j "$L.json" "[s['decided_by'] for s in $P['sites'] if s['ggml_mark'] and s['decided_by'] != 'ggml_mark']")" "[]" \
       "llama-cli: every marked site decided by its mark"
    is "$(j "$L.json" "[s['tag'] for s in $P['sites'] if s['ggml_mark'] and s.get('stack_rule_tag') not in (None, s['tag'])]")" "[]" \
       "llama-cli: ggml's marks and llama.cpp's built-in rules agree everywhere"
else
    for k in 1 2 3 4; do ok "# SKIP examples or shim not built"; done
fi
done_testing
