/* fresh.h - classify and retrieve on a view whose model is newer than its
 * index's (v->fresh set): the index's candidates re-ranked under the view's
 * model (rerank.h), their features read from the store as they are now.
 * Query threads; same contracts and errors as oml_classify / oml_retrieve. */
#ifndef OMLD_FRESH_H
#define OMLD_FRESH_H

#include "query.h"
#include "rerank.h"

/* allow (n, NULL: every row) as oml_retrieve_opts.allow: only those rows vote. */
int omld_fresh_classify(const omld_query_ctx *q, const omld_view *v, const float *x, int32_t k,
                        int32_t exclude_row, const uint8_t *allow, oml_classification *out,
                        oml_diag *d);

int omld_fresh_retrieve(const omld_query_ctx *q, const omld_view *v, const float *x, int32_t k,
                        int32_t exclude_row, const oml_retrieve_opts *opts, oml_hit *out,
                        int32_t *n_out, oml_diag *d);

#endif
