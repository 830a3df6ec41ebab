#!/bin/sh
# Every VRAMTRACE_* variable the shim reads is in docs/environment.md's table with
# the shim's own default, and nothing in the table is unknown to the shim.
. tests/t/lib.sh
shim_vars=$(grep -o '"VRAMTRACE_[A-Z_]*"' preload/options.c | tr -d '"' | sort -u)
doc_vars=$(sed -n 's/^| `\(VRAMTRACE_[A-Z_]*\)` |.*/\1/p' docs/environment.md | grep -v VRAMTRACE_RULES | sort -u)
is "$doc_vars" "$shim_vars" "docs/environment.md's table lists exactly the shim's variables"
for v in $shim_vars; do
    case $v in
        VRAMTRACE_DIR) want=. ;;
        VRAMTRACE_RING) want=65536 ;;
        VRAMTRACE_UNWIND) want=libunwind ;;
        *) want=$(grep -A0 "\"$v\"" preload/options.c | sed -n 's/.*"'$v'", *[a-z_]*, *\([0-9]*\),.*/\1/p') ;;
    esac
    got=$(sed -n 's/^| `'$v'` | `\([^`]*\)` |.*/\1/p' docs/environment.md)
    is "$got" "$want" "docs/environment.md's default of $v matches the shim"
done
done_testing
