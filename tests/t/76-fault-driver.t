#!/bin/sh
# What the driver did, followed by the report (issue #26): context teardown
# frees every allocation of the context, a request whose width x height
# overflows 64 bits is refused as impossible, a stream or pool of another
# device places memory on that device, memory located in host memory is not
# VRAM, a retained VMM handle lives until its last release, CUDA arrays
# count their bytes, and a free written after the allocation that reused its
# address frees the allocation before it. Each program's output is
# unchanged under the shim, and the report's numbers are exact.
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
DC=$B/tests/fault/drvcases
GiB=1073741824

# json FILE EXPR: a value of the first process's report (p = the process).
json() {
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["processes"][0]; d={x["ordinal"]: x for x in p["devices"]}; print(eval(sys.argv[2]))' "$1" "$2"
}

# run NAME MODE: plain and shimmed runs, the JSON report in $TMP/NAME.json.
run() {
    D=$TMP/$1; mkdir $D
    plain $TMP/$1.plain $DC $2
    shimmed $TMP/$1.out $D $DC $2
    unchanged $TMP/$1.plain $TMP/$1.out "$1: output and exit status unchanged"
    "$VT" report --json $D >$TMP/$1.json 2>$TMP/$1.err
    "$VT" report $D >$TMP/$1.txt 2>>$TMP/$1.err
}

# ---- context teardown: 2 GiB + 1 GiB, teardown, 3 GiB, teardown ----
for api in rt primary destroy; do
    run teardown-$api teardown-$api
    is "$(grep -c '=0$' $TMP/teardown-$api.out)" "$(wc -l <$TMP/teardown-$api.out)" "teardown-$api: every call succeeded"
    is "$(json $TMP/teardown-$api.json 'd[0]["peak"]["tracked_bytes"]')" $((3 * GiB)) "teardown-$api: peak 3 GiB (the first context's memory went with it)"
    is "$(json $TMP/teardown-$api.json 'd[0]["live_bytes"]')" 0 "teardown-$api: nothing live at the end"
    is "$(json $TMP/teardown-$api.json 'p["events"]["teardown_frees"]')" 3 "teardown-$api: 3 allocations freed by the teardowns"
    is "$(json $TMP/teardown-$api.json 'p["events"]["implicit_frees"]')" 0 "teardown-$api: no address counted as reused while live"
done
grep -q '3 freed by context teardown' $TMP/teardown-rt.txt
is "$?" 0 "teardown: the text report says what the teardowns freed"

# ---- a primary context's last release resets it (numba's cuda.close(),
# cuda.core's thread cleanup): its memory stayed live in the report ----
run teardown-release teardown-release
is "$(grep -c '=0$' $TMP/teardown-release.out)" "$(wc -l <$TMP/teardown-release.out)" "teardown-release: every call succeeded"
is "$(json $TMP/teardown-release.json 'd[0]["peak"]["tracked_bytes"]')" $((3 * GiB)) "teardown-release: peak 3 GiB"
is "$(json $TMP/teardown-release.json 'd[0]["live_bytes"]')" 0 "teardown-release: nothing live at the end"
is "$(json $TMP/teardown-release.json 'p["events"]["teardown_frees"], p["events"]["implicit_frees"]')" "(4, 0)" \
    "teardown-release: 4 allocations freed by the last releases and the reset, no address counted as reused while live"
