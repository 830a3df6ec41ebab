#!/bin/sh
# Secure execution: a setuid-root or file-capability program run by an
# unprivileged user who sets VRAMTRACE_DIR. The loader ignores an LD_PRELOAD
# path there, but the shim still arrives as a dependency (or through
# /etc/ld.so.preload): it traced, creating a root-owned trace file in the
# directory the caller chose. Now a process with AT_SECURE is never traced.
# Needs root (to make the setuid copy), setpriv and a C compiler.
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
skip_all() { for i in $(seq 1 9); do skip "$*"; done; done_testing; exit 0; }
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null || [ -n "$SANITIZED" ]; then
    skip_all "needs root, setpriv and an unsanitized build"
fi
CC=${CC:-cc}
command -v "${CC%% *}" >/dev/null || skip_all "no C compiler ($CC) to link the privileged copies of faultprog"
# Setuid and file capabilities do nothing on a nosuid mount: no AT_SECURE.
case ",$(findmnt -no OPTIONS --target "$TMP" 2>/dev/null)," in
    *,nosuid,*) skip_all "$TMP is on a nosuid mount (set TMPDIR elsewhere)" ;;
esac
chmod 755 $TMP
NOBODY="setpriv --reuid=65534 --regid=65534 --clear-groups"
# A secure-execution process ignores LD_LIBRARY_PATH and $ORIGIN and finds
# its libraries by absolute RUNPATH only. The build tree may be out of
# nobody's reach (a clone under a 0700 directory, such as mktemp -d's), so
# the privileged copies are linked from faultprog.o with a RUNPATH into
# copies of the shim and the simulated runtime and driver (which need
# nothing but libc) under $TMP.
LIB=$TMP/lib BIN=$TMP/bin
mkdir $LIB $BIN && chmod 755 $LIB $BIN
cp $SHIM $SIM/libcudart.so.13 $SIM/libcuda.so.1 $LIB/ && chmod 755 $LIB/*
# link_faultprog OUT LDFLAGS...: as tests/fault/fault.mk links faultprog.
link_faultprog() {
    out=$1; shift
    $CC -o $out $FP.o "$@" -L$SIM -Wl,--enable-new-dtags -Wl,-rpath,$LIB -lcudart -lcuda -ldl -pthread 2>$TMP/link.err
}
if ! link_faultprog $BIN/plain || ! link_faultprog $BIN/linked -L$B -Wl,--no-as-needed -l:libvramtrace.so; then
    nok "$CC links faultprog.o with RUNPATH $LIB"; sed 's/^/#   /' $TMP/link.err
    done_testing; exit
fi
if ! $NOBODY sh -c "test -r '$LIB/libvramtrace.so' && test -x '$BIN/plain'" 2>/dev/null; then
    skip_all "user nobody cannot reach $TMP (a parent directory is not searchable by others; set TMPDIR elsewhere)"
fi
# as_nobody OUT DIR BINARY ARGS...: runs a privileged copy as nobody, in DIR
# (VRAMTRACE_DIR too), with the shim preloaded as well.
as_nobody() {
    out=$1 dir=$2; shift 2
    (cd $dir && $NOBODY env -u LD_LIBRARY_PATH LD_PRELOAD=$LIB/libvramtrace.so VRAMTRACE_DIR=$dir "$@" >$out 2>$out.err; echo $? >$out.rc)
}
cp $BIN/plain $BIN/plain-setuid && chmod 4755 $BIN/plain-setuid
cp $BIN/linked $BIN/linked-setuid && chmod 4755 $BIN/linked-setuid
cp $BIN/linked $BIN/linked-caps && setcap cap_net_bind_service+ep $BIN/linked-caps 2>/dev/null
$NOBODY env -u LD_PRELOAD -u LD_LIBRARY_PATH $BIN/plain pairs 500 >$TMP/plain 2>$TMP/plain.err; echo $? >$TMP/plain.rc
# Two copies that cannot start at all would compare equal.
if [ "$(cat $TMP/plain.rc)" != 0 ]; then
    nok "nobody runs the unprivileged copy $BIN/plain"; sed 's/^/#   /' $TMP/plain.err
    done_testing; exit
fi

for how in plain-setuid linked-setuid linked-caps; do
    if [ $how = linked-caps ] && ! getcap $BIN/linked-caps | grep -q cap_net_bind_service; then
        for i in 1 2 3; do skip "setcap does not work on this file system"; done
        continue
    fi
    D=$TMP/attacker-$how; mkdir $D && chown 65534:65534 $D
    as_nobody $TMP/$how.out $D $BIN/$how pairs 500
    unchanged $TMP/plain $TMP/$how.out "$how run by nobody: output unchanged"
    is "$(ls -A $D | wc -l)" 0 "$how run by nobody: no file in the caller's VRAMTRACE_DIR"
    is "$(grep -c vramtrace $TMP/$how.out.err)" 0 "$how run by nobody: nothing said on stderr"
done
done_testing
