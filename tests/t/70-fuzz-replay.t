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
done_testing
