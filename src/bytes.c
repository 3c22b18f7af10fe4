/* bytes.c - the little-endian byte cursor (see bytes.h). On a
 * little-endian host every conversion is a memcpy; a big-endian host swaps
 * word by word. */
#include "bytes.h"

#include <stdlib.h>
#include <zlib.h>

#include "err.h"

int oml_encode_with_crc32(void (*body)(const void *obj, oml_writer *w), const void *obj,
                          uint8_t **buf, size_t *len)
{
    oml_writer w = oml_writer_counting();
    body(obj, &w); /* sizing pass */
    size_t n = w.pos + sizeof(uint32_t);
    uint8_t *b = malloc(n);
    if (b == NULL)
        return OML_ENOMEM;
    w = oml_writer_into(b, n);
    body(obj, &w);
    oml_put_u32(&w, (uint32_t)crc32(0L, b, (uInt)w.pos));
    *buf = b;
    *len = n;
    return OML_OK;
}

void oml_put_bytes(oml_writer *w, const void *v, size_t n)
{
    if (w->p != NULL && n > 0) {
        if (w->bad || w->cap - w->pos < n) {
            w->bad = 1;
            return;
        }
        memcpy(w->p + w->pos, v, n);
    }
    w->pos += n;
}

void oml_get_bytes(oml_reader *r, void *v, size_t n)
{
    const uint8_t *s = oml_get_span(r, n);
    if (s == NULL)
        memset(v, 0, n);
    else if (n > 0)
        memcpy(v, s, n);
}

const uint8_t *oml_get_span(oml_reader *r, size_t n)
{
    if (r->bad || r->len - r->pos < n) {
        r->bad = 1;
        return NULL;
    }
    const uint8_t *s = r->p + r->pos;
    r->pos += n;
    return s;
}

#if __BYTE_ORDER == __LITTLE_ENDIAN
void oml_put_le(oml_writer *w, const void *v, size_t width, size_t count)
{
    oml_put_bytes(w, v, width * count);
}

void oml_get_le(oml_reader *r, void *v, size_t width, size_t count)
{
    oml_get_bytes(r, v, width * count);
}
#else
/* Reverses each of count words of width bytes from src into dst. */
static void swap_words(uint8_t *dst, const uint8_t *src, size_t width, size_t count)
{
    for (size_t i = 0; i < count; i++)
        for (size_t b = 0; b < width; b++)
            dst[i * width + b] = src[i * width + width - 1 - b];
}

static int is_word(size_t width)
{
    return width == 2 || width == 4 || width == 8;
}

void oml_put_le(oml_writer *w, const void *v, size_t width, size_t count)
{
    if (!is_word(width) || w->p == NULL) {
        oml_put_bytes(w, v, width * count);
        return;
    }
    size_t n = width * count;
    if (w->bad || w->cap - w->pos < n) {
        w->bad = 1;
        return;
    }
    swap_words(w->p + w->pos, v, width, count);
    w->pos += n;
}

void oml_get_le(oml_reader *r, void *v, size_t width, size_t count)
{
    const uint8_t *s = oml_get_span(r, width * count);
    if (s == NULL)
        memset(v, 0, width * count);
    else if (is_word(width))
        swap_words(v, s, width, count);
    else
        memcpy(v, s, width * count);
}
#endif
