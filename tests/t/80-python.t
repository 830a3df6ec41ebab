#!/bin/sh
# Python frames, built-in Python rules, the annotation API and NVTX ranges,
# on the simulated GPU. Python programs shaped like a vLLM worker and like
# transformers' generate reach the driver through ctypes (which releases
# the GIL); the stacks must carry their Python names merged where the
# interpreter's eval frames were, and the report must tag the exact bytes
# each program says it allocated.
#
# Runs with python3 and every other CPython 3.10-3.13 it finds: python3.1X
# on PATH, pyenv's versions, and VT_TEST_PYTHONS (a list of interpreters).
. tests/t/lib.sh
PYDIR=$ROOT/tests/python
FAKETORCH=$B/tests/python/libfaketorch.so
export FAKETORCH

# ---- which interpreters ----
cands="python3 ${VT_TEST_PYTHONS:-}"
for v in 10 11 12 13; do cands="$cands python3.$v"; done
if command -v pyenv >/dev/null 2>&1; then
    for p in "$(pyenv root 2>/dev/null)"/versions/3.1[0-3]*/bin/python3; do cands="$cands $p"; done
fi
PYS=""; SEEN=""
for c in $cands; do
    exe=$("$c" -c 'import sys, ctypes; print(sys.executable if sys.version_info[:2] >= (3, 10) and sys.version_info[:2] <= (3, 13) else "")' 2>/dev/null) || continue
    [ -n "$exe" ] || continue
    real=$(readlink -f "$exe")
    case " $SEEN " in *" $real "*) continue;; esac
    SEEN="$SEEN $real"; PYS="$PYS $exe"
done
if [ -z "$PYS" ]; then
    echo "1..0 # SKIP no CPython 3.10-3.13 with ctypes"
    exit 0
fi

# run_py DIR PY SCRIPT [ENV...]: runs SCRIPT under the shim, leaves DIR/out,
# DIR/dump (with stacks) and DIR/json.
run_py() {
    d=$1 py=$2 script=$3; shift 3
    env "$@" PYTHONPATH=$PYDIR:$ROOT/examples/python LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SHIM_PRELOAD" VRAMTRACE_DIR=$d \
        "$py" "$PYDIR/$script" >$d/out 2>$d/err
    echo $? >$d/rc
    set -- $d/*.vtrace
    $VT dump --stacks "$1" >$d/dump 2>/dev/null
    $VT report --json "$1" >$d/json 2>/dev/null
}
# tag_bytes JSON [RULES...]: "TAG=BYTES ..." summed over the report's sites.
tag_bytes() {
    python3 -c '
import json, sys
t = {}
for p in json.load(open(sys.argv[1]))["processes"]:
    for s in p["sites"]:
        t[s["tag"]] = t.get(s["tag"], 0) + s["total_bytes"]
print(" ".join("%s=%d" % kv for kv in sorted(t.items())))' "$1"
}
# frame_index DUMP API SIZE PATTERN: the frame number (#N) of the first
# frame matching PATTERN in that event's stack, or "none".
frame_index() {
    stack_of "$1" "$2" "$3" | grep -E "$4" | head -1 | sed -n 's/^ *#\([0-9]*\) .*/\1/p' | grep . || echo none
}
# want TAGS_LINE: "weights=N kv=N scratch=N" -> sorted "kv=N scratch=N weights=N"
sorted_tags() { echo "$1" | tr ' ' '\n' | grep . | sort | tr '\n' ' ' | sed 's/ $//'; }

