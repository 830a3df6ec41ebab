/* pyframes.c: Python frames in native stacks, read from the allocating
 * thread's own CPython frame chain with nothing but LD_PRELOAD
 * (CPython 3.10-3.13, x86-64/arm64, default non-debug GIL builds).
 *
 * What happens on each stack capture (vt_pseudo_merge, called by stacks.c):
 *  1. This thread's PyThreadState comes from PyGILState_GetThisThreadState(),
 *     which reads the interpreter's thread-specific key: it is the thread's
 *     own state whether or not it holds the GIL (ctypes and PyTorch release
 *     it around native calls; _PyThreadState_GET would name the GIL holder).
 *  2. Its frame chain is walked innermost first and split into groups, one
 *     per C-level call of _PyEval_EvalFrameDefault: 3.10 runs one Python
 *     frame per call; 3.11 marks the first frame of a call `is_entry`;
 *     3.12/3.13 push a FRAME_OWNED_BY_CSTACK frame under it.
 *  3. Merging (as `py-spy --native` does): each native return address inside
 *     _PyEval_EvalFrameDefault is replaced by the next group's Python frames.
 *     Groups left over (native stack cut at VRAMTRACE_DEPTH, or eval frames
 *     in a .cold section we cannot see) go at the outer end, then the
 *     annotation/NVTX ranges of this thread (ranges.c).
 *  4. Each Python frame becomes a pseudo ip (trace_format.h, PSEUDO FRAMES):
 *     kind VT_PSEUDO_PY, payload = id of a "site" = (code object, lasti).
 *
 * Invariants that make reading someone else's interpreter safe:
 *  - Only this thread's own chain is read, while the thread is inside our
 *    hook: its frames cannot be popped and their code objects are held by
 *    strong references from those frames. Nothing is read while
 *    Py_IsInitialized() is 0 or the runtime is finalizing.
 *  - Offsets come from a table checked against each version's headers
 *    (3.10-3.12) or from _PyRuntime's _Py_DebugOffsets (3.13). Any other
 *    version: native-only stacks and one NOTE in the trace.
 *  - Before the first direct read, one whole walk is done with
 *    process_vm_readv on ourselves (under a seccomp filter, or where that
 *    syscall is refused, a copy of what the kernel says is readable:
 *    safe_read), checking every code object's type is PyCode_Type. If any
 *    check fails, Python frames stay off for the process (one NOTE). Walks
 *    after that read frames directly, still checking alignment, the user
 *    address range, the code object's type, and at most MAX_PY frames.
 *  - Names are copied on the hot path, once per site, with safe reads only
 *    (the writer thread cannot read them later: the code object may be gone
 *    by then). A site is keyed by (code pointer, lasti) and checked on every
 *    hit against the code's qualname/filename pointers and first line, so a
 *    code object freed and replaced at the same address gets a new site.
 *  - Sites live in a table mapped once (virtual, NORESERVE); a site never
 *    changes after its id is published, so the writer reads its name with no
 *    lock. New sites take site_lock; known ones take no lock and allocate
 *    nothing.
 * Residual risk, documented in docs/python.md: a daemon thread inside a
 * CUDA call while the main thread finalizes the interpreter can have its
 * thread state freed between our finalizing check and the walk.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shim.h"
#include "vramtrace/encode.h"

#define MAX_PY 128            /* Python frames per stack */
#define SITE_CAP (1u << 15)   /* distinct (code, lasti) sites per process */
#define SITE_TABLE (1u << 16)
#define NAME_CAP 320
#define LINETABLE_MAX (64u << 10)
#define RETRY_ABSENT 16384    /* captures between looks for a late libpython */

/* Highest user-space address we accept as a pointer (47-bit VA on x86-64,
 * 48-bit on arm64; the kernel never hands out more unless asked). */
#if defined(__aarch64__)
#define USER_TOP (1ull << 48)
#else
#define USER_TOP (1ull << 47)
#endif

enum { ST_UNINIT, ST_INIT, ST_ABSENT, ST_UNVERIFIED, ST_ON, ST_OFF };
enum { GROUP_EACH, GROUP_IS_ENTRY, GROUP_CSTACK };
enum { INSTR_LASTI_INT, INSTR_PREV_PTR, INSTR_CUR_PTR };
#define FRAME_OWNED_BY_CSTACK 3 /* Include/internal/pycore_frame.h, 3.12 and 3.13 */

