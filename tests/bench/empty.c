/* empty.c: a shared library with nothing in it. `make bench` preloads it to
 * measure the floor: what LD_PRELOAD of any library costs a process, so the
 * shim's startup cost can be told apart from the loader's. */
int vt_bench_empty_marker;
