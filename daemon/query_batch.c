/* query_batch.c - ClassifyBatch and RetrieveBatch: many queries against one
 * view, answered together (omld.proto, QUERY BATCHES).
 *
 * DESIGN
 * Runs on libuv's threadpool like query.c, with the same helpers
 * (query_int.h): every query's item is resolved first (ids copied out of
 * the store under its read lock, one query at a time), so an unknown id
 * fails the batch before any search, naming its query. Then one call of
 * liboml's batch path (oml_classify_batch / oml_retrieve_batch: GEMM over
 * the index for a block of queries) answers them all; a fresh view (an
 * older index re-ranked under a newer model, fresh.c) answers them one by
 * one, as an index with lists does inside liboml. Each answer is the one
 * the query would get alone. Retrieve filters are masks of the view's rows
 * (one byte per row), built a block of queries at a time, at most 16 MiB
 * of them at once whatever the batch's size. The answers
 * live in the reply's arena; the scratch arrays are malloc'd and freed
 * here. Every query of a batch names one model (validate.c), so one view
 * answers it. Single Classify requests that arrive together on an
 * exact-scan view are answered the same way (omld_query_classify_group,
 * for coalesce.c), each reply its own. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fresh.h"
#include "query_int.h"
#include "serve.h"

/* Query i of a batch: its item resolved at "<op>.queries[i].query" (x and,
 * for an id, the row it leaves out) and its k. 0, or the error in r. */
static int resolve_query(const omld_query_ctx *q, const omld_view *v, const char *op, size_t i,
                         const Omld__ItemRef *ref, int32_t k, oml_query *out, omld_reply *r)
{
    char field[OMLD_QUERY_FIELD_CAP];
    snprintf(field, sizeof field, "%s.queries[%zu].query", op, i);
    query_item qi;
    int rc = omld__query_resolve(q, v, ref, field, &qi, r);
    if (rc == 0)
        *out = (oml_query){qi.x, k, qi.row, NULL};
    return rc;
}

/* A liboml error of queries first .. of a batch: the diag names a query
 * of those ("queries[3].k"), the answer its place in the request. */
static int batch_error(omld_reply *r, int rc, oml_diag *d, const char *op, size_t first)
{
    int i, at = 0;
    if (sscanf(d->field, "queries[%d].%n", &i, &at) == 1 && at > 0) {
        char rest[sizeof d->field];
        snprintf(rest, sizeof rest, "%s", d->field + at);
        snprintf(d->field, sizeof d->field, "queries[%zu].%.24s", first + (size_t)i, rest);
    }
    return omld__query_lib_error(r, rc, d, op);
}

/* ------------------------------------------------------------ classify */

#define CLASSIFY_OP "classify_batch"

/* Every query's classification into c (n): OML_LABEL_NONE where the query
 * has no labelled neighbour. */
static int classify_all(const omld_query_ctx *q, const omld_view *v, const oml_query *qs,
                        size_t n, oml_classification *c, omld_reply *r)
{
    oml_diag d = {0};
    if (!v->fresh && omld_view_floats(v)) {
        int rc = oml_classify_batch(v->ix, qs, (int32_t)n, c, &d);
        return rc == OML_OK ? 0 : batch_error(r, rc, &d, CLASSIFY_OP, 0);
    }
    oml_row_source rows; /* an index without float columns: its rows from the store */
    omld_fresh_rows(q, &rows);
    for (size_t i = 0; i < n; i++) { /* one at a time, as a batch on lists answers anyway */
        int rc = v->fresh ? omld_fresh_classify(q, v, qs[i].x, qs[i].k, qs[i].exclude_row, NULL,
                                                &c[i], &d)
                          : oml_classify_from(v->ix, qs[i].x, qs[i].k, qs[i].exclude_row, NULL,
                                              &rows, &c[i], &d);
        if (rc == OML_EEMPTY)
            c[i] = (oml_classification){.label = OML_LABEL_NONE};
        else if (rc != OML_OK)
            return batch_error(r, rc, &d, CLASSIFY_OP, i);
    }
    return 0;
}

