/* dml_metrics.h - retrieval and clustering metrics of deep metric learning.
 *
 * The evaluation of the batch-trainer papers (DAML Sec. 4, ANML Sec. 7.2,
 * after Song et al.'s lifted-structure protocol) on a set of embeddings E
 * (n, e) with class labels (any int32 values):
 *  - Recall@K: share of queries with at least one same-class item among their
 *    K nearest neighbours; every item is a query against all the others (the
 *    query itself excluded). P@1 equals Recall@1.
 *  - MAP@R (Musgrave et al., "A Metric Learning Reality Check"): per query,
 *    R = the number of other items of its class, AP@R = (1/R) sum_{i<=R}
 *    P@i * rel(i); queries alone in their class are left out of the mean.
 *  - NMI of a k-means clustering with k = number of classes (seeded
 *    k-means++ then Lloyd): 2 I(Omega; C) / (H(Omega) + H(C)) (DAML Sec. 4).
 *  - F1 of that clustering over pairs: P = same-cluster-and-class pairs /
 *    same-cluster pairs, R = ... / same-class pairs, F1 = 2PR / (P + R).
 *  - kNN error of queries against a labelled gallery (majority of k, ties
 *    to the class of the nearest tied neighbour).
 * Distances are Euclidean, computed with sgemm; ties in distance are broken
 * by the lower item index. Functions return 0 or a negative OML_E* code. */
#ifndef OML_DML_METRICS_H
#define OML_DML_METRICS_H

#include <stdint.h>

/* recall (nk) gets Recall@ks[i]; map_at_r (may be NULL) gets MAP@R. */
int oml_dml_retrieval(const float *E, const int32_t *y, int32_t n, int32_t e, const int32_t *ks,
                      int32_t nk, double *recall, double *map_at_r);

/* k-means++ seeding from seed, then Lloyd's iterations until no assignment
 * changes or max_iter; assign (n) gets cluster numbers 0..k-1. */
int oml_dml_kmeans(const float *E, int32_t n, int32_t e, int32_t k, uint64_t seed,
                   int32_t max_iter, int32_t *assign);

/* NMI = 2 I(a; b) / (H(a) + H(b)) of two partitions of n items (any labels);
 * 1 when both are the same single cluster. */
double oml_dml_nmi(const int32_t *a, const int32_t *b, int32_t n);

/* Pairwise clustering F1 of `cluster` against `truth` (0 when no pair is positive). */
double oml_dml_pair_f1(const int32_t *cluster, const int32_t *truth, int32_t n);

/* k-means with k = number of distinct labels, then NMI and F1 against them. */
int oml_dml_clustering(const float *E, const int32_t *y, int32_t n, int32_t e, uint64_t seed,
                       double *nmi, double *f1);

/* kNN classification error of Q (nq, e) with labels qy against G (ng, e), gy. */
int oml_dml_knn_error(const float *G, const int32_t *gy, int32_t ng, const float *Q,
                      const int32_t *qy, int32_t nq, int32_t e, int32_t k, double *error);

#endif
