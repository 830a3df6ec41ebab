#!/bin/sh
# ggml's records (GGML_BUFFER, GGML_TENSOR, GGML_FREE, GGML_LOST) as an
# attacker or a broken shim writes them: where the model runs is computed
# from the records that make sense and the rest is left out, with exact
# values; a record cut short is an error naming the file and offset (exit
# 2). Traces written by build/vtgen; the placement read from report --json.
. tests/t/lib.sh
GEN=$B/vtgen
for f in "$VT" "$GEN"; do
    [ -x "$f" ] || { echo "1..0 # SKIP $f not built (make test-bins)"; exit 0; }
done
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 not found"; exit 0; }
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT
MiB=1048576

header() { # PID [DEVICE LINE]
    echo "process pid=$1 ppid=1 exe=/usr/bin/llama-cli argv=llama-cli,-m,m.gguf,-ngl,2 host=box start=1000000000"
    echo "${2:-device 0 total=8GiB free=7.5GiB name=Sim uuid=0123456789abcdef0123456789abcdef t=0}"
}
# The model every trace shares: blk.0 mapped from the file, blk.1 and the
# output layer on CUDA0 (2 of 3 layers on the GPU).
model() {
    echo 'event t=1000000 api=cudaMalloc dev=0 ptr=0x10000000000 size=1GiB flags=runtime'
    echo 'ggml_buffer t=1100000 buffer=0x1 usage=WEIGHTS base=0x10000000000 size=1GiB name=CUDA0 host=1'
    echo 'ggml_buffer t=1200000 buffer=0x2 usage=WEIGHTS base=0x7f0000000000 size=512MiB name=CPU_Mapped host=2'
    echo 'ggml_tensor t=1300000 buffer=0x2 data=0x7f0000000000 nbytes=512MiB name=blk.0.attn_q.weight'
    echo 'ggml_tensor t=1300000 buffer=0x1 data=0x10000000000 nbytes=512MiB name=blk.1.attn_q.weight'
    echo 'ggml_tensor t=1300000 buffer=0x1 data=0x10020000000 nbytes=256MiB name=output.weight'
}
gen() { "$GEN" "$D/$1.vt" -o "$D/$1.vtrace" || nok "vtgen $1"; }
# json NAME EXPR: EXPR over the first process's placement (p) of report --json.
json() {
    python3 -c 'import json,sys
p=json.load(open(sys.argv[1]))["processes"][0]["placement"]
print(eval(sys.argv[2]))' "$D/$1.json" "$2"
}
report() { # NAME: report --json into NAME.json; the exit status is checked
    "$VT" report --json "$D/$1.vtrace" >"$D/$1.json" 2>"$D/$1.err"
    is "$?" 0 "$1: report --json exits 0"
    is "$(cat "$D/$1.err")" "" "$1: report says nothing on stderr"
}

# ---- junk names and values around a sane model ----------------------------
{
    header 401
    model
    # Block numbers: over the bound (4095), far over it, negative, none.
    echo 'ggml_tensor t=1300000 buffer=0x1 data=0x10030000000 nbytes=1MiB name=blk.4096.attn_q.weight'
    echo 'ggml_tensor t=1300000 buffer=0x1 data=0x10030100000 nbytes=1MiB name=blk.99999999999999999999999.ffn_up.weight'
    echo 'ggml_tensor t=1300000 buffer=0x1 data=0x10030200000 nbytes=1MiB name=blk.-1.attn_q.weight'
    echo 'ggml_tensor t=1300000 buffer=0x1 data=0x10030300000 nbytes=1MiB name=blk.'
    # NUL bytes inside a name; a name that is only the view suffix.
    echo 'ggml_tensor t=1300000 buffer=0x1 data=0x10030400000 nbytes=1MiB name="blk.7\x00.attn_q.weight"'
    echo 'ggml_tensor t=1300000 buffer=0x1 data=0x10030500000 nbytes=1MiB name="blk.\x003.attn_q.weight"'
    echo 'ggml_tensor t=1300000 buffer=0x1 data=0x10030600000 nbytes=1MiB name=" (view)"'
    # A tensor of a buffer ggml never described.
    echo 'ggml_tensor t=1300000 buffer=0x99 data=0x10040000000 nbytes=4GiB name=blk.5.attn_q.weight'
    # A usage and host values ggml has no word for: the buffer type's name decides.
    echo 'ggml_buffer t=1400000 buffer=0x3 usage=77 base=0x7f1000000000 size=32MiB name=CPU host=9'
    echo 'ggml_tensor t=1400000 buffer=0x3 data=0x7f1000000000 nbytes=32MiB name=cache_k_l0'
    echo 'ggml_buffer t=1400000 buffer=0x4 usage=0xffffffffffffffff base=0x10050000000 size=16MiB name=CUDA0 host=0xffffffffffffffff'
    echo 'ggml_tensor t=1400000 buffer=0x4 data=0x10050000000 nbytes=16MiB name=cache_k_l1'
    # A NUL where the K/V letter goes is no KV cache: the buffer is other.
    echo 'ggml_buffer t=1400000 buffer=0x5 usage=ANY base=0x10060000000 size=8MiB name=CUDA0 host=1'
    echo 'ggml_tensor t=1400000 buffer=0x5 data=0x10060000000 nbytes=8MiB name="cache_\x00_l1"'
    echo 'ggml_lost t=1500000 lost=3'
    echo 'ggml_lost t=1600000 lost=2'
    echo 'end t=10000000 events=1 dropped=0'
} >"$D/junk.vt"
gen junk
report junk
is "$(json junk 'p["layers"]["gpu"], p["layers"]["total"], p["layers"]["blocks"]')" "(2, 3, 2)" \
    "junk: 2 of 3 layers on the GPU, 2 blocks: no block over 4095, none from a name cut by a NUL"
