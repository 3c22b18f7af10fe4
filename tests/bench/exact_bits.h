/* exact_bits.h - `oml-ann-bench N T --codes`, before the lists: how many
 * rows would an exact first pass over shorter codes leave to re-rank?
 * On one head of an index with the exact scan's codes (codescan.h), each
 * row split along the head's direction as they are, its residual coded
 * with 127 levels a side (int8, what the scan reads) and with 7 (4-bit
 * scalar, half the bytes), the query's orthogonal part in int8: the rows
 * whose code's dot product + bound reaches the k-th largest dot - bound,
 * the rows the exact re-rank must see. A measurement in double, not a
 * kernel. */
#ifndef OML_BENCH_EXACT_BITS_H
#define OML_BENCH_EXACT_BITS_H

#include "index.h"

/* Q (n_q, heads, emb): the queries' embeddings under ix's model. Prints
 * a line per code; returns 0, or 1 when memory ran out (or ix has no
 * codes). */
int exact_bits_report(const oml_index *ix, int head, const float *Q, int32_t n_q, int32_t k);

#endif
