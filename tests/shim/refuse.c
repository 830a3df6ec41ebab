/* refuse: runs a command under a seccomp filter, as a container's or a
 * service's policy does, so the shim's fallbacks can be tested and its
 * system calls held to what such policies allow.
 *
 *   refuse [--allow FILE] [NAME | !NAME]... -- COMMAND [ARG...]
 *
 * NAME fails with EPERM (Docker's default profile refuses unshare without
 * CAP_SYS_ADMIN; stricter ones refuse process_vm_readv); !NAME kills the
 * process with SIGSYS, so a test sees any use of it at all. --allow kills
 * the process at any other call not named in FILE (one name a line; '#' lines
 * and others this machine has no number for are skipped), as systemd's
 * SystemCallFilter= does. Exits 2 when the filter cannot be installed. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "refuse: add this architecture's AUDIT_ARCH"
#endif

/* Every name the C library's <sys/syscall.h> has, made by tests/tests.mk. */
static const struct {
    const char *name;
    long nr;
} calls[] = {
#include "syscall_names.h"
};
#define NCALLS (sizeof calls / sizeof calls[0])

static long number_of(const char *name)
{
    for (size_t k = 0; k < NCALLS; k++)
        if (!strcmp(calls[k].name, name))
            return calls[k].nr;
    return -1;
}

/* Two instructions a call; BPF_MAXINSNS is 4096. */
static struct sock_filter code[BPF_MAXINSNS];
static size_t n;

static int add_call(long nr, unsigned action)
{
    if (n + 3 > BPF_MAXINSNS)
        return -1;
    code[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1);
    code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, action);
    return 0;
}

static int add_allowed(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        return -1;
    }
    char line[128];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, " \t\r\n")] = 0;
        long nr = line[0] && line[0] != '#' ? number_of(line) : -1;
        if (nr >= 0 && add_call(nr, SECCOMP_RET_ALLOW) != 0) {
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    return 0;
}

int main(int argc, char **argv)
{
    code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
    code[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0);
    code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    const char *allow = NULL;
    int i = 1;
    if (i + 1 < argc && !strcmp(argv[i], "--allow")) {
        allow = argv[i + 1];
        i += 2;
    }
    /* The names first: the first rule that matches decides. */
    for (; i < argc && strcmp(argv[i], "--"); i++) {
        const char *name = argv[i] + (argv[i][0] == '!');
        long nr = number_of(name);
        unsigned action = argv[i][0] == '!' ? SECCOMP_RET_KILL_PROCESS : SECCOMP_RET_ERRNO | EPERM;
        if (nr < 0 || add_call(nr, action) != 0) {
            fprintf(stderr, "refuse: cannot refuse '%s'\n", argv[i]);
            return 2;
        }
    }
    if (i + 1 >= argc) {
        fprintf(stderr, "usage: refuse [--allow FILE] [NAME | !NAME]... -- COMMAND [ARG...]\n");
        return 2;
    }
    if (allow && add_allowed(allow) != 0) {
        fprintf(stderr, "refuse: cannot read %s into a filter\n", allow);
        return 2;
    }
    code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, allow ? SECCOMP_RET_KILL_PROCESS : SECCOMP_RET_ALLOW);
    struct sock_fprog prog = { (unsigned short)n, code };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        perror("refuse: seccomp");
        return 2;
    }
    execvp(argv[i + 1], argv + i + 1);
    perror("refuse: exec");
    return 2;
}
