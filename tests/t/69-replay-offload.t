#!/bin/sh
# `replay --capacity` on a ggml program gives the report's offload estimate
# for the card it tries, and its card sizes agree with the report's "All M
# layers on the GPU would need X more". Traces written by build/vtgen with
# exact numbers, shaped as llama.cpp loads a model of 32 blocks with
# -ngl 24 on a 24 GiB card:
#   blocks of 4 x 128 MiB of weights (512 MiB) and 64 + 64 MiB of KV cache:
#     a layer is 640 MiB; output.weight 256 MiB, token_embd 256 MiB;
#   CUDA0: blk.8-31 (12 GiB of weights), their KV (3 GiB), compute 1 GiB:
#     16 GiB tracked; CPU_Mapped: token_embd, blk.0-7, output (host);
#     the KV of l0-7 in a CPU buffer: 24 of 33 layers on the GPU;
#   the DEVICE record's 23.5 GiB free at first sight (a 512 MiB reserve);
#     the driver then reports 7 GiB free: 512 MiB used by someone else.
# Runs:
#   partial (pid 500): as above;
#   unmet   (pid 501): the same, and a 2 GiB request that failed;
#   full    (pid 502): every layer on CUDA0;
#   plain   (pid 503): one cudaMalloc, no ggml record.
. tests/t/lib.sh
GEN=$B/vtgen
for f in "$VT" "$GEN"; do
    [ -x "$f" ] || { echo "1..0 # SKIP $f not built (make test-bins)"; exit 0; }
done
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 needed to read the JSON report"; exit 0; }
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT
MiB=1048576
GiB=$((1024 * MiB))

header() { ggml_header "$1" "$2" 24GiB 23.5GiB; }
blocks() { ggml_blocks "$@"; }
kv() { ggml_kv "$@" 64; }
# partial PID [FAILED-REQUEST-LINE]
partial() {
    header "$1" 'llama-cli,-m,m.gguf,-ngl,24'
    echo 'event t=1000000 api=cudaMalloc dev=0 ptr=0x10000000000 size=12GiB stack=1 flags=runtime'
    echo 'ggml_buffer t=1100000 buffer=0x1 usage=WEIGHTS base=0x10000000000 size=12GiB name=CUDA0 host=1'
    echo 'ggml_buffer t=1200000 buffer=0x2 usage=WEIGHTS base=0x7f0000000000 size=4608MiB name=CPU_Mapped host=2'
    echo 'ggml_tensor t=1300000 buffer=0x2 data=0x7f0000000000 nbytes=256MiB name=token_embd.weight'
    blocks 0x2 0 7 $((0x7f0010000000))
    echo "ggml_tensor t=1600000 buffer=0x2 data=$((0x7f0010000000 + 4 * GiB)) nbytes=256MiB name=output.weight"
    blocks 0x1 8 31 $((0x10000000000))
    echo 'event t=2000000 api=cudaMalloc dev=0 ptr=0x20000000000 size=3GiB stack=2 flags=runtime'
    echo 'ggml_buffer t=2100000 buffer=0x3 usage=ANY base=0x20000000000 size=3GiB name=CUDA0 host=1'
    echo 'ggml_buffer t=2200000 buffer=0x4 usage=ANY base=0x7f1000000000 size=1GiB name=CPU host=2'
    kv 0x4 0 7 $((0x7f1000000000))
    kv 0x3 8 31 $((0x20000000000))
    [ -z "${2:-}" ] || echo "$2"
    echo 'event t=3000000 api=cudaMalloc dev=0 ptr=0x30000000000 size=1GiB stack=1 flags=runtime'
    echo 'ggml_buffer t=3100000 buffer=0x5 usage=COMPUTE base=0x30000000000 size=1GiB name=CUDA0 host=1'
    echo 'event t=3200000 api=cuMemGetInfo_v2 dev=0 size=7GiB aux=24GiB flags=sample'
    echo 'end t=10000000 events=3 dropped=0'
}
gen() { "$GEN" "$D/$1.vt" -o "$D/$1.vtrace" || nok "vtgen $1"; }
partial 500 >"$D/partial.vt"
partial 501 'event t=2900000 api=cudaMalloc dev=0 size=2GiB result=2 stack=1 flags=runtime' >"$D/unmet.vt"
{
    header 502 'llama-cli,-m,m.gguf,-ngl,99'
    echo 'event t=1000000 api=cudaMalloc dev=0 ptr=0x10000000000 size=16640MiB stack=1 flags=runtime'
    echo 'ggml_buffer t=1100000 buffer=0x1 usage=WEIGHTS base=0x10000000000 size=16640MiB name=CUDA0 host=1'
    echo 'ggml_buffer t=1200000 buffer=0x2 usage=WEIGHTS base=0x7f0000000000 size=256MiB name=CPU_Mapped host=2'
    echo 'ggml_tensor t=1300000 buffer=0x2 data=0x7f0000000000 nbytes=256MiB name=token_embd.weight'
    blocks 0x1 0 31 $((0x10000000000))
    echo "ggml_tensor t=1600000 buffer=0x1 data=$((0x10000000000 + 16 * GiB)) nbytes=256MiB name=output.weight"
    echo 'event t=2000000 api=cudaMalloc dev=0 ptr=0x20000000000 size=4GiB stack=2 flags=runtime'
    echo 'ggml_buffer t=2100000 buffer=0x3 usage=ANY base=0x20000000000 size=4GiB name=CUDA0 host=1'
    kv 0x3 0 31 $((0x20000000000))
    echo 'event t=3000000 api=cudaMalloc dev=0 ptr=0x30000000000 size=1GiB stack=1 flags=runtime'
    echo 'ggml_buffer t=3100000 buffer=0x5 usage=COMPUTE base=0x30000000000 size=1GiB name=CUDA0 host=1'
    echo 'event t=3200000 api=cuMemGetInfo_v2 dev=0 size=1.75GiB aux=24GiB flags=sample'
    echo 'end t=10000000 events=3 dropped=0'
} >"$D/full.vt"
{
    header 503 'llama-cli,-m,m.gguf'
    echo 'event t=1000000 api=cudaMalloc dev=0 ptr=0x10000000000 size=12GiB stack=1 flags=runtime'
    echo 'event t=3200000 api=cuMemGetInfo_v2 dev=0 size=11GiB aux=24GiB flags=sample'
    echo 'end t=10000000 events=1 dropped=0'
} >"$D/plain.vt"
for s in partial unmet full plain; do gen $s; done

