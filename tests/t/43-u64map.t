#!/bin/sh
# The analyzer's address map (analyzer/base/u64map.c), through its C unit
# tests (tests/unit/test_u64map.c): honest keys found through deletions and
# growth under the fixed multiplier; keys aimed at that multiplier (a
# hostile trace's addresses, all in one home slot) answered by one rebuild
# under a random one, after which no run is long.
. tests/t/lib.sh
[ -x "$B/test_u64map" ] || { echo "Bail out! $B/test_u64map not built (make test-bins)"; exit 1; }
exec "$B/test_u64map"
