/* shard_merge.c - see shard_merge.h. */
#include "shard_merge.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vote.h"

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

/* Head h's nearest `ranked` of the union of the shards' lists, into e by
 * (distance, slot): as one index holding all their items ranks them. Their
 * count, or (size_t)-1 for an answer naming a candidate it does not hold. */
static size_t head_union(Omld__ShardRetrieveResponse *const *parts, size_t n, size_t h,
                         size_t ranked, entry *e)
{
    size_t m = 0;
    for (size_t p = 0; p < n; p++) {
        const Omld__ShardHead *sh = parts[p]->heads[h];
        if (sh->n_dist != sh->n_candidate)
            return (size_t)-1;
        for (size_t j = 0; j < sh->n_candidate; j++) {
            if (sh->candidate[j] >= parts[p]->n_candidates)
                return (size_t)-1;
            e[m++] = (entry){parts[p]->candidates[sh->candidate[j]], sh->dist[j], 0};
        }
    }
    qsort(e, m, sizeof *e, by_dist_then_order);
    return m < ranked ? m : ranked;
}

/* Every candidate of every head, counted: the size a merge's lists need. */
static size_t all_listed(Omld__ShardRetrieveResponse *const *parts, size_t n, size_t heads)
{
    size_t all = 0;
    for (size_t p = 0; p < n; p++)
        for (size_t h = 0; h < heads; h++)
            all += parts[p]->heads[h]->n_candidate;
    return all;
}

