#!/bin/sh
# Tags and fork with no CUDA at all: a thread pushes and pops tags with
# names never seen before (vramtrace_tag_push, the path NVTX's push takes:
# a new name is interned under ranges.c's name_lock) while the main thread
# forks; each child pushes a new name of its own. The lock's fork handler
# was registered only once the shim recorded, which a process without CUDA
# never does: a child forked while the thread held the lock waited on it
# for ever. Now the handler is registered before the lock's first use.
. tests/t/lib.sh
. tests/fault/lib.sh
if [ "${VT_SANITIZE:-}" = thread ]; then
    echo "1..0 # SKIP TSan does not support fork in a threaded process"
    exit 0
fi
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
F=200
plain $TMP/plain timeout 300 $FP nvtxfork $F
mkdir $TMP/d
shimmed $TMP/out $TMP/d timeout 300 $FP nvtxfork $F
unchanged $TMP/plain $TMP/out "new tag names while forking $F times: every child returns ($(cat $TMP/out))"
is "$(ls $TMP/d | wc -l)" 0 "no CUDA call: no trace"
done_testing
