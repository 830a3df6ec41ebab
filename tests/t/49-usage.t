#!/bin/sh
# Bad usage of any command is one line saying what is wrong and one line
# pointing at --help, exit 2, never the whole usage; exit status 3 is
# documented wherever the statuses are.
. tests/t/lib.sh
[ -x "$VT" ] || { echo "1..0 # SKIP $VT not built"; exit 0; }
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT
mkdir "$D/empty"

# bad NAME WANT ARGS...: exit 2, exactly two lines on stderr, the first
# WANT (a fixed string), the second the pointer at NAME's --help.
bad() {
    name=$1 want=$2; shift 2
    "$VT" "$@" >"$D/out" 2>"$D/err"
    rc=$?
    is "$rc/$(wc -l <"$D/err")/$(wc -c <"$D/out")" "2/2/0" "$*: exit 2, two lines on stderr, nothing on stdout"
    is "$(head -1 "$D/err")|$(tail -1 "$D/err")" "$want|Try 'vramtrace $name --help' for its options." "$*: says what is wrong"
}
bad report "report: unrecognized option '--bogus'" report --bogus "$D"
bad report "vramtrace report: --html and --json are exclusive" report --html "$D/x.html" --json "$D"
bad diff "vramtrace diff: wants two runs, A and B (each a TRACE or DIR); 1 given" diff "$D"
bad export "vramtrace export: --format perfetto or --format folded is required" export "$D"
bad export "vramtrace export: unknown --format 'svg' (perfetto or folded)" export --format svg "$D"
bad export "vramtrace export: no TRACE or DIR given" export --format folded
bad replay "vramtrace replay: --capacity SIZE is required" replay "$D"
bad replay "vramtrace replay: no TRACE or DIR given" replay --capacity 24GiB
bad serve "vramtrace serve: give exactly one of --metrics and --once" serve "$D"
bad serve "vramtrace serve: no TRACE or DIR given" serve --once
bad top "vramtrace top: no TRACE or DIR given" top --once
bad record "vramtrace record: no command to run (vramtrace record [-o DIR] -- CMD [ARGS...])" record
bad record "vramtrace record: unknown option '--bogus'" record --bogus -- true
bad dump "vramtrace dump: no TRACE given" dump
bad dump "vramtrace dump: --count and --stacks are exclusive" dump --count --stacks "$D/x"

"$VT" frobnicate >/dev/null 2>"$D/err"
is "$?/$(cat "$D/err" | tr '\n' '|')" "2/vramtrace: unknown command 'frobnicate'|Try 'vramtrace --help' for the commands.|" \
    "an unknown command: two lines, exit 2"

# top --once on a directory without traces: the reader's line, no
# "retrying" (there is no retry), exit 2.
"$VT" top --once "$D/empty" >"$D/out" 2>"$D/err"
is "$?/$(wc -c <"$D/out")" "2/0" "top --once on an empty directory: exit 2, nothing on stdout"
check "... and no word of retrying" sh -c "! grep -q retrying '$D/err' '$D/out'"

# Exit status 3 wherever the statuses are listed.
check "vramtrace --help lists exit status 3" sh -c "'$VT' --help | grep -q '^3 report: a trace cut short'"
check "report --help lists exit status 3" sh -c "'$VT' report --help | grep -q '3 a trace cut short'"
check "the man page lists exit status 3" grep -q 'fR, a trace cut short (INCOMPLETE TRACE' docs/vramtrace.1
done_testing
