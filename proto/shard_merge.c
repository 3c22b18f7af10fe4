/* shard_merge.c - see shard_merge.h. */
#include "shard_merge.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    const Omld__ShardCandidate *c;
    float dist;
    double score;
} entry;

static int by_dist_then_order(const void *pa, const void *pb)
{
    const entry *a = pa, *b = pb;
    if (a->dist != b->dist)
        return a->dist < b->dist ? -1 : 1;
    return a->c->order < b->c->order ? -1 : a->c->order > b->c->order;
}

static int by_order_then_score(const void *pa, const void *pb)
{
    const entry *a = pa, *b = pb;
    if (a->c->order != b->c->order)
        return a->c->order < b->c->order ? -1 : 1;
    return a->score > b->score ? -1 : a->score < b->score ? 1 : 0;
}

static int by_score_then_order(const void *pa, const void *pb)
{
    const entry *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return a->c->order < b->c->order ? -1 : a->c->order > b->c->order;
}

/* OAHU Eq. 23 (= Eq. 27): src/serve.c oml__eq23_score, the same arithmetic. */
static double eq23(float d, float d_min, float d_max, float alpha)
{
    if (!(d_max > d_min))
        return (double)alpha;
    return exp(-((double)d - (double)d_min) / ((double)d_max - (double)d_min)) * (double)alpha;
}

/* The models agree: as many heads, the same weights bit for bit. */
static int same_model(Omld__ShardRetrieveResponse *const *parts, size_t n, char *err,
                      size_t errlen)
{
    for (size_t p = 0; p < n; p++) {
        if (parts[p]->n_heads != parts[0]->n_heads || parts[p]->n_alpha != parts[0]->n_alpha ||
            parts[p]->n_alpha != parts[p]->n_heads ||
            memcmp(parts[p]->alpha, parts[0]->alpha, parts[0]->n_alpha * sizeof(float)) != 0) {
            snprintf(err, errlen, "the shards answered with different models (shard %u of %u "
                     "differs from shard %u): retry once they serve the same version",
                     parts[p]->shard, parts[p]->shards, parts[0]->shard);
            return -1;
        }
    }
    return 0;
}

int oml_shard_merge(Omld__ShardRetrieveResponse *const *parts, size_t n, uint32_t k,
                    uint32_t offset, int has_min, float min_similarity, oml_merged_hit *out,
                    size_t *n_out, char *err, size_t errlen)
{
    *n_out = 0;
    if (n == 0 || same_model(parts, n, err, errlen) != 0)
        return n == 0 ? (snprintf(err, errlen, "no shard answered"), -1) : -1;
    size_t heads = parts[0]->n_heads, ranked = (size_t)offset + k, all = 0;
    for (size_t p = 0; p < n; p++)
        for (size_t h = 0; h < heads; h++)
            all += parts[p]->heads[h]->n_candidate;
    entry *e = malloc((all ? all : 1) * sizeof *e), *pool = malloc((all ? all : 1) * sizeof *pool);
    if (e == NULL || pool == NULL) {
        free(e);
        free(pool);
        snprintf(err, errlen, "out of memory merging %zu shards", n);
        return -1;
    }
    size_t np = 0;
    for (size_t h = 0; h < heads; h++) {
        size_t m = 0; /* head h's lists, all shards */
        for (size_t p = 0; p < n; p++) {
            const Omld__ShardHead *sh = parts[p]->heads[h];
            if (sh->n_dist != sh->n_candidate)
                goto bad;
            for (size_t j = 0; j < sh->n_candidate; j++) {
                if (sh->candidate[j] >= parts[p]->n_candidates)
                    goto bad;
                e[m++] = (entry){parts[p]->candidates[sh->candidate[j]], sh->dist[j], 0};
            }
        }
        qsort(e, m, sizeof *e, by_dist_then_order);
        if (m > ranked)
            m = ranked;
        for (size_t j = 0; j < m; j++)
            pool[np++] = (entry){e[j].c, e[j].dist,
                                 eq23(e[j].dist, e[0].dist, e[m - 1].dist, parts[0]->alpha[h])};
    }
    /* each item once, at its best score; then ranked */
    qsort(pool, np, sizeof *pool, by_order_then_score);
    size_t nd = 0;
    for (size_t i = 0; i < np; i++)
        if (nd == 0 || pool[nd - 1].c->order != pool[i].c->order)
            pool[nd++] = pool[i];
    qsort(pool, nd, sizeof *pool, by_score_then_order);
    size_t cnt = 0;
    for (size_t i = offset; i < nd && cnt < k; i++) {
        const Omld__ShardCandidate *c = pool[i].c;
        if (has_min && !(c->similarity >= min_similarity))
            continue;
        out[cnt++] = (oml_merged_hit){c->id, c->label_opt_case ? c->label : NULL,
                                      (float)pool[i].score, c->similarity};
    }
    *n_out = cnt;
    free(e);
    free(pool);
    return 0;
bad:
    free(e);
    free(pool);
    snprintf(err, errlen, "a shard's answer names a candidate it does not hold");
    return -1;
}
