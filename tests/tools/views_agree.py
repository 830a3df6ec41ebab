#!/usr/bin/env python3
"""Reads what every view of vramtrace printed for one directory of traces
and prints each disagreement, one line each (nothing when they agree):
report --json (the reference), top --once, serve --once, the HTML index,
report --fail-on-spill's exit status (with --accept-offload too), and
diff --json of the directory against itself.

usage: views_agree.py REPORT.json TOP.txt SERVE.om PAGE.html GATE_RC ACCEPT_RC [DIFF.json]

Compared per process: the verdict; where ggml named layers, serve's layer
counts; per GPU: the peak bytes and the least free memory (serve's gauges); the number of processes (top's header,
serve's vramtrace_processes + vramtrace_idle_processes). Probes that
allocated nothing are counted, not listed, by top and serve, as docs/services.md
says.
"""
import json
import re
import sys

WORDS = {"spill": "SPILL", "near_spill": "NEAR SPILL", "failed": "OUT OF MEMORY",
         "partial_offload": "PARTIAL OFFLOAD", "cpu_only": "RAN ON THE CPU",
         "no_spill": None, "no_gpu_memory": None, "incomplete": None}
HTML = {"spill": "spill", "near_spill": "near spill", "failed": "out of memory",
        "partial_offload": "partial offload", "cpu_only": "ran on the CPU", "no_spill": "no spill",
        "no_gpu_memory": "no GPU memory used", "incomplete": "incomplete trace"}
GATE = {"spill", "near_spill", "failed", "partial_offload", "cpu_only"}
OFFLOAD = {"partial_offload", "cpu_only"}

# Worst first, as the analyzer ranks them (vt_verdict_rank).
RANK = ["spill", "failed", "near_spill", "partial_offload", "cpu_only", "incomplete", "no_spill", "no_gpu_memory"]

report_path, top_path, serve_path, html_path, gate_rc, accept_rc = sys.argv[1:7]
diff_path = sys.argv[7] if len(sys.argv) > 7 else None
r = json.load(open(report_path))
top = open(top_path).read()
serve = open(serve_path).read()
page = open(html_path).read()
bad = []

procs = {p["pid"]: p for p in r["processes"]}

# top: "pid N: WORDS (" for the verdicts it names; its header's count.
top_words = {int(m.group(1)): m.group(2) for m in re.finditer(r"^pid (\d+): ([A-Z]+(?: [A-Z]+)*)", top, re.M)}
m = re.search(r"\s(\d+) process(es)?\s", top)
if not m or int(m.group(1)) != len(procs):
    bad.append("top: %s processes in its header, report %d" % (m.group(1) if m else "no count of", len(procs)))
rows = {int(m.group(1)) for m in re.finditer(r"^(\d+) ", top, re.M)}
hidden = re.search(r"not shown: (\d+) ended process", top)
if len(rows) + (int(hidden.group(1)) if hidden else 0) != len(procs):
    bad.append("top: %d processes with rows + %s not shown, report %d" % (len(rows), hidden.group(1) if hidden else 0, len(procs)))
for pid, p in procs.items():
    want = WORDS[p["verdict_of_read_part"]]
    got = top_words.get(pid)
    if want != got and not (want is None and got is None):
        bad.append("pid %d: report %s, top %r" % (pid, p["verdict_of_read_part"], got))

# serve: the verdict sample that is 1, peaks and least free per GPU.
def samples(name):
    out = []
    for line in serve.splitlines():
        if line.startswith(name + "{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line[len(name):line.rindex("}")]))
            out.append((labels, float(line.rsplit(" ", 1)[1])))
    return out

verdict_1 = {int(l["pid"]): l["verdict"] for l, v in samples("vramtrace_verdict") if v == 1}
listed = set(verdict_1)
for pid, p in procs.items():
    if pid in listed and verdict_1[pid] != p["verdict_of_read_part"]:
        bad.append("pid %d: report %s, serve %s" % (pid, p["verdict_of_read_part"], verdict_1[pid]))
n = sum(v for l, v in samples("vramtrace_processes")) if "vramtrace_processes{" in serve else None
plain = re.search(r"^vramtrace_processes (\d+)$", serve, re.M)
idle = re.search(r"^vramtrace_idle_processes (\d+)$", serve, re.M)
if plain and idle and int(plain.group(1)) != len(procs):
    bad.append("serve: vramtrace_processes %s, report %d" % (plain.group(1), len(procs)))
