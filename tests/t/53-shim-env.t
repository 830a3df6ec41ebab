#!/bin/sh
# Every VRAMTRACE_* variable the shim reads is in the README's table with
# the shim's own default, and nothing in the table is unknown to the shim.
. tests/t/lib.sh
shim_vars=$(grep -o '"VRAMTRACE_[A-Z_]*"' preload/options.c | tr -d '"' | sort -u)
readme_vars=$(sed -n 's/^| `\(VRAMTRACE_[A-Z_]*\)` |.*/\1/p' README.md | grep -v VRAMTRACE_RULES | sort -u)
is "$readme_vars" "$shim_vars" "README's environment table lists exactly the shim's variables"
for v in $shim_vars; do
    case $v in
        VRAMTRACE_DIR) want=. ;;
        VRAMTRACE_RING) want=65536 ;;
        VRAMTRACE_UNWIND) want=libunwind ;;
        *) want=$(grep -A0 "\"$v\"" preload/options.c | sed -n 's/.*"'$v'", *[a-z_]*, *\([0-9]*\),.*/\1/p') ;;
    esac
    got=$(sed -n 's/^| `'$v'` | `\([^`]*\)` |.*/\1/p' README.md)
    is "$got" "$want" "README default of $v matches the shim"
done
done_testing
