/* ops.h - the operation table: one row for every request kind of
 * proto/omld.proto.
 *
 * A row says what a request is: its name (the proto field, used in errors,
 * auth refusals and metric labels), where it runs (its route), whether it
 * changes state (refused to read-only tokens) and needs a published model
 * view, its size and k for the limits, the size bound of its answer, the
 * check that validates it and the handler that answers it. Validation
 * (validate.c), dispatch (dispatch.c), the connection code (conn.c), the
 * learner (apply.c), the query pool (query.c), the trainer (trainer.c) and
 * the fuzz target all read this table; none of them decides what a request
 * is by itself. Adding an operation: a field in omld.proto, a row here, its
 * check (validate.c) and its handler (test_ops fails until the row exists).
 * Immutable; thread-safe. */
#ifndef OMLD_OPS_H
#define OMLD_OPS_H

#include <stdint.h>

#include "omld.pb-c.h"
#include "reply.h"

struct omld_engine;
struct omld_view;
struct omld_query_ctx;
struct omld_trainer;
struct omld_local_ctx;
struct omld_limits;

/* Where a request runs. */
enum omld_route {
    OMLD_ROUTE_MUTATION = 0, /* the learner's queue (engine.c, apply.c): logged, in order */
    OMLD_ROUTE_QUERY,        /* the threadpool, against a refcounted view (query.c) */
    OMLD_ROUTE_INLINE,       /* answered on the loop thread (local.c, auth.c) */
    OMLD_ROUTE_ADMIN,        /* the threadpool, the trainer and model registry (trainer.c) */
    OMLD_ROUTE_CONTROL       /* the loop's replication control (promote_replica.c), answered when done */
};

/* The sizes an answer bound is computed from (the live model's shape). */
typedef struct omld_answer_dims {
    uint64_t dim, heads, emb, default_k;
    uint64_t meta; /* an item's metadata at its largest, on the wire */
} omld_answer_dims;

typedef struct omld_op {
    const char *name;           /* the proto field: "put_items" */
    int body;                   /* Omld__Request__BodyCase */
    enum omld_route route;
    unsigned writes : 1;        /* changes state: refused to read-only tokens */
    unsigned needs_model : 1;   /* answered from a published view (none yet: UNAVAILABLE) */
    unsigned before_auth : 1;   /* allowed before the connection authenticated (Auth) */
    unsigned replica_ok : 1;    /* writes, but a read replica takes it (promote_replica) */
    int metric;                 /* per-kind query metrics (enum omld_query_kind), or -1 */
    /* Entries the request carries (items, ids, triplets, pairs), for
     * max_batch and the learner's queue cost; NULL: 1. */
    uint64_t (*entries)(const Omld__Request *req);
    /* The k the request asks for (0: the default), for max_k; NULL: none. */
    uint32_t (*k)(const Omld__Request *req);
    /* An upper bound of the answer's payload beyond the envelope, before
     * the frame cap; NULL: the envelope alone. */
    uint64_t (*answer)(const Omld__Request *req, const omld_answer_dims *d);
    /* Stateless validation (validate.c): 0, or the code with r filled.
     * NULL: nothing to check beyond the body being set. */
    int (*check)(const Omld__Request *req, const struct omld_limits *lim, omld_reply *r);
    /* The handler, by route. A MUTATION handler returns 1 if it changed
     * state (then the request is logged). Checkpoint has none: the engine
     * answers it after the group's commit. */
    union {
        int (*apply)(struct omld_engine *e, const Omld__Request *req, omld_reply *r);
        void (*query)(const struct omld_query_ctx *q, struct omld_view *v,
                      const Omld__Request *req, omld_reply *r);
        void (*admin)(struct omld_trainer *t, const Omld__Request *req, omld_reply *r);
        void (*local)(struct omld_local_ctx *c, const Omld__Request *req, omld_reply *r);
        /* CONTROL: 1 when taken (done(ctx, reply) is called later, on the
         * loop, with an owned reply), 0 when answered at once in now. */
        int (*control)(void *ctl, const Omld__Request *req, omld_reply *now,
                       void (*done)(void *ctx, omld_reply *reply), void *ctx);
    } handle;
} omld_op;

/* The row of a body case, or NULL (not set, or unknown to this daemon). */
const omld_op *omld_op_find(int body_case);

/* The row of req's body, or NULL. */
static inline const omld_op *omld_op_of(const Omld__Request *req)
{
    return req ? omld_op_find((int)req->body_case) : NULL;
}

/* Every row, in proto order (n of them). */
const omld_op *omld_ops(int *n);

/* The answer bound of req (op's row): envelope + op->answer, capped at
 * cap (a frame: a larger answer is refused instead). */
uint64_t omld_op_answer_bound(const omld_op *op, const Omld__Request *req,
                              const omld_answer_dims *d, uint64_t cap);

#endif
