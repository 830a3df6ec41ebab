/* writer.c: the background thread that turns ring events into the trace
 * file (format: include/vramtrace/trace_format.h).
 *
 * Contract:
 *  - Started by the first intercepted call, never at load time. Opens
 *    VRAMTRACE_DIR/<exe>.<pid>.vtrace with O_CREAT|O_EXCL|O_NOFOLLOW, mode
 *    0600, creating the directory 0700 if missing. Any failure here makes the
 *    shim a pass-through, said once on stderr.
 *  - Every VRAMTRACE_FLUSH_MS writes what it has as one complete zstd frame
 *    (a chunk), so SIGKILL loses at most that much. Between two chunks it
 *    drains the ring as often as the program's rate needs (next_look_ms),
 *    so a busy loop does not overflow the ring at default settings.
 *  - Before an event is encoded, every stack node, frame name, module and
 *    device it refers to has been written.
 *  - A write that fails (disk full, RLIMIT_FSIZE, I/O error) stops all
 *    further event chunks: a partial chunk is cut off, so the file ends at
 *    its last complete chunk, and the events that follow are counted as
 *    lost (unwritten). At stop one small chunk with the loss by reason and
 *    END is tried once more: it fits where space came back, in the bytes a
 *    cut chunk freed, or in the room kept below RLIMIT_FSIZE for it. The
 *    loss is said on stderr at exit either way. RLIMIT_FSIZE is checked
 *    before writing so the host never gets SIGXFSZ from us.
 *  - The thread blocks every signal: the host's handlers never run on it.
 *  - The trace's descriptor lives only in the thread's own descriptor
 *    table (unshare(CLONE_FILES), own_fd_table): the thread opens the file,
 *    writes it and closes it, so a program that closes every descriptor or
 *    dup2()s its own file over all of them can neither lose our file nor
 *    receive our bytes, whatever the timing (tests/t/77-fault-fds.t). That
 *    table keeps nothing of the program's, not even stderr: what the
 *    thread says waits for a thread of the program to say it (vt_say: at
 *    start-up, at a sample, at a sync, at stop). Where unshare is refused
 *    (Docker's default seccomp profile allows it only with CAP_SYS_ADMIN)
 *    the descriptor is shared:
 *    it is checked to be the trace before every write and reopened by path
 *    when it is not, which leaves the instant between check and write; the
 *    trace says so (PROCESS degraded, VT_DEGRADED_SHARED_FDS).
 *  - libzstd is loaded with dlopen on first use, like libunwind. Without it
 *    (a container image that lacks it) chunks are stored uncompressed, the
 *    trace says so (format version 4, PROCESS degraded) and so does stderr,
 *    once: a larger file rather than no trace.
 *  - fork waits (bounded) until the thread is between chunks, so the child
 *    never inherits a lock the thread held inside malloc or libzstd.
 *  - exit waits for the thread, but not for ever for a module walk that
 *    another thread's dl_iterate_phdr callback holds up: after 500 ms the
 *    exiting thread takes the ring and the file from it and ends the trace
 *    itself, with what the thread had not written counted as dropped
 *    (take_over_from_writer).
 *  - A release blocked in the driver does not stall the drain for longer
 *    than ring.c's HELD_WAIT_NS: its slot is passed over. At stop
 *    everything still in the ring is written; a release that never
 *    returned (blocked or cancelled in the driver) is counted as dropped,
 *    so trace + dropped = the program's calls.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_c_literalCompressionMode: a parameter, no static-only function */
#include <zstd.h>

#include "shim.h"
#include "symbols.h"
#include "vramtrace/encode.h"

#define RAW_CAP (1u << 20)
#define BATCH 1024
/* Stack nodes whose frames are named together: the ips of a new stack
 * mostly reach the symbolizer in one pass per drain. */
#define PREFETCH_BATCH 4096

typedef size_t (*zstd_bound_fn)(size_t);
typedef ZSTD_CCtx *(*zstd_create_fn)(void);
typedef size_t (*zstd_set_fn)(ZSTD_CCtx *, ZSTD_cParameter, int);
typedef size_t (*zstd_compress2_fn)(ZSTD_CCtx *, void *, size_t, const void *, size_t);
typedef unsigned (*zstd_is_error_fn)(size_t);

/* Everything the writer keeps between calls, in one struct so that fork
 * resets all of it by default (vt_writer_atfork_child): a field added here
 * starts fresh in a child unless that function keeps it, by name. */
/* libzstd, dlopen'ed once; cctx is reused chunk after chunk. */
typedef struct writer_zstd {
    zstd_bound_fn bound;
    zstd_create_fn create;
    zstd_set_fn set;
    zstd_compress2_fn compress2;
    zstd_is_error_fn is_error;
    ZSTD_CCtx *cctx;
} writer_zstd_t;

typedef struct writer {
    writer_zstd_t zstd;

    /* The trace file. Its identity (dev, ino) is kept at open: the program
     * may close our fd (close_range(3, ~0U)) or dup2() over it, and its next
     * open() then gets that number. Before every write the fd must still be
     * this file. */
    int fd;
    /* fd is in the writer thread's own descriptor table (own_fd_table). */
    int own_fds;
    char path[600];
    dev_t trace_dev;
    ino_t trace_ino;
    uint64_t file_bytes, fsize_limit;
    int write_failed;
    /* A partial chunk could not be cut off: nothing may follow it. */
    int file_ragged;
    /* Set for the chunk with END: it may use the room kept below RLIMIT_FSIZE. */
    int writing_last_chunk;

    /* The chunk being built: raw_len bytes of records in raw, compressed
     * into zbuf (zcap bytes). Without libzstd raw is zbuf +
     * sizeof(vt_chunk_header_t), so a stored chunk goes out as one write,
     * with no copy. */
    uint8_t *raw, *zbuf;
    size_t raw_len, zcap;
    int stored_chunks;
    _Atomic int warned_stored;
    uint32_t chunk_seq;
    /* The open EVENT record's 3-byte length field (format version 3), 0
     * when none is open; close_batch() fills it in. */
    size_t batch_len_at;
    /* Events are delta-encoded against the previous one in the chunk. */
    uint64_t mono_start, prev_time, prev_ptr;

    /* What the file has said so far. */
    /* events_written: in the file (samples too); unwritten: the program's
     * events recorded but never written (VT_LOST_UNWRITTEN). */
    uint64_t events_written, unwritten;
    uint64_t chunk_events, chunk_program_events; /* in the chunk being built */
    uint32_t nodes_emitted;
    uint64_t last_dropped, last_stacks_lost;
    /* At stop, once the ring's losses are sealed (vt_ring_seal_lost): the
     * counts END and the last DROPPED say. */
    int lost_sealed;
    uint64_t sealed_lost[VT_LOST_REASONS];
    _Atomic int warned_write;
    /* ips already given a FRAME record in this file: open addressing, grown
     * by doubling; writer thread only. */
    uint64_t *frame_set;
    size_t frame_cap, frame_len;

    /* The thread. */
    pthread_t thread;
    int thread_running;
    /* The process the writer thread runs in. A child made without the fork
     * handlers (_Fork, a raw clone) inherits thread_running and fd but not
     * the thread: it must neither join it nor write to the parent's file. */
    pid_t pid;
    pthread_mutex_t wake_lock;
    pthread_cond_t wake_cond;
    /* vt_writer_wake's request: drain at once instead of waiting. */
    _Atomic int wake_asked;
    int stopping;
    /* vt_writer_sync's requests, under wake_lock: the thread drains once
     * more whenever sync_done < sync_asked, and says so on sync_cond.
     * accepting: the thread is in its loop and will see a request. */
    pthread_cond_t sync_cond;
    uint64_t sync_asked, sync_done;
    int accepting;
    int thread_created; /* under wake_lock: accepting will follow */
    /* Set with stopping: a NOTE written before END, saying how the process
     * ended where that is not exit (exec, _exit), and END's how. */
    char end_note[700];
    /* When the call that ends the trace came (exit's destructor, exec,
     * _exit, abort), after the ring closed: the time of the end NOTE and
     * END. The last chunk names every frame not yet named, which takes a
     * large process most of a second: END stamped when it was written
     * came that much after the abort (63-llama-real, pool_abort: 0.4 s). */
    uint64_t end_called_ns;
    uint8_t end_how;
    /* Under wake_lock, for vt_writer_start: 0 while the thread opens the
     * trace, then 1 when the file and its header are written, -1 when not
     * (the thread said why and ended). */
    int opened;
    /* Why it could not (-1), for the starting thread to say. */
    char open_why[700];
    /* Held by the writer thread for each drain, and by fork's prepare
     * handler: an allocator whose locks are not reset in the child (ASan's
     * in GCC 12, seen hanging 7 forks in 300 in tests/t/51) would otherwise
     * leave the child's first malloc waiting forever on a lock our thread
     * took in the parent. */
    pthread_mutex_t work_lock;
    int fork_holds_work_lock;
    /* Set by the thread once it runs our code: a sanitizer's thread
     * start-up allocates too, before writer_main, and fork must not land in
     * it. */
    _Atomic int thread_started;
    /* When the thread's walk of the loaded modules in progress began, 0
     * between walks (vt_loader_watch): a walk waits for any the program's
     * threads make, and exit must not wait for those without a bound. */
    _Atomic unsigned long long walk_since;

    /* Who consumes the ring and writes the file (OWN_*): the thread holds
     * it around each take from the ring and each chunk it writes (hold),
     * and exit takes it for good from a thread stuck in a module walk
     * (take_over_from_writer). A CAS decides, so once exit has it the
     * thread can neither take an event nor write a byte, whatever it was
     * doing. The fields below change only under hold. */
    _Atomic int owner;
    /* The program's events taken from the ring; events and the program's
     * events in the file's complete chunks. */
    uint64_t taken_program, file_events, file_program_events;
} writer_t;
enum { OWN_NONE, OWN_THREAD, OWN_EXIT };

