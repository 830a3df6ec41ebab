"""Tag GPU allocations from Python (include/vramtrace/annotate.h's API).

    from vramtrace_annotate import tag
    with tag("kv"):
        cache = allocate_kv_cache()

Every allocation the thread makes inside the block carries the frame
"tag:kv"; tags named weights, kv or scratch tag what no more specific
frame claims (docs/python.md). Without the shim (LD_PRELOAD) it does
nothing.
"""
import contextlib
import ctypes

_self = ctypes.CDLL(None)
_push = getattr(_self, "vramtrace_tag_push", None)
_pop = getattr(_self, "vramtrace_tag_pop", None)
if _push is not None:
    _push.argtypes = [ctypes.c_char_p]


@contextlib.contextmanager
def tag(name):
    pushed = _push is not None and _push(name.encode("ascii", "replace")) >= 0
    try:
        yield
    finally:
        if pushed:
            _pop()
