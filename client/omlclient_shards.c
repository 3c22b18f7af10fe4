/* omlclient_shards.c - a retrieval fanned out over shards and merged
 * (omlclient.h, "shards"; omld.proto SHARDS).
 *
 * One connection per shard. A query is sent to every shard before any
 * answer is read, so the shards work at once; the answers are merged by
 * proto/shard_merge.c into what one node holding every item answers;
 * a classification is the vote over the same answers (oml_shard_classify). The
 * shard map can come from Redis, where each shard replica writes its
 * address (PREFIX:shards:N, field i). */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "omlclient.h"
#include "omlclient_int.h"
#include "shard_merge.h"

#define VERSION_TRIES 50 /* answers of different model versions: asked again, 10 ms apart */

struct omlc_shards {
    size_t n;
    omlc **c;
};

int omlc_shards_connect(omlc_shards **out, const char *const *servers, size_t n, int timeout_ms,
                        omlc_error *err)
{
    omlc__err_clear(err);
    *out = NULL;
    if (n == 0 || servers == NULL)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_shards_connect: no shard");
    omlc_shards *s = calloc(1, sizeof *s);
    if (s == NULL || (s->c = calloc(n, sizeof *s->c)) == NULL) {
        free(s);
        return omlc__err_set(err, OMLC_ENOMEM, NULL, "out of memory");
    }
    s->n = n;
    for (size_t i = 0; i < n; i++) {
        int rc = omlc_connect(&s->c[i], servers[i], timeout_ms, err);
        if (rc != 0) {
            char why[sizeof err->message];
            snprintf(why, sizeof why, "%s", err ? err->message : "");
            omlc_shards_close(s);
            return omlc__err_set(err, rc, NULL, "shard %zu of %zu (%s): %s", i, n, servers[i],
                                 why);
        }
    }
    *out = s;
    return 0;
}

/* "redis://HOST:PORT/PREFIX" into its parts. 0 or -1. */
static int parse_url(const char *url, char *host, size_t host_cap, int *port, char *prefix,
                     size_t prefix_cap)
{
    const char *p = strncmp(url, "redis://", 8) == 0 ? url + 8 : NULL;
    const char *colon = p ? strchr(p, ':') : NULL, *slash = colon ? strchr(colon, '/') : NULL;
    if (!slash || slash[1] == '\0' || (size_t)(colon - p) >= host_cap || colon == p ||
        strlen(slash + 1) >= prefix_cap)
        return -1;
    snprintf(host, host_cap, "%.*s", (int)(colon - p), p);
    char *end = NULL;
    long v = strtol(colon + 1, &end, 10);
    if (end != slash || v < 1 || v > 65535)
        return -1;
    *port = (int)v;
    snprintf(prefix, prefix_cap, "%s", slash + 1);
    return 0;
}

int omlc_shards_connect_redis(omlc_shards **out, const char *url, uint32_t n, int timeout_ms,
                              omlc_error *err)
{
    omlc__err_clear(err);
    *out = NULL;
    char host[256], prefix[200];
    int port;
    if (url == NULL || n == 0 || parse_url(url, host, sizeof host, &port, prefix, sizeof prefix))
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_shards_connect_redis: want "
                             "redis://HOST:PORT/PREFIX and n >= 1, got '%s' and %u",
                             url ? url : "(null)", n);
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisContext *rc = redisConnectWithTimeout(host, port, tv);
    if (rc == NULL || rc->err) {
        int code = omlc__err_set(err, OMLC_ECONNECT, NULL, "cannot reach Redis at %s:%d: %s",
                                 host, port, rc ? rc->errstr : "out of memory");
        redisFree(rc);
        return code;
    }
    redisSetTimeout(rc, tv);
    redisReply *r = redisCommand(rc, "HGETALL %s:shards:%u", prefix, n);
    char **addr = calloc(n, sizeof *addr);
    int code = 0;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || addr == NULL) {
        code = omlc__err_set(err, OMLC_EIO, NULL, "reading %s:shards:%u: %s", prefix, n,
                             r && r->type == REDIS_REPLY_ERROR ? r->str : rc->errstr);
    } else {
        for (size_t i = 0; i + 1 < r->elements; i += 2) {
            unsigned long f = strtoul(r->element[i]->str, NULL, 10);
            if (f < n && addr[f] == NULL)
                addr[f] = strdup(r->element[i + 1]->str);
        }
        for (uint32_t i = 0; i < n && code == 0; i++)
            if (addr[i] == NULL)
                code = omlc__err_set(err, OMLC_ECONNECT, NULL, "no shard %u of %u in %s:shards:"
                                     "%u (start a replica with shard = %u/%u)", i, n, prefix,
                                     n, i, n);
    }
    if (code == 0)
        code = omlc_shards_connect(out, (const char *const *)addr, n, timeout_ms, err);
    for (uint32_t i = 0; addr && i < n; i++)
        free(addr[i]);
    free(addr);
    freeReplyObject(r);
    redisFree(rc);
    return code;
}

