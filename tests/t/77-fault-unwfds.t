#!/bin/sh
# Unit test of libunwind's redirected address checks (preload/unwind_fds.c):
# runs build/tests/test_unwind_fds on two libraries that check addresses as
# libunwind does, one bound lazily and one with a read-only GOT (-z now),
# and prints its own TAP.
. tests/t/lib.sh
bin=$B/tests/test_unwind_fds
if [ ! -x "$bin" ]; then
    echo "1..1"
    echo "not ok 1 - $bin is built (make test-bins)"
    exit 1
fi
exec "$bin" "$B/tests/unwfds"
