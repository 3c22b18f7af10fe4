/* testutil.c - temp files and whole-file I/O for the unit tests. */
#include "testutil.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rng.h"

int oml_test_tmpfile(char *buf, size_t cap)
{
    const char *dir = getenv("TMPDIR");
    if (snprintf(buf, cap, "%s/omltest-XXXXXX", dir ? dir : "/tmp") >= (int)cap)
        return -1;
    int fd = mkstemp(buf);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

int oml_test_tmpdir(char *buf, size_t cap, const char *name)
{
    const char *dir = getenv("TMPDIR");
    if (snprintf(buf, cap, "%s/%s.XXXXXX", dir && *dir ? dir : "/tmp", name) >= (int)cap)
        return -1;
    return mkdtemp(buf) ? 0 : -1;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

int oml_test_rmtree(const char *dir)
{
    return nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

unsigned char *oml_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf)
        *len = (size_t)n;
    return buf;
}

int oml_test_write_file(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    int ok = fwrite(buf, 1, len, f) == len;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

oml_snapshot *oml_test_snapshot(int32_t layers, int32_t dim, int32_t hidden, int32_t emb,
                                const float *p, const float *alpha, uint64_t seed)
{
    oml_config c;
    if (oml_config_preset(&c, "paper", dim) != OML_OK)
        return NULL;
    c.layers = layers;
    c.hidden = hidden;
    c.emb = emb;
    oml_net_layout lay;
    oml_net_layout_init(&lay, &c);
    float *params = calloc(lay.count, sizeof *params);
    if (params == NULL)
        return NULL;
    if (p != NULL) {
        memcpy(params, p, lay.count * sizeof *params);
    } else {
        oml_rng r;
        oml_rng_seed(&r, seed);
        for (size_t i = (size_t)lay.dim; i < lay.count; i++) /* mu stays 0 */
            params[i] = oml_rng_normal(&r);
    }
    oml_snapshot *s = oml_snapshot_create(&c, params, alpha, 1, 0);
    free(params);
    return s;
}