void omlc_shards_close(omlc_shards *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->n; i++)
        omlc_close(s->c[i]);
    free(s->c);
    free(s);
}

/* Every shard's answer to req (in resp, n of them). 0, or the first
 * error; a transport error leaves that connection unusable. */
static int fan_out(omlc_shards *s, Omld__Request *req, Omld__Response **resp, omlc_error *err)
{
    int rc = 0;
    size_t sent = 0;
    for (; sent < s->n && rc == 0; sent++)
        rc = omlc_send(s->c[sent], req, err);
    if (rc != 0)
        sent--;
    for (size_t i = 0; i < sent; i++) { /* read every answer sent for, whatever happened */
        omlc_error e;
        int ri = omlc_recv(s->c[i], &resp[i], &e);
        if (ri == 0 && resp[i]->body_case != OMLD__RESPONSE__BODY_SHARD_RETRIEVE)
            ri = omlc__err_set(&e, OMLC_EPROTO, NULL, "shard %zu answered another operation", i);
        if (ri != 0 && rc == 0) {
            rc = ri;
            if (err)
                *err = e;
        }
    }
    return rc;
}

/* Every shard's answer to ShardRetrieve of body with k, all under one
 * model version (a publish can fall between: asked again), in resp and, as
 * their bodies, parts. 0 or the first error. */
static int ask(omlc_shards *s, Omld__RetrieveRequest *body, uint32_t k, Omld__Response **resp,
               Omld__ShardRetrieveResponse **parts, omlc_error *err)
{
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__ShardRetrieveRequest sb = OMLD__SHARD_RETRIEVE_REQUEST__INIT;
    body->k_opt_case = OMLD__RETRIEVE_REQUEST__K_OPT_K; /* the merge needs the k they ranked */
    body->k = k;
    sb.retrieve = body;
    req.body_case = OMLD__REQUEST__BODY_SHARD_RETRIEVE;
    req.shard_retrieve = &sb;
    int rc = 0, same = 0;
    for (int t = 0; t < VERSION_TRIES && rc == 0 && !same; t++) {
        omlc_shards_free_answers(resp, s->n);
        rc = fan_out(s, &req, resp, err);
        same = 1;
        for (size_t i = 1; rc == 0 && i < s->n; i++)
            same &= resp[i]->model_version == resp[0]->model_version;
        if (rc == 0 && !same)
            nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    if (rc == 0 && !same)
        rc = omlc__err_set(err, OMLD__STATUS__CODE__UNAVAILABLE, NULL, "the shards serve "
                           "different model versions (one of them is behind): retry");
    for (size_t i = 0; rc == 0 && i < s->n; i++)
        parts[i] = resp[i]->shard_retrieve;
    return rc;
}

int omlc_shards_merge(omlc_shards *s, Omld__RetrieveRequest *body, uint32_t k,
                      oml_merged_hit *hits, size_t *n_hits, uint64_t *model_version,
                      Omld__Response **resp, omlc_error *err)
{
    omlc__err_clear(err);
    *n_hits = 0;
    Omld__ShardRetrieveResponse **parts = calloc(s->n, sizeof *parts);
    if (parts == NULL)
        return omlc__err_set(err, OMLC_ENOMEM, NULL, "out of memory");
    int rc = ask(s, body, k, resp, parts, err);
    if (rc == 0) {
        char why[256];
        if (oml_shard_merge(parts, s->n, k, body->offset,
                            body->min_similarity_opt_case ==
                                OMLD__RETRIEVE_REQUEST__MIN_SIMILARITY_OPT_MIN_SIMILARITY,
                            body->min_similarity, hits, n_hits, why, sizeof why) != 0)
            rc = omlc__err_set(err, OMLC_EPROTO, NULL, "%s", why);
        else if (model_version)
            *model_version = resp[0]->model_version;
    }
    free(parts);
    return rc;
}

int omlc_shards_vote(omlc_shards *s, Omld__RetrieveRequest *body, uint32_t k,
                     oml_merged_class *out, uint64_t *model_version, Omld__Response **resp,
                     omlc_error *err)
{
    omlc__err_clear(err);
    memset(out, 0, sizeof *out);
    Omld__ShardRetrieveResponse **parts = calloc(s->n, sizeof *parts);
    if (parts == NULL)
        return omlc__err_set(err, OMLC_ENOMEM, NULL, "out of memory");
    int rc = ask(s, body, k, resp, parts, err);
    if (rc == 0) {
        char why[256];
        if (oml_shard_classify(parts, s->n, k, out, why, sizeof why) != 0)
            rc = omlc__err_set(err, OMLC_EPROTO, NULL, "%s", why);
        else if (model_version)
            *model_version = resp[0]->model_version;
    }
    free(parts);
    return rc;
}

void omlc_shards_free_answers(Omld__Response **resp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (resp[i])
            omld__response__free_unpacked(resp[i], NULL);
        resp[i] = NULL;
    }
}

