#!/bin/sh
# Unit test of the shim's symbolizer (preload/symbols.c): runs
# build/tests/test_symbols, which prints its own TAP. The expected build-id
# comes from readelf, an independent reader of the same note.
. tests/t/lib.sh
bin=$B/tests/test_symbols
lib=$B/tests/libsymtest.so
if [ ! -x "$bin" ] || [ ! -f "$lib" ]; then
    echo "1..1"
    echo "not ok 1 - $bin and $lib are built (make test-bins)"
    exit 1
fi
VT_EXPECT_BUILD_ID=
if command -v readelf >/dev/null 2>&1; then
    VT_EXPECT_BUILD_ID=$(readelf -n "$lib" | sed -n 's/^ *Build ID: *\([0-9a-f]*\).*/\1/p' | head -n 1)
fi
export VT_EXPECT_BUILD_ID
exec "$bin"
