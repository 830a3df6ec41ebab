# Shared by the real llama.cpp suites (63-llama-real.t, 63-llama-node.t):
# llama.cpp's own log lines read, and the report's numbers compared with
# them (sourced after tests/t/lib.sh, which gives ok, nok and is).
MiB=1048576

# mib_bytes LOG PATTERN: the last "PATTERN = X MiB" llama.cpp logged, in bytes.
mib_bytes() {
    awk -v pat="$2 =" 'index($0, pat) { sub(/.*= */, ""); v = $1 } END { if (v != "") printf "%.0f\n", v * 1048576 }' "$1"
}
# near GOT WANT DESC: GOT within 1% of WANT (both bytes, WANT not empty).
near() {
    if [ -n "$2" ] && [ -n "$1" ] && awk -v g="$1" -v w="$2" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(d <= w / 100) }'; then
        ok "$3"
    else
        nok "$3"; echo "#   got '$1', want '$2' within 1%"
    fi
}
# val BYTES KEY: one value from tests/llama/tag_bytes.py's output (0 if absent).
val() { awk -v k="$2" '$1 == k { v = $2 } END { print v + 0 }' "$1"; }

# ---- Where the model runs: placement against llama.cpp's own lines ----
# The layer count llama.cpp logged ("offloaded N/M layers to GPU"), and
# every model and KV buffer line, CPU ones included, against the report's
# bytes by place (docs/report.md, "Placement").
check_placement() {
    is "$(val "$2.bytes" layers.gpu)/$(val "$2.bytes" layers.total)" \
        "$(awk '/offloaded [0-9]+\/[0-9]+ layers/ { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\/[0-9]+$/) v = $i } END { print v }' "$2.log")" \
        "$1 $name: layers on the GPU = llama.cpp's offloaded N/M"
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
