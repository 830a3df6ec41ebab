#!/bin/sh
# 63-llama-real.t again on the next release: node-llama-cpp 3.22.1, whose
# prebuilt CUDA 13 build is llama.cpp release v0.5.0 (3.21.1 ships v0.4.0).
# llama.cpp renames and inlines its loaders between releases; the same
# checks on two of them are what says the hooks follow llama.cpp, not one
# build of it. Cached in ~/.cache/vramtrace/llama-3.22.1 like the first.
exec env -u VT_LLAMA_CACHE VT_LLAMA_VERSION=3.22.1 sh tests/t/63-llama-real.t
