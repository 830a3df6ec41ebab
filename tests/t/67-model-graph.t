#!/bin/sh
# The model's files (analyzer/model/*.c) call each other one way, never in a
# circle: model.c dispatches each record to the file that owns what it
# changes, the event handlers call sites, the live table, devices and
# spills, and none of those calls back (model_internal.h). A circle would
# make two files one concern again. The graph is read from the objects'
# symbols by scripts/preload-graph.sh, as for the shim (56-shim-graph.t).
. tests/t/lib.sh
G=scripts/preload-graph.sh
O=$B/obj/analyzer/model
if [ ! -f "$O/model.o" ]; then
    echo "1..0 # SKIP $O not built (make test-bins)"
    exit 0
fi
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT

# The check fails on a circle: the model's objects, with the devices file
# made to report a spill itself while model_spill.c asks it for a view:
# two files that judge and describe each other's events.
mkdir "$D/obj"
cp "$O"/*.o "$D/obj/"
cp analyzer/model/model_devices.c "$D/model_devices.c"
echo 'void vt_m_back(vt_model_t *m, const vt_event_view_t *v) { vt_m_spill(m, VT_SPILL_OOM, v); }' \
    >>"$D/model_devices.c"
cc -c -D_GNU_SOURCE -Iinclude -I"${CUDA_HOME:-/usr/local/cuda}/include" -Ianalyzer/base -Ianalyzer/reader \
    -Ianalyzer/symbols -Ianalyzer/model "$D/model_devices.c" -o "$D/obj/model_devices.o" 2>"$D/cc.err"
is "$?" 0 "a copy of the devices file that calls back into spills compiles"
is "$(sh $G "$D/obj")" "cycle: model_devices model_spill" "the check names the circle it makes"

# The model as built.
sh $G -e "$O" >"$D/graph"
check "the records reach the event handlers" grep -q '^model -> model_events$' "$D/graph"
check "the event handlers charge the live table" grep -q '^model_events -> model_live$' "$D/graph"
check "spills take their views from the devices file" grep -q '^model_spill -> model_devices$' "$D/graph"
circles=$(sed -n 's/^cycle: //p' "$D/graph")
is "${circles:-none}" none "no circle among the model's files"

# Small files, each with its contract at the top (a header comment).
big=$(for f in analyzer/model/*.c; do
    [ "$(wc -l <"$f")" -le 700 ] || printf '%s ' "$f"
done)
is "${big:-none}" none "no model file over 700 lines"
bare=$(for f in analyzer/model/*.c; do
    head -c 2 "$f" | grep -q '^/\*' || printf '%s ' "$f"
done)
is "${bare:-none}" none "every model file opens with its contract"
done_testing