/* Offsets, in bytes, of the few fields the walk reads. -1 = absent. */
typedef struct layout {
    unsigned minor;
    int group, instr_kind;
    int ts_frame;         /* tstate -> frame (3.10) / cframe (3.11, 3.12) / current_frame (3.13) */
    int cframe_current;   /* _PyCFrame.current_frame; -1 when the tstate points at the frame */
    int fr_code, fr_previous, fr_instr, fr_owner, fr_is_entry;
    int co_filename, co_name, co_firstlineno, co_linetable, co_code;
    int ob_type, ob_size, bytes_sval, str_length, str_state, ascii_data;
} layout_t;

/* 3.10-3.12: printed with offsetof() against each version's own headers
 * (Include/cpython/pystate.h, Include/cpython/frameobject.h (3.10),
 * Include/internal/pycore_frame.h (3.11, 3.12), Include/cpython/code.h,
 * Include/cpython/unicodeobject.h, Include/cpython/bytesobject.h) of
 * CPython 3.10.13, 3.11.7 and 3.12.1, x86-64 and LP64 in general. co_name is
 * co_qualname from 3.11 on; 3.10 code objects have no qualname. */
static const layout_t table[] = {
    { .minor = 10, .group = GROUP_EACH, .instr_kind = INSTR_LASTI_INT,
      .ts_frame = 24, .cframe_current = -1,
      .fr_code = 32, .fr_previous = 24, .fr_instr = 96, .fr_owner = -1, .fr_is_entry = -1,
      .co_filename = 104, .co_name = 112, .co_firstlineno = 40, .co_linetable = 120, .co_code = -1,
      .ob_type = 8, .ob_size = 16, .bytes_sval = 32, .str_length = 16, .str_state = 32, .ascii_data = 48 },
    { .minor = 11, .group = GROUP_IS_ENTRY, .instr_kind = INSTR_PREV_PTR,
      .ts_frame = 56, .cframe_current = 8,
      .fr_code = 32, .fr_previous = 48, .fr_instr = 56, .fr_owner = 69, .fr_is_entry = 68,
      .co_filename = 112, .co_name = 128, .co_firstlineno = 72, .co_linetable = 136, .co_code = 184,
      .ob_type = 8, .ob_size = 16, .bytes_sval = 32, .str_length = 16, .str_state = 32, .ascii_data = 48 },
    { .minor = 12, .group = GROUP_CSTACK, .instr_kind = INSTR_PREV_PTR,
      .ts_frame = 56, .cframe_current = 0,
      .fr_code = 0, .fr_previous = 8, .fr_instr = 56, .fr_owner = 70, .fr_is_entry = -1,
      .co_filename = 112, .co_name = 128, .co_firstlineno = 68, .co_linetable = 136, .co_code = 192,
      .ob_type = 8, .ob_size = 16, .bytes_sval = 32, .str_length = 16, .str_state = 32, .ascii_data = 40 },
};

typedef struct site {
    uintptr_t code, qualname, filename;
    int32_t lasti, firstlineno;
    char name[NAME_CAP];
} site_t;

typedef struct walk {
    int n, ngroups;
    uint64_t ips[MAX_PY];
    int group_end[MAX_PY]; /* exclusive end index in ips of each group */
} walk_t;

static _Atomic int state = ST_UNINIT;
static layout_t L;
static uintptr_t code_type, unicode_type, bytes_type;
static uintptr_t eval_start;
static size_t eval_size;
static void *(*get_tstate)(void);
static int (*is_initialized)(void);
static int (*is_finalizing)(void);
static __thread unsigned absent_count __attribute__((tls_model("initial-exec")));

static site_t *sites;
static _Atomic uint32_t *site_slots;
static _Atomic uint32_t site_count;
static pthread_mutex_t site_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t linetable_buf[LINETABLE_MAX]; /* under site_lock */

/* How Python frames stand, said in the trace as a NOTE. Each note is
 * written into a slot of its own and then published whole: a fork, or the
 * writer, in the middle of writing one sees the one before (a child forked
 * right after a thread switched frames on or off got half a note). A
 * process writes two at most (init, then the first walk's verdict); past
 * NOTE_SLOTS later ones are not said. */
#define NOTE_SLOTS 8
#define NOTE_LEN 200
static char notes[NOTE_SLOTS][NOTE_LEN];
static _Atomic unsigned note_claimed;   /* slots written or being written */
static _Atomic unsigned note_published; /* 1 + the latest whole note's slot, 0 for none */
static _Atomic int note_pending;
static int vm_refused;

