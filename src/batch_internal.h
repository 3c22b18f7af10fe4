/* batch_internal.h - the training workspace shared by batch.c and
 * batch_train.c; not part of the public API. */
#ifndef OML_BATCH_INTERNAL_H
#define OML_BATCH_INTERNAL_H

#include "batch.h"

/* Activations and gradients of up to `cap` rows, in two allocations. */
typedef struct oml__batch_ws {
    int32_t cap;
    float *h[OML_BATCH_MAX_DEPTH + 1]; /* h[0] (cap, dim) centred input; h[l] (cap, hidden) */
    float *z, *f, *gf, *gz;            /* (cap, emb) */
    float *znorm;                      /* (cap) */
    float *g0, *g1;                    /* (cap, hidden) backward ping-pong */
    double *Fd, *gFd;                  /* (cap, emb) the loss's view, in double */
    double *work;                      /* oml_batch_loss_work(cap) */
    float *_fblock;
} oml__batch_ws;

int oml__batch_ws_init(oml__batch_ws *ws, const oml_batch_layout *lay, int32_t cap);
void oml__batch_ws_free(oml__batch_ws *ws);
/* Forward of n <= cap rows: ws->f (n, emb) is the embedding. */
void oml__batch_forward(const oml_batch_layout *lay, const float *params, const float *X,
                        int32_t n, oml__batch_ws *ws);
/* Backward of the rows in ws from gf = dL/df (n, emb): grad (lay.count). */
void oml__batch_backward(const oml_batch_layout *lay, const float *params, int32_t n,
                         oml__batch_ws *ws, const float *gf, float *grad);
/* As oml__batch_backward, and also gx (n, dim) = dL/dx of every input row
 * (through the centring, whose Jacobian is the identity). */
void oml__batch_backward_x(const oml_batch_layout *lay, const float *params, int32_t n,
                           oml__batch_ws *ws, const float *gf, float *grad, float *gx);
double oml__batch_loss_grad_ws(const oml_batch_layout *lay, const float *params,
                               oml_batch_loss_fn loss, const void *hp, const float *X,
                               const int32_t *y, int32_t n, oml_rng *rng, float *grad,
                               oml__batch_ws *ws);

#endif
