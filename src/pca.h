/* pca.h - principal directions of a set of rows (LAPACK ssyevr_ through
 * OpenBLAS): the PCA starts of the live model and of the batch trainers.
 *
 * Thread-safe (no shared state); allocates its own work space. */
#ifndef OML_PCA_H
#define OML_PCA_H

#include <stdint.h>

/* Top k principal directions of the rows of X (row stride d) centred at mu
 * (NULL: the origin): the n rows rows[0..n) (rows NULL: rows 0..n-1).
 * out (k, d) gets unit rows by descending variance, each signed so that its
 * largest-magnitude entry is positive (a deterministic sign); var (k, may be
 * NULL) gets each direction's variance, noise (may be NULL) the mean
 * variance of the d - k directions left out (the isotropic noise level of
 * probabilistic PCA, Tipping & Bishop 1999; 0 when k = d). The
 * covariance is accumulated in chunks, so memory is O(d^2 + chunk d).
 * OML_EINVAL (k outside [1, d], n < 1), OML_ENOMEM, OML_EIO (LAPACK failed). */
int oml_pca_components(const float *X, const int32_t *rows, int32_t n, int32_t d,
                       const float *mu, int32_t k, float *out, float *var, float *noise);

#endif
