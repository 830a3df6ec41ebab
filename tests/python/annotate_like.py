"""The Python annotation helper (examples/python/vramtrace_annotate.py)
around ctypes allocations: a tagged block inside an untagged function, a
custom tag, and a block whose inner Python frame (load_weights) is
more specific than the tag around it.

Prints: weights=N kv=N unknown=N
"""
from simcuda import cuda_malloc
from vramtrace_annotate import tag

MiB = 1 << 20


def build_cache():
    return cuda_malloc(3 * MiB)


def load_weights():
    return cuda_malloc(5 * MiB)


def main():
    with tag("kv"):
        build_cache()
        load_weights()          # inner frame decides: weights
    with tag("my_phase"):
        cuda_malloc(2 * MiB)    # custom tag: unknown unless a user rule names it
    print("weights=%d kv=%d unknown=%d" % (5 * MiB, 3 * MiB, 2 * MiB))


if __name__ == "__main__":
    main()
