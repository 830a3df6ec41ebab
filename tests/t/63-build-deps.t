#!/bin/sh
# Touching a header rebuilds every object and program whose source includes
# it: the compiler's own dependency files (-MMD) drive every fragment, so no
# hand list can miss one. Checked with make's what-if (-n -W HEADER):
# nothing is compiled, make only says what it would rebuild. And a build
# that is up to date stays so: it keeps every object, and `make` after
# `make test-bins` (which `make test` runs first) has nothing to do.
. tests/t/lib.sh
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT
# Objects as the build names them; a sanitized build has its own tree.
SAN=${VT_SANITIZE:-}
mk() { make --no-print-directory SANITIZE=$SAN "$@"; }

# Every source the test binaries compile: the plan with everything out of date.
mk -n -B test-bins >$D/everything 2>&1
compiled() { grep -q -E "[ ]$1( |$)" $D/everything; }
SOURCES=$(find preload analyzer tests examples -name '*.c' -o -name '*.cpp' | sort)
HEADERS="preload/*.h analyzer/*/*.h include/vramtrace/*.h include/vramtrace/*.def tests/sim/*.h"
# Header basenames found in more than one of those folders: a quoted
# include of one is resolved by -I order, so only its own folder counts.
dups=$(ls $HEADERS | sed 's|.*/||' | sort | uniq -d)

for h in $HEADERS; do
    base=${h##*/}
    dir=${h%/*}
    case $dir in
    include/*) pattern="[<\"]vramtrace/$base[>\"]" ;;
    *) pattern="\"$base\"" ;;
    esac
    users=""
    for c in $(grep -l -E "^[[:space:]]*#[[:space:]]*include[[:space:]]*$pattern" $SOURCES 2>/dev/null); do
        case " $dups " in *" $base "*) [ "${c%/*}" = "$dir" ] || continue ;; esac
        compiled "$c" && users="$users $c"
    done
    [ -n "$users" ] || continue
    mk -n -W "$h" test-bins >$D/plan 2>&1
    missing=""
    for c in $users; do
        grep -q -E "[ ]$c( |$)" $D/plan || missing="$missing $c"
    done
    is "${missing:-none}" none "touching $h rebuilds its $(echo $users | wc -w) includers"
done

# An object make takes for intermediate is deleted after the build that
# made it, and compiled again by the next. Only one make creates is
# deleted, so the plan is for an empty build tree.
mk -n B=$D/fresh test-bins >$D/fresh-plan 2>&1
is "$(grep -c '^rm ' $D/fresh-plan)" 0 "a build from scratch deletes no object as intermediate"
# -q: exit 0 only when nothing would be remade.
mk -q test-bins; is $? 0 "make test-bins after make test-bins: nothing to remake"
mk -q all; is $? 0 "make after make test-bins: nothing to remake"
done_testing
