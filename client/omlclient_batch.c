/* omlclient_batch.c - query batches: many classify or retrieve queries in
 * one request (ClassifyBatch / RetrieveBatch in omld.proto), which the
 * daemon answers together, faster per query than one request each. The
 * request's arrays are malloc'd here and freed before returning; it only
 * borrows the caller's strings and floats. */
#include <stdlib.h>
#include <string.h>

#include "omlclient_int.h"

/* A batch request's arrays: n query messages of body_size bytes, the
 * pointers to them and their items' storage. */
typedef struct batch_msg {
    void *bodies;
    void **ptrs;
    omlc__ref_box *refs;
} batch_msg;

static int batch_alloc(batch_msg *b, size_t n, size_t body_size, omlc_error *err)
{
    size_t m = n ? n : 1;
    b->bodies = calloc(m, body_size);
    b->ptrs = calloc(m, sizeof *b->ptrs);
    b->refs = calloc(m, sizeof *b->refs);
    for (size_t i = 0; b->bodies && b->ptrs && i < n; i++)
        b->ptrs[i] = (char *)b->bodies + i * body_size;
    return b->bodies && b->ptrs && b->refs ? 0
                                           : omlc__err_set(err, OMLC_ENOMEM, NULL, "out of memory");
}

static void batch_free(batch_msg *b)
{
    free(b->bodies);
    free(b->ptrs);
    free(b->refs);
}

/* Sends req (a batch of n queries) and takes its answer (body want) into
 * *out, checking that it answers every query. */
static int batch_call(omlc *c, Omld__Request *req, Omld__Response__BodyCase want, size_t n,
                      Omld__Response **out, omlc_error *err)
{
    int rc = omlc__call_expect(c, req, want, out, err);
    if (rc != 0)
        return rc;
    size_t got = want == OMLD__RESPONSE__BODY_CLASSIFY_BATCH ? (*out)->classify_batch->n_answers
                                                             : (*out)->retrieve_batch->n_answers;
    if (got == n)
        return 0;
    omld__response__free_unpacked(*out, NULL);
    *out = NULL;
    return omlc__fail(c, err, OMLC_EPROTO, "%zu answers to a batch of %zu queries", got, n);
}

int omlc_classify_batch(omlc *c, const omlc_ref *q, size_t n, uint32_t k, const char *model,
                        omlc_classification *out, omlc_error *err)
{
    omlc__err_clear(err);
    if ((q == NULL || out == NULL) && n > 0)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_classify_batch: no queries or no out");
    batch_msg b;
    int rc = batch_alloc(&b, n, sizeof(Omld__ClassifyRequest), err);
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = omlc__classify_body(b.ptrs[i], &b.refs[i], &q[i], k, model, err);
    Omld__Response *r = NULL;
    if (rc == 0) {
        Omld__Request req = OMLD__REQUEST__INIT;
        Omld__ClassifyBatchRequest body = OMLD__CLASSIFY_BATCH_REQUEST__INIT;
        body.queries = (Omld__ClassifyRequest **)b.ptrs;
        body.n_queries = n;
        req.body_case = OMLD__REQUEST__BODY_CLASSIFY_BATCH;
        req.classify_batch = &body;
        rc = batch_call(c, &req, OMLD__RESPONSE__BODY_CLASSIFY_BATCH, n, &r, err);
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        omlc__classify_copy(r->classify_batch->answers[i], r->model_version, &out[i]);
    if (r)
        omld__response__free_unpacked(r, NULL);
    batch_free(&b);
    return rc;
}

int omlc_retrieve_batch(omlc *c, const omlc_ref *q, size_t n, uint32_t k, const char *model,
                        const omlc_retrieve_filter *f, omlc_hit *out, size_t max_hits,
                        size_t *n_hits, uint64_t *model_version, omlc_error *err)
{
    omlc__err_clear(err);
    if ((q == NULL || n_hits == NULL || (out == NULL && max_hits > 0)) && n > 0)
        return omlc__err_set(err, OMLC_EARG, NULL,
                             "omlc_retrieve_batch: no queries, no out or no n_hits");
    batch_msg b;
    int rc = batch_alloc(&b, n, sizeof(Omld__RetrieveRequest), err);
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = omlc__retrieve_body(b.ptrs[i], &b.refs[i], &q[i], k, model, f ? &f[i] : NULL, err);
    Omld__Response *r = NULL;
    if (rc == 0) {
        Omld__Request req = OMLD__REQUEST__INIT;
        Omld__RetrieveBatchRequest body = OMLD__RETRIEVE_BATCH_REQUEST__INIT;
        body.queries = (Omld__RetrieveRequest **)b.ptrs;
        body.n_queries = n;
        req.body_case = OMLD__REQUEST__BODY_RETRIEVE_BATCH;
        req.retrieve_batch = &body;
        rc = batch_call(c, &req, OMLD__RESPONSE__BODY_RETRIEVE_BATCH, n, &r, err);
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        n_hits[i] = omlc__hits_copy(r->retrieve_batch->answers[i], out + i * max_hits, max_hits);
    if (rc == 0 && model_version)
        *model_version = r->model_version;
    if (r)
        omld__response__free_unpacked(r, NULL);
    batch_free(&b);
    return rc;
}
