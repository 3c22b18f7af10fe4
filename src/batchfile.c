/* batchfile.c - the file of a named batch model (see batchfile.h). */
#include "batchfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <zlib.h>

#include "atomic_file.h"
#include "bytes.h"

static const char MAGIC[8] = {'O', 'M', 'L', 'D', 'M', 'D', 'L', '1'};
#define HEAD 12u /* magic, u32 meta length */

int oml_batchfile_encode(const oml_batchfile_meta *meta, const uint8_t *model, size_t len,
                         uint8_t **buf, size_t *buf_len, oml_diag *diag)
{
    char text[OML_BATCHFILE_META_MAX];
    int ml = snprintf(text, sizeof text,
                      "name=%s\nmethod=%s\nvariant=%s\ncreated_ms=%llu\njob_id=%llu\n"
                      "trained_items=%u\n",
                      meta->name, meta->method, meta->variant,
                      (unsigned long long)meta->created_ms, (unsigned long long)meta->job_id,
                      meta->trained_items);
    if (ml < 0 || (size_t)ml >= sizeof text)
        return oml_diag_set(diag, OML_EINVAL, "meta", "model metadata too long");
    size_t total = HEAD + (size_t)ml + 4 + len;
    uint8_t *b = malloc(total);
    if (b == NULL)
        return oml_diag_set(diag, OML_ENOMEM, "meta", "out of memory");
    oml_writer w = oml_writer_into(b, total);
    oml_put_bytes(&w, MAGIC, sizeof MAGIC);
    oml_put_u32(&w, (uint32_t)ml);
    oml_put_bytes(&w, text, (size_t)ml);
    oml_put_u32(&w, (uint32_t)crc32(0L, (const uint8_t *)text, (uInt)ml));
    oml_put_bytes(&w, model, len);
    *buf = b;
    *buf_len = total;
    return OML_OK;
}

/* The value of key in the meta text (n bytes), "" if it is not there. */
static void meta_get(const char *meta, size_t n, const char *key, char *out, size_t cap)
{
    size_t kl = strlen(key);
    out[0] = '\0';
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && meta[j] != '\n')
            j++;
        if (j - i > kl && memcmp(meta + i, key, kl) == 0 && meta[i + kl] == '=') {
            size_t vl = j - i - kl - 1;
            if (vl >= cap)
                vl = cap - 1;
            memcpy(out, meta + i + kl + 1, vl);
            out[vl] = '\0';
            return;
        }
        i = j + 1;
    }
}

int oml_batchfile_decode(const uint8_t *buf, size_t len, oml_batchfile_meta *meta,
                         const uint8_t **model, size_t *model_len, oml_diag *diag)
{
    if (len < HEAD + 4 || memcmp(buf, MAGIC, sizeof MAGIC) != 0)
        return oml_diag_set(diag, OML_EFORMAT, "model", "not a model file (bad magic)");
    oml_reader r = oml_reader_of(buf, len);
    r.pos = sizeof MAGIC;
    uint32_t ml = oml_get_u32(&r);
    const char *text = (const char *)oml_get_span(&r, ml);
    uint32_t crc = oml_get_u32(&r);
    if (r.bad || (uint32_t)crc32(0L, (const uint8_t *)text, ml) != crc)
        return oml_diag_set(diag, OML_EFORMAT, "model", "damaged metadata");
    char v[300];
    memset(meta, 0, sizeof *meta);
    meta_get(text, ml, "name", meta->name, sizeof meta->name);
    meta_get(text, ml, "method", meta->method, sizeof meta->method);
    meta_get(text, ml, "variant", meta->variant, sizeof meta->variant);
    meta_get(text, ml, "created_ms", v, sizeof v);
    meta->created_ms = strtoull(v, NULL, 10);
    meta_get(text, ml, "job_id", v, sizeof v);
    meta->job_id = strtoull(v, NULL, 10);
    meta_get(text, ml, "trained_items", v, sizeof v);
    meta->trained_items = (uint32_t)strtoul(v, NULL, 10);
    *model = buf + r.pos;
    *model_len = len - r.pos;
    return OML_OK;
}

int oml_batchfile_write(const char *path, const oml_batchfile_meta *meta, const uint8_t *model,
                        size_t len, oml_diag *diag)
{
    uint8_t *b;
    size_t n;
    int rc = oml_batchfile_encode(meta, model, len, &b, &n, diag);
    if (rc != OML_OK)
        return rc;
    struct iovec part = {b, n};
    enum oml_atomic_stage stage;
    /* A failed fsync of the directory leaves the file in place: not an error. */
    if (oml_atomic_write(path, &part, 1, 0640, &stage) != 0 && stage != OML_ATOMIC_DIR)
        rc = oml_diag_set(diag, OML_EIO, "path", "cannot write %s: %s", path, strerror(errno));
    free(b);
    return rc;
}

int oml_batchfile_read(const char *path, oml_batchfile_meta *meta, uint8_t **model,
                       size_t *model_len, oml_diag *diag)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return oml_diag_set(diag, OML_EIO, "path", "%s", strerror(errno));
    uint8_t *b = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 65536;
            uint8_t *nb = realloc(b, cap);
            if (nb == NULL) {
                free(b);
                fclose(f);
                return oml_diag_set(diag, OML_ENOMEM, "path", "out of memory");
            }
            b = nb;
        }
        size_t r = fread(b + n, 1, cap - n, f);
        if (r == 0)
            break;
        n += r;
    }
    fclose(f);
    const uint8_t *mb;
    size_t ml;
    int rc = oml_batchfile_decode(b, n, meta, &mb, &ml, diag);
    if (rc == OML_OK) {
        *model = malloc(ml ? ml : 1);
        if (*model == NULL) {
            rc = oml_diag_set(diag, OML_ENOMEM, "path", "out of memory");
        } else {
            memcpy(*model, mb, ml);
            *model_len = ml;
        }
    }
    free(b);
    return rc;
}
