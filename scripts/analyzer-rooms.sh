#!/bin/sh
# Checks that each analyzer room includes only headers of its own room or
# of rooms before it (analyzer/analyzer.mk lists them in data-flow order).
# Prints one line per offending include; exit 1 when there is any.
cd "$(dirname "$0")/.." || exit 2
ROOMS="base reader symbols model pipeline output commands"
rank() { i=0; for r in $ROOMS; do [ "$r" = "$1" ] && { echo $i; return; }; i=$((i + 1)); done; echo -1; }
bad=0
for room in $ROOMS; do
    me=$(rank "$room")
    for f in analyzer/"$room"/*.c analyzer/"$room"/*.h; do
        [ -e "$f" ] || continue
        for h in $(sed -n 's/^#include "\([^"/]*\.h\)".*/\1/p' "$f"); do
            where=$(cd analyzer && ls */"$h" 2>/dev/null | head -1)
            [ -n "$where" ] || continue   # include/vramtrace or a system header
            hr=$(rank "${where%%/*}")
            if [ "$hr" -gt "$me" ]; then
                echo "$f includes $where (a later room)"
                bad=1
            fi
        done
    done
done
exit $bad
