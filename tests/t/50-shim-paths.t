#!/bin/sh
# The shim sees every allocation however the program reached the driver:
# linked calls, dlopen+dlsym, cuGetProcAddress (v2, and v1 on an older
# driver), and the runtime API. Exact events per path and flavour, each with
# the test's own function in its stack.
. tests/t/lib.sh
P=$B/tests/shim/paths
G=2097152   # the simulated granularity

run_mode() {   # run_mode MODE [ENV...]: leaves $D/dump
    D=$(tmpdir)
    mode=$1; shift
    env LD_LIBRARY_PATH=${SIMDIR:-$SIM} LD_PRELOAD="$SHIM_PRELOAD" "$@" VRAMTRACE_DIR=$D $P $mode >$D/out 2>$D/err
    echo $? >$D/rc
    set -- $D/*.vtrace
    NTRACES=$#
    $VT dump --stacks "$1" >$D/dump 2>$D/dump.err
}
expect() {    # expect API SIZE COUNT
    is "$(count_events $D/dump "$1" "$2" 0)" "$3" "$mode: $3 x $1 size=${2:-any}"
}
in_stack() {  # in_stack API SIZE FUNCTION
    if stack_of $D/dump "$1" "$2" | grep -q " $3 "; then ok "$mode: $1 stack has $3"
    else nok "$mode: $1 stack has $3"; stack_of $D/dump "$1" "$2" | sed 's/^/#  /'; fi
}

run_mode linked
is "$(cat $D/rc)" 0 "linked: program ran unchanged"
is "$NTRACES" 1 "linked: one trace file"
expect cuMemAlloc_v2 4097 1
expect cuMemAllocPitch_v2 3000 1
expect cuMemFree_v2 "" 3
expect cuMemAllocAsync 8193 1
expect cuMemAllocAsync_ptsz 12289 1
expect cuMemAllocFromPoolAsync 16385 1
expect cuMemFreeAsync "" 2
expect cuMemFreeAsync_ptsz "" 1
expect cuMemAddressReserve $((8 * G)) 1
expect cuMemCreate $((2 * G)) 1
expect cuMemMap $((2 * G)) 1
expect cuMemUnmap $((2 * G)) 1
expect cuMemRelease "" 1
expect cuMemAddressFree $((8 * G)) 1
expect cuMemAllocManaged 20481 1
expect cuMemAllocHost_v2 24577 1
expect cuMemHostAlloc 28673 1
expect cuMemHostRegister_v2 32769 1
expect cuMemHostUnregister "" 1
expect cuMemFreeHost "" 2
expect cuMemPoolCreate "" 1
expect cuMemPoolTrimTo 0 1
expect cuMemPoolDestroy "" 1
expect cuMemGetInfo_v2 "" 1
is "$(grep meminfo $D/out)" "$(LD_LIBRARY_PATH=$SIM $P linked | grep meminfo)" "linked: meminfo(NULL, &total) answers as without the shim"
in_stack cuMemAlloc_v2 4097 linked_device
in_stack cuMemAllocAsync_ptsz 12289 linked_async
in_stack cuMemCreate $((2 * G)) linked_vmm
in_stack cuMemHostAlloc 28673 linked_host
in_stack cuMemAlloc_v2 4097 main
check "linked: device record for ordinal 0" grep -q "^device ordinal=0 total=25769803776 " $D/dump
check "linked: process record names the program" grep -q "^process .*exe=$P " $D/dump
check "linked: clean end record" grep -q "^end " $D/dump

# Frame-pointer unwinding (opt-in): same events, same test frames.
run_mode linked VRAMTRACE_UNWIND=fp
is "$(cat $D/rc)" 0 "linked, VRAMTRACE_UNWIND=fp: program ran unchanged"
expect cuMemAlloc_v2 4097 1
in_stack cuMemAlloc_v2 4097 linked_device
in_stack cuMemAlloc_v2 4097 main
in_stack cuMemHostAlloc 28673 linked_host

for m in dlsym procaddr; do
    run_mode $m
    is "$(cat $D/rc)" 0 "$mode: program ran unchanged"
    expect cuMemAlloc_v2 45057 1
    expect cuMemAllocAsync_ptsz 49153 1
    expect cuMemAllocHost_v2 53249 1
    expect cuMemAllocManaged 57345 1
    expect cuMemFreeAsync "" 1
    expect cuMemFreeHost "" 1
    expect cuMemFree_v2 "" 2
    expect cuMemGetInfo_v2 "" 1
    in_stack cuMemAlloc_v2 45057 looked_up_calls
done

# Another interposer preloaded before us (HAMi-core's libvgpu.so) defines
# cuMemAlloc_v2 and calls the driver directly: linked calls go to it and
# past us, but the pointers we hand out through dlsym and cuGetProcAddress
# must still be our wrappers, never its preempting definition.
INTERPOSED="${VT_SAN_RT:+$VT_SAN_RT }$B/tests/shim/libinterposer.so $SHIM"
run_mode linked LD_PRELOAD="$INTERPOSED"
is "$(cat $D/rc)" 0 "interposer first, linked: program ran unchanged"
check "interposer first, linked: its cuMemAlloc_v2 took the linked call" grep -q "interposer: cuMemAlloc_v2 calls=1$" $D/err
expect cuMemAlloc_v2 4097 0
for m in dlsym procaddr; do
    run_mode $m LD_PRELOAD="$INTERPOSED"
    is "$(cat $D/rc)" 0 "interposer first, $mode: program ran unchanged"
    check "interposer first, $mode: its cuMemAlloc_v2 was not handed out" grep -q "interposer: cuMemAlloc_v2 calls=0$" $D/err
    expect cuMemAlloc_v2 45057 1
    expect cuMemAllocAsync_ptsz 49153 1
    in_stack cuMemAlloc_v2 45057 looked_up_calls
done

# A driver older than CUDA 12 has no cuGetProcAddress_v2: the v1 route.
SIMDIR=$B/sim-nov2 run_mode procaddr
is "$(cat $D/rc)" 0 "procaddr on a pre-12 driver: program ran unchanged"
check "procaddr on a pre-12 driver: used cuGetProcAddress" grep -q "procaddr: cuGetProcAddress$" $D/out
expect cuMemAlloc_v2 45057 1
expect cuMemAllocAsync_ptsz 49153 1

run_mode runtime
is "$(cat $D/rc)" 0 "runtime: program ran unchanged"
expect cudaMalloc 86017 1
expect cudaMallocPitch 4000 1
expect cudaMallocHost 90113 1
expect cudaHostAlloc 94209 1
expect cudaMallocManaged 98305 1
expect cudaMallocAsync 102401 1
expect cudaMallocFromPoolAsync 106497 1
expect cudaMemGetInfo "" 1
expect cudaHostRegister 114689 1
expect cudaHostUnregister "" 1
expect cudaFreeAsync "" 2
expect cudaFree "" 3
expect cudaFreeHost "" 2
# One event per runtime call: the driver calls underneath fold into it.
expect cuMemAlloc_v2 "" 0
expect cuMemAllocAsync "" 0
expect cuMemFree_v2 "" 0
in_stack cudaMalloc 86017 runtime_calls

run_mode legacy
is "$(cat $D/rc)" 0 "legacy: program ran unchanged"
# The 32-bit cuMemAlloc is recorded under its own name, and the
# cuMemFree_v2 of its address matches it.
expect cuMemAlloc "" 1
expect cuMemAlloc_v2 "" 0
expect cuMemFree_v2 "" 1
is "$(count_events $D/dump cuMemAlloc 126977 0)" 1 "legacy: cuMemAlloc recorded with its size"
check "legacy: the free matched it (no stack: a known pointer)" grep -q "api=cuMemFree_v2 .*result=0 stack=0" $D/dump

run_mode oom
is "$(cat $D/rc)" 0 "oom: program got its error unchanged"
is "$(count_events $D/dump cudaMalloc 1125899906842624 2)" 1 "oom: the failed request is an event with its size and result"
check "oom: a meminfo sample follows the failure" grep -q "flags=.*after_failure" $D/dump
# Pool slack: what stream-ordered pools hold beyond their allocations,
# sampled by the shim with every free-memory sample (tests/shim/paths.c
# pool_slack_run: 20 MiB at the 48 MiB peak). SAMPLE_MS=0: peak samples only.
run_mode pool VRAMTRACE_SAMPLE_MS=0
is "$(cat $D/rc)" 0 "pool: program ran unchanged"
is "$(cat $D/out)" "used high 50331648" "pool: the program's own query answered unchanged"
samples=$(grep -c "^event .*api=cuMemPoolGetAttribute .*flags=sample|at_peak" $D/dump)
is "$samples" 10 "pool: reserved+used of each pool seen, at each of the 4 peak samples (the current pool from the last)"
check "pool: the last peak sample has the explicit pool's 64 MiB reserved" \
    grep -q "api=cuMemPoolGetAttribute .* size=67108864 reserved=0 aux=0x5 flags=sample|at_peak" $D/dump
is "$(count_events $D/dump cuMemPoolGetAttribute 50331648 0)" 1 "pool: the program's USED_MEM_HIGH query is an event with its value"
check "pool: an int attribute is recorded without its value" \
    grep -q "api=cuMemPoolGetAttribute .* size=0 reserved=0 aux=0x2 flags=0 " $D/dump
$VT report --json $D/*.vtrace >$D/json
is "$(grep -o '"pool_slack_bytes": [0-9a-z]*' $D/json)" '"pool_slack_bytes": 20971520' "pool: report's pool slack at peak is 20 MiB"
is "$(grep -o '"pool_slack_max_bytes": [0-9]*' $D/json)" '"pool_slack_max_bytes": 20971520' "pool: and its most is 20 MiB"
apis=$(python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["processes"][0]["apis"]; print(a.get("cuMemPoolGetAttribute", {}).get("calls"), "cuMemGetInfo_v2" in a)' $D/json)
is "$apis" "2 False" "pool: apis counts the program's 2 queries, not the shim's samples"
$VT report --wide $D/*.vtrace >$D/text
check "pool: the text report says it" grep -q "pool slack  *20.0 MiB held by stream-ordered pools" $D/text
$VT report --html $D/report.html $D/*.vtrace >/dev/null
check "pool: so does the HTML report" grep -q "pool slack</td><td class=\"n\">20.0 MiB" $D/report.html
run_mode runtime
$VT report --json $D/*.vtrace >$D/json
is "$(grep -o '"pool_slack_bytes": [0-9a-z]*' $D/json)" '"pool_slack_bytes": null' "no pools: pool slack is null"

# The rule cache serves libunwind's stacks; uncached asks libunwind for
# every frame: the same frames, named the same, on every event.
frames() { sed -n 's/^    #\([0-9]*\) 0x[0-9a-f]* /\1 /p' "$1"; }
U=$(tmpdir)
run_mode linked; frames $D/dump >$U/cached
run_mode linked VRAMTRACE_UNWIND=uncached; frames $D/dump >$U/uncached
check "VRAMTRACE_UNWIND=uncached: the same $(wc -l <$U/cached) frames as the cached default" cmp -s $U/cached $U/uncached
is "$(grep -c ' main ' $U/uncached)" "$(grep -c '^event .* stack=[1-9]' $D/dump)" "VRAMTRACE_UNWIND=uncached: every stack recorded reaches main"

done_testing