"$VT" dump $TMP/teardown-release/*.vtrace >$TMP/teardown-release.dump
is "$(grep -c 'api=cuDevicePrimaryCtxRelease_v2 .*aux=0x1 ' $TMP/teardown-release.dump)" 1 \
    "teardown-release: the release that left a reference is marked as freeing nothing"
is "$(grep -c 'other_context' $TMP/teardown-release.dump)" 0 "teardown-release: no pointer asked about for that release"

# ---- more marks than the event buffer holds: the teardown waits for the
# writer rather than lose them (each lost mark was a live allocation
# counted as freed, and uncounted) ----
D=$TMP/teardown-many; mkdir $D
plain $TMP/teardown-many.plain $DC teardown-many
VRAMTRACE_RING=1024 VRAMTRACE_FLUSH_MS=5 shimmed $TMP/teardown-many.out $D $DC teardown-many
unchanged $TMP/teardown-many.plain $TMP/teardown-many.out "teardown-many: output and exit status unchanged"
"$VT" report --json $D >$TMP/teardown-many.json 2>$TMP/teardown-many.err
is "$(json $TMP/teardown-many.json 'd[0]["live_bytes"]')" $((4 * GiB)) \
    "teardown-many: the created context's 4,096 allocations (4 GiB) outlive cudaDeviceReset in a 1,024-event buffer"
is "$(json $TMP/teardown-many.json 'p["events"]["teardown_frees"]')" 1 "teardown-many: the reset freed the primary's 1 GiB"
is "$(json $TMP/teardown-many.json 'p["events"]["dropped"]')" 0 "teardown-many: no event dropped"
is "$("$VT" dump $D/*.vtrace | grep -c 'flags=.*other_context')" 4096 "teardown-many: 4,096 marks written"

# ---- a teardown frees its own context's memory, not another's ----
run teardown-mixed teardown-mixed
is "$(grep -c '=0$' $TMP/teardown-mixed.out)" "$(wc -l <$TMP/teardown-mixed.out)" "teardown-mixed: every call succeeded"
is "$(json $TMP/teardown-mixed.json 'd[0]["peak"]["tracked_bytes"]')" $((3 * GiB)) "teardown-mixed: peak 3 GiB"
is "$(json $TMP/teardown-mixed.json 'd[0]["live_bytes"]')" $GiB \
    "teardown-mixed: the second created context's 1 GiB outlives cudaDeviceReset"
is "$(json $TMP/teardown-mixed.json 'p["events"]["teardown_frees"]')" 2 \
    "teardown-mixed: cuCtxDestroy freed its 1 GiB, cudaDeviceReset the primary's 2 GiB"
"$VT" dump $TMP/teardown-mixed/*.vtrace >$TMP/teardown-mixed.dump
is "$(grep -c 'flags=.*other_context' $TMP/teardown-mixed.dump)" 2 \
    "teardown-mixed: each teardown named the one allocation of another context it left"
is "$(grep '^event ' $TMP/teardown-mixed.dump | grep 'api=cudaDeviceReset ' | grep -vc other_context)" 1 \
    "teardown-mixed: one cudaDeviceReset call"
# The reader's side: a mark keeps an allocation through its own thread's
# teardown only, and every teardown ends all marks before it.
for resets in 1 2; do
    {
        echo "device 0 total=24GiB free=23GiB"
        echo "event t=10 tid=1 api=cudaMalloc ptr=0x1000000 size=1GiB"
        echo "event t=20 tid=1 api=cudaMalloc ptr=0x2000000 size=2GiB"
        echo "event t=30 tid=2 api=cudaDeviceReset ptr=0x2000000 flags=sample|other_context"
        echo "event t=30 tid=1 api=cudaDeviceReset ptr=0x1000000 flags=sample|other_context"
        echo "event t=30 tid=1 api=cudaDeviceReset"
        [ $resets = 2 ] && echo "event t=40 tid=2 api=cudaDeviceReset"
        echo "end t=50 events=$((2 + resets)) dropped=0"
    } >$TMP/marks$resets.vtg
    "$B/vtgen" -o $TMP/marks$resets.vtrace $TMP/marks$resets.vtg
    "$VT" report --json $TMP/marks$resets.vtrace >$TMP/marks$resets.json
done
is "$(json $TMP/marks1.json 'd[0]["live_bytes"]')" $GiB "marks: thread 1's teardown keeps the 1 GiB thread 1 marked, frees the 2 GiB thread 2 marked"
is "$(json $TMP/marks2.json 'd[0]["live_bytes"]')/$(json $TMP/marks2.json 'p["events"]["teardown_frees"]')" 0/2 \
    "marks: a later teardown frees what an earlier one kept"
is "$(json $TMP/marks1.json 'sum(a["calls"] for a in p["apis"].values()) if isinstance(p["apis"], dict) else sum(a["calls"] for a in p["apis"])')" 3 \
    "marks: are not calls"
export VTSIM_DEVICES=24GiB,24GiB
run teardown-otherdev teardown-otherdev
unset VTSIM_DEVICES
is "$(json $TMP/teardown-otherdev.json 'd[0]["live_bytes"]')" $GiB \
    "teardown-otherdev: device 0 keeps its 1 GiB when device 1's context goes"
is "$(json $TMP/teardown-otherdev.json 'd[1]["live_bytes"]')" 0 "teardown-otherdev: device 1's 4 GiB went with its context"
is "$(json $TMP/teardown-otherdev.json 'd[1]["peak"]["tracked_bytes"]')" $((4 * GiB)) "teardown-otherdev: device 1's peak 4 GiB"

# ---- cuMemAllocPitch / cudaMallocPitch: width x height over 64 bits ----
run pitchovf pitchovf
"$VT" dump $TMP/pitchovf/*.vtrace >$TMP/pitchovf.dump
is "$(count_events $TMP/pitchovf.dump cuMemAllocPitch_v2 18446744073709551615 2)" 1 \
    "pitch overflow: cuMemAllocPitch_v2 recorded as a request of UINT64_MAX bytes, refused"
is "$(count_events $TMP/pitchovf.dump cudaMallocPitch 18446744073709551615 2)" 1 \
    "pitch overflow: cudaMallocPitch the same"
is "$(count_events $TMP/pitchovf.dump cuMemAllocPitch_v2 $GiB)" 0 "pitch overflow: never as its wrapped 1 GiB"
is "$(json $TMP/pitchovf.json 'p["events"]["impossible_requests"]')" 2 "pitch overflow: two impossible requests"
is "$(json $TMP/pitchovf.json 'd[0]["failures"]')" 0 "pitch overflow: not an out-of-memory on GPU 0"
is "$(grep -c 'NEAR SPILL\|SMOKING GUN\|OUT OF MEMORY' $TMP/pitchovf.txt)" 0 "pitch overflow: no spill, no smoking gun"
grep -q '2 requests of more than 2^64 bytes' $TMP/pitchovf.txt
is "$?" 0 "pitch overflow: the report names them as impossible"

# ---- another device's stream and pool, device 0 current ----
export VTSIM_DEVICES=24GiB,24GiB
run otherdev otherdev
unset VTSIM_DEVICES
is "$(json $TMP/otherdev.json 'd[1]["peak"]["tracked_bytes"]')" $((8 * GiB)) "other device: GPU 1 holds the 8 GiB its stream and pool placed"
is "$(json $TMP/otherdev.json 'd[0]["peak"]["tracked_bytes"]')" 1048576 "other device: GPU 0 only its own 1 MiB"
"$VT" dump $TMP/otherdev/*.vtrace >$TMP/otherdev.dump
is "$(grep '^event ' $TMP/otherdev.dump | grep 'flags=sample' | grep -c 'api=cuMemGetInfo_v2 .*dev=1 ')" 0 \
    "other device: no free-memory sample of the current device under GPU 1's name"

# ---- memory located in host memory: VMM (HOST_NUMA) and a host pool ----
run hostmem hostmem
is "$(grep -c '=0$' $TMP/hostmem.out)" "$(wc -l <$TMP/hostmem.out)" "hostmem: every call succeeded"
is "$(json $TMP/hostmem.json 'd[0]["peak"]["tracked_bytes"]')" $((GiB + 1048576)) \
    "hostmem: GPU 0 holds its 1 GiB handle (and 1 MiB), not the host-located 8 GiB"
is "$(json $TMP/hostmem.json 'p["host_pinned"]["peak_bytes"]')" $((8 * GiB)) \
    "hostmem: the 4 GiB host-located handle and the 4 GiB host-pool block are pinned host memory"
is "$(json $TMP/hostmem.json 'p["host_pinned"]["live_bytes"]')" 0 "hostmem: all freed by the end"

# ---- CUDA arrays: 1 GiB cudaMalloc + 1 GiB 2D + 2 GiB 3D + 4/3 GiB mipmapped ----
run arrays arrays
is "$(grep -c '=0$' $TMP/arrays.out)" "$(wc -l <$TMP/arrays.out)" "arrays: every call succeeded"
"$VT" dump $TMP/arrays/*.vtrace >$TMP/arrays.dump
is "$(count_events $TMP/arrays.dump cuArrayCreate_v2 $GiB 0)" 1 "arrays: cuArrayCreate_v2 of 16384 x 16384 floats is 1 GiB"
is "$(count_events $TMP/arrays.dump cuArray3DCreate_v2 $((2 * GiB)) 0)" 1 "arrays: cuArray3DCreate_v2 of 1024 x 1024 x 512 RGBA8 is 2 GiB"
is "$(count_events $TMP/arrays.dump cuMipmappedArrayCreate 1431655765 0)" 1 \
    "arrays: cuMipmappedArrayCreate of 16 levels from 32768 x 32768 bytes is (4^16 - 1) / 3 bytes"
is "$(json $TMP/arrays.json 'd[0]["peak"]["tracked_bytes"]')" $((4 * GiB + 1431655765)) "arrays: peak 5.33 GiB, arrays included"
is "$(json $TMP/arrays.json 'd[0]["live_bytes"]')" 0 "arrays: destroyed arrays are freed"
is "$(json $TMP/arrays.json 'p["events"]["unmatched_frees"]')" 0 "arrays: every destroy matched its array"
is "$(json $TMP/arrays.json 'int(d[0]["headroom"]["untracked_bytes"] < 2097152)')" 1 \
    "arrays: untracked memory under one granule (the simulated driver's rounding), not 4.33 GiB"

# ---- a free passed over while blocked, its address reused meanwhile ----
export VTSIM_SLOW_RETURN_MS=600
run slowreuse slowreuse
unset VTSIM_SLOW_RETURN_MS
grep -q '^reused=1$' $TMP/slowreuse.out
is "$?" 0 "slow free: the second cudaMalloc got the address back before the free returned"
"$VT" dump $TMP/slowreuse/*.vtrace >$TMP/slowreuse.dump
is "$(grep -c 'api=cudaFree .*flags=runtime|late ' $TMP/slowreuse.dump)" 1 "slow free: written late, and marked so"
is "$(json $TMP/slowreuse.json 'd[0]["live_bytes"]')" $GiB "slow free: 1 GiB live at the end, as the driver holds"
is "$(json $TMP/slowreuse.json 'p["events"]["implicit_frees"]')" 0 "slow free: no reused live pointer"
is "$(json $TMP/slowreuse.json 'p["events"]["frees"]')" 1 "slow free: the free matched the first allocation"

# ---- cuMemRetainAllocationHandle, then a remap ----
run retain retain
is "$(grep -c '=0$' $TMP/retain.out)" "$(($(wc -l <$TMP/retain.out) - 1))" "retain: every call succeeded"
grep -q '^same=1$' $TMP/retain.out
is "$?" 0 "retain: the retained handle is the one created"
is "$(json $TMP/retain.json 'd[0]["peak"]["tracked_bytes"]')" $((3 * GiB + 1048576)) \
    "retain: peak 3 GiB (+1 MiB): the retained handle stays through its unmap and remap"
is "$(json $TMP/retain.json 'd[0]["live_bytes"]')" 0 "retain: nothing live at the end"

# ---- a VMM handle imported from another process (NCCL's cuMem buffers):
# the exporter's memory, so the importer's releases free nothing of its
# own (they were "frees of unknown pointers") ----
run import import
is "$(grep -c '=0$' $TMP/import.out)" "$(wc -l <$TMP/import.out)" "import: every call succeeded, in both processes"
is "$(ls $TMP/import/*.vtrace | wc -l)" 2 "import: one trace per process"
# jproc FILE ARGV1 EXPR: a value of the process whose argv[1] is ARGV1.
jproc() {
    python3 -c 'import json,sys; p=[x for x in json.load(open(sys.argv[1]))["processes"] if x["argv"][1] == sys.argv[2]][0]; d={x["ordinal"]: x for x in p["devices"]}; print(eval(sys.argv[3]))' "$1" "$2" "$3"
}
is "$(jproc $TMP/import.json import 'd[0]["peak"]["tracked_bytes"]')" $((2 * GiB + 1048576)) "import: the exporter's peak is its 2 GiB handle and 1 MiB"
is "$(jproc $TMP/import.json import-peer 'd[0]["peak"]["tracked_bytes"]')" 1048576 "import: the importer's peak is its own 1 MiB"
is "$(jproc $TMP/import.json import-peer 'p["events"]["imported_handles"], p["events"]["empty_handle_releases"], p["events"]["unmatched_frees"]')" \
    "(1, 2, 0)" "import: 1 handle imported, its 2 references released, no free of an unknown pointer"
is "$(jproc $TMP/import.json import-peer 'd[0]["live_bytes"]')" 0 "import: nothing live at the importer's end"
tr '\n' ' ' <$TMP/import.txt | tr -s ' ' | grep -q '1 VMM handle imported from other processes (their memory: not counted here)'
is "$?" 0 "import: the text report says what the import was"
grep -q 'frees of unknown pointers' $TMP/import.txt
is "$?" 1 "import: no frees of unknown pointers in the text"

# ---- a multicast object (NCCL's NVLS buffers): no memory of its own; the
# handle bound to it holds the 2 GiB ----
run multicast multicast
is "$(grep -c '=0$' $TMP/multicast.out)" "$(wc -l <$TMP/multicast.out)" "multicast: every call succeeded"
is "$(json $TMP/multicast.json 'd[0]["peak"]["tracked_bytes"]')" $((2 * GiB + 1048576)) "multicast: peak 2 GiB + 1 MiB: the bound handle, not the object too"
is "$(json $TMP/multicast.json 'p["events"]["multicast_objects"], p["events"]["empty_handle_releases"], p["events"]["unmatched_frees"]')" \
    "(1, 1, 0)" "multicast: 1 object, its release frees nothing, no free of an unknown pointer"
is "$(json $TMP/multicast.json 'd[0]["live_bytes"]')" 0 "multicast: nothing live at the end"
tr '\n' ' ' <$TMP/multicast.txt | tr -s ' ' | grep -q '1 multicast object (holding no memory: what is bound to it is counted where it was made)'
is "$?" 0 "multicast: the text report says what the object was"

# ---- another process's memory mapped here: a shared pool's pointer
# (cuMemPoolImportPointer), freed by cuMemFreeAsync, was a "free of an
# unknown pointer"; an IPC handle opened three times (one address, three
# references) and closed three times was not seen at all ----
run ipc ipc
is "$(grep -c '=0$' $TMP/ipc.out)" "$(($(wc -l <$TMP/ipc.out) - 1))" "ipc: every call succeeded, in both processes"
grep -q '^same=1$' $TMP/ipc.out
is "$?" 0 "ipc: the three opens of one handle gave one address"
is "$(ls $TMP/ipc/*.vtrace | wc -l)" 2 "ipc: one trace per process"
is "$(jproc $TMP/ipc.json ipc 'd[0]["peak"]["tracked_bytes"]')" $((3 * GiB)) "ipc: the exporter's peak is its 2 GiB and 1 GiB"
is "$(jproc $TMP/ipc.json ipc-peer 'd[0]["peak"]["tracked_bytes"]')" 1048576 "ipc: the importer's peak is its own 1 MiB"
is "$(jproc $TMP/ipc.json ipc-peer 'p["events"]["imported_pointers"], p["events"]["imported_pointer_frees"], p["events"]["unmatched_frees"], p["events"]["frees"]')" \
    "(4, 4, 0, 1)" "ipc: 4 pointers imported (1 pool pointer, 3 opens), 4 released, no free of an unknown pointer, 1 free of its own"
is "$(jproc $TMP/ipc.json ipc-peer '[(a, c["calls"]) for a, c in p["apis"].items() if a.startswith("cuIpc") or a == "cuMemPoolImportPointer"]')" \
    "[('cuMemPoolImportPointer', 1), ('cuIpcOpenMemHandle', 1), ('cuIpcOpenMemHandle_v2', 2), ('cuIpcCloseMemHandle', 3)]" \
    "ipc: each import named by its entry point (the runtime's open reaches _v2)"
is "$(jproc $TMP/ipc.json ipc-peer 'd[0]["live_bytes"]')" 0 "ipc: nothing live at the importer's end"
tr '\n' ' ' <$TMP/ipc.txt | tr -s ' ' | grep -q "4 device pointers mapped from other processes' memory (IPC; not counted here)"
is "$?" 0 "ipc: the text report says what the imports were"
grep -q 'frees of unknown pointers' $TMP/ipc.txt
is "$?" 1 "ipc: no frees of unknown pointers in the text"

# ---- requests refused for another reason than memory: no spill, no OOM ----
# A sticky error (every request after a kernel's illegal memory access
# fails with CUDA_ERROR_ILLEGAL_ADDRESS, whatever is free) and a thread
# with no current context were each said to be OUT OF MEMORY.
export VTSIM_FAULT_AFTER=1 VTSIM_DEVICES=4GiB
run sticky sticky
unset VTSIM_FAULT_AFTER
is "$(tr '\n' ' ' <$TMP/sticky.out)" "malloc=0 after-fault=700 driver-after-fault=700 " \
    "sticky: both requests after the fault fail with the illegal address, as a real driver's do"
is "$(json $TMP/sticky.json 'p["verdict"]')" no_spill "sticky: verdict no_spill, not out of memory"
is "$(json $TMP/sticky.json 'p["events"]["failed"]')" 2 "sticky: 2 failed requests counted"
is "$(json $TMP/sticky.json 'p["events"]["failed_not_oom"]')" 2 "sticky: both not for lack of memory"
is "$(json $TMP/sticky.json 'p["events"]["first_failed_not_oom"]["api"], p["events"]["first_failed_not_oom"]["bytes"], p["events"]["first_failed_not_oom"]["result"]')" \
    "('cudaMalloc', $((2 * GiB)), 700)" "sticky: the first is the 2 GiB cudaMalloc, result 700"
is "$(json $TMP/sticky.json 'p["spill"]')" None "sticky: no tipping event"
is "$(json $TMP/sticky.json 'd[0]["failures"]')" 0 "sticky: no out-of-memory failure on GPU 0"
is "$("$VT" report --wide $TMP/sticky 2>/dev/null | grep '^VERDICT:')" \
    "VERDICT: NO SPILL. No device request failed for lack of memory; every one that succeeded fit within the card's free memory." \
    "sticky: the verdict claims no more than the trace shows"
grep -q '2 device requests failed with errors other than out of memory' $TMP/sticky.txt &&
    grep -q 'cudaMalloc of 2.00 GiB for unknown (cudaErrorIllegalAddress)' $TMP/sticky.txt
is "$?" 0 "sticky: the text names the refusals and the first one's error"
grep -q '2 failed (2 not for lack of memory)' $TMP/sticky.txt
is "$?" 0 "sticky: the events line says why the failures are not memory"
"$VT" report --fail-on-spill $TMP/sticky >/dev/null 2>&1
is "$?" 0 "sticky: --fail-on-spill passes: nothing spilled"
"$VT" replay --capacity 2GiB $TMP/sticky >$TMP/sticky.replay 2>&1
grep -q 'failed' $TMP/sticky.replay
is "$?" 1 "sticky: replay on a 2 GiB card replays no demand of the refused requests"

run noctx noctx
is "$(tr '\n' ' ' <$TMP/noctx.out)" "malloc=0 thread-without-context=201 " "noctx: the thread's request fails with CUDA_ERROR_INVALID_CONTEXT"
is "$(json $TMP/noctx.json 'p["verdict"], p["events"]["failed_not_oom"]')" "('no_spill', 1)" \
    "noctx: verdict no_spill, one request refused for another reason"

# An out-of-memory after such a refusal: the OOM is what tipped the run.
D=$TMP/noctx-oom; mkdir $D
shimmed $TMP/noctx-oom.out $D $DC noctx 8
"$VT" report --json $D >$TMP/noctx-oom.json 2>/dev/null
is "$(tr '\n' ' ' <$TMP/noctx-oom.out)" "malloc=0 thread-without-context=201 then=2 " "noctx-oom: then an 8 GiB cudaMalloc runs out of memory"
is "$(json $TMP/noctx-oom.json 'p["verdict"]')" failed "noctx-oom: verdict out of memory"
is "$(json $TMP/noctx-oom.json 'p["spill"]["event"]["api"], p["spill"]["event"]["bytes"], p["spill"]["event"]["result"]')" \
    "('cudaMalloc', $((8 * GiB)), 2)" "noctx-oom: tipped by the 8 GiB cudaMalloc, not by the request without a context"
is "$(json $TMP/noctx-oom.json 'd[0]["failures"]')" 1 \
    "noctx-oom: one out-of-memory failure on GPU 0"
unset VTSIM_DEVICES

# ---- Graph memory nodes added by hand (cuGraphAddMemAllocNode,
# cuGraphAddMemFreeNode): nodes like captured calls. They were not seen, so
# the 512 MiB freed outside its graph was a free of an unknown pointer. ----
run graph-nodes graph-nodes
is "$(grep -c '=0$' $TMP/graph-nodes.out)" 10 "graph-nodes: every call succeeded"
is "$(json $TMP/graph-nodes.json 'p["events"]["captured_allocs"], p["events"]["captured_bytes"], p["events"]["captured_frees"]')" \
    "(2, $((GiB / 2 + GiB / 4)), 1)" "graph-nodes: 2 allocation nodes of 768 MiB and a free node, counted apart"
is "$(json $TMP/graph-nodes.json 'p["events"]["graph_frees"], p["events"]["unmatched_frees"], d[0]["peak"]["tracked_bytes"]')" \
    "(1, 0, $GiB)" "graph-nodes: the free outside the graph is graph memory, no unknown pointer; a peak of the 1 GiB held"

# ---- the same nodes through the generic node add (CUDA 12.2's
# cuGraphAddNode, the runtime's cudaGraphAddNode: cuGraphAddNode_v2) were
# unseen: the free outside the graph was a free of an unknown pointer, the
# 512 MiB node a live allocation ----
run graph-generic graph-generic
is "$(grep -c '=0$' $TMP/graph-generic.out)" 11 "graph-generic: every call succeeded"
is "$(json $TMP/graph-generic.json 'p["events"]["captured_allocs"], p["events"]["captured_bytes"], p["events"]["captured_frees"]')" \
    "(2, $((GiB / 2 + GiB / 4)), 1)" "graph-generic: 2 allocation nodes of 768 MiB and a free node, counted apart"
is "$(json $TMP/graph-generic.json 'p["events"]["graph_frees"], p["events"]["unmatched_frees"], d[0]["peak"]["tracked_bytes"]')" \
    "(1, 0, $GiB)" "graph-generic: the free outside the graph is graph memory, no unknown pointer; a peak of the 1 GiB held"
is "$(json $TMP/graph-generic.json 'p["apis"].get("cuGraphAddNode", {}).get("calls"), p["apis"].get("cuGraphAddNode_v2", {}).get("calls")')" \
    "(1, 2)" "graph-generic: memory nodes alone are events (the empty node is not)"

# ---- a capture begun by CUDA 10.0's cuStreamBeginCapture (no mode), linked
# and looked up: unseen, so its captured calls counted as real: a peak of
# 3 GiB ----
run graph-10000 graph-10000
is "$(grep -c '=0$' $TMP/graph-10000.out)" 12 "graph-10000: every call succeeded (the shim's own queries invalidated the global-mode capture it did not see begin: 901)"
is "$(json $TMP/graph-10000.json 'p["events"]["graph_captures"], p["events"]["captured_allocs"], p["events"]["captured_bytes"], d[0]["peak"]["tracked_bytes"]')" \
    "(2, 2, $((2 * GiB + GiB / 2)), $GiB)" "graph-10000: 2 captures seen, their 2 allocations counted apart, a peak of the 1 GiB held"

# ---- A capture in global mode (cudaStreamBeginCapture's default, and
# torch.cuda.graph's): a call the driver deems unsafe, from any thread,
# invalidates it. The shim's own query of each captured allocation's device
# (cuPointerGetAttribute) and its free-memory samples broke the program's
# capture: every later call 901, no graph. They now run in relaxed mode. ----
export VRAMTRACE_SAMPLE_MS=1
run graph-global graph-global
unset VRAMTRACE_SAMPLE_MS
is "$(tr '\n' ' ' <$TMP/graph-global.out)" "malloc=0 stream=0 begin=0 captured-alloc=0 captured-alloc=0 captured-alloc=0 captured-alloc=0 captured-free=0 captured-free=0 captured-free=0 captured-free=0 end=0 graph=1 instantiate=0 launch=0 " \
    "graph-global: the capture holds, the graph is made and launched"
is "$(json $TMP/graph-global.json 'p["events"]["captured_allocs"], p["events"]["captured_frees"], d[0]["peak"]["tracked_bytes"]')" \
    "(4, 4, $GiB)" "graph-global: 4 captured allocations and frees, a peak of the 1 GiB held"
"$VT" dump $TMP/graph-global/*.vtrace >$TMP/graph-global.dump 2>/dev/null
n=$(awk '/kind=capture_begin/ { on = 1 } /kind=capture_end/ { on = 0 } on && /api=cuMemGetInfo_v2 .*flags=sample/ { n++ }
    END { print n + 0 }' $TMP/graph-global.dump)
check "graph-global: the shim's samples went on inside the capture ($n, 5 ms apart at a 1 ms interval)" test "$n" -ge 2

# ---- CUDA graphs: stream-ordered calls captured into a graph allocate and
# free nothing; the graph allocates from the driver's graph pool at each
# launch. The captured 2 GiB, 512 MiB and 256 MiB were counted live: peak
# 3.88 GiB for the 1 GiB and 128 MiB the program held. ----
run graph graph
is "$(grep -c '=0$' $TMP/graph.out) $(tail -1 $TMP/graph.out)" "23 destroy=0,0,0,0" "graph: every call succeeded"
is "$(json $TMP/graph.json 'd[0]["peak"]["tracked_bytes"]')" $((GiB + GiB / 8)) \
    "graph: peak 1.125 GiB, the cudaMalloc and the allocation made before the capture"
is "$(json $TMP/graph.json 'd[0]["live_bytes"]')" $((GiB + GiB / 8)) \
    "graph: live at end the same: the captured free of the 128 MiB is a launch's, unseen"
is "$(json $TMP/graph.json 'p["events"]["allocs"], p["events"]["frees"], p["events"]["unmatched_frees"]')" "(2, 0, 0)" \
    "graph: 2 allocations, no free of a traced allocation, none of an unknown pointer"
is "$(json $TMP/graph.json 'p["events"]["graph_captures"], p["events"]["captured_allocs"], p["events"]["captured_bytes"]')" \
    "(2, 3, $((2 * GiB + GiB / 2 + GiB / 4)))" "graph: 2 captures, 3 captured allocations of 2.75 GiB"
is "$(json $TMP/graph.json 'p["events"]["captured_frees"], p["events"]["captured_frees_outside"], p["events"]["graph_frees"]')" \
    "(3, 1, 1)" "graph: 3 captured frees, 1 of memory allocated outside a graph; 1 free of graph memory outside its graph"
is "$(json $TMP/graph.json 'd[0]["headroom"]["min_free_bytes"]')" $((24 * GiB - 448 * 1048576 - GiB - 2 * GiB)) \
    "graph: the lowest free memory, the driver's, holds the graph pool's 2 GiB"
tr '\n' ' ' <$TMP/graph.txt | sed 's/  */ /g' >$TMP/graph.flat
grep -q '3 allocations (2.75 GiB) made as nodes of CUDA graphs (captured, or added by hand) held no memory then' $TMP/graph.flat &&
    grep -q '1 free made as a graph node names memory allocated outside a graph: a launch frees it, unseen' $TMP/graph.flat &&
    grep -q ', 3 allocs and 3 frees as CUDA graph nodes' $TMP/graph.flat
