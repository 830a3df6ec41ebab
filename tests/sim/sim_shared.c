/* sim_shared.c: device usage shared between simulated processes
 * (VTSIM_SHARED=path), for the "another process holds VRAM" scenario.
 *
 * Contract:
 *  - The file is created if missing and mapped MAP_SHARED; all-zero bytes
 *    are a valid empty table, so no process has to initialise it.
 *  - Each process owns one slot keyed by its pid and writes only that slot
 *    (its footprint per device: its allocations plus its context reserve).
 *    Readers sum every other live slot; lock-free, with atomics, because the
 *    processes share no mutex.
 *  - A slot whose pid is gone (kill(pid, 0) fails with ESRCH, e.g. after a
 *    SIGKILL) is reclaimed lazily by whoever notices. A zombie still counts
 *    until it is reaped, like a real GPU process until its teardown.
 *  - A normal exit clears the slot; a forked child publishes only what it
 *    allocates itself, since its parent already accounts for the rest.
 */
#include "sim.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHARED_MAGIC 0x76747368u /* "vtsh" */
#define SHARED_SLOTS 256
#define SLOT_BUSY (-1)

struct shared_slot {
    int32_t pid; /* 0 free, SLOT_BUSY being reclaimed, else owner */
    int32_t pad;
    uint64_t bytes[SIM_MAX_DEV];
};

struct shared_file {
    uint32_t magic;
    uint32_t nslots;
    uint64_t pad;
    struct shared_slot slot[SHARED_SLOTS];
};

static struct shared_file *shm;
static struct shared_slot *mine;
static pid_t mine_pid;
static uint64_t baseline[SIM_MAX_DEV]; /* inherited across fork */

void sim_shared_open(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        fprintf(stderr, "vtsim: warning: VTSIM_SHARED='%s': %s; not sharing\n", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    if ((size_t)st.st_size < sizeof *shm && ftruncate(fd, sizeof *shm) < 0) {
        fprintf(stderr, "vtsim: warning: VTSIM_SHARED='%s': %s; not sharing\n", path, strerror(errno));
        close(fd);
        return;
    }
    void *p = mmap(NULL, sizeof *shm, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        fprintf(stderr, "vtsim: warning: VTSIM_SHARED='%s': %s; not sharing\n", path, strerror(errno));
        return;
    }
    struct shared_file *f = p;
    uint32_t zero = 0;
    __atomic_compare_exchange_n(&f->magic, &zero, SHARED_MAGIC, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&f->magic, __ATOMIC_SEQ_CST) != SHARED_MAGIC) {
        fprintf(stderr, "vtsim: warning: VTSIM_SHARED='%s' is not a vtsim file; not sharing\n", path);
        munmap(p, sizeof *shm);
        return;
    }
    shm = f;
}

static int alive(int32_t pid)
{
    return kill(pid, 0) == 0 || errno != ESRCH;
}

static struct shared_slot *claim(void)
{
    pid_t me = getpid();
    if (mine && mine_pid == me)
        return mine;
    for (int i = 0; i < SHARED_SLOTS; i++) {
        int32_t expect = 0;
        if (__atomic_compare_exchange_n(&shm->slot[i].pid, &expect, (int32_t)me, 0,
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
            mine = &shm->slot[i];
            mine_pid = me;
            return mine;
        }
    }
    fprintf(stderr, "vtsim: warning: VTSIM_SHARED table full; this process is not shared\n");
    return NULL;
}

void sim_shared_publish(int dev, uint64_t footprint)
{
    if (!shm)
        return;
    struct shared_slot *s = claim();
    if (!s)
        return;
    uint64_t v = footprint > baseline[dev] ? footprint - baseline[dev] : 0;
    __atomic_store_n(&s->bytes[dev], v, __ATOMIC_SEQ_CST);
}

uint64_t sim_shared_others(int dev)
{
    if (!shm)
        return 0;
    uint64_t sum = 0;
    pid_t me = getpid();
    for (int i = 0; i < SHARED_SLOTS; i++) {
        struct shared_slot *s = &shm->slot[i];
        int32_t pid = __atomic_load_n(&s->pid, __ATOMIC_SEQ_CST);
        if (pid == 0 || pid == SLOT_BUSY || pid == me)
            continue;
        if (!alive(pid)) {
            /* Zero the bytes while the slot is BUSY so a new owner never sees them. */
            if (__atomic_compare_exchange_n(&s->pid, &pid, SLOT_BUSY, 0, __ATOMIC_SEQ_CST,
                                            __ATOMIC_SEQ_CST)) {
                for (int d = 0; d < SIM_MAX_DEV; d++)
                    __atomic_store_n(&s->bytes[d], 0, __ATOMIC_SEQ_CST);
                __atomic_store_n(&s->pid, 0, __ATOMIC_SEQ_CST);
            }
            continue;
        }
        sum += __atomic_load_n(&s->bytes[dev], __ATOMIC_SEQ_CST);
    }
    return sum;
}

void sim_shared_fork_child(void)
{
    for (int d = 0; d < SIM_MAX_DEV; d++)
        baseline[d] = d < sim.ndev && sim.initialized ? sim_footprint_locked(d) : 0;
    mine = NULL;
}

__attribute__((destructor)) static void shared_release(void)
{
    if (!shm || !mine || mine_pid != getpid())
        return;
    for (int d = 0; d < SIM_MAX_DEV; d++)
        __atomic_store_n(&mine->bytes[d], 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&mine->pid, 0, __ATOMIC_SEQ_CST);
    mine = NULL;
}