static void set_note(const char *fmt, unsigned minor, const char *why)
{
    unsigned slot = atomic_fetch_add(&note_claimed, 1);
    if (slot >= NOTE_SLOTS)
        return;
    snprintf(notes[slot], NOTE_LEN, fmt, minor, why);
    atomic_store_explicit(&note_published, slot + 1, memory_order_release);
    atomic_store_explicit(&note_pending, 1, memory_order_release);
}

/* ---- reading memory ---- */

static int addr_ok(uintptr_t p, size_t n)
{
    return p >= 4096 && p < USER_TOP - n;
}

/* A read that cannot fault: process_vm_readv on ourselves or, where a
 * seccomp policy refuses it (or may: init), a copy of memory the kernel
 * has just said is readable (vt_readable). The second leaves the instant
 * between the check and the copy, harmless here: every address is reached
 * from the calling thread's own frame chain, live while the thread is in
 * this call, and a wrong layout's stray address is what the check turns
 * away. It used to be a round trip through a pipe made for the call, whose
 * two descriptors sat in the program's table meanwhile (a program thread's
 * dup2 onto one of their numbers had its file closed by ours). */
static int safe_read(void *dst, uintptr_t src, size_t n)
{
    if (!addr_ok(src, n))
        return -1;
    if (!vm_refused) {
        struct iovec local = { dst, n }, remote = { (void *)src, n };
        ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
        if (got == (ssize_t)n)
            return 0;
        if (got >= 0 || errno == EFAULT || errno == ESRCH)
            return -1;
        vm_refused = 1;
    }
    if (!vt_readable((const void *)src, n))
        return -1;
    memcpy(dst, (const void *)src, n);
    return 0;
}

/* Direct reads once the layout is verified; safe ones before and on the
 * rare path that creates a site. Every read is at base + a layout offset,
 * and every base has passed ptr_ok(), so a direct read stays inside the
 * user address range without a check of its own. */
static inline int rd(int safe, void *dst, uintptr_t src, size_t n)
{
    if (safe)
        return safe_read(dst, src, n);
    memcpy(dst, (const void *)src, n);
    return 0;
}

static inline int rd_ptr(int safe, uintptr_t *dst, uintptr_t src)
{
    return rd(safe, dst, src, sizeof *dst);
}

/* An object or frame base: aligned, and the whole span of offsets we read
 * from it (max_offset, set at start-up) in user space. */
static int max_offset = 256;
static inline int ptr_ok(uintptr_t p)
{
    return p >= 4096 && p < USER_TOP - (uintptr_t)max_offset && !(p & 7);
}

/* ---- names, on the rare path (safe reads only, under site_lock) ---- */

/* Copies a str object's text if it is compact ASCII; "?" otherwise. */
static void read_str(uintptr_t obj, char *out, size_t cap)
{
    uintptr_t type = 0;
    int64_t length = 0;
    uint32_t st = 0;
    strcpy(out, "?");
    if (!ptr_ok(obj) || safe_read(&type, obj + (uintptr_t)L.ob_type, 8) || type != unicode_type ||
        safe_read(&length, obj + (uintptr_t)L.str_length, 8) || safe_read(&st, obj + (uintptr_t)L.str_state, 4))
        return;
    /* state bitfield, LSB first: interned:2 kind:3 compact:1 ascii:1
     * (Include/cpython/unicodeobject.h, unchanged 3.10-3.13). */
    unsigned kind = (st >> 2) & 7, compact = (st >> 5) & 1, ascii = (st >> 6) & 1;
    if (kind != 1 || !compact || !ascii || length < 0)
        return;
    size_t len = (size_t)length < cap - 1 ? (size_t)length : cap - 1;
    if (safe_read(out, obj + (uintptr_t)L.ascii_data, len))
        len = 0;
    out[len] = 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)out[i] < 0x20 || (unsigned char)out[i] > 0x7e)
            out[i] = '?';
    if (!len)
        strcpy(out, "?");
}

/* PEP 626 line table of 3.10 (Objects/lnotab_notes.txt): (start delta u8,
 * line delta s8) pairs over byte offsets; -128 = no line. */
static int line_310(const uint8_t *t, size_t n, int first, int addr)
{
    int line = first, end = 0;
    for (size_t i = 0; i + 1 < n; i += 2) {
        int start = end;
        end += t[i];
        int delta = (int8_t)t[i + 1];
        if (delta != -128)
            line += delta;
        if (start <= addr && addr < end)
            return delta == -128 ? -1 : line;
    }
    return -1;
}