is "$?" 0 "graph: the text says what the captured calls held and which free it cannot place"
"$VT" dump $TMP/graph/*.vtrace | grep -c 'flags=.*captured' >$TMP/graph.dump
is "$(cat $TMP/graph.dump)" 6 "graph: dump names the 6 captured calls"
"$VT" replay --capacity 2GiB $TMP/graph >$TMP/graph.replay 2>&1
grep -q 'failed' $TMP/graph.replay
is "$?" 1 "graph: replay on a 2 GiB card replays no captured allocation"

# ---- a graph launch the graph pool cannot grow for fails for lack of
# memory; no event recorded it, and the report said NO SPILL. Only failed
# launches are written: the small graph's two launches are no events. ----
run graph-oom graph-oom
is "$(tr '\n' ' ' <$TMP/graph-oom.out)" "malloc=0 stream=0 rt-stream=0 small-graph=0 launch=0 launch=0 big-graph=0 launch=2 rt-launch=2 used-high=0 " \
    "graph-oom: the small graph's launches succeed, the 8 GiB graph's fail (CUDA_ERROR_OUT_OF_MEMORY)"
is "$(json $TMP/graph-oom.json 'p["verdict"], p["spill"]["kind"], p["spill"]["event"]["api"], p["spill"]["event"]["bytes"]')" \
    "('failed', 'graph_launch', 'cuGraphLaunch', 0)" "graph-oom: OUT OF MEMORY, tipped by the failed launch, of no size the trace holds"
is "$(json $TMP/graph-oom.json 'p["events"]["graph_launch_failures"], p["events"]["graph_launch_oom"], p["apis"]["cuGraphLaunch"]["failed"]')" \
    "(2, 2, 2)" "graph-oom: both failed launches recorded (cuGraphLaunch and the runtime's cudaGraphLaunch), none that succeeded"
is "$(json $TMP/graph-oom.json 'd[0]["peak"]["tracked_bytes"], p["events"]["captured_allocs"], p["spill"]["device_state"]["tracked_bytes"]')" \
    "($((20 * GiB)), 2, $((20 * GiB)))" "graph-oom: a peak of the 20 GiB held, 2 captured allocations, 20 GiB tracked at the failure"
is "$(json $TMP/graph-oom.json 'p["spill"]["device_state"]["headroom_bytes"]')" $((24 * GiB - 448 * 1048576 - 20 * GiB - GiB / 4)) \
    "graph-oom: free then is the driver's after the failure: the card less the context, the 20 GiB and the graph pool's 256 MiB"
tr '\n' ' ' <$TMP/graph-oom.txt | sed 's/  */ /g' >$TMP/graph-oom.flat
grep -q 'VERDICT: OUT OF MEMORY. A launch of a CUDA graph failed for lack of memory on GPU 0 (vramtrace sim GPU (24 GiB)): the driver.s graph pool could not grow to hold the graph.s allocations.' $TMP/graph-oom.flat &&
    grep -q "Tipped by: cuGraphLaunch failed (CUDA_ERROR_OUT_OF_MEMORY) at [^;]*; the size of the graph's allocations is not in the trace; 20.00 GiB was tracked and about 3.31 GiB free then." $TMP/graph-oom.flat &&
    grep -q ', 2 graph launches failed (a launch is recorded when it fails, and the first to succeed after one)' $TMP/graph-oom.flat
