#!/bin/sh
# A program started with fds 0-2 closed: nothing the shim or libunwind opens
# for good may land on them (libunwind's memory-validation pipe took fds 0
# and 1, and the program read its own stdout back), whatever the unwinder.
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT

for u in default libunwind fp; do
    D=$TMP/$u.d; mkdir $D
    unwind=$([ $u = default ] || echo $u)
    FAULTPROG_OUT=$TMP/$u VRAMTRACE_UNWIND=$unwind LD_LIBRARY_PATH=$SIM LD_PRELOAD=$SP VRAMTRACE_DIR=$D \
        $FP stdfds 0<&- 1>&- 2>&-
    is "$(cat $TMP/$u)" "stdfds open=0" "fds 0-2 closed at start stay closed (VRAMTRACE_UNWIND=$unwind)"
    is "$(ls $D | wc -l)" 1 "fds 0-2 closed at start: the trace is written (VRAMTRACE_UNWIND=$unwind)"
done

# Started with fd 2 closed, the program later opens its own file on fds
# 0-2: what the shim says (here VRAMTRACE_UNWIND=check's summary at exit)
# went into the program's file. Nothing is written to fd 2 now unless it
# was open when the shim started.
D=$TMP/own.d; mkdir $D
FAULTPROG_OUT=$TMP/own FAULTPROG_OUT2=$TMP/own2 VRAMTRACE_UNWIND=check LD_LIBRARY_PATH=$SIM LD_PRELOAD=$SP \
    VRAMTRACE_DIR=$D $FP stdfds 0<&- 1>&- 2>&-
is "$(cat $TMP/own2 | tr '\n' ' ')" "own own own " "fd 2 closed at start, the program's file there later: it holds only its own lines"
done_testing