# json FILE KEY...: a value of the first process's placement
json() {
    f=$1; shift
    python3 -c 'import json,sys
v = json.load(open(sys.argv[1]))["processes"][0]["placement"]
for k in sys.argv[2:]:
    v = v[k]
print(v)' "$f" "$@"
}
# replay NAME OUT ARGS...: `replay --wide`, its exit status in OUT.rc
replay() {
    n=$1 out=$2; shift 2
    "$VT" replay --wide "$@" "$D/$n.vtrace" >"$D/$out" 2>"$D/$out.err"
    echo $? >"$D/$out.rc"
}
layers() { sed -n 's/^  Estimate for pid [0-9]*: \([0-9]*\) of \([0-9]*\) layers fit on this card (-ngl \1)\.$/\1 \2/p' "$D/$1"; }
line() { grep -F "$2" "$D/$1"; }
# The card sizes a line prints, in GiB as printed: "at least X" and, on
# the all-layers line, the byte bound.
least() { sed -n 's/^  or use a card of at least \([0-9.]*\) GiB\.$/\1/p' "$D/$1"; }
bound() { sed -n 's/^  All [0-9]* layers on the GPU would need .* a card of at least \([0-9.]*\) GiB counting bytes .*/\1/p' "$D/$1"; }
estimate_all() { sed -n 's/.*, puts them all on a card of at least \([0-9.]*\) GiB\.$/\1/p' "$D/$1"; }

# ---- the report, which replay must match ----
"$VT" report --json "$D/partial.vtrace" >"$D/partial.json" 2>/dev/null
"$VT" report "$D/partial.vtrace" >"$D/partial.txt" 2>/dev/null
# margin = (uint64)(0.15 x 24 GiB) = 3865470566; room = 7 GiB - margin =
# 3650722202 (3481.6 MiB); the output layer (256 MiB) first: 3225.6 MiB
# left, floor(3225.6 / 640) = 5 blocks: 24 + 1 + 5 = 30. All 33: 8 blocks x
# 640 MiB + 256 MiB = 5376 MiB = 5637144576.
is "$(json "$D/partial.json" layers gpu) $(json "$D/partial.json" layers total)" "24 33" "report: 24 of 33 layers on the GPU"
is "$(json "$D/partial.json" advice gpu_layers)/$(json "$D/partial.json" advice room_bytes)/$(json "$D/partial.json" advice all_layers_need_bytes)" \
    "30/3650722202/5637144576" "report: the estimate: 30 layers, 3481.6 MiB of room, 5.25 GiB for all 33"
