/* ivf.h - spherical k-means over unit vectors: the centroids of inverted
 * lists (hlist.h: each head of a large index has its own lists). Pure
 * functions of their inputs: the same rows give the same centroids on
 * every run (no random seed: the sample and the first centroids are
 * strided). */
#ifndef OML_IVF_H
#define OML_IVF_H

#include <stddef.h>
#include <stdint.h>

/* Trains n_lists centroids (n_lists, d), each of unit norm, on rows (n, d)
 * by spherical k-means (assignment by the largest dot product) over a
 * strided sample of at most 64 rows per list. OML_OK, OML_EINVAL (n <
 * n_lists), OML_ENOMEM. */
int oml_ivf_train(const float *rows, size_t n, int32_t d, int32_t n_lists, float *centroids);

/* The list of each row (n): the centroid with the largest dot product
 * (ties: the smaller list). OML_OK or OML_ENOMEM. */
int oml_ivf_assign(const float *rows, size_t n, int32_t d, const float *centroids,
                   int32_t n_lists, int32_t *list_of);

/* The first position of the largest of r[0 .. n) (n >= 1; a NaN is never
 * the largest unless it is r[0], which is then the answer): an AVX2
 * kernel where the machine has it, and the scalar loop, which give the
 * same position. */
int32_t oml_ivf_first_max(const float *r, int32_t n);
int32_t oml_ivf_first_max_portable(const float *r, int32_t n);

#endif
