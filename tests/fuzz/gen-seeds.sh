#!/bin/sh
# gen-seeds.sh B OUT: fresh fuzz seeds made by the code under test, so the
# corpus follows the trace format as it evolves instead of going stale.
#   OUT/trace/  traces the shim writes for the scenario programs and the
#               field stories (raw, and unpacked to structured seeds; see
#               fuzz_input.h), and the vtgen scripts of tests/golden and
#               tests/corrupt (hostile on purpose), with and without the
#               zstd checksum, and with stored chunks (format version 4,
#               as a shim without libzstd writes)
#   OUT/rules/  nothing generated yet: the committed seeds suffice
# Only traces up to 64 KiB are kept: big seeds slow every mutation.
set -u
B=$1 OUT=$2
rm -rf "$OUT" && mkdir -p "$OUT/trace" "$OUT/rules" "$OUT/args"
W=$(mktemp -d "${TMPDIR:-/tmp}/vt-seeds.XXXXXX")
trap 'rm -rf "$W"' EXIT
shim() {
    env LD_LIBRARY_PATH="$B/sim" LD_PRELOAD="$B/libvramtrace.so" VRAMTRACE_DIR="$W/t" "$@" >/dev/null 2>&1
}
for m in linked dlsym procaddr runtime legacy oom fork exec; do shim "$B/tests/shim/paths" $m; done
shim "$B/tests/shim/paths" threads 2
EX=$B/examples
if [ -x "$EX/llama-cli" ]; then
    VTSIM_DEVICES=24GiB shim "$EX/llama-cli" -m llama-70b-q4_k_m -ngl 99 -c 8192 --no-mmap
    VTSIM_DEVICES=24GiB shim "$EX/torch-swap"
    VTSIM_DEVICES=24GiB shim "$EX/vmm-pool"
    VTSIM_DEVICES=24GiB,12GiB shim "$EX/llama-cli" -m qwen3-32b-q8_0 -ts 24,12
fi
n=0
for f in "$W"/t/*.vtrace; do
    [ -f "$f" ] || continue
    [ "$(wc -c <"$f")" -le 65536 ] || continue
    n=$((n + 1))
    cp "$f" "$OUT/trace/shim-$n.vtrace"
    "$B/fuzz/unpack" "$f" "$OUT/trace/shim-$n.vts" 2>/dev/null || rm -f "$OUT/trace/shim-$n.vts"
done
for s in tests/golden/*.vt tests/corrupt/*.vt; do
    name=$(basename "$s" .vt)
    "$B/vtgen" -o "$OUT/trace/vt-$name.trace" "$s" 2>/dev/null || continue
    "$B/vtgen" --no-checksum -o "$OUT/trace/vt-$name-nock.trace" "$s" 2>/dev/null
    "$B/vtgen" --stored -o "$OUT/trace/vt-$name-stored.trace" "$s" 2>/dev/null
    "$B/fuzz/unpack" "$OUT/trace/vt-$name.trace" "$OUT/trace/vt-$name.vts" 2>/dev/null ||
        rm -f "$OUT/trace/vt-$name.vts"
done
cp tests/corrupt/*.trace "$OUT/trace/" 2>/dev/null
echo "fuzz seeds: $(ls "$OUT/trace" | wc -l) trace inputs ($n from the shim) in $OUT"
