/* dispatch.c - unpack, NUL scan, authorisation, validation, route (see
 * dispatch.h). */
#include "dispatch.h"

#include <stdio.h>
#include <string.h>

#include "local.h"
#include "wirecheck.h"

static int refuse(omld_dispatch *out, int why)
{
    out->refused = why;
    return why;
}

/* Counts, for the metrics, the limit a refused request broke. */
static void note_limits(omld_dispatch *out, const omld_op *op, const omld_limits *lim)
{
    if (op == NULL)
        return;
    out->over_batch = op->entries && op->entries(out->req) > lim->max_batch;
    out->over_k = op->k && op->k(out->req) > lim->max_k;
}

int omld_dispatch_payload(const uint8_t *p, size_t n, const omld_dispatch_in *in,
                          omld_dispatch *out)
{
    memset(out, 0, sizeof *out);
    out->req = omld__request__unpack(NULL, n, p);
    omld_reply_init(&out->reply, out->req ? out->req->request_id : 0);
    Omld__Request *req = out->req;
    if (req == NULL) {
        omld_reply_error(&out->reply, OMLD__STATUS__CODE__MALFORMED, NULL,
                         "the frame payload is not a valid Request message");
        return refuse(out, OMLD_REFUSED_MALFORMED);
    }
    /* protobuf-c keeps strings NUL-terminated without a length: an id with a
     * NUL inside would silently name another item. Refuse it by name. */
    char nul_path[128];
    if (oml_wire_find_nul_string(p, n, &omld__request__descriptor, nul_path, sizeof nul_path) == 1) {
        omld_reply_error(&out->reply, OMLD__STATUS__CODE__INVALID_ARGUMENT, nul_path,
                         "%s contains a NUL byte; ids, labels, names and tokens are text "
                         "without NUL", nul_path);
        return refuse(out, OMLD_REFUSED_NUL);
    }
    const omld_op *op = omld_op_of(req);
    if (in->auth_required && !(op && op->before_auth)) {
        if (in->rights == OMLD_RIGHTS_NONE) {
            omld_reply_error(&out->reply, OMLD__STATUS__CODE__UNAUTHENTICATED, NULL,
                             "this daemon requires a token: send an Auth request first");
            return refuse(out, OMLD_REFUSED_UNAUTHENTICATED);
        }
        if (in->rights == OMLD_RIGHTS_READ_ONLY && op && op->writes) {
            omld_reply_error(&out->reply, OMLD__STATUS__CODE__PERMISSION_DENIED, op->name,
                             "%s changes state and this connection authenticated with a "
                             "read-only token", op->name);
            return refuse(out, OMLD_REFUSED_PERMISSION);
        }
    }
    if (in->not_primary && op && op->writes && !op->replica_ok) {
        omld_reply_error(&out->reply, OMLD__STATUS__CODE__NOT_PRIMARY, op->name, "%s changes "
                         "state and this omld is a read replica: %s", op->name, in->not_primary);
        return refuse(out, OMLD_REFUSED_NOT_PRIMARY);
    }
    int route = -1;
    if (omld_validate(req, in->lim, &out->reply, &route, &out->cost) != 0) {
        note_limits(out, op, in->lim);
        return refuse(out, OMLD_REFUSED_INVALID);
    }
    if (in->draining && op->route != OMLD_ROUTE_INLINE) {
        /* Decoded after the drain began (it was buffered): refused, and
         * Health / Status still answer so the client can see why. */
        omld_reply_error(&out->reply, OMLD__STATUS__CODE__UNAVAILABLE, NULL,
                         "the daemon is draining for shutdown; retry elsewhere or later");
        return refuse(out, OMLD_REFUSED_DRAINING);
    }
    out->op = op;
    return OMLD_ROUTED;
}