is "$(json junk 'p["layer_weights"]["gpu_bytes"], p["layer_weights"]["host_bytes"]')" "($((768 * MiB)), $((512 * MiB)))" \
    "junk: layer weights 768 MiB on the GPU, 512 MiB in host memory, the junk tensors' bytes left out"
is "$(json junk 'p["tensors"], p["tensors_unattributed"]')" "(12, 1)" \
    "junk: the unknown buffer's tensor is unattributed (the view is not counted)"
is "$(json junk 'p["kv"]["gpu_bytes"], p["kv"]["by_place"]["pageable_host"]')" "($((16 * MiB)), $((32 * MiB)))" \
    "junk: KV cache from the names whatever the usage and host values say: 16 MiB on CUDA0, 32 MiB in CPU memory"
is "$(json junk 'p["other"]["gpu_bytes"]')" "$((8 * MiB))" "junk: a NUL in place of k/v names no KV cache"
is "$(json junk 'p["records_lost"]')" 3 "junk: records lost as the highest GGML_LOST says"

# ---- a buffer freed and its identity reused; base 0; time before start ----
{
    header 402
    model
    echo 'ggml_free t=2000000 buffer=0x1'
    echo 'ggml_free t=2000000 buffer=0x1'
    echo 'ggml_free t=2000000 buffer=0x12345'
    # The identity again: a 64 MiB CPU KV buffer, after the weights went.
    echo 'ggml_buffer t=3000000 buffer=0x1 usage=ANY base=0x7f2000000000 size=64MiB name=CPU host=2'
    echo 'ggml_tensor t=3000000 buffer=0x1 data=0x7f2000000000 nbytes=64MiB name=cache_k_l0'
    # A multi-buffer (base 0) of KV cache on CUDA0, stamped before the
    # process started: live from the start.
    echo 'ggml_buffer t=-5000 buffer=0x6 usage=ANY base=0 size=128MiB name=CUDA0 host=1'
    echo 'ggml_tensor t=-5000 buffer=0x6 data=0x10070000000 nbytes=64MiB name=cache_k_l1'
    echo 'ggml_tensor t=-5000 buffer=0x6 data=0x20070000000 nbytes=64MiB name=cache_v_l1'
    echo 'end t=10000000 events=1 dropped=0'
} >"$D/reuse.vt"
gen reuse
report reuse
is "$(json reuse 'p["weights"]["gpu_bytes"], p["weights"]["host_bytes"]')" "($((1024 * MiB)), $((512 * MiB)))" \
    "reuse: the fullest moment is the first load's, the reused identity's KV buffer is not in it"
is "$(json reuse 'p["kv"]["gpu_bytes"], p["kv"]["host_bytes"]')" "($((128 * MiB)), 0)" \
    "reuse: the multi-buffer (base 0) from before the start counts, on the GPU"
is "$(json reuse 'p["layers"]["gpu"], p["layers"]["total"], p["layers"]["kv_blocks"]')" "(2, 3, 1)" \
    "reuse: 2 of 3 layers on the GPU, KV cache for 1 block"
is "$(json reuse 'p["tensors"], p["tensors_unattributed"]')" "(6, 0)" "reuse: every tensor attributed, to the entry live at its time"

