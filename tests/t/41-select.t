#!/bin/sh
# A directory of many runners: the index of processes by wall-clock start
# comes first, and --pid, --last, --since and --until choose which are
# read, by their PROCESS headers (--utc: times in UTC).
. tests/t/lib.sh
GEN=$B/vtgen
[ -x "$VT" ] && [ -x "$GEN" ] || { echo "1..0 # SKIP not built"; exit 0; }
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT
mkdir "$D/dir"
# run PID WALL_S MODEL SIZE: a runner started at WALL_S (Unix seconds,
# UTC) with -m MODEL that allocates SIZE of weights.
run() {
    {
        echo "process pid=$1 ppid=1 exe=/usr/bin/llama-server argv=llama-server,-m,$3,-ngl,99 host=box start=1000000000 wall=${2}000000000"
        echo 'device 0 total=24GiB free=23.5GiB name="NVIDIA Sim" uuid=0123456789abcdef0123456789abcdef t=0'
        echo "event t=2000000 api=cudaMalloc dev=0 ptr=0x10000000000 size=$4 flags=runtime"
        echo 'end t=9000000 events=1 dropped=0'
    } >"$D/$1.vt"
    "$GEN" "$D/$1.vt" -o "$D/dir/$1.vtrace" || nok "vtgen $1"
}
# 2023-11-14 22:13:20, +1 h, +1 day, +1 day 1 h (UTC)
run 101 1700000000 llama-8b.gguf 4GiB
run 102 1700003600 qwen3-32b-q8_0.gguf 20GiB
run 103 1700086400 llama-70b-q4_k_m.gguf 22GiB
run 104 1700090000 mistral-7b.gguf 3GiB

"$VT" report --utc "$D/dir" >"$D/all.txt" 2>&1
is "$?" 0 "report of the four"
is "$(sed -n 1,6p "$D/all.txt")" "== 4 processes by start (UTC, 2023); a section each below
  START           PID     PROCESS      MODEL               PEAK  VERDICT
  11-14 22:13:20  101     llama-server llama-8b        4.00 GiB  no spill
  11-14 23:13:20  102     llama-server qwen3-32b-q8_0 20.00 GiB  no spill
  11-15 22:13:20  103     llama-server llama-7…q4_k_m 22.00 GiB  no spill
  11-15 23:13:20  104     llama-server mistral-7b      3.00 GiB  no spill" \
    "the index first: one line each, by wall-clock start, model from -m (without .gguf), peak and verdict"

# sections PID...: the pids of the report's sections, in order.
sections() { sed -n 's/^== llama-server (pid \([0-9]*\)).*/\1/p' "$1" | tr '\n' ' '; }
"$VT" report --last 2 "$D/dir" >"$D/last.txt" 2>&1
is "$?/$(sections "$D/last.txt")" "0/103 104 " "--last 2: the two that started last"
"$VT" report --pid 102 --pid 104 "$D/dir" >"$D/pid.txt" 2>&1
is "$(sections "$D/pid.txt")" "102 104 " "--pid, twice: those two"
"$VT" report --utc --since "2023-11-14 23:00" --until "2023-11-15 22:13:20" "$D/dir" >"$D/win.txt" 2>&1
is "$(sections "$D/win.txt")" "102 103 " "--since and --until (UTC): the two started between, both ends included"
"$VT" report --utc --since 2023-11-15 --last 1 --json "$D/dir" >"$D/win.json" 2>&1
is "$(python3 -c 'import json,sys; print([p["pid"] for p in json.load(open(sys.argv[1]))["processes"]])' "$D/win.json")" "[104]" \
    "--since a day and --last 1, in JSON too"
"$VT" report --since 2030-01-01 "$D/dir" >"$D/none.txt" 2>&1
is "$?/$(cat "$D/none.txt")" "2/vramtrace: none of the 4 traces is a process --pid, --since, --until or --last chooses" \
    "nothing chosen: one line, exit 2"
"$VT" report --since yesterday "$D/dir" >/dev/null 2>"$D/bad.txt"
is "$?/$(head -1 "$D/bad.txt")" "2/vramtrace report: --since wants YYYY-MM-DD[ HH:MM[:SS]] or an age such as 2h, got 'yesterday'" \
    "a time it cannot read: said, exit 2"
"$VT" report --since 100000d "$D/dir" >"$D/age.txt" 2>&1
is "$(sections "$D/age.txt")" "101 102 103 104 " "an age: --since 100000d takes them all"
done_testing
