#!/bin/sh
# The report's model (analyzer/model*.c), through its C unit tests
# (tests/unit/test_model.c): time formatting at each grain, sites ranked,
# the per-GPU hook's calls, memoised stack matches against vt_rules_match,
# a site fed before its stack. build/test_model prints one TAP line per
# check (tests/tap.h); a missing binary fails, it does not skip.
. tests/t/lib.sh
[ -x "$B/test_model" ] || { echo "Bail out! $B/test_model not built (make test-bins)"; exit 1; }
exec "$B/test_model"