#define WRITER_INITIAL                                                                                          \
    { .fd = -1, .wake_lock = PTHREAD_MUTEX_INITIALIZER, .work_lock = PTHREAD_MUTEX_INITIALIZER }
static writer_t writer = WRITER_INITIAL;
static const writer_t writer_initial = WRITER_INITIAL;

/* Per thread, so not in writer_t; a fork child is never the writer
 * thread, which does not fork. */
static __thread int on_writer_thread __attribute__((tls_model("initial-exec")));

/* Work buffers, not state: every use fills what it reads, so fork has
 * nothing in them to reset. Static, off the stack: the first CUDA call may
 * come on a 16 KiB fiber stack (tests/t/54-shim-stack.t). */
static uint8_t scratch[VT_MAX_STRING + 4096];

/* ---- output ---- */

/* The thread's hold on the ring and the file; 0 once exit has them. */
static int hold(void)
{
    int none = OWN_NONE;
    return atomic_compare_exchange_strong(&writer.owner, &none, OWN_THREAD);
}

static void release(void)
{
    atomic_store(&writer.owner, OWN_NONE);
}

static int is_trace_file(int f)
{
    struct stat st;
    return f >= 0 && fstat(f, &st) == 0 && st.st_dev == writer.trace_dev && st.st_ino == writer.trace_ino;
}

/* A descriptor far from the numbers a program uses, close-on-exec: below
 * the soft limit, at least 3 (never stdin, stdout or stderr). f is closed.
 * @return the new descriptor, or f itself when no higher one is free. */
static int move_high(int f)
{
    struct rlimit rl;
    long lim = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (long)rl.rlim_cur : 1024;
    long want = lim > 1024 ? 1000 : lim / 2 > 3 ? lim / 2 : 3;
    int hi = fcntl(f, F_DUPFD_CLOEXEC, (int)want);
    if (hi < 0)
        hi = fcntl(f, F_DUPFD_CLOEXEC, 3);
    if (hi < 0)
        return f;
    close(f);
    return hi;
}

/* Our fd is no longer the trace (the program closed it or put its own file
 * there): never close or write the program's file; reopen ours by path,
 * appending, if it is still the same file. @return 0 when fd is ours again. */
