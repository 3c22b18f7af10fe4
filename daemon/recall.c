/* recall.c - the recall sample off the query's path (see recall.h).
 *
 * DESIGN: each of the two samples (the lists' recall, a fresh view's
 * depth) has a process-wide gate: one flag says a job is queued or
 * running, and a deadline says when the next may start (after the last
 * one's duration times (1 - duty) / duty). An offer that loses both is
 * declined, so queries never wait for a sample and never queue them up;
 * one job may carry both. */
#include "recall.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "depth.h"
#include "fresh.h"
#include "log.h"
#include "rerank.h"
#include "serve.h"

struct omld_recall_job {
    uv_work_t work;
    omld_metrics *m;
    const omld_query_ctx *q;
    omld_view *v;
    int32_t k, k_c, row;
    int recall, depth; /* the samples it takes (each holds its gate) */
    float x[]; /* (dim) */
};

typedef struct gate {
    atomic_int busy;               /* a job is queued or running */
    atomic_uint_fast64_t next_ns;  /* no job starts before */
} gate;

static gate recall_gate, depth_gate;

static atomic_uint_fast64_t depth_offers;

/* One offer in `every` (counted in *offers) that finds g idle and past its
 * pause takes it. */
static int gate_take(gate *g, atomic_uint_fast64_t *offers, unsigned every)
{
    if (atomic_fetch_add(offers, 1) % every != 0 || omld_now_ns() < atomic_load(&g->next_ns))
        return 0;
    int idle = 0;
    return atomic_compare_exchange_strong(&g->busy, &idle, 1);
}

/* The next job waits the last one's duration (since t0) x (1 - duty) / duty. */
static void gate_pause(gate *g, uint64_t t0, double duty)
{
    uint64_t t1 = omld_now_ns();
    atomic_store(&g->next_ns, t1 + (uint64_t)((double)(t1 - t0) * (1.0 - duty) / duty));
}

omld_recall_job *omld_recall_offer(const omld_query_ctx *q, omld_view *v, const float *x,
                                   int32_t k, int32_t k_c, int32_t row)
{
    omld_metrics *m = q->metrics;
    if (m == NULL || v == NULL)
        return NULL;
    int depth = v->fresh != NULL && gate_take(&depth_gate, &depth_offers, OMLD_DEPTH_EVERY);
    int recall = v->ix->hl != NULL && gate_take(&recall_gate, &m->ann_queries, OMLD_RECALL_EVERY);
    if (!recall && !depth)
        return NULL;
    size_t dim = (size_t)v->ix->snap->cfg.dim;
    omld_recall_job *j = malloc(sizeof *j + dim * sizeof(float));
    if (j == NULL) {
        if (recall)
            atomic_store(&recall_gate.busy, 0);
        if (depth)
            atomic_store(&depth_gate.busy, 0);
        return NULL;
    }
    j->recall = recall;
    j->depth = depth;
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
    if (j->recall)
        atomic_store(&recall_gate.busy, 0);
    if (j->depth)
        atomic_store(&depth_gate.busy, 0);
    free(j);
}

/* The depth sample (depth.h): its counts move the index's depth. */
static void depth_run(omld_recall_job *j)
{
    uint64_t t0 = omld_now_ns();
    int64_t hits[OMLD_DEPTH_STEPS], total = 0;
    omld_view *b = j->v->base ? j->v->base : j->v;
    int was = atomic_load(&b->depth.step);
    if (omld_fresh_depth_sample(j->q, j->v, j->x, j->k, j->row, hits, &total) == OML_OK &&
        total > 0)
        omld_depth_observe(&b->depth, hits, total, j->q->lim->depth_target);
    int now = atomic_load(&b->depth.step);
    if (now != was)
        LOG_DEBUG("query", "index %llu, serving model %llu: fresh candidates x%.1f (the depth "
                  "sample's share %.3f there; this sample of k %d: %lld of %lld at x1, %.1f ms)",
                  (unsigned long long)b->version, (unsigned long long)j->v->version,
                  omld_depth_at(now, 2) / 2.0, (double)atomic_load(&b->depth.share) / 1e6, j->k,
                  (long long)hits[0], (long long)total, (double)(omld_now_ns() - t0) / 1e6);
    gate_pause(&depth_gate, t0, OMLD_DEPTH_DUTY);
}

static void recall_run(omld_recall_job *j)
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
    gate_pause(&recall_gate, t0, OMLD_RECALL_DUTY);
}

static void job_run(omld_recall_job *j)
{
    if (j->depth)
        depth_run(j);
    if (j->recall)
        recall_run(j);
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
