/* tls_bench.c - RPC over TLS against plain TCP (omld-bench --tls): two
 * daemons with the same items, one with tls_cert, queried in alternating
 * rounds. Classify by vector is a 3 KB request and a small answer: what
 * TLS adds per call (a record each way, AES-GCM over a few KB) is what
 * the figure shows; ingest shows it on 20 KB requests in flight; a new
 * connection shows the handshake. */
#include "tls_bench.h"

#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"

#define ROUNDS 4
#define CONNECTS 20

/* Classify latency of one query (ms), or -1. */
static double classify_ms(omlc *c, const float *x, int32_t dim)
{
    omlc_ref q = {NULL, x, (uint32_t)dim};
    omlc_classification cl;
    omlc_error err;
    double t0 = now_s();
    if (omlc_classify(c, &q, 5, NULL, &cl, &err) != 0) {
        fprintf(stderr, "omld-bench: classify: %s\n", err.message);
        return -1;
    }
    return (now_s() - t0) * 1e3;
}

/* A new connection's first answer (ms): connect, handshake, Health. -1 on
 * a failure. */
static double connect_ms(const char *server, const omlc_tls *tls)
{
    omlc *c = NULL;
    omlc_error err;
    int live, ready, draining;
    double t0 = now_s();
    if (omlc_connect_tls(&c, server, tls, 10000, &err) != 0 ||
        omlc_health(c, &live, &ready, &draining, &err) != 0) {
        fprintf(stderr, "omld-bench: connect %s: %s\n", server, err.message);
        omlc_close(c);
        return -1;
    }
    double ms = (now_s() - t0) * 1e3;
    omlc_close(c);
    return ms;
}

int omld_tls_bench(omlc *c_plain, omlc *c_tls, const char *plain, const char *tls,
                   const char *cafile, const float *queries, int32_t n_queries, int32_t dim,
                   const omlc_triplet *t, size_t n_triplets, int per_round)
{
    int q = per_round * ROUNDS;
    double *lat[2] = {malloc((size_t)q * sizeof(double)), malloc((size_t)q * sizeof(double))};
    double conn[2][ROUNDS * CONNECTS];
    double ingest_s[2] = {0, 0};
    size_t ingested[2] = {0, 0}, next_t = 0;
    omlc *c[2] = {c_plain, c_tls};
    const char *server[2] = {plain, tls};
    omlc_tls opt = {.cafile = cafile};
    const omlc_tls *tls_of[2] = {NULL, &opt};
    omlc_error err;
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < per_round; i++) {
            const float *x = queries + (size_t)((round * per_round + i) % n_queries) * dim;
            for (int w = 0; w < 2; w++) { /* the ways take turns to go first */
                int way = (i + w) % 2;
                if ((lat[way][round * per_round + i] = classify_ms(c[way], x, dim)) < 0)
                    return 1;
            }
        }
        for (int k = 0; k < 2; k++) { /* the ways take turns to go first */
            int w = (round + k) % 2;
            size_t n = 16 * 256;
            if (next_t + n > n_triplets)
                break;
            double t0 = now_s();
            if (omlc_add_triplets_pipelined(c[w], t + next_t, n, 256, 16, NULL, NULL, &err) != 0) {
                fprintf(stderr, "omld-bench: triplets: %s\n", err.message);
                return 1;
            }
            ingest_s[w] += now_s() - t0;
            ingested[w] += n;
            next_t += n;
        }
        for (int i = 0; i < CONNECTS; i++)
            for (int k = 0; k < 2; k++) {
                int w = (i + k) % 2;
                if ((conn[w][round * CONNECTS + i] = connect_ms(server[w], tls_of[w])) < 0)
                    return 1;
            }
    }
    double p50[2], p99[2], rate[2], c50[2];
    for (int w = 0; w < 2; w++) {
        p50[w] = quantile(lat[w], q, 0.5);
        p99[w] = quantile(lat[w], q, 0.99);
        rate[w] = ingest_s[w] > 0 ? (double)ingested[w] / ingest_s[w] : 0;
        c50[w] = quantile(conn[w], ROUNDS * CONNECTS, 0.5);
        free(lat[w]);
    }
    printf("  classify by vector, one client, %d queries each way: plain p50 %.3f ms p99 %.3f ms; "
           "TLS p50 %.3f ms p99 %.3f ms: p50 ratio %.2f\n", q, p50[0], p99[0], p50[1], p99[1],
           p50[1] / p50[0]);
    printf("  triplets by id, batches of 256, 16 in flight: plain %.0f/s, TLS %.0f/s: ratio %.2f\n",
           rate[0], rate[1], rate[1] / rate[0]);
    printf("  a new connection's first answer (connect, handshake, Health): plain p50 %.3f ms, "
           "TLS p50 %.3f ms\n", c50[0], c50[1]);
    printf("{\"bench\":\"tls\",\"classify_plain_p50_ms\":%.3f,\"classify_tls_p50_ms\":%.3f,"
           "\"classify_p50_ratio\":%.3f,\"triplets_plain_per_s\":%.0f,\"triplets_tls_per_s\":%.0f,"
           "\"triplets_ratio\":%.3f,\"connect_plain_p50_ms\":%.3f,\"connect_tls_p50_ms\":%.3f}\n",
           p50[0], p50[1], p50[1] / p50[0], rate[0], rate[1], rate[1] / rate[0], c50[0], c50[1]);
    return 0;
}
