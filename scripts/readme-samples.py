#!/usr/bin/env python3
"""Regenerates the sample outputs of README.md and docs/ from the current
code, and the performance table from the recorded bench output.

    make && make test-bins && python3 scripts/readme-samples.py
    python3 scripts/readme-samples.py --check [PAGE [COPY]]
    python3 scripts/readme-samples.py --record-bench
    python3 scripts/readme-samples.py --links [PAGE...]

Each sample is the code block after a marker paragraph of its page
(SAMPLES). Its programs run under the shim on the simulated GPU (the
stories with the same commands as tests/t/60-examples.t), and the block is
replaced by what the commands print: a report's first verdict paragraph, a
diff, a replay, or an outline of what `report --html` and `export` write.
Run from the repository root; prints which blocks changed.

Times and pids differ from run to run (the examples sleep where the real
runtimes work, and a loaded machine stretches that), so a block whose
only differences are times, pids and the line breaks they move is left as
it is. --check writes nothing: it prints a diff of every block that
differs beyond that and exits 1. PAGE limits it to one page; COPY is read
instead of PAGE, for a test to check a copy.

Performance figures vary from run to run, so they are not re-measured by
--check: --record-bench runs `make bench` (and times `report` of 1,000
copies of the demo's runner trace) and writes the output, with the commit
and the load average, to docs/bench/results.txt; the table between
<!-- bench-table --> comments of docs/performance.md is written from that
file and checked against it byte for byte.

--links checks that every relative link of README.md, examples/README.md
and docs/*.md (or of
the PAGEs named) names a file that exists and, with '#', a heading of it."""
import difflib
import glob
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
# The demo's estimate, run (story 1a).
NGL39 = ({"VTSIM_DEVICES": "24GiB"}, [EX + "/llama-server", "-m", "llama-70b-q4_k_m", "-ngl", "39", "-c", "8192"])
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

    def environ(self, d, env):
        """The environment of a traced program writing into D."""
        e = {k: v for k, v in os.environ.items()
             if not k.startswith("VTSIM_") and not k.startswith("VRAMTRACE_") and not k.startswith("GGML_")}
        # A sanitized build's runtime must come before the shim
        # (tests/tests.mk sets VT_SAN_RT).
        preload = os.path.abspath(B + "/libvramtrace.so")
        if os.environ.get("VT_SAN_RT"):
            preload = os.environ["VT_SAN_RT"] + " " + preload
        e.update(env, LD_LIBRARY_PATH=B + "/sim", LD_PRELOAD=preload, VRAMTRACE_DIR=d)
        return e

    def __call__(self, name, env, argv, run=None):
        """Traces ARGV into the directory NAME, once; RUN(argv, real
        executable, environment) runs it when the program needs more than
        to be started and waited for."""
        if name not in self.done:
            d = os.path.join(self.top, name)
            os.mkdir(d)
            e = self.environ(d, env)
            real = REAL_EX + argv[0][len(EX):] if argv[0].startswith(EX + "/") else argv[0]
            if run:
                run(argv, real, e)
            else:
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


def figure(name, env, argv, pattern):
    """One figure of a program's report: PATTERN's group in its verdict
    paragraph; a paragraph without it is an error, not a blank."""
    def make(traces):
        verdict = story(name, env, argv)(traces)
        found = re.search(pattern, verdict)
        if not found:
            sys.exit("readme-samples: %r not in the report of %s:\n%s" % (pattern, name, verdict))
        return found.group(1)
    return make