static int run_classify_batch(const omld_query_ctx *q, omld_view *v, const Omld__Request *req,
                              omld_reply *r)
{
    const Omld__ClassifyBatchRequest *m = req->classify_batch;
    size_t n = m->n_queries;
    oml_query *qs = malloc(n * sizeof *qs);
    oml_classification *c = malloc(n * sizeof *c);
    Omld__ClassifyBatchResponse *resp = omld_reply_alloc(r, sizeof *resp);
    Omld__ClassifyResponse **answers = omld_reply_alloc(r, n * sizeof *answers);
    int rc = qs && c && resp && answers ? 0 : omld__query_oom(r, CLASSIFY_OP);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const Omld__ClassifyRequest *cq = m->queries[i];
        int32_t k = omld__query_k(cq->k_opt_case == OMLD__CLASSIFY_REQUEST__K_OPT_K, cq->k, q->lim);
        rc = resolve_query(q, v, CLASSIFY_OP, i, cq->query, k, &qs[i], r);
    }
    if (rc == 0)
        rc = classify_all(q, v, qs, n, c, r);
    for (size_t i = 0; i < n && rc == 0; i++) {
        omld__query_sample_recall(q, v, qs[i].x, qs[i].k, qs[i].exclude_row, r);
        if ((answers[i] = omld__query_classify_response(v->ix, &c[i], r)) == NULL)
            rc = omld__query_oom(r, CLASSIFY_OP);
    }
    if (rc == 0) {
        omld__classify_batch_response__init(resp);
        resp->n_answers = n;
        resp->answers = answers;
        r->msg.body_case = OMLD__RESPONSE__BODY_CLASSIFY_BATCH;
        r->msg.classify_batch = resp;
    }
    free(qs);
    free(c);
    return rc;
}

/* ------------------------------------------------------------ single requests, grouped */

int omld_query_groupable(const omld_view *v, const Omld__Request *req)
{
    if (v == NULL || v->fresh || v->ix->hl != NULL || req->body_case != OMLD__REQUEST__BODY_CLASSIFY)
        return 0;
    const Omld__ClassifyRequest *m = req->classify;
    return m->model_opt_case != OMLD__CLASSIFY_REQUEST__MODEL_OPT_MODEL && m->n_metadata == 0;
}

void omld_query_classify_group(const omld_query_ctx *q, omld_view *v,
                               const Omld__Request *const *reqs, omld_reply *const *rs, size_t n)
{
    oml_query *qs = malloc(n * sizeof *qs);
    size_t *of = malloc(n * sizeof *of); /* the request of each query */
    oml_classification *c = malloc(n * sizeof *c);
    size_t m = 0;
    int rc = qs && of && c ? OML_OK : OML_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        rs[i]->msg.model_version = v->version;
        const Omld__ClassifyRequest *cq = reqs[i]->classify;
        int32_t k = omld__query_k(cq->k_opt_case == OMLD__CLASSIFY_REQUEST__K_OPT_K, cq->k, q->lim);
        query_item qi;
        if (rc != OML_OK)
            omld__query_oom(rs[i], "classify");
        else if (omld__query_resolve(q, v, cq->query, "classify.query", &qi, rs[i]) == 0) {
            qs[m] = (oml_query){qi.x, k, qi.row, NULL};
            of[m++] = i;
        }
    }
    oml_diag d = {0};
    if (rc == OML_OK && m > 0)
        rc = oml_classify_batch(v->ix, qs, (int32_t)m, c, &d);
    for (size_t j = 0; j < m; j++) {
        omld_reply *r = rs[of[j]];
        if (rc != OML_OK) { /* whichever query failed the batch: each alone, as it would be */
            omld_reply_free(r);
            omld_reply_init(r, reqs[of[j]]->request_id);
            omld_query_run(q, v, reqs[of[j]], r);
            continue;
        }
        omld__query_sample_recall(q, v, qs[j].x, qs[j].k, qs[j].exclude_row, r);
        /* no labelled neighbour (OML_LABEL_NONE) is an empty answer */
        r->msg.classify = omld__query_classify_response(v->ix, &c[j], r);
        if (r->msg.classify == NULL)
            omld__query_oom(r, "classify");
        else
            r->msg.body_case = OMLD__RESPONSE__BODY_CLASSIFY;
    }
    free(qs);
    free(of);
    free(c);
}

/* ------------------------------------------------------------ retrieve */

#define RETRIEVE_OP "retrieve_batch"

/* Queries first .. first + b - 1 (qs, their filters set): query first + j's
 * hits into hits[j], their count into n_hits[j]. */
