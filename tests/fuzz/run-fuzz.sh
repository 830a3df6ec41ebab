#!/bin/sh
# run-fuzz.sh DIR SECONDS TARGET...: runs each libFuzzer target in DIR for
# SECONDS, one after the other (the machine may have only two cores, and
# the report target is the slow one). The growing corpus stays in
# DIR/corpus/TARGET between runs; crashes land in DIR/crashes/TARGET/.
# Seconds fuzzed are added to DIR/fuzz-seconds (for docs/robustness.md's figure).
# Exit 1 if any target crashed, naming the inputs to triage and then to
# copy into tests/fuzz/regressions/TARGET/.
set -u
DIR=$1 SECS=$2; shift 2
status=0
for t in "$@"; do
    case $t in reader|report) seeds=trace;; *) seeds=$t;; esac
    mkdir -p "$DIR/corpus/$t" "$DIR/crashes/$t" "tests/fuzz/regressions/$t"
    echo "fuzz: $t for ${SECS}s"
    # -timeout: one input taking 10 s is a hang worth a regression too.
    "$DIR/fuzz-$t" -max_total_time="$SECS" -max_len=65536 -timeout=10 -rss_limit_mb=2560 \
        -print_final_stats=1 -artifact_prefix="$DIR/crashes/$t/" \
        "$DIR/corpus/$t" "tests/fuzz/corpus/$seeds" "$DIR/seeds/$seeds" "tests/fuzz/regressions/$t" \
        >"$DIR/fuzz-$t.log" 2>&1
    rc=$?
    grep -E '^stat::(number_of_executed_units|peak_rss_mb)|^#[0-9]+.*DONE' "$DIR/fuzz-$t.log" | tail -3 | sed 's/^/    /'
    echo "$t $SECS" >>"$DIR/fuzz-seconds"
    if [ $rc -ne 0 ] || [ -n "$(ls -A "$DIR/crashes/$t")" ]; then
        echo "fuzz: $t FAILED (exit $rc); see $DIR/fuzz-$t.log; inputs:"
        ls "$DIR/crashes/$t" | sed "s|^|    $DIR/crashes/$t/|"
        status=1
    fi
done
awk '{ s += $2 } END { printf "fuzz: %.2f hours fuzzed in %s so far\n", s / 3600, FILENAME }' "$DIR/fuzz-seconds"
exit $status
