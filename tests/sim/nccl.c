/* libnccl.so.2 stub: the six names @fugood/llama.node's CUDA build imports
 * for multi-GPU all-reduce. One GPU never reaches them; a call that did
 * would fail as NCCL does without a peer (ncclUnhandledCudaError). */
#define NCCL_UNHANDLED_CUDA_ERROR 1
#define EXPORT __attribute__((visibility("default")))

EXPORT int ncclCommInitAll(void *comms, int ndev, const int *devlist)
{
    (void)comms, (void)ndev, (void)devlist;
    return NCCL_UNHANDLED_CUDA_ERROR;
}
EXPORT int ncclCommDestroy(void *comm)
{
    (void)comm;
    return 0;
}
EXPORT int ncclAllReduce(const void *send, void *recv, unsigned long count, int type, int op, void *comm, void *stream)
{
    (void)send, (void)recv, (void)count, (void)type, (void)op, (void)comm, (void)stream;
    return NCCL_UNHANDLED_CUDA_ERROR;
}
EXPORT int ncclGroupStart(void)
{
    return 0;
}
EXPORT int ncclGroupEnd(void)
{
    return 0;
}
EXPORT const char *ncclGetErrorString(int result)
{
    return result ? "unhandled cuda error (run with NCCL_DEBUG=INFO for details)" : "no error";
}