static int retrieve_some(const omld_query_ctx *q, const omld_view *v, const oml_query *qs,
                         size_t first, size_t b, oml_hit *const *hits, int32_t *n_hits,
                         omld_reply *r)
{
    oml_diag d = {0};
    if (!v->fresh) { /* (their opts carry the store's rows for an index without floats) */
        int rc = oml_retrieve_batch(v->ix, qs + first, (int32_t)b, hits, n_hits, &d);
        return rc == OML_OK ? 0 : batch_error(r, rc, &d, RETRIEVE_OP, first);
    }
    for (size_t j = 0; j < b; j++) {
        const oml_query *qi = &qs[first + j];
        int rc = omld_fresh_retrieve(q, v, qi->x, qi->k, qi->exclude_row, qi->opts, hits[j],
                                     &n_hits[j], &d);
        if (rc != OML_OK)
            return batch_error(r, rc, &d, RETRIEVE_OP, first + j);
    }
    return 0;
}

/* Filters are masks of the view's rows, a byte each: at most this many
 * bytes of them at a time (a block of the batched search, or fewer
 * queries on a large view). */
#define FILTER_BYTES ((size_t)16 << 20)

/* The answers of queries first .. first + b - 1, searched with their
 * filters: into answers, their packed size added to *bytes. hits (b) is
 * scratch for k hits each. */
static int retrieve_block(const omld_query_ctx *q, omld_view *v,
                          const Omld__RetrieveBatchRequest *m, oml_query *qs,
                          oml_retrieve_opts *opts, size_t first, size_t b, oml_hit **hits,
                          int32_t *n_hits, Omld__RetrieveResponse **answers, uint64_t *bytes,
                          omld_reply *r)
{
    int rc = 0;
    oml_row_source rows; /* an index without float columns: its rows from the store */
    omld_fresh_rows(q, &rows);
    for (size_t i = first; i < first + b; i++) {
        omld__query_retrieve_opts(m->queries[i], &opts[i]);
        opts[i].src = &rows;
        if (rc == 0 && omld__query_retrieve_filter(q, v, m->queries[i], &opts[i]) != 0)
            rc = omld__query_oom(r, RETRIEVE_OP);
        qs[i].opts = &opts[i];
    }
    if (rc == 0)
        rc = retrieve_some(q, v, qs, first, b, hits, n_hits, r);
    for (size_t i = first; i < first + b && rc == 0 && !v->fresh; i++) {
        int32_t j = (int32_t)(i - first);
        int again = omld__query_exclude_gone(q, v->ix, hits[j], n_hits[j], &opts[i]);
        oml_diag d = {0};
        int lib = again > 0 ? oml_retrieve(v->ix, qs[i].x, qs[i].k, qs[i].exclude_row, &opts[i],
                                           hits[j], &n_hits[j], &d)
                            : OML_OK;
        if (again < 0)
            rc = omld__query_oom(r, RETRIEVE_OP);
        else if (lib != OML_OK)
            rc = batch_error(r, lib, &d, RETRIEVE_OP, i);
    }
    for (size_t i = first; i < first + b; i++) {
        /* The recall sample compares plain searches. */
        if (rc == 0 && opts[i].allow == NULL && opts[i].offset == 0)
            omld__query_sample_recall(q, v, qs[i].x, qs[i].k, qs[i].exclude_row, r);
        free((void *)opts[i].allow);
        opts[i].allow = NULL;
    }
    for (size_t i = first; i < first + b && rc == 0; i++) {
        answers[i] = omld__query_retrieve_response(q, v->ix, hits[i - first], n_hits[i - first],
                                                   m->queries[i]->with_metadata, r);
        if (answers[i] == NULL)
            rc = omld__query_oom(r, RETRIEVE_OP);
        else
            *bytes += omld__retrieve_response__get_packed_size(answers[i]) + 6; /* tag, length */
    }
    return rc;
}

/* Every query's answer into answers, a block at a time: the block's
 * filters and hits exist only while it is searched, and the answers stop
 * (RESOURCE_EXHAUSTED) as soon as they outgrow a frame, so a batch holds
 * at most about a frame of answers whatever its size and k. */
