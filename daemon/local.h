/* local.h - the operations answered on the loop thread (the INLINE rows of
 * the operation table): Status and Health here, Auth in auth.c.
 *
 * They read what the loop can read without waiting (the engine's
 * counters, the views' version, the connection's session) and change at
 * most the session. Loop thread only. */
#ifndef OMLD_LOCAL_H
#define OMLD_LOCAL_H

#include <stdint.h>

#include "engine.h"
#include "metrics.h"
#include "omld.pb-c.h"
#include "reply.h"
#include "view.h"

struct omld_tokens;

enum omld_rights {
    OMLD_RIGHTS_NONE = 0,     /* not authenticated (tokens configured) */
    OMLD_RIGHTS_READ_ONLY,
    OMLD_RIGHTS_READ_WRITE
};

/* A connection's authorisation state. */
typedef struct omld_session {
    int rights;               /* enum omld_rights */
    int failures;             /* wrong tokens so far */
    int close;                /* close once this answer is written */
    const char *peer;         /* for logs */
} omld_session;

typedef struct omld_local_ctx {
    omld_engine *engine;
    omld_views *views;
    omld_metrics *metrics;
    uint64_t start_ns;        /* process start: Status.uptime_ms */
    int draining;
    const struct omld_tokens *tokens; /* NULL or empty: no authorisation */
    omld_session *session;
} omld_local_ctx;

/* The handlers of the Status and Health rows. */
void omld_local_status(omld_local_ctx *c, const Omld__Request *req, omld_reply *r);
void omld_local_health(omld_local_ctx *c, const Omld__Request *req, omld_reply *r);

#endif
