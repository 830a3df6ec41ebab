#!/bin/sh
# Checks the build dependencies of vramtrace. As root on Debian/Ubuntu it
# installs what is missing; otherwise it prints the one command to run.
set -u
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
missing=""
have_header() { printf '#include <%s>\n' "$1" | cc -E -x c - >/dev/null 2>&1; }
have_header zstd.h || missing="$missing libzstd-dev"
have_header libunwind.h || missing="$missing libunwind-dev"
have_header elfutils/libdw.h || missing="$missing libdw-dev libelf-dev"
command -v prove >/dev/null 2>&1 || missing="$missing perl"
command -v cc >/dev/null 2>&1 || missing="$missing gcc"
command -v c++filt >/dev/null 2>&1 || missing="$missing binutils"
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "vramtrace: installing build dependencies:$missing"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >/dev/null && apt-get install -y -qq $missing >/dev/null || {
            echo "vramtrace: apt-get install failed; run: apt-get install -y$missing" >&2; exit 1; }
    else
        echo "vramtrace: missing build dependencies. Run:" >&2
        echo "    sudo apt-get install -y$missing" >&2
        exit 1
    fi
fi
if [ ! -f "$CUDA_HOME/include/cuda.h" ]; then
    echo "vramtrace: cuda.h not found under CUDA_HOME=$CUDA_HOME." >&2
    echo "    Install the CUDA toolkit headers (Debian: apt-get install -y nvidia-cuda-dev) and set CUDA_HOME, e.g. make CUDA_HOME=/usr" >&2
    exit 1
fi
exit 0