def trace_size(hidden):
    """The size of story 2's trace (55-shim-nolibs.t's run) with the
    sonames HIDDEN made impossible to load (tests/shim/hidelibs.c,
    preloaded before the shim), in kB."""
    name = "nolibs-" + (hidden or "none")

    def run(argv, real, env):
        preload = env["LD_PRELOAD"].split()
        hide = os.path.abspath(B + "/tests/shim/libhidelibs.so")
        env = dict(env, VT_HIDE_LIBS=hidden, LD_PRELOAD=" ".join(preload[:-1] + [hide, preload[-1]]))
        subprocess.run(argv, executable=real, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def make(traces):
        if os.environ.get("VT_SANITIZE"):
            return None   # instrumented frames make other stacks
        traces(name, {"VTSIM_DEVICES": "12GiB"},
               [EX + "/llama-server-chat", "-m", "llama-13b-q4_k_m", "--mmap", "-c", "2048", "--kv-grow", "1024",
                "--turns", "8", "--turn-tokens", "1000"], run=run)
        d = os.path.join(traces.top, name)
        return "%.1f kB" % (sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)) / 1000)
    return make


def stack_added(mode):
    """What the shim adds to the stack's high-water mark of a CUDA call
    (MODE first: the process's first, which starts the writer; later: the
    others), as tests/t/54-shim-stack.t measures it on a 256 KiB stack, in
    kB. None (not checked) in a sanitized build, whose frames are larger."""
    def used(env):
        out = subprocess.run([B + "/tests/shim/smallstack", "256", mode], env=env, capture_output=True, text=True).stdout
        return int(re.search(r"used (\d+) bytes", out).group(1))

    def make(traces):
        if os.environ.get("VT_SANITIZE"):
            return None
        plain = dict(os.environ, LD_LIBRARY_PATH=B + "/sim")
        plain.pop("LD_PRELOAD", None)
        with tempfile.TemporaryDirectory() as d:
            shim = traces.environ(d, {})
            return "%.1f kB" % ((used(shim) - used(plain)) / 1000)
    return make


GENTRACE_20K = ["-e", "200000", "-s", "20000", "-d", "30"]


def json_size(what):
    """WHAT ("trace" or "json"): the size in MB of a gentrace trace of 20k
    stacks of 30 frames, or of its `report --json`."""
    def make(traces):
        path = os.path.join(traces.top, "20k-stacks.vtrace")
        if not os.path.exists(path):
            subprocess.run([B + "/bench/gentrace", "-o", path] + GENTRACE_20K, stdout=subprocess.DEVNULL, check=True)
        if what == "trace":
            size = os.path.getsize(path)
        else:
            size = len(subprocess.run([VT, "report", "--json", path], capture_output=True).stdout)
        return "%.1f MB" % (size / 1e6)
    return make


