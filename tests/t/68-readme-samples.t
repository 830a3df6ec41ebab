#!/bin/sh
# README.md's sample outputs are what the current code prints:
# scripts/readme-samples.py --check runs every sample's programs on the
# simulated GPU and fails, with a diff, on a block that says anything else.
# Times and pids (which differ from run to run) and the line breaks they
# move are not differences; a changed number or a line wider than the
# fresh output's are. Regenerating a current README changes no byte.
. tests/t/lib.sh
EX=$B/examples
for f in "$SHIM" "$VT" "$EX/llama-cli" "$EX/llama-server-chat" "$EX/torch-swap" "$EX/ollama-engine" "$SIM/libcudart.so.13"; do
    if [ ! -e "$f" ]; then
        echo "1..0 # SKIP $f not built (make test-bins)"
        exit 0
    fi
done
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 needed to run scripts/readme-samples.py"; exit 0; }
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
samples() { VT_B=$B python3 scripts/readme-samples.py "$@" >"$TMP/out" 2>&1; }

cp README.md "$TMP/before.md"
samples --check README.md
rc=$?
is "$rc" 0 "README.md's sample blocks match a fresh run (scripts/readme-samples.py to update them)"
[ "$rc" -eq 0 ] || sed 's/^/# /' "$TMP/out"
check "--check writes nothing" cmp -s README.md "$TMP/before.md"

# The demo's block with another pid and other times: still current, and
# regenerating leaves it (and every other byte) as it is.
sed -e '0,/(pid [0-9]*)/s//(pid 4242)/' -e '0,/ at [0-9][0-9]* ms:$/s// at 999 ms:/' README.md >"$TMP/times.md"
check "the copy differs in a pid and a time" sh -c "! cmp -s README.md '$TMP/times.md'"
samples --check "$TMP/times.md"
is "$?:$(cat "$TMP/out")" "0:" "other times and pids are no difference"
cp "$TMP/times.md" "$TMP/regen.md"
samples "$TMP/regen.md"
is "$?:$(cat "$TMP/out")" "0:" "regenerating reports no block updated"
check "regenerating changes no byte" cmp -s "$TMP/times.md" "$TMP/regen.md"

# A number changed in the replay sample: the check names the block and
# shows both lines.
sed 's/  with 7.23 GiB already held: 1.04 GiB short./  with 7.23 GiB already held: 1.05 GiB short./' README.md >"$TMP/number.md"
check "the copy differs in the replay's shortfall" sh -c "! cmp -s README.md '$TMP/number.md'"
samples --check "$TMP/number.md"
is "$?" 1 "a changed number fails the check"
is "$(grep -c '^[-+]  with 7.23 GiB already held' "$TMP/out")" 2 "the diff shows the README's line and the fresh one"
check "the check names the block" grep -q "the block after 'a 24 GiB card:' differs" "$TMP/out"

# The demo's verdict on one line of 110 columns, as the report printed it
# before text fit 80 columns: the same words, but no longer current.
python3 - README.md "$TMP/wide.md" <<'PY'
import sys
text = open(sys.argv[1], encoding="utf-8").read()
text = text.replace("VERDICT: PARTIAL OFFLOAD. 41 of 81 layers run from host memory: generation runs\n  at host-memory speed for them.",
                    "VERDICT: PARTIAL OFFLOAD. 41 of 81 layers run from host memory: generation runs at host-memory speed for them.", 1)
open(sys.argv[2], "w", encoding="utf-8").write(text)
PY
check "the copy has the verdict on one line" grep -q '^VERDICT: PARTIAL OFFLOAD. .* at host-memory speed for them.$' "$TMP/wide.md"
samples --check "$TMP/wide.md"
is "$?" 1 "a line wider than the fresh output's fails the check"
done_testing