MiB=1048576
for PY in $PYS; do
    ver=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    P="py$ver"

    # ---- vLLM-shaped worker ----
    D=$(tmpdir)
    run_py $D "$PY" vllm_like.py VRAMTRACE_DEPTH=256
    is "$(cat $D/rc)" 0 "$P vllm: program ran unchanged under the shim"
    # The run without the shim still needs a sanitized build's runtime
    # first: the simulated GPU's libraries are instrumented too.
    is "$(cat $D/out)" "$(PYTHONPATH=$PYDIR LD_LIBRARY_PATH=$SIM LD_PRELOAD="${VT_SAN_RT:-}" "$PY" $PYDIR/vllm_like.py)" \
       "$P vllm: same output as without the shim"
    check "$P vllm: note says Python frames are on for CPython $ver" \
        grep -q "^note .*python frames: on, CPython $ver," $D/dump
    kv=$((6 * MiB))
    for name in "py:cuda_malloc" "py:torch_empty" "py:[^ ]*_allocate_kv_cache_tensors" "py:(GPUModelRunner\.)?initialize_kv_cache" \
                "py:(Worker\.)?initialize_cache" "py:run_worker"; do
        if stack_of $D/dump cudaMalloc $kv | grep -Eq " $name"; then ok "$P vllm: KV stack has $name"; else
            nok "$P vllm: KV stack has $name"; stack_of $D/dump cudaMalloc $kv | sed 's/^/#  /'; fi
    done
    # Merged at the eval frames: ctypes' native frames inside, the thread's
    # start outside, no eval frame left.
    ffi=$(frame_index $D/dump cudaMalloc $kv ' ffi_call ')
    pyf=$(frame_index $D/dump cudaMalloc $kv 'py:[^ ]*_allocate_kv_cache_tensors')
    top=$(frame_index $D/dump cudaMalloc $kv ' start_thread ')
    check "$P vllm: Python frames sit between ffi_call (#$ffi) and start_thread (#$top): #$pyf" \
        test "$ffi" != none -a "$pyf" != none -a "$top" != none -a "$ffi" -lt "$pyf" -a "$pyf" -lt "$top"
    is "$(stack_of $D/dump cudaMalloc $kv | grep -c '_PyEval_EvalFrameDefault')" 0 \
       "$P vllm: every eval frame was replaced by its Python frames"
    check "$P vllm: frame names are py:QUALNAME (FILE:LINE)" \
        grep -Eq 'py:(GPUModelRunner\.)?_allocate_kv_cache_tensors\\x20\(/.*/vllm_like\.py:73\)' $D/dump
    want=$(sed -n 's/^\(weights=.*\)/\1/p' $D/out)
    is "$(tag_bytes $D/json)" "$(sorted_tags "$want")" "$P vllm: report tags the exact bytes ($want)"

    # --cpu-offload-gb's shape: 2 of 4 layers' weights pinned by
    # maybe_offload_to_cpu inside load_model, nothing failing. The report
    # says PARTIAL OFFLOAD from the tagged allocations, without layers.
    O=$(tmpdir)
    run_py $O "$PY" vllm_like.py VLLM_CPU_OFFLOAD_LAYERS=2
    is "$(cat $O/rc)/$(sed -n 's/^offloaded=//p' $O/out)" "0/$((16 * MiB))" "$P vllm cpu offload: 16 MiB of weights pinned"
    is "$(python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))["processes"][0]