if idle and len(listed) + int(idle.group(1)) != len(procs):
    bad.append("serve: %d processes with series + %s idle, report %d" % (len(listed), idle.group(1), len(procs)))
peaks = {}
for l, v in samples("vramtrace_device_peak_bytes"):
    key = (int(l["pid"]), int(l["gpu"]))
    peaks[key] = peaks.get(key, 0) + v
minfree = {(int(l["pid"]), int(l["gpu"])): v for l, v in samples("vramtrace_device_min_free_bytes")}
for pid, p in procs.items():
    if pid not in listed:
        continue
    for d in p["devices"]:
        key = (pid, d["ordinal"])
        if key in peaks and peaks[key] != d["peak"]["tracked_bytes"]:
            bad.append("pid %d GPU %d: report peak %d, serve %d" % (pid, d["ordinal"], d["peak"]["tracked_bytes"], peaks[key]))
        mf = d["headroom"].get("min_free_bytes")
        if key in minfree and mf is not None and minfree[key] != mf:
            bad.append("pid %d GPU %d: report least free %d, serve %d" % (pid, d["ordinal"], mf, minfree[key]))

# serve's layer counts, where the report names layers: on a GPU, in all,
# and the blocks on a GPU with their experts, KV cache or part of their other
# weights in host memory, and the blocks in host memory by an override.
LAYERS = {"gpu": "gpu", "total": "total", "gpu_experts_in_host": "expert_blocks_host",
          "gpu_kv_in_host": "kv_blocks_host", "host_by_override": "override_blocks",
          "gpu_part_in_host": "part_blocks_host"}
layers = {(int(l["pid"]), l["where"]): v for l, v in samples("vramtrace_layers")}
for pid, p in procs.items():
    pl = (p.get("placement") or {}).get("layers")
    if pid not in listed or not pl:
        continue
    for where, key in LAYERS.items():
        if layers.get((pid, where)) != pl[key]:
            bad.append("pid %d: report layers.%s %d, serve vramtrace_layers{where=%s} %s" %
                       (pid, key, pl[key], where, layers.get((pid, where))))

# serve's KV cache cells and streams, where the report names layers and knows them.
cells = {int(l["pid"]): v for l, v in samples("vramtrace_kv_cache_cells")}
streams = {int(l["pid"]): v for l, v in samples("vramtrace_kv_cache_streams")}
for pid, p in procs.items():
    pl = p.get("placement") or {}
    if pid not in listed or not pl.get("layers"):
        continue
    if cells.get(pid) != pl.get("kv_cells"):
        bad.append("pid %d: report kv_cells %s, serve vramtrace_kv_cache_cells %s" % (pid, pl.get("kv_cells"), cells.get(pid)))
    if streams.get(pid) != pl.get("kv_streams"):
        bad.append("pid %d: report kv_streams %s, serve vramtrace_kv_cache_streams %s" % (pid, pl.get("kv_streams"), streams.get(pid)))

# The HTML index: "(pid N)</a>: words".
html_words = {int(m.group(1)): m.group(2).strip() for m in re.finditer(r"\(pid (\d+)\)</a>: ([^<(]+)", page)}
for pid, p in procs.items():
    got = html_words.get(pid)
    if got != HTML[p["verdict"]]:
        bad.append("pid %d: report %s, HTML %r" % (pid, p["verdict"], got))

# The gate: --fail-on-spill fails on the verdicts it names; with
# --accept-offload a planned offload (no failure) passes.
verdicts = [p["verdict_of_read_part"] for p in procs.values()]
want_gate = 1 if any(v in GATE for v in verdicts) else 0
want_accept = 1 if any(v in GATE - OFFLOAD for v in verdicts) or any(
    v in OFFLOAD and p.get("spill") for v, p in zip(verdicts, procs.values())) else 0
for rc, want, what in ((gate_rc, want_gate, "--fail-on-spill"), (accept_rc, want_accept, "--fail-on-spill --accept-offload")):
    rc = int(rc)
    if rc in (0, 1) and rc != want:
        bad.append("report %s exits %d, the verdicts %s want %d" % (what, rc, sorted(set(verdicts)), want))
# diff: a run's verdict (the text's heading, JSON "verdict") is its worst
# process's, as the report gives each.
if diff_path:
    d = json.load(open(diff_path))
    own = [p["verdict"] for p in procs.values()]
    want = min(own, key=RANK.index) if own else None
    for side in ("a", "b"):
        if d[side].get("verdict") != want:
            bad.append("diff: side %s's verdict %r, the report's worst %r" % (side, d[side].get("verdict"), want))
for line in bad:
    print(line)
