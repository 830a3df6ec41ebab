#!/usr/bin/env python3
"""Per-tag bytes of the llama.cpp process in a `vramtrace report --json`,
one "KEY BYTES" line each, for tests/t/63-llama-real.t:

  TAG.SPACE           bytes live at once, summed over the sites with that
                      tag (SPACE: device or pinned)
  compute.SPACE       the part of scratch ggml marked COMPUTE (llama.cpp's
                      "compute buffer": ggml_backend_sched_reserve's)
  marked.TAG.SPACE    bytes whose tag ggml's mark decided
  disagreements       sites where ggml's mark and a stack rule disagree
  unknown             bytes tagged unknown
  unknown_calls       calls tagged unknown, successful or not
  failed.TAG          bytes of the failed allocation that ended the run
"""
import json
import sys

r = json.load(open(sys.argv[1]))
procs = [p for p in r["processes"] if any("run.mjs" in a for a in p.get("argv", []))]
out = {"unknown": 0, "unknown_calls": 0, "disagreements": 0}
if procs:
    p = procs[0]
    for s in p["sites"]:
        space = "device" if s["space"] == "device" else "pinned"
        key = "%s.%s" % (s["tag"], space)
        out[key] = out.get(key, 0) + s["max_live_bytes"]
        if s.get("ggml_mark") == "COMPUTE":
            out["compute." + space] = out.get("compute." + space, 0) + s["max_live_bytes"]
        if s.get("decided_by") == "ggml_mark":
            key = "marked.%s.%s" % (s["tag"], space)
            out[key] = out.get(key, 0) + s["max_live_bytes"]
            if s.get("stack_rule_tag") not in (None, s["tag"]):
                out["disagreements"] += 1
        if s["tag"] == "unknown":
            out["unknown"] += s["total_bytes"]
            out["unknown_calls"] += s["calls"]
    ev = (p.get("spill") or {}).get("event") or {}
    if ev:
        out["failed." + ev["tag"]] = ev["bytes"]
for k in sorted(out):
    print(k, out[k])
