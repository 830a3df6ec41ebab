/* ggml_queue.c: what ggml said about its buffers and tensors, waiting for
 * the writer (GGML_BUFFER, GGML_TENSOR, GGML_FREE and GGML_LOST records,
 * trace_format.h). ggml_buffers.c fills it; writer.c drains it.
 *
 * Contract:
 *  - One queue for every ggml record, so the file keeps their order: a
 *    buffer's records come before its tensors', a free after both, and
 *    a buffer identity (a pointer the program's malloc may reuse) is
 *    never confused across a free.
 *  - Bounded: a record that finds the queue full is lost and counted, the
 *    count written as GGML_LOST, so a reader never takes a partial set of
 *    tensors for the whole model. Never blocks on anything but its own
 *    lock; the caller (ggml_buffers.c) may wait for the writer and try
 *    again before the record is counted. The record that fills it to a
 *    quarter says so, and the hook wakes the writer (tests/t/63-ggml-
 *    queue.t: three bursts of 3,000 records lost 4,904 while the writer
 *    waited for its next look).
 *  - Records may be queued before the shim starts (a model is loaded
 *    before, or without, the first CUDA call); they are written when the
 *    writer runs, and never by a process that does not start the shim.
 *  - A fork child starts with an empty queue: the parent's records belong
 *    to the parent's trace.
 *  - The pages are not touched until the first record: a program without
 *    ggml pays nothing.
 */
#include <pthread.h>
#include <string.h>

#include "shim.h"
#include "vramtrace/encode.h"

/* A 70B llama model is 723 tensors, its KV cache two per layer; a loader
 * queues them within a few milliseconds, faster than the writer drains. */
#define QUEUE_CAP 4096u
#define DRAIN_BATCH 128u

static struct {
    vt_ggml_note_t notes[QUEUE_CAP];
    uint32_t head, queued;   /* the writer takes [head, queued) */
    uint64_t lost;           /* since the start, what GGML_LOST says */
    uint64_t lost_written;
    pthread_mutex_t lock;
    _Atomic int used;        /* 1 once anything was queued: the drain's fast exit */
    _Atomic int full_warned;
} queue = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void queue_atfork_child(void)
{
    pthread_mutex_init(&queue.lock, NULL);
    queue.head = queue.queued = 0;
    queue.lost = queue.lost_written = 0;
}

int vt_ggml_queue(const vt_ggml_note_t *note, int count_if_full)
{
    if (!atomic_exchange(&queue.used, 1))
        pthread_atfork(NULL, NULL, queue_atfork_child);
    int lost, rc = 0;
    pthread_mutex_lock(&queue.lock);
    if (queue.queued < QUEUE_CAP) {
        queue.notes[queue.queued++] = *note;
        rc = queue.queued == QUEUE_CAP / 4;
    } else {
        rc = -1;
        queue.lost += count_if_full != 0;
    }
    lost = queue.lost != 0;   /* read under the lock: another thread may be counting */
    pthread_mutex_unlock(&queue.lock);
    if (lost)
        vt_warn_once(&queue.full_warned, "ggml's buffers and tensors come faster than the trace is written; "
                                         "some are lost (the report says so)");
    return rc;
}

static void emit_note(vt_emit_fn emit, const vt_ggml_note_t *n)
{
    uint8_t buf[6 * VT_VARINT_MAX + VT_VARINT_MAX + VT_GGML_NAME_LEN], *p = buf;
    size_t name_len = strnlen(n->name, VT_GGML_NAME_LEN - 1);
    p = vt_put_varint(p, n->time_ns);
    p = vt_put_varint(p, n->buffer);
    switch (n->type) {
    case VT_REC_GGML_BUFFER:
        p = vt_put_varint(p, n->usage);
        p = vt_put_varint(p, n->addr);
        p = vt_put_varint(p, n->size);
        p = vt_put_str(p, n->name, name_len, VT_GGML_NAME_LEN);
        p = vt_put_varint(p, n->host);
        break;
    case VT_REC_GGML_TENSOR:
        p = vt_put_varint(p, n->addr);
        p = vt_put_varint(p, n->size);
        p = vt_put_str(p, n->name, name_len, VT_GGML_NAME_LEN);
        p = vt_put_varint(p, n->rows);
        break;
    case VT_REC_GGML_FREE:
        break;
    default:
        return;
    }
    emit(n->type, buf, (size_t)(p - buf));
}

void vt_ggml_records(vt_emit_fn emit)
{
    static vt_ggml_note_t taken[DRAIN_BATCH];
    if (!atomic_load_explicit(&queue.used, memory_order_acquire))
        return;  /* ggml never spoke: no lock */
    for (;;) {
        uint32_t n;
        uint64_t lost;
        pthread_mutex_lock(&queue.lock);
        n = queue.queued - queue.head < DRAIN_BATCH ? queue.queued - queue.head : DRAIN_BATCH;
        memcpy(taken, queue.notes + queue.head, n * sizeof *taken);
        queue.head += n;
        if (queue.head == queue.queued)
            queue.head = queue.queued = 0;
        lost = queue.lost;
        pthread_mutex_unlock(&queue.lock);
        for (uint32_t i = 0; i < n; i++)
            emit_note(emit, &taken[i]);
        if (lost != queue.lost_written) {
            uint8_t buf[2 * VT_VARINT_MAX], *p = buf;
            p = vt_put_varint(p, vt_now_ns());
            p = vt_put_varint(p, lost);
            emit(VT_REC_GGML_LOST, buf, (size_t)(p - buf));
            queue.lost_written = lost;
        }
        if (n < DRAIN_BATCH)
            return;
    }
}
