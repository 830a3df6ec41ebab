#!/bin/sh
# make install with PREFIX/DESTDIR, and the installed record finding its shim.
. tests/t/lib.sh
D=$(tmpdir)
make -s --no-print-directory install DESTDIR=$D PREFIX=/opt/vt >$D/log 2>&1
is "$?" 0 "make install DESTDIR PREFIX"
for f in bin/vramtrace lib/vramtrace/libvramtrace.so share/man/man1/vramtrace.1 include/vramtrace/trace_format.h; do
    check "installed $f" test -f $D/opt/vt/$f
done
is "$($D/opt/vt/bin/vramtrace --version)" "vramtrace 0.1.0" "installed vramtrace --version"
TR=$D/traces
LD_LIBRARY_PATH=$SIM $D/opt/vt/bin/vramtrace record -o $TR -- $B/tests/shim/paths runtime >$D/out 2>&1
is "$?" 0 "installed record runs the program and returns its status"
is "$(ls $TR/*.vtrace | wc -l)" 1 "installed record found the installed shim and traced"
check "installed record prints the report command" grep -q "report $TR" $D/out
done_testing
