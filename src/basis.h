/* basis.h - the start's fixed input basis, applied one row at a time.
 *
 * h(0) = B (x - mu) (net.h) through a GEMM gives a row bits that depend on
 * where the row sits in its block (OpenBLAS picks its kernel and order by
 * position: measured, about half the positions of a 64-row block differ
 * from the first). The index builder keeps each item's projection between
 * builds (projcache.h) and must get the same bits from a kept projection
 * and a fresh one, on every node that builds the same store (replicas and
 * shards compare answers bit for bit). So here every output is one fixed
 * sequence of operations on its row and its basis row alone: eight lanes
 * of fused multiply-adds over the features in order, the lanes summed as
 * ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)), then the tail (dim mod 8 features,
 * fused in order) added. The AVX2 kernel (picked at run time) and the
 * portable loop compute exactly that, so they agree bit for bit. */
#ifndef OML_BASIS_H
#define OML_BASIS_H

#include <stdint.h>

/* out (n, in) = X B^T: X (n, dim) rows already centred (and scaled), B
 * (in, dim) row-major. Each out[i][j] depends on row i of X and row j of B
 * only. */
void oml_basis_project(const float *B, int32_t in, int32_t dim, const float *X, int32_t n,
                       float *out);

/* The portable loop alone (tests compare it with the dispatched kernel). */
void oml_basis_project_portable(const float *B, int32_t in, int32_t dim, const float *X,
                                int32_t n, float *out);

#endif
