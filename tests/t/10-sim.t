#!/bin/sh
# The simulated GPU (tests/sim): the driver, the runtime and the pre-12.0
# driver variant, each mode of build/sim/test_sim under the environment it
# documents, plus the link-level promises other suites rely on.
# Needs `make test-bins` (build/sim/*, build/sim-nov2/*).
. tests/t/lib.sh
BIN=$SIM/test_sim
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT

# Clean slate: a developer's VTSIM_* must not change the numbers.
for v in VTSIM_DEVICES VTSIM_NAMES VTSIM_RESERVE VTSIM_GRANULARITY VTSIM_EXTERNAL \
         VTSIM_SHARED VTSIM_SYSMEM_FALLBACK VTSIM_HOST_LIMIT LD_PRELOAD; do
    unset "$v"
done

# mode DESC MODE [VAR=VALUE...]: one test line per mode; its checks indented.
mode() {
    desc=$1 m=$2
    shift 2
    if env "$@" "$BIN" "$m" >"$D/$m.out" 2>"$D/$m.err"; then
        ok "$desc ($(grep -c '^ok' "$D/$m.out") checks)"
    else
        nok "$desc"
        grep -v '^ok' "$D/$m.out" | sed 's/^/#   /'
        sed 's/^/#   stderr: /' "$D/$m.err"
    fi
}

mode "driver API, two devices" driver VTSIM_DEVICES=24GiB,12GiB "VTSIM_NAMES=,Second Sim"
mode "stream capture and graphs" graph VTSIM_DEVICES=24GiB
mode "runtime API, lazy init" runtime
mode "first-fit fragmentation" frag VTSIM_DEVICES=1GiB VTSIM_RESERVE=0
mode "system memory fallback" fallback VTSIM_DEVICES=1GiB VTSIM_RESERVE=0 VTSIM_SYSMEM_FALLBACK=1
mode "per-device configuration" config VTSIM_DEVICES=4GiB VTSIM_RESERVE=0,1GiB \
    VTSIM_EXTERNAL=1GiB VTSIM_GRANULARITY=4MiB VTSIM_HOST_LIMIT=lots
is "$(grep -c "warning: invalid VTSIM_HOST_LIMIT='lots'" "$D/config.err")" 1 \
    "an invalid value warns once"
mode "no device" nodev VTSIM_DEVICES=none
mode "8 threads allocating concurrently" threads
mode "pre-12.0 driver (sim-nov2)" nov2 LD_LIBRARY_PATH=$B/sim-nov2
mode "another process holds VRAM (VTSIM_SHARED)" shared VTSIM_SHARED=$D/shared \
    VTSIM_DEVICES=8GiB VTSIM_RESERVE=512MiB

# -- link-level promises -------------------------------------------------------
soname() { readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p'; }
is "$(soname $SIM/libcuda.so.1)" libcuda.so.1 "driver soname"
is "$(soname $SIM/libcudart.so.13)" libcudart.so.13 "runtime soname"
is "$(readlink $SIM/libcuda.so)" libcuda.so.1 "libcuda.so symlink"
is "$(readlink $SIM/libcudart.so)" libcudart.so.13 "libcudart.so symlink"
is "$(nm -D --undefined-only $SIM/libcudart.so.13 | grep -c ' cu')" 0 \
    "the runtime links no driver function"
is "$(readelf -d $SIM/libcudart.so.13 | grep -c 'libcuda\.so')" 0 "the runtime does not need libcuda"
# -Bsymbolic-functions: the cuGetProcAddress table and internal calls bind to
# the driver's own functions, so an LD_PRELOADed interposer cannot redirect them.
is "$(readelf -rW $SIM/libcuda.so.1 | grep -c ' cu[A-Z]')" 0 "no relocation against driver symbols"
exported() { nm -D --defined-only "$1" | awk '{print $3}' | sort; }
exported $SIM/libcuda.so.1 >"$D/full"
exported $B/sim-nov2/libcuda.so.1 >"$D/nov2"
is "$(comm -23 "$D/full" "$D/nov2" | tr '\n' ' ')" "cuGetProcAddress_v2 cuMemAllocFromPoolAsync_ptsz " \
    "sim-nov2 lacks exactly the two entry points"
for s in cuMemAlloc cuMemGetInfo cuMemAlloc_v2 cuMemGetInfo_v2 cuMemAllocAsync_ptsz cuGetProcAddress; do
    check "driver exports $s" grep -qx "$s" "$D/full"
done
done_testing
