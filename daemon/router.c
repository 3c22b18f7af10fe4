/* router.c - Retrieve fanned out over shards and merged (router.h). */
#include "router.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "omlclient.h"

#define POOL_MAX 16
#define SHARD_TIMEOUT_MS 10000

struct omld_router {
    uv_loop_t *loop;
    char url[OMLD_STR_MAX];
    uint32_t shards;
    uint32_t default_k;
    pthread_mutex_t mu;          /* guards pool */
    omlc_shards *pool[POOL_MAX];
    int n_pool;
};

typedef struct job {
    uv_work_t work;
    omld_router *r;
    const Omld__Request *req;    /* borrowed until done */
    omld_reply *reply;
    void (*done)(void *ctx, omld_reply *reply);
    void *ctx;
} job;

/* A set of shard connections: pooled, or new from the shard map. */
static omlc_shards *take(omld_router *r, omlc_error *err)
{
    omlc_shards *s = NULL;
    pthread_mutex_lock(&r->mu);
    if (r->n_pool > 0)
        s = r->pool[--r->n_pool];
    pthread_mutex_unlock(&r->mu);
    if (s == NULL && omlc_shards_connect_redis(&s, r->url, r->shards, SHARD_TIMEOUT_MS, err) != 0)
        return NULL;
    return s;
}

static void give_back(omld_router *r, omlc_shards *s)
{
    pthread_mutex_lock(&r->mu);
    if (r->n_pool < POOL_MAX) {
        r->pool[r->n_pool++] = s;
        s = NULL;
    }
    pthread_mutex_unlock(&r->mu);
    omlc_shards_close(s);
}

/* The merged hits as a RetrieveResponse in the reply's arena. 0 or -1. */
static int answer(omld_reply *rep, const oml_merged_hit *hits, size_t n)
{
    Omld__RetrieveResponse *m = omld_reply_alloc(rep, sizeof *m);
    Omld__Hit *h = omld_reply_alloc(rep, (n + 1) * sizeof *h);
    Omld__Hit **hp = omld_reply_alloc(rep, (n + 1) * sizeof *hp);
    if (!m || !h || !hp)
        return -1;
    omld__retrieve_response__init(m);
    for (size_t i = 0; i < n; i++) {
        omld__hit__init(&h[i]);
        if ((h[i].id = omld_reply_strdup(rep, hits[i].id, strlen(hits[i].id))) == NULL)
            return -1;
        if (hits[i].label) {
            h[i].label_opt_case = OMLD__HIT__LABEL_OPT_LABEL;
            if ((h[i].label = omld_reply_strdup(rep, hits[i].label, strlen(hits[i].label))) == NULL)
                return -1;
        }
        h[i].score = hits[i].score;
        h[i].similarity = hits[i].similarity;
        hp[i] = &h[i];
    }
    m->n_hits = n;
    m->hits = hp;
    rep->msg.retrieve = m;
    rep->msg.body_case = OMLD__RESPONSE__BODY_RETRIEVE;
    return 0;
}

