/* batch_queries.c - `omld-bench --batch-queries` (batch_queries.h): what
 * ClassifyBatch buys over single requests, measured side by side in one
 * run through the same daemon. Two ways keep one request in flight: the B
 * single requests one after the other, and one batch of B (answered on one
 * pool thread by liboml's batched search, src/serve_batch.c). Two ways use
 * every core (the daemon's query pool answers requests in flight in
 * parallel): the B single requests pipelined (all in flight), and two
 * batches of B/2 at once on two connections. Figures, never assertions on
 * time. */
#include "batch_queries.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

/* Two ways use one core of the daemon's at a time (one request in flight),
 * two use all of them (the pool answers requests in flight in parallel). */
enum { WAY_SINGLE, WAY_BATCH, WAY_PIPELINED, WAY_HALVES, WAYS };
static const char *const WAY_NAME[WAYS] = {"single, one by one", "one batch",
                                           "single, pipelined", "two half batches"};

/* The second half batch of WAY_HALVES, on its own connection and thread. */
typedef struct half {
    omlc *c;
    const omlc_ref *q;
    size_t n;
    uint32_t k;
    omlc_classification *out;
    int rc;
    omlc_error err;
} half;

static void *half_main(void *arg)
{
    half *h = arg;
    h->rc = omlc_classify_batch(h->c, h->q, h->n, h->k, NULL, h->out, &h->err);
    return NULL;
}

/* One way, once: the B queries q answered into out; seconds, or -1. */
static double run_way(omlc *c, omlc *c2, int way, const omlc_ref *q, int b, uint32_t k,
                      omlc_classification *out)
{
    omlc_error err;
    int rc = 0;
    double t0 = now_s();
    if (way == WAY_SINGLE) {
        for (int i = 0; i < b && rc == 0; i++)
            rc = omlc_classify(c, &q[i], k, NULL, &out[i], &err);
    } else if (way == WAY_PIPELINED) {
        rc = omlc_classify_pipelined(c, q, (size_t)b, k, NULL, (size_t)b, out, NULL, NULL, &err);
    } else if (way == WAY_BATCH) {
        rc = omlc_classify_batch(c, q, (size_t)b, k, NULL, out, &err);
    } else {
        size_t h1 = (size_t)b / 2;
        half h = {c2, q + h1, (size_t)b - h1, k, out + h1, 0, {0}};
        pthread_t th;
        pthread_create(&th, NULL, half_main, &h);
        rc = omlc_classify_batch(c, q, h1, k, NULL, out, &err);
        pthread_join(th, NULL);
        if (rc == 0 && h.rc != 0) {
            rc = h.rc;
            err = h.err;
        }
    }
    double t = now_s() - t0;
    if (rc != 0) {
        fprintf(stderr, "omld-bench: %s: %s (%s)\n", WAY_NAME[way], err.message, err.field);
        return -1;
    }
    return t;
}

int omld_batch_bench(omlc *c, omlc *c2, const float *Q, int32_t n_q, int32_t dim, int batch,
                     int rounds, uint32_t k, int64_t items)
{
    omlc_ref *q = malloc((size_t)batch * sizeof *q);
    omlc_classification *out[WAYS];
    double *t[WAYS];
    for (int w = 0; w < WAYS; w++) {
        out[w] = malloc((size_t)batch * sizeof *out[w]);
        t[w] = malloc((size_t)rounds * sizeof *t[w]);
    }
    int rc = 0, compared = 0, differ = 0;
    for (int r = 0; r < rounds && rc == 0; r++) {
        for (int i = 0; i < batch; i++)
            q[i] = (omlc_ref){NULL, Q + (size_t)(((int64_t)r * batch + i) % n_q) * dim,
                              (uint32_t)dim};
        for (int j = 0; j < WAYS && rc == 0; j++) {
            int w = (r + j) % WAYS; /* each way goes first, second and last in turn */
            if ((t[w][r] = run_way(c, c2, w, q, batch, k, out[w])) < 0)
                rc = 1;
        }
        /* The batches answer as the single requests did, when one model
         * version answered all of them (the learner may publish between). */
        int same = 1;
        for (int w = 1; w < WAYS; w++)
            for (int i = 0; i < batch; i++)
                same &= out[WAY_SINGLE][i].model_version == out[w][i].model_version;
        for (int w = 1; same && w < WAYS; w++)
            for (int i = 0; i < batch; i++)
                differ += strcmp(out[WAY_SINGLE][i].label, out[w][i].label) != 0 ||
                          out[WAY_SINGLE][i].scores[0].score != out[w][i].scores[0].score;
        compared += same;
    }
    double med[WAYS];
    if (rc == 0) {
        printf("  %d classify queries (k=%u) at %lld items, %d rounds, median [min]:\n", batch, k,
               (long long)items, rounds);
        for (int w = 0; w < WAYS; w++) {
            double lo = quantile(t[w], rounds, 0.0);
            med[w] = quantile(t[w], rounds, 0.5);
            printf("    %-20s %8.2f ms [%6.2f]  %7.0f queries/s\n", WAY_NAME[w], med[w] * 1e3,
                   lo * 1e3, batch / med[w]);
        }
        printf("  batch throughput: one batch %.2fx the singles one by one (one request in "
               "flight each);\n  two half batches at once %.2fx the singles pipelined (every "
               "core); one batch %.2fx the singles pipelined\n",
               med[WAY_SINGLE] / med[WAY_BATCH], med[WAY_PIPELINED] / med[WAY_HALVES],
               med[WAY_PIPELINED] / med[WAY_BATCH]);
        printf("  answers compared with the singles' in %d rounds (one model version): %d "
               "differ\n", compared, differ);
        printf("{\"bench\":\"omld-batch-queries\",\"items\":%lld,\"batch\":%d,\"k\":%u,"
               "\"rounds\":%d,\"single_ms\":%.3f,\"batch_ms\":%.3f,\"pipelined_ms\":%.3f,"
               "\"halves_ms\":%.3f,\"ratio_batch_single\":%.3f,\"ratio_halves_pipelined\":%.3f,"
               "\"ratio_batch_pipelined\":%.3f,\"compared\":%d,\"differ\":%d}\n",
               (long long)items, batch, k, rounds, med[WAY_SINGLE] * 1e3, med[WAY_BATCH] * 1e3,
               med[WAY_PIPELINED] * 1e3, med[WAY_HALVES] * 1e3, med[WAY_SINGLE] / med[WAY_BATCH],
               med[WAY_PIPELINED] / med[WAY_HALVES], med[WAY_PIPELINED] / med[WAY_BATCH],
               compared, differ);
    }
    for (int w = 0; w < WAYS; w++) {
        free(out[w]);
        free(t[w]);
    }
    free(q);
    return rc || differ ? 1 : 0;
}