/* 3.11+ location table (Objects/locations.md): an entry starts with a byte
 * 1CCCCLLL (code C, length L+1 code units); codes 13 and 14 carry a signed
 * varint line delta, 10-12 a delta of C-10, 15 means no line. */
static int line_311(const uint8_t *t, size_t n, int first, int lasti)
{
    int line = first, addr = 0;
    size_t i = 0;
    while (i < n) {
        uint8_t b = t[i];
        if (!(b & 0x80))
            return -1;
        int code = (b >> 3) & 15, len = (b & 7) + 1, delta = 0;
        if (code == 13 || code == 14) {
            unsigned v = 0, shift = 0;
            size_t j = i + 1;
            uint8_t c;
            do {
                if (j >= n || shift > 24)
                    return -1;
                c = t[j++];
                v |= (unsigned)(c & 63) << shift;
                shift += 6;
            } while (c & 64);
            delta = (v & 1) ? -(int)(v >> 1) : (int)(v >> 1);
        } else if (code >= 10 && code <= 12) {
            delta = code - 10;
        }
        line += delta;
        if (lasti >= addr && lasti < addr + len)
            return code == 15 ? -1 : line;
        addr += len;
        for (i++; i < n && !(t[i] & 0x80); i++)
            ;
    }
    return -1;
}

static int line_of(uintptr_t code, int first, int lasti)
{
    uintptr_t tbl = 0, type = 0;
    int64_t size = 0;
    if (lasti < 0 || safe_read(&tbl, code + (uintptr_t)L.co_linetable, 8) || !ptr_ok(tbl) ||
        safe_read(&type, tbl + (uintptr_t)L.ob_type, 8) || type != bytes_type ||
        safe_read(&size, tbl + (uintptr_t)L.ob_size, 8) || size < 0)
        return -1;
    size_t n = (size_t)size < LINETABLE_MAX ? (size_t)size : LINETABLE_MAX;
    for (size_t off = 0; off < n; off += 4096) {
        size_t chunk = n - off < 4096 ? n - off : 4096;
        if (safe_read(linetable_buf + off, tbl + (uintptr_t)L.bytes_sval + off, chunk))
            return -1;
    }
    return L.minor == 10 ? line_310(linetable_buf, n, first, lasti * 2) : line_311(linetable_buf, n, first, lasti);
}

static void format_name(site_t *s)
{
    char qual[128], file[200];
    read_str(s->qualname, qual, sizeof qual);
    read_str(s->filename, file, sizeof file);
    int line = line_of(s->code, s->firstlineno, s->lasti);
    /* Long paths keep their tail: the package and module say the most. */
    size_t fl = strlen(file);
    const char *f = fl > 120 ? file + fl - 117 : file;
    char lbuf[16];
    if (line >= 0)
        snprintf(lbuf, sizeof lbuf, "%d", line);
    else
        strcpy(lbuf, "?");
    snprintf(s->name, sizeof s->name, "py:%s (%s%s:%s)", qual, fl > 120 ? "..." : "", f, lbuf);
}

/* ---- sites ---- */

static uint32_t slot_of(uintptr_t code, int32_t lasti)
{
    uint64_t h = (uint64_t)code * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uint32_t)lasti * 0xff51afd7ed558ccdull;
    return (uint32_t)(h >> 40) & (SITE_TABLE - 1);
}

/* Creates the site under site_lock; 0 when the table is full or the code
 * object does not check out. */
static uint32_t new_site(uintptr_t code, int32_t lasti, uintptr_t qual, uintptr_t file, int32_t first)
{
    pthread_mutex_lock(&site_lock);
    uint32_t found = 0, i = slot_of(code, lasti);
    for (uint32_t probe = 0; probe < 64; probe++, i = (i + 1) & (SITE_TABLE - 1)) {
        uint32_t id = atomic_load_explicit(&site_slots[i], memory_order_relaxed);
        const site_t *s = id ? &sites[id] : NULL;
        if (s && (s->code != code || s->lasti != lasti))
            continue;
        if (s && s->qualname == qual && s->filename == file && s->firstlineno == first) {
            found = id; /* another thread made it meanwhile */
            break;
        }
        /* An empty slot, or a site of a code object that was freed and
         * replaced at this address: a new site takes the slot. */
        uint32_t n = atomic_load_explicit(&site_count, memory_order_relaxed) + 1;
        uintptr_t type = 0;
        if (n >= SITE_CAP || safe_read(&type, code + (uintptr_t)L.ob_type, 8) || type != code_type)
            break;
        site_t *ns = &sites[n];
        ns->code = code;
        ns->lasti = lasti;
        ns->qualname = qual;
        ns->filename = file;
        ns->firstlineno = first;
        format_name(ns);
        atomic_store_explicit(&site_count, n, memory_order_release);
        atomic_store_explicit(&site_slots[i], n, memory_order_release);
        found = n;
        break;
    }
    pthread_mutex_unlock(&site_lock);
    return found;
}

