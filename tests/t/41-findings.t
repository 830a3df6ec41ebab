#!/bin/sh
# The findings beside the verdict (analyzer/pipeline/findings.c), decided
# once and printed by each view: what the "more VRAM" bound rests on, with
# the tags the run held only after the failure, and how free memory crossed
# the margin (this process's request, or a driver report with or without
# bytes its own allocations do not explain). Text and JSON must say the
# same (docs/report.md, "More VRAM needed" and "Below the margin").
. tests/t/lib.sh
GEN=$B/vtgen
if [ ! -x "$GEN" ] || [ ! -x "$VT" ]; then
    echo "1..0 # SKIP $GEN or $VT not built (make test-bins)"
    exit 0
fi
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 needed to read the JSON report"; exit 0; }
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT
MiB=1048576
j() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
H='d["processes"][0]["devices"][0]["headroom"]'
head() { # PID: a process on one 24 GiB card, 23.5 GiB free at first sight
    echo "process pid=$1 ppid=1 exe=/opt/llama.cpp/bin/llama-cli host=box start=1000000000"
    echo 'device 0 total=24GiB free=23.5GiB name="NVIDIA Sim" t=0'
}
run() { "$GEN" "$D/$1.vt" -o "$D/$1.vtrace" && "$VT" report --wide "$D/$1.vtrace" >"$D/$1.out" 2>&1 &&
        "$VT" report --json "$D/$1.vtrace" >"$D/$1.json" 2>&1; }

# A 4 GiB KV request fails with 3.5 GiB free; the program backs off to a
# 1 GiB cache, then reserves 1.5 GiB of scratch it held none of before.
{
    head 11
    echo 'module 1 base=0x400000 size=1MiB path=/opt/llama.cpp/bin/llama-cli build_id='
    echo 'frame 0x401000 module=1 offset=0x1000 function=llama_model_load'
    echo 'frame 0x402000 module=1 offset=0x2000 function=llama_kv_cache_init'
    echo 'frame 0x403000 module=1 offset=0x3000 function=ggml_gallocr_reserve_n'
    echo 'stack 1 parent=0 ip=0x401000'
    echo 'stack 2 parent=0 ip=0x402000'
    echo 'stack 3 parent=0 ip=0x403000'
    echo 'event t=1000 api=cudaMalloc dev=0 ptr=0x10000000 size=20GiB stack=1 flags=runtime'
    echo 'event t=2000 api=cudaMalloc dev=0 size=4GiB stack=2 result=2 flags=runtime'
    echo 'event t=3000 api=cudaMalloc dev=0 ptr=0x600000000 size=1GiB stack=2 flags=runtime'
    echo 'event t=4000 api=cudaMalloc dev=0 ptr=0x700000000 size=1.5GiB stack=3 flags=runtime'
    echo 'end t=5000'
} >"$D/later.vt"
run later
check "more VRAM: the failed request's shortfall" \
    grep -q 'at least 512.0 MiB (the 4.00 GiB request for kv that failed, minus about 3.50 GiB free then)' "$D/later.out"
check "more VRAM: the scratch held only after the failure, as an estimate" \
    grep -q 'the run then also held 1.50 GiB of scratch, none of it held when the request failed: about 2.00 GiB if' "$D/later.out"
is "$(j "$D/later.json" 'd["processes"][0]["spill"]["more_vram_bytes"]')" $((512 * MiB)) "JSON: the same bound"

# Free memory below the margin at a driver report: 10 GiB allocated, then a
# report of 3.5 GiB free (10 GiB less than this process explains).
{
    head 12
    echo 'event t=1000 api=cudaMalloc dev=0 ptr=0x10000000 size=10GiB flags=runtime'
    echo 'event t=2000 api=cuMemGetInfo_v2 dev=0 size=3.5GiB aux=24GiB flags=sample'
    echo 'end t=5000'
} >"$D/outside.vt"
run outside
check "crossed by a report, outside bytes named" \
    grep -q 'when the driver reported 3.50 GiB free: 10.00 GiB less than this process' "$D/outside.out"
is "$(j "$D/outside.json" "$H['first_below_margin']['crossed_by'], $H['first_below_margin']['outside_bytes'] // $MiB")" \
    "('report', 10240)" "JSON: crossed by a report, the same outside bytes"

# A report below the margin before any allocation: nothing to compare it
# with, so no outside bytes are claimed.
{
    head 13
    echo 'event t=500 api=cuMemGetInfo_v2 dev=0 size=2GiB aux=24GiB flags=sample'
    echo 'event t=1000 api=cudaMalloc dev=0 ptr=0x10000000 size=1GiB flags=runtime'
    echo 'end t=5000'
} >"$D/report.vt"
run report
check "crossed by a report, no outside bytes" \
    grep -q 'Below the 15% margin since 0.5 us, when the driver reported 2.00 GiB free\.$' "$D/report.out"
is "$(j "$D/report.json" "$H['first_below_margin']['crossed_by'], $H['first_below_margin']['outside_bytes'], $H['above_margin']")" \
    "('report', 0, False)" "JSON: crossed by a report, no outside bytes"

# Crossed by this process's own request: the margin is 3.6 GiB, and a
# 20 GiB allocation leaves 3.5 GiB.
{
    head 14
    echo 'event t=1000 api=cudaMalloc dev=0 ptr=0x10000000 size=20GiB flags=runtime'
    echo 'end t=5000'
} >"$D/alloc.vt"
run alloc
check "crossed by an allocation" grep -q 'Below the 15% margin since cudaMalloc of 20.00 GiB' "$D/alloc.out"
is "$(j "$D/alloc.json" "$H['first_below_margin']['crossed_by'], $H['margin_bytes'] == int(0.15 * 24 * 1024 * $MiB)")" \
    "('allocation', True)" "JSON: crossed by an allocation, the same margin"
done_testing
