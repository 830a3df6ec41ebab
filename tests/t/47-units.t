#!/bin/sh
# Sizes on the command line need a unit (`replay --capacity 24` once meant
# 24 bytes), values that cannot be a card are refused, and a missing
# TRACE after `report --html FILE` is named, not left to the usage text.
. tests/t/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
if [ ! -x "$B/examples/llama-cli" ]; then
    echo "1..0 # SKIP examples not built"
    exit 0
fi
under_shim "$TMP/t" env VTSIM_DEVICES=24GiB "$B/examples/llama-cli" -m llama-70b-q4_k_m -ngl 99 -c 8192 --no-mmap >/dev/null 2>&1

# refused ARG... : exit 2, and stderr's one line
refused() { "$VT" replay "$@" "$TMP/t" >"$TMP/out" 2>"$TMP/err"; echo "$?|$(cat "$TMP/err")"; }
is "$(refused --capacity 24)" "2|vramtrace: replay: --capacity 24: add a unit (24GiB, 24MiB, 24B for bytes)" \
    "a bare number is refused, asking for a unit"
is "$(refused --capacity 24GiB --reserve 512)" "2|vramtrace: replay: --reserve 512: add a unit (512GiB, 512MiB, 512B for bytes)" \
    "... for --reserve too"
is "$(refused --capacity 0)" "2|vramtrace: replay: --capacity 0: a card needs some memory" "capacity 0 is refused"
is "$(refused --capacity 0GiB)" "2|vramtrace: replay: --capacity 0: a card needs some memory" "... in any unit"
is "$(refused --capacity 24GiB --reserve 25G)" "2|vramtrace: replay: --reserve 25.00 GiB leaves nothing of a 24.00 GiB card" \
    "a reserve larger than the card is refused"
is "$(refused --capacity 24GiB --reserve 24GiB)" "2|vramtrace: replay: --reserve 24.00 GiB leaves nothing of a 24.00 GiB card" \
    "... and one as large as the card"
for bad in 12XB nan inf 0x10G -1G 1e400G GiB ''; do
    is "$(refused --capacity "$bad")" "2|vramtrace: replay: --capacity wants a size (24GiB, 512MiB, 4096B), got '$bad'" \
        "'$bad' is not a size"
done

# accepted ARG WANT: the card size replay says it replays against
accepted() {
    "$VT" replay --capacity "$1" "$TMP/t" >"$TMP/out" 2>"$TMP/err"
    sed -n 's/^Replay of the recorded device requests against a \(.*\) card\.$/\1/p' "$TMP/out"
}
is "$(accepted 24GiB)" "24.00 GiB" "24GiB"
is "$(accepted 24G)" "24.00 GiB" "24G"
is "$(accepted '24 GB')" "24.00 GiB" "24 GB (GB = GiB: cards are sold in binary units)"
is "$(accepted 512MiB)" "512.0 MiB" "512MiB"
is "$(accepted 1.5t)" "1536.00 GiB" "1.5t"
is "$(accepted 4096B)" "4.0 KiB" "4096B: bytes when said"
"$VT" replay --capacity 24GiB --reserve 0 "$TMP/t" >/dev/null 2>"$TMP/err"
is "$?|$(cat "$TMP/err")" "1|" "--reserve 0 stands without a unit (zero in any unit); the 70B model still does not fit"

"$VT" report --html run1 >"$TMP/out" 2>"$TMP/err"
is "$?" 2 "report --html FILE without a trace: exit 2"
is "$(head -1 "$TMP/err")" "vramtrace: report: no TRACE or DIR to report: --html run1 names the page to write; the traces come after it (vramtrace report --html page.html TRACE|DIR...)" \
    "... saying the trace is missing and what --html took"
check "... and no page written" test ! -e run1
"$VT" report >/dev/null 2>"$TMP/err"
is "$(head -1 "$TMP/err")" "vramtrace: report: no TRACE or DIR to report" "report with nothing: says what is missing"
done_testing
