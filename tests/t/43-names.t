#!/bin/sh
# The tables that name enum values (record types, event flags, entry
# points, kinds, spaces, ggml usages, spill kinds, decisions, loss reasons,
# built-in tags), through tests/unit/test_names.c: every value has a name of
# its own. build/test_names prints one TAP line per check (tests/tap.h); a
# missing binary fails, it does not skip.
. tests/t/lib.sh
[ -x "$B/test_names" ] || { echo "Bail out! $B/test_names not built (make test-bins)"; exit 1; }
exec "$B/test_names"
