/* ivf.h - an inverted file over unit vectors: spherical k-means lists.
 *
 * A large index (index.h) groups its rows by list so that a query scans
 * the few lists whose centroids are nearest to it instead of every row;
 * the exact distances of what it scans are unchanged (approximate search
 * with an exact re-rank of the candidates). Pure functions of their
 * inputs: the same rows give the same lists on every run (no random seed:
 * the sample and the first centroids are strided). */
#ifndef OML_IVF_H
#define OML_IVF_H

#include <stddef.h>
#include <stdint.h>

/* Lists for n rows: about sqrt(n)/8, within [16, 1024]. Coarser lists
 * found more of the exact neighbours for the same share of rows scanned
 * (index.h), and cost half as much to assign. */
int32_t oml_ivf_lists_for(size_t n);

/* Trains n_lists centroids (n_lists, d), each of unit norm, on rows (n, d)
 * by spherical k-means (assignment by the largest dot product) over a
 * strided sample of at most 64 rows per list. OML_OK, OML_EINVAL (n <
 * n_lists), OML_ENOMEM. */
int oml_ivf_train(const float *rows, size_t n, int32_t d, int32_t n_lists, float *centroids);

/* The list of each row (n): the centroid with the largest dot product
 * (ties: the smaller list). OML_OK or OML_ENOMEM. */
int oml_ivf_assign(const float *rows, size_t n, int32_t d, const float *centroids,
                   int32_t n_lists, int32_t *list_of);

/* The lists by the dot product of their centroid with q (d), best first
 * (ties: the smaller list), into lists, which holds n_lists (every list
 * with a score above -inf is written); dots (n_lists) is scratch. Returns
 * how many of them the caller wanted: min(want, lists written). */
int32_t oml_ivf_probe(const float *centroids, int32_t n_lists, int32_t d, const float *q,
                      int32_t want, int32_t *lists, float *dots);

#endif