int oml_shard_merge(Omld__ShardRetrieveResponse *const *parts, size_t n, uint32_t k,
                    uint32_t offset, int has_min, float min_similarity, oml_merged_hit *out,
                    size_t *n_out, char *err, size_t errlen)
{
    *n_out = 0;
    if (n == 0 || same_model(parts, n, err, errlen) != 0)
        return n == 0 ? (snprintf(err, errlen, "no shard answered"), -1) : -1;
    size_t heads = parts[0]->n_heads, ranked = (size_t)offset + k;
    size_t all = all_listed(parts, n, heads);
    entry *e = malloc((all ? all : 1) * sizeof *e), *pool = malloc((all ? all : 1) * sizeof *pool);
    if (e == NULL || pool == NULL) {
        free(e);
        free(pool);
        snprintf(err, errlen, "out of memory merging %zu shards", n);
        return -1;
    }
    size_t np = 0;
    for (size_t h = 0; h < heads; h++) {
        size_t m = head_union(parts, n, h, ranked, e);
        if (m == (size_t)-1)
            goto bad;
        for (size_t j = 0; j < m; j++)
            pool[np++] = (entry){e[j].c, e[j].dist,
                                 oml__eq23_score(e[j].dist, e[0].dist, e[m - 1].dist,
                                                 parts[0]->alpha[h])};
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

static int by_u32(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    return a < b ? -1 : a > b;
}

/* The label ids the lists name, made dense in their order (a tie in the
 * vote goes to the smaller id, so the order is all that matters): labels
 * (slots, raw ids or -1) rewritten in place, their names in names. The
 * count of labels. */
static size_t dense_labels(int32_t *labels, const char **raw_names, size_t slots,
                           uint32_t *ids, const char **names)
{
    size_t nl = 0;
    for (size_t i = 0; i < slots; i++)
        if (labels[i] >= 0)
            ids[nl++] = (uint32_t)labels[i];
    qsort(ids, nl, sizeof *ids, by_u32);
    size_t nd = 0;
    for (size_t i = 0; i < nl; i++)
        if (nd == 0 || ids[nd - 1] != ids[i])
            ids[nd++] = ids[i];
    for (size_t i = 0; i < slots; i++) {
        if (labels[i] < 0)
            continue;
        uint32_t want = (uint32_t)labels[i];
        uint32_t *at = bsearch(&want, ids, nd, sizeof *ids, by_u32);
        labels[i] = (int32_t)(at - ids);
        names[labels[i]] = raw_names[i];
    }
    return nd;
}

int oml_shard_classify(Omld__ShardRetrieveResponse *const *parts, size_t n, uint32_t k,
                       oml_merged_class *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (n == 0 || same_model(parts, n, err, errlen) != 0)
        return n == 0 ? (snprintf(err, errlen, "no shard answered"), -1) : -1;
    size_t heads = parts[0]->n_heads, all = all_listed(parts, n, heads);
    if (heads > OML_MAX_LAYERS + 1) {
        snprintf(err, errlen, "a shard's answer has %zu heads (at most %d)", heads,
                 OML_MAX_LAYERS + 1);
        return -1;
    }
    /* The vote's rows are the places in nb (heads, k), each with its label. */
    size_t slots = heads * (size_t)k, one = slots ? slots : 1;
    entry *e = malloc((all ? all : 1) * sizeof *e);
    oml_neighbor *nb = malloc(one * sizeof *nb);
    int32_t *labels = malloc(one * sizeof *labels);
    uint32_t *ids = malloc(one * sizeof *ids);
    const char **raw = calloc(one, sizeof *raw), **names = calloc(one, sizeof *names);
    void *ws_mem = malloc(oml__vote_ws_bytes(slots, slots) + 8);
    int rc = -1;
    if (!e || !nb || !labels || !ids || !raw || !names || !ws_mem) {
        snprintf(err, errlen, "out of memory merging %zu shards", n);
        goto done;
    }
    int32_t cnt[OML_MAX_LAYERS + 1] = {0};
    for (size_t h = 0; h < heads; h++) {
        size_t m = head_union(parts, n, h, k, e);
        if (m == (size_t)-1) {
            snprintf(err, errlen, "a shard's answer names a candidate it does not hold");
            goto done;
        }
        cnt[h] = (int32_t)m;
        for (size_t j = 0; j < m; j++) {
            size_t at = h * k + j;
            int labelled = e[j].c->label_opt_case != 0 && e[j].c->label_id <= INT32_MAX;
            nb[at] = (oml_neighbor){(int32_t)at, e[j].dist};
            labels[at] = labelled ? (int32_t)e[j].c->label_id : -1;
            raw[at] = e[j].c->label;
        }
        for (size_t j = m; j < k; j++)
            labels[h * k + j] = -1;
    }
    size_t n_labels = dense_labels(labels, raw, slots, ids, names);
    vote_ws ws;
    oml__vote_ws_init(&ws, ws_mem, n_labels, slots);
    oml__voter vt = {(int)heads, parts[0]->alpha, labels};
    oml_classification c;
    int32_t best;
    rc = 0;
    if (oml__vote(&vt, nb, cnt, (int32_t)k, &ws, &best, &c) != OML_OK)
        goto done; /* no labelled neighbour: an empty answer, as on one node */
    out->label = names[c.label];
    out->n_scores = c.n_classes;
    for (int32_t i = 0; i < c.n_classes; i++) {
        out->scores[i].label = names[c.classes[i].label];
        out->scores[i].score = c.classes[i].score;
    }
done:
    free(e);
    free(nb);
    free(labels);
    free(ids);
    free(raw);
    free(names);
    free(ws_mem);
    return rc;
}

void oml_merged_class_message(const oml_merged_class *m, Omld__ClassifyResponse *resp,
                              Omld__ClassScore *sc, Omld__ClassScore **sp)
{
    omld__classify_response__init(resp);
    resp->label = (char *)(m->label ? m->label : "");
    for (int i = 0; i < m->n_scores; i++) {
        omld__class_score__init(&sc[i]);
        sc[i].label = (char *)m->scores[i].label;
        sc[i].score = m->scores[i].score;
        sp[i] = &sc[i];
    }
    resp->n_scores = (size_t)m->n_scores;
    resp->scores = sp;
}