def hog_midrun(argv, real, env):
    """Story 3a as tests/t/60-examples.t runs it: the server takes one
    request (1000 tokens) from stdin; gpu-hog, untraced, then takes 2048 MiB
    of the same simulated card (VTSIM_SHARED); two more requests follow."""
    shared = os.path.join(os.path.dirname(env["VRAMTRACE_DIR"]), "3a.shared")
    env = dict(env, VTSIM_SHARED=shared)
    server = subprocess.Popen(argv, executable=real, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    server.stdin.write("1000\n")
    server.stdin.flush()
    server.stdout.readline()
    hog_env = {k: v for k, v in env.items() if k not in ("LD_PRELOAD", "VRAMTRACE_DIR")}
    hog = subprocess.Popen([REAL_EX + "/gpu-hog", "2048"], env=hog_env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           text=True)
    while hog.stdout.readline().strip() not in ("ready", ""):
        pass
    server.communicate("1000\n1000\n")
    hog.terminate()
    hog.wait()


STORY_3A = ({"VTSIM_DEVICES": "12GiB"},
            [EX + "/llama-server-chat", "-m", "llama-13b-q4_k_m", "--mmap", "-c", "2048", "--kv-grow", "1024", "--stdin"])


def story_3a(traces):
    traces("hog-midrun", *STORY_3A, run=hog_midrun)
    out = traces.vramtrace("report", "--color", "never", "hog-midrun")
    return out.split("\n\n")[0].strip("\n")


def story_3a_free(traces):
    """The free memory when request 3's KV block failed, as the report
    states it."""
    return re.search(r"about (\S+ \S+) free then", story_3a(traces)).group(1)


def story_3a_untracked(traces):
    return re.search(r"untracked (\S+ \S+)\.", story_3a(traces)).group(1)


# (page, text that precedes the block on that page whatever its line
#  breaks, what makes the block[, the relative difference a figure may
#  have from a fresh run's: for sizes that vary by a few bytes a run])
SAMPLES = [
    ("README.md", "the report says it, with how many layers fit:", story("demo", *DEMO)),
    ("README.md", "<!-- demo-layer -->", figure("demo", *DEMO, r"A layer here is about\s+(\S+ \S+) of weights")),
    ("README.md", "<!-- demo-kv -->", figure("demo", *DEMO, r"KV cache(?: \(\d+ cells\))?: \S+ \S+ of (\S+ \S+) \(")),
    ("README.md", "<!-- 1a-free -->", figure(
        "ngl39", *NGL39, r"(?s)True headroom: (\S+ \S+) free at the lowest.*Stayed above the 15% margin")),
    ("README.md", "<!-- 1a-host -->", figure(
        "ngl39", *NGL39, r"VERDICT: PARTIAL OFFLOAD\. (\d+ of \d+) layers run from host memory")),
    ("README.md", "<!-- 1b-weights -->", figure(
        "ngl99", {"VTSIM_DEVICES": "24GiB"}, [EX + "/llama-cli", "-m", "llama-70b-q4_k_m", "-ngl", "99", "-c", "8192", "--no-mmap"],
        r"(?s)VERDICT: OUT OF MEMORY\..*the model load failed.*cudaMalloc of (\S+ \S+) for weights\s+failed")),
    ("docs/stories.md", "(`llama-server-chat`, 12 GiB card):", story(
        "kv-grows", {"VTSIM_DEVICES": "12GiB"},
        [EX + "/llama-server-chat", "-m", "llama-13b-q4_k_m", "--mmap", "-c", "2048", "--kv-grow", "1024",
         "--turns", "8", "--turn-tokens", "1000"])),
    ("docs/stories.md", "sees less free memory and offloads fewer layers:",
     story("shared", {"VTSIM_DEVICES": "24GiB", "VTSIM_EXTERNAL": "3GiB"}, QWEN)),
    ("docs/stories.md", "the server's report:", story_3a),
    ("examples/README.md", "<!-- 3a-free -->", story_3a_free),
    ("examples/README.md", "<!-- 3a-untracked -->", story_3a_untracked),
    ("docs/services.md", "<!-- size-nozstd -->", trace_size("libzstd.so.1"), 0.05),
    ("docs/services.md", "<!-- size-zstd -->", trace_size(""), 0.10),
    # The loader's lazy fixups save the vector registers on the stack
    # (xsave), whose size is the CPU's: the same build measured 0.7 kB on
    # one machine and 0.8 on another.
    ("docs/robustness.md", "<!-- stack-later -->", stack_added("later"), 0.25),
    ("docs/robustness.md", "<!-- stack-first -->", stack_added("first"), 0.25),
    ("docs/robustness.md", "<!-- json-size -->", json_size("json"), 0.1),
    ("docs/robustness.md", "<!-- json-trace -->", json_size("trace"), 0.1),
    ("docs/stories.md", "allocator):", story("torch-swap", {"VTSIM_DEVICES": "24GiB"}, [EX + "/torch-swap"])),
    ("docs/stories.md", "pages migrate at PCIe speed:",
     story("unified", {"VTSIM_DEVICES": "24GiB", "GGML_CUDA_ENABLE_UNIFIED_MEMORY": "1"},
           [EX + "/llama-cli", "-m", "llama-70b-q4_k_m", "-ngl", "99", "-c", "8192", "--no-mmap"])),
    ("docs/views.md", "The demo's page, section by section:", html_outline),
    ("docs/views.md", "where that number does not depend on timing):", perfetto_outline),
    ("docs/views.md", "and with the frames outside `main` as `…`):", folded_sample),
    ("docs/views.md", "3 GiB of the card before the model loaded:", diff_sample),
    ("docs/views.md", "recorded on a 24 GiB card:", replay_sample),
    ("docs/runtimes.md", "llama.cpp as A and the Go engine as B:", runtimes_diff),
    ("docs/runtimes.md", "engine's report lists the site as:", runtimes_unknown_site),
    ("docs/performance.md", "<!-- bench-table -->", lambda traces: "\n" + bench_table() + "\n"),
]
PAGES = sorted({sample[0] for sample in SAMPLES}, key=lambda p: (p != "README.md", p))

TIME = re.compile(r"(<\s*)?\b\d+(\.\d+)? (ms|us|s)\b")
PID = re.compile(r"\b(pid|thread) \d+\b")


def near(old, new, tolerance):
    """Whether figures OLD and NEW ("10.7 kB") have the same unit and
    differ by at most TOLERANCE of NEW."""
    a, b = old.split(), new.split()
    try:
        return len(a) == len(b) == 2 and a[1] == b[1] and abs(float(a[0]) - float(b[0])) <= tolerance * float(b[0])
    except ValueError:
        return False


def current(old, new):
    """Whether OLD says what NEW says but for times, pids and the line
    breaks they move, and has no line longer than NEW's (or the 80
    columns the text outputs fit)."""
    def words(block):
        return PID.sub(r"\1 N", TIME.sub("T", block)).split()

    def widest(block):
        return max((len(line) for line in block.splitlines()), default=0)
    return words(old) == words(new) and widest(old) <= max(80, widest(new))


BENCH_RESULTS = "docs/bench/results.txt"


def record_bench():
    """Runs `make bench` and the many-traces measurement, and writes what
    they print to BENCH_RESULTS under a header naming the commit, the time
    and the machine's load before and after: the file the performance
    table of docs/performance.md is written from."""
    def load():
        return open("/proc/loadavg").read().split()[:3]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "preload", "analyzer", "include", "tests/bench", "tests/sim"]).returncode
    when = subprocess.run(["date", "-u", "+%Y-%m-%d %H:%M UTC"], capture_output=True, text=True).stdout.strip()
    before = load()
    bench = subprocess.run(["make", "--no-print-directory", "bench"], capture_output=True, text=True)
    many = many_traces()
    after = load()
    head = ["# make bench, recorded by scripts/readme-samples.py --record-bench",
            "# commit %s%s, %s" % (commit, " (with uncommitted changes to the measured code)" if dirty else "", when),
            "# load average before: %s, after: %s" % (" ".join(before), " ".join(after))]
    os.makedirs(os.path.dirname(BENCH_RESULTS), exist_ok=True)
    with open(BENCH_RESULTS, "w", encoding="utf-8") as out:
        out.write("\n".join(head) + "\n\n" + bench.stdout + many)
    sys.stdout.write(bench.stderr)
    print("readme-samples: wrote %s (make bench exit %d)" % (BENCH_RESULTS, bench.returncode))
    return bench.returncode


