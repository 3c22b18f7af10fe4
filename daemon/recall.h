/* recall.h - the recall sample of a view with inverted lists, off the
 * query's path (issue 14).
 *
 * Some queries are also answered by a full scan under the same model, and
 * the share of the exact k nearest per head the lists found (on a fresh
 * view: the share among the candidates its answer is chosen from) is counted on
 * /status (search.recall, the serving index's) and /metrics. At a million
 * items a full scan takes about 100 ms against about 2 ms for the lists'
 * search, so the scan runs on the threadpool after the query's reply is
 * out, one at a time, and takes at most OMLD_RECALL_DUTY of one core: one
 * query in OMLD_RECALL_EVERY is offered, and an offer while a scan runs,
 * or before its pause is over, is declined. The sample stays a sample of
 * the queries served, only sparser under load.
 *
 * On a fresh view, one query in OMLD_DEPTH_EVERY is also offered for the
 * depth sample (depth.h, fresh.c): OMLD_DEPTH_DEEP / 2 times its
 * candidates re-ranked under the serving model, a few milliseconds at a
 * million items, on the same terms under its own gate, at most
 * OMLD_DEPTH_DUTY of a core. */
#ifndef OMLD_RECALL_H
#define OMLD_RECALL_H

#include <stdint.h>
#include <uv.h>

#include "metrics.h"
#include "query.h"
#include "view.h"

#define OMLD_RECALL_EVERY 32
#define OMLD_RECALL_DUTY 0.05
#define OMLD_DEPTH_EVERY 8
#define OMLD_DEPTH_DUTY 0.02

typedef struct omld_recall_job omld_recall_job;

/* A job checking query x (the view's dimension, copied) with k neighbours
 * per head, leaving row out (-1: none), against v (retained), when this
 * query is sampled for either sample; else (no lists and not fresh, no
 * q->metrics, declined, out of memory) NULL. k_c 0: the lists' search for k (oml_index_recall); k_c >=
 * k: the k_c candidates per head a view that re-ranks chooses its answer
 * among (oml_rerank_recall; an index without float columns takes its
 * exact reference from q's store). q must outlive the job. */
omld_recall_job *omld_recall_offer(const omld_query_ctx *q, omld_view *v, const float *x,
                                   int32_t k, int32_t k_c, int32_t row);

/* Runs the job on loop's threadpool and frees it (at once when it cannot
 * be queued). Loop thread. */
void omld_recall_run_later(uv_loop_t *loop, omld_recall_job *job);

/* Frees a job without running it (void *: an omld_reply's after_free).
 * Accepts NULL. */
void omld_recall_drop(void *job);

/* Runs the job on this thread and frees it (tests; no loop). Accepts NULL. */
void omld_recall_run_now(omld_recall_job *job);

#endif
