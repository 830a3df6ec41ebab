#!/bin/sh
# Where the model runs, everywhere a verdict is shown: `top`, `serve`, the
# HTML page and `diff` say what the report says of a ggml program's
# placement (its GGML_BUFFER / GGML_TENSOR records). Traces written by
# build/vtgen with exact numbers, one model of 4 blocks of 512 MiB and an
# output layer of 256 MiB (5 layers as llama.cpp counts them), run:
#   partial (pid 300): blk.3 + output on CUDA0, blk.0-2 and token_embd
#            mapped from the file, the KV cache of l0-2 in pageable memory;
#   full    (pid 301): every layer and the KV cache on CUDA0, token_embd
#            mapped (llama.cpp's design: not an offload);
#   plain   (pid 302): one cudaMalloc, no ggml record;
#   cpu     (pid 303): every buffer in host memory, no CUDA allocation;
#   failed  (pid 304): a 16 GiB request fails and nothing follows.
. tests/t/lib.sh
GEN=$B/vtgen
for f in "$VT" "$GEN"; do
    [ -x "$f" ] || { echo "1..0 # SKIP $f not built (make test-bins)"; exit 0; }
done
D=$(tmpdir)
trap '[ -n "${KEEP:-}" ] || rm -rf "$D"' EXIT
MiB=1048576

header() { ggml_header "$1" "$2" 8GiB 7.5GiB "${3:-}"; }
blocks() { ggml_blocks "$@"; }
kv() { ggml_kv "$@" 32; }
gen() { "$GEN" "$D/$1.vt" -o "$D/t/$1.vtrace" || nok "vtgen $1"; }
# alone NAME: NAME.vt's trace in a directory of its own, and its report
# in NAME.json and NAME.txt.
alone() {
    mkdir -p "$D/$1" && "$GEN" "$D/$1.vt" -o "$D/$1/$1.vtrace" || nok "vtgen $1"
    "$VT" report --json "$D/$1" >"$D/$1.json"
    "$VT" report "$D/$1" >"$D/$1.txt"
}
mkdir -p "$D/t"

# -ot's value is markup: the page must escape it.
{
    header 300 'llama-cli,-m,m.gguf,-ngl,2,-c,4096,-ot,"<b>x</b>"'
    echo 'event t=1000000 api=cudaMalloc dev=0 ptr=0x10000000000 size=768MiB stack=1 flags=runtime'
    echo 'ggml_buffer t=1100000 buffer=0x1 usage=WEIGHTS base=0x10000000000 size=768MiB name=CUDA0 host=1'
    echo 'ggml_buffer t=1200000 buffer=0x2 usage=WEIGHTS base=0x7f0000000000 size=1792MiB name=CPU_Mapped host=2'
    echo 'ggml_tensor t=1300000 buffer=0x2 data=0x7f0000000000 nbytes=256MiB name=token_embd.weight'
    blocks 0x2 0 2 $((0x7f0010000000))
    blocks 0x1 3 3 $((0x10000000000))
    echo 'ggml_tensor t=1600000 buffer=0x1 data=0x10020000000 nbytes=256MiB name=output.weight'
    echo 'event t=2000000 api=cudaMalloc dev=0 ptr=0x10040000000 size=64MiB stack=2 flags=runtime'
    echo 'ggml_buffer t=2100000 buffer=0x3 usage=ANY base=0x10040000000 size=64MiB name=CUDA0 host=1'
    echo 'ggml_buffer t=2200000 buffer=0x4 usage=ANY base=0x7f1000000000 size=192MiB name=CPU host=2'
    kv 0x4 0 2 $((0x7f1000000000))
    kv 0x3 3 3 $((0x10040000000))
    echo 'event t=3000000 api=cudaMalloc dev=0 ptr=0x10050000000 size=128MiB stack=1 flags=runtime'
    echo 'ggml_buffer t=3100000 buffer=0x5 usage=COMPUTE base=0x10050000000 size=128MiB name=CUDA0 host=1'
    echo 'event t=3200000 api=cudaHostAlloc dev=-1 ptr=0x7f2000000000 size=16MiB stack=1 flags=runtime'
    echo 'ggml_buffer t=3300000 buffer=0x6 usage=COMPUTE base=0x7f2000000000 size=16MiB name=CUDA_Host host=2'
    echo 'end t=10000000 events=4 dropped=0'
} >"$D/partial.vt"
{
    header 301 'llama-cli,-m,m.gguf,-ngl,99,-c,4096'
    echo 'event t=1000000 api=cudaMalloc dev=0 ptr=0x10000000000 size=2304MiB stack=1 flags=runtime'
    echo 'ggml_buffer t=1100000 buffer=0x1 usage=WEIGHTS base=0x10000000000 size=2304MiB name=CUDA0 host=1'
    echo 'ggml_buffer t=1200000 buffer=0x2 usage=WEIGHTS base=0x7f0000000000 size=256MiB name=CPU_Mapped host=2'
    echo 'ggml_tensor t=1300000 buffer=0x2 data=0x7f0000000000 nbytes=256MiB name=token_embd.weight'
    blocks 0x1 0 3 $((0x10000000000))
    echo 'ggml_tensor t=1600000 buffer=0x1 data=0x10080000000 nbytes=256MiB name=output.weight'
    echo 'event t=2000000 api=cudaMalloc dev=0 ptr=0x100a0000000 size=256MiB stack=2 flags=runtime'
    echo 'ggml_buffer t=2100000 buffer=0x3 usage=ANY base=0x100a0000000 size=256MiB name=CUDA0 host=1'
    kv 0x3 0 3 $((0x100a0000000))
    echo 'event t=3000000 api=cudaMalloc dev=0 ptr=0x100b0000000 size=128MiB stack=1 flags=runtime'
    echo 'ggml_buffer t=3100000 buffer=0x5 usage=COMPUTE base=0x100b0000000 size=128MiB name=CUDA0 host=1'
    echo 'end t=10000000 events=3 dropped=0'
} >"$D/full.vt"
{
    header 302 'llama-cli,-m,m.gguf'
    echo 'event t=1000000 api=cudaMalloc dev=0 ptr=0x10000000000 size=1GiB stack=1 flags=runtime'
    echo 'end t=10000000 events=1 dropped=0'
} >"$D/plain.vt"
{
    header 303 'llama-cli,-m,m.gguf,-ngl,0' nodevice
    echo 'ggml_buffer t=1200000 buffer=0x2 usage=WEIGHTS base=0x7f0000000000 size=2560MiB name=CPU_Mapped host=2'
    echo 'ggml_tensor t=1300000 buffer=0x2 data=0x7f0000000000 nbytes=256MiB name=token_embd.weight'
    blocks 0x2 0 3 $((0x7f0010000000))
    echo 'ggml_tensor t=1600000 buffer=0x2 data=0x7f00a0000000 nbytes=256MiB name=output.weight'
    echo 'ggml_buffer t=2200000 buffer=0x4 usage=ANY base=0x7f1000000000 size=256MiB name=CPU host=2'
    kv 0x4 0 3 $((0x7f1000000000))
    echo 'end t=10000000 events=0 dropped=0'
} >"$D/cpu.vt"
{
    header 304 'llama-cli,-m,big.gguf'
    echo 'event t=1000000 api=cudaMalloc dev=0 size=16GiB result=2 stack=1 flags=runtime'
    echo 'end t=10000000 events=1 dropped=0'
} >"$D/failed.vt"
for s in partial full plain cpu failed; do gen $s; done

# What `report --json` says is what the views must show.
"$VT" report --json "$D/t/partial.vtrace" >"$D/partial.json" 2>/dev/null
is "$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["processes"][0]; l=p["placement"]["layers"]; print(p["verdict"], l["gpu"], l["total"])' "$D/partial.json")" \
    "partial_offload 2 5" "report --json: the partial run is a partial offload, 2 of 5 layers on the GPU"

# A model on the GPU but no record of where ggml placed its tensors (ggml
# linked into the program: no hook sees its calls): NO SPILL is what the
# device allocations show, and the report says what it cannot.
mkdir -p "$D/u"
{
    header 305 'llama-server,-m,m.gguf'
    echo 'event t=1000000 api=cudaMalloc dev=0 ptr=0x10000000000 size=768MiB stack=1 flags=runtime'
    echo 'ggml_buffer t=1100000 buffer=0x1 usage=WEIGHTS base=0x10000000000 size=768MiB name=CUDA0 host=1'
    echo 'end t=10000000 events=1 dropped=0'
} >"$D/unseen.vt"
"$GEN" "$D/unseen.vt" -o "$D/u/unseen.vtrace" || nok "vtgen unseen"
"$VT" report "$D/u/unseen.vtrace" >"$D/unseen.txt" 2>&1
is "$(sed -n '2,7p' "$D/unseen.txt")" "VERDICT: NO SPILL. Every device allocation succeeded within the card's free
  memory.
  Whether part of the model stays in host memory, the trace does not say: it
    holds no record of where the model's tensors were placed, and host memory
    outside CUDA is not traced.
  GPU 0 (NVIDIA Sim): peak 768.0 MiB of 8.00 GiB at 1.0 ms:" "report: weights on the GPU, no placement record: NO SPILL, and what the trace cannot say"
