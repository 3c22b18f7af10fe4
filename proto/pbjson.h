/* pbjson.h - protobuf messages <-> JSON, driven by protobuf-c's
 * descriptors: the HTTP/JSON API's one conversion, for every message of
 * omld.proto, so a new operation needs no JSON code of its own.
 *
 * The mapping is proto3's canonical JSON mapping, with two choices made for
 * people who type JSON by hand:
 * - names are written as omld.proto spells them (snake_case); the
 *   lowerCamelCase names of the canonical mapping are read too;
 * - every singular scalar is written, zero or not (so a client never has to
 *   tell "0" from "absent"), and repeated fields are written even when empty.
 * 64-bit integers are written as numbers (values above 2^63-1 as strings)
 * and read from numbers or decimal strings. Non-finite floats are "NaN",
 * "Infinity" and "-Infinity". bytes are base64. Enums are their value names
 * ("SIMILAR"); numbers are read too. null reads as absent.
 *
 * Two shorthands are read (never written): where an ItemRef goes, a string
 * is its id and an array its vector's values; where a Vector goes, an
 * array is its values. So a triplet may be {"anchor": "a", "positive":
 * "b", "negative": "c"} and a query {"query": [0.1, 0.2, ...]}.
 *
 * Reading is strict: an unknown field, a value of the wrong JSON type, an
 * integer out of its range or with a fraction, a string with a NUL byte,
 * bad base64, two members of one oneof, or nesting deeper than
 * OMLD_PBJSON_MAX_DEPTH is refused with the path of the offending value in
 * the RPC's own notation ("classify.features[3]", "put_items.items[0].id").
 *
 * Pure and thread-safe. */
#ifndef OMLD_PBJSON_H
#define OMLD_PBJSON_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

#include "jsonlift.h"

#define OMLD_PBJSON_MAX_DEPTH 32

typedef struct omld_pbjson_error {
    char field[256];   /* path of the offending value */
    char message[256]; /* an English sentence */
} omld_pbjson_error;

/* A message of desc built from the JSON object j; root starts every path
 * in errors (e.g. "classify"). NULL with *err filled on a refusal (or out
 * of memory). Free the result with protobuf_c_message_free_unpacked(m,
 * NULL). */
ProtobufCMessage *omld_pbjson_read(const ProtobufCMessageDescriptor *desc, const json_t *j,
                                   const char *root, omld_pbjson_error *err);

/* As omld_pbjson_read, for j parsed from lift->text (jsonlift.h): a
 * lifted array is read from lift's table where a float goes and from its
 * original text anywhere else, so the message (or the refusal) is the one
 * omld_pbjson_read gives for the JSON of the original body. lift may be
 * NULL (nothing lifted). */
ProtobufCMessage *omld_pbjson_read_lifted(const ProtobufCMessageDescriptor *desc, const json_t *j,
                                          const omld_jsonlift *lift, const char *root,
                                          omld_pbjson_error *err);

/* m as a new JSON object; NULL if out of memory. Invalid UTF-8 in a
 * string is written as U+FFFD. */
json_t *omld_pbjson_write(const ProtobufCMessage *m);

/* Base64 (RFC 4648, with padding) of n bytes: a new NUL-terminated string,
 * or NULL if out of memory. */
char *omld_base64_encode(const uint8_t *p, size_t n);

/* Decodes s (len chars, padding optional, no whitespace) into a new buffer
 * (*out, *out_len); -1 if s is not base64 or out of memory. */
int omld_base64_decode(const char *s, size_t len, uint8_t **out, size_t *out_len);

#endif
