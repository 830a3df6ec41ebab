#!/bin/sh
# Who the real function is: another interposer after the shim, two
# runtimes in one process, a vendored runtime under another name, a runtime
# unloaded and loaded again elsewhere, and a second copy of the shim. In
# each the program's output must be what it is without the shim, and the
# calls are recorded once.
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
F=$B/tests/fault
SC=$F/scope
QUOTA=$F/libquota.so
GiB=1073741824

# ---- a quota interposer preloaded after the shim (HAMi-core from
# /etc/ld.so.preload): the plain run is the run with the quota alone ----
for mode in linked dlsym procaddr; do
    D=$TMP/quota-$mode; mkdir $D
    LD_LIBRARY_PATH=$SIM LD_PRELOAD=$QUOTA $F/quotaprog $mode >$TMP/plain 2>&1; echo $? >$TMP/plain.rc
    PRELOAD="$SP $QUOTA" shimmed $TMP/out $D $F/quotaprog $mode
    unchanged $TMP/plain $TMP/out "quota after the shim ($mode): every result as with the quota alone"
    sed 's/^/#   /' $TMP/out
    cp $TMP/plain $TMP/plain-$mode
done
is "$(sed -n 's/^linked cuMemAlloc_v2(2 GiB)=//p' $TMP/plain-linked)" 2 "quota alone: a linked 2 GiB request is refused"
is "$(sed -n 's/^dlsym(libcuda) cuMemAlloc_v2(2 GiB)=//p' $TMP/plain-dlsym)" 0 "quota alone: the driver's own cuMemAlloc_v2 (dlsym) allocates 2 GiB"
is "$(cat $TMP/plain-procaddr)" "linked cuGetProcAddress_v2(cuMemAlloc)=0, 2 GiB through it=2
dlsym(libcuda) cuGetProcAddress_v2 found, (cuMemAlloc)=0, 2 GiB through it=0" \
    "quota alone: its cuGetProcAddress_v2 hands out its cuMemAlloc_v2, the driver's its own"
