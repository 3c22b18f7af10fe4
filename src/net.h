/* net.h - the OAHU network over one contiguous parameter block.
 *
 * x (d) -> centred x - mu (times 1/sd when the config standardises)
 *       -> h(l) = ReLU(W(l) h(l-1)), l = 1..L   (OAHU Eq. 1)
 * head l (l = 0..L): z(l) = Theta(l) h(l), f(l) = z(l) / ||z(l)||  (unit sphere, Eq. 3)
 *                    (+ b(l) inside the norm when the config has an offset)
 *
 * All parameters (mu, every W and Theta) live in one float block described by
 * an oml_net_layout of offsets, so a snapshot is one memcpy, a model file is
 * one write and SGD is one loop. mu is not trained: it is the input mean of
 * the stored items (zero when centring is off). Matrices are row-major:
 * W(l) is (hidden, width(l-1)), Theta(l) is (emb, width(l)), width(0) = d. */
#ifndef OML_NET_H
#define OML_NET_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef struct oml_net_layout {
    int32_t dim, layers, hidden, emb;
    size_t mu;                             /* offset of mu (dim) */
    int32_t has_scale;                     /* config standardize: the input is scaled */
    size_t scale;                          /* ... by 1/sd (dim), right after mu */
    int32_t has_basis;                     /* config basis and dim > emb */
    int32_t in;                            /* width of h(0): emb with a basis, else dim */
    size_t basis;                          /* offset of B (in, dim), fixed at the start */
    size_t trained;                        /* the first trained float: mu and the
                                              scale are fixed at the start */
    size_t w[OML_MAX_LAYERS + 1];          /* w[l], l = 1..L */
    size_t theta[OML_MAX_LAYERS + 1];      /* theta[l], l = 0..L */
    int32_t has_bias;                      /* config offset > 0: heads have b(l) */
    size_t bias[OML_MAX_LAYERS + 1];       /* b(l) (emb), l = 0..L, after every Theta */
    size_t count;                          /* floats in the block */
} oml_net_layout;

void oml_net_layout_init(oml_net_layout *lay, const oml_config *c);

static inline int32_t oml_net_width(const oml_net_layout *lay, int l)
{
    return l == 0 ? lay->in : lay->hidden;
}

/* Forward activations of up to `cap` rows, all in one allocation. */
typedef struct oml_net_acts {
    int32_t cap;
    float *h[OML_MAX_LAYERS + 1];     /* h[0] (cap, dim) centred input; h[l] (cap, hidden) */
    float *z[OML_MAX_LAYERS + 1];     /* (cap, emb) head pre-normalisation */
    float *f[OML_MAX_LAYERS + 1];     /* (cap, emb) L2-normalised heads */
    float *znorm[OML_MAX_LAYERS + 1]; /* (cap) ||z|| */
    float *_block;
    float *_stack;                    /* (hidden + emb) row for the stacked input layer */
    float *_raw;                      /* (cap, dim) centred input before the basis */
} oml_net_acts;

int oml_net_acts_init(oml_net_acts *a, const oml_net_layout *lay, int32_t cap);
void oml_net_acts_free(oml_net_acts *a); /* accepts a zeroed struct */

/* Forward of n <= a->cap rows X (n, dim) through every layer and head. */
void oml_net_forward(const oml_net_layout *lay, const float *params, const float *X,
                     int32_t n, oml_net_acts *a);

/* The same for n rows given by pointer (a triplet's members, wherever they
 * live), without gathering them first. */
void oml_net_forward_rows(const oml_net_layout *lay, const float *params,
                          const float *const *rows, int32_t n, oml_net_acts *a);

/* With a basis only: h(0) of n rows X (n, dim), the centred (scaled)
 * input on the basis, each row's bits a function of that row alone
 * (basis.h, unlike oml_net_forward's GEMM), into out (n, in). X is
 * overwritten by the centred rows. */
void oml_net_project(const oml_net_layout *lay, const float *params, float *X, int32_t n,
                     float *out);

/* Forward of n <= a->cap rows from their h(0) (n, in), as oml_net_forward
 * does after the input. */
void oml_net_forward_h0(const oml_net_layout *lay, const float *params, const float *H0,
                        int32_t n, oml_net_acts *a);

/* Backward of rows already forwarded in `a`, fused with the SGD step
 * (OAHU Eq. 21-22): gz[l] (n, emb) is dLoss/dz(l), already scaled by alpha(l).
 * Hidden layer l receives gradient from every head j >= l (Eq. 22 read as
 * j = l..L). Every gradient is taken at the pre-update parameters; each
 * block is updated as soon as the gradient below it no longer needs it.
 * scratch holds oml_net_scratch_floats(lay, n) floats. */
void oml_net_backward_sgd(const oml_net_layout *lay, float *params, const oml_net_acts *a,
                          int32_t n, float *const *gz, float eta, float *scratch);

/* The same backward without the step: grad (lay->count floats) receives
 * dLoss/dparams (overwritten; the entries below lay->trained, mu and the
 * input scale, are zero: they are not trained),
 * for optimisers that keep state (Adam) and for mini-batches. scratch as
 * for oml_net_backward_sgd. */
void oml_net_backward(const oml_net_layout *lay, const float *params, const oml_net_acts *a,
                      int32_t n, float *const *gz, float *grad, float *scratch);

/* dLoss/dz from dLoss/df through f = z/||z|| for one row: gz = (gf - f (f.gf)) / ||z||. */
void oml_net_normalize_backward(const float *f, float znorm, const float *gf, float *gz,
                                int32_t emb);

/* Floats of scratch oml_net_backward_sgd needs for n rows. */
size_t oml_net_scratch_floats(const oml_net_layout *lay, int32_t n);

#endif
