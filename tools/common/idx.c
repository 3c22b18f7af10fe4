/* idx.c - IDX reader over zlib's gz* API (reads plain files as well). */
#include "idx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static int read_all(gzFile f, void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n > 0) {
        unsigned chunk = n > (1u << 30) ? (1u << 30) : (unsigned)n;
        int got = gzread(f, p, chunk);
        if (got <= 0)
            return -1;
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* Opens path and reads the header; sizes (ndim) out. */
static int open_idx(const char *path, int ndim, uint32_t *sizes, gzFile *out, oml_diag *diag)
{
    gzFile f = gzopen(path, "rb");
    if (f == NULL)
        return oml_diag_set(diag, OML_EIO, "path", "cannot open %s: %s", path, strerror(errno));
    unsigned char hdr[4 + 4 * 3];
    if (read_all(f, hdr, 4 + 4 * (size_t)ndim) != 0 || hdr[0] != 0 || hdr[1] != 0 ||
        hdr[2] != 0x08 || hdr[3] != ndim) {
        gzclose(f);
        return oml_diag_set(diag, OML_EFORMAT, "path", "%s is not an idx%d ubyte file", path, ndim);
    }
    for (int i = 0; i < ndim; i++)
        sizes[i] = be32(hdr + 4 + 4 * i);
    *out = f;
    return OML_OK;
}

int oml_idx_read_images(const char *path, float **out, int32_t *n, int32_t *dim, oml_diag *diag)
{
    uint32_t sz[3] = {0, 0, 0};
    gzFile f = NULL;
    int rc = open_idx(path, 3, sz, &f, diag);
    if (rc != OML_OK)
        return rc;
    if (sz[0] == 0 || sz[0] > (1u << 24) || sz[1] * sz[2] == 0 || sz[1] * sz[2] > (1u << 20)) {
        gzclose(f);
        return oml_diag_set(diag, OML_EFORMAT, "path", "%s: implausible sizes", path);
    }
    size_t count = (size_t)sz[0] * sz[1] * sz[2];
    unsigned char *bytes = malloc(count);
    float *img = malloc(count * sizeof(float));
    if (!bytes || !img) {
        free(bytes);
        free(img);
        gzclose(f);
        return OML_ENOMEM;
    }
    if (read_all(f, bytes, count) != 0) {
        free(bytes);
        free(img);
        gzclose(f);
        return oml_diag_set(diag, OML_EFORMAT, "path", "%s is truncated", path);
    }
    gzclose(f);
    for (size_t i = 0; i < count; i++)
        img[i] = (float)bytes[i] / 255.0f;
    free(bytes);
    *out = img;
    *n = (int32_t)sz[0];
    *dim = (int32_t)(sz[1] * sz[2]);
    return OML_OK;
}

int oml_idx_read_labels(const char *path, int32_t **out, int32_t *n, oml_diag *diag)
{
    uint32_t sz[1] = {0};
    gzFile f = NULL;
    int rc = open_idx(path, 1, sz, &f, diag);
    if (rc != OML_OK)
        return rc;
    if (sz[0] == 0 || sz[0] > (1u << 24)) {
        gzclose(f);
        return oml_diag_set(diag, OML_EFORMAT, "path", "%s: implausible size", path);
    }
    unsigned char *bytes = malloc(sz[0]);
    int32_t *lab = malloc(sz[0] * sizeof(int32_t));
    if (!bytes || !lab || read_all(f, bytes, sz[0]) != 0) {
        rc = (!bytes || !lab) ? OML_ENOMEM
                              : oml_diag_set(diag, OML_EFORMAT, "path", "%s is truncated", path);
        free(bytes);
        free(lab);
        gzclose(f);
        return rc;
    }
    gzclose(f);
    for (uint32_t i = 0; i < sz[0]; i++)
        lab[i] = bytes[i];
    free(bytes);
    *out = lab;
    *n = (int32_t)sz[0];
    return OML_OK;
}

int oml_fmnist_load(const char *dir, float **images, int32_t **labels, int32_t *n,
                    int32_t *dim, oml_diag *diag)
{
    static const char *names[2][2] = {
        {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"},
        {"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"},
    };
    float *img[2] = {NULL, NULL};
    int32_t *lab[2] = {NULL, NULL};
    int32_t ni[2] = {0, 0}, nl[2] = {0, 0}, d[2] = {0, 0};
    int rc = OML_OK;
    char path[4096];
    for (int s = 0; s < 2 && rc == OML_OK; s++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[s][0]);
        rc = oml_idx_read_images(path, &img[s], &ni[s], &d[s], diag);
        if (rc != OML_OK)
            break;
        snprintf(path, sizeof path, "%s/%s", dir, names[s][1]);
        rc = oml_idx_read_labels(path, &lab[s], &nl[s], diag);
        if (rc == OML_OK && nl[s] != ni[s])
            rc = oml_diag_set(diag, OML_EFORMAT, "path", "%s: %d labels for %d images", dir,
                              nl[s], ni[s]);
    }
    if (rc == OML_OK && d[0] != d[1])
        rc = oml_diag_set(diag, OML_EFORMAT, "path", "%s: image sizes differ", dir);
    if (rc == OML_OK) {
        size_t total = (size_t)ni[0] + (size_t)ni[1];
        float *all_img = realloc(img[0], total * (size_t)d[0] * sizeof(float));
        if (all_img != NULL)
            img[0] = all_img;
        int32_t *all_lab = realloc(lab[0], total * sizeof(int32_t));
        if (all_lab != NULL)
            lab[0] = all_lab;
        if (all_img == NULL || all_lab == NULL) {
            rc = OML_ENOMEM;
        } else {
            memcpy(all_img + (size_t)ni[0] * d[0], img[1], (size_t)ni[1] * d[0] * sizeof(float));
            memcpy(all_lab + ni[0], lab[1], (size_t)ni[1] * sizeof(int32_t));
            *images = all_img;
            *labels = all_lab;
            img[0] = NULL;
            lab[0] = NULL;
            *n = (int32_t)total;
            *dim = d[0];
        }
    }
    free(img[0]);
    free(img[1]);
    free(lab[0]);
    free(lab[1]);
    return rc;
}
