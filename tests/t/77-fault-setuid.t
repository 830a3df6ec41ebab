#!/bin/sh
# Secure execution: a setuid-root or file-capability program run by an
# unprivileged user who sets VRAMTRACE_DIR. The loader ignores an LD_PRELOAD
# path there, but the shim still arrives as a dependency (or through
# /etc/ld.so.preload): it traced, creating a root-owned trace file in the
# directory the caller chose. Now a process with AT_SECURE is never traced.
# Needs root (to make the setuid copy) and setpriv.
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null || [ -n "$SANITIZED" ]; then
    for i in $(seq 1 9); do skip "needs root, setpriv and an unsanitized build"; done
    done_testing; exit 0
fi
chmod 755 $TMP
NOBODY="setpriv --reuid=65534 --regid=65534 --clear-groups"
# The privileged copies load the shim and the simulated CUDA libraries by
# absolute RUNPATH into the build tree, and a setuid process ignores
# LD_LIBRARY_PATH: nobody must be able to reach the build tree itself (a
# clone under a 0700 directory, such as mktemp -d's, is out of its reach).
if ! $NOBODY sh -c "test -r '$SHIM' && test -r '$SIM/libcuda.so.1' && test -x '$FP'" 2>/dev/null; then
    for i in $(seq 1 9); do skip "user nobody cannot reach the build tree $B (a parent directory is not searchable by others)"; done
    done_testing; exit 0
fi
# as_nobody OUT DIR BINARY ARGS...: runs a privileged copy as nobody, in DIR
# (VRAMTRACE_DIR too), with the shim preloaded as well.
as_nobody() {
    out=$1 dir=$2; shift 2
    (cd $dir && $NOBODY env LD_PRELOAD=$SHIM VRAMTRACE_DIR=$dir "$@" >$out 2>$out.err; echo $? >$out.rc)
}
mkdir $TMP/bin && chmod 755 $TMP/bin
cp $FP $TMP/bin/plain-setuid && chmod 4755 $TMP/bin/plain-setuid
cp $B/tests/fault/faultprog-linked $TMP/bin/linked-setuid && chmod 4755 $TMP/bin/linked-setuid
cp $B/tests/fault/faultprog-linked $TMP/bin/linked-caps && setcap cap_net_bind_service+ep $TMP/bin/linked-caps 2>/dev/null
$NOBODY env LD_LIBRARY_PATH=$SIM $FP pairs 500 >$TMP/plain 2>$TMP/plain.err; echo $? >$TMP/plain.rc

for how in plain-setuid linked-setuid linked-caps; do
    if [ $how = linked-caps ] && ! getcap $TMP/bin/linked-caps | grep -q cap_net_bind_service; then
        for i in 1 2 3; do skip "setcap does not work on this file system"; done
        continue
    fi
    D=$TMP/attacker-$how; mkdir $D && chown 65534:65534 $D
    as_nobody $TMP/$how.out $D $TMP/bin/$how pairs 500
    unchanged $TMP/plain $TMP/$how.out "$how run by nobody: output unchanged"
    is "$(ls -A $D | wc -l)" 0 "$how run by nobody: no file in the caller's VRAMTRACE_DIR"
    is "$(grep -c vramtrace $TMP/$how.out.err)" 0 "$how run by nobody: nothing said on stderr"
done
done_testing
