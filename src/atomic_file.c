/* atomic_file.c - temp file, fsync, rename, fsync of the directory (see
 * atomic_file.h). */
#include "atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK ((size_t)1 << 30) /* one write() at most: Linux writes <= 2 GiB - 4 KiB */

int oml_write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t w = write(fd, b, n > CHUNK ? CHUNK : n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        if (w == 0) {
            errno = EIO;
            return -1;
        }
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

int oml_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

static int fail(enum oml_atomic_stage *stage, enum oml_atomic_stage at, const char *tmp)
{
    int e = errno;
    if (tmp)
        unlink(tmp);
    if (stage)
        *stage = at;
    errno = e;
    return -1;
}

int oml_atomic_write(const char *path, const struct iovec *parts, int n, mode_t mode,
                     enum oml_atomic_stage *stage)
{
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 5), *dir = malloc(pl + 1);
    if (tmp == NULL || dir == NULL) {
        free(tmp);
        free(dir);
        errno = ENOMEM;
        return fail(stage, OML_ATOMIC_CREATE, NULL);
    }
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, ".tmp", 5);
    memcpy(dir, path, pl + 1);
    int rc = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) {
        rc = fail(stage, OML_ATOMIC_CREATE, NULL);
        goto out;
    }
    int ok = 1;
    for (int i = 0; ok && i < n; i++)
        ok = oml_write_all(fd, parts[i].iov_base, parts[i].iov_len) == 0;
    ok = ok && fsync(fd) == 0;
    int e = errno;
    if (close(fd) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    errno = e;
    if (!ok) {
        rc = fail(stage, OML_ATOMIC_WRITE, tmp);
        goto out;
    }
    if (rename(tmp, path) != 0) {
        rc = fail(stage, OML_ATOMIC_RENAME, tmp);
        goto out;
    }
    if (oml_fsync_dir(dirname(dir)) != 0) {
        rc = fail(stage, OML_ATOMIC_DIR, NULL);
        goto out;
    }
    if (stage)
        *stage = OML_ATOMIC_OK;
out:
    free(tmp);
    free(dir);
    return rc;
}
