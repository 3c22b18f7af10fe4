/* standardize.h - z-scoring features with the statistics of some rows.
 *
 * The evaluation tools standardise with the dev half only (the stored,
 * labelled items), never with the test items they then classify:
 * --standardize 1 (the features every method sees) and --method std (kNN on
 * standardised features, the baseline of issue 11). */
#ifndef OML_STANDARDIZE_H
#define OML_STANDARDIZE_H

#include <stdint.h>

/* mean and sd (dim each) of the rows `rows` (n_rows; NULL: rows 0..n_rows-1)
 * of X (., dim): sd with divisor n_rows, in double. An sd of 0 (a constant
 * feature) is set to 1, so that feature only loses its mean. Returns 0, or
 * -1 if n_rows < 1 or out of memory. */
int oml_standardize_fit(const float *X, int32_t dim, const int32_t *rows, int32_t n_rows,
                        float *mean, float *sd);

/* X (n, dim) in place: x_j = (x_j - mean_j) / sd_j. */
void oml_standardize_apply(float *X, int32_t n, int32_t dim, const float *mean, const float *sd);

#endif
