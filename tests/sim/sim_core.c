/* sim_core.c: the global lock and the accounting every allocator shares.
 *
 * Contract:
 *  - free(dev) = capacity - external - this process's footprint - other
 *    processes' footprints (VTSIM_SHARED), floored at 0; footprint = used +
 *    the context reserve while a context exists on the device.
 *  - A contiguous block (cuMemAlloc, pitch, pool) is rounded up to the
 *    granularity and succeeds only if it fits in free(dev) AND in a hole of
 *    the device's first-fit range; otherwise CUDA_ERROR_OUT_OF_MEMORY, or
 *    with VTSIM_SYSMEM_FALLBACK=1 it lands in the system memory range and
 *    is still charged, which drives free to 0 as a real fallback does.
 *  - VTSIM_FAULT_AFTER=N: after N contiguous blocks succeeded, the process
 *    is as after a kernel's illegal memory access: the error is sticky, so
 *    every later block fails with CUDA_ERROR_ILLEGAL_ADDRESS whatever is
 *    free (the driver answers every call so after such a fault).
 *  - Fork: the lock is held across fork() and re-created in the child, so
 *    the child never inherits a lock owned by a thread it lacks.
 *  - VTSIM_SIGNAL_SAFE=1: signals are blocked while the lock is held, so a
 *    signal handler may call the driver without waiting on a lock its own
 *    thread holds (a driver safe to call from a handler).
 */
#include "sim.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct sim_state sim = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Atomic int signal_safe = -1;
static __thread sigset_t mask_before_lock;

static int signals_blocked_in_lock(void)
{
    int on = atomic_load_explicit(&signal_safe, memory_order_relaxed);
    if (on < 0) {
        const char *v = getenv("VTSIM_SIGNAL_SAFE");
        on = v && v[0] == '1';
        atomic_store_explicit(&signal_safe, on, memory_order_relaxed);
    }
    return on;
}

void sim_lock(void)
{
    if (signals_blocked_in_lock()) {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &mask_before_lock);
    }
    pthread_mutex_lock(&sim.lock);
}

void sim_unlock(void)
{
    pthread_mutex_unlock(&sim.lock);
    if (signals_blocked_in_lock())
        pthread_sigmask(SIG_SETMASK, &mask_before_lock, NULL);
}

static void fork_prepare(void) { pthread_mutex_lock(&sim.lock); }
static void fork_parent(void) { pthread_mutex_unlock(&sim.lock); }
static void fork_child(void)
{
    pthread_mutex_init(&sim.lock, NULL);
    sim_shared_fork_child();
}

__attribute__((constructor)) static void core_init(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

uint64_t sim_footprint_locked(int d)
{
    const sim_dev_t *dv = &sim.dev[d];
    return dv->used + (dv->nctx > 0 ? dv->reserve : 0);
}

uint64_t sim_free_locked(int d)
{
    const sim_dev_t *dv = &sim.dev[d];
    uint64_t taken = dv->external + sim_footprint_locked(d) + sim_shared_others(d);
    return taken >= dv->capacity ? 0 : dv->capacity - taken;
}

void sim_charge_locked(int d, int64_t delta)
{
    sim.dev[d].used += (uint64_t)delta;
    sim_shared_publish(d, sim_footprint_locked(d));
}

CUresult sim_block_alloc_locked(int d, uint64_t bytes, int kind, sim_ctx_t *ctx, void *owner,
                                uint64_t *addr)
{
    sim_dev_t *dv = &sim.dev[d];
    if (sim.fault_after && sim.blocks_made >= sim.fault_after)
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    uint64_t size = sim_round_up(bytes, sim.gran);
    if (bytes == 0 || size < bytes)
        return CUDA_ERROR_OUT_OF_MEMORY;
    sim_ext_t e = {.size = size, .req = bytes, .kind = kind, .dev = d, .ctx = ctx, .owner = owner};
    sim_map_t *map = &dv->mem;
    if (size > sim_free_locked(d) || sim_map_fit(map, size, sim.gran, &e.start)) {
        map = &dv->sysmem;
        e.fallback = 1;
        if (!sim.fallback || sim_map_fit(map, size, sim.gran, &e.start))
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (!sim_map_insert(map, &e))
        return CUDA_ERROR_OUT_OF_MEMORY;
    sim_charge_locked(d, (int64_t)size);
    sim.blocks_made++;
    *addr = e.start;
    return CUDA_SUCCESS;
}

sim_ext_t *sim_dev_find_locked(uint64_t addr, sim_map_t **map)
{
    for (int d = 0; d < sim.ndev; d++) {
        sim_dev_t *dv = &sim.dev[d];
        sim_map_t *maps[3] = {&dv->mem, &dv->sysmem, &dv->legacy};
        for (int i = 0; i < 3; i++) {
            if (addr < maps[i]->base || addr >= maps[i]->end)
                continue;
            *map = maps[i];
            return sim_map_find(maps[i], addr);
        }
    }
    return NULL;
}

void sim_block_free_locked(sim_map_t *map, sim_ext_t *e)
{
    int d = e->dev;
    uint64_t size = e->size;
    sim_map_remove(map, e);
    sim_charge_locked(d, -(int64_t)size);
}
