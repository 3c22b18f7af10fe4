/* loo_knn.h - leave-one-out kNN error of an embedding on labelled rows:
 * how the live model's start is chosen among the data-dependent ones
 * (learner.c, OML_INIT_AUTO). It is the error the daemon's kNN classify
 * would make on its own stored items, each classified by the others. */
#ifndef OML_LOO_KNN_H
#define OML_LOO_KNN_H

#include <stdint.h>

/* The n rows of E (n, e), unit norm, labelled labels[i] >= 0: each of up
 * to max_q of them (every (n/max_q)-th, so the choice is a pure function
 * of the rows) is classified by the majority label of its k nearest other
 * rows (by inner product; a tie between labels goes to the label of the
 * nearer neighbour). Returns the fraction misclassified, NAN when n <= k
 * or on allocation failure; wrong (may be NULL; min(n, max_q) bytes) gets
 * 1 for each query misclassified, in query order, so that two embeddings
 * of the same rows can be compared query by query. */
float oml_loo_knn_error(const float *E, const int32_t *labels, int32_t n, int32_t e, int32_t k,
                        int32_t max_q, uint8_t *wrong);

#endif
