#!/bin/sh
# Touching a header rebuilds every object whose source includes it: the
# compiler's own dependency files (-MMD) drive every fragment, so no hand
# list can miss one. Checked with make's what-if (-n -W HEADER): nothing is
# compiled, make only says what it would rebuild.
. tests/t/lib.sh
D=$(tmpdir)
# Objects as the build names them; a sanitized build has its own tree.
SAN=${VT_SANITIZE:-}
for h in preload/*.h analyzer/*.h include/vramtrace/*.h include/vramtrace/*.def; do
    base=${h##*/}
    dir=${h%/*}
    case $dir in include/*) users=$(grep -l "[<\"]vramtrace/$base[>\"]" preload/*.c analyzer/*.c 2>/dev/null) ;;
                 *) users=$(grep -l "#include \"$base\"" $dir/*.c 2>/dev/null) ;; esac
    [ -n "$users" ] || continue
    make -n --no-print-directory SANITIZE=$SAN -W "$h" all >$D/plan 2>&1
    missing=""
    for c in $users; do
        grep -q -- "-c $c " $D/plan || missing="$missing $c"
    done
    is "${missing:-none}" none "touching $h rebuilds its $(echo $users | wc -w) includers"
done
done_testing
