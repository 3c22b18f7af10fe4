/* tls_bench.h - omld-bench --tls: RPC over TLS beside plain TCP. */
#ifndef OMLD_TLS_BENCH_H
#define OMLD_TLS_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "omlclient.h"

/* Two daemons holding the same items, plain at `plain` and TLS at `tls`
 * (verified against cafile), reached by c_plain and c_tls: classify latency
 * (per_round vector queries each way per round, k = 5), triplet ingest
 * (batches of 256 by id, 16 in flight, from t) and a new connection's
 * first answer (connect, handshake, Health), the two taking turns to go
 * first so the machine's noise falls on both. Prints the figures and a JSON line. 0 or 1. */
int omld_tls_bench(omlc *c_plain, omlc *c_tls, const char *plain, const char *tls,
                   const char *cafile, const float *queries, int32_t n_queries, int32_t dim,
                   const omlc_triplet *t, size_t n_triplets, int per_round);

#endif
