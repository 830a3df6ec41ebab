/* replay.c: runs saved fuzzer inputs through a target without libFuzzer, so
 * a plain `cc` build (and `make test`, with or without SANITIZE=) replays
 * the corpus and every crash regression on every run.
 *
 *   replay-TARGET [-v] PATH...
 *       Each PATH is an input file or a directory of them (not recursive;
 *       dot files skipped). Prints "replayed N inputs" and exits 0; a
 *       crashing input kills the process (abort, sanitizer report); with -v
 *       each file is named on stderr before it runs, so the last one named
 *       is the culprit.
 *
 * Linked with exactly one fuzz target, which provides
 * LLVMFuzzerTestOneInput and optionally LLVMFuzzerInitialize.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int verbose;
static unsigned long replayed;

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        uint8_t *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "replay: %s: out of memory\n", path);
        return -1;
    }
    if (verbose) {
        /* fd 2 directly: the target may have pointed stderr at /dev/null. */
        char line[4200];
        int len = snprintf(line, sizeof line, "replay: %s\n", path);
        if (write(2, line, (size_t)len) < 0)
            return -1;
    }
    /* An exact-size copy, so ASan sees a read past the input's end. */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    replayed++;
    return 0;
}

static int replay_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode))
        return replay_file(path);
    struct dirent **names;
    int n = scandir(path, &names, NULL, alphasort);
    if (n < 0) {
        perror(path);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.' && !rc) {
            char child[4096];
            snprintf(child, sizeof child, "%s/%s", path, names[i]->d_name);
            struct stat cst;
            if (stat(child, &cst) == 0 && S_ISREG(cst.st_mode))
                rc = replay_file(child);
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    int first = 1;
    if (argc > 1 && !strcmp(argv[1], "-v")) {
        verbose = 1;
        first = 2;
    }
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    for (int i = first; i < argc; i++)
        if (replay_path(argv[i]) != 0)
            return 1;
    /* stdout may be /dev/null by now (fuzz_quiet_stdio): say it on fd 1. */
    char line[64];
    int len = snprintf(line, sizeof line, "replayed %lu inputs\n", replayed);
    return write(1, line, (size_t)len) == len ? 0 : 1;
}