is "$?" 0 "graph-oom: the text names the failed launch and says what the trace cannot size"
# The graph pool, as the driver reported it: the shim's samples after each
# failure (reserved: the small graph's 256 MiB, kept by the pool) and the
# program's own USED_MEM_HIGH query (256 MiB, during its launches).
is "$(json $TMP/graph-oom.json 'd[0]["headroom"]["graph_pool"]')" \
    "{'reports': 2, 'reserved_max_bytes': $((GiB / 4)), 'reserved_last_bytes': $((GiB / 4)), 'used_max_bytes': $((GiB / 4))}" \
    "graph-oom: the graph pool's reports: 256 MiB reserved, 256 MiB used at most"
grep -q "the largest of the driver's 2 reports on that pool was 256.0 MiB" $TMP/graph-oom.flat &&
    grep -q 'graph pool 256.0 MiB most reported, last 256.0 MiB' $TMP/graph-oom.flat
is "$?" 0 "graph-oom: the text says what the driver reported of the graph pool"
grep -q 'SMOKING GUN\|More VRAM needed\|NO SPILL' $TMP/graph-oom.flat
is "$?" 1 "graph-oom: no fragmentation claim, no shortfall, no NO SPILL from a launch of unknown size"
"$VT" report --fail-on-spill $TMP/graph-oom >/dev/null 2>&1
is "$?" 1 "graph-oom: --fail-on-spill fails the run"
"$VT" dump $TMP/graph-oom/*.vtrace | grep -c '^event .*api=cuGraphLaunch .*result=2 ' >$TMP/graph-oom.dump
is "$(cat $TMP/graph-oom.dump)" 2 "graph-oom: dump shows the 2 failed launches and no other"

# ---- a graph launch that failed for lack of memory, then launched again
# with success once memory was freed: the first success after the failure
# is recorded (the others are not), and the verdict is NEAR SPILL ----
run graph-relaunch graph-relaunch
is "$(tr '\n' ' ' <$TMP/graph-relaunch.out)" "malloc=0 stream=0 big-graph=0 launch=2 free=0 launch=0 launch=0 launch=0 " \
    "graph-relaunch: the launch fails while the 20 GiB is held, then succeeds three times"
is "$(json $TMP/graph-relaunch.json 'p["verdict"], p["spill"]["kind"], p["events"]["graph_launch_oom"], p["events"]["graph_launches_after_failure"], p["events"]["graph_launch_recovered"]')" \
    "('near_spill', 'graph_launch', 1, 1, 1)" "graph-relaunch: NEAR SPILL: the failed launch was followed by one that succeeded"
"$VT" dump $TMP/graph-relaunch/*.vtrace | awk '/^event .*api=cuGraphLaunch / { for (i = 1; i <= NF; i++) if ($i ~ /^result=/) r = r " " $i } END { print r }' >$TMP/graph-relaunch.dump
is "$(cat $TMP/graph-relaunch.dump)" " result=2 result=0" "graph-relaunch: the failed launch and the first success after it, and no other"
tr '\n' ' ' <$TMP/graph-relaunch.txt | sed 's/  */ /g' >$TMP/graph-relaunch.flat
grep -q 'VERDICT: NEAR SPILL. A launch of a CUDA graph failed for lack of memory on GPU 0 (vramtrace sim GPU (24 GiB)), then a launch succeeded at [0-9]* ms: nothing left VRAM' $TMP/graph-relaunch.flat
is "$?" 0 "graph-relaunch: the text says the launch failed, then one succeeded"
grep -q 'and no launch succeeded after it' $TMP/graph-oom.flat
is "$?" 0 "graph-oom: the text says no launch succeeded after the failure"

done_testing