static int retrieve_all(const omld_query_ctx *q, omld_view *v, const Omld__RetrieveBatchRequest *m,
                        oml_query *qs, Omld__RetrieveResponse **answers, omld_reply *r)
{
    size_t n = m->n_queries, rows = (size_t)v->ix->n + 1, chunk = OML_SERVE_BATCH_QUERIES;
    if (rows * chunk > FILTER_BYTES)
        chunk = FILTER_BYTES / rows > 0 ? FILTER_BYTES / rows : 1;
    oml_retrieve_opts *opts = malloc(n * sizeof *opts);
    oml_hit **hits = malloc(chunk * sizeof *hits);
    int32_t *n_hits = malloc(chunk * sizeof *n_hits);
    int rc = opts && hits && n_hits ? 0 : omld__query_oom(r, RETRIEVE_OP);
    uint64_t bytes = 0;
    for (size_t i0 = 0; i0 < n && rc == 0; i0 += chunk) {
        size_t b = n - i0 < chunk ? n - i0 : chunk, total = 0;
        for (size_t i = i0; i < i0 + b; i++)
            total += (size_t)qs[i].k;
        oml_hit *block = malloc(total * sizeof *block);
        if (block == NULL) {
            rc = omld__query_oom(r, RETRIEVE_OP);
            break;
        }
        for (size_t i = 0, at = 0; i < b; at += (size_t)qs[i0 + i].k, i++)
            hits[i] = block + at;
        rc = retrieve_block(q, v, m, qs, opts, i0, b, hits, n_hits, answers, &bytes, r);
        free(block);
        if (rc == 0 && q->lim->max_answer > 0 && bytes > q->lim->max_answer)
            rc = omld_reply_error(r, OMLD__STATUS__CODE__RESOURCE_EXHAUSTED,
                                  RETRIEVE_OP ".queries",
                                  "the answers of the first %zu queries already take %llu bytes, "
                                  "more than max_frame_bytes (%u): send fewer queries or a "
                                  "smaller k", i0 + b, (unsigned long long)bytes,
                                  (unsigned)q->lim->max_answer);
    }
    free(opts);
    free(hits);
    free(n_hits);
    return rc;
}

static int run_retrieve_batch(const omld_query_ctx *q, omld_view *v, const Omld__Request *req,
                              omld_reply *r)
{
    const Omld__RetrieveBatchRequest *m = req->retrieve_batch;
    size_t n = m->n_queries;
    oml_query *qs = malloc(n * sizeof *qs);
    Omld__RetrieveBatchResponse *resp = omld_reply_alloc(r, sizeof *resp);
    Omld__RetrieveResponse **answers = omld_reply_alloc(r, n * sizeof *answers);
    int rc = qs && resp && answers ? 0 : omld__query_oom(r, RETRIEVE_OP);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const Omld__RetrieveRequest *rq = m->queries[i];
        int32_t k = omld__query_k(rq->k_opt_case == OMLD__RETRIEVE_REQUEST__K_OPT_K, rq->k, q->lim);
        rc = resolve_query(q, v, RETRIEVE_OP, i, rq->query, k, &qs[i], r);
    }
    if (rc == 0)
        rc = retrieve_all(q, v, m, qs, answers, r);
    if (rc == 0) {
        omld__retrieve_batch_response__init(resp);
        resp->n_answers = n;
        resp->answers = answers;
        r->msg.body_case = OMLD__RESPONSE__BODY_RETRIEVE_BATCH;
        r->msg.retrieve_batch = resp;
    }
    free(qs);
    return rc;
}

/* ------------------------------------------------------------ handlers */

/* The model the batch's first query names (validate.c: all name it). */
void omld_query_classify_batch(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                               omld_reply *r)
{
    const Omld__ClassifyRequest *q0 = req->classify_batch->queries[0];
    omld__query_answer(q, live, q0->model_opt_case == OMLD__CLASSIFY_REQUEST__MODEL_OPT_MODEL,
                       q0->model, CLASSIFY_OP ".queries[0]", run_classify_batch, req, r);
}

void omld_query_retrieve_batch(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                               omld_reply *r)
{
    const Omld__RetrieveRequest *q0 = req->retrieve_batch->queries[0];
    omld__query_answer(q, live, q0->model_opt_case == OMLD__RETRIEVE_REQUEST__MODEL_OPT_MODEL,
                       q0->model, RETRIEVE_OP ".queries[0]", run_retrieve_batch, req, r);
}