def many_traces(copies=1000):
    """`vramtrace report DIR` of COPIES copies of the demo's llama-server
    trace: its wall time and peak RSS (wait4's rusage of that child)."""
    import shutil
    import time
    with tempfile.TemporaryDirectory() as top:
        traces = Traces(top)
        traces("demo", *DEMO)
        one = [f for f in os.listdir(os.path.join(top, "demo")) if f.startswith("llama-server.")][0]
        size = os.path.getsize(os.path.join(top, "demo", one))
        many = os.path.join(top, "many")
        os.mkdir(many)
        for i in range(copies):
            shutil.copy(os.path.join(top, "demo", one), os.path.join(many, "llama-server.%d.vtrace" % (100000 + i)))
        t0 = time.monotonic()
        child = subprocess.Popen([VT, "report", many], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.monotonic() - t0
        child.returncode = rc = os.waitstatus_to_exitcode(status)
        rss = usage.ru_maxrss
    return ("\n6. MANY TRACES (vramtrace report DIR of %d copies of one %d-byte llama-server trace; exit %d)\n"
            "   wall %.2f s, peak RSS %.0f MB\n" % (copies, size, rc, wall, rss / 1000))


def bench_table(_traces=None, path=None):
    """The performance table of docs/performance.md, every figure copied
    from the recorded bench output (BENCH_RESULTS) and every verdict the
    bench's own, but the many-traces row's, whose targets only this table
    states."""
    text = open(path or BENCH_RESULTS, encoding="utf-8").read()

    def line(pattern):
        found = re.search(r"^\s*" + pattern + r".*$", text, re.M)
        if not found:
            sys.exit("readme-samples: %s has no line %r" % (path or BENCH_RESULTS, pattern))
        return found.group(0)

    def verdict(pattern):
        return re.search(r"(met|MISSED.*?\))", line(pattern)).group(1).replace("MISSED", "missed")

    def after(label):
        """The words of LABEL's line after LABEL: its columns."""
        return line(re.escape(label)).split(label, 1)[1].split()

    commit = re.search(r"^# commit (\S+?),? ", text, re.M).group(1)
    load = re.search(r"^# load average before: (\S+) .*after: (\S+)", text, re.M).groups()
    cu = after("cuMemAlloc_v2/cuMemFree_v2 (depth 20)")
    rt = after("cudaMalloc/cudaFree (depth 20)")
    ht = after("malloc/free under heaptrack (depth 20)")
    d0 = after("VRAMTRACE_DEPTH=0 (cu)")
    t1 = after("1 thread (cu), CPU ns/pair, all threads")
    t8 = after("8 threads (cu), CPU ns/pair, all threads")
    r8 = after("8-thread / 1-thread overhead (CPU)")
    start = {name: after(name) for name in ("/bin/true", "shell script (3 execs)", "16 idle threads")}
    files = after("files written (all runs)")
    threads = after("threads started")
    fixed = after("hot path (fixed sizes, one stack)")
    rand = line(re.escape("random sizes, 4096 stacks (")).split(")", 1)[1].split()
    big = re.search(r"^\s*(\d+) events, 10k live\s+text\s+\S+\s+\S+\s+(\S+)\s+(\S+).*runs: ([\d.-]+) Mev/s", text, re.M).groups()
    big_read = re.search(r"10k live.*?\n.*?reading alone.*?, ([\d.]+ Mev/s)", text, re.S).group(1)
    many_stacks = re.search(r"^\s*(\d+) events, 100k stacks\s+text\s+\S+\s+\S+\s+(\S+)\s+(\S+).*runs: ([\d.-]+) Mev/s", text, re.M).groups()
    stacks_read = re.search(r"100k stacks.*?\n.*?reading alone.*?, ([\d.]+ Mev/s)", text, re.S).group(1)
    fmt = re.findall(r"^\s*--(json|html)\s+\S+\s+\S+\s+\S+\s+\S+\s+(\S+)\s+(\w+)", text, re.M)
    llama_wall = re.search(r"wall: untraced (\S+ ms), traced (\S+ ms), traced/untraced (\S+) \(rounds (\S+)\)", text)
    llama_cpu = re.search(r"cpu:  untraced (\S+ ms), traced (\S+ ms), traced/untraced (\S+) \(rounds (\S+)\)", text)
    many = re.search(r"MANY TRACES .*? of (\d+) copies of one (\d+)-byte .*\n\s+wall (\S+) s, peak RSS (\S+) MB", text)

    def mev(events):
        return "%gM" % (int(events) / 1e6)
    rows = [
        ("alloc+free pair, depth-20 stacks, `cuMemAlloc_v2`",
         "+%s ns (%s heaptrack's malloc+free, +%s ns)" % (cu[2], after("ours / heaptrack, driver API")[0], ht[2]),
         "0.5x heaptrack", verdict(r"ours / heaptrack, driver")),
        ("same, `cudaMalloc`", "+%s ns (%s heaptrack)" % (rt[2], after("ours / heaptrack, runtime API")[0]),
         "0.5x heaptrack", verdict(r"ours / heaptrack, runtime")),
        ("`VRAMTRACE_DEPTH=0`", "+%s ns per pair" % d0[2], "100 ns", verdict(r"VRAMTRACE_DEPTH=0")),
        ("8 threads vs 1, CPU time per pair (the writer thread included on both sides)",
         "%s (+%s against +%s ns)" % (r8[0], t8[2], t1[2]), "2x", verdict(r"8-thread / 1-thread")),
    ]
    for name, c in start.items():
        rows.append(("startup under `LD_PRELOAD`, no CUDA call: %s" % ("`/bin/true`" if name == "/bin/true" else name.replace("shell script", "a shell script")),
                     "%s (an empty preloaded library alone: %s)" % (c[3], c[4]),
                     "1.05x", verdict(re.escape(name))))
    rows += [
        ("files written / threads started by processes that never call CUDA", "%s / %s" % (files[0], threads[0]), "0 / 0",
         "met" if files[-1] == threads[-1] == "met" else "missed"),
        ("trace size, random sizes and 4096 stacks", "%s bytes/event (heaptrack: %s, so %s)" % (rand[0], rand[1], rand[2]),
         "heaptrack's", verdict(r"random sizes, 4096 stacks")),
        ("trace size, a fixed alloc/free loop", "%s bytes/event (heaptrack: %s, so %s)" % (fixed[0], fixed[1], fixed[2]),
         "heaptrack's", verdict(r"hot path \(fixed sizes")),
        ("`vramtrace report`, %s events, 10k live" % mev(big[0]),
         "%sM events/s on one core (its runs %s; reading alone: %s), %s MB peak RSS" % (big[1], big[3], big_read, big[2]),
         "20M/s; 100 MB", verdict(r"\d+ events, 10k live")),
        ("`vramtrace report`, %s events, 100k distinct stacks" % mev(many_stacks[0]),
         "%sM events/s (its runs %s; reading alone: %s), %s MB peak RSS" % (many_stacks[1], many_stacks[3], stacks_read, many_stacks[2]),
         "20M/s; 100 MB", verdict(r"\d+ events, 100k stacks")),
        ("`--json` / `--html` vs text", "%s / %s (%s / %s with 100k stacks)" % (fmt[0][1], fmt[1][1], fmt[2][1], fmt[3][1]),
         "1.2x", "met" if all(v == "met" for _, _, v in fmt) else "missed"),
        ("real llama.cpp model load (node-llama-cpp 3.21.1, 346 MiB, simulated GPU), traced / untraced",
         "%s wall (%s -> %s; rounds %s), %s CPU (rounds %s)" % (llama_wall.group(3), llama_wall.group(1), llama_wall.group(2),
                                                                llama_wall.group(4), llama_cpu.group(3), llama_cpu.group(4)),
         "1.02x wall", verdict(r"wall: untraced")),
        ("`vramtrace report` of %s runner traces (copies of one %s KB llama-server trace)" % (
            format(int(many.group(1)), ","), round(int(many.group(2)) / 1000)),
         "%s s, %s MB peak RSS" % (many.group(3), many.group(4)), "2 s; 200 MB",
         "; ".join("met" if float(v) <= t else "missed" for v, t in ((many.group(3), 2), (many.group(4), 200)))),
    ]
    out = ["Recorded at %s, load average %s before and %s after (2 shared cores):" % (commit, load[0], load[1]), "",
           "| what | figure | target | verdict |", "|---|---|---|---|"]
    out += ["| %s | %s | %s | %s |" % r for r in rows]
    return "\n".join(out)


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def anchors(text):
    """The anchors GitHub gives a page's headings: lower case, punctuation
    but '-' and '_' dropped, spaces as '-', repeats numbered."""
    seen = {}
    out = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", FENCE.sub("", text), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else "%s-%d" % (slug, n))
    return out


def check_links(pages):
    """Every relative link of PAGES (markdown, outside code blocks) names a
    file or directory that exists and, with '#', an anchor of that page.
    Returns the broken ones as 'page: target (why)'."""
    broken = []
    for page in pages:
        text = FENCE.sub("", open(page, encoding="utf-8").read())
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(dest):
                broken.append("%s: %s (no such file)" % (page, target))
            elif anchor and (not dest.endswith(".md") or anchor not in anchors(open(dest, encoding="utf-8").read())):
                broken.append("%s: %s (no such anchor)" % (page, target))
    return broken


def check_page(page, path, traces, check):
    """The samples of PAGE, read from PATH: 0 when all are current, else
    how many are not (printed as a diff with CHECK, else updated in PATH)."""
    text = open(path, encoding="utf-8").read()
    stale = 0
    for home, marker, make, *tolerance in SAMPLES:
        if home != page:
            continue
        if marker.startswith("<!--"):
            # A generated table or figure: between the marker and its
            # closing comment, compared byte for byte.
            what, fresh = ("table", "the recorded results") if marker == "<!-- bench-table -->" else ("figure", "a fresh run")
            start = text.find(marker)
            if start < 0:
                sys.exit("readme-samples: marker not found in %s: %r" % (path, marker))
            start += len(marker)
            end = text.find(marker.replace("<!-- ", "<!-- /"), start)
            if end < 0:
                sys.exit("readme-samples: no closing %r in %s" % (marker.replace("<!-- ", "<!-- /"), path))
            new = make(traces)
            old = text[start:end]
            if new is None or old == new or (tolerance and near(old, new, tolerance[0])):
                continue
        else:
            what, fresh = "block", "a fresh run"
            # Wherever the paragraph's lines break.
            found = re.search(r"\s+".join(map(re.escape, marker.split())), text)
            if not found:
                sys.exit("readme-samples: marker not found in %s: %r" % (path, marker))
            start = found.end() + len(text[found.end():]) - len(text[found.end():].lstrip()) + 4
            if text[start - 4:start] != "```\n":
                sys.exit("readme-samples: no code block right after %r in %s" % (marker, path))
            end = text.index("```", start)
            new = make(traces) + "\n"
            old = text[start:end]
            if current(old, new):
                continue
        stale += 1
        if check:
            print("readme-samples: %s: the %s after %r differs from %s:" % (page, what, " ".join(marker.split()[-4:]), fresh))
            lines = [(t if t.endswith("\n") else t + "\n").splitlines(True) for t in (old, new)]
            sys.stdout.writelines(difflib.unified_diff(lines[0], lines[1], path, "fresh run"))
        else:
            print("readme-samples: %s: the %s after %r: updated" % (page, what, " ".join(marker.split()[-4:])))
            text = text[:start] + new + text[end:]
    if not check:
        open(path, "w", encoding="utf-8").write(text)
    return stale


def main():
    args = sys.argv[1:]
    if args == ["--record-bench"]:
        sys.exit(record_bench())
    if args[:1] == ["--links"]:
        pages = args[1:] or ["README.md", "examples/README.md"] + sorted(glob.glob("docs/*.md"))
        broken = check_links(pages)
        for b in broken:
            print("readme-samples: broken link: " + b)
        sys.exit(1 if broken else 0)
    check = args[:1] == ["--check"]
    args = args[1:] if check else args
    if len(args) > 2 or any(a.startswith("-") for a in args) or (args and args[0] not in PAGES):
        sys.exit("usage: scripts/readme-samples.py [--check] [PAGE [COPY]]\n       scripts/readme-samples.py --record-bench\n"
                 "PAGE: one of " + ", ".join(PAGES))
    todo = [(args[0], args[-1])] if args else [(page, page) for page in PAGES]
    stale = 0
    with tempfile.TemporaryDirectory() as top:
        traces = Traces(top)
        for page, path in todo:
            stale += check_page(page, path, traces, check)
    if check:
        sys.exit(1 if stale else 0)


if __name__ == "__main__":
    main()
