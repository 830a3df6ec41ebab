#!/usr/bin/env python3
"""Regenerates the sample outputs in README.md from the current code.

    make && make test-bins && python3 scripts/readme-samples.py
    python3 scripts/readme-samples.py --check [FILE]

Each sample is the code block after a marker paragraph of README.md. Its
programs run under the shim on the simulated GPU (the stories with the
same commands as tests/t/60-examples.t), and the block is replaced by what
the commands print: a report's first verdict paragraph, a diff, a replay,
or an outline of what `report --html` and `export` write. Run from the repository root; prints
which blocks changed.

Times and pids differ from run to run (the examples sleep where the real
runtimes work, and a loaded machine stretches that), so a block whose
only differences are times, pids and the line breaks they move is left as
it is. --check writes nothing: it prints a diff of every block that
differs beyond that and exits 1. FILE (default README.md) is read instead
of README.md, for a test to check a copy."""
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile

B = os.environ.get("VT_B", "build")
# The examples are named as the README shows them (build/examples/...),
# whatever VT_B is: a report's header prints argv[0], and a sanitized build
# lives elsewhere (Traces runs the real path under that name).
EX = "build/examples"
REAL_EX = os.path.relpath(B) + "/examples"
VT = os.path.abspath(B + "/vramtrace")
DEMO = ({"VTSIM_DEVICES": "24GiB"}, [EX + "/ollama-serve", "-m", "llama-70b-q4_k_m", "-c", "8192"])
QWEN = [EX + "/llama-cli", "-m", "qwen2.5-32b-q4_k_m"]
# llama.cpp loading the model shape of examples/ollama-engine.cpp: 4096 MiB
# of weights on the GPU, 512 MiB pinned (token_embd with --no-mmap), a
# 1024 MiB KV cache (8192 cells x 32 layers x 4096 B) and 256 MiB compute.
ENGINE_SHAPE = [EX + "/llama-cli", "-m", "llama-8b-q4_k_m", "--n-layer", "32", "--layer-mib", "112",
                "--output-mib", "512", "--embd-mib", "512", "--compute-mib", "256", "-c", "8192", "--no-mmap"]


