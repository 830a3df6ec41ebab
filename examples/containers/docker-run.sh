#!/bin/sh
# ollama in Docker, traced: the shim and a trace directory are mounted from
# the host, and LD_PRELOAD names the shim inside the container. The image
# needs libzstd.so.1 (the shim writes traces with it; ollama's and most CUDA
# images have it) and, for full stacks, libunwind.so.8; without libzstd the
# shim says so once on stderr (`docker logs`) and traces nothing.
# Afterwards, on the host: vramtrace report /var/lib/vramtrace/ollama
set -eu
mkdir -p /var/lib/vramtrace/ollama
exec docker run -d --gpus all --name ollama \
    -v /usr/local/lib/vramtrace:/opt/vramtrace:ro \
    -v /var/lib/vramtrace/ollama:/vramtrace \
    -e LD_PRELOAD=/opt/vramtrace/libvramtrace.so \
    -e VRAMTRACE_DIR=/vramtrace \
    -v ollama:/root/.ollama -p 11434:11434 \
    ollama/ollama
