# Shared by the real llama.cpp suites (63-llama-real.t, 63-llama-node.t):
# traced runs on both trees, llama.cpp's own log lines read, and the
# report's numbers compared with them (sourced after tests/t/lib.sh, which
# gives ok, nok and is; the suite sets CACHE, TMP, MODEL and defines
# run_once DIR CARD ARGS..., usually with traced_run).
MiB=1048576

# Each tree is built in a directory of its own and renamed into place, so a
# run killed half way leaves no tree that looks finished, and two runs at
# once (worktrees sharing the cache) never write into the same one.
# publish NEW NAME: NEW becomes $CACHE/NAME unless another run got there first.
publish() { mv -T "$1" "$CACHE/$2" 2>/dev/null || rm -rf "$1"; }

# install_shipped PACKAGE@VERSION...: npm installs them, as published, into
# $CACHE/shipped; without npm's registry the suite skips, saying why (the
# first package names the install in the message).
install_shipped() {
    mkdir -p "$CACHE" && NEW=$(mktemp -d "$CACHE/shipped.XXXXXX") || exit 1
    if ! (cd "$NEW" && timeout 600 npm install --ignore-scripts --no-audit --no-fund --no-save "$@") \
            >"$CACHE/npm.log" 2>&1; then
        rm -rf "$NEW"
        echo "1..0 # SKIP npm install $1 failed (registry unreachable?): see $CACHE/npm.log"
        exit 0
    fi
    publish "$NEW" shipped
}

# zero_model: TMP (removed at exit) and MODEL, the 4-block all-zero GGUF
# every scenario loads (tests/llama/make_gguf.py).
zero_model() {
    TMP=$(tmpdir)
    trap 'rm -rf "$TMP"' EXIT
    MODEL=$TMP/zero-llama.gguf
    python3 tests/llama/make_gguf.py "$MODEL" 4
}

# mib_bytes LOG PATTERN: the last "PATTERN = X MiB" llama.cpp logged, in bytes.
# node-llama-cpp's addon prints a line itself where it cannot queue it for
# JavaScript (llama/addon/globals/addonLog.cpp: errors to stderr, the rest
# to stdout), so the run's stdout (LOG with .out for .log) is read too.
mib_bytes() {
    mib_out=${1%.log}.out
    [ "$mib_out" != "$1" ] && [ -e "$mib_out" ] || mib_out=/dev/null
    awk -v pat="$2 =" 'index($0, pat) { sub(/.*= */, ""); v = $1 } END { if (v != "") printf "%.0f\n", v * 1048576 }' "$1" "$mib_out"
}
# near GOT WANT DESC: GOT within 1% of WANT (both bytes, WANT not empty).
near() {
    if [ -n "$2" ] && [ -n "$1" ] && awk -v g="$1" -v w="$2" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(d <= w / 100) }'; then
        ok "$3"
    else
        nok "$3"; echo "#   got '$1', want '$2' within 1%" | tee /dev/stderr
    fi
}
# json_of REPORT EXPR: EXPR of the JSON report's process p that allocated
# most (node-llama-cpp runs a second, GPU-probing process beside it).
json_of() {
    python3 -c 'import json,sys; p=max(json.load(open(sys.argv[1]))["processes"], key=lambda q: q["events"]["allocs"]); print(eval(sys.argv[2]))' "$1" "$2"
}
# val BYTES KEY: one value from tests/llama/tag_bytes.py's output (0 if absent).
val() { awk -v k="$2" '$1 == k { v = $2 } END { print v + 0 }' "$1"; }

