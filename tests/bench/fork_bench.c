/* oml-fork-bench - what a background checkpoint's fork costs the learner:
 * a store of ITEMS items of DIM features (src/store.c, its features on
 * huge pages: src/bigmem.h), then the same bytes malloc'd on 4 KB pages,
 * each filled in its own process and forked 5 times. Prints the median
 * fork time of each and how much of the store the kernel backed with huge
 * pages. Asserts nothing.
 *
 *   oml-fork-bench [ITEMS [DIM]]   (default 250000 784: 784 MB) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "store.h"

#define FORKS 5

/* Median time of FORKS forks of this process, in ms (the children exit at once). */
static double fork_ms(void)
{
    double t[FORKS];
    for (int i = 0; i < FORKS; i++) {
        double t0 = now_s();
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        t[i] = (now_s() - t0) * 1e3;
        if (pid < 0)
            return -1;
        waitpid(pid, NULL, 0);
    }
    return quantile(t, FORKS, 0.5);
}

/* AnonHugePages of this process, in MB (-1: not known). */
static double huge_mb(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb < 0 ? -1 : kb / 1024.0;
}

static int run_store(long items, int dim)
{
    oml_store *s = NULL;
    if (oml_store_create(&s, dim, (uint32_t)items) != OML_OK)
        return 1;
    float *x = malloc((size_t)dim * sizeof *x);
    char id[32];
    for (long i = 0; x && i < items; i++) {
        for (int j = 0; j < dim; j++)
            x[j] = (float)((i * 31 + j) % 255);
        int n = snprintf(id, sizeof id, "item-%ld", i);
        if (oml_store_put(s, id, (size_t)n, x, NULL, 0, NULL, NULL) != OML_OK)
            return 1;
    }
    printf("store of %ld x %d (huge pages: %.0f MB): fork %.2f ms (median of %d)\n", items, dim,
           huge_mb(), fork_ms(), FORKS);
    free(x);
    oml_store_destroy(s);
    return 0;
}

static int run_plain(size_t bytes)
{
    char *p = malloc(bytes);
    if (p == NULL)
        return 1;
    memset(p, 1, bytes);
    __asm__ volatile("" : : "r"(p) : "memory"); /* the pages are written, not optimised away */
    printf("the same %.0f MB on 4 KB pages (malloc):  fork %.2f ms (median of %d)\n", bytes / 1e6,
           fork_ms(), FORKS);
    free(p);
    return 0;
}

int main(int argc, char **argv)
{
    long items = argc > 1 ? atol(argv[1]) : 250000;
    int dim = argc > 2 ? atoi(argv[2]) : 784;
    if (argc > 3 || items < 1 || items > 100000000 || dim < 1 || dim > 65536) {
        fprintf(stderr, "usage: oml-fork-bench [ITEMS [DIM]]   (ITEMS in [1, 1e8], DIM in "
                        "[1, 65536])\n");
        return 2;
    }
    /* Each in a process of its own, so neither inherits the other's pages. */
    for (int which = 0; which < 2; which++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            int rc = which == 0 ? run_store(items, dim)
                                : run_plain((size_t)items * (size_t)dim * sizeof(float));
            fflush(stdout); /* _exit does not */
            _exit(rc);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            fprintf(stderr, "oml-fork-bench: run %d failed\n", which);
            return 1;
        }
    }
    return 0;
}
