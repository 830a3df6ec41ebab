#!/usr/bin/env python3
"""Regenerates the sample outputs in README.md from the current code.

    make && make test-bins && python3 scripts/readme-samples.py

Each story of README.md's "What the report says" and "Five slowdowns"
sections is run under the shim on the simulated GPU (the same commands as
tests/t/60-examples.t), and the code block after the story's marker
paragraph is replaced by the report's verdict paragraph (and, for the
demo, the tipping event's section). Run from the repository root; prints
which blocks changed."""
import os
import re
import subprocess
import sys
import tempfile

B = os.environ.get("VT_B", "build")
EX = B + "/examples"
STORIES = [
    # (text that precedes the block in README.md, env, argv, with tipping section)
    ("puts the rest in\npinned host memory, exactly what llama.cpp does with mmap off:",
     {"VTSIM_DEVICES": "24GiB"}, [EX + "/llama-cli", "-m", "llama-70b-q4_k_m", "-ngl", "99", "-c", "8192", "--no-mmap"], True),
    ("(`llama-server-chat`, 12 GiB card):", {"VTSIM_DEVICES": "12GiB"},
     [EX + "/llama-server-chat", "-m", "llama-13b-q4_k_m", "--mmap", "-c", "2048", "--kv-grow", "1024",
      "--turns", "8", "--turn-tokens", "1000"], False),
    ("llama.cpp backs off\nto fewer layers:", {"VTSIM_DEVICES": "24GiB", "VTSIM_EXTERNAL": "3GiB"},
     [EX + "/llama-cli", "-m", "qwen2.5-32b-q4_k_m"], False),
    ("allocator):", {"VTSIM_DEVICES": "24GiB"}, [EX + "/torch-swap"], False),
    ("pages migrate\nat PCIe speed:", {"VTSIM_DEVICES": "24GiB", "GGML_CUDA_ENABLE_UNIFIED_MEMORY": "1"},
     [EX + "/llama-cli"], False),
]


def sample(env, argv, tipping):
    with tempfile.TemporaryDirectory() as d:
        e = {k: v for k, v in os.environ.items() if not k.startswith("VTSIM_") and k != "GGML_CUDA_ENABLE_UNIFIED_MEMORY"}
        e.update(env, LD_LIBRARY_PATH=B + "/sim", LD_PRELOAD=os.path.abspath(B + "/libvramtrace.so"), VRAMTRACE_DIR=d)
        subprocess.run(argv, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        e.pop("LD_PRELOAD")
        out = subprocess.run([B + "/vramtrace", "report", "--color", "never", d], env=e,
                             capture_output=True, text=True).stdout
    paras = out.split("\n\n")
    text = paras[0].strip("\n")
    if tipping:
        text += "\n\n" + next(p for p in paras if p.lstrip("\n").startswith("Tipping event:")).strip("\n").split("\n  device state")[0]
    return text


def main():
    readme = open("README.md").read()
    for marker, env, argv, tipping in STORIES:
        at = readme.find(marker)
        if at < 0:
            sys.exit("readme-samples: marker not found in README.md: %r" % marker)
        start = readme.index("```\n", at) + 4
        end = readme.index("```", start)
        new = sample(env, argv, tipping) + "\n"
        if readme[start:end] != new:
            print("readme-samples: %s: updated" % os.path.basename(argv[0]))
        readme = readme[:start] + new + readme[end:]
    open("README.md", "w").write(readme)


if __name__ == "__main__":
    main()
