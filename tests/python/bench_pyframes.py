"""What Python frames cost per event: N cudaMalloc/cudaFree pairs through
ctypes, issued from DEPTH nested Python calls (the shape of a torch
allocation deep inside a model), with the calling loop timed in-process.

    python3 bench_pyframes.py [N] [DEPTH...]
prints one line per depth: "depth=D pairs=N ns_per_pair=X". Run it with and
without the shim (LD_PRELOAD) and subtract; a native program's overhead is
`make bench`'s. The simulated driver answers in well under a microsecond,
so what is left is the shim's own work.
"""
import sys
import time

from simcuda import cuda_free, cuda_malloc


def nest(depth, n):
    if depth > 1:
        return nest(depth - 1, n)
    t0 = time.perf_counter_ns()
    for _ in range(n):
        cuda_free(cuda_malloc(4096))
    return time.perf_counter_ns() - t0


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    depths = [int(a) for a in sys.argv[2:]] or [1, 20, 60]
    nest(1, 200)  # warm up: first sites, first stacks
    for d in depths:
        nest(d, 200)
        best = min(nest(d, n) for _ in range(3))
        print("depth=%d pairs=%d ns_per_pair=%d" % (d, n, best // n))


if __name__ == "__main__":
    main()
