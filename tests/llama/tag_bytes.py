#!/usr/bin/env python3
"""Per-tag bytes of the llama.cpp process in a `vramtrace report --json`,
one "KEY BYTES" line each, for tests/t/63-llama-real.t and 63-llama-node.t
(the process whose argv runs tests/llama/run*.mjs, or is libllama_run):

  TAG.SPACE           bytes live at once, summed over the sites with that
                      tag (SPACE: device or pinned)
  compute.SPACE       the part of scratch ggml marked COMPUTE (llama.cpp's
                      "compute buffer": ggml_backend_sched_reserve's)
  marked.TAG.SPACE    bytes whose tag ggml's mark decided
  disagreements       sites where ggml's mark and a stack rule disagree
  unknown             bytes tagged unknown
  unknown_calls       calls tagged unknown, successful or not
  failed.TAG          bytes of the failed allocation that ended the run
  verdict.KEY         1 for the process's verdict key
  place.CONTENT.PLACE placement bytes (CONTENT weights, layer_weights, kv,
                      compute; PLACE gpu0, pinned_host, mapped_host,
                      pageable_host, host)
  layers.gpu, layers.total, layers.known, advice.gpu_layers, offloaded
  layers.expert_blocks_host, layers.experts_host, advice.expert_blocks_fit
  layers.kv_blocks_host, layers.kv_host, advice.of_kv, advice.kv_fits,
  advice.kv_kept      the same of KV caches in host memory (0/1 for flags)
  advice.need_all     what every layer on the GPU would add, in bytes
  layers.override_blocks, layers.override_host, advice.of_override,
  advice.override_blocks_fit   blocks in host memory by an override (-ot)
  layers.part_blocks_host, layers.part_host   blocks on the GPU with part of
                      their other weights in host memory (an override of part
                      of a block)
  fit.ran, fit.chose  1 when --fit's queries are in the trace, and when it
                      chose the split (JSON llama_fit; chose -1 for null)
  fit.chose_context   1 when it chose the context (no -c given), -1 for null
  kv_cells            the KV cache's cells (placement.kv_cells), when known
  kv_streams          its streams (placement.kv_streams), when known
  above_margin        1 when every device stayed above the margin
"""
import json
import sys

r = json.load(open(sys.argv[1]))
procs = [p for p in r["processes"]
         if any("/llama/run" in a and a.endswith(".mjs") for a in p.get("argv", []))
         or p.get("argv", [""])[0].endswith("libllama_run")]
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
    out["verdict." + p["verdict"]] = 1
    pl = p.get("placement")
    if pl:
        out["offloaded"] = int(pl["offloaded"])
        if pl["kv_cells"] is not None:
            out["kv_cells"] = pl["kv_cells"]
        if pl["kv_streams"] is not None:
            out["kv_streams"] = pl["kv_streams"]
        for content in ("weights", "layer_weights", "kv", "compute"):
            for place, v in pl[content]["by_place"].items():
                out["place.%s.%s" % (content, place)] = v
            out["place.%s.host" % content] = pl[content]["host_bytes"]
        if pl["layers"]:
            out["layers.known"] = 1
            out["layers.gpu"] = pl["layers"]["gpu"]
            out["layers.total"] = pl["layers"]["total"]
            out["layers.expert_blocks_host"] = pl["layers"]["expert_blocks_host"]
            out["layers.experts_host"] = pl["layers"]["experts_host_bytes"]
            out["layers.kv_blocks_host"] = pl["layers"]["kv_blocks_host"]
            out["layers.kv_host"] = pl["layers"]["kv_host_of_gpu_blocks_bytes"]
            out["layers.override_blocks"] = pl["layers"]["override_blocks"]
            out["layers.override_host"] = pl["layers"]["override_host_bytes"]
            out["layers.part_blocks_host"] = pl["layers"]["part_blocks_host"]
            out["layers.part_host"] = pl["layers"]["part_host_bytes"]
        if pl["advice"]:
            out["advice.gpu_layers"] = pl["advice"]["gpu_layers"]
            out["advice.expert_blocks_fit"] = pl["advice"]["expert_blocks_fit"]
            out["advice.need_all"] = pl["advice"]["all_layers_need_bytes"]
            out["advice.override_blocks_fit"] = pl["advice"]["override_blocks_fit"]
            for flag in ("of_kv", "kv_fits", "kv_kept", "of_override"):
                out["advice." + flag] = int(pl["advice"][flag])
    fit = (pl or {}).get("llama_fit")
    out["fit.ran"] = int(fit is not None)
    if fit is not None:
        out["fit.chose"] = -1 if fit["chose_layers"] is None else int(fit["chose_layers"])
        out["fit.chose_context"] = -1 if fit["chose_context"] is None else int(fit["chose_context"])
    out["above_margin"] = int(all(d["headroom"].get("above_margin", False) for d in p["devices"]))
for k in sorted(out):
    print(k, out[k])
