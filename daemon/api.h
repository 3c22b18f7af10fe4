/* api.h - what the HTTP/JSON API (api.c) shares beyond the HTTP server: the
 * operations it serves and the conversion of a request body into the
 * Request payload the RPC takes, which the request fuzz target drives too. */
#ifndef OMLD_API_H
#define OMLD_API_H

#include <stddef.h>
#include <stdint.h>

#include "ops.h"

/* Why a body was refused before it reached the RPC: a Status.Code, the
 * field path and an English sentence. */
typedef struct omld_api_refusal {
    int code;
    char field[256];
    char message[320];
} omld_api_refusal;

/* The row /v1/NAME serves (name is len bytes), or NULL: every row but
 * Auth (an HTTP request authenticates with its bearer token). */
const omld_op *omld_api_op(const char *name, size_t len);

/* The Request payload (*out, malloc'd; *out_len bytes) for op from a JSON
 * body of n bytes (n == 0 reads as {}): 0, or -1 with *why (MALFORMED: not
 * JSON; INVALID_ARGUMENT: a value that does not fit the message, naming its
 * path; FRAME_TOO_LARGE: above max_frame once packed). Long arrays of
 * numbers (feature vectors) are read by proto/jsonlift.c, the rest by
 * jansson. Pure. */
int omld_api_request(const omld_op *op, const char *body, size_t n, uint32_t max_frame,
                     uint8_t **out, size_t *out_len, omld_api_refusal *why);

/* omld_api_request with every value read by jansson (no fast path for
 * arrays of numbers, proto/jsonlift.h): the reference the request fuzz
 * target holds the fast path to, byte for byte and refusal for refusal. */
int omld_api_request_plain(const omld_op *op, const char *body, size_t n, uint32_t max_frame,
                           uint8_t **out, size_t *out_len, omld_api_refusal *why);

#endif
