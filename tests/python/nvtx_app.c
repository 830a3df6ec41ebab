/* nvtx_app: NVTX ranges through the CUDA toolkit's own header-only NVTX v3
 * loader (nvtx3/nvToolsExt.h), which finds the shim through
 * NVTX_INJECTION64_PATH (set by the shim's constructor when unset) and
 * calls its InitializeInjectionNvtx2. The first NVTX call comes before
 * the first CUDA call, as in programs that mark model loading. Covers
 * RangePushA, RangePushEx, RangePushW, a named domain with a registered
 * string, and pops. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <wchar.h>

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

/* The shim mirrors this ABI (preload/ranges.c, nvtx_attr_t). */
_Static_assert(offsetof(nvtxEventAttributes_t, messageType) == 32, "nvtxEventAttributes_t.messageType");
_Static_assert(offsetof(nvtxEventAttributes_t, message) == 40, "nvtxEventAttributes_t.message");
_Static_assert(sizeof(nvtxEventAttributes_t) == 48, "nvtxEventAttributes_t size");

#define MiB (1u << 20)
#define CHECK(x)                                                        \
    do {                                                                \
        if ((x) != 0) {                                                 \
            fprintf(stderr, "nvtx_app: %s failed\n", #x);               \
            exit(1);                                                    \
        }                                                               \
    } while (0)

int main(void)
{
    void *p;
    int d0 = nvtxRangePushA("load weights");
    CHECK(cudaMalloc(&p, 4 * MiB));
    nvtxRangePop();

    nvtxEventAttributes_t a = { 0 };
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "prefill";
    int d1 = nvtxRangePushEx(&a);
    CHECK(cudaMalloc(&p, 2 * MiB));

    nvtxDomainHandle_t nccl = nvtxDomainCreateA("NCCL");
    nvtxEventAttributes_t b = a;
    b.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    b.message.registered = nvtxDomainRegisterStringA(nccl, "AllReduce");
    int d2 = nvtxDomainRangePushEx(nccl, &b);
    CHECK(cudaMalloc(&p, 1 * MiB));
    nvtxDomainRangePop(nccl);
    nvtxRangePop();

    nvtxRangePushW(L"wide range");
    CHECK(cudaMalloc(&p, 6 * MiB));
    nvtxRangePop();
    printf("depths %d %d %d\n", d0, d1, d2);
    return 0;
}