size_t omlc_shards_count(const omlc_shards *s)
{
    return s->n;
}

int omlc_shards_retrieve(omlc_shards *s, const omlc_ref *q, uint32_t k,
                         const omlc_retrieve_filter *f, omlc_hit *out, size_t max_hits,
                         size_t *n_hits, uint64_t *model_version, omlc_error *err)
{
    omlc__err_clear(err);
    if (s == NULL || k == 0 || (out == NULL && max_hits > 0))
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_shards_retrieve: shards, k > 0 and out "
                             "are needed");
    Omld__RetrieveRequest rb;
    omlc__ref_box rq;
    int rc = omlc__retrieve_body(&rb, &rq, q, k, NULL, f, err);
    if (rc != 0)
        return rc;
    Omld__Response **resp = calloc(s->n, sizeof *resp);
    oml_merged_hit *hits = calloc(k, sizeof *hits);
    size_t n = 0;
    if (resp == NULL || hits == NULL)
        rc = omlc__err_set(err, OMLC_ENOMEM, NULL, "out of memory");
    else
        rc = omlc_shards_merge(s, &rb, k, hits, &n, model_version, resp, err);
    if (rc == 0) {
        size_t m = n < max_hits ? n : max_hits;
        for (size_t i = 0; i < m; i++) {
            omlc__copy_str(out[i].id, sizeof out[i].id, hits[i].id);
            omlc__copy_str(out[i].label, sizeof out[i].label, hits[i].label);
            out[i].score = hits[i].score;
            out[i].similarity = hits[i].similarity;
        }
        if (n_hits)
            *n_hits = m;
    }
    if (resp)
        omlc_shards_free_answers(resp, s->n);
    free(resp);
    free(hits);
    return rc;
}

int omlc_shards_classify(omlc_shards *s, const omlc_ref *q, uint32_t k,
                         omlc_classification *out, omlc_error *err)
{
    omlc__err_clear(err);
    if (s == NULL || k == 0 || out == NULL)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_shards_classify: shards, k > 0 and out "
                             "are needed");
    Omld__RetrieveRequest rb;
    omlc__ref_box rq;
    int rc = omlc__retrieve_body(&rb, &rq, q, k, NULL, NULL, err);
    if (rc != 0)
        return rc;
    Omld__Response **resp = calloc(s->n, sizeof *resp);
    if (resp == NULL)
        return omlc__err_set(err, OMLC_ENOMEM, NULL, "out of memory");
    oml_merged_class m;
    uint64_t version = 0;
    rc = omlc_shards_vote(s, &rb, k, &m, &version, resp, err);
    if (rc == 0) { /* as one node's answer: the same copy into out */
        Omld__ClassifyResponse msg;
        Omld__ClassScore sc[16], *sp[16];
        oml_merged_class_message(&m, &msg, sc, sp);
        omlc__classify_copy(&msg, version, out);
    }
    omlc_shards_free_answers(resp, s->n);
    free(resp);
    return rc;
}