/* The pseudo ip of one frame, 0 to skip it. Lock-free for known sites. */
static inline __attribute__((always_inline)) uint64_t frame_ip(int safe, uintptr_t code, uintptr_t instr)
{
    uintptr_t type = 0, qual = 0, file = 0;
    int32_t first = 0;
    if (!ptr_ok(code) || rd_ptr(safe, &type, code + (uintptr_t)L.ob_type) || type != code_type ||
        rd_ptr(safe, &qual, code + (uintptr_t)L.co_name) || rd_ptr(safe, &file, code + (uintptr_t)L.co_filename) ||
        rd(safe, &first, code + (uintptr_t)L.co_firstlineno, 4))
        return 0;
    int32_t lasti = -1;
    if (L.instr_kind == INSTR_LASTI_INT) {
        lasti = (int32_t)instr;
    } else {
        /* Code units (2 bytes) from the start of co_code_adaptive, within
         * Py_SIZE(code) units. */
        uintptr_t start = code + (uintptr_t)L.co_code;
        int64_t units = 0;
        if (instr >= start && !rd(safe, &units, code + (uintptr_t)L.ob_size, 8) &&
            (instr - start) / 2 < (uint64_t)units)
            lasti = (int32_t)((instr - start) / 2);
    }
    uint32_t i = slot_of(code, lasti);
    for (uint32_t probe = 0; probe < 64; probe++, i = (i + 1) & (SITE_TABLE - 1)) {
        uint32_t id = atomic_load_explicit(&site_slots[i], memory_order_acquire);
        if (!id)
            break;
        const site_t *s = &sites[id];
        if (s->code == code && s->lasti == lasti) {
            if (s->qualname == qual && s->filename == file && s->firstlineno == first)
                return VT_PSEUDO_IP(VT_PSEUDO_PY, id);
            break;
        }
    }
    uint32_t id = new_site(code, lasti, qual, file, first);
    return id ? VT_PSEUDO_IP(VT_PSEUDO_PY, id) : 0;
}

/* ---- the walk ---- */

static void close_group(walk_t *w)
{
    if (w->n > (w->ngroups ? w->group_end[w->ngroups - 1] : 0))
        w->group_end[w->ngroups++] = w->n;
}

/* Walks this thread's chain into w. Returns 0 when every frame checked out
 * (an empty chain included), -1 at the first one that did not; w then
 * holds the frames before it. */
static inline __attribute__((always_inline)) int walk(int safe, uintptr_t tstate, walk_t *w)
{
    uintptr_t f = 0;
    if (!ptr_ok(tstate) || rd_ptr(safe, &f, tstate + (uintptr_t)L.ts_frame))
        return -1;
    if (L.cframe_current >= 0 && f && (!ptr_ok(f) || rd_ptr(safe, &f, f + (uintptr_t)L.cframe_current)))
        return -1;
    for (int depth = 0; f; depth++) {
        if (!ptr_ok(f) || depth >= 4 * MAX_PY)
            return -1;
        uintptr_t code = 0, prev = 0, instr = 0;
        uint8_t owner = 0, is_entry = 0;
        if (rd_ptr(safe, &code, f + (uintptr_t)L.fr_code) || rd_ptr(safe, &prev, f + (uintptr_t)L.fr_previous))
            return -1;
        if (L.instr_kind == INSTR_LASTI_INT) {
            int32_t lasti = -1;
            if (rd(safe, &lasti, f + (uintptr_t)L.fr_instr, 4))
                return -1;
            instr = (uintptr_t)(intptr_t)lasti;
        } else if (rd_ptr(safe, &instr, f + (uintptr_t)L.fr_instr)) {
            return -1;
        }
        if ((L.fr_owner >= 0 && rd(safe, &owner, f + (uintptr_t)L.fr_owner, 1)) ||
            (L.fr_is_entry >= 0 && rd(safe, &is_entry, f + (uintptr_t)L.fr_is_entry, 1)))
            return -1;
        if (L.group == GROUP_CSTACK && owner == FRAME_OWNED_BY_CSTACK) {
            close_group(w); /* the shim frame under each C-level eval call */
        } else {
            uint64_t ip = frame_ip(safe, code, instr);
            /* 3.13's f_executable may be something other than code (None
             * for a few internal frames): skip it. Before verification
             * every frame must check out. */
            if (!ip && (safe || L.minor < 13))
                return safe ? -1 : 0;
            if (ip && w->n < MAX_PY)
                w->ips[w->n++] = ip;
            if (L.group == GROUP_EACH || (L.group == GROUP_IS_ENTRY && is_entry))
                close_group(w);
        }
        f = prev;
    }
    close_group(w);
    return 0;
}