"$VT" dump $TMP/quota-linked/*.vtrace >$TMP/dump
is "$(count_events $TMP/dump cuMemAlloc_v2 2147483648 2)" 1 "quota (linked): the refused 2 GiB cuMemAlloc_v2 is recorded with the quota's answer"
"$VT" dump $TMP/quota-dlsym/*.vtrace >$TMP/dump
is "$(count_events $TMP/dump cuMemAlloc_v2 2147483648 0)" 1 "quota (dlsym): the 2 GiB allocation through dlsym(libcuda) is recorded, made by the driver"
is "$(count_events $TMP/dump cuMemAlloc_v2 1048576 0)" 1 "quota (dlsym): the linked 1 MiB one too"
"$VT" dump $TMP/quota-procaddr/*.vtrace >$TMP/dump
is "$(count_events $TMP/dump cuMemAlloc_v2 2147483648 2) $(count_events $TMP/dump cuMemAlloc_v2 2147483648 0)" "1 1" \
    "quota (cuGetProcAddress): the quota's refusal and the driver's allocation both recorded"

# ---- two runtimes, each an extension's own (RTLD_LOCAL) ----
D=$TMP/runtimes; mkdir $D
plain $TMP/plain $SC/scopeprog runtimes $SC
shimmed $TMP/out $D $SC/scopeprog runtimes $SC
unchanged $TMP/plain $TMP/out "two runtimes: each extension's cudaMalloc runs in its own runtime"
grep 'last error' $TMP/out | sed 's/^/#   /'
"$VT" dump $D/*.vtrace >$TMP/dump
is "$(count_events $TMP/dump cudaMalloc 1048576 0)" 2 "two runtimes: both 1 MiB cudaMallocs recorded"
is "$(count_events $TMP/dump cudaMalloc 1152921504606846976 2)" 2 "two runtimes: both failed ones recorded"

# ---- the same, the .so.13 one global and called before the .so.12 one
# is loaded ----
D=$TMP/late; mkdir $D
plain $TMP/plain $SC/scopeprog late $SC
shimmed $TMP/out $D $SC/scopeprog late $SC
unchanged $TMP/plain $TMP/out "a runtime loaded after the first call, another global: its extension's cudaMalloc runs in it"
grep 'last error' $TMP/out | sed 's/^/#   /'

# ---- the same, the .so.12 extension's first call made by its constructor,
# inside the dlopen that loads its runtime: no dlsym comes first to make
# the shim look again; its dlopen does ----
D=$TMP/ctor; mkdir $D
plain $TMP/plain $SC/scopeprog ctor $SC
shimmed $TMP/out $D $SC/scopeprog ctor $SC
unchanged $TMP/plain $TMP/out "a runtime loaded after the first call, called from its extension's constructor: the call runs in it"
grep 'constructor' $TMP/out | sed 's/^/#   /'

# ---- a vendored runtime under its own name (PyTorch wheels), RTLD_LOCAL ----
D=$TMP/vendored; mkdir $D
plain $TMP/plain $SC/scopeprog vendored $SC
shimmed $TMP/out $D $SC/scopeprog vendored $SC
unchanged $TMP/plain $TMP/out "vendored runtime: cudaMalloc and dlsym(RTLD_DEFAULT) answer as without the shim"
sed 's/^/#   /' $TMP/out
"$VT" dump $D/*.vtrace >$TMP/dump
is "$(count_events $TMP/dump cudaMalloc 1048576 0)" 2 "vendored runtime: the linked call and the one through dlsym(RTLD_DEFAULT) recorded"

# ---- the runtime unloaded and loaded again at another address ----
D=$TMP/reload; mkdir $D
plain $TMP/plain $SC/scopeprog reload $SC
shimmed $TMP/out $D $SC/scopeprog reload $SC
is "$(grep -c 'runtime moved: yes' $TMP/plain)" 1 "reload: the runtime comes back at another address"
unchanged $TMP/plain $TMP/out "reload: the second load's cudaMalloc runs in the new copy (no SIGSEGV)"
"$VT" dump $D/*.vtrace >$TMP/dump
is "$(count_events $TMP/dump cudaMalloc 1048576 0)" 2 "reload: both loads' cudaMallocs recorded"

# ---- two copies of ggml (two addons), the second with another buffer
# layout; no CUDA call at all ----
D=$TMP/ggml; mkdir $D
plain $TMP/plain $SC/scopeprog ggml $SC
shimmed $TMP/out $D $SC/scopeprog ggml $SC
unchanged $TMP/plain $TMP/out "two ggml copies: each addon's set_usage runs in its own ggml"
sed 's/^/#   /' $TMP/out
"$VT" dump $D/*.vtrace >$TMP/dump 2>/dev/null
is "$(grep -c '^ggml_buffer .* usage=WEIGHTS .* size=\(4096\|8192\|12288\) name="CPU" host=yes' $TMP/dump)" 3 \
    "two ggml copies: each buffer recorded with its own size, read by its own ggml's getters"

# ---- a second copy of the shim at another path ----
mkdir $TMP/copy
cp "$SHIM" $TMP/copy/libvramtrace.so
D=$TMP/two; mkdir $D
plain $TMP/plain $F/quotaprog linked
PRELOAD="${VT_SAN_RT:+$VT_SAN_RT }$TMP/copy/libvramtrace.so $SHIM" shimmed $TMP/out $D $F/quotaprog linked
unchanged $TMP/plain $TMP/out "two copies of the shim: program unchanged"
is "$(ls $D | grep -c '\.vtrace$')" 1 "two copies of the shim: one trace"
"$VT" dump $D/*.vtrace >$TMP/dump
is "$(count_events $TMP/dump cuMemAlloc_v2 2147483648 0)" 1 "two copies of the shim: the call recorded once"
is "$(grep -c 'another copy of the shim' $TMP/out.err)" 1 "two copies of the shim: the later one says once that it passes through"
D=$TMP/owntag; mkdir $D
PRELOAD="${VT_SAN_RT:+$VT_SAN_RT }$F/libowntag.so $SHIM" shimmed $TMP/out $D $F/quotaprog linked
is "$(ls $D | grep -c '\.vtrace$')" 1 "a library with its own vramtrace_tag_push before the shim is no copy of it: traced"
D=$TMP/record; mkdir $D
LD_LIBRARY_PATH=$SIM LD_PRELOAD="${VT_SAN_RT:+$VT_SAN_RT }$TMP/copy/libvramtrace.so" "$VT" record -o $D -- $F/quotaprog linked >$TMP/out 2>$TMP/out.err
is "$?" 0 "record with another copy of the shim in LD_PRELOAD: runs"
is "$(ls $D | grep -c '\.vtrace$')" 1 "record with another copy of the shim in LD_PRELOAD: one trace"
is "$(grep -c '2 processes\|2 traces' $TMP/out.err $TMP/out | awk -F: '{ s += $2 } END { print s }')" 0 "record: the report counts one process"

# ---- a library loaded with RTLD_DEEPBIND: its own scope (the runtime and
# the driver it links) comes before the preload in its lookups. Its
# cudaMalloc and cuMemAlloc_v2 went straight to them: no trace at all. The
# program's output, and which of two deep_whoami the library reaches (its
# own under RTLD_DEEPBIND), stay as without the shim. libdeep_many.so has
# 70 more libraries in its group than the shim settles: the library and
# the first of its group are settled. ----
for lib in lazy now many; do
    for how in deep local; do
        if [ -n "${VT_SANITIZE:-}" ]; then
            # The sanitizers' runtimes refuse a dlopen with RTLD_DEEPBIND.
            for i in 1 2 3 4 5 6; do skip "deepbind ($lib, $how): the sanitizer refuses RTLD_DEEPBIND"; done
            continue
        fi
        D=$TMP/deepbind-$lib-$how; mkdir $D
        plain $TMP/deep.plain $SC/scopeprog deepbind $SC libdeep_$lib.so $how
        shimmed $TMP/deep.out $D $SC/scopeprog deepbind $SC libdeep_$lib.so $how
        unchanged $TMP/deep.plain $TMP/deep.out "deepbind ($lib binding, $how): output and exit status unchanged"
        want="the library's own"; [ $how = local ] && want="the program's"
        is "$(sed -n 's/^deep_whoami: //p' $TMP/deep.out)" "$want" "deepbind ($lib, $how): the library's other calls bind as the loader bound them"
        "$VT" dump $D/*.vtrace >$TMP/dump 2>/dev/null
        is "$(count_events $TMP/dump cudaMalloc $GiB 0) $(count_events $TMP/dump cuMemAlloc_v2 $((2 * GiB)) 0)" "1 1" \
            "deepbind ($lib, $how): the 1 GiB cudaMalloc and the 2 GiB cuMemAlloc_v2 are recorded, once each"
        is "$(count_events $TMP/dump cuMemAlloc_v2 $((GiB / 2)) 0)" 1 \
            "deepbind ($lib, $how): the 512 MiB cuMemAlloc_v2 through the library's own dlsym of libcuda is recorded"
        is "$(count_events $TMP/dump cudaFree) $(count_events $TMP/dump cuMemFree_v2)" "1 2" "deepbind ($lib, $how): and their frees"
        "$VT" report --json $D >$TMP/deep.json 2>/dev/null
        is "$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["processes"][0]; print(p["devices"][0]["peak"]["tracked_bytes"])' $TMP/deep.json)" \
            $((3 * GiB)) "deepbind ($lib, $how): peak 3 GiB"
    done
done
done_testing
