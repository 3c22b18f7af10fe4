/* ann_graph.h - `oml-ann-bench N T --graph`: would a graph (hgraph.h, HNSW)
 * find the candidates with fewer rows read than the lists? A measurement
 * on the bench's index, not a search omld uses:
 *   build       each head's graph over its rows (thread CPU seconds, bytes)
 *   search      for a few widths ef: CPU per query over all heads for
 *               k = 10 and a fresh view's 32 candidates per head, the rows
 *               scored, recall@10 against the exact scan; the lists'
 *               figures on the same queries beside them
 *   one graph   head 0's graph's candidates serving every head
 *   drift       after T + 10,000 and T + 40,000 triplets (the live model
 *               moves on): the old graph's candidates re-ranked under the
 *               new model, and the old links routed on the new embeddings,
 *               against the new model's exact scan; the lists' fresh-view
 *               candidates the same way.
 * Environment: OML_GRAPH_M (16), OML_GRAPH_EFC (100), OML_GRAPH_HEADS (all). */
#ifndef OML_BENCH_ANN_GRAPH_H
#define OML_BENCH_ANN_GRAPH_H

#include <stdint.h>

#include "catalogue.h"
#include "index.h"
#include "learner.h"
#include "store.h"

/* Learns T more triplets of the catalogue's first n items into l, from
 * the generator state *rs (ann_bench.c: the same stream as its first T). */
void ann_learn(oml_learner *l, const catalogue *c, int64_t n, int64_t T, uint64_t *rs);

/* ix: the index with calibrated lists under snap, l's model; st: its
 * store. Prints the report; 0, or 1 when something failed. */
int ann_graph_report(oml_learner *l, oml_snapshot *snap, oml_index *ix, const oml_store *st,
                     const catalogue *c, uint64_t *rs);

#endif
