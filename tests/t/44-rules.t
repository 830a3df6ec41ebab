#!/bin/sh
# Tagging (analyzer/rules.c, demangle.c), through its C unit tests
# (tests/unit/test_rules.c): built-in rules on llama.cpp-shaped stacks,
# the matching order, user rules, bad rules files with their line numbers.
# build/test_rules prints one TAP line per check (tests/tap.h); a missing
# binary fails, it does not skip.
. tests/t/lib.sh
[ -x "$B/test_rules" ] || { echo "Bail out! $B/test_rules not built (make test-bins)"; exit 1; }
exec "$B/test_rules"
