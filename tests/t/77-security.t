#!/bin/sh
# What the shim writes and reads, for an attacker who shares the machine.
#  - Trace files are 0600 and a created directory 0700, whatever the umask.
#  - Nothing planted at the trace path is followed or overwritten: a
#    symlink (to a file, or dangling), a hard link, a FIFO (which would
#    block an open without O_EXCL), a regular file.
#  - Directory components ARE followed: VRAMTRACE_DIR is the user's own
#    choice, like any output path; only the file the shim creates is
#    protected. An existing directory is used with the mode it has.
#  - The shim opens nothing the program does not, beyond: the libraries it
#    dlopens (libzstd, libunwind and their dependencies), /proc/self, the
#    ELF files of loaded modules and their separate debug files under
#    /usr/lib/debug (for symbol names), and its own trace file. Its only
#    other input is its environment (VRAMTRACE_*). See tests/fault/README.md.
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT

D=$TMP/new
(umask 0; shimmed $TMP/out $D $FP pairs 10)
is "$(stat -c %a $D)" 700 "umask 0: a created VRAMTRACE_DIR is still 0700"
is "$(stat -c %a $D/*.vtrace)" 600 "umask 0: the trace file is still 0600"

# plant KIND: runs the program through a shell that first plants KIND at
# the exact path the trace will take (its pid is the shell's, kept by exec).
plant() {
    kind=$1 D=$TMP/plant-$1; mkdir -p $D
    echo precious >$TMP/victim-$kind
    # timeout: a FIFO opened without O_EXCL would block forever.
    shimmed $TMP/out $D timeout 20 sh -c "
        t=$D/faultprog.\$\$.vtrace
        case $kind in
            symlink) ln -s $TMP/victim-$kind \$t;;
            dangling) ln -s $TMP/created-by-shim-$kind \$t;;
            hardlink) ln $TMP/victim-$kind \$t;;
            fifo) mkfifo \$t;;
            file) cp $TMP/victim-$kind \$t;;
        esac
        exec $FP pairs 10"
}
for kind in symlink dangling hardlink fifo file; do
    plant $kind
    is "$(cat $TMP/out.rc)" 0 "planted $kind: program ran (no hang, no error)"
    is "$(cat $TMP/victim-$kind)" precious "planted $kind: the victim is untouched"
    check "planted $kind: nothing created through it" test ! -e $TMP/created-by-shim-$kind
    is "$(find $TMP/plant-$kind -name '*.vtrace' -type f -newer $TMP/victim-$kind -perm 600 | wc -l)" 1 \
        "planted $kind: the trace went to a fresh 0600 file beside it"
done

# Directory components: followed, documented.
mkdir -p $TMP/real $TMP/dirs
ln -s $TMP/real $TMP/dirs/link
shimmed $TMP/out $TMP/dirs/link/sub $FP pairs 10
is "$(ls $TMP/real/sub/*.vtrace 2>/dev/null | wc -l)" 1 "a symlinked directory component is followed (the user's own path)"
mkdir -m 0777 $TMP/open
shimmed $TMP/out $TMP/open $FP pairs 10
is "$(stat -c %a $TMP/open)" 777 "an existing directory keeps its mode (the shim creates, never chmods)"
is "$(stat -c %a $TMP/open/*.vtrace)" 600 "in a world-writable directory the trace is still 0600"

# What the shim opens beyond what the program opens.
if command -v strace >/dev/null && strace -qq -o /dev/null true 2>/dev/null; then
    D=$TMP/st; mkdir $D
    env -u LD_PRELOAD LD_LIBRARY_PATH=$SIM strace -f -qq -e trace=open,openat -o $TMP/plain.st $FP pairs 10 >/dev/null
    env LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SP" VRAMTRACE_DIR=$D \
        strace -f -qq -e trace=open,openat -o $TMP/shim.st $FP pairs 10 >/dev/null
    paths() { grep -o 'open[a-z]*([^"]*"[^"]*"' "$1" | sed 's/.*"\([^"]*\)"$/\1/' | sort -u; }
    paths $TMP/plain.st >$TMP/plain.paths
    paths $TMP/shim.st >$TMP/shim.paths
    comm -13 $TMP/plain.paths $TMP/shim.paths >$TMP/extra
    exe=$(readlink -f $FP)
    # (A TSan build's runtime maps its own /tmp/tsan.rodata.PID.)
    grep -v -E "^(/proc/self/.*|/proc/[0-9]+/.*|/usr/lib/debug/.*|$D/.*|.*/lib[a-z0-9_+-]*\.so(\.[0-9]+)*|$exe|$SHIM${VT_SANITIZE:+|/tmp/tsan\.rodata\.[0-9]+})\$" \
        $TMP/extra >$TMP/unexpected
    is "$(wc -l <$TMP/unexpected)" 0 "the shim opens only its libraries, /proc/self, module ELF files and its trace"
    sed 's/^/#   unexpected: /' $TMP/unexpected
    sed 's/^/#   shim opened: /' $TMP/extra
else
    skip "strace missing or not permitted here"
fi
done_testing
