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

/* How much of their energy rows the directions were not fitted on keep in
 * them, against the rows they were: the top k directions of the even rows
 * of X (n, d, centred at the origin) keep the share f_fit of those rows'
 * squared norm and f_new of the odd rows'; *ratio = f_new / f_fit (1: new
 * rows are held as well as the fitted ones). With fewer rows than
 * dimensions the directions fit their own rows' noise, and new rows fall
 * mostly outside them. OML_OK; OML_EINVAL (n < 2, k outside [1, d]),
 * OML_ENOMEM, OML_EIO. */
int oml_pca_heldout_ratio(const float *X, int32_t n, int32_t d, int32_t k, double *ratio);

/* The PCA pass-through network: the weights that make a ReLU trunk and a
 * linear head compute z = P x for P (emb, d), shared by the live model's
 * and the batch trainers' PCA starts. Hidden layer 1 holds [P x]+ and
 * [-P x]+ in its first 2*emb units (rows +P and -P of W (hidden, d)), each
 * deeper layer passes those units on (identity rows of W (hidden, w); ReLU
 * of a non-negative value is itself) and a head reads their difference
 * (Theta (emb, hidden) with Theta[r][r] = 1, Theta[r][emb + r] = -1, zero
 * elsewhere). Only the first 2*emb rows of each W are written: the other
 * hidden units keep their random rows and, with zero head weight, start
 * silent but alive for the gradient to recruit. It fits a network of the
 * given depth (hidden layers) when emb <= dim and, at depth >= 1,
 * hidden >= 2*emb: oml_pca_passthrough_fits says 1 then, else 0.
 * With k < emb components (fewer input dimensions than emb), only the
 * first k rows of P are passed: the units of rows k..emb-1 keep their
 * random weights and the head reads zero from them. */
int oml_pca_passthrough_fits(int32_t dim, int32_t depth, int32_t hidden, int32_t emb);
void oml_pca_passthrough_first(float *W, int32_t d, const float *P, int32_t emb, int32_t k);
void oml_pca_passthrough_deeper(float *W, int32_t w, int32_t emb);
void oml_pca_passthrough_head(float *theta, int32_t hidden, int32_t emb, int32_t k);

#endif
