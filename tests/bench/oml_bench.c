/* oml-bench - throughput and latency figures of the engine. Prints figures,
 * asserts nothing about time (machines are shared and noisy).
 *
 *   update_per_s_d784   one learner thread, preset default at the paper's
 *                       sizes (d=784, L=5, 100 hidden, 50 emb)
 *   update_per_s_d784_paper          ... preset paper, same sizes
 *   update_per_s_d784_default_sizes  preset default at its own sizes
 *   update_per_s_d784_wide           preset wide at its own sizes
 *   update_per_s_d4096  default at the paper's sizes on 4096-d deep-feature inputs
 *   index_items_per_s   index build of 35,000 items, preset default (what omld serves)
 *   index_rebuild_kept_ms  the same rebuilt with the inputs on the basis kept
 *                       (omld's indexer below rerank_min_items)
 *   classify_p50_ms/p99 one classify query against 35,000 items, the same index
 *   batch100_ms / single100_ms  100 classify queries as one oml_classify_batch and
 *                       one by one (oml_classify), median of 20 alternating rounds */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "config.h"
#include "index.h"
#include "learner.h"
#include "replay.h"
#include "rng.h"
#include "serve.h"
#include "store.h"

extern void openblas_set_num_threads(int);

/* The daemon's indexer below rerank_min_items: one builder whose cache
 * keeps the inputs on the basis (projcache.h), rebuilt for each publish.
 * Best of 5 rebuilds after the one that fills the cache; each must equal
 * `full` (an index built without the cache) bit for bit. */
static double rebuild_kept_ms(oml_snapshot *snap, const oml_store *store, const oml_index *full)
{
    oml_projcache cache;
    oml_projcache_init(&cache, oml_store_slots(store));
    oml_index_builder b = {0};
    double best = 1e9;
    for (int rep = 0; rep < 6; rep++) {
        double t0 = now_s();
        oml_index *ix = NULL;
        b.cache = &cache;
        int rc = oml_index_builder_run(&b, snap, store, &ix);
        if (rc == OML_OK)
            rc = oml_index_add_codes(ix);
        double t = (now_s() - t0) * 1e3;
        size_t floats = (size_t)full->heads * (size_t)full->n * (size_t)full->emb;
        if (rc != OML_OK || ix->n != full->n ||
            memcmp(ix->emb_cols, full->emb_cols, floats * sizeof(float)) != 0) {
            fprintf(stderr, "oml-bench: a rebuild from kept inputs differs from the build\n");
            exit(1);
        }
        oml_index_destroy(ix);
        if (rep > 0)
            best = t < best ? t : best;
    }
    oml_index_builder_free(&b);
    oml_projcache_free(&cache);
    return best;
}

static float *random_items(oml_rng *r, int32_t n, int32_t d)
{
    float *x = malloc((size_t)n * d * sizeof(float));
    for (size_t i = 0; x && i < (size_t)n * d; i++)
        x[i] = oml_rng_uniform(r);
    return x;
}

/* Triplet updates per second for one learner on random inputs of dim d;
 * paper_sizes: the network of the paper's experiments (L=5, 100, 50)
 * instead of the preset's own. */
static double bench_updates(const char *preset, int32_t d, int paper_sizes, int32_t steps)
{
    oml_config c;
    oml_config_preset(&c, preset, d);
    if (paper_sizes) {
        c.layers = 5;
        c.hidden = 100;
        c.emb = 50;
    }
    oml_learner *l = NULL;
    oml_rng r;
    oml_rng_seed(&r, 7);
    int32_t pool = 512;
    float *x = random_items(&r, pool, d);
    if (x == NULL || oml_learner_create(&l, &c, NULL) != OML_OK)
        return -1;
    if (oml_config_needs_data(&c))
        oml_learner_prepare(l, x, NULL, pool);
    /* New triplets as omld learns them: requests of 256 through the
     * rehearsal ring (mini-batches where the preset has them; no
     * rehearsal is paid here: this is the speed of taking new triplets). */
    enum { REQ = 256 };
    static const float *rows[3 * REQ];
    oml_replay ring;
    if (oml_replay_init(&ring, 0) != OML_OK)
        return -1;
    double t0 = 0;
    for (int32_t i = -REQ; i < steps; i += REQ) { /* the first request warms up */
        if (i == 0)
            t0 = now_s();
        for (int t = 0; t < REQ; t++)
            for (int k = 0; k < 3; k++)
                rows[3 * t + k] = x + oml_rng_below(&r, (uint64_t)pool) * (size_t)d;
        oml_replay_learn(&ring, l, rows, NULL, NULL, REQ);
    }
    steps = (steps + REQ - 1) / REQ * REQ;
    oml_replay_free(&ring);
    double rate = steps / (now_s() - t0);
    oml_learner_destroy(l);
    free(x);
    return rate;
}