static void work(uv_work_t *w)
{
    job *j = w->data;
    omld_router *r = j->r;
    const Omld__RetrieveRequest *m = j->req->retrieve;
    uint32_t k = m->k_opt_case == OMLD__RETRIEVE_REQUEST__K_OPT_K ? m->k : r->default_k;
    omlc_error err;
    omlc_shards *s = take(r, &err);
    if (s == NULL) {
        omld_reply_error(j->reply, OMLD__STATUS__CODE__UNAVAILABLE, NULL, "router: the shards "
                         "cannot be reached: %s", err.message);
        return;
    }
    Omld__RetrieveRequest body = *m; /* its k is set for the shards */
    Omld__Response **resp = calloc(omlc_shards_count(s), sizeof *resp);
    oml_merged_hit *hits = calloc(k ? k : 1, sizeof *hits);
    size_t n = 0;
    uint64_t version = 0;
    int rc = resp && hits ? omlc_shards_merge(s, &body, k, hits, &n, &version, resp, &err)
                          : OMLC_ENOMEM;
    if (rc == 0 && answer(j->reply, hits, n) != 0)
        rc = OMLC_ENOMEM;
    if (rc == 0)
        j->reply->msg.model_version = version;
    else if (rc > 0) /* a shard's answer: its code and message */
        omld_reply_error(j->reply, (Omld__Status__Code)rc, err.field[0] ? err.field : NULL,
                         "%s", err.message);
    else
        omld_reply_error(j->reply, OMLD__STATUS__CODE__UNAVAILABLE, NULL, "router: %s",
                         rc == OMLC_ENOMEM ? "out of memory" : err.message);
    if (resp)
        omlc_shards_free_answers(resp, omlc_shards_count(s));
    free(resp);
    free(hits);
    if (rc < 0 && rc != OMLC_ENOMEM)
        omlc_shards_close(s); /* a broken connection: the map is read again next time */
    else
        give_back(r, s);
}

static void after(uv_work_t *w, int status)
{
    job *j = w->data;
    if (status != 0)
        omld_reply_error(j->reply, OMLD__STATUS__CODE__INTERNAL, NULL, "the retrieval was "
                         "cancelled");
    j->done(j->ctx, j->reply);
    free(j);
}

int omld_router_forward(void *ctl, const Omld__Request *req, omld_reply *now,
                        void (*done)(void *ctx, omld_reply *reply), void *ctx)
{
    omld_router *r = ctl;
    if (req->body_case != OMLD__REQUEST__BODY_RETRIEVE) {
        omld_reply_error(now, OMLD__STATUS__CODE__UNAVAILABLE, NULL, "this omld is a router "
                         "(option router): it answers retrieve (fanned out over %u shards), "
                         "status and health; send other requests to a replica, writes to the "
                         "primary", r->shards);
        return 0;
    }
    const Omld__RetrieveRequest *m = req->retrieve;
    if (m->model_opt_case == OMLD__RETRIEVE_REQUEST__MODEL_OPT_MODEL && m->model[0] &&
        strcmp(m->model, "live") != 0) {
        omld_reply_error(now, OMLD__STATUS__CODE__INVALID_ARGUMENT, "retrieve.model",
                         "a router retrieves from the live model only");
        return 0;
    }
    job *j = calloc(1, sizeof *j);
    omld_reply *reply = calloc(1, sizeof *reply);
    if (j == NULL || reply == NULL) {
        free(j);
        free(reply);
        omld_reply_error(now, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
        return 0;
    }
    omld_reply_init(reply, req->request_id);
    *j = (job){.r = r, .req = req, .reply = reply, .done = done, .ctx = ctx};
    j->work.data = j;
    if (uv_queue_work(r->loop, &j->work, work, after) != 0) {
        free(j);
        omld_reply_free(reply);
        free(reply);
        omld_reply_error(now, OMLD__STATUS__CODE__INTERNAL, NULL, "could not queue the request");
        return 0;
    }
    return 1;
}

int omld_router_create(omld_router **out, uv_loop_t *loop, const omld_config *cfg, char *err,
                       size_t errlen)
{
    *out = NULL;
    if (cfg->router[0] == '\0')
        return 0;
    omld_router *r = calloc(1, sizeof *r);
    if (r == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    r->loop = loop;
    snprintf(r->url, sizeof r->url, "%s", cfg->router);
    r->shards = (uint32_t)cfg->router_shards;
    r->default_k = (uint32_t)cfg->default_k;
    pthread_mutex_init(&r->mu, NULL);
    LOG_INFO("router", "routing retrieve over %u shards of %s", r->shards, r->url);
    *out = r;
    return 0;
}

void omld_router_stop(omld_router *r)
{
    if (r == NULL)
        return;
    for (int i = 0; i < r->n_pool; i++)
        omlc_shards_close(r->pool[i]);
    pthread_mutex_destroy(&r->mu);
    free(r);
}
