/* recall.c - the recall sample off the query's path (see recall.h).
 *
 * DESIGN: the gate is process-wide: one flag says a scan is queued or
 * running, and a deadline says when the next may start (after the last
 * one's duration times (1 - duty) / duty). An offer that loses either is
 * declined, so queries never wait for a scan and never queue them up. */
#include "recall.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fresh.h"
#include "rerank.h"
#include "serve.h"

struct omld_recall_job {
    uv_work_t work;
    omld_metrics *m;
    const omld_query_ctx *q;
    omld_view *v;
    int32_t k, k_c, row;
    float x[]; /* (dim) */
};

static atomic_int busy;                 /* a job is queued or running */
static atomic_uint_fast64_t next_ns;    /* no job starts before */

omld_recall_job *omld_recall_offer(const omld_query_ctx *q, omld_view *v, const float *x,
                                   int32_t k, int32_t k_c, int32_t row)
{
    omld_metrics *m = q->metrics;
    if (m == NULL || v == NULL || v->ix->hl == NULL)
        return NULL;
    if (atomic_fetch_add(&m->ann_queries, 1) % OMLD_RECALL_EVERY != 0)
        return NULL;
    if (omld_now_ns() < atomic_load(&next_ns))
        return NULL;
    int idle = 0;
    if (!atomic_compare_exchange_strong(&busy, &idle, 1))
        return NULL;
    size_t dim = (size_t)v->ix->snap->cfg.dim;
    omld_recall_job *j = malloc(sizeof *j + dim * sizeof(float));
    if (j == NULL) {
        atomic_store(&busy, 0);
        return NULL;
    }
    j->m = m;
    j->q = q;
    j->v = omld_view_retain(v);
    j->k = k;
    j->k_c = k_c;
    j->row = row;
    memcpy(j->x, x, dim * sizeof(float));
    return j;
}

static void job_free(omld_recall_job *j)
{
    omld_view_release(j->v);
    free(j);
    atomic_store(&busy, 0);
}

static void job_run(omld_recall_job *j)
{
    uint64_t t0 = omld_now_ns();
    int64_t head_hits[OML_MAX_HEADS], head_total[OML_MAX_HEADS], hits = 0, total = 0;
    oml_row_source rows; /* an index without float columns: its rows from the store */
    omld_fresh_rows(j->q, &rows);
    if (j->k_c > 0)
        oml_rerank_recall(j->v->ix, j->x, j->k, j->k_c, j->row, &rows, head_hits, head_total);
    else
        oml_index_recall(j->v->ix, j->x, j->k, j->row, &rows, head_hits, head_total);
    for (int h = 0; h < j->v->ix->heads; h++) { /* a head that parts from the others shows */
        omld_count(&j->m->ann_recall_head_hits[h], (uint64_t)head_hits[h]);
        omld_count(&j->m->ann_recall_head_total[h], (uint64_t)head_total[h]);
        hits += head_hits[h];
        total += head_total[h];
    }
    omld_count(&j->m->ann_recall_hits, (uint64_t)hits);
    omld_count(&j->m->ann_recall_total, (uint64_t)total);
    omld_view *b = j->v->base ? j->v->base : j->v; /* the index's figure, whichever model serves */
    atomic_fetch_add(&b->recall_hits, (uint64_t)hits);
    atomic_fetch_add(&b->recall_total, (uint64_t)total);
    uint64_t t1 = omld_now_ns();
    atomic_store(&next_ns, t1 + (uint64_t)((double)(t1 - t0) * (1.0 - OMLD_RECALL_DUTY) /
                                           OMLD_RECALL_DUTY));
}

static void work_cb(uv_work_t *w)
{
    job_run((omld_recall_job *)(void *)w); /* work is the first member */
}

static void after_cb(uv_work_t *w, int status)
{
    (void)status;
    job_free((omld_recall_job *)(void *)w);
}

void omld_recall_run_later(uv_loop_t *loop, omld_recall_job *j)
{
    if (j && uv_queue_work(loop, &j->work, work_cb, after_cb) != 0)
        job_free(j);
}

void omld_recall_drop(void *job)
{
    if (job)
        job_free(job);
}

void omld_recall_run_now(omld_recall_job *j)
{
    if (j == NULL)
        return;
    job_run(j);
    job_free(j);
}
