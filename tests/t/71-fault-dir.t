#!/bin/sh
# VRAMTRACE_DIR the shim cannot use: a file, a missing parent, a dangling
# symlink, a device, /proc, a read-only mount, a directory the user may not
# write. Each time the program's stdout and exit status are the same as
# without the shim, the shim says why once on stderr, and writes nothing.
# (51-shim-process.t covers a file as a parent component.)
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'umount "$TMP/ro" 2>/dev/null; rm -rf "$TMP"' EXIT
plain $TMP/plain $FP pairs 50

cannot_use() {   # cannot_use DESC DIR
    shimmed $TMP/out "$2" $FP pairs 50
    unchanged $TMP/plain $TMP/out "$1: program unchanged"
    is "$(grep -c '^vramtrace:' $TMP/out.err)" 1 "$1: said once on stderr"
    grep '^vramtrace:' $TMP/out.err | sed 's/^/#   /'
}

touch $TMP/file
cannot_use "a regular file" $TMP/file
is "$(wc -c <$TMP/file)" 0 "a regular file: left empty"

cannot_use "missing parent" $TMP/missing/a/b
check "missing parent: nothing created" test ! -e $TMP/missing

ln -s $TMP/nowhere $TMP/dangling
cannot_use "a dangling symlink" $TMP/dangling
check "a dangling symlink: its target is not created" test ! -e $TMP/nowhere

cannot_use "a character device" /dev/null
cannot_use "/proc/self" /proc/self
cannot_use "a path through a device" /dev/null/sub

mkdir $TMP/ro
if mount -t tmpfs -o ro,size=64k tmpfs $TMP/ro 2>/dev/null; then
    cannot_use "a read-only file system" $TMP/ro
    is "$(ls -A $TMP/ro | wc -l)" 0 "a read-only file system: nothing written"
    umount $TMP/ro
else
    skip "cannot mount a read-only tmpfs here (not root, or no mount permission)"
fi

# Permissions: root ignores them, so ask an unprivileged user to try.
NOBODY=$(id -u nobody 2>/dev/null)
if [ "$(id -u)" = 0 ] && [ -n "$NOBODY" ] && command -v setpriv >/dev/null &&
   setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups test -x $FP 2>/dev/null; then
    mkdir -m 0555 $TMP/locked
    chmod 0755 $TMP
    # env -u LD_PRELOAD: setpriv itself runs untraced.
    as_nobody() { setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$@"; }
    as_nobody env LD_LIBRARY_PATH=$SIM $FP pairs 50 >$TMP/np 2>/dev/null; echo $? >$TMP/np.rc
    as_nobody env LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SP" VRAMTRACE_DIR=$TMP/locked $FP pairs 50 \
        >$TMP/nout 2>$TMP/nout.err; echo $? >$TMP/nout.rc
    unchanged $TMP/np $TMP/nout "a directory the user cannot write: program unchanged"
    is "$(grep -c '^vramtrace:' $TMP/nout.err)" 1 "a directory the user cannot write: said once on stderr"
    is "$(ls -A $TMP/locked | wc -l)" 0 "a directory the user cannot write: nothing written"
else
    skip "needs root, a 'nobody' user, setpriv, and a build nobody can run"
fi

# A directory name longer than the shim keeps: it falls back to "." and
# says so (run in a scratch directory, so "." is that one).
mkdir $TMP/cwd
long=$TMP/$(printf 'd%.0s' $(seq 1 500))
(cd $TMP/cwd && shimmed $TMP/out "$long" $FP pairs 50)
unchanged $TMP/plain $TMP/out "an over-long VRAMTRACE_DIR: program unchanged"
check "an over-long VRAMTRACE_DIR: said on stderr" grep -q "VRAMTRACE_DIR" $TMP/out.err
is "$(ls $TMP/cwd/*.vtrace 2>/dev/null | wc -l)" 1 "an over-long VRAMTRACE_DIR: traced into ."

# A relative VRAMTRACE_DIR (and the default, .) and a program that changes
# its working directory after its first CUDA call, then forks: the
# child's trace went into a directory it created under the new one (a
# daemon's chdir("/") would have put it in /). Now the directory is the
# one the first CUDA call saw, in the child too.
# (Not under a sanitizer: fork in a process the sanitizer runs threads in.)
case "${VT_SANITIZE:-}" in
*thread*|*address*) skip "fork under a sanitizer"; skip "fork under a sanitizer";;
*)
    for dir in traces .; do
        rm -rf $TMP/cw; mkdir -p $TMP/cw/elsewhere
        plain $TMP/plain-cw $FP chdirfork $TMP/cw/elsewhere
        (cd $TMP/cw && shimmed $TMP/out-cw $dir $FP chdirfork $TMP/cw/elsewhere)
        got=$(cd $TMP/cw && find . -name '*.vtrace' | sed 's/[0-9]*\.vtrace$//' | sort | tr '\n' ' ')
        want=$([ $dir = . ] && echo "./faultprog. ./faultprog. " || echo "./traces/faultprog. ./traces/faultprog. ")
        if cmp -s $TMP/plain-cw $TMP/out-cw && [ "$got" = "$want" ]; then
            ok "VRAMTRACE_DIR=$dir, chdir then fork: both traces where the first CUDA call was, none in the new directory"
        else
            nok "VRAMTRACE_DIR=$dir, chdir then fork: both traces where the first CUDA call was"; echo "#   got '$got'"
        fi
    done;;
esac
done_testing