pl = p["placement"]
print(p["verdict"], pl["source"], pl["weights"]["gpu_bytes"], pl["weights"]["host_bytes"], pl["layers"])' $O/json)" \
       "partial_offload allocations $((16 * MiB)) $((16 * MiB)) None" \
       "$P vllm cpu offload: PARTIAL OFFLOAD, 16 MiB of weights on the GPU and 16 MiB pinned, layers unknown"
    $VT report --wide $O/*.vtrace >$O/txt 2>/dev/null
    check "$P vllm cpu offload: the verdict says the program chose it and that layers are not named" \
        grep -q "which layers they hold, the trace does not say" $O/txt
    is "$($VT report --fail-on-spill $O/*.vtrace >/dev/null 2>&1; echo $?)/$($VT report --fail-on-spill --accept-offload $O/*.vtrace >/dev/null 2>&1; echo $?)" \
       "1/0" "$P vllm cpu offload: --fail-on-spill fails it, --accept-offload lets the planned offload pass"
    rm -rf $O

    # Native stack cut at 8 frames: the Python frames still all come, at
    # the outer end.
    D=$(tmpdir)
    run_py $D "$PY" vllm_like.py VRAMTRACE_DEPTH=8
    check "$P vllm depth 8: the KV stack still has run_worker" \
        sh -c "grep -A40 'api=cudaMalloc .* size=$kv ' $D/dump | grep -q ' py:run_worker'"
    is "$(tag_bytes $D/json)" "$(sorted_tags "$want")" "$P vllm depth 8: same tags"

    # A user rule with a bare Python name, and one with a qualname.
    printf 'warmup profile_run\ngraphs GPUModelRunner.capture_model\n' >$D/rules
    got=$($VT report --json --rules $D/rules $D/*.vtrace | python3 -c '
import json, sys
t = {}
for p in json.load(sys.stdin)["processes"]:
    for s in p["sites"]:
        t[s["tag"]] = t.get(s["tag"], 0) + s["total_bytes"]
print(t.get("warmup", 0), t.get("graphs", 0))')
    if [ "$ver" = 3.10 ]; then
        # 3.10 code objects have no qualname: only bare names match.
        is "$got" "$((7 * MiB)) 0" "$P rules: bare name matches; 3.10 has no qualname to match"
    else
        is "$got" "$((7 * MiB)) $((1 * MiB))" "$P rules: a bare Python name and a qualname match user rules"
    fi

    # ---- transformers-shaped generate, through PyTorch-shaped allocator frames ----
    D=$(tmpdir)
    run_py $D "$PY" transformers_like.py VRAMTRACE_DEPTH=256
    is "$(cat $D/rc)" 0 "$P transformers: program ran unchanged"
    want=$(sed -n 's/^\(weights=.*\)/\1/p' $D/out)
    if [ "$ver" = 3.10 ]; then
        # 3.10 frames have no class: StaticCache.*, DynamicCache.update and
        # Module._apply cannot match; from_pretrained and forward can.
        is "$(tag_bytes $D/json)" "scratch=$((14 * MiB)) unknown=$((14 * MiB)) weights=$((12 * MiB))" \
           "$P transformers: only class-free rules match on 3.10"
    else
        is "$(tag_bytes $D/json)" "$(sorted_tags "$want")" "$P transformers: report tags the exact bytes ($want)"
    fi
    s=$(stack_of $D/dump cuMemCreate $((2 * MiB)))
    # (dump shows symbol names as they are in the ELF: mangled)
    if echo "$s" | grep -q 'c10.*cuda.*CUDACachingAllocator.*Native.*ExpandableSegment.*map' &&
       echo "$s" | grep -Eq 'py:(StaticCache\.)?__init__'; then ok "$P transformers: cuMemCreate stack: ExpandableSegment::map then StaticCache"
    else nok "$P transformers: cuMemCreate stack: ExpandableSegment::map then StaticCache"; echo "$s" | sed 's/^/#  /'; fi
    s=$(stack_of $D/dump cudaMallocAsync $((3 * MiB / 2)))
    if echo "$s" | grep -q 'CudaMallocAsyncAllocator.*malloc' && echo "$s" | grep -Eq 'py:(LlamaAttention\.)?forward'; then
        ok "$P transformers: cudaMallocAsync stack: CudaMallocAsyncAllocator then forward"
    else nok "$P transformers: cudaMallocAsync stack: CudaMallocAsyncAllocator then forward"; echo "$s" | sed 's/^/#  /'; fi

    # ---- the Python annotation helper ----
    D=$(tmpdir)
    run_py $D "$PY" annotate_like.py
    want=$(sed -n 's/^\(weights=.*\)/\1/p' $D/out)
    is "$(tag_bytes $D/json)" "$(sorted_tags "$want")" "$P annotate: tag() blocks tag the exact bytes ($want)"
    check "$P annotate: RANGE records for the blocks" grep -q '^range .* push name="tag:my_phase"' $D/dump
done

# ---- a seccomp policy that refuses process_vm_readv ----
# The frame reader's fallback was a pipe made for each read: two
# descriptors in the program's table meanwhile. Now it asks the kernel
# whether the memory is readable and copies it; here any pipe at all kills
# the process (SIGSYS), and the frames must be the same as without the
# policy.
set -- $PYS
PY=$1
D=$(tmpdir)
run_py $D "$PY" vllm_like.py VRAMTRACE_DEPTH=256
R=$(tmpdir)
PYTHONPATH=$PYDIR:$ROOT/examples/python LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SHIM_PRELOAD" VRAMTRACE_DIR=$R VRAMTRACE_DEPTH=256 \
    $B/tests/shim/refuse process_vm_readv '!pipe2' '!pipe' -- "$PY" "$PYDIR/vllm_like.py" >$R/out 2>$R/err
echo $? >$R/rc
is "$(cat $R/rc)" 0 "process_vm_readv refused, pipes fatal: the program ran (no pipe made)"
is "$(cat $R/out)" "$(cat $D/out)" "process_vm_readv refused: same output"
$VT dump --stacks $R/*.vtrace >$R/dump 2>/dev/null
kv=$((6 * MiB))
a=$(stack_of $D/dump cudaMalloc $kv | grep -o ' py:[^ ]*' | tr '\n' ' ')
b=$(stack_of $R/dump cudaMalloc $kv | grep -o ' py:[^ ]*' | tr '\n' ' ')
check "process_vm_readv refused: the KV stack has the same Python frames ($(echo "$a" | wc -w) of them)" \
    test -n "$a" -a "$a" = "$b"
rm -rf $D $R

# ---- fork: the child's trace has its own note and Python frames ----
# (Not under ThreadSanitizer: no thread may start after a threaded fork.)
if [ "${VT_SANITIZE:-}" = thread ]; then
    T=$((T+1)); echo "ok $T # SKIP TSan does not support threads started after fork"
else
    D=$(tmpdir)
    PYTHONPATH=$PYDIR LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SHIM_PRELOAD" VRAMTRACE_DIR=$D python3 -c '
import os, sys
from simcuda import cuda_malloc
def load_weights(n): cuda_malloc(n)
load_weights(1 << 20)
pid = os.fork()
if pid == 0:
    load_weights(2 << 20)
    sys.exit(0)   # not os._exit: the shim writes its last chunk at exit
os.waitpid(pid, 0)
'
    n=0
    for f in $D/*.vtrace; do
        $VT dump --stacks $f >$f.dump
        if grep -q '^note .*python frames: on' $f.dump && grep -q ' py:load_weights' $f.dump; then n=$((n+1)); fi
    done
    is "$n" 2 "fork: parent and child traces each have the note and Python frames"
fi

# ---- the C annotation API ----
D=$(tmpdir)
under_shim $D $B/tests/python/annotate_app >$D/out 2>$D/err
is "$(cat $D/out)" "push 0 1 pop 1 0 extra -1" "annotate C: push/pop return depths, an extra pop -1"
is "$(LD_LIBRARY_PATH=$SIM $B/tests/python/annotate_app)" "push -1 -1 pop -1 -1 extra -1" \
   "annotate C: without the shim every call is a no-op returning -1"
$VT dump --stacks $D/*.vtrace >$D/dump
$VT report --json $D/*.vtrace >$D/json
is "$(tag_bytes $D/json)" "kv=$((5 * MiB)) unknown=$((3 * MiB)) weights=$((3 * MiB))" \
   "annotate C: nested tags, the inner one decides; custom and untagged are unknown"
is "$(stack_of $D/dump cudaMalloc $MiB | grep -c 'tag:')" 0 "annotate C: another thread's open tag does not leak"
printf 'phase tag:custom*\n' >$D/rules
is "$($VT report --json --rules $D/rules $D/*.vtrace | python3 -c '
import json, sys
print(sum(s["total_bytes"] for p in json.load(sys.stdin)["processes"] for s in p["sites"] if s["tag"] == "phase"))')" \
   "$((2 * MiB))" "annotate C: a user rule on tag:NAME"
is "$(grep -c '^range ' $D/dump)" 6 "annotate C: three pushes and three pops in the timeline"

# ---- NVTX through the toolkit's own loader ----
D=$(tmpdir)
under_shim $D $B/tests/python/nvtx_app >$D/out 2>$D/err
is "$(cat $D/out)" "depths 0 0 1" "nvtx: the program got NVTX's depths"
$VT dump --stacks $D/*.vtrace >$D/dump
is "$(stack_of $D/dump cudaMalloc $((4 * MiB)) | grep -c 'nvtx:load\\x20weights')" 1 \
   "nvtx: a range pushed before the first CUDA call is in the stack (injection path set at load)"
s=$(stack_of $D/dump cudaMalloc $MiB | grep -o 'nvtx:[^ ]*' | tr '\n' ' ')
is "$s" "nvtx:NCCL/AllReduce nvtx:prefill " "nvtx: domain range with a registered string inside an attribute range, innermost first"
is "$(stack_of $D/dump cudaMalloc $((6 * MiB)) | grep -c 'nvtx:wide\\x20range')" 1 "nvtx: a wide-character range"
is "$(grep -c '^range ' $D/dump)" 8 "nvtx: four pushes and four pops, the early one included"
check "nvtx: the early push keeps its own time" grep -q '^range t=-[0-9]* .* push name="nvtx:load weights"' $D/dump
D=$(tmpdir)
NVTX_INJECTION64_PATH=/nonexistent/lib.so under_shim $D $B/tests/python/nvtx_app >$D/out 2>$D/err
is "$(cat $D/out)" "depths -2 -2 -2" "nvtx: a path the user set is kept (here it loads nothing: NVTX's -2)"
$VT dump --stacks $D/*.vtrace >$D/dump
is "$(grep -c 'nvtx:' $D/dump)" 0 "nvtx: no ranges then"

# Only the copy in the program's global scope takes the injection: another
# interposer preloaded before the shim that defines a wrapped name
# (HAMi-core: cuMemAlloc_v2) changes nothing; a copy NVTX loads itself, in
# a child that inherited the variable but not the preload, declines (the
# sanitized shim cannot be loaded without its runtime first: not there).
D=$(tmpdir)
LD_LIBRARY_PATH=$SIM LD_PRELOAD="${VT_SAN_RT:+$VT_SAN_RT }$B/tests/shim/libinterposer.so $SHIM" VRAMTRACE_DIR=$D \
    $B/tests/python/nvtx_app >$D/out 2>$D/err
is "$(head -1 $D/out)" "depths 0 0 1" "nvtx: taken with another interposer preloaded first"
if [ -z "${VT_SANITIZE:-}" ]; then
    D=$(tmpdir)
    env -u LD_PRELOAD NVTX_INJECTION64_PATH=$SHIM LD_LIBRARY_PATH=$SIM VRAMTRACE_DIR=$D $B/tests/python/nvtx_app >$D/out 2>$D/err
    is "$(cat $D/out)" "depths -2 -2 -2" "nvtx: declined by a copy loaded without the preload"
    is "$(ls $D | grep -c "\.vtrace$")" 0 "nvtx: and that copy writes no trace"
fi

done_testing
