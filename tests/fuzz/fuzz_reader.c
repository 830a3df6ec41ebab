/* fuzz_reader.c: libFuzzer target for the trace reader
 * (analyzer/trace_reader.h): vt_reader_open + vt_reader_next to the end,
 * then the same file again through the report's bulk paths
 * (vt_reader_events, vt_reader_stack), which must see the same records
 * and end the same way.
 *
 * Beyond "no crash", it checks the reader's contract on every record: each
 * string and argv entry it hands out must be readable in full (touching
 * every byte lets ASan catch a length that runs past the buffer), stack node
 * parents are the file's claim and are not checked here, and after an error
 * the same error keeps coming back.
 */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_input.h"
#include "trace_reader.h"

static volatile uint8_t sink;

static void touch(vt_bytes_t b)
{
    uint8_t x = 0;
    for (uint32_t i = 0; i < b.len; i++)
        x ^= (uint8_t)b.data[i];
    sink ^= x;
}

static void touch_process(const vt_rec_process_t *p)
{
    touch(p->shim_version);
    touch(p->exe);
    touch(p->hostname);
    if (p->argc && !p->argv)
        abort(); /* argc claims entries the reader did not provide */
    for (uint32_t i = 0; i < p->argc; i++)
        touch(p->argv[i]);
}

/* Reads path the way the report does; @return the final status, with the
 * events and STACK records counted. */
static int read_bulk(const char *path, unsigned long *events, unsigned long *stacks, unsigned long *others)
{
    vt_reader_t *r;
    vt_error_t err;
    if (vt_reader_open(path, &r, &err) < 0)
        abort(); /* it opened the first time */
    vt_event_t batch[16];
    vt_record_t rec;
    int rc;
    *events = *stacks = *others = 0;
    for (;;) {
        size_t got = vt_reader_events(r, batch, 1 + (*events + *stacks) % 16);
        *events += got;
        if (got)
            continue;
        if (vt_reader_stack(r, &rec.u.stack)) {
            ++*stacks;
            continue;
        }
        if ((rc = vt_reader_next(r, &rec, &err)) <= 0)
            break;
        *events += rec.type == VT_REC_EVENT;
        *stacks += rec.type == VT_REC_STACK;
        *others += rec.type != VT_REC_EVENT && rec.type != VT_REC_STACK;
    }
    vt_reader_close(r);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_trace_path(data, size);
    if (!path)
        return 0;
    vt_reader_t *r;
    vt_error_t err;
    if (vt_reader_open(path, &r, &err) < 0)
        return 0;
    touch_process(vt_reader_process(r));
    vt_record_t rec;
    int rc;
    unsigned long n = 0, events = 0, stacks = 0;
    while ((rc = vt_reader_next(r, &rec, &err)) > 0) {
        n++;
        events += rec.type == VT_REC_EVENT;
        stacks += rec.type == VT_REC_STACK;
        switch (rec.type) {
        case VT_REC_PROCESS:
            touch_process(&rec.u.process);
            break;
        case VT_REC_DEVICE:
            touch(rec.u.device.name);
            break;
        case VT_REC_MODULE:
            touch(rec.u.module.build_id);
            touch(rec.u.module.path);
            break;
        case VT_REC_FRAME:
            touch(rec.u.frame.function);
            break;
        case VT_REC_NOTE:
            touch(rec.u.note.text);
            break;
        case VT_REC_RANGE:
            touch(rec.u.range.name);
            break;
        case VT_REC_GGML_BUFFER:
            touch(rec.u.ggml_buffer.name);
            break;
        case VT_REC_GGML_TENSOR:
            touch(rec.u.ggml_tensor.name);
            break;
        default:
            break;
        }
    }
    /* The contract: after an error (or the end), the same answer again. */
    int again = vt_reader_next(r, &rec, &err);
    if (rc < 0 && again != rc)
        abort();
    if (rc == 0 && again != 0)
        abort();
    if (vt_reader_offset(r) > vt_reader_file_size(r) && vt_reader_file_size(r))
        abort();
    vt_reader_close(r);
    unsigned long be, bs, bo;
    if (read_bulk(path, &be, &bs, &bo) != rc || be != events || bs != stacks || be + bs + bo != n)
        abort();
    return 0;
}
