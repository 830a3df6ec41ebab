#!/bin/sh
# A service hardened with systemd's SystemCallFilter=@system-service: any
# system call outside that set kills the process with SIGSYS (unless the
# unit also sets SystemCallErrorNumber=). The shim called mincore, which
# the set lacks, twice: in the writer, to size the vdso's image, and
# through libunwind, which tests its stack page with mincore when it
# starts. A traced service was killed at its first stack. Now the first is
# vt_readable (rt_sigprocmask, in the set) and libunwind's mincore import
# is the shim's, answered the same way (preload/unwind_fds.c). Every run
# here is under tests/shim/refuse --allow with systemd 252's set
# (tests/shim/system-service.syscalls).
. tests/t/lib.sh
. tests/fault/lib.sh
case "${VT_SANITIZE:-}" in
*thread*|*address*)
    echo "1..0 # SKIP a sanitizer's runtime makes system calls of its own, outside the set"
    exit 0;;
esac
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
ALLOW="$B/tests/shim/refuse --allow $ROOT/tests/shim/system-service.syscalls --"

# The filter is real: the interpreter runs under it, and a call outside
# the set kills it.
PY=$(python3 -c 'import sys; print(sys.executable)')
mincore_probe='import ctypes, mmap, sys
libc = ctypes.CDLL(None)
m = mmap.mmap(-1, 4096)
page = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.from_buffer(m)))
if sys.argv[1] == "call":
    libc.mincore(page, 4096, ctypes.create_string_buffer(1))'
$ALLOW "$PY" -c "$mincore_probe" skip >/dev/null 2>&1
is "$?" 0 "the filter lets the interpreter run"
$ALLOW "$PY" -c "$mincore_probe" call >/dev/null 2>&1
is "$?" 159 "the filter kills a call outside the set (mincore: SIGSYS, exit 159)"

for unwind in fp uncached check; do
    plain $TMP/plain-$unwind $ALLOW $FP pairs 2000
    mkdir $TMP/$unwind
    VRAMTRACE_UNWIND=$unwind shimmed $TMP/out-$unwind $TMP/$unwind $ALLOW $FP pairs 2000
    unchanged $TMP/plain-$unwind $TMP/out-$unwind "VRAMTRACE_UNWIND=$unwind: 2000 pairs under the filter, as without the shim (exit $(cat $TMP/out-$unwind.rc))"
    f=$(ls $TMP/$unwind/*.vtrace 2>/dev/null | head -1)
    end=$("$VT" dump "$f" 2>/dev/null | sed -n 's/^end t=[0-9]* \(events=[0-9]* dropped=[0-9]*\).*/\1/p')
    case "$end" in
    "events="*" dropped=0") ok "VRAMTRACE_UNWIND=$unwind: the trace is whole ($end)";;
    *) nok "VRAMTRACE_UNWIND=$unwind: the trace is whole"; echo "#   got '$end'";;
    esac
    check "VRAMTRACE_UNWIND=$unwind: its frames are named" sh -c "\"$VT\" dump \"$f\" | grep -q '^frame .*pairs_main'"
done

# The shim's other ways under the same filter: its fallbacks where unshare
# is refused (EPERM, as in a container) and where process_vm_readv is,
# the trace ended by exec, a ggml program's records.
plain $TMP/plain-shared $ALLOW $FP pairs 500
mkdir $TMP/shared
shimmed $TMP/out-shared $TMP/shared $B/tests/shim/refuse --allow $ROOT/tests/shim/system-service.syscalls unshare -- $FP pairs 500
unchanged $TMP/plain-shared $TMP/out-shared "unshare refused too: the shared descriptor table's fallback under the filter (exit $(cat $TMP/out-shared.rc))"
plain $TMP/plain-exec $ALLOW $FP image 20 execv
mkdir $TMP/exec
shimmed $TMP/out-exec $TMP/exec $ALLOW $FP image 20 execv
unchanged $TMP/plain-exec $TMP/out-exec "exec under the filter, both images traced (exit $(cat $TMP/out-exec.rc))"
is "$(ls $TMP/exec | wc -l)" 2 "exec under the filter: two traces"

# A Python program: the frame reader's safe reads (process_vm_readv, in
# the set).
D=$TMP/py
mkdir $D
PYTHONPATH=$ROOT/tests/python:$ROOT/examples/python LD_LIBRARY_PATH=$SIM $ALLOW "$PY" $ROOT/tests/python/vllm_like.py >$D/plain 2>&1
echo $? >$D/plain.rc
PYTHONPATH=$ROOT/tests/python:$ROOT/examples/python LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SHIM_PRELOAD" VRAMTRACE_DIR=$D \
    VRAMTRACE_UNWIND=check $ALLOW "$PY" $ROOT/tests/python/vllm_like.py >$D/out 2>$D/out.err
echo $? >$D/out.rc
unchanged $D/plain $D/out "python under the filter, VRAMTRACE_UNWIND=check: as without the shim (exit $(cat $D/out.rc))"
check "python under the filter: Python frames in the trace" sh -c "\"$VT\" dump --stacks $D/*.vtrace | grep -q ' py:run_worker'"
mkdir $D/norv
PYTHONPATH=$ROOT/tests/python:$ROOT/examples/python LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SHIM_PRELOAD" VRAMTRACE_DIR=$D/norv \
    $B/tests/shim/refuse --allow $ROOT/tests/shim/system-service.syscalls process_vm_readv -- "$PY" $ROOT/tests/python/vllm_like.py \
    >$D/norv.out 2>$D/norv.err
echo $? >$D/norv.out.rc
unchanged $D/plain $D/norv.out "python, process_vm_readv refused too: the frame reader's fallback under the filter"
check "python, process_vm_readv refused: Python frames in the trace" sh -c "\"$VT\" dump --stacks $D/norv/*.vtrace | grep -q ' py:run_worker'"
# A filter that kills for process_vm_readv (an allowlist without it): under
# any filter the frame reader does without it from the start; it was killed
# at its first Python frame.
mkdir $D/killrv
PYTHONPATH=$ROOT/tests/python:$ROOT/examples/python LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SHIM_PRELOAD" VRAMTRACE_DIR=$D/killrv \
    $B/tests/shim/refuse --allow $ROOT/tests/shim/system-service.syscalls '!process_vm_readv' -- "$PY" $ROOT/tests/python/vllm_like.py \
    >$D/killrv.out 2>$D/killrv.err
echo $? >$D/killrv.out.rc
unchanged $D/plain $D/killrv.out "python, a filter that kills for process_vm_readv: as without the shim (exit $(cat $D/killrv.out.rc))"
check "python, process_vm_readv fatal: Python frames in the trace" sh -c "\"$VT\" dump --stacks $D/killrv/*.vtrace | grep -q ' py:run_worker'"
done_testing