static int reclaim_trace_fd(void)
{
    int f = open(writer.path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (f >= 0 && !is_trace_file(f)) {
        close(f);
        f = -1;
    }
    if (f < 0) {
        writer.fd = -1;
        errno = EBADF;
        return -1;
    }
    writer.fd = move_high(f);
    return 0;
}

/* Closes every descriptor of the calling thread's table. Kernels before
 * 5.9 lack close_range: the numbers are then read from
 * /proc/thread-self/fd, a batch at a time, until none is left. */
static void close_all(void)
{
    if (syscall(SYS_close_range, 0u, ~0u, 0u) == 0)
        return;
    for (;;) {
        int dir = open("/proc/thread-self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0)
            return;
        int batch[256], n = 0;
        union { char bytes[4096]; long align; } buf;
        long got;
        while (n < 256 && (got = syscall(SYS_getdents64, dir, buf.bytes, sizeof buf.bytes)) > 0)
            for (long at = 0; at < got && n < 256;) {
                const char *name = buf.bytes + at + 19; /* d_ino 8, d_off 8, d_reclen 2, d_type 1 */
                unsigned short reclen;
                memcpy(&reclen, buf.bytes + at + 16, sizeof reclen);
                char *end;
                long f = strtol(name, &end, 10);
                if (end != name && !*end && f != dir)
                    batch[n++] = (int)f;
                at += reclen ? reclen : got;
            }
        close(dir);
        if (!n)
            return;
        for (int i = 0; i < n; i++)
            close(batch[i]);
    }
}

/* Called first on the writer thread: gives it a descriptor table of its
 * own, empty, so the program can neither close nor reuse what we open from
 * here on, and no file, pipe or socket the program closes stays open
 * because we hold a copy. Not even stderr: a copy of it kept a pipe open
 * after the program closed its own, and the reader saw EOF only at exit
 * (77-fault-fds); what this thread says waits for a thread of the program
 * (vt_say). @return 1 with a table of our own, 0 when unshare is refused
 * (seccomp) and the table stays shared. */
static int own_fd_table(void)
{
    if (unshare(CLONE_FILES) != 0)
        return 0;
    close_all();
    return 1;
}

/* Room below RLIMIT_FSIZE that only the last chunk may use: DROPPED + END
 * with every reason at its widest is about 140 raw bytes, compressed or
 * stored, plus the chunk header and zstd's frame. */
#define LAST_CHUNK_ROOM 256u

static int write_all(const uint8_t *p, size_t n)
{
    if (!is_trace_file(writer.fd) && reclaim_trace_fd() != 0)
        return -1;
    uint64_t limit = writer.fsize_limit;
    if (limit && !writer.writing_last_chunk)
        limit = limit > LAST_CHUNK_ROOM ? limit - LAST_CHUNK_ROOM : 0;
    if (limit && writer.file_bytes + n > limit) {
        errno = EFBIG;
        return -1;
    }
    while (n) {
        ssize_t w = write(writer.fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
        writer.file_bytes += (uint64_t)w;
    }
    return 0;
}

static void write_failed_now(void)
{
    int err = errno;
    writer.write_failed = 1;
    vt_warn_once(&writer.warned_write, "cannot write %s: %s; the trace ends at its last complete chunk", writer.path,
                 strerror(err));
}

/* One whole chunk, or none: part of a chunk that did not fit is cut off
 * again, so the file still ends at a chunk boundary and a later, smaller
 * chunk can follow it. The seq of a chunk cut off is used again. */
static int write_chunk(const uint8_t *p, size_t n)
{
    uint64_t at = writer.file_bytes;
    if (write_all(p, n) == 0)
        return 0;
    int err = errno;
    writer.chunk_seq--;
    if (writer.file_bytes != at) {
        if (is_trace_file(writer.fd) && ftruncate(writer.fd, (off_t)at) == 0 &&
            lseek(writer.fd, (off_t)at, SEEK_SET) == (off_t)at)
            writer.file_bytes = at;
        else
            writer.file_ragged = 1;
    }
    errno = err;
    return -1;
}

static void close_batch(void);

static void flush_chunk(void)
{
    close_batch();
    if (!writer.raw_len)
        return;
    int held = hold();
    if (!held) {
        /* Exit took the file: nothing more of ours goes into it. */
        writer.write_failed = 1;
    } else if (!writer.write_failed && writer.stored_chunks) {
        vt_chunk_header_t h = { VT_CHUNK_STORED_MAGIC, (uint32_t)writer.raw_len, (uint32_t)writer.raw_len, writer.chunk_seq++ };
        memcpy(writer.zbuf, &h, sizeof h);
        if (write_chunk(writer.zbuf, sizeof h + writer.raw_len) != 0)
            write_failed_now();
    } else if (!writer.write_failed) {
        size_t z = writer.zstd.compress2(writer.zstd.cctx, writer.zbuf + sizeof(vt_chunk_header_t), writer.zcap, writer.raw, writer.raw_len);
        if (writer.zstd.is_error(z)) {
            errno = EIO;
            write_failed_now();
        } else {
            vt_chunk_header_t h = { VT_CHUNK_MAGIC, (uint32_t)z, (uint32_t)writer.raw_len, writer.chunk_seq++ };
            memcpy(writer.zbuf, &h, sizeof h);
            if (write_chunk(writer.zbuf, sizeof h + z) != 0)
                write_failed_now();
        }
    }
    if (writer.write_failed) {
        /* This chunk's events never reached the file: say them lost. */
        writer.events_written -= writer.chunk_events;
        writer.unwritten += writer.chunk_program_events;
    } else {
        writer.file_events += writer.chunk_events;
        writer.file_program_events += writer.chunk_program_events;
    }
    if (held)
        release();
    writer.chunk_events = writer.chunk_program_events = 0;
    writer.raw_len = 0;
    writer.prev_time = writer.mono_start;
    writer.prev_ptr = 0;
}

static void emit(uint8_t type, const uint8_t *payload, size_t len)
{
    close_batch();
    if (writer.raw_len + len + 1 + VT_VARINT_MAX > RAW_CAP)
        flush_chunk();
    writer.raw_len = (size_t)(vt_put_record(writer.raw + writer.raw_len, type, payload, len) - writer.raw);
}

/* ---- records ---- */

static void module_sink(void *ctx, const vt_module_info_t *m)
{
    (void)ctx;
    uint8_t *p = scratch;
    p = vt_put_varint(p, m->id);
    p = vt_put_varint(p, m->base);
    p = vt_put_varint(p, m->size);
    p = vt_put_str(p, (const char *)m->build_id, m->build_id ? m->build_id_len : 0, 64);
    p = vt_put_str(p, m->path ? m->path : "", m->path ? strlen(m->path) : 0, 4096);
    emit(VT_REC_MODULE, scratch, (size_t)(p - scratch));
}

static int frame_seen(uint64_t ip)
{
    if (writer.frame_len * 2 >= writer.frame_cap) {
        size_t cap = writer.frame_cap ? writer.frame_cap * 2 : 4096;
        uint64_t *set = calloc(cap, sizeof *set);
        if (!set)
            return 1; /* no name for this frame, rather than no trace */
        for (size_t i = 0; i < writer.frame_cap; i++) {
            if (!writer.frame_set[i])
                continue;
            size_t j = (writer.frame_set[i] * 0x9e3779b97f4a7c15ull) >> 20 & (cap - 1);
            while (set[j])
                j = (j + 1) & (cap - 1);
            set[j] = writer.frame_set[i];
        }
        free(writer.frame_set);
        writer.frame_set = set;
        writer.frame_cap = cap;
    }
    size_t j = (ip * 0x9e3779b97f4a7c15ull) >> 20 & (writer.frame_cap - 1);
    while (writer.frame_set[j]) {
        if (writer.frame_set[j] == ip)
            return 1;
        j = (j + 1) & (writer.frame_cap - 1);
    }
    writer.frame_set[j] = ip;
    writer.frame_len++;
    return 0;
}

static void emit_frame(uint64_t ip)
{
    if (!ip || frame_seen(ip))
        return;
    uint32_t module = 0;
    const char *function = "";
    uint64_t offset = 0;
    /* Return addresses point after the call: look up the call itself.
     * Pseudo frames (Python, ranges) are named by their provider. The
     * record keeps the epoch-tagged ip: that is the frame's identity. */
    if (ip & VT_PSEUDO_BIT)
        function = vt_pseudo_name(ip);
    else if (ip & VT_IP_ADDR_MASK)
        vt_symbols_lookup((uintptr_t)(ip & VT_IP_ADDR_MASK) - 1, module_sink, NULL, &module, &function, &offset);
    uint8_t *p = scratch;
    p = vt_put_varint(p, ip);
    p = vt_put_varint(p, module);
    p = vt_put_varint(p, offset + (module ? 1 : 0));
    p = vt_put_str(p, function, strlen(function), VT_MAX_STRING);
    emit(VT_REC_FRAME, scratch, (size_t)(p - scratch));
}

/* Hands the symbolizer the ips of nodes first..last (those emit_frame will
 * look up) at once: a big symbol table is then read in one pass per batch
 * instead of being sorted (symbols.h). */
static void prefetch_frames(uint32_t first, uint32_t last)
{
    static uintptr_t ips[PREFETCH_BATCH];
    size_t n = 0;
    for (uint32_t id = first; id <= last; id++) {
        uint32_t parent;
        uint64_t ip;
        vt_stack_node(id, &parent, &ip);
        if (!(ip & VT_PSEUDO_BIT) && (ip & VT_IP_ADDR_MASK))
            ips[n++] = (uintptr_t)(ip & VT_IP_ADDR_MASK) - 1;
    }
    vt_symbols_prefetch(ips, n);
}

static void emit_new_nodes(void)
{
    uint32_t count = vt_stack_count();
    while (writer.nodes_emitted < count) {
        uint32_t last = count - writer.nodes_emitted > PREFETCH_BATCH
                            ? writer.nodes_emitted + PREFETCH_BATCH
                            : count;
        prefetch_frames(writer.nodes_emitted + 1, last);
        while (writer.nodes_emitted < last) {
            uint32_t id = ++writer.nodes_emitted, parent;
            uint64_t ip;
            vt_stack_node(id, &parent, &ip);
            emit_frame(ip);
            uint8_t *p = scratch;
            p = vt_put_varint(p, id);
            p = vt_put_varint(p, parent);
            p = vt_put_varint(p, ip);
            emit(VT_REC_STACK, scratch, (size_t)(p - scratch));
        }
    }
}

static void emit_new_devices(void)
{
    for (int i = 0; i < VT_MAX_DEVICES; i++) {
        vt_device_slot_t *d = &vt_devices[i];
        if (atomic_load_explicit(&d->state, memory_order_acquire) != 2)
            continue;
        uint8_t *p = scratch;
        p = vt_put_zz(p, i);
        p = vt_put_varint(p, d->time_ns);
        p = vt_put_varint(p, d->total);
        p = vt_put_varint(p, d->free_at_first);
        memcpy(p, d->uuid, 16);
        p += 16;
        p = vt_put_str(p, d->name, strnlen(d->name, sizeof d->name), sizeof d->name);
        emit(VT_REC_DEVICE, scratch, (size_t)(p - scratch));
        atomic_store(&d->state, 3);
    }
}

/* Event times go out rounded down to VRAMTRACE_TIME_RES_US (1 ms by
 * default) after the process record's start. The clock's low bits are noise
 * to zstd: on the bench's alloc/free loop a 1.024 us grain leaves ~0.6 of
 * ~0.75 bytes per event in the time delta alone, 1 ms almost none
 * (docs/performance.md, "Trace size"). Nothing needs
 * finer: the order of events is the ring's, not the clock's, and the memory
 * timeline and the Perfetto export are read in milliseconds (heaptrack's
 * own timestamps are 10 ms apart). A division, not a mask, so the grain is
 * a round number of microseconds; the writer thread can afford it. The
 * PROCESS record states the grain, so readers print no finer digits. */
static uint64_t time_grain_ns(void)
{
    return (uint64_t)vt_opt.time_res_us * 1000u; /* options.c: at least 1 us */
}

static uint64_t event_time(uint64_t t)
{
    uint64_t grain = time_grain_ns();
    if (t < writer.mono_start)
        return t;
    return writer.mono_start + (t - writer.mono_start) / grain * grain;
}

/* Events are encoded in place, with no staging buffer and no copy. A run
 * of them shares one EVENT record (format version 3): batch_len_at is the
 * open record's 3-byte length field, 0 when none is open; close_batch()
 * fills it in before anything else is appended and before a flush. */
_Static_assert(RAW_CAP <= VT_EVENT_RECORD_MAX, "an EVENT record's length must fit its 3-byte field");
#define EVENT_MAX (1 + VT_EVENT_LEN_BYTES + VT_EVENT_MAX_PAYLOAD)

static void close_batch(void)
{
    if (!writer.batch_len_at)
        return;
    vt_put_event_len(writer.raw + writer.batch_len_at, writer.raw_len - (writer.batch_len_at + VT_EVENT_LEN_BYTES));
    writer.batch_len_at = 0;
}

static void emit_event(const vt_event_t *ev)
{
    if (writer.raw_len + EVENT_MAX > RAW_CAP)
        flush_chunk(); /* resets prev_time and prev_ptr: encode against the new base */
    if (!writer.batch_len_at) {
        writer.raw[writer.raw_len] = VT_REC_EVENT;
        writer.batch_len_at = writer.raw_len + 1;
        writer.raw_len += 1 + VT_EVENT_LEN_BYTES;
    }
    uint64_t time_ns = event_time(ev->time_ns);
    const uint64_t wire[VT_EVF_COUNT] = {
        [VT_EVF_API] = ev->api,
        [VT_EVF_DT] = vt_zigzag((int64_t)(time_ns - writer.prev_time)),
        [VT_EVF_TID] = ev->tid,
        [VT_EVF_DEVICE] = vt_zigzag(ev->device),
        [VT_EVF_PTR] = vt_zigzag((int64_t)(ev->ptr - writer.prev_ptr)),
        [VT_EVF_SIZE] = ev->size,
        [VT_EVF_RESERVED] = ev->reserved,
        [VT_EVF_AUX] = ev->aux,
        [VT_EVF_FLAGS] = ev->flags,
        [VT_EVF_RESULT] = ev->result,
        [VT_EVF_STACK] = ev->stack,
    };
    writer.raw_len = (size_t)(vt_put_event_v3(writer.raw + writer.raw_len, wire, 0) - writer.raw);
    writer.prev_time = time_ns;
    writer.prev_ptr = ev->ptr;
    writer.events_written++;
    writer.chunk_events++;
    writer.chunk_program_events += !(ev->flags & VT_EF_SAMPLE);
}

/* The program's events lost, by reason; returns their sum. */
static uint64_t lost_by_reason(uint64_t lost[VT_LOST_REASONS])
{
    if (writer.lost_sealed)
        memcpy(lost, writer.sealed_lost, sizeof writer.sealed_lost);
    else
        vt_ring_lost(lost);
    lost[VT_LOST_UNWRITTEN] = writer.unwritten;
    uint64_t sum = 0;
    for (int i = 0; i < VT_LOST_REASONS; i++)
        sum += lost[i];
    return sum;
}

/* The loss by reason, as DROPPED and END end (trace_format.h). */
static uint8_t *put_lost(uint8_t *p, const uint64_t lost[VT_LOST_REASONS])
{
    p = vt_put_varint(p, VT_LOST_REASONS);
    for (int i = 0; i < VT_LOST_REASONS; i++)
        p = vt_put_varint(p, lost[i]);
    return p;
}

static void emit_counts(int force)
{
    uint64_t lost[VT_LOST_REASONS];
    uint64_t dropped = lost_by_reason(lost), stacks_lost = vt_stacks_lost();
    if (!force && dropped == writer.last_dropped && stacks_lost == writer.last_stacks_lost)
        return;
    writer.last_dropped = dropped;
    writer.last_stacks_lost = stacks_lost;
    uint8_t buf[(4 + VT_LOST_REASONS) * VT_VARINT_MAX], *p = buf;
    p = vt_put_varint(p, vt_now_ns());
    p = vt_put_varint(p, dropped);
    p = vt_put_varint(p, stacks_lost);
    p = put_lost(p, lost);
    emit(VT_REC_DROPPED, buf, (size_t)(p - buf));
}

/* Drains the ring into the chunk buffer with take (vt_ring_drain, or
 * vt_ring_drain_final at stop); returns how many events it took. The chunk
 * goes out when it is full, or with finish_chunk(). */
static uint64_t drain_with(size_t (*take)(vt_event_t *, size_t))
{
    static vt_event_t batch[BATCH];
    size_t n;
    uint64_t taken = 0;
    do {
        if (!hold())
            break;
        n = take(batch, BATCH);
        for (size_t i = 0; i < n; i++)
            writer.taken_program += !(batch[i].flags & VT_EF_SAMPLE);
        release();
        taken += n;
        if (writer.write_failed) {
            for (size_t i = 0; i < n; i++)
                writer.unwritten += !(batch[i].flags & VT_EF_SAMPLE);
            continue;
        }
        /* Nodes and devices are published before the events that use them,
         * and we read these counters after draining, so nothing dangles. */
        vt_pseudo_records(emit);
        emit_new_devices();
        emit_new_nodes();
        for (size_t i = 0; i < n; i++)
            emit_event(&batch[i]);
    } while (n == BATCH);
    if (!writer.write_failed)
        vt_ggml_records(emit);
    return taken;
}

/* Said at exit whether or not the trace could record it: the one place a
 * loss after the disk filled is told when END did not fit either. */
static void say_lost(const uint64_t lost[VT_LOST_REASONS], uint64_t dropped)
{
    static const char *const reason[VT_LOST_REASONS] = {
        [VT_LOST_RING_FULL] = "buffer full",
        [VT_LOST_IN_HANDLER] = "signal handler inside the shim",
        [VT_LOST_UNRETURNED] = "call not returned at exit",
        [VT_LOST_UNWRITTEN] = "not written: disk full or write error",
    };
    char msg[512];
    int len = snprintf(msg, sizeof msg, "vramtrace: %llu events not in %s, lost (", (unsigned long long)dropped,
                       writer.path);
    const char *sep = "";
    for (int i = 0; i < VT_LOST_REASONS && len < (int)sizeof msg; i++) {
        if (!lost[i])
            continue;
        len += snprintf(msg + len, sizeof msg - (size_t)len, "%s%llu %s", sep, (unsigned long long)lost[i],
                        reason[i]);
        sep = ", ";
    }
    if (len < (int)sizeof msg)
        len += snprintf(msg + len, sizeof msg - (size_t)len, ")%s\n",
                        writer.write_failed ? "; the trace could not record this" : "");
    if (len > (int)sizeof msg - 1)
        len = (int)sizeof msg - 1;
    vt_say(msg, (size_t)len);
}

static uint64_t drain(void)
{
    return drain_with(vt_ring_drain);
}

static void finish_chunk(void)
{
    if (!writer.write_failed) {
        emit_counts(0);
        flush_chunk();
    }
}

/* How long the thread sleeps before it next drains the ring, given how many
 * events the last drain took. The program never wakes us (that would put a
 * lock on its path), and a ring that fills between two looks drops events:
 * a loop of cuMemAlloc/cuMemFree at ~3 M events/s filled the default 64k
 * ring within one 100 ms flush interval and lost more than half of its
 * events. So a drain that took an eighth of the ring makes the next look
 * come after 1 ms, a sixty-fourth after at most 10 ms; after a quieter one
 * the interval doubles, up to VRAMTRACE_FLUSH_MS. The first look is 1 ms
 * after the first call: a program's first burst (loading a model) is its
 * biggest. Chunks still go out once per flush interval (or when full):
 * looking often does not make them smaller. */
static uint64_t next_look_ms(uint64_t taken, uint64_t last_ms)
{
    uint64_t flush_ms = (uint64_t)vt_opt.flush_ms, ms = last_ms * 2;
    if (taken >= vt_opt.ring / 8)
        ms = 1;
    else if (taken >= vt_opt.ring / 64 && ms > 10)
        ms = 10;
    return ms > flush_ms ? flush_ms : ms; /* flush_ms >= 1 (options.c) */
}

static int open_trace(const char *exe);
static int write_header(const char *exe);
static int sync_held(unsigned timeout_ms);
static void finish_trace(void);

/* arg: the program's path, for the file's name and header. */
static void *writer_main(void *arg)
{
    on_writer_thread = 1;
    vt_tls.defer_say = 1;
    atomic_store(&writer.thread_started, 1);
    vt_loader_watch(&writer.walk_since);
    writer.own_fds = own_fd_table();
    int opened = open_trace(arg) == 0 ? 1 : -1;
    if (opened == 1 && write_header(arg) != 0) {
        snprintf(writer.open_why, sizeof writer.open_why, "cannot write the trace header of %s (%s)", writer.path,
                 strerror(errno));
        close(writer.fd);
        unlink(writer.path);
        writer.fd = -1;
        opened = -1;
    }
    pthread_mutex_lock(&writer.wake_lock);
    writer.opened = opened;
    pthread_cond_broadcast(&writer.sync_cond);
    pthread_mutex_unlock(&writer.wake_lock);
    if (opened != 1)
        return NULL;

    uint64_t flush_ns = (uint64_t)vt_opt.flush_ms * 1000000u;
    uint64_t next_flush = vt_now_ns() + flush_ns, look_ms = 1;
    pthread_mutex_lock(&writer.wake_lock);
    writer.accepting = 1;
    pthread_cond_broadcast(&writer.sync_cond); /* a sync may be waiting for us to start */
    while (!writer.stopping) {
        if (writer.sync_done == writer.sync_asked && !atomic_exchange(&writer.wake_asked, 0)) {
            uint64_t now = vt_now_ns();
            uint64_t until_flush_ms = next_flush > now ? (next_flush - now + 999999) / 1000000 : 0;
            struct timespec ts = vt_deadline_in(CLOCK_MONOTONIC, look_ms < until_flush_ms ? look_ms : until_flush_ms);
            pthread_cond_timedwait(&writer.wake_cond, &writer.wake_lock, &ts);
            if (writer.stopping)
                break;
        }
        /* Requests made from here on may have captured after this drain
         * started reading: they wait for the next one. */
        uint64_t asked = writer.sync_asked;
        int flush = asked != writer.sync_done;
        pthread_mutex_unlock(&writer.wake_lock);
        vt_tls.guard++;
        pthread_mutex_lock(&writer.work_lock);
        look_ms = next_look_ms(drain(), look_ms);
        uint64_t now = vt_now_ns();
        if (flush || now >= next_flush) {
            finish_chunk();
            next_flush = now + flush_ns;
        }
        pthread_mutex_unlock(&writer.work_lock);
        vt_tls.guard--;
        pthread_mutex_lock(&writer.wake_lock);
        if (writer.sync_done != asked) {
            writer.sync_done = asked;
            pthread_cond_broadcast(&writer.sync_cond);
        }
    }
    writer.accepting = 0;
    pthread_cond_broadcast(&writer.sync_cond);
    pthread_mutex_unlock(&writer.wake_lock);
    /* Here, not in vt_writer_stop: the descriptor may be in this thread's
     * table only. Under work_lock like every drain, for a fork racing the
     * exit. */
    pthread_mutex_lock(&writer.work_lock);
    finish_trace();
    pthread_mutex_unlock(&writer.work_lock);
    return NULL;
}

/* The request is a flag the thread reads under wake_lock before it
 * waits; the signal is sent only when the lock is free at once, so the
 * caller (ggml's load path) never waits on the writer. When the lock is
 * busy the thread is between waits and reads the flag before its next
 * one, or has just read it: then the wake comes at its next look. */
void vt_writer_wake(void)
{
    atomic_store(&writer.wake_asked, 1);
    /* Inside the shim while wake_lock is held: a signal handler's failed
     * request (vt_writer_sync), exec, _exit or abort here must not take
     * the lock this thread holds. */
    vt_tls.guard++;
    if (pthread_mutex_trylock(&writer.wake_lock) == 0) {
        if (writer.accepting)
            pthread_cond_signal(&writer.wake_cond);
        pthread_mutex_unlock(&writer.wake_lock);
    }
    vt_tls.guard--;
}

/* ---- start and stop ---- */

static int load_zstd(void)
{
    if (writer.zstd.cctx)
        return 0;
    void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return -1;
    writer.zstd.bound = (zstd_bound_fn)vt_real_dlsym(h, "ZSTD_compressBound");
    writer.zstd.create = (zstd_create_fn)vt_real_dlsym(h, "ZSTD_createCCtx");
    writer.zstd.set = (zstd_set_fn)vt_real_dlsym(h, "ZSTD_CCtx_setParameter");
    writer.zstd.compress2 = (zstd_compress2_fn)vt_real_dlsym(h, "ZSTD_compress2");
    writer.zstd.is_error = (zstd_is_error_fn)vt_real_dlsym(h, "ZSTD_isError");
    if (!writer.zstd.bound || !writer.zstd.create || !writer.zstd.set || !writer.zstd.compress2 || !writer.zstd.is_error)
        return -1;
    writer.zstd.cctx = writer.zstd.create();
    if (!writer.zstd.cctx)
        return -1;
    /* Level 1, not 3: compression is most of the writer thread's work, in
     * someone else's process. On the bench's random-size run level 1 costs
     * ~30 ns less CPU per event for ~3% more bytes (hotpath cu 400000
     * stacks=4096 sizes=random: 348 vs 374 ms process CPU, min of 6; 3.41
     * vs 3.30 bytes per event), and the analyzer decompresses it faster. */
    writer.zstd.set(writer.zstd.cctx, ZSTD_c_compressionLevel, 1);
    /* The checksum lets the reader tell a torn chunk from a valid one. */
    writer.zstd.set(writer.zstd.cctx, ZSTD_c_checksumFlag, 1);
    /* Literals stored as they are, not Huffman-coded: the incompressible
     * bytes of events (addresses, sizes) gain little from Huffman, and
     * decoding it was a quarter of the analyzer's decompression. A libzstd
     * that does not know the parameter refuses it; the trace is valid
     * either way. */
    writer.zstd.set(writer.zstd.cctx, ZSTD_c_literalCompressionMode, ZSTD_ps_disable);
    return 0;
}

static size_t read_small_file(const char *name, char *buf, size_t cap)
{
    int f = open(name, O_RDONLY | O_CLOEXEC);
    if (f < 0)
        return 0;
    size_t len = 0;
    while (len < cap) {
        ssize_t r = read(f, buf + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(f);
    return len;
}

static int open_trace(const char *exe)
{
    if (mkdir(vt_opt.dir, 0700) != 0 && errno != EEXIST) {
        snprintf(writer.open_why, sizeof writer.open_why, "cannot create VRAMTRACE_DIR %s (%s)", vt_opt.dir,
                 strerror(errno));
        return -1;
    }
    const char *base = strrchr(exe, '/');
    base = base ? base + 1 : exe;
    char name[64];
    size_t n = 0;
    for (; base[n] && n < sizeof name - 1; n++) {
        char c = base[n];
        int safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                   c == '-' || c == '_';
        name[n] = safe ? c : '_';
    }
    name[n] = 0;
    if (!n)
        strcpy(name, "process");
    for (int attempt = 0; attempt < 100; attempt++) {
        if (attempt == 0)
            snprintf(writer.path, sizeof writer.path, "%s/%s.%d.vtrace", vt_opt.dir, name, (int)getpid());
        else
            snprintf(writer.path, sizeof writer.path, "%s/%s.%d.%d.vtrace", vt_opt.dir, name, (int)getpid(), attempt);
        /* O_EXCL|O_NOFOLLOW: a planted file or symlink is never followed or
         * overwritten; we pick another name instead. */
        writer.fd = open(writer.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (writer.fd >= 0 || errno != EEXIST)
            break;
    }
    if (writer.fd < 0) {
        snprintf(writer.open_why, sizeof writer.open_why, "cannot create a trace file in %s (%s)", vt_opt.dir,
                 strerror(errno));
        return -1;
    }
    writer.fd = move_high(writer.fd);
    struct stat st;
    if (fstat(writer.fd, &st) == 0) {
        writer.trace_dev = st.st_dev;
        writer.trace_ino = st.st_ino;
    }
    return 0;
}

/* The environment variables that decide where a model goes, as the
 * process was started with them: /proc/self/environ is what llama-server's
 * argument parser read at start (ollama passes LLAMA_ARG_FIT_TARGET so),
 * and reading it races no setenv; a variable the program sets itself later
 * is not seen. Named one by one, never by prefix: LLAMA_ARG_API_KEY and
 * LLAMA_ARG_HF_TOKEN share the wanted ones' prefix, and a trace travels. */
static const char *const placement_env[] = {
    /* llama.cpp's options (common/arg.cpp's set_env) */
    "LLAMA_ARG_N_GPU_LAYERS", "LLAMA_ARG_CTX_SIZE", "LLAMA_ARG_N_PARALLEL", "LLAMA_ARG_CACHE_TYPE_K",
    "LLAMA_ARG_CACHE_TYPE_V", "LLAMA_ARG_KV_OFFLOAD", "LLAMA_ARG_FIT", "LLAMA_ARG_FIT_TARGET", "LLAMA_ARG_FIT_CTX",
    "LLAMA_ARG_SPLIT_MODE", "LLAMA_ARG_TENSOR_SPLIT", "LLAMA_ARG_MAIN_GPU", "LLAMA_ARG_DEVICE", "LLAMA_ARG_OVERRIDE_TENSOR",
    "LLAMA_ARG_CPU_MOE", "LLAMA_ARG_N_CPU_MOE", "LLAMA_ARG_N_CPU_FFN", "LLAMA_ARG_MMAP", "LLAMA_ARG_MLOCK", "LLAMA_ARG_LOAD_MODE",
    "LLAMA_ARG_REPACK", "LLAMA_ARG_N_GPU_LAYERS_DRAFT",
    /* ggml's CUDA backend, read when it starts */
    "GGML_CUDA_ENABLE_UNIFIED_MEMORY",
    /* which devices the process sees; PyTorch's caching allocator */
    "CUDA_VISIBLE_DEVICES", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF",
    /* ollama's scheduler (envconfig/config.go) */
    "OLLAMA_NUM_PARALLEL", "OLLAMA_CONTEXT_LENGTH", "OLLAMA_KV_CACHE_TYPE", "OLLAMA_FLASH_ATTENTION",
    "OLLAMA_GPU_OVERHEAD", "OLLAMA_SCHED_SPREAD",
};
#define PLACEMENT_ENV_COUNT (sizeof placement_env / sizeof placement_env[0])

static int is_placement_env(const char *entry, size_t len)
{
    for (size_t k = 0; k < PLACEMENT_ENV_COUNT; k++) {
        size_t name = strlen(placement_env[k]);
        if (len > name && entry[name] == '=' && !memcmp(entry, placement_env[k], name))
            return 1;
    }
    return 0;
}

/* The placement variables, NUL-terminated one after the other in found
 * (at most cap bytes, whole entries only); their count. An entry longer
 * than VT_MAX_ENV_ENTRY is left out whole rather than cut: a cut value
 * would be quoted as if it were the program's. Read in blocks through
 * static buffers: the environment of a container can be large, and this
 * runs once, on the writer thread. */
static uint32_t read_placement_env(char *found, size_t cap)
{
    static char block[4096], entry[VT_MAX_ENV_ENTRY];
    int f = open("/proc/self/environ", O_RDONLY | O_CLOEXEC);
    if (f < 0)
        return 0;
    uint32_t count = 0;
    size_t used = 0, len = 0;
    int too_long = 0;
    for (;;) {
        ssize_t r = read(f, block, sizeof block);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        for (ssize_t i = 0; i < r; i++) {
            if (block[i]) {
                if (len < sizeof entry)
                    entry[len++] = block[i];
                else
                    too_long = 1;
                continue;
            }
            if (!too_long && count < VT_MAX_ENV && is_placement_env(entry, len) && used + len + 1 <= cap) {
                memcpy(found + used, entry, len);
                found[used + len] = 0;
                used += len + 1;
                count++;
            }
            len = 0, too_long = 0;
        }
    }
    close(f);
    return count;
}

static int write_header(const char *exe)
{
    static char cmdline[16384];
    size_t cmd_len = read_small_file("/proc/self/cmdline", cmdline, sizeof cmdline);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);

    uint8_t *p = scratch;
    p = vt_put_varint(p, (uint64_t)getpid());
    p = vt_put_varint(p, (uint64_t)getppid());
    p = vt_put_varint(p, writer.mono_start);
    p = vt_put_varint(p, (uint64_t)wall.tv_sec * 1000000000ull + (uint64_t)wall.tv_nsec);
    p = vt_put_str(p, VT_VERSION, strlen(VT_VERSION), 64);
    p = vt_put_str(p, exe, strlen(exe), 4096);
    p = vt_put_str(p, host, strlen(host), 255);
    uint32_t argc = 0;
    for (size_t i = 0; i < cmd_len; i++)
        argc += cmdline[i] == 0;
    if (cmd_len && cmdline[cmd_len - 1] != 0)
        argc++; /* truncated last argument */
    p = vt_put_varint(p, argc);
    for (size_t i = 0; i < cmd_len;) {
        size_t len = strnlen(cmdline + i, cmd_len - i);
        p = vt_put_str(p, cmdline + i, len, len);
        i += len + 1;
    }
    p = vt_put_varint(p, time_grain_ns());
    p = vt_put_varint(p, (writer.stored_chunks ? VT_DEGRADED_NO_ZSTD : 0u) |
                             (vt_stacks_without_libunwind() ? VT_DEGRADED_NO_LIBUNWIND : 0u) |
                             (writer.own_fds ? 0u : VT_DEGRADED_SHARED_FDS));
    static char env[16384];
    uint32_t envc = read_placement_env(env, sizeof env);
    p = vt_put_varint(p, envc);
    for (size_t i = 0, k = 0; k < envc; k++) {
        size_t len = strlen(env + i);
        p = vt_put_str(p, env + i, len, len);
        i += len + 1;
    }

    /* Prelude and header in one write, like each chunk: a SIGKILL between
     * two writes left a prelude that promised a header the file lacked. */
    /* Static, like scratch: the first CUDA call may come on a 16 KiB fiber
     * stack, and this is ~70 KB (tests/t/54-shim-stack.t). Only the writer
     * thread, once, gets here. */
    vt_file_prelude_t prelude;
    static uint8_t file_start[sizeof prelude + sizeof scratch + 16];
    uint8_t *rec = file_start + sizeof prelude;
    size_t rec_len = (size_t)(vt_put_record(rec, VT_REC_PROCESS, scratch, (size_t)(p - scratch)) - rec);
    memset(&prelude, 0, sizeof prelude);
    memcpy(prelude.magic, VT_FILE_MAGIC, 8);
    /* A file of zstd chunks is a valid version 3 file: readers of version
     * 3 keep reading every trace a shim with libzstd writes. */
    prelude.version = writer.stored_chunks ? VT_FORMAT_VERSION_STORED : 3;
    prelude.header_len = (uint32_t)rec_len;
    memcpy(file_start, &prelude, sizeof prelude);
    if (write_all(file_start, sizeof prelude + rec_len) != 0)
        return -1; /* the caller says why, once */
    return 0;
}

int vt_writer_start(void)
{
    if (!writer.raw && load_zstd() != 0)
        writer.stored_chunks = 1;
    if (!writer.raw && writer.stored_chunks) {
        writer.zbuf = malloc(RAW_CAP + sizeof(vt_chunk_header_t));
        writer.raw = writer.zbuf ? writer.zbuf + sizeof(vt_chunk_header_t) : NULL;
        if (!writer.raw) {
            vt_disable("out of memory for trace buffers");
            return -1;
        }
        /* Said once the trace will be written: missing, or unloadable
         * (the descriptor or address-space limit reached). */
        vt_warn_once(&writer.warned_stored, "libzstd.so.1 could not be loaded: writing the trace uncompressed "
                                            "(same events, a larger file)");
    } else if (!writer.raw) {
        writer.zcap = writer.zstd.bound(RAW_CAP);
        writer.raw = malloc(RAW_CAP);
        writer.zbuf = malloc(writer.zcap + sizeof(vt_chunk_header_t));
        if (!writer.raw || !writer.zbuf) {
            vt_disable("out of memory for trace buffers");
            return -1;
        }
    }
    struct rlimit rl;
    writer.fsize_limit = (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) ? rl.rlim_cur : 0;

    static char exe[4096];   /* off the stack, as file_start */
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    /* Without /proc: the name the process was exec'd by (symbols.c too). */
    const char *exec_fn = n > 0 ? NULL : (const char *)getauxval(AT_EXECFN);
    if (exec_fn && !realpath(exec_fn, exe))
        snprintf(exe, sizeof exe, "%s", exec_fn);
    writer.mono_start = vt_now_ns();
    writer.prev_time = writer.mono_start;
    writer.prev_ptr = 0;

    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&writer.wake_cond, &attr);
    pthread_cond_init(&writer.sync_cond, &attr);
    pthread_condattr_destroy(&attr);

    /* The writer must never run the host's signal handlers. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&writer.thread, NULL, writer_main, exe);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        vt_disable("cannot start the writer thread");
        return -1;
    }
    pthread_setname_np(writer.thread, "vramtrace");
    /* The thread opens the file (writer_main): wait for it, as the open
     * itself was waited for when this thread made it. */
    pthread_mutex_lock(&writer.wake_lock);
    while (!writer.opened)
        pthread_cond_wait(&writer.sync_cond, &writer.wake_lock);
    int opened = writer.opened;
    pthread_mutex_unlock(&writer.wake_lock);
    if (opened != 1) {
        pthread_join(writer.thread, NULL);
        vt_disable(writer.open_why); /* said here: the thread's table has no stderr */
        return -1;
    }
    writer.pid = getpid();
    writer.thread_running = 1;
    pthread_mutex_lock(&writer.wake_lock);
    writer.thread_created = 1;
    pthread_mutex_unlock(&writer.wake_lock);
    return 0;
}

/* How long exit waits for the writer while it waits for a walk of the
 * loaded modules: dl_iterate_phdr waits for any walk in progress, and a
 * thread of the program may stay inside one's callback for as long as it
 * likes (exit took as long as the callback, and for ever when it never
 * returned: tests/t/74-fault-exitwalk.t). */
#define EXIT_WALK_WAIT_MS 500

/* A zstd frame holding n bytes as one raw block, no checksum: what a
 * thread without libzstd's context can write in a chunk that any reader of
 * the file's version takes (RFC 8878: frame header descriptor 0xA0, single
 * segment with a 4-byte content size; block header: last, raw, n). */
static size_t raw_zstd_frame(uint8_t *out, const uint8_t *p, size_t n)
{
    static const uint8_t magic[4] = { 0x28, 0xB5, 0x2F, 0xFD };
    uint32_t block = 1u | (uint32_t)n << 3;
    memcpy(out, magic, 4);
    out[4] = 0xA0;
    for (int i = 0; i < 4; i++)
        out[5 + i] = (uint8_t)(n >> 8 * i);
    for (int i = 0; i < 3; i++)
        out[9 + i] = (uint8_t)(block >> 8 * i);
    memcpy(out + 12, p, n);
    return 12 + n;
}

/* The end of the trace, written by the exiting thread in place of a writer
 * stuck in a module walk: once the CAS gives it the ring and the file, it
 * counts what the thread took but never wrote and what is left in the ring
 * as lost (unwritten), and appends one last chunk, DROPPED and END, after
 * the thread's last complete chunk. It uses none of the thread's buffers
 * or libzstd's context (the thread is frozen inside a drain), and the file
 * by a descriptor of its own, opened by path and checked to be the trace
 * before the write, then closed (the thread's may be in its own table).
 * @return 1 when the chunk is in the file. */
static int take_over_from_writer(uint64_t *lost_out)
{
    pthread_mutex_lock(&writer.wake_lock);
    int opened = writer.opened;
    pthread_mutex_unlock(&writer.wake_lock);
    int none = OWN_NONE;
    if (opened != 1 || !atomic_compare_exchange_strong(&writer.owner, &none, OWN_EXIT))
        return 0;
    static vt_event_t left[64];
    size_t n;
    uint64_t drained = 0;
    do {
        n = vt_ring_drain_final(left, sizeof left / sizeof left[0]);
        for (size_t i = 0; i < n; i++)
            drained += !(left[i].flags & VT_EF_SAMPLE);
    } while (n);
    uint64_t lost[VT_LOST_REASONS], dropped = 0;
    vt_ring_seal_lost(lost);
    lost[VT_LOST_UNWRITTEN] = writer.taken_program - writer.file_program_events + drained;
    for (int i = 0; i < VT_LOST_REASONS; i++)
        dropped += lost[i];
    *lost_out = lost[VT_LOST_UNWRITTEN];
    if (writer.file_ragged)
        return 0;

    uint8_t rec[2 * (4 + VT_LOST_REASONS) * VT_VARINT_MAX + 8], body[sizeof rec], *p = body;
    uint8_t *q = rec;
    uint64_t now = writer.end_called_ns;
    q = vt_put_varint(q, now);
    q = vt_put_varint(q, dropped);
    q = vt_put_varint(q, vt_stacks_lost());
    q = put_lost(q, lost);
    p = vt_put_record(p, VT_REC_DROPPED, rec, (size_t)(q - rec));
    q = rec;
    q = vt_put_varint(q, now);
    q = vt_put_varint(q, writer.file_events);
    q = vt_put_varint(q, dropped);
    q = put_lost(q, lost);
    q = vt_put_varint(q, writer.end_how);
    p = vt_put_record(p, VT_REC_END, rec, (size_t)(q - rec));
    size_t raw = (size_t)(p - body);

    uint8_t chunk[sizeof(vt_chunk_header_t) + 12 + sizeof body];
    vt_chunk_header_t h = { VT_CHUNK_STORED_MAGIC, (uint32_t)raw, (uint32_t)raw, writer.chunk_seq };
    size_t z = raw;
    if (writer.stored_chunks) {
        memcpy(chunk + sizeof h, body, raw);
    } else {
        h.magic = VT_CHUNK_MAGIC;
        z = raw_zstd_frame(chunk + sizeof h, body, raw);
        h.zsize = (uint32_t)z;
    }
    memcpy(chunk, &h, sizeof h);
    size_t len = sizeof h + z;
    if (writer.fsize_limit && writer.file_bytes + len > writer.fsize_limit)
        return 0;
    int f = open(writer.path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    if (f < 0)
        return 0;
    f = move_high(f);
    int ok = 0;
    if (is_trace_file(f)) {
        ssize_t w = pwrite(f, chunk, len, (off_t)writer.file_bytes);
        ok = w == (ssize_t)len;
        if (!ok && w > 0 && ftruncate(f, (off_t)writer.file_bytes) != 0)
            ok = 0;
    }
    close(f);
    return ok;
}

/* Joins the writer, unless it has waited EXIT_WALK_WAIT_MS for a module
 * walk, or bound_ms in all (0: no such bound): then the process ends
 * without it, and takes the trace's end from it (take_over_from_writer).
 * At stop the thread walks only for an ip outside every known module
 * (vt_symbols_final), so this is the writer caught in a walk that began
 * before. The overall bound is exec's and _exit's: they may be called from
 * a signal handler that interrupted the program holding a lock (malloc's)
 * the writer's last chunk needs. */
static void join_writer(enum vt_end_how how, unsigned bound_ms)
{
    static const char *const when_words[] = {
        [VT_END_EXIT] = "exit", [VT_END_EXEC] = "exec", [VT_END_EXIT_NOW] = "_exit", [VT_END_ABORT] = "abort"};
    const char *when = when_words[how];
    uint64_t began = vt_now_ns();
    const char *waited_for = "another thread's walk of the loaded modules (dl_iterate_phdr)";
    unsigned waited_ms = EXIT_WALK_WAIT_MS;
    for (;;) {
        struct timespec deadline = vt_deadline_in(CLOCK_REALTIME, 10);
        int rc = pthread_timedjoin_np(writer.thread, NULL, &deadline);
        if (rc != ETIMEDOUT)
            return;
        uint64_t now = vt_now_ns();
        unsigned long long since = atomic_load(&writer.walk_since);
        if (since && now - since >= EXIT_WALK_WAIT_MS * 1000000ull)
            break;
        if (bound_ms && now - began >= bound_ms * 1000000ull) {
            waited_for = "its last chunk";
            waited_ms = bound_ms;
            break;
        }
    }
    uint64_t unwritten = 0;
    int ended = take_over_from_writer(&unwritten);
    char msg[900];
    int len = ended ? snprintf(msg, sizeof msg,
                               "vramtrace: at %s the trace writer had waited %u ms for %s; %s ends with the %llu "
                               "events it had not written counted as dropped\n",
                               when, waited_ms, waited_for, writer.path, (unsigned long long)unwritten)
                    : snprintf(msg, sizeof msg,
                               "vramtrace: %s ends at its last complete chunk: at %s the trace writer had waited %u "
                               "ms for %s\n",
                               writer.path, when, waited_ms, waited_for);
    if (len > (int)sizeof msg - 1)
        len = (int)sizeof msg - 1;
    vt_say(msg, (size_t)len);
}

int vt_writer_ours(void)
{
    return writer.thread_running && !on_writer_thread && getpid() == writer.pid;
}

void vt_writer_stop(enum vt_end_how how, const char *end_note, unsigned bound_ms)
{
    if (!writer.thread_running)
        return;
    if (getpid() != writer.pid) {
        /* A child that skipped the fork handlers: what it recorded has no
         * writer and no file of its own; it leaves the parent's alone. */
        writer.thread_running = 0;
        return;
    }
    /* Closed first: every event claimed from here on is one the final
     * drain could miss (ring.c, vt_ring_close). */
    vt_ring_close();
    pthread_mutex_lock(&writer.wake_lock);
    writer.end_called_ns = vt_now_ns();
    if (end_note)
        snprintf(writer.end_note, sizeof writer.end_note, "%s", end_note);
    writer.end_how = (uint8_t)how;
    writer.stopping = 1;
    pthread_cond_signal(&writer.wake_cond);
    pthread_mutex_unlock(&writer.wake_lock);
    join_writer(how, bound_ms);
    vt_say_pending();
    writer.thread_running = 0;
    atomic_store(&vt_state, VT_ST_ENDED);
}

/* The end of the file, on the writer thread once it stops. */
static void finish_trace(void)
{
    vt_tls.guard++;
    vt_symbols_final(vt_stacks_subs());
    /* Everything left in the ring; slots claimed but never published are
     * counted as dropped, not left to hide the events behind them. */
    drain_with(vt_ring_drain_final);
    /* The ring was closed before (vt_writer_stop): nothing more can enter
     * it, and a drop counted from here on waits in vt_ring_park. */
    vt_ring_seal_lost(writer.sealed_lost);
    writer.lost_sealed = 1;
    if (!writer.write_failed) {
        vt_ranges_records(emit);
        vt_ranges_lost_note(emit);
        if (writer.end_note[0]) {
            uint8_t buf[VT_VARINT_MAX * 2 + sizeof writer.end_note], *p = buf;
            p = vt_put_varint(p, writer.end_called_ns);
            p = vt_put_str(p, writer.end_note, strlen(writer.end_note), sizeof writer.end_note);
            emit(VT_REC_NOTE, buf, (size_t)(p - buf));
        }
    }
    finish_chunk();
    /* After a failed write the file ends at a chunk boundary (write_chunk):
     * one more small chunk may fit and tell the reader what was lost. */
    if (writer.write_failed && !writer.file_ragged && is_trace_file(writer.fd)) {
        writer.write_failed = 0;
        writer.writing_last_chunk = 1;
    }
    uint64_t lost[VT_LOST_REASONS];
    uint64_t dropped = lost_by_reason(lost);
    if (!writer.write_failed) {
        uint8_t buf[(4 + VT_LOST_REASONS) * VT_VARINT_MAX], *p = buf;
        emit_counts(1);
        p = vt_put_varint(p, writer.end_called_ns);
        p = vt_put_varint(p, writer.events_written);
        p = vt_put_varint(p, dropped);
        p = put_lost(p, lost);
        p = vt_put_varint(p, writer.end_how);
        emit(VT_REC_END, buf, (size_t)(p - buf));
        flush_chunk();
    }
    if (dropped && atomic_load(&writer.owner) != OWN_EXIT)
        say_lost(lost, dropped);
    if (is_trace_file(writer.fd))   /* never a descriptor the program reused */
        close(writer.fd);
    writer.fd = -1;
    vt_tls.guard--;
}

int vt_writer_sync(unsigned timeout_ms)
{
    if (on_writer_thread)
        return -1;
    /* Inside the shim while wake_lock is held: a signal handler's _exit
     * here must not stop the trace (vt_writer_stop takes the same lock).
     * And not cancellable: a thread cancelled in the condition wait goes
     * with wake_lock held (the wait takes it back first), and the writer,
     * then exit, waited for it for ever (74-fault-cancel). */
    int cancel_state;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    vt_tls.guard++;
    int rc = sync_held(timeout_ms);
    vt_say_pending();
    vt_tls.guard--;
    pthread_setcancelstate(cancel_state, NULL);
    return rc;
}

static int sync_held(unsigned timeout_ms)
{
    struct timespec deadline = vt_deadline_in(CLOCK_MONOTONIC, timeout_ms);
    pthread_mutex_lock(&writer.wake_lock);
    /* A thread created but not yet in its loop is waited for, within the
     * same bound: a dlclose right after the first CUDA call, on a busy
     * machine, came before the thread ran and the library's frames went
     * unnamed (tests/t/76 under load). */
    int rc = 0;
    while (writer.thread_created && !writer.accepting && !writer.stopping && rc == 0)
        rc = pthread_cond_timedwait(&writer.sync_cond, &writer.wake_lock, &deadline);
    if (!writer.accepting || writer.stopping) {
        pthread_mutex_unlock(&writer.wake_lock);
        return -1;
    }
    uint64_t mine = ++writer.sync_asked;
    pthread_cond_signal(&writer.wake_cond);
    while (writer.accepting && writer.sync_done < mine && rc == 0)
        rc = pthread_cond_timedwait(&writer.sync_cond, &writer.wake_lock, &deadline);
    int done = writer.sync_done >= mine;
    pthread_mutex_unlock(&writer.wake_lock);
    return done ? 0 : -1;
}

/* The wait is bounded: one drain is a few milliseconds, and a writer stuck
 * for seconds (a hung NFS write) must not hang the host's fork. Past the
 * bound the fork goes ahead as it would without us. */
void vt_writer_atfork_prepare(void)
{
    if (!writer.thread_running)
        return;
    /* pthread_mutex_timedlock measures against CLOCK_REALTIME. */
    struct timespec deadline = vt_deadline_in(CLOCK_REALTIME, 2000);
    /* By the clock, not by counting naps: a timer's signals end naps
     * early (74-fault-forkslow). */
    uint64_t until = vt_now_ns() + 2000 * 1000000ull;
    while (!atomic_load(&writer.thread_started) && vt_now_ns() < until) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    writer.fork_holds_work_lock = pthread_mutex_timedlock(&writer.work_lock, &deadline) == 0;
}

void vt_writer_atfork_parent(void)
{
    if (writer.fork_holds_work_lock) {
        writer.fork_holds_work_lock = 0;
        pthread_mutex_unlock(&writer.work_lock);
    }
}

void vt_writer_atfork_child(void)
{
    /* The parent's thread is gone and its file is the parent's. State the
     * writer thread may have been changing at fork time is abandoned, not
     * trusted: the frame set is dropped, not freed. */
    if (is_trace_file(writer.fd))   /* never a descriptor the program reused */
        close(writer.fd);
    /* What survives, all of it settled before the first trace and unused
     * between two drains (fork waits, bounded, for one to end):
     *  - zstd: libzstd stays loaded and its context is reusable;
     *  - raw, zbuf, zcap: the chunk buffers, allocated once per process
     *    tree (vt_writer_start allocates only while raw is NULL);
     *  - stored_chunks: chosen with the buffers, for the life of raw;
     *  - warned_stored: the missing libzstd was said once already.
     * Copied through locals, not a second writer_t: fork may come on a
     * small stack. */
    writer_zstd_t zstd = writer.zstd;
    uint8_t *raw = writer.raw, *zbuf = writer.zbuf;
    size_t zcap = writer.zcap;
    int stored_chunks = writer.stored_chunks, warned_stored = atomic_load(&writer.warned_stored);
    writer = writer_initial;
    writer.zstd = zstd;
    writer.raw = raw;
    writer.zbuf = zbuf;
    writer.zcap = zcap;
    writer.stored_chunks = stored_chunks;
    atomic_store(&writer.warned_stored, warned_stored);
    vt_symbols_reset_reported();
}
