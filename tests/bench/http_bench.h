/* http_bench.h - omld-bench --http: the HTTP/JSON API beside the RPC. */
#ifndef OMLD_HTTP_BENCH_H
#define OMLD_HTTP_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "omlclient.h"

/* Classify latency (n_queries vectors of dim, per_round each way per round)
 * and triplet ingest (from t, by id) over c (RPC) and over HTTP at http
 * ("HOST:PORT"), alternating; prints the figures and a JSON line. 0 or 1. */
int omld_http_bench(omlc *c, const char *http, const float *queries, int32_t n_queries,
                    int32_t dim, const omlc_triplet *t, size_t n_triplets, int per_round);

#endif
