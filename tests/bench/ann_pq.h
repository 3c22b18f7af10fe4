/* ann_pq.h - `oml-ann-bench N T --pq`: the lists' search with and
 * without the product codes' first pass (hlist.h pq_keep), side by side
 * on one index and one set of queries. For each first pass (none: the
 * int8 codes scanned whole; else the R rows it hands the int8 codes) the
 * index is calibrated anew (oml_index_calibrate: the lists each head must
 * scan for the target through the whole search), then every query is
 * timed on this thread's CPU clock, all heads: k = 10 with its exact
 * re-rank, and a fresh view's 32 candidates per head by the codes alone;
 * recall@10 against the full scan. */
#ifndef OML_BENCH_ANN_PQ_H
#define OML_BENCH_ANN_PQ_H

#include "index.h"

/* Q (n_q, heads, emb): the queries' embeddings under ix's model. Leaves
 * every head's pq_keep and calibration as they were. Prints a table and
 * one JSON line a setting; returns 0, or 1 when memory ran out. */
int ann_pq_report(oml_index *ix, const float *Q, int32_t n_q);

#endif