is "$(grep -c '^  All 33 layers on the GPU would need 5.25 GiB more: 1.85 GiB more VRAM than' "$D/partial.txt")" 1 \
    "report: all 33 would need 5.25 GiB more"

# ---- replay on the recorded card: the report's answer ----
replay partial r24 --capacity 24GiB
is "$(cat "$D/r24.rc")" 0 "replay 24GiB: fits (exit 0)"
is "$(layers r24)" "$(json "$D/partial.json" advice gpu_layers) 33" "replay 24GiB: the report's estimate, 30 of 33"
is "$(line r24 'would have')" \
    "    GPU 0 would have 7.00 GiB free at the lowest (as recorded); the 15% margin is 3.60 GiB: 3.40 GiB of room." \
    "replay 24GiB: the recorded free, margin and room"
is "$(line r24 'A layer is about')" \
    "    A layer is about 512.0 MiB of weights + 128.0 MiB of KV cache: 24 on the GPU now + 1 (the output layer, 256.0 MiB, first) + floor(3.15 GiB left / 640.0 MiB), at most the 8 in host memory = 30." \
    "replay 24GiB: the arithmetic, output layer first"
# Bytes: 16 GiB the run needs + 512 MiB reserve + 5.25 GiB = 21.75 GiB.
# The estimate: room(C) = 7 GiB + (C - 24 GiB) - floor(0.15 C) >= 5376 MiB
# <=> C - floor(0.15 C) >= 22784 MiB = 23890755584 <=> C >= 28106771275
# (0.15 x 28106771275 = 4216015691.25), 26.18 GiB.
is "$(line r24 'All 33 layers')" \
    "  All 33 layers on the GPU would need 5.25 GiB more (as the report says): a card of at least 21.75 GiB counting bytes (the 16.00 GiB the run needs + the 512.0 MiB reserve + 5.25 GiB), no less; the estimate, which keeps the 15% margin, puts them all on a card of at least 26.18 GiB." \
    "replay 24GiB: all 33 layers: the report's 5.25 GiB, 21.75 GiB by bytes, 26.18 GiB by the estimate"

# ---- a smaller card ----
# free = 7 GiB - 8 GiB = -1 GiB; margin = 0.15 x 16 GiB = 2576980377;
# room = -1 GiB - margin = -3481.6 MiB; ceil(3481.6 / 640) = 6 fewer: 18.
replay partial r16 --capacity 16GiB
is "$(cat "$D/r16.rc")" 1 "replay 16GiB: does not fit (exit 1)"
is "$(layers r16)" "18 33" "replay 16GiB: 18 of 33 layers"
is "$(line r16 'would have')" \
    "    GPU 0 would have -1.00 GiB free at the lowest (7.00 GiB on the recorded 24.00 GiB card, 8.00 GiB less room here); the 15% margin is 2.40 GiB: 3.40 GiB short." \
    "replay 16GiB: free moved by the room the card loses, below 0"
is "$(line r16 'A layer is about')" \
    "    A layer is about 512.0 MiB of weights + 128.0 MiB of KV cache: 24 on the GPU now - ceil(3.40 GiB short / 640.0 MiB) = 18." \
    "replay 16GiB: the arithmetic, layers taken off"
is "$(line r16 'would fail')" "  DOES NOT FIT. First request that would fail: cudaMalloc of 1.00 GiB for scratch at 3.0 ms," \
    "replay 16GiB: the compute buffer fails first, tagged by ggml's mark"
# Where the two overlap: the run's card (16.50 GiB) + the report's 5.25 GiB
# is replay's card for every layer.
is "$(least r16) $(bound r16)" "16.50 21.75" "replay 16GiB: at least 16.50 GiB for this run, 21.75 GiB for every layer"
is "$(python3 -c 'import sys; print("%.2f" % (float(sys.argv[1]) + int(sys.argv[2]) / 2**30))' "$(least r16)" \
        "$(json "$D/partial.json" advice all_layers_need_bytes)")" "$(bound r16)" \
    "replay 16GiB: its card for this run + the report's all_layers_need_bytes = its card for every layer"
