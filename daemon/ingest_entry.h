/* ingest_entry.h - one Redis Stream entry (its field/value pairs) as the
 * Request it stands for: the entry layout of the Redis consumer
 * (ingest.h), apart from Redis and the loop so that it is tested alone.
 *
 * Entry layout (field -> value; other fields are ignored):
 *   type=triplet   anchor, positive, negative: stored item ids; weight
 *                  (optional): a number
 *   type=pair      a, b: ids; relation: similar | dissimilar
 *   type=item      id; label (optional); features: a JSON array of
 *                  numbers, or features_f32: the float32 values, little-
 *                  endian bytes; meta.KEY (any number, optional): the
 *                  item's metadata entry KEY = the value, in the entry's
 *                  order, as PutItems' metadata (bounded and checked by the
 *                  daemon exactly as an RPC put's: a refusal names
 *                  put_items.items[0].metadata[i])
 * Every request carries the idempotency key "redis:STREAM:ENTRY-ID". Pure. */
#ifndef OMLD_INGEST_ENTRY_H
#define OMLD_INGEST_ENTRY_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

/* The field prefix of an item's metadata entries. */
#define OMLD_INGEST_META_PREFIX "meta."

/* The entry `id` of `stream` (fv: its field/value array as XREADGROUP
 * answers it) as a Request payload (*out, malloc'd, *out_len bytes; at
 * most max_frame): 0, or -1 with why naming what is wrong with the entry
 * (a missing field, a bad vector, an unknown type, meta.* on an entry that
 * is not an item, a NUL byte in a metadata key or value, too large). */
int omld_ingest_entry_request(const char *stream, const char *id, const redisReply *fv,
                              uint32_t max_frame, uint8_t **out, size_t *out_len, char *why,
                              size_t whylen);

/* The value of field `name` among the field/value pairs of fv (a Redis
 * array answer such as an entry's fields or an XINFO record), or NULL. */
char *omld_ingest_field_str(const redisReply *fv, const char *name);

#endif
