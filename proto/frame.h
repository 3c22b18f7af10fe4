/* frame.h - the omld frame codec: a pure, incremental reader of
 * length-prefixed frames, shared by the daemon and the client.
 *
 * A frame is a 4-byte big-endian payload length N followed by N payload
 * bytes (one protobuf Request or Response; see omld.proto). The reader does
 * no I/O and knows nothing of protobuf: the caller feeds it whatever bytes
 * arrived, in chunks of any size, and takes out whole frames:
 *
 *     oml_frame_reader r;
 *     oml_frame_reader_init(&r, max_frame_bytes);
 *     on every read:   if (oml_frame_reader_feed(&r, buf, n) < 0) -> close
 *                      while ((rc = oml_frame_reader_next(&r, &p, &len)) == 1)
 *                          handle(p, len);
 *                      if (rc < 0) -> answer FRAME_TOO_LARGE, close
 *     at the end:      oml_frame_reader_free(&r);
 *
 * A stream split across any byte boundaries gives the same frames and the
 * same error at the same place as the stream fed whole.
 *
 * Bounds: a length above max_frame_bytes is refused from the 4 header bytes
 * alone, before anything is allocated for it, and no byte after such a
 * header is ever buffered. So the incomplete frame at the tail never holds
 * more than max_frame_bytes + 4 bytes. Complete frames stay buffered until
 * next() takes them; a caller that stops calling next() (backpressure)
 * should stop feeding too. oml_frame_reader_buffered() reports the total.
 *
 * Thread: a reader belongs to one thread at a time; no global state. */
#ifndef OML_FRAME_H
#define OML_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define OML_FRAME_HEADER_BYTES 4u
/* Default payload limit of the daemon and client (4 MiB), as in omld.proto. */
#define OML_FRAME_DEFAULT_MAX (4u * 1024u * 1024u)
/* Largest max_frame_bytes a reader accepts (1 GiB): far above any sane
 * setting, and below protobuf's 2 GiB message limit. */
#define OML_FRAME_MAX_LIMIT (1u << 30)

/* Caller-owned storage; the _fields are private. A zeroed struct is a valid
 * argument for oml_frame_reader_free(). */
typedef struct oml_frame_reader {
    uint8_t *_buf;            /* owned; [_pos, _len) are unconsumed bytes */
    size_t _cap;              /* bytes allocated at _buf */
    size_t _len;              /* bytes stored */
    size_t _pos;              /* start of the first frame next() has not returned */
    size_t _scan;             /* start of the first frame not known to be complete */
    uint32_t _max;            /* max payload bytes */
    int _bad;                 /* a header over _max is stored at _scan; input after it is dropped */
    int _err;                 /* sticky error once next() has reported it */
} oml_frame_reader;

/* Prepares r for payloads of at most max_frame_bytes (0 allows only empty
 * frames). Allocates nothing. Returns 0, or OML_EINVAL if max_frame_bytes >
 * OML_FRAME_MAX_LIMIT (r is then left zeroed). */
int oml_frame_reader_init(oml_frame_reader *r, uint32_t max_frame_bytes);

/* Appends n bytes from buf (borrowed; may be NULL when n == 0) and first
 * compacts away the frames next() already returned, which invalidates every
 * frame pointer next() gave out. Bytes after an oversized header are
 * dropped, not buffered. Returns 0, OML_ENOMEM (nothing of buf was taken;
 * the reader is unchanged apart from compaction), or the sticky error if
 * next() has already reported one. */
int oml_frame_reader_feed(oml_frame_reader *r, const void *buf, size_t n);

/* Takes the next complete frame: returns 1 and sets *frame (borrowed, valid
 * until the next feed() or free(); not NUL-terminated; non-NULL even when
 * *frame_len == 0) and *frame_len; returns 0 if more bytes are needed; or
 * OML_EFULL if the next header announces more than max_frame_bytes. The
 * error is sticky: every later next() and feed() returns it. Out-parameters
 * are written only when 1 is returned. */
int oml_frame_reader_next(oml_frame_reader *r, const uint8_t **frame, size_t *frame_len);

/* Bytes buffered and not yet returned by next() (complete frames + tail). */
size_t oml_frame_reader_buffered(const oml_frame_reader *r);

/* Releases the buffer and zeroes r; accepts a zeroed reader. */
void oml_frame_reader_free(oml_frame_reader *r);

/* Writes the 4-byte big-endian header of a len-byte payload into out. */
void oml_frame_write_header(uint8_t out[4], uint32_t len);

#endif