# ---- more buffers than kept --------------------------------------------------
{
    header 403
    model
    # (decimal: awk may not read 0x constants)
    awk 'BEGIN { for (i = 0; i < 70000; i++)
        printf "ggml_buffer t=500000 buffer=%d usage=ANY base=%.0f size=4096 name=CPU host=2\n", 1048576 + i, 139672699289600 + 4096 * i }'
    echo "ggml_tensor t=2100000 buffer=$((1048576 + 69999)) data=0x7f3000000000 nbytes=4096 name=cache_k_l0"
    echo 'end t=10000000 events=1 dropped=0'
} >"$D/many.vt"
gen many
report many
is "$(json many 'p["records_lost"], p["tensors_unattributed"]')" "($((70000 + 2 - 65536)), 1)" \
    "many: the buffers over 65536 are counted as lost, a tensor of one of them is unattributed"
is "$(json many 'p["layers"]["gpu"], p["layers"]["total"], p["other"]["by_place"]["pageable_host"]')" \
    "(2, 3, $((4096 * (65536 - 2))))" "many: the model as before, the buffers kept (live then) counted as other"

# ---- numbers no card has: no estimate from them --------------------------------
{
    # Free at the lowest is the device record's (no allocation): 2^63.
    header 404 'device 0 total=0xffffffffffffffff free=0x8000000000000000 name=Sim uuid=0123456789abcdef0123456789abcdef t=0'
    model | grep -v '^event'
    echo 'end t=10000000 events=1 dropped=0'
} >"$D/huge.vt"
{
    header 405
    echo 'ggml_buffer t=1100000 buffer=0x1 usage=WEIGHTS base=0x10000000000 size=0xffffffffffffffff name=CUDA0 host=1'
    echo 'ggml_buffer t=1200000 buffer=0x2 usage=WEIGHTS base=0x7f0000000000 size=1GiB name=CPU_Mapped host=2'
    echo 'ggml_tensor t=1300000 buffer=0x2 data=0x7f0010000000 nbytes=0xffffffffffffff00 name=blk.0.attn_q.weight'
    echo 'ggml_tensor t=1300000 buffer=0x1 data=0x10000000000 nbytes=0x7fffffffffffffff name=blk.1.attn_q.weight'
    echo 'ggml_tensor t=1300000 buffer=0x2 data=0x10020000000 nbytes=0xffffffffffffffff name=output.weight'
    echo 'end t=10000000 events=0 dropped=0'
} >"$D/hugelayers.vt"
for s in huge hugelayers; do
    gen $s
    report $s
    is "$(json $s 'p["advice"]')" None "$s: no offload estimate from sizes no card has"
done
is "$(json huge 'p["layers"]["gpu"], p["layers"]["total"]')" "(2, 3)" "huge: the layers are still counted"

# ---- records cut short: exit 2, the file and the chunk's offset ------------------
# The chunk follows the 16-byte prelude and the header (its length at byte
# 12); the DEVICE record takes its first 38 bytes.
for rec in 'ggml_buffer t=1 buffer=0x1 usage=WEIGHTS base=0x1000 size=1MiB name=CUDA0 cut=6' \
           'ggml_tensor t=1 buffer=0x1 data=0x1000 nbytes=1MiB name=blk.0.attn_q.weight cut=3' \
           'ggml_free t=1 buffer=0x1 cut=1' \
           'ggml_lost t=1 lost=300 cut=1' \
           'ggml_buffer t=1 buffer=0x1 usage=WEIGHTS base=0x1000 size=1MiB name=CUDA0 extra=ff'; do
    set -- $rec
    { header 406; echo "$rec"; } >"$D/cut.vt"
    gen cut
    off=$(od -A n -t u4 -j 12 -N 4 "$D/cut.vtrace" | tr -d ' ')
    case $1 in
    ggml_buffer) want=$(case $rec in *cut=*) echo 'GGML_BUFFER record at byte 38: field name: payload ends inside the field';;
                                   *) echo 'GGML_BUFFER record at byte 38: field host: payload ends inside the field';; esac);;
    ggml_tensor) want='GGML_TENSOR record at byte 38: field name: string runs past the end of the record';;
    ggml_free) want='GGML_FREE record at byte 38: field buffer: payload ends inside the field';;
    ggml_lost) want='GGML_LOST record at byte 38: field lost_total: payload ends inside the field';;
    esac
    for cmd in dump report; do
        "$VT" $cmd "$D/cut.vtrace" >/dev/null 2>"$D/cut.err"
        rc=$?
        is "$rc" 2 "$1 ${rec##* }: $cmd exits 2"
        is "$(cat "$D/cut.err")" "vramtrace: $D/cut.vtrace: offset $((16 + off)): corrupt trace: chunk 0: $want" \
            "$1 ${rec##* }: $cmd names the file, the chunk's offset and the field"
    done
done
done_testing
