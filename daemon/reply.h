/* reply.h - one Response under construction, with the memory it points to.
 *
 * protobuf-c messages are plain structs full of pointers; a handler that
 * builds an answer allocates its repeated fields, strings and sub-messages
 * from the reply's arena, and omld_reply_free() releases all of it at once.
 * omld_reply_pack() serialises msg into one frame (4-byte big-endian length
 * + payload) ready for uv_write. Thread: a reply belongs to one thread at a
 * time; handlers on the threadpool build it, the loop thread sends it. */
#ifndef OMLD_REPLY_H
#define OMLD_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "omld.pb-c.h"

typedef struct omld_reply {
    Omld__Response msg;   /* msg.status points at status */
    Omld__Status status;
    void *_arena;         /* chunks allocated by omld_reply_alloc */
    /* Work to run once the reply is out (a recall sample, recall.h): whoever
     * sends the reply takes it; omld_reply_free drops what nobody took. */
    void *after;
    void (*after_free)(void *after);
} omld_reply;

/* Initialises an OK reply echoing request_id. Allocates nothing. */
void omld_reply_init(omld_reply *r, uint64_t request_id);
void omld_reply_free(omld_reply *r); /* accepts a zeroed reply */

/* Zeroed memory owned by the reply; NULL on OOM. */
void *omld_reply_alloc(omld_reply *r, size_t bytes);
/* A NUL-terminated copy of len bytes owned by the reply; NULL on OOM. */
char *omld_reply_strdup(omld_reply *r, const char *s, size_t len);

/* Turns the reply into an error: code, the offending field path (may be
 * NULL) and a printf message; clears any body. Returns code. */
int omld_reply_error(omld_reply *r, Omld__Status__Code code, const char *field,
                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* A printable, quoted copy of len bytes of s for messages, shortened past 40
 * bytes: bytes outside printable ASCII, quotes and backslashes become \xNN,
 * so a message naming client data is always valid UTF-8 (other languages'
 * protobuf runtimes refuse a Response whose strings are not). Returns buf. */
#define OMLD_QUOTE_CAP 176
const char *omld_reply_quote(char *buf, size_t cap, const char *s, size_t len);

/* Maps a liboml error (OML_E*) to the wire code. */
Omld__Status__Code omld_status_from_oml(int oml_err);

/* Serialises into a malloc'd frame (*out, *out_len include the 4-byte
 * header). If the payload would exceed max_payload the reply is replaced by
 * RESOURCE_EXHAUSTED first (the answer "does not fit"). 0 or -1 on OOM. */
int omld_reply_pack(omld_reply *r, uint32_t max_payload, uint8_t **out, size_t *out_len);

/* A stand-alone error frame (e.g. MALFORMED with request_id 0). */
int omld_reply_pack_error(uint64_t request_id, uint64_t model_version, Omld__Status__Code code,
                          const char *field, const char *message, uint8_t **out, size_t *out_len);

#endif
