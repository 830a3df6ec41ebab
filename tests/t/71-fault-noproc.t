#!/bin/sh
# A process that runs without /proc (a chroot, a container that does not
# mount it). The shim found the program's path and command line there
# only: the trace named no program ("==  (pid N)") and the program's own
# frames came out as bare addresses ("0x55f1d05bd7c7 [exe]"). Now the
# path is the one the process was exec'd by (AT_EXECFN), and its symbols
# are read from it. Needs unshare -m (root).
. tests/t/lib.sh
. tests/fault/lib.sh
if [ -n "${VT_SANITIZE:-}" ]; then
    echo "1..0 # SKIP a sanitizer's runtime needs /proc itself"
    exit 0
fi
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
if ! unshare -m sh -c 'umount -l /proc' 2>/dev/null; then
    for i in 1 2 3 4; do skip "unshare -m not allowed here"; done
    done_testing; exit 0
fi
export VRAMTRACE_SAMPLE_MS=0
plain $TMP/plain $FP pairs 500
mkdir $TMP/d
shimmed $TMP/out $TMP/d unshare -m sh -c "umount -l /proc && test ! -e /proc/self && exec $FP pairs 500"
unchanged $TMP/plain $TMP/out "without /proc: 500 pairs, output unchanged"
f=$(ls $TMP/d/*.vtrace)
is "$(basename $f | sed 's/\.[0-9]*\.vtrace$//')" faultprog "without /proc: the trace is named after the program"
"$VT" report --wide $f >$TMP/report 2>&1
is "$(sed -n 's/^== \([^ ]*\) (pid [0-9]*).*/\1/p' $TMP/report)" faultprog "without /proc: the report names the program"
check "without /proc: the program's own frames are named" grep -q '#0  pairs_main ' $TMP/report
done_testing