unseen() { "$VT" report --json "$1" 2>/dev/null | python3 -c 'import json,sys; print(*[p["placement_unseen"] for p in json.load(sys.stdin)["processes"]])'; }
is "$(unseen "$D/u/unseen.vtrace") $(unseen "$D/t/full.vtrace") $(unseen "$D/t/plain.vtrace") $(unseen "$D/t/partial.vtrace")" \
    "True False False False" "report --json: placement_unseen for it alone (not a full offload ggml placed, a run with no weights, a partial offload)"
"$VT" report --html "$D/unseen.html" "$D/u/unseen.vtrace" 2>/dev/null
check "report --html: the same sentence" grep -q "Whether part of the model stays in host memory, the trace does not say" "$D/unseen.html"
# Host buffers marked WEIGHTS but no tensor named: their bytes, and what
# they cannot tell (llama.cpp keeps the token embeddings there anyway).
sed -e 's/^end .*//' "$D/unseen.vt" >"$D/marked.vt"
echo 'ggml_buffer t=1200000 buffer=0x2 usage=WEIGHTS base=0x7f0000000000 size=1792MiB name=CPU_Mapped host=2' >>"$D/marked.vt"
echo 'end t=10000000 events=1 dropped=0' >>"$D/marked.vt"
"$GEN" "$D/marked.vt" -o "$D/u/marked.vtrace" || nok "vtgen marked"
"$VT" report --wide "$D/u/marked.vtrace" >"$D/marked.txt" 2>&1
is "$(sed -n 3p "$D/marked.txt")" "  1.75 GiB of model weights are in host memory (ggml's buffers), but no record names their tensors: whether they hold layers or only the token embeddings, the trace does not say." \
    "report: host WEIGHTS buffers with no tensor named: their bytes, and that they may be the embeddings alone"
is "$(unseen "$D/u/marked.vtrace")" True "report --json: placement_unseen there too"

# ---- top --once ----
"$VT" top --once "$D/t" >"$D/top.txt" 2>"$D/top.err"
is "$?" 0 "top --once exits 0"
col() { awk -v pid="$1" -v c="$2" '$1 == pid { print $(NF - c) }' "$D/top.txt"; }
is "$(grep '^PID ' "$D/top.txt" | awk '{ print $(NF - 1), $NF }')" "LAYERS STATE" "top: a LAYERS column before STATE"
is "$(col 300 1) $(col 301 1) $(col 302 1) $(col 303 1) $(col 304 1)" "2/5 5/5 - 0/5 -" \
    "top: layers on a GPU / all: 2/5 partial, 5/5 full, - without ggml records, 0/5 on the CPU, - failed"
is "$(awk '$1 == 303' "$D/top.txt" | tr -s ' ')" "303 llama-cli - - - - - - - 0/5 ended" \
    "top: the CPU run, which saw no GPU, gets a row of its own"
is "$(awk '$1 == 300 { print $4, $5, $6 }' "$D/top.txt")" "768.0 MiB 64.0" "top: the partial run's GPU row (weights 768 MiB, KV 64 MiB)"
is "$(grep -c '^(not shown' "$D/top.txt")" 0 "top: the CPU run is not hidden as a process that allocated nothing"
is "$(grep '^pid 300: ' "$D/top.txt")" "pid 300: PARTIAL OFFLOAD
pid 300: in host memory: 3 of 5 layers (1.50 GiB of weights), 192.0 MiB of KV cache
pid 300: estimate: 5 of 5 layers fit on GPU 0 (-ngl 5)" "top: the partial offload's verdict, what is in host memory, the estimate"
is "$(grep '^pid 303: ' "$D/top.txt")" "pid 303: RAN ON THE CPU
pid 303: in host memory: 5 of 5 layers (2.25 GiB of weights), 256.0 MiB of KV cache" "top: the CPU run's verdict"
is "$(grep '^pid 304: ' "$D/top.txt")" "pid 304: OUT OF MEMORY (first: cudaMalloc of 16.00 GiB, oom)" \
    "top: a failure nothing followed is OUT OF MEMORY, as in the report"
is "$(grep -c -e '^pid 301: ' -e '^pid 302: ' "$D/top.txt") $(grep -c -e '^pid 301 GPU 0 ' -e '^pid 302 GPU 0 ' "$D/top.txt")" "0 2" \
    "top: the full offload and the plain run: their GPU lines, no verdict line"

# ---- serve --once ----
"$VT" serve --once "$D/t" >"$D/m.om" 2>"$D/m.err"
is "$?" 0 "serve --once exits 0"
sample() { awk -v n="$1" -v f="$2" 'index($0, n "{") == 1 && index($0, f) { print $NF }' "$D/m.om" | tr '\n' ' '; }
# verdict_of PID: the verdicts whose sample is 1 for PID, and how many samples it has.
verdict_of() {
    awk -v pid="pid=\"$1\"" 'index($0, "vramtrace_verdict{" pid ",") == 1 { n++; if ($NF == 1) { sub(/.*verdict="/, ""); sub(/".*/, ""); v = v $0 " " } }
        END { print v n }' "$D/m.om"
}
is "$(verdict_of 300)" "partial_offload 7" "serve: the partial run's verdict is partial_offload (1 of 7 samples)"
is "$(verdict_of 301)" "no_spill 7" "serve: the full offload: no_spill"
is "$(verdict_of 302)" "no_spill 7" "serve: the plain run: no_spill"
is "$(verdict_of 303)" "cpu_only 7" "serve: the CPU run: cpu_only"
is "$(verdict_of 304)" "failed 7" "serve: the failure: failed"
is "$(sample vramtrace_model_host_bytes 'pid="300"')" "$((1536 * MiB)) $((192 * MiB)) " \
    "serve: the partial run's host weights (1.5 GiB: 3 blocks, not the token embeddings) and host KV (192 MiB)"
is "$(sample vramtrace_model_host_bytes 'pid="301"')" "0 0 " "serve: the full offload: nothing in host memory"
is "$(grep -c '^vramtrace_model_host_bytes{pid="300",process="llama-cli",content="weights"} ' "$D/m.om")" 1 \
    "serve: the content label names weights"
is "$(sample vramtrace_layers 'pid="300"') $(sample vramtrace_layers 'pid="301"') $(sample vramtrace_layers 'pid="303"')" \
    "2 5 0 0 0 0  5 5 0 0 0 0  0 5 0 0 0 0 " \
    "serve: layers on a GPU, in total, blocks on a GPU with experts, KV cache or part of their weights in host memory, blocks in host memory by an override: 2 of 5, 5 of 5, 0 of 5, none"
is "$(grep -c '^vramtrace_layers{pid="300",process="llama-cli",where="gpu"} 2$' "$D/m.om")" 1 "serve: the where label"
is "$(grep -c -e '^vramtrace_layers{pid="30[24]"' -e '^vramtrace_model_host_bytes{pid="30[24]"' "$D/m.om")" 0 \
    "serve: no placement series without ggml records"
is "$(grep -E '^vramtrace_(idle_)?processes ' "$D/m.om" | tr '\n' ' ')" "vramtrace_processes 5 vramtrace_idle_processes 0 " \
    "serve: the CPU run is not counted idle"
is "$(grep -c -E '^# (TYPE|HELP) vramtrace_(verdict|model_host_bytes|layers) ' "$D/m.om")" 6 "serve: TYPE and HELP of each family"
is "$(tail -1 "$D/m.om")" "# EOF" "serve: the exposition still ends with # EOF"

# ---- the HTML page ----
for s in partial full plain cpu; do
    "$VT" report --html "$D/$s.html" "$D/t/$s.vtrace" >/dev/null 2>&1 || nok "report --html $s"
done
H=$D/partial.html
is "$(grep -c '^<li><a href="#p0">llama-cli (pid 300)</a>: partial offload</li>$' "$H")" 1 "html: the index says partial offload"
is "$(grep -c '^<pre class="verdict">VERDICT: PARTIAL OFFLOAD' "$H")" 1 "html: the verdict is not shown as fine"
is "$(grep -c '<h3>Where the model runs' "$H")" 1 "html: a section on where the model runs"
is "$(grep -A3 '<th>GPU</th><th>pinned host</th><th>mapped host</th><th>pageable host</th>' "$H" | tail -3)" \
'<tr><td>weights</td><td class="n">768.0 MiB</td><td class="n">0 B</td><td class="n">1.75 GiB</td><td class="n">0 B</td></tr>
<tr><td>KV cache</td><td class="n">64.0 MiB</td><td class="n">0 B</td><td class="n">0 B</td><td class="n">192.0 MiB</td></tr>
<tr><td>compute</td><td class="n">128.0 MiB</td><td class="n">16.0 MiB</td><td class="n">0 B</td><td class="n">0 B</td></tr>' \
    "html: weights, KV cache and compute by place"
