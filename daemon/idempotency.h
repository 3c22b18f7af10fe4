/* idempotency.h - the keys of the write requests already applied, so that
 * a retried batch is applied once (proto/omld.proto, IDEMPOTENCY).
 *
 * A bounded table: the newest `cap` keys, each with the kind of request
 * (its body case) and the two counts of its first answer (put_items:
 * created, replaced; add_triplets: accepted; add_pairs: accepted, derived
 * triplets). The oldest key is forgotten first. The learner thread owns it:
 * keys are added where requests are applied, live and on replay of the
 * write-ahead log (the key travels inside the logged request), and the
 * table is a checkpoint section, so a restart finds every key a crash did
 * not lose with its request. Encoded in arrival order, so the encoding of
 * a state is the same whatever the hash seed. Not thread-safe. */
#ifndef OMLD_IDEMPOTENCY_H
#define OMLD_IDEMPOTENCY_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "idmap.h"

typedef struct omld_idem_entry {
    char *key;          /* owned */
    uint32_t len;
    int32_t op;         /* Omld__Request__BodyCase of the request */
    uint64_t a, b;      /* its answer's counts */
} omld_idem_entry;

typedef struct omld_idem {
    uint32_t cap;              /* keys kept; 0: idempotency keys are off */
    uint32_t n, head;          /* entries, and the ring index of the oldest */
    omld_idem_entry *ring;     /* cap entries */
    oml_idmap by_key;          /* key -> ring index */
} omld_idem;

/* An empty table of at most cap keys (0: keeps none). OML_ENOMEM. */
int omld_idem_init(omld_idem *t, uint32_t cap);
void omld_idem_free(omld_idem *t); /* accepts a zeroed one */

/* The entry of key (len bytes), or NULL. */
const omld_idem_entry *omld_idem_find(const omld_idem *t, const char *key, size_t len);

/* Remembers key (copied) with its request kind and counts, forgetting the
 * oldest key when full; a key already there is left as it is. OML_ENOMEM
 * (the table is unchanged). A table of cap 0 takes nothing and returns 0. */
int omld_idem_add(omld_idem *t, const char *key, size_t len, int32_t op, uint64_t a, uint64_t b);

/* u32 count | per key, oldest first: u32 len | bytes | i32 op | u64 a | u64 b. */
int omld_idem_encode(const omld_idem *t, uint8_t **out, size_t *out_len);
/* Adds the encoded keys to t (oldest first, so the newest cap survive).
 * OML_EFORMAT with d naming what is wrong, OML_ENOMEM. */
int omld_idem_decode(omld_idem *t, const uint8_t *p, size_t n, oml_diag *d);

#endif
