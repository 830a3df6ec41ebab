#!/bin/sh
# ollama in Docker, traced: the shim and a trace directory are mounted from
# the host, and LD_PRELOAD names the shim inside the container. The shim
# uses libzstd.so.1 and libunwind.so.8 when the image has them (ollama's and
# most CUDA images have libzstd); without libzstd the trace is written
# uncompressed, without libunwind glibc's backtrace() unwinds what the
# shim's own unwinder cannot: `docker logs` and the report say which.
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