is "$(grep -c '<p>Layers on a GPU: <b>2 of 5</b> .*; 3 run from host memory.</p>' "$H")" 1 "html: 2 of 5 layers, 3 from host memory"
is "$(grep -c '<p>Estimate: <b>5 of 5 layers</b> fit on GPU 0 (<code>-ngl 5</code>)' "$H")" 1 "html: the estimate"
is "$(grep -c '<code>-ngl 2 -c 4096 -ot &lt;b&gt;x&lt;/b&gt;</code>' "$H")" 1 "html: the layer options, escaped"
is "$(grep -c '<b>x</b>' "$H")" 0 "html: the markup in argv is nowhere raw"
is "$(grep -c ': no spill</li>$' "$D/full.html") $(grep -c '<b>5 of 5</b>' "$D/full.html") $(grep -c 'Estimate:' "$D/full.html")" "1 1 0" \
    "html: the full offload: no spill, 5 of 5 layers, no estimate"
is "$(grep -c 'Where the model runs' "$D/plain.html")" 0 "html: no placement section without ggml records"
is "$(grep -c ': ran on the CPU</li>$' "$D/cpu.html") $(grep -c '<b>0 of 5</b>' "$D/cpu.html")" "1 1" "html: the CPU run"

# ---- diff ----
"$VT" diff --color never "$D/t/partial.vtrace" "$D/t/full.vtrace" >"$D/d.txt" 2>&1
is "$?" 0 "diff exits 0"
is "$(head -2 "$D/d.txt")" "A: $D/t/partial.vtrace (1 process, 1 GPU), PARTIAL OFFLOAD
B: $D/t/full.vtrace (1 process, 1 GPU)" "diff: A's heading says partial offload"
is "$(grep -E '^(layers_on_gpu|host_weights|host_kv) ' "$D/d.txt")" \
"layers_on_gpu               2/5          5/5           +3
host_weights           1.50 GiB          0 B    -1.50 GiB   -100.0%
host_kv               192.0 MiB          0 B   -192.0 MiB   -100.0%" "diff: layers on the GPU and host bytes, A against B"
"$VT" diff --json "$D/t/partial.vtrace" "$D/t/plain.vtrace" >"$D/d.json" 2>&1
is "$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
a, b = d["a"]["placement"], d["b"]["placement"]
print(a["layers_gpu"], a["layers_total"], a["host_weights_bytes"], a["host_kv_bytes"], b)' "$D/d.json")" \
    "2 5 $((1536 * 1048576)) $((192 * 1048576)) None" "diff --json: A's placement as the text rows, null for B without ggml records"
"$VT" diff --color never "$D/t/plain.vtrace" "$D/t/full.vtrace" >"$D/d2.txt" 2>&1
is "$(grep -E '^(layers_on_gpu|host_weights|host_kv) ' "$D/d2.txt")" \
"layers_on_gpu                 -          5/5
host_weights                  -          0 B
host_kv                       -          0 B" "diff: - for the run without ggml records"
"$VT" diff --color never "$D/t/plain.vtrace" "$D/t/failed.vtrace" >"$D/d3.txt" 2>&1
is "$(grep -c -E '^(layers_on_gpu|host_weights|host_kv) ' "$D/d3.txt") $(sed -n 2p "$D/d3.txt" | sed 's/.*), //')" "0 OUT OF MEMORY" \
    "diff: no placement rows when neither run has it; a failure heads as the report's verdict, OUT OF MEMORY"
