/* frame.c - the incremental frame reader (see frame.h).
 *
 * DESIGN
 * Owns one growable byte buffer. Offsets into it, always in this order:
 *     0 <= _pos <= _scan <= _len <= _cap
 *   [0, _pos)      frames next() has returned; dropped by the next feed()
 *   [_pos, _scan)  complete frames, every header checked, not yet returned
 *   [_scan, _len)  the tail: one incomplete frame, never a complete one;
 *                  if its header is complete it is <= _max, unless _bad
 * feed() compacts the consumed prefix once (one memmove per read, not one
 * per frame, as in sudo logsrvd), then walks the frame headers across the
 * old tail and the new bytes *before* copying, to learn how much to keep:
 * everything, or everything up to and including the first header over
 * _max. So an allocation is never sized by an announced length, only by
 * bytes that really arrived, and the tail stays <= _max + 4 bytes.
 * next() only reads headers that feed() already checked, so it needs no
 * allocation and answers the same whatever the chunking was.
 * Thread: none of its own; the caller serialises access. */
#include "frame.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"

/* Tests route allocations through a counting hook (tests/unit/test_frame.c). */
#ifndef OML_FRAME_REALLOC
#define OML_FRAME_REALLOC realloc
#endif

#define FRAME_MIN_CAP 256u
/* A buffer grown past this is released once it is empty again, so a single
 * large frame does not pin memory on an idle connection. */
#define FRAME_KEEP_CAP (64u * 1024u)

static uint32_t load_be32(const uint8_t p[4])
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

void oml_frame_write_header(uint8_t out[4], uint32_t len)
{
    out[0] = (uint8_t)(len >> 24);
    out[1] = (uint8_t)(len >> 16);
    out[2] = (uint8_t)(len >> 8);
    out[3] = (uint8_t)len;
}

int oml_frame_reader_init(oml_frame_reader *r, uint32_t max_frame_bytes)
{
    memset(r, 0, sizeof *r);
    if (max_frame_bytes > OML_FRAME_MAX_LIMIT)
        return OML_EINVAL;
    r->_max = max_frame_bytes;
    return OML_OK;
}

void oml_frame_reader_free(oml_frame_reader *r)
{
    if (!r)
        return;
    free(r->_buf);
    memset(r, 0, sizeof *r);
}

size_t oml_frame_reader_buffered(const oml_frame_reader *r)
{
    return r->_len - r->_pos;
}

/* Byte i of the virtual stream "tail [_scan, _len) then buf[0, n)". */
static uint8_t stream_byte(const oml_frame_reader *r, const uint8_t *buf, size_t i)
{
    size_t old = r->_len - r->_scan;
    return i < old ? r->_buf[r->_scan + i] : buf[i - old];
}

int oml_frame_reader_feed(oml_frame_reader *r, const void *buf, size_t n)
{
    if (r->_err)
        return r->_err;

    /* Compact: drop the frames already returned, once per feed. */
    if (r->_pos > 0) {
        memmove(r->_buf, r->_buf + r->_pos, r->_len - r->_pos);
        r->_len -= r->_pos;
        r->_scan -= r->_pos;
        r->_pos = 0;
    }
    if (r->_len == 0 && r->_cap > FRAME_KEEP_CAP) {
        free(r->_buf);
        r->_buf = NULL;
        r->_cap = 0;
    }
    if (r->_bad || n == 0)
        return OML_OK; /* nothing after an oversized header is ever read */

    /* Walk the headers of the tail + buf without copying: `done` ends the
     * last complete frame, `keep` is how much of the stream to store. */
    const uint8_t *in = buf;
    size_t old = r->_len - r->_scan;
    size_t total = old + n, done = 0, keep = total;
    int bad = 0;
    while (total - done >= OML_FRAME_HEADER_BYTES) {
        uint8_t h[4];
        for (int i = 0; i < 4; i++)
            h[i] = stream_byte(r, in, done + (size_t)i);
        uint32_t len = load_be32(h);
        if (len > r->_max) {
            keep = done + OML_FRAME_HEADER_BYTES; /* refused before allocating */
            bad = 1;
            break;
        }
        if (total - done - OML_FRAME_HEADER_BYTES < len)
            break;
        done += OML_FRAME_HEADER_BYTES + len;
    }
    /* The tail holds no complete frame and no unchecked complete header, so
     * the first header in it completes (if at all) inside buf: keep >= old. */
    size_t take = keep - old;

    size_t need = r->_len + take;
    if (need > r->_cap) {
        size_t cap = r->_cap ? r->_cap : FRAME_MIN_CAP;
        while (cap < need)
            cap = cap > SIZE_MAX / 2 ? need : cap * 2;
        uint8_t *nb = OML_FRAME_REALLOC(r->_buf, cap);
        if (!nb)
            return OML_ENOMEM;
        r->_buf = nb;
        r->_cap = cap;
    }
    memcpy(r->_buf + r->_len, in, take);
    r->_len += take;
    r->_scan += done;
    r->_bad = bad;
    return OML_OK;
}

int oml_frame_reader_next(oml_frame_reader *r, const uint8_t **frame, size_t *frame_len)
{
    if (r->_err)
        return r->_err;
    if (r->_pos == r->_scan) {
        /* No complete frame left; an oversized header, if any, is here. */
        if (r->_bad) {
            r->_err = OML_EFULL;
            return r->_err;
        }
        return 0;
    }
    uint32_t len = load_be32(r->_buf + r->_pos);
    *frame = r->_buf + r->_pos + OML_FRAME_HEADER_BYTES;
    *frame_len = len;
    r->_pos += OML_FRAME_HEADER_BYTES + (size_t)len;
    return 1;
}
