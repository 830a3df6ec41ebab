#!/bin/sh
# `vramtrace report` end to end on traces shaped like llama.cpp (real frame
# names, libllama/libggml as shared libraries: tests/golden/llama_stacks.vt),
# written by build/vtgen with exact numbers, asserted exactly through --json.
. tests/t/lib.sh
GEN=$B/vtgen
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT
STACKS=tests/golden/llama_stacks.vt
MiB=1048576
GiB=1073741824

# jq may be missing: python3 evaluates an expression over the document `d`.
# In EXPR, stack(P, I) is the frames of P's stack I, innermost first (schema
# /3: a stack is an entry of the process's prefix table "stacks").
j() { python3 -c 'import json,sys; stack=lambda p,i: [] if i is None else [p["frames"][p["stacks"]["frame"][i]]]+stack(p,p["stacks"]["prefix"][i]); d=json.load(open(sys.argv[1])); v=eval(sys.argv[2]); print(json.dumps(v) if isinstance(v,(dict,list,bool)) or v is None else v)' "$@"; }

header() { # PID EXE TOTAL FREE UUID
    echo "process pid=$1 ppid=1 exe=$2 argv=$(basename "$2"),-m,model.gguf host=box start=1000000000"
    echo "device 0 total=$3 free=$4 name=\"NVIDIA Sim\" uuid=$5 t=0"
    cat "$STACKS"
}
# layers N FROM STACK API PTRBASE TIME0: N allocations of 450 MiB, 512 MiB apart
layers() {
    i=0
    while [ $i -lt "$1" ]; do
        printf 'event t=%d api=%s dev=0 ptr=0x%x size=450MiB stack=%s flags=runtime\n' \
            $(($6 + i * 1000)) "$4" $(($5 + i * 0x20000000)) "$3"
        i=$((i + 1))
    done
}
gen() { "$GEN" "$D/$1.vt" -o "$D/$1.vtrace" || nok "vtgen $1"; }
report() { name=$1; shift; "$VT" report --wide "$@" "$D/$name.vtrace" >"$D/$name.out" 2>"$D/$name.err"; }
json() { name=$1; shift; "$VT" report --json "$@" "$D/$name.vtrace" >"$D/$name.json" 2>"$D/$name.jerr"; }
valid_json() { python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$1"; }

# -- 1. a 70B-shaped model that does not fit: oom, then CUDA_Host fallback ---
# 24 GiB card, 23.5 GiB free at first sight (512 MiB context reserve). 52 of
# 80 layers of 450 MiB fit; the 53rd fails; the driver then reports 152 MiB
# free (so 512 MiB is untracked); 28 layers go to pinned host memory.
{
    header 4242 /opt/llama.cpp/bin/llama-server 24GiB 23.5GiB 0123456789abcdef0123456789abcdef
    layers 52 0 8 cudaMalloc 0x7000000000 1000000
    echo 'event t=2000000 api=cudaMalloc dev=0 size=450MiB result=2 stack=8 flags=runtime'
    echo 'event t=2000100 api=cuMemGetInfo_v2 dev=0 size=152MiB aux=24GiB flags=sample|after_failure'
    layers 28 0 10 cudaMallocHost 0x600000000000 3000000 | sed 's/dev=0/dev=-1/'
    echo 'end t=9000000 events=82 dropped=0'
} >"$D/oom.vt"
gen oom
json oom; is "$?" 0 "oom: report exits 0"
check "oom: JSON is valid" valid_json "$D/oom.json"
P='d["processes"][0]'
is "$(j "$D/oom.json" 'd["schema"]')" "vramtrace-report/3" "schema version"
is "$(j "$D/oom.json" "$P['spill']['kind']")" oom "oom: tipping kind"
is "$(j "$D/oom.json" "$P['spill']['event']['time_ns']")" 2000000 "oom: tipping time"
is "$(j "$D/oom.json" "$P['spill']['event']['api']")" cudaMalloc "oom: tipping api"
is "$(j "$D/oom.json" "$P['spill']['event']['bytes']")" $((450 * MiB)) "oom: tipping size"
is "$(j "$D/oom.json" "$P['spill']['event']['tag']")" weights "oom: tipping tag"
is "$(j "$D/oom.json" "$P['spill']['event']['result']")" 2 "oom: tipping result"
is "$(j "$D/oom.json" "stack($P, $P['spill']['event']['stack'])[5]['function']")" "llama_model::load_tensors(llama_model_loader&)" "oom: tipping stack is symbolized and demangled"
is "$(j "$D/oom.json" "$P['spill']['device_state']['tracked_bytes']")" $((52 * 450 * MiB)) "oom: tracked at the tip"
is "$(j "$D/oom.json" "$P['spill']['device_state']['by_tag']['weights']")" $((52 * 450 * MiB)) "oom: weights at the tip"
is "$(j "$D/oom.json" "$P['spill']['device_state']['last_free_bytes']")" $((152 * MiB)) "oom: free at the tip (after-failure sample)"
is "$(j "$D/oom.json" "$P['spill']['kinds']['host_fallback']['count']")" 28 "host_fallback: 28 layers"
is "$(j "$D/oom.json" "$P['spill']['kinds']['host_fallback']['bytes']")" $((28 * 450 * MiB)) "host_fallback: bytes"
is "$(j "$D/oom.json" "$P['spill']['later_count']")" 28 "later spill events summarized"
is "$(j "$D/oom.json" "$P['spill']['more_vram_bytes']")" $((28 * 450 * MiB)) "more VRAM needed = what fell back"
is "$(j "$D/oom.json" "$P['host_pinned']['by_tag']['weights']")" $((28 * 450 * MiB)) "pinned host weights"
is "$(j "$D/oom.json" "$P['offloaded_weights_bytes']")" $((28 * 450 * MiB)) "offloaded weights"
DV="$P['devices'][0]"
is "$(j "$D/oom.json" "$DV['uuid']")" GPU-01234567-89ab-cdef-0123-456789abcdef "uuid in nvidia-smi form"
is "$(j "$D/oom.json" "$DV['peak']['tracked_bytes']")" $((52 * 450 * MiB)) "device peak"
is "$(j "$D/oom.json" "$DV['peak']['by_tag']")" '{"weights": 24536678400, "kv": 0, "scratch": 0, "unknown": 0}' "by_tag holds the four tags"
is "$(j "$D/oom.json" "$DV['headroom']['context_bytes']")" $((512 * MiB)) "context reserve"
is "$(j "$D/oom.json" "$DV['headroom']['untracked_bytes']")" $((512 * MiB)) "untracked bytes"
is "$(j "$D/oom.json" "$DV['headroom']['min_free_bytes']")" $((152 * MiB)) "min free"
is "$(j "$D/oom.json" "$DV['headroom']['min_free_time_ns']")" 2000100 "min free time"
is "$(j "$D/oom.json" "$DV['headroom']['free_at_peak_bytes']")" $((664 * MiB)) "free at peak (estimate)"
is "$(j "$D/oom.json" "$DV['headroom']['above_margin']")" false "15% margin broken"
# 23.5 GiB - n*450 MiB < 3.6 GiB first at n = 46 (t = 1000000 + 45*1000)
is "$(j "$D/oom.json" "$DV['headroom']['first_below_margin']['time_ns']")" 1045000 "first allocation below the margin"
is "$(j "$D/oom.json" "$DV['headroom']['first_below_margin']['free_after_bytes']")" $((24064 * MiB - 46 * 450 * MiB)) "free after it"
is "$(j "$D/oom.json" "$DV['fragmentation']['failed_with_free']['count']")" 0 "no smoking gun: the driver had 152 MiB"
is "$(j "$D/oom.json" "$DV['fragmentation']['external']['hole_bytes']")" $((51 * 62 * MiB)) "external fragmentation: holes between layers"
is "$(j "$D/oom.json" "$DV['fragmentation']['external']['largest_hole_bytes']")" $((62 * MiB)) "largest hole"
is "$(j "$D/oom.json" "$P['events']")" '{"allocs": 80, "frees": 0, "failed": 1, "dropped": 0, "dropped_exact": true, "dropped_by_reason": null, "total": 82, "unmatched_frees": 0, "implicit_frees": 0, "unknown_api": 0, "stacks_lost": 0, "teardown_frees": 0, "impossible_requests": 0, "failed_not_oom": 0, "first_failed_not_oom": null, "graph_captures": 0, "captured_allocs": 0, "captured_bytes": 0, "captured_frees": 0, "captured_frees_outside": 0, "graph_frees": 0, "graph_launch_failures": 0, "graph_launch_oom": 0, "graph_launches_after_failure": 0, "graph_launch_recovered": 0, "imported_handles": 0, "multicast_objects": 0, "empty_handle_releases": 0, "imported_pointers": 0, "imported_pointer_frees": 0}' "event counts"
is "$(j "$D/oom.json" "$P['apis']['cudaMalloc']")" '{"calls": 53, "failed": 1, "bytes": 24536678400}' "per-api stats"
is "$(j "$D/oom.json" "$P['sites'][0]['rule']")" "builtin:llama.cpp weights llama_model::load_tensors @ frame 5" "site rule names the frame"
is "$(j "$D/oom.json" "$P['sites'][0]['peak_bytes']")" $((52 * 450 * MiB)) "top site bytes at peak"
is "$(j "$D/oom.json" "$P['sites'][0]['calls']")" 53 "top site calls"
report oom; is "$?" 0 "oom: text report"
is "$(head -n 2 "$D/oom.out" | tail -n 1)" "VERDICT: SPILL. The model did not fit in VRAM of GPU 0 (NVIDIA Sim)." "verdict first, plain words"
check "text: the pinned weights came after a failed device request" grep -q "^  12.30 GiB of weights sit in pinned host memory (22.85 GiB on the GPU at its peak), after a device request for weights failed: what runs from them runs at host speed\.$" "$D/oom.out"
check "text: the failure by its CUDA name" grep -q "^  Tipped by: cudaMalloc of 450.0 MiB for weights failed (cudaErrorMemoryAllocation) at " "$D/oom.out"
report oom --fail-on-spill; is "$?" 1 "--fail-on-spill exits 1 on a spill"

# -- 2. a model that fits: every tag, rounding, untracked, the margin holds -
# 80 GiB card, 79.5 GiB free. 80 layers (35.16 GiB weights), 4 GiB KV,
# 1000 MiB compute buffer reserved as 1024 MiB, a 64 MiB ggml pool block,
# a 32 MiB cuBLASLt workspace (stripped frame), 16 MiB from an untagged app.
{
    header 777 /usr/bin/ollama 80GiB 79.5GiB 00112233445566778899aabbccddeeff
    layers 80 0 8 cudaMalloc 0x7000000000 1000000
    echo 'event t=2000000 api=cudaMalloc dev=0 ptr=0x9000000000 size=4GiB stack=17 flags=runtime'
    echo 'event t=2100000 api=cudaMalloc dev=0 ptr=0x9100000000 size=1000MiB reserved=1024MiB stack=23 flags=runtime'
    echo 'event t=2200000 api=cudaMalloc dev=0 ptr=0x9200000000 size=64MiB stack=25 flags=runtime'
    echo 'event t=2300000 api=cudaMalloc dev=0 ptr=0x9300000000 size=32MiB stack=27 flags=runtime'
    echo 'event t=2400000 api=cudaMalloc dev=0 ptr=0x9400000000 size=16MiB stack=29 flags=runtime'
    echo 'event t=2500000 api=cuMemGetInfo_v2 dev=0 size=37GiB aux=80GiB flags=sample|at_peak'
    echo 'event t=3000000 api=cudaFree dev=0 ptr=0x9400000000 flags=runtime'
    echo 'end t=4000000 events=87 dropped=0'
} >"$D/fit.vt"
gen fit
json fit; is "$?" 0 "fit: report exits 0"
check "fit: JSON is valid" valid_json "$D/fit.json"
is "$(j "$D/fit.json" "$P['spill']")" null "fit: spill is null"
is "$(j "$D/fit.json" "$DV['peak']['by_tag']['weights']")" $((80 * 450 * MiB)) "fit: weights"
is "$(j "$D/fit.json" "$DV['peak']['by_tag']['kv']")" $((4 * GiB)) "fit: kv"
is "$(j "$D/fit.json" "$DV['peak']['by_tag']['scratch']")" $(((1000 + 64 + 32) * MiB)) "fit: scratch (gallocr + pool + cuBLASLt)"
is "$(j "$D/fit.json" "$DV['peak']['by_tag']['unknown']")" $((16 * MiB)) "fit: unknown"
is "$(j "$D/fit.json" "$DV['peak']['time_ns']")" 2400000 "fit: peak time"
is "$(j "$D/fit.json" "$DV['fragmentation']['rounding_waste_bytes']")" $((24 * MiB)) "fit: rounding waste"
# used by the driver at the sample: 80 - 37 = 43 GiB; reserve 0.5; tracked 40.29 GiB
is "$(j "$D/fit.json" "$DV['headroom']['untracked_bytes']")" $((43 * GiB - 512 * MiB - (36000 + 4096 + 1000 + 64 + 32 + 16) * MiB)) "fit: untracked"
is "$(j "$D/fit.json" "$DV['headroom']['free_at_peak_bytes']")" $((37 * GiB)) "fit: free at peak from the at_peak sample"
is "$(j "$D/fit.json" "$DV['headroom']['min_free_bytes']")" $((37 * GiB)) "fit: min free"
is "$(j "$D/fit.json" "$DV['headroom']['above_margin']")" true "fit: stayed above 15%"
is "$(j "$D/fit.json" "$DV['headroom']['first_below_margin']")" null "fit: nothing below the margin"
is "$(j "$D/fit.json" "[s['tag'] for s in $P['sites']]")" '["weights", "kv", "scratch", "scratch", "scratch", "unknown"]' "fit: sites ranked by bytes at peak"
is "$(j "$D/fit.json" "$P['sites'][3]['rule']")" "builtin:llama.cpp scratch ggml_cuda_pool_leg::alloc @ frame 1" "fit: pool rule"
is "$(j "$D/fit.json" "$P['sites'][4]['rule']")" "builtin:cuda-libs scratch module:libcublas* @ frame 1" "fit: cuBLAS by module"
is "$(j "$D/fit.json" "$P['sites'][5]['rule']")" "" "fit: untagged site has no rule"
is "$(j "$D/fit.json" "stack($P, $P['sites'][5]['stack'])[1]['function']")" myapp_alloc "fit: untagged site shows its stack"
report fit --fail-on-spill; is "$?" 0 "fit: --fail-on-spill exits 0 without a spill"
is "$(sed -n 2p "$D/fit.out")" "VERDICT: NO SPILL. Every device allocation succeeded within the card's free memory." "fit: verdict"
check "fit: headroom said in words" grep -q "Stayed above the 15% margin" "$D/fit.out"
json fit --margin 60; is "$(j "$D/fit.json" "$DV['headroom']['above_margin']")" false "--margin 60 breaks the margin"
is "$(j "$D/fit.json" "$DV['headroom']['margin_bytes']")" $((48 * GiB)) "--margin 60 bytes"

# -- 3. over_capacity and managed oversubscription ---------------------------
{
    header 900 /usr/bin/python3 8GiB 7GiB 0f0e0d0c0b0a09080706050403020100
    echo 'event t=1000 api=cudaMalloc dev=0 ptr=0x100000000 size=6GiB stack=8'
    echo 'event t=2000 api=cudaMalloc dev=0 ptr=0x300000000 size=2GiB stack=17'
    echo 'event t=3000 api=cudaMallocManaged dev=-1 ptr=0x900000000 size=3GiB stack=31'
    echo 'end t=4000 events=3 dropped=0'
} >"$D/cap.vt"
gen cap
json cap
check "cap: JSON is valid" valid_json "$D/cap.json"
is "$(j "$D/cap.json" "$P['spill']['kind']")" over_capacity "over_capacity: a 2 GiB request succeeded with 1 GiB free"
is "$(j "$D/cap.json" "$P['spill']['event']['tag']")" kv "over_capacity: tag"
is "$(j "$D/cap.json" "$P['spill']['device_state']['headroom_bytes']")" $((1 * GiB)) "over_capacity: headroom then"
is "$(j "$D/cap.json" "$P['spill']['kinds']['managed_oversubscription']['count']")" 1 "managed_oversubscription counted"
is "$(j "$D/cap.json" "$P['spill']['managed_excess_bytes']")" $((3 * GiB)) "managed excess over the card"
is "$(j "$D/cap.json" "$P['managed']['peak_bytes']")" $((3 * GiB)) "managed peak"
is "$(j "$D/cap.json" "$P['managed']['by_tag']['unknown']")" $((3 * GiB)) "managed by tag"
{
    header 901 /usr/bin/python3 8GiB 7GiB 0f0e0d0c0b0a09080706050403020100
    echo 'event t=1000 api=cudaMalloc dev=0 ptr=0x100000000 size=6GiB stack=8'
    echo 'event t=3000 api=cudaMallocManaged dev=-1 ptr=0x900000000 size=3GiB stack=31'
} >"$D/mgd.vt"
gen mgd
json mgd
is "$(j "$D/mgd.json" "$P['spill']['kind']")" managed_oversubscription "managed_oversubscription tips when it is first"
is "$(j "$D/mgd.json" "$P['spill']['event']['api']")" cudaMallocManaged "managed_oversubscription: the managed request"

# -- 4. fragmentation smoking guns and VMM -----------------------------------
# ggml's VMM pool reserves 32 GiB of address space and maps 1 GiB; a legacy
# pool request of 2 GiB fails with 10 GiB reported free; then the pool frees
# two cached blocks and the same request on the same thread succeeds.
{
    header 555 /opt/llama.cpp/bin/llama-cli 16GiB 15GiB 1111111111111111111111111111111
    echo 'event t=1000 api=cuMemAddressReserve dev=0 ptr=0x10000000000 size=32GiB'
    echo 'event t=1100 api=cuMemCreate dev=0 ptr=0xa1 size=1GiB stack=33'
    echo 'event t=1200 api=cuMemMap dev=0 ptr=0x10000000000 size=1GiB aux=0xa1'
    echo 'event t=2000 api=cudaMalloc dev=0 ptr=0x20000000000 size=1GiB stack=25 tid=9'
    echo 'event t=2100 api=cudaMalloc dev=0 ptr=0x20080000000 size=1GiB stack=25 tid=9'
    echo 'event t=3000 api=cudaMalloc dev=0 size=2GiB result=2 stack=25 tid=9'
    echo 'event t=3050 api=cuMemGetInfo_v2 dev=0 size=10GiB aux=16GiB flags=sample|after_failure'
    echo 'event t=3100 api=cudaFree dev=0 ptr=0x20000000000 tid=9'
    echo 'event t=3200 api=cudaFree dev=0 ptr=0x20080000000 tid=9'
    echo 'event t=3300 api=cudaMalloc dev=0 ptr=0x20000000000 size=2GiB stack=25 tid=9'
} | sed 's/uuid=1111111111111111111111111111111 /uuid=11111111111111111111111111111111 /' >"$D/frag.vt"
gen frag
json frag
check "frag: JSON is valid" valid_json "$D/frag.json"
F="$DV['fragmentation']"
is "$(j "$D/frag.json" "$F['failed_with_free']['count']")" 1 "smoking gun: failed with 10 GiB free"
is "$(j "$D/frag.json" "$F['failed_with_free']['first']['bytes']")" $((2 * GiB)) "smoking gun: request size"
is "$(j "$D/frag.json" "$F['failed_with_free']['first']['holes']")" "{\"bytes\": $GiB, \"largest_bytes\": $GiB, \"live_ranges\": 3}" \
    "smoking gun: the holes measured at the failure (1 GiB between the two pool blocks)"
is "$(j "$D/frag.json" "$F['flush_retry']['count']")" 1 "flush-and-retry burst"
is "$(j "$D/frag.json" "$F['flush_retry']['freed_bytes']")" $((2 * GiB)) "burst freed bytes"
is "$(j "$D/frag.json" "$F['flush_retry']['first']['frees']")" 2 "burst frees"
is "$(j "$D/frag.json" "$F['va_reserved_bytes']")" $((32 * GiB)) "VMM reserved VA at peak"
is "$(j "$D/frag.json" "$F['va_mapped_bytes']")" $((1 * GiB)) "VMM mapped at peak"
is "$(j "$D/frag.json" "$F['va_unmapped_bytes']")" $((31 * GiB)) "VMM reserved but unmapped"
is "$(j "$D/frag.json" "$F['vmm_physical_bytes']")" $((1 * GiB)) "VMM physical"
is "$(j "$D/frag.json" "$DV['peak']['by_tag']['scratch']")" $((3 * GiB)) "VMM pool and legacy pool are scratch"
is "$(j "$D/frag.json" "$F['external']['live_allocations']")" 3 "external: live ranges at peak"
# at the peak: the VMM mapping (its own VA region) and two 1 GiB pool blocks 2 GiB apart
is "$(j "$D/frag.json" "$F['external']['hole_bytes']")" $((1 * GiB)) "external: hole bytes"
is "$(j "$D/frag.json" "$F['external']['largest_hole_bytes']")" $((1 * GiB)) "external: largest hole"
is "$(j "$D/frag.json" "$F['external']['span_bytes']")" $((4 * GiB)) "external: span of both VA regions"
is "$(j "$D/frag.json" "$P['spill']['kind']")" oom "frag: the failure is an oom spill"
is "$(j "$D/frag.json" "$F['flush_retry']['recovered']")" 1 "retry recovered the failure"
report frag
check "frag: smoking guns in the text" grep -q "SMOKING GUN: 1 flush-and-retry burst" "$D/frag.out"
check "frag: fragmentation claimed with the holes at the failure" \
    grep -q "at the first, 1.00 GiB lay in holes between this process's 3 allocations, the largest 1.00 GiB, too small for 2.00 GiB: fragmentation" "$D/frag.out"
check "frag: a recovered failure is a near spill" grep -q "^VERDICT: NEAR SPILL. A device request failed on GPU 0" "$D/frag.out"

# -- 5. a directory: ollama server + runner on one GPU (matched by UUID) ----
mkdir -p "$D/dir"
{
    header 100 /usr/bin/ollama 24GiB 23.5GiB aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
    echo 'event t=1000 api=cudaMalloc dev=0 ptr=0x100000000 size=256MiB stack=29'
    echo 'event t=90000 api=cudaFree dev=0 ptr=0x100000000'
} >"$D/srv.vt"
{
    header 101 /usr/lib/ollama/runner 24GiB 23.25GiB aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
    layers 20 0 8 cudaMalloc 0x7000000000 2000
    echo 'event t=50000 api=cudaMalloc dev=0 ptr=0x9000000000 size=2GiB stack=17'
} >"$D/run.vt"
"$GEN" "$D/srv.vt" -o "$D/dir/ollama.100.vtrace" && "$GEN" "$D/run.vt" -o "$D/dir/runner.101.vtrace" || nok "vtgen dir"
"$VT" report --json "$D/dir" >"$D/dir.json" 2>"$D/dir.err"
is "$?" 0 "dir: report exits 0"
check "dir: JSON is valid" valid_json "$D/dir.json"
is "$(j "$D/dir.json" 'len(d["processes"])')" 2 "dir: two processes"
is "$(j "$D/dir.json" '[p["pid"] for p in d["processes"]]')" "[100, 101]" "dir: per-process sections"
is "$(j "$D/dir.json" 'len(d["gpus"])')" 1 "dir: one GPU by UUID"
is "$(j "$D/dir.json" 'd["gpus"][0]["peak"]["tracked_bytes"]')" $((256 * MiB + 20 * 450 * MiB + 2 * GiB)) "dir: combined peak while both lived"
is "$(j "$D/dir.json" 'd["gpus"][0]["peak"]["time_ns"]')" 50000 "dir: combined peak time on one timeline"
"$VT" report --wide "$D/dir" >"$D/dir.txt" 2>/dev/null
check "dir: the combined peak's time says what it counts from" grep -q "^  combined peak .* at .* after the first process started; least free" "$D/dir.txt"
is "$(j "$D/dir.json" '[p["bytes_at_gpu_peak"] for p in d["gpus"][0]["processes"]]')" "[$((256 * MiB)), $((20 * 450 * MiB + 2 * GiB))]" "dir: each process at the combined peak"
is "$(j "$D/dir.json" 'd["gpus"][0]["processes"][1]["peak_bytes"]')" $((20 * 450 * MiB + 2 * GiB)) "dir: runner's own peak"
"$VT" report --wide "$D/dir" >"$D/dir.out" 2>&1
check "dir: text has the combined view" grep -q "== GPUs across all 2 processes" "$D/dir.out"

# A process alone on its GPU is not asked about increases below its own
# peak; once a second one shares the GPU, an increase below that peak can
# make a combined one (A: 10 GiB, down to 4; B joins with 8: 12; A back up
# to 7: 15, the combined peak, while A stays under its own 10).
mkdir -p "$D/dir2"
{
    header 200 /usr/bin/a 32GiB 31.5GiB bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
    echo 'event t=1000 api=cudaMalloc dev=0 ptr=0x100000000 size=6GiB stack=29'
    echo 'event t=1100 api=cudaMalloc dev=0 ptr=0x300000000 size=4GiB stack=29'
    echo 'event t=2000 api=cudaFree dev=0 ptr=0x100000000'
    echo 'event t=4000 api=cudaMalloc dev=0 ptr=0x500000000 size=3GiB stack=29'
} >"$D/a2.vt"
{
    header 201 /usr/bin/b 32GiB 31.5GiB bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
    echo 'event t=3000 api=cudaMalloc dev=0 ptr=0x900000000 size=8GiB stack=17'
} >"$D/b2.vt"
"$GEN" "$D/a2.vt" -o "$D/dir2/a.200.vtrace" && "$GEN" "$D/b2.vt" -o "$D/dir2/b.201.vtrace" || nok "vtgen dir2"
"$VT" report --json "$D/dir2" >"$D/dir2.json" 2>"$D/dir2.err"
is "$(j "$D/dir2.json" 'd["gpus"][0]["peak"]["tracked_bytes"]')" $((15 * GiB)) "dir2: combined peak made by an increase below the first process's own peak"
is "$(j "$D/dir2.json" 'd["gpus"][0]["peak"]["time_ns"]')" 4000 "dir2: combined peak time"
is "$(j "$D/dir2.json" '[p["bytes_at_gpu_peak"] for p in d["gpus"][0]["processes"]]')" "[$((7 * GiB)), $((8 * GiB))]" "dir2: each process at the combined peak"
is "$(j "$D/dir2.json" 'd["processes"][0]["devices"][0]["peak"]["tracked_bytes"]')" $((10 * GiB)) "dir2: the first process's own peak"

# A request fails with 10 GiB reported free and no hole between this
# process's allocations: the trace shows no fragmentation, so none is claimed.
{
    header 557 /opt/llama.cpp/bin/llama-cli 16GiB 15GiB 33333333333333333333333333333333
    echo 'event t=2000 api=cudaMalloc dev=0 ptr=0x20000000000 size=1GiB stack=25 tid=9'
    echo 'event t=2100 api=cudaMalloc dev=0 ptr=0x20040000000 size=1GiB stack=25 tid=9'
    echo 'event t=3000 api=cudaMalloc dev=0 size=2GiB result=2 stack=25 tid=9'
    echo 'event t=3050 api=cuMemGetInfo_v2 dev=0 size=10GiB aux=16GiB flags=sample|after_failure'
} >"$D/nohole.vt"
gen nohole
json nohole
report nohole --color never
is "$(j "$D/nohole.json" "$DV['fragmentation']['failed_with_free']['first']['holes']")" '{"bytes": 0, "largest_bytes": 0, "live_ranges": 2}' \
    "failed with free memory, no holes: measured as none"
check "failed with free memory, no holes: no fragmentation claimed" sh -c "! grep -q 'fragmentation\.\|was fragmented' '$D/nohole.out'"
check "failed with free memory, no holes: says the holes do not explain it" \
    grep -q "SMOKING GUN: the driver reported enough free memory when the request failed; at the first, the holes between this process's 2 allocations held 0 B (largest 0 B), which does not explain it" "$D/nohole.out"

# -- 6. truncated, corrupt, not a trace --------------------------------------
{
    header 4242 /opt/llama.cpp/bin/llama-server 24GiB 23.5GiB 0123456789abcdef0123456789abcdef
    layers 10 0 8 cudaMalloc 0x7000000000 1000000
    echo chunk
    layers 10 10 8 cudaMalloc 0x8000000000 2000000
} >"$D/trunc.vt"
gen trunc
size=$(wc -c <"$D/trunc.vtrace")
head -c $((size - 7)) "$D/trunc.vtrace" >"$D/cut.vtrace"
"$VT" report --json "$D/cut.vtrace" >"$D/cut.json" 2>"$D/cut.err"
is "$?" 3 "truncated: still a report, exit 3 (incomplete)"
is "$(j "$D/cut.json" "$P['devices'][0]['peak']['tracked_bytes']")" $((10 * 450 * MiB)) "truncated: complete chunks counted"
is "$(j "$D/cut.json" "$P['trace']['truncated']")" true "truncated: flagged"
is "$(j "$D/cut.json" "$P['verdict'] + ' ' + $P['verdict_of_read_part']")" "incomplete no_spill" \
    "truncated: JSON verdict incomplete, no spill in what was read"
check "truncated: says where it stopped" grep -q "offset [0-9]*: trace ends in the middle of a chunk" "$D/cut.err"
"$VT" report --wide "$D/cut.vtrace" >"$D/cut.txt" 2>/dev/null
is "$?" 3 "truncated, text: exit 3"
is "$(grep -c '^VERDICT:' "$D/cut.txt")" 1 "truncated, text: one verdict line"
check "truncated, text: the verdict says INCOMPLETE TRACE, not NO SPILL" grep -q '^VERDICT: INCOMPLETE TRACE\. It stops inside a chunk at offset [0-9]*' "$D/cut.txt"
"$VT" report --fail-on-spill "$D/cut.vtrace" >/dev/null 2>&1
is "$?" 3 "truncated: --fail-on-spill does not pass it (exit 3)"
# Cut inside the first chunk: nothing complete, which is not "no GPU memory".
# The first chunk starts where the header ends: a cut a few bytes past it.
for n in 150 200 250 300; do
    head -c $n "$D/trunc.vtrace" >"$D/cut0.vtrace"
    "$VT" report "$D/cut0.vtrace" >/dev/null 2>"$D/cut0.err" && break
    first=$(sed -n 's/.*offset \([0-9]*\): trace ends in the middle of a chunk; reporting.*/\1/p' "$D/cut0.err")
    [ -n "$first" ] && break
done
head -c $((first + 8)) "$D/trunc.vtrace" >"$D/cut0.vtrace"
"$VT" report --wide "$D/cut0.vtrace" >"$D/cut0.txt" 2>/dev/null
is "$?" 3 "cut in the first chunk: exit 3"
check "cut in the first chunk: not NO GPU MEMORY USED" sh -c "! grep -q 'NO GPU MEMORY USED' '$D/cut0.txt' &&
    grep -q 'whether the process used GPU memory is unknown' '$D/cut0.txt'"
printf 'hello, not a trace at all\n' >"$D/junk.vtrace"
"$VT" report "$D/junk.vtrace" >"$D/junk.out" 2>"$D/junk.err"
is "$?" 2 "not a trace: exit 2"
check "not a trace: names file and offset" grep -q "junk.vtrace: offset 0" "$D/junk.err"
cp "$D/trunc.vtrace" "$D/bad.vtrace"
printf '\377\377\377\377' | dd of="$D/bad.vtrace" bs=1 seek=$((size - 40)) conv=notrunc 2>/dev/null
"$VT" report "$D/bad.vtrace" >"$D/bad.out" 2>"$D/bad.err"
is "$?" 2 "corrupt chunk: exit 2"
check "corrupt chunk: names file and offset" grep -q "bad.vtrace: offset [0-9]" "$D/bad.err"
printf 'prelude version=99\nprocess pid=1\n' >"$D/v99.vt"
gen v99
"$VT" report "$D/v99.vtrace" >/dev/null 2>"$D/v99.err"
is "$?" 2 "newer format version: exit 2"

# -- 7. user rules ------------------------------------------------------------
printf '# app rules\nkv   myapp_alloc\n' >"$D/my.rules"
json fit --rules "$D/my.rules"
is "$(j "$D/fit.json" "$P['sites'][5]['tag']")" kv "user rule tags the app site"
is "$(j "$D/fit.json" "$P['sites'][5]['rule']")" "$D/my.rules:2 kv myapp_alloc @ frame 1" "user rule named by file:line"
printf 'activations myapp_*\n' >"$D/env.rules"
VRAMTRACE_RULES="$D/env.rules" "$VT" report --json "$D/fit.vtrace" >"$D/env.json" 2>/dev/null
is "$(j "$D/env.json" "$P['devices'][0]['peak']['by_tag']['activations']")" $((16 * MiB)) "VRAMTRACE_RULES with a custom tag"
printf 'weights ok_pattern\nkv\n' >"$D/bad.rules"
"$VT" report --rules "$D/bad.rules" "$D/fit.vtrace" >/dev/null 2>"$D/rules.err"
is "$?" 2 "bad rules file: exit 2"
check "bad rules file: file:line in the message" grep -q "bad.rules:2: bad rules file" "$D/rules.err"

# -- 8. hostile but well-formed records: a report, never a crash -----------
"$GEN" tests/golden/hostile.vt -o "$D/hostile.vtrace" || nok "vtgen hostile"
"$VT" report --json "$D/hostile.vtrace" >"$D/hostile.json" 2>"$D/hostile.err"
is "$?" 0 "hostile records: exit 0"
check "hostile records: JSON is valid" valid_json "$D/hostile.json"
"$VT" report "$D/hostile.vtrace" >/dev/null 2>&1
is "$?" 0 "hostile records: text report"

# -- 9. records between events keep file order -----------------------------
# The lookahead reads on past FRAME and STACK records (a shim trace defines
# each new stack just before its first event); the model must still see
# them after the events before them: stack 41's match is made before
# 0x401200 has a name, stack 42's after.
{
    header 7 /opt/llama.cpp/bin/llama-server 24GiB 23GiB 07070707070707070707070707070707
    echo "stack 40 parent=1 ip=0x401200"
    echo "stack 41 parent=40 ip=0x7f0000001000"
    echo "event t=1000 api=cudaMalloc dev=0 ptr=0x10000000 size=3MiB stack=41 flags=runtime"
    echo "frame 0x401200 module=5 offset=0x10 function=myapp_alloc"
    echo "stack 42 parent=40 ip=0x7f0000001100"
    echo "event t=2000 api=cudaMalloc dev=0 ptr=0x20000000 size=2MiB stack=42 flags=runtime"
} >"$D/order.vt"
gen order
json order --rules "$D/my.rules"
is "$(j "$D/order.json" "[s['tag'] for s in $P['sites']]")" '["unknown", "kv"]' \
    "a FRAME after an event names the ip for later stacks only"

# -- one cuMemUnmap over several mappings ------------------------------------
# Three handles mapped back to back (2 + 4 + 6 MiB) and released while
# mapped, then one cuMemUnmap of the whole 12 MiB: every mapping goes, and
# with it each handle's memory. A fourth mapping past a gap stays.
{
    header 904 /opt/llama.cpp/bin/llama-cli 16GiB 15GiB 0123456789abcdef0123456789abcdef
    echo 'event t=1000 api=cuMemAddressReserve dev=0 ptr=0x10000000000 size=1GiB'
    a=0x10000000000
    for spec in "0xa1 2MiB 0x10000000000" "0xa2 4MiB 0x10000200000" "0xa3 6MiB 0x10000600000" "0xa4 2MiB 0x10001000000"; do
        set -- $spec
        echo "event t=1100 api=cuMemCreate dev=0 ptr=$1 size=$2 stack=33"
        echo "event t=1200 api=cuMemMap dev=0 ptr=$3 size=$2 aux=$1"
        echo "event t=1300 api=cuMemRelease dev=0 ptr=$1"
    done
    echo 'event t=2000 api=cuMemUnmap dev=0 ptr=0x10000000000 size=12MiB'
    echo 'end t=9000000 events=14 dropped=0'
} >"$D/unmap.vt"
gen unmap
json unmap
is "$(j "$D/unmap.json" "($DV['live_bytes'], $DV['peak']['tracked_bytes'], $P['events']['unmatched_frees'])")" \
    "($((2 * MiB)), $((14 * MiB)), 0)" "one cuMemUnmap of 12 MiB retires the three mappings in it; the one past the gap stays"

# -- a directory with bad files among good ones -------------------------------
# A FIFO named *.vtrace (it would block the reader forever), a file that is
# not a trace and one with a corrupt chunk: each is named on stderr and
# costs only its own section; the good trace is reported; exit 2. The same
# file named twice is one process.
B2=$D/mixed
mkdir -p "$B2"
cp "$D/oom.vtrace" "$B2/good.vtrace"
cp "$D/trunc.vtrace" "$B2/damaged.vtrace"
size=$(wc -c <"$B2/damaged.vtrace")
printf '\377\377\377\377' | dd of="$B2/damaged.vtrace" bs=1 seek=$((size - 40)) conv=notrunc 2>/dev/null
printf 'hello, not a trace\n' >"$B2/junk.vtrace"
mkfifo "$B2/fifo.vtrace"
timeout 20 "$VT" report --wide "$B2" >"$D/mixed.out" 2>"$D/mixed.err"
is "$?" 2 "mixed directory: exit 2, no hang on the FIFO"
check "mixed: the FIFO is named, not read" grep -q "fifo.vtrace: offset 0" "$D/mixed.err"
check "mixed: the junk file is named with its offset" grep -q "junk.vtrace: offset 0" "$D/mixed.err"
is "$(grep -c '^== .*(pid ' "$D/mixed.out")" 2 "mixed: the good and the damaged trace are reported"
is "$(grep -c 'NOT REPORTED' "$D/mixed.out")" 2 "mixed: the FIFO and the junk file are listed as not reported"
check "mixed: the good trace's verdict" grep -q "^VERDICT: SPILL" "$D/mixed.out"
check "mixed: the damaged trace is INCOMPLETE, at its offset" grep -q "^VERDICT: INCOMPLETE TRACE. It is damaged at offset [0-9]*" "$D/mixed.out"
timeout 20 "$VT" report --json "$B2" >"$D/mixed.json" 2>/dev/null
is "$(j "$D/mixed.json" "[p['trace']['damaged'] for p in d['processes']]")" "[true, false]" "mixed: JSON says which is damaged"
"$VT" report --json "$D/oom.vtrace" "$D/oom.vtrace" >"$D/twice.json" 2>"$D/twice.err"
is "$?" 0 "the same trace named twice: exit 0"
is "$(j "$D/twice.json" "len(d['processes'])")" 1 "... one process, not two"
check "... and says so" grep -q "named twice, read once" "$D/twice.err"

# -- a load that fails without a back-off -------------------------------------
# llama.cpp without a fallback exits with "failed to load model": a failed
# request and nothing after it is an out-of-memory failure, not a model that
# ran partly from host memory.
{
    header 905 /opt/llama.cpp/bin/llama-cli 24GiB 23.5GiB 0123456789abcdef0123456789abcdef
    layers 52 0 8 cudaMalloc 0x7000000000 1000000
    echo 'event t=2000000 api=cudaMalloc dev=0 size=450MiB result=2 stack=8 flags=runtime'
    echo 'end t=9000000 events=53 dropped=0'
} >"$D/loadfail.vt"
gen loadfail
report loadfail
is "$(sed -n 2p "$D/loadfail.out")" "VERDICT: OUT OF MEMORY. A device request for weights failed on GPU 0 (NVIDIA Sim) and the process allocated nothing after it:" "load failed: OUT OF MEMORY, not SPILL"
is "$(sed -n 3p "$D/loadfail.out")" "  the model load failed; nothing ran from host memory." "load failed: nothing ran from host memory"
json loadfail
is "$(j "$D/loadfail.json" "$P['verdict']")" failed "load failed: JSON verdict"
report loadfail --fail-on-spill; is "$?" 1 "load failed: --fail-on-spill still exits 1"
# The failed request's site says it failed, with what it asked for: a row
# of 0 B alone reads as an allocation of nothing.
check "load failed: the failed site says so, with the bytes asked and the error" \
    grep -q "^      FAILED: 1 of 53 calls, 450.0 MiB requested (cudaErrorMemoryAllocation)$" "$D/loadfail.out"
is "$(j "$D/loadfail.json" "[(s['failed'], s['failed_bytes'], s['failed_result']) for s in $P['sites'] if s['failed']]")" \
    '[[1, 471859200, "cudaErrorMemoryAllocation"]]' "load failed: JSON: the site's failed calls, bytes and result"
"$VT" report --html "$D/loadfail.html" "$D/loadfail.vtrace" 2>/dev/null
check "load failed: the HTML site table says it failed" grep -q "<b>1 failed</b>, 450.0 MiB requested (cudaErrorMemoryAllocation)" "$D/loadfail.html"

# -- pinned weights, as the trace shows them ---------------------------------
# (a) Everything fits; 125 MiB of weights in CUDA_Host by the program's own
# choice (llama.cpp keeps its token embeddings there): no fallback, no
# "layers offloaded".
{
    header 901 /opt/llama.cpp/bin/llama-cli 24GiB 23.5GiB 0123456789abcdef0123456789abcdef
    layers 17 0 8 cudaMalloc 0x7000000000 1000000
    echo 'event t=2000000 api=cudaMallocHost dev=-1 ptr=0x600000000000 size=125MiB stack=10 flags=runtime'
    echo 'end t=9000000 events=18 dropped=0'
} >"$D/embd.vt"
gen embd
report embd
is "$(sed -n 2p "$D/embd.out")" "VERDICT: NO SPILL. Every device allocation succeeded within the card's free memory." "embd: no spill"
is "$(grep -c 'offloaded\|host speed' "$D/embd.out")" 0 "embd: no word of offloaded layers or host speed"
check "embd: the program's choice, with llama.cpp's reason" grep -q "^  125.0 MiB of weights sit in pinned host memory (7.47 GiB on the GPU at its peak), by the program's choice: no device request had failed (llama.cpp keeps its token embeddings there" "$D/embd.out"
json embd
is "$(j "$D/embd.json" "$P['spill']")" null "embd: no spill in JSON"
# (b) A staging buffer: pinned weights freed before the end.
{
    header 902 /opt/myapp 24GiB 23.5GiB 0123456789abcdef0123456789abcdef
    layers 2 0 8 cudaMalloc 0x7000000000 1000000
    echo 'event t=2000000 api=cudaMallocHost dev=-1 ptr=0x600000000000 size=32MiB stack=10 flags=runtime'
    echo 'event t=2100000 api=cudaFreeHost dev=-1 ptr=0x600000000000 flags=runtime'
    echo 'end t=9000000 events=4 dropped=0'
} >"$D/staging.vt"
gen staging
report staging
check "staging: said to be freed, not to sit there" grep -q "^  32.0 MiB of weights were in pinned host memory at most (900.0 MiB on the GPU at its peak), by the program's choice: .*; all were freed by the end\.$" "$D/staging.out"
# (c) A recovered OOM is not a reason to call later pinned memory a
# fallback: weights fail, the same request on the same thread succeeds
# after a free, then the program's planned pinned buffer.
{
    header 903 /opt/llama.cpp/bin/llama-cli 16GiB 15GiB 0123456789abcdef0123456789abcdef
    echo 'event t=1000 api=cudaMalloc dev=0 ptr=0x20000000000 size=1GiB stack=8 tid=9'
    echo 'event t=2000 api=cudaMalloc dev=0 size=2GiB result=2 stack=8 tid=9'
    echo 'event t=2100 api=cudaFree dev=0 ptr=0x20000000000 tid=9'
    echo 'event t=2200 api=cudaMalloc dev=0 ptr=0x20000000000 size=2GiB stack=8 tid=9'
    echo 'event t=3000 api=cudaMallocHost dev=-1 ptr=0x600000000000 size=64MiB stack=10 flags=runtime'
    echo 'end t=9000000 events=5 dropped=0'
} >"$D/recovered.vt"
gen recovered
json recovered
is "$(j "$D/recovered.json" "$P['spill']['kinds']['host_fallback']['count']")" 0 "recovered OOM: the later pinned weights are no host fallback"
is "$(j "$D/recovered.json" "$P['spill']['kinds']['oom']['count']")" 1 "recovered OOM: the failure itself is still counted"
report recovered
is "$(sed -n 2p "$D/recovered.out" | cut -c1-30)" "VERDICT: NEAR SPILL. A device " "recovered OOM: NEAR SPILL"
check "recovered OOM: pinned weights by the program's choice" grep -q "^  64.0 MiB of weights sit in pinned host memory (2.00 GiB on the GPU at its peak), by the program's choice" "$D/recovered.out"
# serve says what the report says: a near spill, no spill counted, the
# failure among the failed requests.
"$VT" serve --once "$D/recovered.vtrace" >"$D/recovered.om" 2>/dev/null
is "$(awk '/^vramtrace_spills_total\{.*kind="oom"/ { print $NF } /^vramtrace_alloc_failures_total\{/ { print $NF } /^vramtrace_verdict\{.*verdict="near_spill"/ { print $NF }' "$D/recovered.om" | tr '\n' ' ')" \
    "1 0 1 " "recovered OOM: serve: 1 failed request, 0 spills, verdict near_spill"

# A GPU probe (ollama's discovery runs one per GPU library): it asks for the
# device count and free memory and allocates nothing. Its section is the
# verdict, entry points and counts; no peak moment, no device tables, and
# JSON's free at peak is null, not 0 B.
mkdir -p "$D/probe"
gpu_probe "$D/probe"
"$VT" report --wide "$D/probe" >"$D/probe.out" 2>&1
is "$(grep -c '^VERDICT: NO GPU MEMORY USED' "$D/probe.out") $(grep -c 'peak 0 B of 24.00 GiB\.$' "$D/probe.out")" "1 1" \
    "probe: NO GPU MEMORY USED, a peak of 0 B with no moment"
is "$(grep -c '^GPU 0 \|free at peak\|^Top sites\|^Pinned host memory' "$D/probe.out")" "0" \
    "probe: no device table, host table or sites"
is "$(grep -A2 '^Entry points' "$D/probe.out" | sed 's/  */ /g')" "Entry points calls failed bytes
 cudaMemGetInfo 1 0 0 B
Events: 0 allocs, 0 frees, 0 failed, 0 dropped" "probe: its entry points and counts"
is "$("$VT" report --json "$D/probe" | python3 -c 'import json, sys
d = json.load(sys.stdin)["processes"][0]["devices"][0]
print(d["headroom"]["free_at_peak_bytes"])')" "None" "probe: JSON free at peak is null"

# Beside a process that allocated, a probe is one line of the combined GPU
# section, not a row of its own.
mkdir -p "$D/withprobe"
under_shim "$D/withprobe" "$B/tests/shim/paths" runtime >/dev/null 2>&1
gpu_probe "$D/withprobe"
"$VT" report --wide "$D/withprobe" >"$D/withprobe.out" 2>&1
is "$(sed -n '/^== GPUs across all 2 processes/,$p' "$D/withprobe.out" | grep -c '^    pid ') $(grep -c '^    and 1 process that allocated nothing$' "$D/withprobe.out")" "1 1" \
    "combined GPUs: the allocating process has its row, the probe is counted"
done_testing