int main(int argc, char **argv)
{
    int32_t steps = 20000;
    if (argc > 2 || (argc == 2 && (steps = atoi(argv[1])) < 100)) {
        fprintf(stderr, "usage: oml-bench [STEPS]   (triplet updates timed per preset, >= 100; "
                        "default 20000)\n");
        return 2;
    }
    openblas_set_num_threads(1);
    oml_rng r;
    oml_rng_seed(&r, 1);

    double u784 = bench_updates("default", 784, 1, steps);
    double u784p = bench_updates("paper", 784, 1, steps);
    double u784own = bench_updates("default", 784, 0, steps);
    double u4096 = bench_updates("default", 4096, 1, steps / 4);
    double u784wide = bench_updates("wide", 784, 0, steps);
    oml_config c;
    oml_config_preset(&c, "default", 784);
    printf("update, paper sizes (L=5, 100, 50): d=784 default %.0f/s, paper %.0f/s; "
           "d=4096 default %.0f/s\n", u784, u784p, u4096);
    printf("update, default's own sizes (L=%d, %d, %d): d=784 %.0f/s\n", c.layers, c.hidden,
           c.emb, u784own);
    printf("update, the wide preset (L=2, 256, 128): d=784 %.0f/s (%.2fx the default)\n",
           u784wide, u784wide / u784own);

    /* Index of 35,000 items under the default preset (its own sizes). */
    const int32_t n = 35000, d = 784;
    float *items = random_items(&r, n, d);
    oml_store *store = NULL;
    oml_learner *l = NULL;
    if (!items || oml_store_create(&store, d, (uint32_t)n) != OML_OK ||
        oml_learner_create(&l, &c, NULL) != OML_OK)
        return 1;
    oml_learner_prepare(l, items, NULL, 5000);
    for (int32_t i = 0; i < n; i++) {
        char id[32], lab[8];
        int il = snprintf(id, sizeof id, "item-%d", i), ll = snprintf(lab, sizeof lab, "%d", i % 10);
        if (oml_store_put(store, id, (size_t)il, items + (size_t)i * d, lab, (size_t)ll, NULL, NULL) != OML_OK)
            return 1;
    }
    oml_snapshot *snap = oml_learner_snapshot(l, 1);
    double best = 1e9;
    oml_index *ix = NULL;
    for (int rep = 0; rep < 5; rep++) {
        oml_index_destroy(ix);
        ix = NULL;
        double t0 = now_s();
        if (oml_index_build(&ix, snap, store) != OML_OK)
            return 1;
        double t = now_s() - t0;
        best = t < best ? t : best;
    }
    printf("index build: %d items in %.1f ms (best of 5), %.0f items/s\n", n, best * 1e3, n / best);
    double kept = rebuild_kept_ms(snap, store, ix);
    printf("index rebuild, inputs on the basis kept (omld's indexer below rerank_min_items): "
           "%.1f ms (best of 5), %.2fx the build\n", kept, kept / (best * 1e3));

    const int Q = 1000;
    double *lat = malloc(Q * sizeof(double));
    for (int q = 0; q < Q; q++) {
        const float *x = items + oml_rng_below(&r, (uint64_t)n) * d;
        oml_classification res;
        double t0 = now_s();
        oml_classify(ix, x, 5, -1, &res, NULL);
        lat[q] = (now_s() - t0) * 1e3;
    }
    qsort(lat, Q, sizeof(double), cmp_double);
    double p50 = lat[Q / 2], p99 = lat[Q * 99 / 100];
    printf("classify: k=5 against %d items, p50 %.3f ms, p99 %.3f ms (%d queries)\n", n, p50, p99, Q);

    /* 100 queries one by one and as one batch, side by side. */
    enum { B = 100, ROUNDS = 20 };
    oml_query bq[B];
    static oml_classification bout[B];
    double t_single[ROUNDS], t_batch[ROUNDS];
    for (int rd = 0; rd < ROUNDS; rd++) {
        for (int i = 0; i < B; i++)
            bq[i] = (oml_query){items + oml_rng_below(&r, (uint64_t)n) * d, 5, -1, NULL};
        for (int way = 0; way < 2; way++) {
            double t0 = now_s();
            if ((way + rd) % 2 == 0)
                for (int i = 0; i < B; i++)
                    oml_classify(ix, bq[i].x, 5, -1, &bout[i], NULL);
            else
                oml_classify_batch(ix, bq, B, bout, NULL);
            ((way + rd) % 2 == 0 ? t_single : t_batch)[rd] = now_s() - t0;
        }
    }
    double single100 = quantile(t_single, ROUNDS, 0.5), batch100 = quantile(t_batch, ROUNDS, 0.5);
    printf("classify %d queries against %d items: one by one %.2f ms, one batch %.2f ms: "
           "%.2fx the throughput (medians of %d rounds)\n", B, n, single100 * 1e3, batch100 * 1e3,
           single100 / batch100, ROUNDS);
    printf("{\"update_per_s_d784\":%.0f,\"update_per_s_d784_paper\":%.0f,"
           "\"update_per_s_d784_default_sizes\":%.0f,\"update_per_s_d784_wide\":%.0f,"
           "\"update_per_s_d4096\":%.0f,"
           "\"index_items_per_s\":%.0f,\"index_build_ms\":%.2f,\"index_rebuild_kept_ms\":%.2f,\"classify_p50_ms\":%.4f,"
           "\"classify_p99_ms\":%.4f,\"single100_ms\":%.3f,\"batch100_ms\":%.3f}\n",
           u784, u784p, u784own, u784wide, u4096, n / best, best * 1e3, kept, p50, p99, single100 * 1e3,
           batch100 * 1e3);
    free(lat);
    oml_index_destroy(ix);
    oml_snapshot_release(snap);
    oml_learner_destroy(l);
    oml_store_destroy(store);
    free(items);
    return 0;
}
