# Shared helpers for the TAP scenario scripts (sourced, not run).
# Paths are relative to the repository root, where prove runs.
set -u
ROOT=$(pwd)
B=$ROOT/build
SHIM=$B/libvramtrace.so
VT=$B/vramtrace
SIM=$B/sim
T=0
FAILED=0
ok() { T=$((T+1)); echo "ok $T - $*"; }
nok() { T=$((T+1)); FAILED=$((FAILED+1)); echo "not ok $T - $*"; }
check() { desc=$1; shift; if "$@"; then ok "$desc"; else nok "$desc"; fi; }
# is GOT WANT DESC: exact comparison, prints both on failure.
is() { if [ "$1" = "$2" ]; then ok "$3"; else nok "$3"; echo "#   got '$1', want '$2'"; fi; }
done_testing() { echo "1..$T"; [ $FAILED -eq 0 ]; }
tmpdir() { mktemp -d "${TMPDIR:-/tmp}/vt-test.XXXXXX"; }