is "$(estimate_all r16) $(estimate_all r24)" "26.18 26.18" "the estimate's card for every layer does not depend on the card tried"

# ---- larger cards ----
# 25 GiB: free 8 GiB, margin 3.75 GiB, room 4.25 GiB; - 256 MiB = 4096 MiB,
# floor(4096 / 640) = 6: 24 + 1 + 6 = 31.
replay partial r25 --capacity 25GiB
is "$(layers r25)" "31 33" "replay 25GiB: 31 of 33 layers"
# 32 GiB: free 15 GiB, margin 4.80 GiB, room 10444.8 MiB; - 256 MiB:
# floor(10188.8 / 640) = 15, at most the 8 host blocks: 33.
replay partial r32 --capacity 32GiB
is "$(layers r32)" "33 33" "replay 32GiB: all 33 layers (no more than the blocks in host memory)"
replay partial rall --capacity 28106771275B
replay partial rless --capacity 28106771274B
is "$(layers rall) / $(layers rless)" "33 33 / 32 33" \
    "the estimate's card for every layer, 28106771275 B, holds 33; one byte less holds 32"

# ---- the reserve and the margin ----
# --reserve 1GiB: 512 MiB less room than recorded: free 6.5 GiB, room
# 2969.6 MiB, - 256 MiB: floor(2713.6 / 640) = 4: 29.
replay partial rres --capacity 24GiB --reserve 1GiB
is "$(layers rres)" "29 33" "replay 24GiB --reserve 1GiB: 29 of 33 layers"
# --margin 10: margin 2457.6 MiB, room 4710.4 MiB, - 256: floor(4454.4 / 640) = 6: 31.
"$VT" report --json --margin 10 "$D/partial.vtrace" >"$D/m10.json" 2>/dev/null
replay partial rm10 --capacity 24GiB --margin 10
is "$(layers rm10) $(json "$D/m10.json" advice gpu_layers)" "31 33 31" "replay --margin 10: 31, as report --margin 10 says"

# ---- a failed request the run did without ----
# room = 7 GiB - 3.60 GiB - 2 GiB = 1433.6 MiB; - 256 MiB: floor(1177.6 /
# 640) = 1: 26. On 16 GiB: -1 GiB - 2.40 GiB - 2 GiB = -5529.6 MiB,
# ceil(8.64) = 9 fewer: 15.
"$VT" report --json "$D/unmet.vtrace" >"$D/unmet.json" 2>/dev/null
replay unmet u24 --capacity 24GiB
replay unmet u16 --capacity 16GiB
is "$(json "$D/unmet.json" advice gpu_layers) $(json "$D/unmet.json" advice unmet_request_bytes)" "26 $((2 * GiB))" \
    "report: 26 layers with the 2 GiB request counted"
is "$(cat "$D/u24.rc") $(layers u24)" "3 26 33" "replay 24GiB: cannot tell (exit 3), and still the report's 26"
is "$(grep -c ', and the failed request wanted 2.00 GiB: 1.40 GiB of room\.$' "$D/u24")" 1 "replay 24GiB: the failed request in the room"
is "$(layers u16)" "15 33" "replay 16GiB: 15 of 33 layers"
# The failed request counts in what the run needs: 15 + 2 GiB held then.
is "$(least u16) $(bound u16)" "17.50 22.75" "replay 16GiB: 17.50 GiB for the run, 22.75 GiB for every layer"

# ---- a full offload, and a run without ggml records ----
# free 1.75 GiB - 3.60 GiB margin: 1894.4 MiB short, ceil(2.96) = 3 fewer: 30.
"$VT" report --json "$D/full.vtrace" >"$D/full.json" 2>/dev/null
replay full f24 --capacity 24GiB
is "$(layers f24) $(json "$D/full.json" advice gpu_layers)" "30 33 30" "full offload, 24GiB: the report's 30 of 33"
is "$(grep -c '^  All .* layers on the GPU' "$D/f24")" 0 "full offload: no line for all layers, they are there"
replay plain p24 --capacity 24GiB
is "$(cat "$D/p24.rc") $(grep -c -e Estimate -e 'All ' "$D/p24")" "0 0" "no ggml records: no estimate"

# ---- 80 columns ----
"$VT" replay --capacity 16GiB "$D/partial.vtrace" >"$D/narrow" 2>&1
is "$(awk 'length > 80' "$D/narrow" | wc -l | tr -d ' ')" 0 "replay without --wide: every line fits 80 columns"
done_testing
