/* query.h - answering the read operations against one serving view.
 *
 * Classify (OAHU Eq. 23-25), Verify (Eq. 26), Retrieve (Eq. 27), Embed and
 * GetItems. Runs on libuv's threadpool: it reads only the immutable view it
 * was given and, for references by id, the item store under its read lock
 * (copying the features out before it computes). The request has passed
 * omld_validate(); what is checked here needs state: unknown ids
 * (NOT_FOUND, field e.g. "classify.query.id"), unknown model names
 * (NOT_FOUND, "classify.model"; the live model answers to no name, "" and
 * "live", batch models to their names: their own view is used). A query by id excludes that
 * item from its own neighbours. Every answer carries the view's version. */
#ifndef OMLD_QUERY_H
#define OMLD_QUERY_H

#include "omld.pb-c.h"
#include "reply.h"
#include "store.h"
#include "validate.h"
#include "models.h"
#include "view.h"

typedef struct omld_query_ctx {
    const omld_limits *lim;
    const oml_store *store;      /* read under lock */
    omld_store_lock *lock;
    omld_models *models;         /* batch models (NULL: only the live model) */
    omld_metrics *metrics;       /* the recall sample's counters (NULL: none taken) */
} omld_query_ctx;

/* Concurrent single Classify requests answered together (issue 14 item
 * 4; the loop's side is coalesce.c): may reqs[i] join a group on view v?
 * A Classify of the live model without a metadata filter, on a view that
 * scans every row under its own model (no inverted lists, not fresh:
 * where one GEMM per head serves many queries). */
int omld_query_groupable(const omld_view *v, const Omld__Request *req);

/* Fills rs[i] (initialised; body or error) for each of the n groupable
 * requests reqs[i] against v, exactly as omld_query_run would one by one:
 * every query resolved on its own (an unknown id is its own error), then
 * one oml_classify_batch over the rest (bit for bit the single answers;
 * if it fails, each is answered alone). */
void omld_query_classify_group(const omld_query_ctx *q, omld_view *v,
                               const Omld__Request *const *reqs, omld_reply *const *rs, size_t n);

/* Fills r (body or error) for req (a QUERY route) against v by the row's
 * handler (ops.h); v may be NULL only for a row that does not need the
 * model. */
void omld_query_run(const omld_query_ctx *q, omld_view *v, const Omld__Request *req,
                    omld_reply *r);

/* The handlers of the query rows (ops.c): req has passed its check. */
void omld_query_classify(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                         omld_reply *r);
void omld_query_verify(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                       omld_reply *r);
void omld_query_retrieve(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                         omld_reply *r);
void omld_query_embed(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                      omld_reply *r);
void omld_query_get_items(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                          omld_reply *r);
/* query_export.c: the serving model as an OMLSNAP file (snapshot.h). */
void omld_query_export_model(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                             omld_reply *r);
/* query_batch.c: every query of the batch as the single handler would
 * answer it, one view for all (the model the queries name). */
void omld_query_classify_batch(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                               omld_reply *r);
/* ListItems: a page of the store (reads the store only; query_list.c). */
void omld_query_list_items(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                           omld_reply *r);
/* CountItems: the live items passing a filter (query_list.c). */
/* query_shard.c: one shard's part of a retrieval (omld.proto SHARDS). */
void omld_query_shard_retrieve(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                               omld_reply *r);
void omld_query_count_items(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                            omld_reply *r);
void omld_query_recommend(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                          omld_reply *r);
void omld_query_retrieve_batch(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                               omld_reply *r);

#endif
