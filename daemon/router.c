/* router.c - Retrieve and Classify fanned out over shards and merged
 * (router.h). */
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

/* The merged class as the ClassifyResponse one node gives, copied into the
 * reply's arena (the shards' answers are freed before it is sent). 0 or -1. */
static int answer_class(omld_reply *rep, const oml_merged_class *mc)
{
    Omld__ClassifyResponse view;
    Omld__ClassScore sc[16], *sp[16];
    oml_merged_class_message(mc, &view, sc, sp);
    Omld__ClassifyResponse *m = omld_reply_alloc(rep, sizeof *m);
    Omld__ClassScore *c = omld_reply_alloc(rep, (view.n_scores + 1) * sizeof *c);
    Omld__ClassScore **cp = omld_reply_alloc(rep, (view.n_scores + 1) * sizeof *cp);
    if (!m || !c || !cp)
        return -1;
    *m = view;
    if ((m->label = omld_reply_strdup(rep, view.label, strlen(view.label))) == NULL)
        return -1;
    for (size_t i = 0; i < view.n_scores; i++) {
        c[i] = sc[i];
        if ((c[i].label = omld_reply_strdup(rep, sc[i].label, strlen(sc[i].label))) == NULL)
            return -1;
        cp[i] = &c[i];
    }
    m->scores = cp;
    rep->msg.classify = m;
    rep->msg.body_case = OMLD__RESPONSE__BODY_CLASSIFY;
    return 0;
}

/* One retrieve or classify over the set s: 0, or the client's code (> 0 a
 * shard's answer, < 0 transport) with err. */
static int ask(omld_router *r, omlc_shards *s, const Omld__Request *req, omld_reply *rep,
               Omld__Response **resp, omlc_error *err)
{
    Omld__RetrieveRequest body = OMLD__RETRIEVE_REQUEST__INIT;
    int has_k;
    uint32_t k;
    if (req->body_case == OMLD__REQUEST__BODY_RETRIEVE) {
        body = *req->retrieve; /* its k is set for the shards */
        has_k = body.k_opt_case == OMLD__RETRIEVE_REQUEST__K_OPT_K;
        k = body.k;
    } else { /* classify: its query, k and metadata; the neighbours, not a page */
        const Omld__ClassifyRequest *m = req->classify;
        body.query = m->query;
        body.n_metadata = m->n_metadata;
        body.metadata = m->metadata;
        has_k = m->k_opt_case == OMLD__CLASSIFY_REQUEST__K_OPT_K;
        k = m->k;
    }
    if (!has_k)
        k = r->default_k;
    uint64_t version = 0;
    int rc;
    if (req->body_case == OMLD__REQUEST__BODY_RETRIEVE) {
        oml_merged_hit *hits = calloc(k ? k : 1, sizeof *hits);
        size_t n = 0;
        rc = hits ? omlc_shards_merge(s, &body, k, hits, &n, &version, resp, err) : OMLC_ENOMEM;
        if (rc == 0 && answer(rep, hits, n) != 0)
            rc = OMLC_ENOMEM;
        free(hits);
    } else {
        oml_merged_class mc;
        rc = omlc_shards_vote(s, &body, k, &mc, &version, resp, err);
        if (rc == 0 && answer_class(rep, &mc) != 0)
            rc = OMLC_ENOMEM;
    }
    if (rc == 0)
        rep->msg.model_version = version;
    return rc;
}

static void work(uv_work_t *w)
{
    job *j = w->data;
    omld_router *r = j->r;
    omlc_error err;
    omlc_shards *s = take(r, &err);
    if (s == NULL) {
        omld_reply_error(j->reply, OMLD__STATUS__CODE__UNAVAILABLE, NULL, "router: the shards "
                         "cannot be reached: %s", err.message);
        return;
    }
    Omld__Response **resp = calloc(omlc_shards_count(s), sizeof *resp);
    int rc = resp ? ask(r, s, j->req, j->reply, resp, &err) : OMLC_ENOMEM;
    if (rc > 0) /* a shard's answer: its code and message */
        omld_reply_error(j->reply, (Omld__Status__Code)rc, err.field[0] ? err.field : NULL,
                         "%s", err.message);
    else if (rc < 0)
        omld_reply_error(j->reply, OMLD__STATUS__CODE__UNAVAILABLE, NULL, "router: %s",
                         rc == OMLC_ENOMEM ? "out of memory" : err.message);
    if (resp)
        omlc_shards_free_answers(resp, omlc_shards_count(s));
    free(resp);
    if (rc < 0 && rc != OMLC_ENOMEM)
        omlc_shards_close(s); /* a broken connection: the map is read again next time */
    else
        give_back(r, s);
}

static void after(uv_work_t *w, int status)
{
    job *j = w->data;
    if (status != 0)
        omld_reply_error(j->reply, OMLD__STATUS__CODE__INTERNAL, NULL, "the query was "
                         "cancelled");
    j->done(j->ctx, j->reply);
    free(j);
}

int omld_router_forward(void *ctl, const Omld__Request *req, omld_reply *now,
                        void (*done)(void *ctx, omld_reply *reply), void *ctx)
{
    omld_router *r = ctl;
    int classify = req->body_case == OMLD__REQUEST__BODY_CLASSIFY;
    if (req->body_case != OMLD__REQUEST__BODY_RETRIEVE && !classify) {
        omld_reply_error(now, OMLD__STATUS__CODE__UNAVAILABLE, NULL, "this omld is a router "
                         "(option router): it answers retrieve and classify (fanned out over "
                         "%u shards), status and health; send other requests to a replica, "
                         "writes to the primary", r->shards);
        return 0;
    }
    int named = classify ? req->classify->model_opt_case == OMLD__CLASSIFY_REQUEST__MODEL_OPT_MODEL
                         : req->retrieve->model_opt_case == OMLD__RETRIEVE_REQUEST__MODEL_OPT_MODEL;
    const char *model = classify ? req->classify->model : req->retrieve->model;
    if (named && model[0] && strcmp(model, "live") != 0) {
        omld_reply_error(now, OMLD__STATUS__CODE__INVALID_ARGUMENT,
                         classify ? "classify.model" : "retrieve.model",
                         "a router answers from the live model only");
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
    LOG_INFO("router", "routing retrieve and classify over %u shards of %s", r->shards, r->url);
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