/* The two specialised walks: safe reads compiled out of the hot one. */
static __attribute__((noinline)) int walk_direct(uintptr_t tstate, walk_t *w)
{
    return walk(0, tstate, w);
}

static __attribute__((noinline)) int walk_safe(uintptr_t tstate, walk_t *w)
{
    return walk(1, tstate, w);
}

/* ---- start-up ---- */

/* In a forked child the trace is new: say again how Python frames stand.
 * What survives is what describes the process's memory, which the child
 * shares: the layout and interpreter symbols init() found, the sites and
 * their names (published whole, never changed), and whether
 * process_vm_readv is refused. Not the lock, which a parent's thread that
 * does not exist here may have held, nor a decision that thread was in the
 * middle of (ST_INIT, which no one would ever finish): the child decides
 * again at its next capture. */
static void atfork_child(void)
{
    pthread_mutex_init(&site_lock, NULL);
    int deciding = ST_INIT;
    atomic_compare_exchange_strong(&state, &deciding, ST_UNINIT);
    /* A slot a parent's thread was writing is taken again by the child's
     * next note; the child says the last whole one. */
    unsigned published = atomic_load(&note_published);
    atomic_store(&note_claimed, published);
    if (published)
        atomic_store(&note_pending, 1);
}

static void *sym(const char *name)
{
    return vt_real_dlsym(RTLD_DEFAULT, name);
}

/* 3.13: the offsets CPython publishes for out-of-process debuggers, at the
 * start of _PyRuntime (Include/internal/pycore_runtime.h, _Py_DebugOffsets
 * of 3.13: cookie "xdebugpy", version, free_threaded, then tables of u64
 * offsets; the indexes below are field positions in that struct). */
static int layout_313(void)
{
    const uint64_t *d = sym("_PyRuntime");
    if (!d || memcmp(d, "xdebugpy", 8) != 0 || (d[1] >> 16) != 0x030d || d[2] != 0)
        return -1;
    enum {
        TS_CURRENT_FRAME = 23, FR_PREVIOUS = 29, FR_EXECUTABLE = 30, FR_INSTR = 31, FR_OWNER = 33,
        CO_FILENAME = 35, CO_NAME = 37 /* qualname */, CO_LINETABLE = 38, CO_FIRSTLINENO = 39, CO_CODE = 43,
        OB_TYPE = 45, BYTES_SIZE = 65, BYTES_SVAL = 66, STR_STATE = 68, STR_LENGTH = 69, STR_ASCII = 70,
    };
    static const int idx[] = { TS_CURRENT_FRAME, FR_PREVIOUS, FR_EXECUTABLE, FR_INSTR, FR_OWNER, CO_FILENAME,
                               CO_NAME, CO_LINETABLE, CO_FIRSTLINENO, CO_CODE, OB_TYPE, BYTES_SIZE,
                               BYTES_SVAL, STR_STATE, STR_LENGTH, STR_ASCII };
    for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++)
        if (d[idx[i]] >= 4096)
            return -1;
    L = (layout_t){ .minor = 13, .group = GROUP_CSTACK, .instr_kind = INSTR_CUR_PTR,
                    .ts_frame = (int)d[TS_CURRENT_FRAME], .cframe_current = -1,
                    .fr_code = (int)d[FR_EXECUTABLE], .fr_previous = (int)d[FR_PREVIOUS],
                    .fr_instr = (int)d[FR_INSTR], .fr_owner = (int)d[FR_OWNER], .fr_is_entry = -1,
                    .co_filename = (int)d[CO_FILENAME], .co_name = (int)d[CO_NAME],
                    .co_firstlineno = (int)d[CO_FIRSTLINENO], .co_linetable = (int)d[CO_LINETABLE],
                    .co_code = (int)d[CO_CODE], .ob_type = (int)d[OB_TYPE],
                    .bytes_sval = (int)d[BYTES_SVAL], .str_length = (int)d[STR_LENGTH],
                    .str_state = (int)d[STR_STATE], .ascii_data = (int)d[STR_ASCII] };
    /* PyVarObject.ob_size, the same field in code and bytes objects. */
    L.ob_size = (int)d[BYTES_SIZE];
    return 0;
}

