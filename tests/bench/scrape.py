#!/usr/bin/env python3
"""Row 6 of `make bench`: what a `serve` scrape of a directory of many
traces costs, and what one growing trace adds to it.

    scrape.py VRAMTRACE GENTRACE N [REPS]

Builds a directory of N - 1 copies of a small trace (gentrace -e 2000 -l 100
-s 50) and one growing trace, starts `VRAMTRACE serve --metrics 0 DIR`, and
times scrapes from here (one HTTP GET each, wall ms; medians of REPS):
the first (every trace read), one with nothing changed, one after the
growing trace gained its last chunk (small: a copy of the small trace; big:
a 1M-event gentrace trace), and, for comparison, `serve --once DIR` (a
fresh read of everything, as every scrape was before serve kept its
traces; timed before the growing trace grows). The growing trace is cut
back to all its chunks but the last before each grown scrape, and that cut
is scraped too, so each grown scrape sees one chunk more than the one
before: what it reads is that chunk (`bytes read`), the rest of the trace
having been read by the scrape of the cut. Prints rows; exits 1 on an
error.
"""
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request


def chunk_starts(path):
    """The offsets where the trace's chunks start (and its size last)."""
    with open(path, "rb") as f:
        data = f.read()
    header_len = struct.unpack_from("<I", data, 12)[0]
    off, starts = 16 + header_len, []
    while off + 16 <= len(data):
        starts.append(off)
        off += 16 + struct.unpack_from("<I", data, off + 4)[0]
    return starts, len(data)


def main():
    vt, gentrace, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    reps = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    tmp = tempfile.mkdtemp(prefix="vt-scrape.")
    proc = None
    try:
        small, big = os.path.join(tmp, "small.vtrace"), os.path.join(tmp, "big.vtrace")
        subprocess.run([gentrace, "-o", small, "-e", "2000", "-l", "100", "-s", "50"], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([gentrace, "-o", big, "-e", "1000000", "-l", "10000", "-s", "1000"], check=True,
                       stdout=subprocess.DEVNULL)
        d = os.path.join(tmp, "dir")
        os.mkdir(d)
        for i in range(n - 1):
            shutil.copyfile(small, os.path.join(d, "r%04d.vtrace" % i))
        grow = os.path.join(d, "grow.vtrace")
        shutil.copyfile(small, grow)
        total = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        proc = subprocess.Popen([vt, "serve", "--metrics", "0", d], stderr=subprocess.PIPE, text=True)
        url = None
        for line in proc.stderr:
            m = re.search(r"serving metrics on (http\S+)", line)
            if m:
                url = m.group(1)
                break
        if not url:
            print("   serve did not start")
            return 1

        def scrape():
            t0 = time.perf_counter()
            body = urllib.request.urlopen(url, timeout=120).read().decode()
            ms = (time.perf_counter() - t0) * 1000
            read = re.search(r"^vramtrace_scrape_read_traces (\d+)$", body, re.M)
            nbytes = re.search(r"^vramtrace_scrape_read_bytes (\d+)$", body, re.M)
            return ms, int(read.group(1)) if read else -1, int(nbytes.group(1)) if nbytes else -1

        first = scrape()
        same = [scrape() for _ in range(reps)]
        fresh = []
        for _ in range(reps):
            t0 = time.perf_counter()
            subprocess.run([vt, "serve", "--once", d], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            fresh.append((time.perf_counter() - t0) * 1000)

        def grown(src):
            """Scrapes after src's last chunk lands in grow.vtrace, REPS times."""
            starts, size = chunk_starts(src)
            cut = starts[-1] if starts else size
            with open(src, "rb") as f:
                data = f.read()
            rows = []
            for _ in range(reps):
                with open(grow, "r+b") as f:   # back to all chunks but the last
                    f.write(data[:cut])
                    f.truncate(cut)
                scrape()
                with open(grow, "ab") as f:
                    f.write(data[cut:])
                rows.append(scrape())
            return rows, size - cut, size

        g_small, add_small, size_small = grown(small)
        g_big, add_big, size_big = grown(big)

        med = lambda rows: statistics.median(r[0] for r in rows)
        fresh_ms = statistics.median(fresh)
        print("   %d traces, %d bytes in all (%d each) before the growing one grew" % (n, total, os.path.getsize(small)))
        print("   %-52s %9s %7s %11s %9s" % ("scrape", "wall ms", "traces", "bytes read", "vs fresh"))
        row = lambda name, ms, r, b: print("   %-52s %9.1f %7d %11d %8.3fx" % (name, ms, r, b, ms / fresh_ms))
        row("first (every trace read)", first[0], first[1], first[2])
        row("nothing changed", med(same), same[0][1], same[0][2])
        row("one trace grew %d B (of %d B now)" % (add_small, size_small), med(g_small), g_small[0][1], g_small[0][2])
        row("one trace grew %d B (of %d B now)" % (add_big, size_big), med(g_big), g_big[0][1], g_big[0][2])
        print("   %-52s %9.1f %7s %11s %8.3fx" % ("fresh read, serve --once (every trace, a process)", fresh_ms, "all",
                                                "", 1.0))
        for name, rows in (("small", g_small), ("big", g_big)):
            verdict = "met" if med(rows) <= 50 else "MISSED by %.1f ms" % (med(rows) - 50)
            print("   one %s trace grown among %d: %.1f ms, target <= 50 ms: %s" % (name, n, med(rows), verdict))
        return 0
    finally:
        if proc:
            proc.terminate()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
