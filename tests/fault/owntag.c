/* libowntag.so: a library that defines its own vramtrace_tag_push (a
 * no-op annotation stub), preloaded before the shim (76-fault-interpose):
 * it is not another copy of the shim, and tracing stays on. */
__attribute__((visibility("default"))) int vramtrace_tag_push(const char *tag)
{
    (void)tag;
    return -1;
}
