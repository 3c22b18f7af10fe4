/* bytes.h - the little-endian byte cursor every file format of omld uses
 * (checkpoints, the write-ahead log, learner and batch model files, the
 * store and closure sections).
 *
 * Numbers are stored little-endian whatever the host (<endian.h>), so a
 * file written on one machine reads on any other. An encoder writes twice
 * with one function: first with a counting writer (no buffer) to learn the
 * size, then into a buffer of that size. A reader never reads past its
 * buffer: a read that does not fit zero-fills its output, marks the reader
 * bad and leaves it bad, so a decoder may read a whole header and check
 * `bad` once. */
#ifndef OML_BYTES_H
#define OML_BYTES_H

#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct oml_writer {
    uint8_t *p;    /* NULL: only count */
    size_t cap;    /* bytes p holds */
    size_t pos;    /* bytes written (or counted) so far */
    int bad;       /* a write did not fit in cap */
} oml_writer;

typedef struct oml_reader {
    const uint8_t *p;
    size_t len, pos;
    int bad;       /* a read ran past len */
} oml_reader;

static inline oml_writer oml_writer_counting(void)
{
    return (oml_writer){0};
}

static inline oml_writer oml_writer_into(uint8_t *p, size_t cap)
{
    return (oml_writer){.p = p, .cap = cap};
}

static inline oml_reader oml_reader_of(const uint8_t *p, size_t len)
{
    return (oml_reader){.p = p, .len = len};
}

static inline size_t oml_reader_left(const oml_reader *r)
{
    return r->bad ? 0 : r->len - r->pos;
}

/* The envelope of omld's model files: body(obj, w) runs twice, a sizing
 * pass and then into a buffer of that size, which ends with the CRC-32
 * (zlib) of everything before it. *buf is malloc'd, owned by the caller.
 * 0 (OML_OK) or OML_ENOMEM. */
int oml_encode_with_crc32(void (*body)(const void *obj, oml_writer *w), const void *obj,
                          uint8_t **buf, size_t *len);

/* Bytes as they are (magic numbers, names). */
void oml_put_bytes(oml_writer *w, const void *v, size_t n);
void oml_get_bytes(oml_reader *r, void *v, size_t n);
/* n bytes in place (no copy), or NULL and bad if fewer are left. */
const uint8_t *oml_get_span(oml_reader *r, size_t n);

/* count numbers of `width` bytes each (1, 2, 4 or 8; an integer or a float
 * of that size), converted to or from little-endian. Any other width is a
 * byte string, so OML_PUT / OML_GET also take byte arrays. */
void oml_put_le(oml_writer *w, const void *v, size_t width, size_t count);
void oml_get_le(oml_reader *r, void *v, size_t width, size_t count);

/* One field by its type's size: OML_PUT(w, cfg.dim), OML_GET(r, st.updates). */
#define OML_PUT(w, v) oml_put_le((w), &(v), sizeof(v), 1)
#define OML_GET(r, v) oml_get_le((r), &(v), sizeof(v), 1)

static inline void oml_put_u32(oml_writer *w, uint32_t v) { oml_put_le(w, &v, 4, 1); }
static inline void oml_put_u64(oml_writer *w, uint64_t v) { oml_put_le(w, &v, 8, 1); }
static inline void oml_put_f32s(oml_writer *w, const float *v, size_t n) { oml_put_le(w, v, 4, n); }
static inline void oml_get_f32s(oml_reader *r, float *v, size_t n) { oml_get_le(r, v, 4, n); }

static inline uint32_t oml_get_u32(oml_reader *r)
{
    uint32_t v;
    oml_get_le(r, &v, 4, 1);
    return v;
}

static inline uint64_t oml_get_u64(oml_reader *r)
{
    uint64_t v;
    oml_get_le(r, &v, 8, 1);
    return v;
}

/* Fixed positions in a buffer the caller has sized (file headers). */
static inline void oml_le32_store(uint8_t *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, 4);
}

static inline void oml_le64_store(uint8_t *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, 8);
}

static inline uint32_t oml_le32_load(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return le32toh(v);
}

static inline uint64_t oml_le64_load(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return le64toh(v);
}

#endif