# ---- Two models loaded at once (a draft model beside its target): the
# 4-block model A of the traces above all on CUDA0, then a 2-block model B
# with blk.0 in pageable memory and blk.1 + its output layer on CUDA0.
# Their tensors are named alike; B's context is made first (its KV: l0 in
# pageable memory, l1 on CUDA0), then A's (l0-3 on CUDA0). Summed as one
# model, the report said 4 blocks, 5 of 5 layers on the GPU. ----
# model_a: the 4-block model A of the traces above, every layer on CUDA0
# (blk.0-3 and its output layer in one 2.25 GiB buffer, from t=1 ms).
model_a() {
    echo 'event t=1000000 api=cudaMalloc dev=0 ptr=0x10000000000 size=2304MiB stack=1 flags=runtime'
    echo 'ggml_buffer t=1100000 buffer=0x1 usage=WEIGHTS base=0x10000000000 size=2304MiB name=CUDA0 host=1'
    blocks 0x1 0 3 $((0x10000000000))
    echo 'ggml_tensor t=1600000 buffer=0x1 data=0x10080000000 nbytes=256MiB name=output.weight'
}
mkdir -p "$D/two"
{
    header 305 'llama-server,-m,a.gguf,-md,b.gguf,-ngl,99,-ngld,2'
    model_a
    echo 'event t=4000000 api=cudaMalloc dev=0 ptr=0x100a0000000 size=768MiB stack=1 flags=runtime'
    echo 'ggml_buffer t=4100000 buffer=0x7 usage=WEIGHTS base=0x100a0000000 size=768MiB name=CUDA0 host=1'
    echo 'ggml_buffer t=4200000 buffer=0x8 usage=WEIGHTS base=0x7f3000000000 size=512MiB name=CPU host=2'
    blocks 0x8 0 0 $((0x7f3000000000)) | sed 's/t=1500000/t=4500000/'
    blocks 0x7 1 1 $((0x100a0000000)) | sed 's/t=1500000/t=4500000/'
    echo 'ggml_tensor t=4600000 buffer=0x7 data=0x100c0000000 nbytes=256MiB name=output.weight'
    echo 'event t=5000000 api=cudaMalloc dev=0 ptr=0x100d0000000 size=64MiB stack=2 flags=runtime'
    echo 'ggml_buffer t=5100000 buffer=0x9 usage=ANY base=0x7f4000000000 size=64MiB name=CPU host=2'
    echo 'ggml_buffer t=5100000 buffer=0xa usage=ANY base=0x100d0000000 size=64MiB name=CUDA0 host=1'
    echo 'ggml_tensor t=5200000 buffer=0x9 data=0x7f4000000000 nbytes=32MiB name=cache_k_l0'
    echo 'ggml_tensor t=5200000 buffer=0x9 data=0x7f4002000000 nbytes=32MiB name=cache_v_l0'
    echo 'ggml_tensor t=5200000 buffer=0xa data=0x100d0000000 nbytes=32MiB name=cache_k_l1'
    echo 'ggml_tensor t=5200000 buffer=0xa data=0x100d2000000 nbytes=32MiB name=cache_v_l1'
    echo 'event t=6000000 api=cudaMalloc dev=0 ptr=0x100e0000000 size=256MiB stack=2 flags=runtime'
    echo 'ggml_buffer t=6100000 buffer=0xb usage=ANY base=0x100e0000000 size=256MiB name=CUDA0 host=1'
    ggml_kv 0xb 0 3 $((0x100e0000000)) 32 | sed 's/t=2500000/t=6200000/'
    echo 'end t=10000000 events=4 dropped=0'
} >"$D/two.vt"
"$GEN" "$D/two.vt" -o "$D/two/two.vtrace" || nok "vtgen two"
"$VT" report --json "$D/two" >"$D/two.json"
"$VT" report "$D/two" >"$D/two.txt"
jp() { python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["processes"][0]; pl=p["placement"]; print(eval(sys.argv[2]))' "$@"; }
is "$(jp "$D/two.json" 'pl["models_at_once"], pl["layers"]["gpu"], pl["layers"]["total"], p["verdict"]')" \
    "(2, 2, 3, 'partial_offload')" "two models: 2 at once; the pictured one, B, has 2 of its 3 layers on the GPU"
is "$(jp "$D/two.json" 'pl["layer_weights"]["gpu_bytes"], pl["layer_weights"]["host_bytes"]')" \
    "($((768 * MiB)), $((512 * MiB)))" "two models: B's layer weights: 768 MiB on the GPU, 512 MiB in host memory"
is "$(jp "$D/two.json" 'pl["kv"]["gpu_bytes"], pl["kv"]["host_bytes"]')" \
    "($((64 * MiB)), $((64 * MiB)))" "two models: B's KV cache (made first, told by its 2 blocks): 64 MiB on the GPU, 64 MiB in host memory"
is "$(jp "$D/two.json" 'pl["other_models"]')" \
    "[{'layers_total': 5, 'layers_gpu': 5, 'layer_weight_bytes': $((2304 * MiB)), 'layer_weight_host_bytes': 0, 'kv_host_bytes': 0}]" \
    "two models: the other, A: 5 layers of 2.25 GiB, all on the GPU"
tr '\n' ' ' <"$D/two.txt" | tr -s ' ' | grep -q 'VERDICT: PARTIAL OFFLOAD. 1 of 3 layers run from host memory.*2 models were loaded at once.*the other: 5 layers with 2.25 GiB of layer weights, 5 on the GPU\.'
is "$?" 0 "two models: the text pictures B and sums A up"
"$VT" report --html "$D/two.html" "$D/two" 2>/dev/null
grep -q '2 models were loaded at once' "$D/two.html"
is "$?" 0 "two models: the HTML page says so too"
is "$(views_disagree "$D/two")" "" "two models: report, top, serve, the HTML page and the gate agree"
"$VT" serve --once "$D/two" >"$D/two.om" 2>/dev/null
is "$(grep -c '^vramtrace_models_at_once{pid="305",process="llama-cli"} 2$' "$D/two.om") $(grep -c '^vramtrace_layers{pid="305",process="llama-cli",where="gpu"} 2$' "$D/two.om")" \
    "1 1" "two models: serve says 2 models at once, and the pictured one's 2 layers on the GPU"

# ---- A third model, C (3 blocks, all on CUDA0), loaded beside both: a
# number of its own (it took B's, the number after the run before's) ----
mkdir -p "$D/three"
{
    sed '/^end /d' "$D/two.vt" | sed 's/pid=305/pid=307/'
    echo 'event t=7000000 api=cudaMalloc dev=0 ptr=0x10100000000 size=1792MiB stack=1 flags=runtime'
    echo 'ggml_buffer t=7100000 buffer=0xc usage=WEIGHTS base=0x10100000000 size=1792MiB name=CUDA0 host=1'
    blocks 0xc 0 2 $((0x10100000000)) | sed 's/t=1500000/t=7500000/'
    echo 'ggml_tensor t=7600000 buffer=0xc data=0x10160000000 nbytes=256MiB name=output.weight'
    echo 'end t=10000000 events=5 dropped=0'
} >"$D/three.vt"
"$GEN" "$D/three.vt" -o "$D/three/three.vtrace" || nok "vtgen three"
"$VT" report --json "$D/three" >"$D/three.json"
is "$(jp "$D/three.json" 'pl["models_at_once"], pl["layers"]["gpu"], pl["layers"]["total"], [(o["layers_gpu"], o["layers_total"]) for o in pl["other_models"]]')" \
    "(3, 2, 3, [(5, 5), (4, 4)])" "three models: B pictured, A (5 layers) and C (4) beside it, all on the GPU"

# ---- A target and its draft model all on CUDA0, each context's KV cache
# in pageable memory (--no-kv-offload): the draft's cache names again are
# its own context, not the target's made again (which ended the target's
# cache: its 256 MiB left the picture) ----
mkdir -p "$D/nokv"
{
    header 308 'llama-server,-m,t.gguf,-md,d.gguf,--no-kv-offload'
    model_a
    echo 'ggml_buffer t=2100000 buffer=0x2 usage=ANY base=0x7f4000000000 size=256MiB name=CPU host=2'
    kv 0x2 0 3 $((0x7f4000000000))
    echo 'event t=4000000 api=cudaMalloc dev=0 ptr=0x100a0000000 size=1280MiB stack=1 flags=runtime'
    echo 'ggml_buffer t=4100000 buffer=0x7 usage=WEIGHTS base=0x100a0000000 size=1280MiB name=CUDA0 host=1'
    blocks 0x7 0 1 $((0x100a0000000)) | sed 's/t=1500000/t=4500000/'
    echo 'ggml_tensor t=4600000 buffer=0x7 data=0x100e0000000 nbytes=256MiB name=output.weight'
    echo 'ggml_buffer t=5100000 buffer=0x9 usage=ANY base=0x7f5000000000 size=128MiB name=CPU host=2'
    kv 0x9 0 1 $((0x7f5000000000)) | sed 's/t=2500000/t=5200000/'
    echo 'end t=10000000 events=2 dropped=0'
} >"$D/nokv.vt"
"$GEN" "$D/nokv.vt" -o "$D/nokv/nokv.vtrace" || nok "vtgen nokv"
"$VT" report --json "$D/nokv" >"$D/nokv.json"
is "$(jp "$D/nokv.json" 'p["verdict"], pl["models_at_once"], pl["layers"]["gpu"], pl["layers"]["total"], pl["kv"]["host_bytes"], pl["other_models"][0]["kv_host_bytes"]')" \
    "('partial_offload', 2, 5, 5, $((256 * MiB)), $((128 * MiB)))" \
    "no KV offload: the target pictured with its 256 MiB of KV cache in host memory, the draft's 128 MiB beside it"

# ---- The same model loaded, freed (its GPU buffer's allocation freed),
# then loaded again with blk.0-2 mapped: a reload, one model, not two ----
{
    header 306 'llama-cli,-m,a.gguf'
    model_a
    echo 'event t=3000000 api=cudaFree dev=0 ptr=0x10000000000 stack=1 flags=runtime'
    echo 'event t=4000000 api=cudaMalloc dev=0 ptr=0x10000000000 size=768MiB stack=1 flags=runtime'
    echo 'ggml_buffer t=4100000 buffer=0x7 usage=WEIGHTS base=0x10000000000 size=768MiB name=CUDA0 host=1'
    echo 'ggml_buffer t=4200000 buffer=0x8 usage=WEIGHTS base=0x7f0000000000 size=1536MiB name=CPU_Mapped host=2'
    blocks 0x8 0 2 $((0x7f0000000000)) | sed 's/t=1500000/t=4500000/'
    blocks 0x7 3 3 $((0x10000000000)) | sed 's/t=1500000/t=4500000/'
    echo 'ggml_tensor t=4600000 buffer=0x7 data=0x10020000000 nbytes=256MiB name=output.weight'
    echo 'end t=10000000 events=3 dropped=0'
} >"$D/reload.vt"
mkdir -p "$D/reload"
"$GEN" "$D/reload.vt" -o "$D/reload/reload.vtrace" || nok "vtgen reload"
"$VT" report --json "$D/reload" >"$D/reload.json"
is "$(jp "$D/reload.json" 'pl["models_at_once"], pl["layers"]["gpu"], pl["layers"]["total"], pl["other_models"]')" \
    "(1, 2, 5, [])" "reload: one model, the second load's 2 of 5 layers on the GPU"

# ---- KV caches in host memory beside layers (llama.cpp's --no-kv-offload
# keeps every block's; these mixes are what an estimate cannot follow) ----
# kvsome (pid 309): blk.0 mapped, blk.1-3 and the output layer on CUDA0;
# the KV cache of l0-1 in pageable memory, of l2-3 on CUDA0: one block on
# the GPU with its KV cache in host memory, two without. Whether a block
# moved to the GPU would bring its KV cache, the trace cannot say.
{
    header 309 'llama-cli,-m,a.gguf,-ngl,4'
    echo 'event t=1000000 api=cudaMalloc dev=0 ptr=0x10000000000 size=1792MiB stack=1 flags=runtime'
    echo 'ggml_buffer t=1100000 buffer=0x1 usage=WEIGHTS base=0x10000000000 size=1792MiB name=CUDA0 host=1'
    echo 'ggml_buffer t=1200000 buffer=0x2 usage=WEIGHTS base=0x7f0000000000 size=512MiB name=CPU_Mapped host=2'
    blocks 0x2 0 0 $((0x7f0000000000))
    blocks 0x1 1 3 $((0x10000000000))
    echo 'ggml_tensor t=1600000 buffer=0x1 data=0x10060000000 nbytes=256MiB name=output.weight'
    echo 'ggml_buffer t=2100000 buffer=0x3 usage=ANY base=0x7f4000000000 size=128MiB name=CPU host=2'
    kv 0x3 0 1 $((0x7f4000000000))
    echo 'event t=2000000 api=cudaMalloc dev=0 ptr=0x10080000000 size=128MiB stack=2 flags=runtime'
    echo 'ggml_buffer t=2100000 buffer=0x4 usage=ANY base=0x10080000000 size=128MiB name=CUDA0 host=1'
    kv 0x4 2 3 $((0x10080000000))
    echo 'end t=10000000 events=2 dropped=0'
} >"$D/kvsome.vt"
alone kvsome
is "$(jp "$D/kvsome.json" 'pl["layers"]["kv_blocks_host"], pl["layers"]["kv_host_of_gpu_blocks_bytes"], pl["advice"], pl["advice_withheld_kv"]')" \
    "(1, $((64 * MiB)), None, 'some_blocks')" "KV of some GPU blocks in host memory: blk.1's 64 MiB; no estimate"
check "KV of some GPU blocks: the verdict names the layer and that block's KV cache" \
    says "$D/kvsome.txt" 'PARTIAL OFFLOAD. 1 of 5 layers run from host memory, and the KV cache of 1 block on the GPU (64.0 MiB)'
check "KV of some GPU blocks: the text says why there is no estimate" \
    says "$D/kvsome.txt" 'No estimate of the layers that fit: 1 of the 3 blocks on the GPU have their KV cache in host memory'
"$VT" report --html "$D/kvsome.html" "$D/kvsome" 2>/dev/null
check "KV of some GPU blocks: so does the HTML page" grep -q '1 of the 3 blocks on the GPU have their KV cache in host' "$D/kvsome.html"
is "$(views_disagree "$D/kvsome")" "" "KV of some GPU blocks: report, top, serve, the HTML page and the gate agree"
"$VT" serve --once "$D/kvsome" >"$D/kvsome.om" 2>/dev/null
is "$(grep -c '^vramtrace_layers{pid="309",process="llama-cli",where="gpu_kv_in_host"} 1$' "$D/kvsome.om")" 1 \
    "KV of some GPU blocks: serve counts the block"

# kvexperts (pid 310): every block on CUDA0, the experts of all 4 and the
# whole KV cache in pageable memory (--cpu-moe --no-kv-offload): which
# would move first is the program's choice, so no estimate.
{
    header 310 'llama-server,-m,a.gguf,-ngl,99,--cpu-moe,-nkvo'
    echo 'event t=1000000 api=cudaMalloc dev=0 ptr=0x10000000000 size=2304MiB stack=1 flags=runtime'
    echo 'ggml_buffer t=1100000 buffer=0x1 usage=WEIGHTS base=0x10000000000 size=2304MiB name=CUDA0 host=1'
    blocks 0x1 0 3 $((0x10000000000))
    echo 'ggml_tensor t=1600000 buffer=0x1 data=0x10080000000 nbytes=256MiB name=output.weight'
    echo 'ggml_buffer t=1200000 buffer=0x2 usage=WEIGHTS base=0x7f0000000000 size=1GiB name=CPU host=2'
    for i in 0 1 2 3; do
        echo "ggml_tensor t=1500000 buffer=0x2 data=$((0x7f0000000000 + i * 268435456)) nbytes=256MiB name=blk.$i.ffn_up_exps.weight"
    done
    echo 'ggml_buffer t=2100000 buffer=0x3 usage=ANY base=0x7f4000000000 size=256MiB name=CPU host=2'
    kv 0x3 0 3 $((0x7f4000000000))
    echo 'end t=10000000 events=1 dropped=0'
} >"$D/kvexperts.vt"
alone kvexperts
is "$(jp "$D/kvexperts.json" 'pl["layers"]["expert_blocks_host"], pl["layers"]["kv_blocks_host"], pl["advice"], pl["advice_withheld_kv"]')" \
    "(4, 4, None, 'with_experts')" "experts and KV cache in host memory: 4 blocks each; no estimate"
check "experts and KV cache: the verdict names both" \
    says "$D/kvexperts.txt" 'Every layer is on the GPU, but the experts of 4 of its 4 blocks are in host memory (1.00 GiB) and the KV cache of 4 (256.0 MiB)'
check "experts and KV cache: the text says why there is no estimate" \
    says "$D/kvexperts.txt" "No estimate of what fits: both the experts and the KV cache of blocks on the GPU are in host memory"
is "$(views_disagree "$D/kvexperts")" "" "experts and KV cache: report, top, serve, the HTML page and the gate agree"

# ---- ollama's llama-server command line (llm/llama_server.go): the KV
# cache's size and type, and the -ngl its --fit left alone, are quoted;
# the port and the log options are not ----
{
    sed -n '1p' "$D/partial.vt" | sed 's/pid=300/pid=311/; s|argv=[^ ]*|argv=llama-server,--model,m.gguf,--port,41234,--host,127.0.0.1,--no-webui,-c,8192,-np,2,--cache-type-k,q8_0,--cache-type-v,q8_0,--flash-attn,on,-ngl,2,--log-verbosity,4,--load-mode,none|'
    sed '1d' "$D/partial.vt"
} >"$D/ollama.vt"
alone ollama
check "ollama's llama-server: the options that place layers and size the KV cache are quoted, nothing else" \
    says "$D/ollama.txt" 'its command line says: -c 8192 -np 2 --cache-type-k q8_0 --cache-type-v q8_0 -ngl 2 --load-mode none\.'
is "$(jp "$D/ollama.json" 'len(pl["program_args"])')" 12 "ollama's llama-server: JSON program_args holds the same 12 words"

# ---- llama.cpp's --fit: its free-memory queries (from under
# common_fit_params, the name a stripped libllama-common still exports)
# say it chose the split, with its target from the environment, the
# command line or llama.cpp's default; an -ngl given is one it left ----
FIT_FN=_Z17common_fit_paramsPKcP18llama_model_paramsP20llama_context_paramsPfP32llama_model_tensor_buft_overridePmjPK22common_fit_extra_model14ggml_log_level
# fit_trace NAME ARGV [ENV [FROM]]: partial.vt's placement (or FROM's) under that command line
# and environment, with one free-memory query made by --fit.
fit_trace() {
    src=${4:-$D/partial.vt}
    {
        sed -n '1p' "$src" | sed "s/pid=300/pid=312/; s|argv=[^ ]*|argv=$2${3:+ env=$3}|"
        sed -n '2,/^stack 2 /p' "$src" | sed '1d'
        echo "frame 0x403000 module=0 offset=0x3000 function=$FIT_FN"
        echo 'stack 3 parent=0 ip=0x403000'
        echo 'event t=500000 api=cudaMemGetInfo dev=0 size=7.5GiB aux=8GiB stack=3 flags=runtime'
        sed '1,/^stack 2 /d' "$src"
    } >"$D/$1.vt"
    alone "$1"
}
fit_trace fitdefault 'llama-server,-m,m.gguf,--fit,on' '"CUDA_VISIBLE_DEVICES=0"'
fit_trace fitold 'llama-server,-m,m.gguf,--fit,on' ''
fit_trace fitenv 'llama-server,-m,m.gguf' '"LLAMA_ARG_FIT_TARGET=3072","CUDA_VISIBLE_DEVICES=0"'
fit_trace fitargv 'llama-server,-m,m.gguf,--fit-target=512' '"LLAMA_ARG_FIT_TARGET=3072"'
fit_trace fitngl 'llama-server,-m,m.gguf' '"LLAMA_ARG_N_GPU_LAYERS=2"'
check "--fit, default target: it chose the split, to keep 1024 MiB free (neither command line nor environment sets one)" \
    says "$D/fitdefault.txt" "llama.cpp's --fit chose this split: its free-memory queries are in the trace (from common_fit_params), and neither an -ngl nor a tensor override was given\. It offloads only as much as leaves 1024 MiB free on each GPU (--fit-target: llama.cpp's default, which neither the command line nor the environment sets)"
check "--fit, target from LLAMA_ARG_FIT_TARGET: 3072 MiB, said so" \
    says "$D/fitenv.txt" 'leaves 3072 MiB free on each GPU (--fit-target, from LLAMA_ARG_FIT_TARGET)'
check "the environment's llama.cpp options are quoted, nothing else of it" \
    says "$D/fitenv.txt" 'Its environment sets: LLAMA_ARG_FIT_TARGET=3072\. '
check "--fit in a trace without the environment: that it chose, and its default, are said to be conditional" \
    says "$D/fitold.txt" "llama.cpp's --fit chose this split unless the environment set an -ngl or a tensor override: its free-memory queries are in the trace (from common_fit_params), and its command line gives neither (this trace does not record the environment)\. .*(--fit-target: llama.cpp's default, unless LLAMA_ARG_FIT_TARGET set another)"
check "no llama.cpp option in the environment: no sentence of it" sh -c "! grep -q 'Its environment sets' '$D/fitdefault.txt'"
check "--fit, --fit-target=512 on the command line overrides the environment's 3072" \
    says "$D/fitargv.txt" 'leaves 512 MiB free on each GPU (--fit-target, from the command line)'
check "--fit with -ngl from LLAMA_ARG_N_GPU_LAYERS: --fit left it" \
    says "$D/fitngl.txt" "but -ngl 2 was given by LLAMA_ARG_N_GPU_LAYERS: --fit leaves that as given\."
is "$(jp "$D/fitenv.json" 'json.dumps([pl["program_env"], pl["llama_fit"]["queries"], pl["llama_fit"]["chose_layers"], pl["llama_fit"]["target_bytes"], pl["llama_fit"]["target_from"], p["env"]])')" \
    '[["LLAMA_ARG_FIT_TARGET=3072"], 1, true, 3221225472, "environment", ["LLAMA_ARG_FIT_TARGET=3072", "CUDA_VISIBLE_DEVICES=0"]]' \
    "--fit: JSON program_env, llama_fit and the process's env"
is "$(jp "$D/ollama.json" 'json.dumps([pl["llama_fit"], p["env"]])')" '[null, null]' \
    "no --fit query: llama_fit null; a trace without the environment: env null"
is "$(jp "$D/fitold.json" 'json.dumps([pl["llama_fit"]["chose_layers"], pl["llama_fit"]["environment_recorded"]])')" '[null, false]' \
    "--fit without the environment: JSON chose_layers null"
# A tensor override, or a tensor or row split (with more than one GPU),
# makes --fit leave the split as given (common/fit.cpp: "already set by
# user"); the report said it chose. --n-cpu-moe 0 adds no override.
fit_trace fitot 'llama-server,-m,m.gguf,-ot,blk.0.ffn_up=CPU' '"LLAMA_ARG_FIT_TARGET=3072"'
fit_trace fitcmoe 'llama-server,-m,m.gguf' '"LLAMA_ARG_CPU_MOE=1"'
fit_trace fitcmoeoff 'llama-server,-m,m.gguf,--n-cpu-moe,0' '"LLAMA_ARG_CPU_MOE=0"'
fit_trace fitncffn 'llama-server,-m,m.gguf,-ncffn,2' ''
fit_trace fitts 'llama-server,-m,m.gguf,--tensor-split=3/1' '"LLAMA_ARG_SPLIT_MODE=row"'
fit_trace fitrow 'llama-server,-m,m.gguf' '"LLAMA_ARG_SPLIT_MODE=row","LLAMA_ARG_TENSOR_SPLIT=0,0"'
check "--fit with -ot: it left the split, and the override is quoted" \
    says "$D/fitot.txt" "llama.cpp's --fit ran (its free-memory queries are in the trace, from common_fit_params), but -ot blk\.0\.ffn_up=CPU was given on the command line: with a tensor override set, --fit leaves the split as given\."
check "--fit with -ot: no sentence says it chose" sh -c "! grep -q 'fit chose' '$D/fitot.txt'"
check "--fit with LLAMA_ARG_CPU_MOE=1: the environment's override is named" \
    says "$D/fitcmoe.txt" "but LLAMA_ARG_CPU_MOE=1 was given in the environment: with a tensor override set, --fit leaves the split as given\."
check "--n-cpu-moe 0 and LLAMA_ARG_CPU_MOE=0 set no override: --fit chose" \
    says "$D/fitcmoeoff.txt" "llama.cpp's --fit chose this split"
check "--fit with --n-cpu-ffn 2 (dense blocks' feed-forward): an override, quoted on the command line too" \
    says "$D/fitncffn.txt" "its command line says: -ncffn 2\. .*but -ncffn 2 was given on the command line: with a tensor override set"
check "--fit with --tensor-split 3/1: left as given where there is more than one GPU (the command line's, over the environment's row)" \
    says "$D/fitts.txt" "but --tensor-split 3/1 was given on the command line: with more than one GPU, --fit leaves the split as given\."
check "--fit with LLAMA_ARG_SPLIT_MODE=row (the all-zero split is none)" \
    says "$D/fitrow.txt" "but LLAMA_ARG_SPLIT_MODE=row was given in the environment: with more than one GPU"
is "$(jp "$D/fitot.json" 'json.dumps([pl["llama_fit"][k] for k in ("chose_layers", "override", "override_value", "override_from", "split")])')" \
    '[false, "-ot", "blk.0.ffn_up=CPU", "command_line", null]' "--fit with -ot: JSON llama_fit names the override"
is "$(jp "$D/fitrow.json" 'json.dumps([pl["llama_fit"][k] for k in ("chose_layers", "override", "split", "split_value", "split_from")])')" \
    '[null, null, "LLAMA_ARG_SPLIT_MODE", "row", "environment"]' "--fit with a row split: JSON chose_layers null (one GPU or more, unknown)"
check "--fit: the HTML page says it too" sh -c "'$VT' report --html '$D/fitenv.html' '$D/fitenv' && grep -q 'leaves 3072 MiB free on each GPU' '$D/fitenv.html'"

# ---- The context --fit chose: with no -c, --fit sizes the context
# (shrinking the trained one before it leaves layers in host memory); the
# KV cache's rows (ggml_nrows, 8192 here) are its cells. The report said
# nothing of it. ----
# ctx_trace NAME ARGV [ENV]: fit_trace's, with the KV tensors' rows.
ctx_trace() {
    sed "s/name=cache_\\([kv]\\)_l\\([0-9]*\\)\$/& rows=${ROWS:-8192}/" "$D/partial.vt" >"$D/rows.vt"
    fit_trace "$1" "$2" "${3:-}" "$D/rows.vt"
}
ctx_trace ctxfit 'llama-server,-m,m.gguf' '"CUDA_VISIBLE_DEVICES=0"'
ctx_trace ctxold 'llama-server,-m,m.gguf' ''
ctx_trace ctxenv 'llama-server,-m,m.gguf' '"LLAMA_ARG_CTX_SIZE=8192"'
ctx_trace ctxfitc 'llama-server,-m,m.gguf,--fit-ctx,2048' '"LLAMA_ARG_FIT_CTX=1024"'
ctx_trace ctxzero 'llama-server,-m,m.gguf,-c,0' '"CUDA_VISIBLE_DEVICES=0"'
check "--fit with no -c: it chose the context, and the KV cache's cells are said" \
    says "$D/ctxfit.txt" "No -c was given, so llama\.cpp's --fit chose the context: the KV cache has 8192 cells (tokens of context, over all sequences)\. --fit starts from the model's trained context (llama\.cpp v0\.5\.0: that times the sequences, -np) and shrinks it, as far as --fit-ctx (4096 by default), before it leaves any layer in host memory; -c sets it, and -c 0 keeps the trained context whole\."
check "the KV line names the cells" says "$D/ctxfit.txt" "KV cache (8192 cells): 192\.0 MiB of 256\.0 MiB"
check "a trace without the environment: the choice is conditional, and so is the floor" \
    says "$D/ctxold.txt" "No -c was given on the command line, so llama\.cpp's --fit chose the context unless LLAMA_ARG_CTX_SIZE set it (this trace does not record the environment): the KV cache has 8192 cells .* as far as --fit-ctx (4096 by default, unless LLAMA_ARG_FIT_CTX set another)"
check "LLAMA_ARG_CTX_SIZE given: no sentence says --fit chose the context" sh -c "! grep -q 'chose the context' '$D/ctxenv.txt'"
check "-c 0 given: none either (--fit keeps the trained context whole)" sh -c "! grep -q 'chose the context' '$D/ctxzero.txt'"
check "--fit-ctx on the command line, over the environment's" says "$D/ctxfitc.txt" "as far as --fit-ctx 2048 (from the command line), before"
is "$(jp "$D/ctxfit.json" 'json.dumps([pl["kv_cells"]] + [pl["llama_fit"][k] for k in ("chose_context", "ctx", "ctx_from", "fit_ctx", "fit_ctx_from")])')" \
    '[8192, true, null, "default", null, "default"]' "--fit chose the context: JSON kv_cells, llama_fit.chose_context"
is "$(jp "$D/ctxenv.json" 'json.dumps([pl["llama_fit"][k] for k in ("chose_context", "ctx", "ctx_from")])')" \
    '[false, "8192", "environment"]' "LLAMA_ARG_CTX_SIZE: JSON chose_context false, ctx and where from"
is "$(jp "$D/ctxold.json" 'json.dumps([pl["llama_fit"]["chose_context"]])')" '[null]' "no environment recorded: chose_context null"
is "$(jp "$D/ctxfitc.json" 'json.dumps([pl["llama_fit"][k] for k in ("fit_ctx", "fit_ctx_from")])')" '["2048", "command_line"]' \
    "--fit-ctx: JSON fit_ctx and where from"
is "$(jp "$D/fitdefault.json" 'json.dumps(pl["kv_cells"])')" 'null' \
    "a trace without the KV tensors' rows: kv_cells null"
check "and no cells in its KV line" sh -c "grep -q 'KV cache: ' '$D/fitdefault.txt' && ! grep -q 'cells' '$D/fitdefault.txt'"
"$VT" serve --once "$D/ctxfit" >"$D/ctxfit.om" 2>&1
check "serve: vramtrace_kv_cache_cells" grep -qE '^vramtrace_kv_cache_cells\{.*pid="312".*\} 8192$' "$D/ctxfit.om"
"$VT" report --html "$D/ctxfit.html" "$D/ctxfit" >/dev/null 2>&1
check "the HTML page: the cells, and the sentence" sh -c "grep -q '<b>8192 cells</b>' '$D/ctxfit.html' && grep -q 'chose the context: the KV cache has 8192 cells' '$D/ctxfit.html'"
is "$(views_disagree "$D/ctxfit")" "" "--fit's context: report, top, serve, the HTML page, the gate and diff agree"
ROWS=2048 ctx_trace ctxsmall 'llama-server,-m,m.gguf' '"CUDA_VISIBLE_DEVICES=0"'
"$VT" diff --color never "$D/ctxfit" "$D/ctxsmall" >"$D/dctx.txt" 2>&1
is "$(grep -E '^kv_cells ' "$D/dctx.txt")" "kv_cells                   8192         2048        -6144" \
    "diff: the KV cache's cells of each run, and the change"
"$VT" diff --color never "$D/ctxfit" "$D/fitdefault" >"$D/dctx2.txt" 2>&1
is "$(grep -E '^kv_cells ' "$D/dctx2.txt")" "kv_cells                   8192            -" "diff: - for a run whose trace does not record them"
check "diff: no kv_cells row where neither does" sh -c "! grep -q '^kv_cells' '$D/d.txt'"
"$VT" diff --json "$D/ctxfit" "$D/fitdefault" >"$D/dctx.json" 2>&1
is "$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["a"]["placement"]["kv_cells"], d["b"]["placement"]["kv_cells"])' "$D/dctx.json")" \
    "8192 None" "diff --json: placement.kv_cells, null where not recorded"

# ---- The KV cache's streams: llama.cpp makes K and V [n_embd_gqa,
# kv_size, n_stream] and a view of each per stream, [n_embd_gqa, kv_size]
# (one stream per sequence with -np N and no --kv-unified). Its log's "N
# cells" are a view's rows; the report said the tensor's, N x n_stream. ----
# streams_trace NAME ROWS VIEW_ROWS VIEWS [VIEW_BUFFER] [ARGV]: ctxfit's
# trace, each K and V tensor of ROWS rows followed by VIEWS views of
# VIEW_ROWS rows (in VIEW_BUFFER, default their tensor's).
streams_trace() {
    awk -v rows="$2" -v vrows="$3" -v views="$4" -v vbuf="${5:-}" '
        /name=cache_[kv]_l[0-9]+$/ {
            print $0 " rows=" rows
            split($0, f, " "); buf = f[3]; if (vbuf != "") buf = "buffer=" vbuf
            name = substr($NF, 6); data[substr(name, 7, 1)] = f[4]
            if (substr(name, 7, 1) == "v")
                for (s = 0; s < views; s++)
                    for (kv = 0; kv < 2; kv++) {
                        c = kv ? "v" : "k"; n = name; n = substr(n, 1, 6) c substr(n, 8)
                        printf "ggml_tensor t=2500000 %s %s nbytes=1MiB name=\"%s (view)\" rows=%d\n", buf, data[c], n, vrows
                    }
            next
        }
        { print }' "$D/partial.vt" >"$D/streams.vt"
    fit_trace "$1" "${6:-llama-server,-m,m.gguf}" '"CUDA_VISIBLE_DEVICES=0"' "$D/streams.vt"
}
streams_trace seqs 4096 1024 4
streams_trace unified 8192 8192 1
streams_trace ragged 4096 1000 4
streams_trace wideview 1024 4096 1
streams_trace flat 1 0 0
streams_trace strayview 4096 1024 4 0x9
check "4 streams: the KV line says the sequences and their cells" \
    says "$D/seqs.txt" "KV cache (4 sequences of 1024 cells each): 192\.0 MiB of 256\.0 MiB"
check "and --fit's sentence sizes each sequence's context" \
    says "$D/seqs.txt" "the KV cache has 4 sequences of 1024 cells each (tokens of context, each sequence's own: -np without --kv-unified)\. --fit starts from the model's trained context for each sequence and shrinks it, as far as --fit-ctx (4096 by default) for each, before it leaves any layer in host memory; -c sets the context of all sequences together, and -c 0 gives them the trained context to share out\."
check "1 stream: one cache every sequence shares" \
    says "$D/unified.txt" "the KV cache has 8192 cells (tokens of context, one cache every sequence shares)\. --fit starts from the model's trained context (llama\.cpp v0\.5\.0: that times the sequences, -np) and shrinks it"
cells_streams() { jp "$1" 'json.dumps([pl["kv_cells"], pl["kv_streams"]])'; }
is "$(cells_streams "$D/seqs.json") $(cells_streams "$D/unified.json") $(cells_streams "$D/ctxfit.json")" \
    "[1024, 4] [8192, 1] [8192, null]" "JSON kv_cells and kv_streams: a view's rows and the tensor's over them; null without views"
is "$(cells_streams "$D/ragged.json") $(cells_streams "$D/wideview.json") $(cells_streams "$D/strayview.json")" \
    "[4096, null] [1024, null] [4096, null]" \
    "views that do not divide the rows, have more of them, or lie in another buffer: the tensor's rows, streams unknown"
check "and those say the cells over all sequences" says "$D/ragged.txt" "the KV cache has 4096 cells (tokens of context, over all sequences)"
is "$(cells_streams "$D/flat.json")" "[null, null]" "a flat 1-D cache (one row): no cells"
check "and no sentence of them" sh -c "! grep -q 'cells' '$D/flat.txt'"
"$VT" serve --once "$D/seqs" >"$D/seqs.om" 2>&1
check "serve: vramtrace_kv_cache_cells and _streams" sh -c \
    "grep -qE '^vramtrace_kv_cache_cells\{.*pid=\"312\".*\} 1024\$' '$D/seqs.om' && grep -qE '^vramtrace_kv_cache_streams\{.*pid=\"312\".*\} 4\$' '$D/seqs.om'"
"$VT" serve --once "$D/ctxfit" >"$D/ctxfit2.om" 2>&1
check "serve: no streams where the trace has no views" sh -c "! grep -q '^vramtrace_kv_cache_streams{' '$D/ctxfit2.om'"
"$VT" report --html "$D/seqs.html" "$D/seqs" >/dev/null 2>&1
check "the HTML page: the sequences, and what they count" \
    grep -q "<b>4 sequences of 1024 cells each</b> (tokens of context, each sequence's own: -np without --kv-unified)" "$D/seqs.html"
is "$(views_disagree "$D/seqs")" "" "4 streams: report, top, serve, the HTML page, the gate and diff agree"
"$VT" diff --color never "$D/seqs" "$D/unified" >"$D/dseqs.txt" 2>&1
is "$(grep -E '^kv_(cells|streams) ' "$D/dseqs.txt" | tr -s ' ')" "kv_cells 1024 8192 +7168
kv_streams 4 1 -3" "diff: each run's cells and streams"
check "diff: no kv_streams row where no run has more than one" sh -c "! grep -q '^kv_streams' '$D/dctx.txt'"
"$VT" diff --json "$D/seqs" "$D/ctxfit" >"$D/dseqs.json" 2>&1
is "$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["a"]["placement"]["kv_streams"], d["b"]["placement"]["kv_streams"])' "$D/dseqs.json")" \
    "4 None" "diff --json: placement.kv_streams, null where not known"

# ---- Layers on one GPU of two: llama.cpp's -sm layer would spread a
# larger -ngl over both (shares from free memory or -ts), so one card's
# room is no estimate; -sm none or a single -dev keeps it to one GPU. The
# estimate counted GPU 0 alone. ----
# two_gpu_trace NAME ARGV [ENV]: partial's placement, a second 8 GiB GPU seen.
two_gpu_trace() {
    {
        sed -n '1p' "$D/partial.vt" | sed "s/pid=300/pid=313/; s|argv=[^ ]*|argv=$2${3:+ env=$3}|"
        sed -n '2p' "$D/partial.vt"
        echo 'device 1 total=8GiB free=7.5GiB name="NVIDIA Sim" uuid=0123456789abcdef0123456789abcdf0 t=0'
        sed '1,2d' "$D/partial.vt"
    } >"$D/$1.vt"
    alone "$1"
}
two_gpu_trace twogpu 'llama-server,-m,m.gguf,-ngl,2' '"LLAMA_ARG_DEVICE=CUDA0,CUDA1"'
two_gpu_trace twogpunone 'llama-server,-m,m.gguf,-ngl,2,--split-mode,none' ''
two_gpu_trace twogpuenv 'llama-server,-m,m.gguf,-ngl,2' '"LLAMA_ARG_SPLIT_MODE=none"'
two_gpu_trace twogpudev 'llama-server,-m,m.gguf,-ngl,2,-dev,CUDA0' '"LLAMA_ARG_DEVICE=CUDA0,CUDA1"'
two_gpu_trace twogputs 'llama-server,-m,m.gguf,-ngl,2,-ts,1/0' '"LLAMA_ARG_TENSOR_SPLIT=1,1"'
two_gpu_trace twogputsenv 'llama-server,-m,m.gguf,-ngl,2' '"LLAMA_ARG_TENSOR_SPLIT=,0,3.5"'
two_gpu_trace twogputs2 'llama-server,-m,m.gguf,-ngl,2,--tensor-split,0.5/0.5' ''
is "$(jp "$D/twogpu.json" 'json.dumps([pl["advice"], pl["advice_withheld_devices"], pl["advice_withheld_gpus"]])')" '[null, 2, 0]' \
    "layers on one GPU of two, no option keeping llama.cpp to one: no estimate, JSON advice_withheld_devices 2"
check "the text says why, and names no card's room" \
    says "$D/twogpu.txt" "No estimate of the layers that fit: this process used 2 GPUs, and llama\.cpp spreads the layers it offloads over all of them (-sm layer, its default), in shares set by their free memory or -ts (the estimate counts one card's room; -sm none, -dev with one GPU or a -ts with one share would keep it to one)\."
check "no estimate line" sh -c "! grep -qE 'Estimate:|had .* free at the lowest' '$D/twogpu.txt'"
for v in twogpunone twogpuenv twogpudev twogputs twogputsenv; do
    is "$(jp "$D/$v.json" 'json.dumps([pl["advice"]["device"], pl["advice"]["gpu_layers"], pl["advice_withheld_devices"]])')" '[0, 5, 0]' \
        "$v: an option keeps llama.cpp to GPU 0 (-sm none, LLAMA_ARG_SPLIT_MODE=none, -dev CUDA0 over the environment's list, a split with one share above 0): its estimate"
done
is "$(jp "$D/twogputs2.json" 'json.dumps([pl["advice"], pl["advice_withheld_devices"]])')" '[null, 2]' \
    "--tensor-split 0.5/0.5: two shares, no estimate"
check "-dev is quoted with the command line" says "$D/twogpudev.txt" 'its command line says: -ngl 2 -dev CUDA0\.'
"$VT" top --once "$D/twogpu" >"$D/twogpu.top" 2>&1
check "top makes no estimate either" sh -c "grep -q 'in host memory' '$D/twogpu.top' && ! grep -q 'estimate' '$D/twogpu.top'"
"$VT" report --html "$D/twogpu.html" "$D/twogpu" >/dev/null 2>&1
check "the HTML page says why" grep -q "this process used 2 GPUs, and llama.cpp spreads" "$D/twogpu.html"

# ---- Part of a block in host memory: every layer on the GPU, block 0's
# ffn_up (128 MiB) in a host buffer by an override (-ot
# blk.0.ffn_up=CPU; --fit's partial layer does the same). The report said
# "All layers are on the GPU, but part of the KV cache is in host memory"
# with none there, and advised the -ngl the run had ----
# part_trace NAME ARGV [ENV [FIT]]: that placement; FIT: one free-memory
# query made by --fit.
part_trace() {
    {
        header 313 "$2${3:+ env=$3}"
        [ -z "${4:-}" ] || { echo "frame 0x403000 module=0 offset=0x3000 function=$FIT_FN"; echo 'stack 3 parent=0 ip=0x403000'
            echo 'event t=500000 api=cudaMemGetInfo dev=0 size=7.5GiB aux=8GiB stack=3 flags=runtime'; }
        echo 'event t=1000000 api=cudaMalloc dev=0 ptr=0x10000000000 size=2176MiB stack=1 flags=runtime'
        echo 'ggml_buffer t=1100000 buffer=0x1 usage=WEIGHTS base=0x10000000000 size=2176MiB name=CUDA0 host=1'
        echo 'ggml_buffer t=1200000 buffer=0x2 usage=WEIGHTS base=0x7f0000000000 size=384MiB name=CPU_Mapped host=2'
        echo 'ggml_tensor t=1300000 buffer=0x2 data=0x7f0000000000 nbytes=256MiB name=token_embd.weight'
        d=$((0x10000000000))
        for w in attn_q attn_k attn_v; do
            echo "ggml_tensor t=1400000 buffer=0x1 data=$d nbytes=128MiB name=blk.0.$w.weight"
            d=$((d + 128 * MiB))
        done
        echo 'ggml_tensor t=1400000 buffer=0x2 data=0x7f0010000000 nbytes=128MiB name=blk.0.ffn_up.weight'
        blocks 0x1 1 3 $((0x10000000000 + 384 * MiB))
        echo 'ggml_tensor t=1600000 buffer=0x1 data=0x10078000000 nbytes=256MiB name=output.weight'
        echo 'event t=2000000 api=cudaMalloc dev=0 ptr=0x100a0000000 size=256MiB stack=2 flags=runtime'
        echo 'ggml_buffer t=2100000 buffer=0x3 usage=ANY base=0x100a0000000 size=256MiB name=CUDA0 host=1'
        kv 0x3 0 3 $((0x100a0000000))
        echo 'event t=3000000 api=cudaMalloc dev=0 ptr=0x100b0000000 size=128MiB stack=1 flags=runtime'
        echo 'ggml_buffer t=3100000 buffer=0x5 usage=COMPUTE base=0x100b0000000 size=128MiB name=CUDA0 host=1'
        echo 'end t=10000000 events=3 dropped=0'
    } >"$D/$1.vt"
    alone "$1"
}
part_trace part 'llama-server,-m,m.gguf,-ngl,99,-ot,blk.0.ffn_up=CPU' '"CUDA_VISIBLE_DEVICES=0"'
is "$(jp "$D/part.json" 'json.dumps([pl["layers"][k] for k in ("gpu", "total", "part_blocks_host", "part_host_bytes", "override_blocks")] + [pl["kv"]["host_bytes"], p["verdict"]])')" \
    "[5, 5, 1, $((128 * MiB)), 0, 0, \"partial_offload\"]" "part of a block: 5 of 5 layers on the GPU, 1 block with 128 MiB in host memory, no KV cache there"
check "part of a block: the verdict says what is in host memory, not the KV cache" \
    says "$D/part.txt" 'VERDICT: PARTIAL OFFLOAD\. Every layer is on the GPU, but part of the weights of 1 of its 4 blocks is in host memory (128\.0 MiB): generation runs at host-memory speed for that part\.'
check "part of a block: the layers line says which" \
    says "$D/part.txt" 'on the GPU: 4 blocks + the output layer, 1 of those blocks with part of its weights in host memory\.'
is "$(jp "$D/part.json" 'json.dumps([pl["advice"][k] for k in ("of_override", "override_blocks_counted", "override_counted_bytes", "override_blocks_fit")])')" \
    "[true, 1, $((128 * MiB)), 1]" "part of a block: the estimate is of those weights, and they fit"
check "part of a block: the estimate names the override, not -ngl" \
    says "$D/part.txt" 'Estimate: the weights that block keeps in host memory (128\.0 MiB) fit on this card too (llama.cpp: without the -ot that keeps them there)\.'
"$VT" top --once "$D/part" >"$D/part.top" 2>&1
check "part of a block: top says it" grep -q "in host memory: 128.0 MiB of layer weights (part of the weights of 1 block on the GPU)" "$D/part.top"
"$VT" report --html "$D/part.html" "$D/part" >/dev/null 2>&1
check "part of a block: so does the HTML page" grep -q "<b>1 block on a GPU with part of its weights</b> (128.0 MiB) <b>in host memory</b>" "$D/part.html"
is "$(views_disagree "$D/part")" "" "part of a block: report, top, serve, the HTML page and the gate agree"
# --fit set that override (its queries in the trace, nothing given):
# the knob is its target.
part_trace partfit 'llama-server,-m,m.gguf' '"CUDA_VISIBLE_DEVICES=0"' fit
check "part of a block by --fit: the estimate names --fit's target" \
    says "$D/partfit.txt" 'Estimate: the weights that block keeps in host memory (128\.0 MiB) fit on this card too (llama.cpp: --fit keeps them there; a smaller --fit-target puts more on the GPU)\.'

# ---- The KV cache kept in host memory by the environment: no block on
# the GPU shows where a block's KV cache would go, so the options say it
# (LLAMA_ARG_KV_OFFLOAD=0, llama-server's -nkvo; a -kvo after it undoes
# it). Only the output layer on the GPU. ----
# nkvo_trace NAME ARGV ENV
nkvo_trace() {
    {
        header 314 "$2 env=$3"
        echo 'event t=1000000 api=cudaMalloc dev=0 ptr=0x10000000000 size=256MiB stack=1 flags=runtime'
        echo 'ggml_buffer t=1100000 buffer=0x1 usage=WEIGHTS base=0x10000000000 size=256MiB name=CUDA0 host=1'
        echo 'ggml_buffer t=1200000 buffer=0x2 usage=WEIGHTS base=0x7f0000000000 size=2304MiB name=CPU_Mapped host=2'
        echo 'ggml_tensor t=1300000 buffer=0x2 data=0x7f0000000000 nbytes=256MiB name=token_embd.weight'
        blocks 0x2 0 3 $((0x7f0010000000))
        echo 'ggml_tensor t=1600000 buffer=0x1 data=0x10000000000 nbytes=256MiB name=output.weight'
        echo 'ggml_buffer t=2200000 buffer=0x4 usage=ANY base=0x7f1000000000 size=256MiB name=CPU host=2'
        kv 0x4 0 3 $((0x7f1000000000))
        echo 'event t=3000000 api=cudaMalloc dev=0 ptr=0x10050000000 size=128MiB stack=1 flags=runtime'
        echo 'ggml_buffer t=3100000 buffer=0x5 usage=COMPUTE base=0x10050000000 size=128MiB name=CUDA0 host=1'
        echo 'end t=10000000 events=2 dropped=0'
    } >"$D/$1.vt"
    alone "$1"
}
nkvo_trace nkvoenv 'llama-server,-m,m.gguf,-ngl,1' '"LLAMA_ARG_KV_OFFLOAD=0"'
nkvo_trace nkvoundone 'llama-server,-m,m.gguf,-ngl,1,-nkvo,-kvo' '"LLAMA_ARG_KV_OFFLOAD=0"'
nkvo_trace nkvoon 'llama-server,-m,m.gguf,-ngl,1' '"LLAMA_ARG_KV_OFFLOAD=on"'
is "$(jp "$D/nkvoenv.json" 'json.dumps([pl["layers"]["gpu"], pl["advice"]["kv_kept"], pl["advice"]["per_layer_kv_bytes"]])')" \
    '[1, true, 0]' "LLAMA_ARG_KV_OFFLOAD=0, no block on the GPU: a layer more is counted without its KV cache"
check "LLAMA_ARG_KV_OFFLOAD=0: the text says the KV cache stays" \
    says "$D/nkvoenv.txt" 'with the KV cache kept in host memory as now'
is "$(jp "$D/nkvoundone.json" 'json.dumps([pl["advice"]["kv_kept"], pl["advice"]["per_layer_kv_bytes"]])')" \
    "[false, $((64 * MiB))]" "-nkvo then -kvo on the command line, over the environment: counted with its KV cache"
is "$(jp "$D/nkvoon.json" 'pl["advice"]["kv_kept"]')" False "LLAMA_ARG_KV_OFFLOAD=on: counted with its KV cache"
check "-kvo is quoted with the options that place the KV cache" says "$D/nkvoundone.txt" 'its command line says: -ngl 1 -nkvo -kvo\.'

done_testing
