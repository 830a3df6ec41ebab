#!/bin/sh
# Odd calls the shim must pass through unchanged and still record: frees of
# unknown pointers and double frees, cuMemGetInfo_v2 with NULL outputs, a
# driver that lacks an entry point, and allocations from a library that is
# dlclosed (and another mapped in its place) before the writer names its
# frames, or whose frames an unwinder has seen before (reload).
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT

# ---- double free, free of an unknown pointer ----
D=$TMP/badfree; mkdir $D
plain $TMP/plain $FP badfree
shimmed $TMP/out $D $FP badfree
unchanged $TMP/plain $TMP/out "bad frees: every result code unchanged"
"$VT" dump $D/*.vtrace >$TMP/dump
rt_err=$(sed -n 's/^cudaFree(unknown)=//p' $TMP/plain)
drv_err=$(sed -n 's/^cuMemFree_v2(unknown)=//p' $TMP/plain)
is "$(count_events $TMP/dump cudaFree "" $rt_err)" 2 "bad frees: cudaFree of unknown and double free recorded with result $rt_err"
is "$(count_events $TMP/dump cudaFree "" 0)" 2 "bad frees: the good cudaFree and cudaFree(NULL) recorded with result 0"
is "$(count_events $TMP/dump cuMemFree_v2 "" $drv_err)" 2 "bad frees: cuMemFree_v2 of unknown and double free recorded with result $drv_err"
is "$(count_events $TMP/dump cudaFreeHost "" $rt_err)" 1 "bad frees: cudaFreeHost of unknown recorded"
is "$(count_events $TMP/dump cuMemFreeHost "" $drv_err)" 1 "bad frees: cuMemFreeHost of unknown recorded"
"$VT" report --json $D >$TMP/report.json 2>$TMP/report.err
is "$?" 0 "bad frees: the report reads the trace"

# ---- cuMemGetInfo_v2(NULL, &total) and friends ----
D=$TMP/meminfo; mkdir $D
plain $TMP/plain $FP meminfo
shimmed $TMP/out $D $FP meminfo
unchanged $TMP/plain $TMP/out "meminfo with NULL outputs: results unchanged"
"$VT" dump $D/*.vtrace >$TMP/dump
r=$(sed -n 's/^meminfo(NULL,&total)=\([0-9]*\) .*/\1/p' $TMP/plain)
is "$(count_events $TMP/dump cuMemGetInfo_v2 "" $r)" 3 "meminfo with NULL outputs: three calls recorded with result $r"
is "$(count_events $TMP/dump cudaMemGetInfo "" "$(sed -n 's/^cudaMemGetInfo(NULL,&total)=//p' $TMP/plain)")" 1 \
    "cudaMemGetInfo(NULL, &total) recorded"

