/* local.c - Status and Health, answered on the loop thread (see local.h). */
#include "local.h"

#include <string.h>

#include "server.h"

void omld_local_health(omld_local_ctx *c, const Omld__Request *req, omld_reply *r)
{
    (void)req;
    Omld__HealthResponse *h = omld_reply_alloc(r, sizeof *h);
    if (h == NULL) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
        return;
    }
    omld__health_response__init(h);
    h->live = 1;
    h->draining = c->draining != 0;
    h->ready = r->msg.model_version > 0 && !c->draining && omld_views_health(c->views, NULL, 0);
    r->msg.body_case = OMLD__RESPONSE__BODY_HEALTH;
    r->msg.health = h;
}

void omld_local_status(omld_local_ctx *c, const Omld__Request *req, omld_reply *r)
{
    (void)req;
    omld_model_stats ms;
    omld_engine_stats(c->engine, &ms);
    Omld__StatusResponse *st = omld_reply_alloc(r, sizeof *st);
    float *alpha = omld_reply_alloc(r, sizeof(float) * OML_MAX_HEADS);
    if (st == NULL || alpha == NULL) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
        return;
    }
    omld__status_response__init(st);
    st->version = (char *)OMLD_VERSION;
    st->uptime_ms = (omld_now_ns() - c->start_ns) / 1000000u;
    st->dim = (uint32_t)ms.cfg.dim;
    st->depth = (uint32_t)ms.cfg.layers;
    int heads = ms.heads < 0 ? 0 : ms.heads > OML_MAX_HEADS ? OML_MAX_HEADS : ms.heads;
    memcpy(alpha, ms.alpha, sizeof(float) * (size_t)heads);
    st->n_alpha = (size_t)heads;
    st->alpha = alpha;
    st->items = ms.items;
    st->triplets_received = omld_read(&c->metrics->triplets_received);
    st->duplicates = omld_read(&c->metrics->duplicates);
    st->triplets_applied = ms.updates;
    st->queue_depth = ms.queue_depth;
    st->snapshot_age_ms = ms.view_age_ms;
    st->model_version = ms.view_version;
    st->view_triplets = ms.view_updates;
    st->preset = omld_reply_strdup(r, ms.preset, strlen(ms.preset));
    if (st->preset == NULL) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
        return;
    }
    st->seed = ms.cfg.seed;
    st->utilisation = ms.updates ? (double)ms.utilised / (double)ms.updates : 0.0;
    st->triplet_accuracy = ms.updates ? (double)ms.satisfied / (double)ms.updates : 0.0;
    st->recent_accuracy = ms.recent_accuracy;
    st->triplets_rehearsed = ms.rehearsed;
    st->replay_triplets = ms.replay_triplets;
    if (ms.view_version > r->msg.model_version)
        r->msg.model_version = ms.view_version;
    r->msg.body_case = OMLD__RESPONSE__BODY_STATUS_INFO;
    r->msg.status_info = st;
}
