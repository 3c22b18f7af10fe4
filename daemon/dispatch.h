/* dispatch.h - from a frame's payload to a routed request: the one path
 * every request takes, before any state is touched.
 *
 * In order: unpack the Request (MALFORMED), refuse a string with a NUL
 * inside (INVALID_ARGUMENT, naming its path: protobuf-c would cut it
 * there), find its row in the operation table, check authorisation
 * (UNAUTHENTICATED before Auth when tokens are on; PERMISSION_DENIED for a
 * writing row on a read-only connection; NOT_PRIMARY for one on a read
 * replica, naming the primary), validate (the row's check), and,
 * while draining, refuse everything but the INLINE rows (UNAVAILABLE). The
 * connection code (conn.c) and the fuzz target call the same function, so
 * the fuzzer drives the sequence the daemon runs. Pure: it reads only its
 * arguments; the caller counts the refusals it reports. Thread-safe. */
#ifndef OMLD_DISPATCH_H
#define OMLD_DISPATCH_H

#include <stddef.h>
#include <stdint.h>

#include "omld.pb-c.h"
#include "ops.h"
#include "reply.h"
#include "validate.h"

/* Why a request was refused before it was routed. */
enum omld_refusal {
    OMLD_ROUTED = 0,
    OMLD_REFUSED_MALFORMED,       /* not a Request message */
    OMLD_REFUSED_NUL,             /* a string with a NUL byte */
    OMLD_REFUSED_UNAUTHENTICATED, /* tokens are on and the connection sent no valid Auth */
    OMLD_REFUSED_PERMISSION,      /* a writing operation on a read-only connection */
    OMLD_REFUSED_INVALID,         /* its check failed (code and field in the reply) */
    OMLD_REFUSED_DRAINING,        /* decoded after the drain began */
    OMLD_REFUSED_NOT_PRIMARY      /* a writing operation on a read replica */
};

typedef struct omld_dispatch_in {
    const omld_limits *lim;
    int auth_required;            /* tokens are configured */
    int rights;                   /* enum omld_rights of the connection */
    int draining;
    const char *not_primary;      /* a read replica: why writes go elsewhere (NULL: primary) */
} omld_dispatch_in;

typedef struct omld_dispatch {
    Omld__Request *req;           /* decoded (the caller frees it), NULL if malformed */
    const omld_op *op;            /* its row (set when routed) */
    uint64_t cost;                /* entries it carries, >= 1 (set when routed) */
    int refused;                  /* enum omld_refusal */
    unsigned over_batch : 1;      /* refused: more entries than max_batch */
    unsigned over_k : 1;          /* refused: k above max_k */
    omld_reply reply;             /* refused: the answer; routed: initialised, empty */
} omld_dispatch;

/* Dispatches the payload p (n bytes) into out. Returns out->refused. The
 * caller owns out->req and out->reply (omld_reply_free) in every case. */
int omld_dispatch_payload(const uint8_t *p, size_t n, const omld_dispatch_in *in,
                          omld_dispatch *out);

#endif
