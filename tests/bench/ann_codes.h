/* ann_codes.h - `oml-ann-bench N T --codes`: would fewer bytes a row do?
 * A measurement, not a search: on one head of a built index with lists,
 * for the lists its calibrated search scans, how many of each query's
 * exact 10 nearest rows fall among the R best of the scanned rows by
 * (a) the index's int8 residual codes (64 bytes a row at emb 64),
 * (b) 4-bit scalar residual codes (emb / 2 bytes), and
 * (c) 4-bit product-quantised residuals, 16 centroids per 2 and per 4
 *     dimensions (emb / 4 and emb / 8 bytes),
 * each against the query in floats. A first pass over fewer bytes then a
 * re-rank of its R best is worth building only if (b) or (c) keeps what
 * (a) keeps at an R whose re-rank costs little. */
#ifndef OML_BENCH_ANN_CODES_H
#define OML_BENCH_ANN_CODES_H

#include "index.h"

/* Q (n_q, heads, emb): the queries' embeddings under ix's model. Prints a
 * table; returns 0, or 1 when memory ran out. */
int ann_codes_report(const oml_index *ix, int head, const float *Q, int32_t n_q);

#endif