# ---- a driver that lacks an entry point (pre-12.0: no _v2 lookup, no
# cuMemAllocFromPoolAsync_ptsz) ----
D=$TMP/nov2; mkdir $D
LD_LIBRARY_PATH=$B/sim-nov2 LD_PRELOAD="$SP" VRAMTRACE_DIR=$D $FP nov2-call >$TMP/out 2>$TMP/out.err
is "$?" 0 "missing entry point: calling the shim's export does not crash"
is "$(cat $TMP/out)" "cuMemAllocFromPoolAsync_ptsz=500 ptr=0" "missing entry point: CUDA_ERROR_NOT_FOUND (500), nothing allocated"
"$VT" dump $D/*.vtrace >$TMP/dump
is "$(count_events $TMP/dump cuMemAllocFromPoolAsync_ptsz)" 0 "missing entry point: no event for a call that never reached a driver"
env -u LD_PRELOAD LD_LIBRARY_PATH=$B/sim-nov2 $FP nov2-probe >$TMP/plain
LD_LIBRARY_PATH=$B/sim-nov2 LD_PRELOAD="$SP" VRAMTRACE_DIR=$D $FP nov2-probe >$TMP/out
is "$(grep -c 'dlsym(libcuda, cuMemAllocFromPoolAsync_ptsz)=NULL' $TMP/out)" 1 "missing entry point: dlsym(libcuda handle) says NULL"
is "$(grep -c 'dlsym(libcuda, cuGetProcAddress_v2)=NULL' $TMP/out)" 1 "missing entry point: dlsym(libcuda handle, cuGetProcAddress_v2) says NULL"
is "$(cat $TMP/out)" "$(cat $TMP/plain)" "missing entry point: dlsym(RTLD_DEFAULT) answers as without the shim"
sed 's/^/#   shim:  /' $TMP/out | grep RTLD_DEFAULT | head -2

# ---- dlclose: frames named while mapped, or clearly unnamed; never
# another library's names ----
L=$B/tests/fault
A=7340033 BB=7344129   # the sizes libfaultdl_a and libfaultdl_b allocate
names() {  # names DUMP SIZE: the function names of frames #0 and #1
    stack_of "$1" cudaMalloc "$2" | head -2 | awk '{ print $3 }' | tr '\n' ' '
}
for args in "0" "300" "0 keep" "300 keep"; do
    D=$TMP/dl$(echo $args | tr -d ' '); mkdir $D
    plain $TMP/plain $FP dlclose $L $args
    shimmed $TMP/out $D $FP dlclose $L $args
    unchanged $TMP/plain $TMP/out "dlclose ($args): program unchanged"
    "$VT" dump --stacks $D/*.vtrace >$TMP/dump 2>$TMP/dump.err
    is "$?" 0 "dlclose ($args): trace reads"
    na=$(names $TMP/dump $A) nb=$(names $TMP/dump $BB)
    echo "#   a: $na  b: $nb"
    case "$na" in "faultdl_a_inner faultdl_a_alloc "|"?? ?? ") good_a=yes;; *) good_a=no;; esac
    case "$nb" in "faultdl_b_inner faultdl_b_alloc "|"?? ?? ") good_b=yes;; *) good_b=no;; esac
    is $good_a yes "dlclose ($args): library a's frames named a, or unnamed"
    is $good_b yes "dlclose ($args): library b's frames named b, or unnamed"
    # The shim's dlclose has the writer name a library's frames before it
    # goes, so none comes out unnamed either.
    is "$na" "faultdl_a_inner faultdl_a_alloc " "dlclose ($args): a's frames named before a was unloaded"
    is "$nb" "faultdl_b_inner faultdl_b_alloc " "dlclose ($args): b's frames, captured after an unload, named"
    # Where b took a's addresses, its frames differ from a's by their load
    # epoch only; every tool shows the address without it.
    same=$(awk '$4 == "base" { b[++n] = $5 } END { print (n == 2 && b[1] == b[2]) ? "yes" : "no" }' $TMP/out.err)
    [ $same = yes ] || continue
    "$VT" dump $D/*.vtrace >$TMP/raw
    is "$(grep -c '^frame .*function=faultdl_b_inner epoch=1$' $TMP/raw)" 1 "dlclose ($args): b's frame has its own FRAME record, epoch 1"
    is "$(grep -c '^frame .*function=faultdl_a_inner$' $TMP/raw)" 1 "dlclose ($args): a's frame has epoch 0"
    ia=$(stack_of $TMP/dump cudaMalloc $A | awk 'NR == 1 { print $2 }')
    ib=$(stack_of $TMP/dump cudaMalloc $BB | awk 'NR == 1 { print $2 }')
    is "$ib" "$ia" "dlclose ($args): dump shows a's and b's frame at the same address"
    "$VT" report --wide $D >$TMP/report 2>$TMP/report.err
    is "$?" 0 "dlclose ($args): report reads the trace"
    is "$(grep -c -E '#0 +faultdl_a_inner .*\[libfaultdl_a\.so\]' $TMP/report)" 1 "dlclose ($args): report names a's site in libfaultdl_a.so"
    is "$(grep -c -E '#0 +faultdl_b_inner .*\[libfaultdl_b\.so\]' $TMP/report)" 1 "dlclose ($args): report names b's site in libfaultdl_b.so"
    "$VT" report --json $D >$TMP/report.json 2>$TMP/report.err
    is "$(grep -o '"ip": *[0-9]*' $TMP/report.json | awk '{ v = $NF + 0 } v >= 2^48 { n++ } END { print n + 0 }')" 0 \
        "dlclose ($args): JSON report's ips are addresses"
done
# ---- reload: b, mapped where a was, returns from cudaMalloc at a's return
# address with another frame layout (tests/fault/faultunw.S). libunwind's
# backtrace cache, keyed by address, stepped b's frame by a's rules and read
# through the data b keeps in rbp: SIGSEGV under VRAMTRACE_UNWIND=uncached
# and check. Every unwinder must give b's own stack, and b's frames, still
# mapped at exit, are named from b (not from the modules the shim knew
# before the unload, as under VRAMTRACE_UNWIND=fp). ----
RA=5242880 RB=6291456   # the sizes libfaultunw_a and libfaultunw_b allocate
plain $TMP/plain $FP reload $L 0 keep
for mode in libunwind uncached check fp; do
    D=$TMP/reload-$mode; mkdir $D
    export VRAMTRACE_UNWIND=$mode
    shimmed $TMP/out $D $FP reload $L 0 keep
    unset VRAMTRACE_UNWIND
    unchanged $TMP/plain $TMP/out "reload ($mode): program unchanged, no crash"
    same=$(awk '$4 == "base" { b[++n] = $5 } END { print (n == 2 && b[1] == b[2]) ? "yes" : "no" }' $TMP/out.err)
    is "$same" yes "reload ($mode): b was mapped where a was (else this case tests nothing)"
    "$VT" dump --stacks $D/*.vtrace >$TMP/dump 2>$TMP/dump.err
    a0=$(stack_of $TMP/dump cudaMalloc $RA | head -1 | awk '{ print $3, $4 }')
    b0=$(stack_of $TMP/dump cudaMalloc $RB | head -1 | awk '{ print $3, $4 }')
    is "$a0" "faultunw_a_alloc ($L/libfaultunw_a.so)" "reload ($mode): a's frame #0 named in a"
    is "$b0" "faultunw_b_alloc ($L/libfaultunw_b.so)" "reload ($mode): b's frame #0 named in b"
    # b keeps no frame pointer: the frame-pointer walk ends at b's frame.
    b1=$(stack_of $TMP/dump cudaMalloc $RB | sed -n 2p | awk '{ print $3 }')
    is "$b1" "$([ $mode = fp ] && echo "" || echo mode_dlclose)" "reload ($mode): b's caller $([ $mode = fp ] && echo "not guessed" || echo "is faultprog's")"
    if [ $mode = check ]; then
        is "$(grep -c 'unwind check: pid' $TMP/out.err)" 0 "reload (check): the cached rules and libunwind agree on every stack"
        is "$(grep -c 'unwind check summary: .* mismatches 0$' $TMP/out.err)" 1 "reload (check): summary counts no mismatch"
    fi
done

# The check summary's counts are decimal, as tests/gpu/run.sh reads them
# (they were hex: 1000 stacks said "3e8", and 10 mismatches "a", which the
# GPU check summed as none).
mkdir $TMP/sum
VRAMTRACE_UNWIND=check shimmed $TMP/out-sum $TMP/sum $FP pairs 1000
is "$(sed -n 's/^vramtrace: unwind check summary: pid [0-9]* \(stacks .*\)/\1/p' $TMP/out-sum.err)" \
   "stacks 1000 fallbacks 0 mismatches 0" "check summary: 1000 stacks, in decimal"
done_testing
