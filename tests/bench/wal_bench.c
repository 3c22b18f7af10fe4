/* oml-wal-bench - append + commit throughput of the write-ahead log under
 * each fsync policy: groups of 256 records of 200 bytes for about a second
 * each. Prints figures, asserts nothing (was test_wal's test_throughput).
 *
 *   oml-wal-bench [DIR]   (the log goes under DIR, default $TMPDIR or /tmp:
 *                          put it on the disk you want measured) */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wal.h"

#define RHDR 17 /* record header: len, crc, lsn, type (wal.h) */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

int main(int argc, char **argv)
{
    const char *t = argc > 1 ? argv[1] : getenv("TMPDIR");
    const char *names[] = {"everysec", "always", "no"};
    uint8_t b[200];
    memset(b, 0x5a, sizeof b);
    for (int policy = OML_WAL_FSYNC_EVERYSEC; policy <= OML_WAL_FSYNC_NO; policy++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/oml-wal-bench.XXXXXX", t && *t ? t : "/tmp");
        if (mkdtemp(dir) == NULL) {
            perror(dir);
            return 1;
        }
        oml_wal *w = NULL;
        oml_wal_options o = {.fsync = policy};
        oml_diag d = {0};
        if (oml_wal_open(&w, dir, &o, NULL, NULL, NULL, &d) != OML_OK) {
            fprintf(stderr, "oml-wal-bench: %s\n", d.msg);
            return 1;
        }
        double t0 = now_s(), t1 = t0;
        uint64_t groups = 0;
        while (t1 - t0 < 1.0 && groups < 4000) {
            for (int i = 0; i < 256; i++)
                if (oml_wal_append(w, 1, b, sizeof b, NULL) != OML_OK)
                    return 1;
            if (oml_wal_commit(w, &d) != OML_OK) {
                fprintf(stderr, "oml-wal-bench: %s\n", d.msg);
                return 1;
            }
            groups++;
            t1 = now_s();
        }
        double recs = (double)groups * 256;
        printf("[ wal bench ] fsync=%-8s %6llu groups  %10.0f records/s  %7.1f MB/s  %7.1f us/commit\n",
               names[policy], (unsigned long long)groups, recs / (t1 - t0),
               recs * (RHDR + 200) / (t1 - t0) / 1e6, (t1 - t0) / (double)groups * 1e6);
        oml_wal_close(w, NULL);
        nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    }
    return 0;
}
