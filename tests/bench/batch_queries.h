/* batch_queries.h - `omld-bench --batch-queries`: a ClassifyBatch of B
 * queries against B single Classify requests, through one omld
 * (batch_queries.c). */
#ifndef OMLD_BENCH_BATCH_QUERIES_H
#define OMLD_BENCH_BATCH_QUERIES_H

#include <stdint.h>

#include "omlclient.h"

/* Classifies B = batch queries of Q (n_q rows of dim floats; round r takes
 * rows r*B.. modulo n_q) with k neighbours, `rounds` times each way, the
 * ways taking turns to go first: B single requests one after the other,
 * one ClassifyBatch of B, B single requests pipelined (all in flight), two
 * ClassifyBatch of B/2 at once (c and c2, two connections to one omld).
 * Prints the median time and throughput of each way and the ratios, checks
 * that the batches' answers equal the single ones' (when one model version
 * answered all), and last one JSON line. 0, or 1 on a failure. */
int omld_batch_bench(omlc *c, omlc *c2, const float *Q, int32_t n_q, int32_t dim, int batch,
                     int rounds, uint32_t k, int64_t items);

#endif
