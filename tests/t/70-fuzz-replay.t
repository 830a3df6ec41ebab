#!/bin/sh
# Every committed fuzz input, replayed through plain builds of the fuzz
# targets (tests/fuzz/replay.c): the seed corpus and each crash regression
# found by `make fuzz`. Under `make test SANITIZE=address,undefined` the
# replays are sanitized too, so a regression fails here whatever the build.
. tests/t/lib.sh
F=$B/fuzz
for t in reader report rules args; do
    case $t in reader|report) seeds=trace;; *) seeds=$t;; esac
    if [ ! -x "$F/replay-$t" ]; then nok "replay-$t is built (make test-bins)"; continue; fi
    set -- tests/fuzz/corpus/$seeds
    # git keeps no empty directory: a target may have no regressions yet.
    [ -d tests/fuzz/regressions/$t ] && set -- "$@" tests/fuzz/regressions/$t
    [ $t = reader ] || [ $t = report ] && set -- "$@" tests/corrupt
    want=0
    # READMEs included: to a parser they are inputs like any other.
    for d in "$@"; do want=$((want + $(find "$d" -maxdepth 1 -type f ! -name '.*' | wc -l))); done
    out=$("$F/replay-$t" -v "$@" 2>$F/replay-$t.err); rc=$?
    if [ $rc -eq 0 ]; then ok "$t: corpus and regressions replay cleanly"
    else nok "$t: corpus and regressions replay cleanly (exit $rc)"
        echo "#   last input: $(grep '^replay: ' $F/replay-$t.err | tail -1)"
        grep -v '^replay: ' $F/replay-$t.err | head -20 | sed 's/^/#   /'
    fi
    is "$out" "replayed $want inputs" "$t: every input ran"
done

# Structured seeds come back as the file the shim with libzstd writes:
# version 3, zstd chunks, whichever kind of chunk the seed was taken from.
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT
cat >"$D/s.vt" <<'VT'
device 0 total=24GiB free=23GiB name=Sim t=1
event t=10 api=cudaMalloc ptr=0x10000000000 size=1GiB flags=runtime
chunk
event t=20 api=cudaFree ptr=0x10000000000 flags=runtime
end t=30 events=2 dropped=0
VT
"$B/vtgen" -o "$D/zstd.trace" "$D/s.vt"; "$B/vtgen" --stored -o "$D/stored.trace" "$D/s.vt"
"$VT" dump "$D/zstd.trace" >"$D/want.out"
for kind in zstd stored; do
    "$F/unpack" "$D/$kind.trace" "$D/$kind.vts" && "$F/unpack" --pack "$D/$kind.vts" "$D/$kind.packed"
    is "$(od -A n -t u2 -j 8 -N 2 "$D/$kind.packed" | tr -d ' ')" 3 "seed from $kind chunks: the fuzz targets read format version 3"
    "$VT" dump "$D/$kind.packed" >"$D/$kind.out" 2>&1
    check "seed from $kind chunks: the same records as the trace it came from" cmp -s "$D/want.out" "$D/$kind.out"
done
done_testing
