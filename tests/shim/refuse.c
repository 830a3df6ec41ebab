/* refuse: runs a command under a seccomp filter that refuses some system
 * calls, as a container's or a service's policy does, so the shim's
 * fallbacks can be tested.
 *
 *   refuse [NAME | !NAME]... -- COMMAND [ARG...]
 *
 * NAME fails with EPERM (Docker's default profile refuses unshare without
 * CAP_SYS_ADMIN; stricter ones refuse process_vm_readv); !NAME kills the
 * process with SIGSYS, so a test sees any use of it at all. NAME is one of
 * unshare, process_vm_readv, pipe, pipe2. Exits 2 when the filter cannot
 * be installed. */
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

static const struct {
    const char *name;
    long nr;
} calls[] = {
    { "unshare", __NR_unshare },
    { "process_vm_readv", __NR_process_vm_readv },
#ifdef __NR_pipe
    { "pipe", __NR_pipe },
#endif
    { "pipe2", __NR_pipe2 },
};

int main(int argc, char **argv)
{
    /* Two instructions a name, then the architecture check and the
     * default: at most 8 names. */
    struct sock_filter code[4 + 2 * 8];
    size_t n = 0;
    code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
    code[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0);
    code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--"); i++) {
        const char *name = argv[i] + (argv[i][0] == '!');
        size_t k = 0;
        while (k < sizeof calls / sizeof calls[0] && strcmp(calls[k].name, name))
            k++;
        if (k == sizeof calls / sizeof calls[0] || n + 3 > sizeof code / sizeof code[0]) {
            fprintf(stderr, "refuse: cannot refuse '%s'\n", argv[i]);
            return 2;
        }
        unsigned action = argv[i][0] == '!' ? SECCOMP_RET_KILL_PROCESS : SECCOMP_RET_ERRNO | EPERM;
        code[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)calls[k].nr, 0, 1);
        code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, action);
    }
    if (i + 1 >= argc) {
        fprintf(stderr, "usage: refuse [NAME | !NAME]... -- COMMAND [ARG...]\n");
        return 2;
    }
    code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog prog = { (unsigned short)n, code };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        perror("refuse: seccomp");
        return 2;
    }
    execvp(argv[i + 1], argv + i + 1);
    perror("refuse: exec");
    return 2;
}
