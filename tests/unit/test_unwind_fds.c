/* Unit test of preload/unwind_fds.c: a library that checks addresses as
 * libunwind does (unwfds_lib.c), its imports redirected, with lazy binding
 * and with a read-only GOT (-z now). The checks must answer as the pipe
 * did, and the program's descriptor table must hold nothing of theirs. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shim.h"
#include "tap.h"

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own */
}

static void one(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    TAP_OK(h != NULL, "%s loads", name);
    if (!h)
        return;
    int (*check)(const void *, int *) = (int (*)(const void *, int *))dlsym(h, "unwfds_check");
    TAP_EQ_U64(vt_unwind_fds_redirect(h), 1, "%s: its pipe imports are redirected", name);
    int before = open_fds(), used[2] = { -1, -1 };
    char *page = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    mprotect(page + 4096, 4096, PROT_NONE);
    TAP_EQ_U64(check(page, used), 1, "%s: a readable address checks readable", name);
    TAP_EQ_U64(check(page + 4095, used), 1, "%s: its page's last byte too", name);
    TAP_EQ_U64(check(page + 4096, used), 0, "%s: a PROT_NONE page checks unreadable", name);
    TAP_EQ_U64(check(NULL, used), 0, "%s: NULL checks unreadable", name);
    /* mincore, which systemd's @system-service set lacks, answered by the
     * same check: a PROT_NONE page is "not mapped", so never read. */
    int (*pages)(void *) = (int (*)(void *))dlsym(h, "unwfds_mincore");
    TAP_EQ_U64(pages(page), 0, "%s: mincore: a readable page is mapped", name);
    TAP_EQ_U64(pages(page + 4096), -ENOMEM, "%s: mincore: a PROT_NONE page is not", name);
    TAP_EQ_U64(pages(page + 1), -EINVAL, "%s: mincore: an address inside a page is refused, as by the kernel", name);
    munmap(page, 8192);
    TAP_EQ_U64(pages(page), -ENOMEM, "%s: mincore: an unmapped page is not mapped", name);
    TAP_EQ_U64(check(page, used), 0, "%s: an unmapped address checks unreadable", name);
    TAP_OK(used[0] >= (1 << 20) && used[1] >= (1 << 20), "%s: its pipe's numbers (%d, %d) are none a table holds",
           name, used[0], used[1]);
    TAP_EQ_U64(open_fds(), before, "%s: no descriptor opened", name);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".";
    one(dir, "libunwfds_lazy.so");
    one(dir, "libunwfds_now.so");
    return tap_done();
}