/* Decides once whether and how this process's Python can be read. */
static int init(void)
{
    typedef const char *(*version_fn)(void);
    static int atfork_done;
    if (!atfork_done) {
        atfork_done = 1;
        pthread_atfork(NULL, NULL, atfork_child);
    }
    const unsigned long *hex = sym("Py_Version"); /* 3.11+ */
    version_fn get_version = (version_fn)sym("Py_GetVersion");
    get_tstate = (void *(*)(void))sym("PyGILState_GetThisThreadState");
    if (!get_tstate || (!hex && !get_version))
        return ST_ABSENT;
    unsigned major = 0, minor = 0;
    if (hex) {
        major = (unsigned)(*hex >> 24) & 0xff;
        minor = (unsigned)(*hex >> 16) & 0xff;
    } else if (sscanf(get_version(), "%u.%u", &major, &minor) != 2) {
        major = 0;
    }
    /* Under a seccomp filter, process_vm_readv may be a call the policy
     * kills for (an allowlist without it: a debugging call to most): the
     * readability check, with rt_sigprocmask, which every policy that
     * lets a program block signals allows, is used from the start
     * (77-fault-seccomp). PR_GET_SECCOMP says 2 for a filter. */
    if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 2)
        vm_refused = 1;
    is_initialized = (int (*)(void))sym("Py_IsInitialized");
    is_finalizing = (int (*)(void))sym(minor >= 13 ? "Py_IsFinalizing" : "_Py_IsFinalizing");
    code_type = (uintptr_t)sym("PyCode_Type");
    unicode_type = (uintptr_t)sym("PyUnicode_Type");
    bytes_type = (uintptr_t)sym("PyBytes_Type");
    void *eval = sym("_PyEval_EvalFrameDefault");
    Dl_info info;
    const ElfW(Sym) *es = NULL;
    if (eval && dladdr1(eval, &info, (void **)&es, RTLD_DL_SYMENT) && es) {
        eval_start = (uintptr_t)eval;
        eval_size = es->st_size;
    }
    int known = 0;
    if (major == 3)
        for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
            if (table[i].minor == minor) {
                L = table[i];
                known = 1;
            }
    if (major == 3 && minor == 13)
        known = layout_313() == 0;
    if (!known || !is_initialized || !code_type || !unicode_type || !bytes_type || !eval_size) {
        set_note("python frames: off, CPython 3.%u is not one this shim can read (%s); stacks are native only",
                 minor, !known ? "supported: 3.10-3.13, default builds" : "missing interpreter symbols");
        return ST_OFF;
    }
    void *s = mmap(NULL, SITE_CAP * sizeof(site_t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    void *t = mmap(NULL, SITE_TABLE * sizeof(uint32_t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED || t == MAP_FAILED) {
        set_note("python frames: off in CPython 3.%u (%s)", minor, "no memory for the site table");
        return ST_OFF;
    }
    sites = s;
    site_slots = t;
    const int offs[] = { L.ts_frame, L.cframe_current, L.fr_code, L.fr_previous, L.fr_instr, L.fr_owner,
                         L.fr_is_entry, L.co_filename, L.co_name, L.co_firstlineno, L.co_linetable, L.ob_type,
                         L.ob_size, L.str_length, L.str_state };
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++)
        if (offs[i] + 8 > max_offset)
            max_offset = offs[i] + 8;
    return ST_UNVERIFIED;
}

/* The thread state to walk, 0 when there is none or it must not be read. */
static uintptr_t this_tstate(void)
{
    if (!is_initialized() || (is_finalizing && is_finalizing()))
        return 0;
    return (uintptr_t)get_tstate();
}

/* Fills w with this thread's Python frames, if any can be read. */
static void collect(walk_t *w)
{
    int st = atomic_load_explicit(&state, memory_order_acquire);
    if (st == ST_ON) {
        uintptr_t ts = this_tstate();
        if (ts)
            walk_direct(ts, w);
        return;
    }
    if (st == ST_ABSENT) {
        /* An embedding program may load libpython after its first CUDA
         * call: vt_pseudo_merge lets one capture in RETRY_ABSENT look
         * again. */
        st = ST_UNINIT;
        if (!atomic_compare_exchange_strong(&state, &(int){ ST_ABSENT }, ST_UNINIT))
            return;
    }
    if (st == ST_UNINIT) {
        if (!atomic_compare_exchange_strong(&state, &st, ST_INIT))
            return; /* another thread is deciding; this stack stays native */
        st = init();
        atomic_store_explicit(&state, st, memory_order_release);
    }
    if (st != ST_UNVERIFIED)
        return;
    /* First walk with safe reads: the layout must check out on a real chain
     * before any direct read. */
    uintptr_t ts = this_tstate();
    if (!ts)
        return;
    int expected = ST_UNVERIFIED;
    if (walk_safe(ts, w) != 0) {
        w->n = w->ngroups = 0;
        if (atomic_compare_exchange_strong(&state, &expected, ST_OFF))
            set_note("python frames: off, CPython 3.%u's frames did not check out (%s); stacks are native only",
                     L.minor, "a debug, free-threaded or patched build?");
    } else if (w->n && atomic_compare_exchange_strong(&state, &expected, ST_ON)) {
        set_note("python frames: on, CPython 3.%u, merged at _PyEval_EvalFrameDefault (%s)", L.minor,
                 L.minor == 13 ? "offsets from _Py_DebugOffsets" : "offsets from the built-in table");
    }
}

/* ---- the hooks stacks.c and writer.c call ---- */

/* The merge itself, out of line: its frame (a whole walk of Python
 * frames) would cost every capture its set-up, merged or not. */
static __attribute__((noinline)) int merge(const uint64_t *ips, int n, uint64_t *out, int cap, int skip_python)
{
    uint64_t ranges[VT_MAX_RANGE_FRAMES];
    int nr = vt_ranges_frames(ranges, VT_MAX_RANGE_FRAMES);
    if (!nr && skip_python)
        return -1;
    if (nr > cap)
        nr = cap;
    int room = cap - nr, m = 0;
    walk_t w;
    w.n = w.ngroups = 0;
    if (!skip_python)
        collect(&w);
    int g = 0, k = 0;
    for (int i = 0; i < n && m < room; i++) {
        uintptr_t ip = (uintptr_t)ips[i];
        if (g < w.ngroups && ip - 1 - eval_start < eval_size) {
            for (; k < w.group_end[g] && m < room; k++)
                out[m++] = w.ips[k];
            g++;
            continue;
        }
        out[m++] = ip;
    }
    /* Groups with no eval frame in the native stack (cut at
     * VRAMTRACE_DEPTH) are the outermost ones: they go last. */
    for (; k < w.n && m < room; k++)
        out[m++] = w.ips[k];
    for (int r = 0; r < nr; r++)
        out[m++] = ranges[r];
    return m;
}

int vt_pseudo_merge(const uint64_t *ips, int n, uint64_t *out, int cap)
{
    int st = atomic_load_explicit(&state, memory_order_relaxed);
    /* Most captures of a process without Python (or with Python frames
     * off) have nothing to merge: the caller keeps the native array, and
     * nothing is copied or compared with the eval loop. An absent
     * libpython is looked for again only every RETRY_ABSENT captures of a
     * thread, counted per thread so the hot path shares no cache line. */
    int skip_python = st == ST_OFF || (st == ST_ABSENT && ++absent_count % RETRY_ABSENT != 0);
    if (skip_python && !vt_ranges_open())
        return -1;
    return merge(ips, n, out, cap, skip_python);
}

static const char *py_frame_name(uint32_t id)
{
    if (!id || id > atomic_load_explicit(&site_count, memory_order_acquire))
        return "py:?";
    return sites[id].name;
}

void vt_pseudo_records(vt_emit_fn emit)
{
    if (atomic_exchange_explicit(&note_pending, 0, memory_order_acquire)) {
        unsigned published = atomic_load_explicit(&note_published, memory_order_acquire);
        const char *text = published ? notes[published - 1] : "";
        uint8_t buf[VT_VARINT_MAX * 2 + NOTE_LEN], *p = buf;
        p = vt_put_varint(p, vt_now_ns());
        p = vt_put_str(p, text, strnlen(text, NOTE_LEN), NOTE_LEN);
        if (published)
            emit(VT_REC_NOTE, buf, (size_t)(p - buf));
    }
    vt_ranges_records(emit);
}

const char *vt_pseudo_name(uint64_t ip)
{
    uint32_t id = (uint32_t)(ip & VT_PSEUDO_PAYLOAD_MASK);
    switch (VT_PSEUDO_KIND(ip)) {
    case VT_PSEUDO_PY:
        return py_frame_name(id);
    case VT_PSEUDO_RANGE:
        return vt_range_name(id);
    default:
        return "";
    }
}

