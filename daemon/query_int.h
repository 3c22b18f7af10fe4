/* query_int.h - what the single query handlers (query.c) share with the
 * batch handlers (query_batch.c): resolving a query's item, the retrieve
 * filters, the recall sample, errors, the answers' messages and the view a
 * query names. Internal to the daemon; query pool threads. */
#ifndef OMLD_QUERY_INT_H
#define OMLD_QUERY_INT_H

#include "query.h"
#include "serve.h"

#define OMLD_QUERY_FIELD_CAP 128 /* the longest field path an answer names */

/* One resolved ItemRef. */
typedef struct query_item {
    const float *x; /* dim floats: the request's own vector, or a copy in the reply's arena */
    int32_t row;    /* the item's row in the view, or -1 */
} query_item;

/* Resolves ref (field is its path, e.g. "classify.query"): an inline vector
 * is used as is; an id is looked up in the store and its features copied
 * out under the read lock. 0, or the error filled into r. */
int omld__query_resolve(const omld_query_ctx *q, const omld_view *v, const Omld__ItemRef *ref,
                        const char *field, query_item *qi, omld_reply *r);

/* The k a query asks for (set: its k_opt), else the daemon's default_k. */
int32_t omld__query_k(int set, uint32_t k, const omld_limits *lim);

/* INTERNAL "out of memory while answering op" into r; returns its code. */
int omld__query_oom(omld_reply *r, const char *op);

/* A liboml error into r: its wire code, its diag field under op's path
 * (op "classify_batch" and field "queries[3].k" give
 * "classify_batch.queries[3].k"). Returns the code. */
int omld__query_lib_error(omld_reply *r, int rc, const oml_diag *d, const char *op);

/* On a view with inverted lists, a sampled query (recall.h) also gets
 * the exact scan, as r->after: it runs once the reply is out and counts
 * the lists' recall (/status search, /metrics). */
void omld__query_sample_recall(const omld_query_ctx *q, omld_view *v, const float *x, int32_t k,
                               int32_t row, omld_reply *r);

/* A retrieval's offset and similarity floor from m (allow NULL). */
void omld__query_retrieve_opts(const Omld__RetrieveRequest *m, oml_retrieve_opts *opts);

/* The rows a retrieval may return (opts->allow, malloc'd, n + n_labels
 * bytes; NULL when the request filters nothing): with labels, the rows of
 * those labels; with metadata conditions, the rows passing them
 * (omld__query_meta_allow's rule); never an excluded id. Labels and ids the view does not
 * know match nothing. 0, or -1 when out of memory. */
int omld__query_retrieve_filter(const omld_query_ctx *q, const omld_view *v,
                                const Omld__RetrieveRequest *m, oml_retrieve_opts *opts);

/* After a search of a view's own index: 0 when each of the n hits still
 * names its item in the store; else opts->allow becomes the rows that
 * still do (of those it allowed) and 1 says to search again, so that k
 * hits come back where an item was deleted or replaced since the index
 * was built (an index keeps no ids: such a row has none to give). -1:
 * out of memory. */
int omld__query_exclude_gone(const omld_query_ctx *q, const oml_index *ix, const oml_hit *hits,
                             int32_t n, oml_retrieve_opts *opts);

/* The rows of v whose items pass the metadata conditions c (n >= 1), as
 * the store holds them now (an item deleted or replaced since the view was
 * built fails): a malloc'd mask of v->ix->n bytes, NULL when out of memory.
 * The one place the queries' metadata filters are evaluated. */
uint8_t *omld__query_meta_allow(const omld_query_ctx *q, const omld_view *v,
                                Omld__MetadataCondition *const *c, size_t n);

/* The answers' messages, in r's arena: a classification (NULL or label
 * OML_LABEL_NONE: no labelled neighbour, an empty answer), and n hits by
 * index row, each named by the store's id (and with_metadata, given its
 * metadata) as it holds them now, under q's read lock: a hit whose item
 * was deleted or replaced since the index was built is left out. NULL
 * when out of memory. */
Omld__ClassifyResponse *omld__query_classify_response(const oml_index *ix,
                                                      const oml_classification *c, omld_reply *r);
Omld__RetrieveResponse *omld__query_retrieve_response(const omld_query_ctx *q, const oml_index *ix,
                                                      const oml_hit *hits, int32_t n,
                                                      int with_metadata, omld_reply *r);

typedef int (*omld__query_fn)(const omld_query_ctx *q, omld_view *v, const Omld__Request *req,
                              omld_reply *r);

/* Runs fn against the view the query names: the live one (live) unless
 * named and model is a batch model's name (not "" or "live"), whose view
 * is held meanwhile; an unknown model is NOT_FOUND "<op>.model". */
void omld__query_answer(const omld_query_ctx *q, omld_view *live, int named, const char *model,
                        const char *op, omld__query_fn fn, const Omld__Request *req,
                        omld_reply *r);

#endif