class Traces:
    """Each program traced once into its own directory under a temporary
    one, which is also the working directory of the analyzer's commands,
    so the directories print as their short names."""

    def __init__(self, top):
        self.top = top
        self.done = {}

    def __call__(self, name, env, argv):
        if name not in self.done:
            d = os.path.join(self.top, name)
            os.mkdir(d)
            e = {k: v for k, v in os.environ.items()
                 if not k.startswith("VTSIM_") and not k.startswith("VRAMTRACE_") and not k.startswith("GGML_")}
            # A sanitized build's runtime must come before the shim
            # (tests/tests.mk sets VT_SAN_RT).
            preload = os.path.abspath(B + "/libvramtrace.so")
            if os.environ.get("VT_SAN_RT"):
                preload = os.environ["VT_SAN_RT"] + " " + preload
            e.update(env, LD_LIBRARY_PATH=B + "/sim", LD_PRELOAD=preload, VRAMTRACE_DIR=d)
            real = REAL_EX + argv[0][len(EX):] if argv[0].startswith(EX + "/") else argv[0]
            subprocess.run(argv, executable=real, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.done[name] = d
        return name

    def vramtrace(self, *args):
        e = {k: v for k, v in os.environ.items() if not k.startswith("VRAMTRACE_") and k != "NO_COLOR"}
        return subprocess.run([VT] + list(args), cwd=self.top, env=e, capture_output=True, text=True).stdout


def story(name, env, argv):
    def make(traces):
        out = traces.vramtrace("report", "--color", "never", traces(name, env, argv))
        return out.split("\n\n")[0].strip("\n")
    return make


def html_outline(traces):
    """The page's headings, indented by level: what a reader scrolls through."""
    traces("demo", *DEMO)
    traces.vramtrace("report", "--html", "demo.html", "demo")
    page = open(os.path.join(traces.top, "demo.html"), encoding="utf-8").read()
    lines = []
    for level, inner in re.findall(r"<h([1-4])[^>]*>(.*?)</h\1>", page, re.S):
        text = re.sub(r"<[^>]+>", "", inner)
        text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&#39;", "'").replace("&quot;", '"').replace("&amp;", "&")
        lines.append("  " * (int(level) - 1) + " ".join(text.split()))
    return "\n".join(lines)


def perfetto_outline(traces):
    """The tracks and events of the export, grouped by kind and name, in the
    order they first appear, with how many of each but for counters: events
    that fall into the same grain of time share one counter value."""
    traces("demo", *DEMO)
    events = json.loads(traces.vramtrace("export", "--format", "perfetto", "demo"))["traceEvents"]
    kinds = {"C": "counter", "i": "instant", "I": "instant", "X": "slice", "B": "slice", "b": "slice", "n": "instant"}
    groups = {}
    for ev in events:
        if ev.get("ph") == "M":
            kind = {"process_name": "process", "thread_name": "track"}.get(ev.get("name"))
            if kind:
                groups.setdefault((kind, ev["args"]["name"]), [0, ""])[0] += 1
            continue
        kind = kinds.get(ev.get("ph"))
        if kind is None:
            continue
        g = groups.setdefault((kind, ev.get("name", "")), [0, ""])
        g[0] += 1
        if kind == "counter":
            g[1] = ": " + ", ".join(ev.get("args", {}))
    rows = ["%-8s %5s  %s%s" % (kind, "" if kind == "counter" else n, name, extra)
            for (kind, name), (n, extra) in groups.items()]
    return "\n".join(r.rstrip() for r in rows)


def strip_parameters(frame):
    """A demangled name without its parameter list: `f(int, char*)` -> `f`."""
    if not frame.endswith(")"):
        return frame
    depth = 0
    for i in range(len(frame) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(frame[i], 0)
        if depth == 0:
            return frame[:i]
    return frame


def folded_sample(traces):
    """The folded lines with parameter lists and the frames outside main left out."""
    traces("demo", *DEMO)
    lines = []
    for line in traces.vramtrace("export", "--format", "folded", "demo").splitlines():
        stack, _, weight = line.rpartition(" ")
        frames = [strip_parameters(f) for f in stack.split(";")]
        if "main" in frames:
            frames = ["…"] + frames[frames.index("main"):]
        lines.append(";".join(frames) + " " + weight)
    return "\n".join(lines)


def diff_sample(traces):
    env = {"VTSIM_DEVICES": "24GiB"}
    traces("alone", env, QWEN)
    traces("shared", dict(env, VTSIM_EXTERNAL="3GiB"), QWEN)
    return traces.vramtrace("diff", "--color", "never", "alone", "shared").rstrip("\n")


def replay_sample(traces):
    traces("13b-12k", {"VTSIM_DEVICES": "24GiB"}, [EX + "/llama-cli", "-m", "llama-13b-q4_k_m", "-c", "12288", "--mmap"])
    return traces.vramtrace("replay", "--capacity", "16GiB", "13b-12k").rstrip("\n")


def runtimes_diff(traces):
    env = {"VTSIM_DEVICES": "24GiB"}
    traces("llama.cpp", env, ENGINE_SHAPE)
    traces("ollama-engine", env, [EX + "/ollama-engine"])
    return traces.vramtrace("diff", "--color", "never", "llama.cpp", "ollama-engine").rstrip("\n")


def runtimes_unknown_site(traces):
    """The Go engine's untagged site, as its report lists it."""
    traces("ollama-engine", {"VTSIM_DEVICES": "24GiB"}, [EX + "/ollama-engine"])
    out = traces.vramtrace("report", "--color", "never", "--top", "0", "ollama-engine")
    sites = re.split(r"\n(?=\s+\d+\.\s)", out.split("Top allocation sites")[1].split("\n\n")[0])
    return "\n".join(s.strip("\n") for s in sites if re.match(r"\s+\d+\.\s+\S+ \S+\s+unknown\s", s))


SAMPLES = [
    # (text that precedes the block in README.md, whatever its line breaks;
    #  what makes the block)
    ("the report says it, with how many layers fit:", story("demo", *DEMO)),
    ("(`llama-server-chat`, 12 GiB card):", story(
        "kv-grows", {"VTSIM_DEVICES": "12GiB"},
        [EX + "/llama-server-chat", "-m", "llama-13b-q4_k_m", "--mmap", "-c", "2048", "--kv-grow", "1024",
         "--turns", "8", "--turn-tokens", "1000"])),
    ("sees less free memory and\noffloads fewer layers:", story("shared", {"VTSIM_DEVICES": "24GiB", "VTSIM_EXTERNAL": "3GiB"}, QWEN)),
    ("allocator):", story("torch-swap", {"VTSIM_DEVICES": "24GiB"}, [EX + "/torch-swap"])),
    ("pages migrate\nat PCIe speed:", story("unified", {"VTSIM_DEVICES": "24GiB", "GGML_CUDA_ENABLE_UNIFIED_MEMORY": "1"},
                                            [EX + "/llama-cli", "-m", "llama-70b-q4_k_m", "-ngl", "99", "-c", "8192",
                                             "--no-mmap"])),
    ("The demo's page, section by section:", html_outline),
    ("where that number does not depend on timing):", perfetto_outline),
    ("and with the frames outside `main` as `…`):", folded_sample),
    ("3 GiB of the card before the model loaded:", diff_sample),
    ("recorded on a 24 GiB card:", replay_sample),
    ("llama.cpp as A and the Go engine as B:", runtimes_diff),
    ("engine's report lists the site as:", runtimes_unknown_site),
]

TIME = re.compile(r"(<\s*)?\b\d+(\.\d+)? (ms|us|s)\b")
PID = re.compile(r"\b(pid|thread) \d+\b")


def current(old, new):
    """Whether OLD says what NEW says but for times, pids and the line
    breaks they move, and has no line longer than NEW's (or the 80
    columns the text outputs fit)."""
    def words(block):
        return PID.sub(r"\1 N", TIME.sub("T", block)).split()

    def widest(block):
        return max((len(line) for line in block.splitlines()), default=0)
    return words(old) == words(new) and widest(old) <= max(80, widest(new))


def main():
    args = sys.argv[1:]
    check = args[:1] == ["--check"]
    args = args[1:] if check else args
    if len(args) > 1 or any(a.startswith("-") for a in args):
        sys.exit("usage: scripts/readme-samples.py [--check] [FILE]")
    path = args[0] if args else "README.md"
    readme = open(path, encoding="utf-8").read()
    stale = 0
    with tempfile.TemporaryDirectory() as top:
        traces = Traces(top)
        for marker, make in SAMPLES:
            # Wherever the paragraph's lines break.
            found = re.search(r"\s+".join(map(re.escape, marker.split())), readme)
            if not found:
                sys.exit("readme-samples: marker not found in %s: %r" % (path, marker))
            start = found.end() + len(readme[found.end():]) - len(readme[found.end():].lstrip()) + 4
            if readme[start - 4:start] != "```\n":
                sys.exit("readme-samples: no code block right after %r" % marker)
            end = readme.index("```", start)
            new = make(traces) + "\n"
            old = readme[start:end]
            if current(old, new):
                continue
            stale += 1
            if check:
                print("readme-samples: the block after %r differs from a fresh run:" % " ".join(marker.split()[-4:]))
                sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), path, "fresh run"))
            else:
                print("readme-samples: the block after %r: updated" % " ".join(marker.split()[-4:]))
                readme = readme[:start] + new + readme[end:]
    if check:
        sys.exit(1 if stale else 0)
    open(path, "w", encoding="utf-8").write(readme)


if __name__ == "__main__":
    main()
