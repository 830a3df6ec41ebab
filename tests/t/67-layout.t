#!/bin/sh
# The analyzer's rooms (analyzer/analyzer.mk, docs/architecture.md): each
# includes only headers of its own room or of rooms before it, every .c and
# .h lives in a room, and the room check itself catches a backward include.
. tests/t/lib.sh
out=$(sh scripts/analyzer-rooms.sh 2>&1)
is "$?:$out" "0:" "no analyzer file includes a header of a later room"
stray=$(ls analyzer/*.c analyzer/*.h 2>/dev/null | tr '\n' ' ')
is "$stray" "" "no analyzer source outside the rooms"
T0=$(tmpdir)
trap 'rm -rf "$T0"' EXIT
# A copy with one backward include: the check must name it.
mkdir -p "$T0/scripts"
cp scripts/analyzer-rooms.sh "$T0/scripts/"
cp -r analyzer "$T0/analyzer"
printf '#include "report.h"\n' >>"$T0/analyzer/model/model_spill.c"
got=$(sh "$T0/scripts/analyzer-rooms.sh" 2>&1)
is "$?:$got" "1:analyzer/model/model_spill.c includes pipeline/report.h (a later room)" \
   "the check names a model file that includes the pipeline's header"
done_testing