# ---- Where the model runs: placement against llama.cpp's own lines ----
# The layer count llama.cpp logged ("offloaded N/M layers to GPU"), and
# every model and KV buffer line, CPU ones included, against the report's
# bytes by place (docs/report.md, "Placement").
check_placement() {
    is "$(val "$2.bytes" layers.gpu)/$(val "$2.bytes" layers.total)" "$(offloaded "$2.log")" \
        "$1 $name: layers on the GPU = llama.cpp's offloaded N/M"
    check_buffers "$@"
}
# offloaded LOG: the N/M of llama.cpp's last "offloaded N/M layers to GPU".
offloaded() {
    awk '/offloaded [0-9]+\/[0-9]+ layers/ { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\/[0-9]+$/) v = $i } END { print v }' "$1"
}
# check_buffers FLAVOUR DIR: every model and KV buffer line against the
# report's bytes by place.
check_buffers() {
    for pair in "CUDA0 model:weights.gpu0" "CPU_Mapped model:weights.mapped_host" "CPU model:weights.pageable_host" \
            "CUDA_Host model:weights.pinned_host" "CUDA0 KV:kv.gpu0" "CPU KV:kv.pageable_host"; do
        line=${pair%%:*} key=${pair#*:}
        want=$(mib_bytes "$2.log" "$line buffer size")
        if [ -n "$want" ]; then
            near "$(val "$2.bytes" place.$key)" "$want" "$1 $name: $key = llama.cpp's $line buffer"
        else
            is "$(val "$2.bytes" place.$key)" 0 "$1 $name: no $key (llama.cpp logged no $line buffer)"
        fi
    done
}

# traced_run DIR CARD LIBS RUNNER ARGS...: one traced run of the node
# program RUNNER (tests/llama/*.mjs: NODE_MODULES MODEL ARGS...), or of
# the program RUNNER (libllama_run, which finds the prebuilt libraries on
# LD_LIBRARY_PATH after LIBS: NODE_MODULES MODEL ARGS...) on a
# simulated CARD whose libraries are in LIBS, tracing into DIR: its
# stdout, llama.cpp's log and exit status in DIR.out, .log and .rc, the
# report in DIR.json and DIR.txt, its numbers in DIR.bytes
# (tests/llama/tag_bytes.py). ggml's CUDA graphs are off
# (GGML_CUDA_DISABLE_GRAPHS=1) unless LLAMA_NO_GRAPHS is set and empty.
traced_run() {
    rd=$1 rcard=$2 rlibs=$3 rprog=$4; shift 4
    mkdir -p "$rd"
    case $rprog in
        *.mjs) set -- node "$rprog" "$modules" "$MODEL" "$@" ;;
        *) set -- "$rprog" "$modules" "$MODEL" "$@"; rlibs=$rlibs:$modules/$BINS ;;
    esac
    env -u VTSIM_SHARED -u VTSIM_EXTERNAL -u VTSIM_RESERVE -u VTSIM_GRANULARITY -u GGML_CUDA_NO_VMM \
        -u GGML_CUDA_DISABLE_GRAPHS VTSIM_DEVICES=$rcard ${LLAMA_NO_GRAPHS-GGML_CUDA_DISABLE_GRAPHS=1} VRAMTRACE_DIR=$rd \
        LD_LIBRARY_PATH=$rlibs LD_PRELOAD="$SHIM_PRELOAD" "$@" >"$rd.out" 2>"$rd.log"
    echo $? >"$rd.rc"
    "$VT" report --json "$rd" >"$rd.json" 2>"$rd.rerr"
    "$VT" report --wide "$rd" >"$rd.txt" 2>>"$rd.rerr"
    python3 tests/llama/tag_bytes.py "$rd.json" >"$rd.bytes" 2>&1
}

# scenario NAME CARD ARGS...: run_once on the shipped and the stripped
# tree (the trees $FLAVOURS names, where set; ARGS also in $args; none,
# and a skip said, for a NAME in $SKIP_SCENARIOS), checked by check_NAME FLAVOUR DIR, then by
# every_scenario FLAVOUR DIR where the suite defines it; nothing may be
# tagged unknown.
scenario() {
    name=$1 card=$2; shift 2
    args="$*"
    case " ${SKIP_SCENARIOS:-} " in
        *" $name "*) ok "$name # SKIP run on the first release only (SKIP_SCENARIOS)"; return 0 ;;
    esac
    for flavour in ${FLAVOURS:-shipped stripped}; do
        modules=$CACHE/$flavour/node_modules
        d=$TMP/$flavour-$name
        run_once "$d" "$card" "$@"
        check_$name "$flavour" "$d"
        is "$(val "$d.bytes" unknown)/$(val "$d.bytes" unknown_calls)" "0/0" "$flavour $name: 0 bytes, 0 calls unknown"
        if command -v every_scenario >/dev/null; then every_scenario "$flavour" "$d"; fi
    done
}
