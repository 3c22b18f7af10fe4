/* net.c - forward and fused backward/SGD of the OAHU network (Eq. 1, 21, 22).
 *
 * Runs on whichever thread owns the parameter block; no allocation on the
 * step path. Every matrix product goes through OpenBLAS (row-major cblas). */
#include "net.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "basis.h"

#define NORM_EPS 1e-12f
#define SMALL_BATCH 4 /* up to this many rows, matrix-vector products beat GEMM */

/* out (n, rows) = X (n, cols) M^T for M (rows, cols) row-major, beta as in BLAS.
 * For a handful of rows (a triplet) GEMM spends most of its time packing M,
 * so one sgemv per row is used instead: M is streamed from cache per row. */
static void matmul_nt(int32_t n, int32_t rows, int32_t cols, const float *X, const float *M,
                      float beta, float *out)
{
    if (n <= SMALL_BATCH) {
        for (int32_t i = 0; i < n; i++)
            cblas_sgemv(CblasRowMajor, CblasNoTrans, rows, cols, 1.0f, M, cols,
                        X + (size_t)i * cols, 1, beta, out + (size_t)i * rows, 1);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rows, cols, 1.0f, X, cols, M, cols,
                beta, out, rows);
}

/* out (n, cols) = G (n, rows) M for M (rows, cols) row-major. */
static void matmul_nn(int32_t n, int32_t rows, int32_t cols, const float *G, const float *M,
                      float beta, float *out)
{
    if (n <= SMALL_BATCH) {
        for (int32_t i = 0; i < n; i++)
            cblas_sgemv(CblasRowMajor, CblasTrans, rows, cols, 1.0f, M, cols,
                        G + (size_t)i * rows, 1, beta, out + (size_t)i * cols, 1);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, cols, rows, 1.0f, G, rows, M, cols,
                beta, out, cols);
}

void oml_net_layout_init(oml_net_layout *lay, const oml_config *c)
{
    memset(lay, 0, sizeof *lay);
    lay->dim = c->dim;
    lay->layers = c->layers;
    lay->hidden = c->hidden;
    lay->emb = c->emb;
    size_t off = 0;
    lay->mu = off;
    off += (size_t)c->dim;
    lay->has_scale = c->standardize != 0;
    if (lay->has_scale) {
        lay->scale = off;
        off += (size_t)c->dim;
    }
    lay->has_basis = c->basis && c->dim > c->emb;
    lay->in = lay->has_basis ? c->emb : c->dim;
    if (lay->has_basis) {
        lay->basis = off;
        off += (size_t)lay->in * (size_t)c->dim;
    }
    lay->trained = off;
    /* W(1) and Theta(0) both read the input, and are adjacent so that for a
     * triplet they form one (hidden + emb, dim) matrix: one pass over the
     * largest weights for the forward and one for the update. */
    if (c->layers >= 1) {
        lay->w[1] = off;
        off += (size_t)c->hidden * (size_t)lay->in;
    }
    lay->theta[0] = off;
    off += (size_t)c->emb * (size_t)lay->in;
    for (int l = 2; l <= c->layers; l++) {
        lay->w[l] = off;
        off += (size_t)c->hidden * (size_t)c->hidden;
    }
    for (int l = 1; l <= c->layers; l++) {
        lay->theta[l] = off;
        off += (size_t)c->emb * (size_t)c->hidden;
    }
    /* Last, so that a block without offsets is a prefix of one with. */
    lay->has_bias = c->offset > 0;
    for (int l = 0; lay->has_bias && l <= c->layers; l++) {
        lay->bias[l] = off;
        off += (size_t)c->emb;
    }
    lay->count = off;
}

int oml_net_acts_init(oml_net_acts *a, const oml_net_layout *lay, int32_t cap)
{
    memset(a, 0, sizeof *a);
    int heads = lay->layers + 1;
    size_t n = (size_t)cap;
    size_t total = n * (size_t)lay->in + n * (size_t)lay->hidden * (size_t)lay->layers
                   + (size_t)heads * (2 * n * (size_t)lay->emb + n)
                   + (size_t)lay->hidden + (size_t)lay->emb /* _stack row */
                   + (lay->has_basis ? n * (size_t)lay->dim : 0);
    float *p = malloc(total * sizeof *p);
    if (p == NULL)
        return OML_ENOMEM;
    a->cap = cap;
    a->_block = p;
    for (int l = 0; l <= lay->layers; l++) {
        a->h[l] = p;
        p += n * (size_t)oml_net_width(lay, l);
    }
    for (int l = 0; l < heads; l++) {
        a->z[l] = p;
        p += n * (size_t)lay->emb;
        a->f[l] = p;
        p += n * (size_t)lay->emb;
        a->znorm[l] = p;
        p += n;
    }
    a->_stack = p;
    p += (size_t)lay->hidden + (size_t)lay->emb;
    a->_raw = lay->has_basis ? p : NULL;
    return OML_OK;
}

void oml_net_acts_free(oml_net_acts *a)
{
    free(a->_block);
    memset(a, 0, sizeof *a);
}

/* f = z / ||z|| row by row, z (n, emb). */
static void head_normalize(int32_t e, int32_t n, const float *z, float *f, float *znorm)
{
    for (int32_t i = 0; i < n; i++) {
        const float *zi = z + (size_t)i * e;
        float *fi = f + (size_t)i * e;
        float nrm = cblas_snrm2(e, zi, 1);
        znorm[i] = nrm;
        float inv = nrm > NORM_EPS ? 1.0f / nrm : 0.0f;
        for (int32_t j = 0; j < e; j++)
            fi[j] = zi[j] * inv;
    }
}

static void relu(float *h, size_t m)
{
    for (size_t k = 0; k < m; k++)
        h[k] = h[k] > 0.0f ? h[k] : 0.0f;
}

/* Few rows, L >= 1: h(1) and z(0) from one sgemv per row over the adjacent
 * [W(1); Theta(0)] block, into a (hidden + emb) row then split. */
static void forward_input_stacked(const oml_net_layout *lay, const float *params, int32_t n,
                                  oml_net_acts *a)
{
    int32_t d = lay->in, hd = lay->hidden, e = lay->emb, rows = hd + e;
    for (int32_t i = 0; i < n; i++) {
        float *t = a->_stack;
        cblas_sgemv(CblasRowMajor, CblasNoTrans, rows, d, 1.0f, params + lay->w[1], d,
                    a->h[0] + (size_t)i * d, 1, 0.0f, t, 1);
        memcpy(a->h[1] + (size_t)i * hd, t, (size_t)hd * sizeof *t);
        memcpy(a->z[0] + (size_t)i * e, t + hd, (size_t)e * sizeof *t);
    }
    relu(a->h[1], (size_t)n * (size_t)hd);
}

/* dst = x - mu, the centred input, times 1/sd when standardised. */
static void centre_row(const oml_net_layout *lay, const float *params, const float *x,
                       float *dst)
{
    int32_t d = lay->dim;
    const float *mu = params + lay->mu;
    for (int32_t j = 0; j < d; j++)
        dst[j] = x[j] - mu[j];
    if (lay->has_scale) {
        const float *inv_sd = params + lay->scale;
        for (int32_t j = 0; j < d; j++)
            dst[j] *= inv_sd[j];
    }
}

/* h(0) row i (or, with a basis, the row the basis then reads). */
static void set_input_row(const oml_net_layout *lay, const float *params, oml_net_acts *a,
                          int32_t i, const float *x)
{
    centre_row(lay, params, x, (lay->has_basis ? a->_raw : a->h[0]) + (size_t)i * lay->dim);
}

static void forward_from_input(const oml_net_layout *lay, const float *params, int32_t n,
                               oml_net_acts *a);
static void forward_from_h0(const oml_net_layout *lay, const float *params, int32_t n,
                            oml_net_acts *a);

void oml_net_forward(const oml_net_layout *lay, const float *params, const float *X,
                     int32_t n, oml_net_acts *a)
{
    for (int32_t i = 0; i < n; i++)
        set_input_row(lay, params, a, i, X + (size_t)i * lay->dim);
    forward_from_input(lay, params, n, a);
}

void oml_net_forward_rows(const oml_net_layout *lay, const float *params,
                          const float *const *rows, int32_t n, oml_net_acts *a)
{
    for (int32_t i = 0; i < n; i++)
        set_input_row(lay, params, a, i, rows[i]);
    forward_from_input(lay, params, n, a);
}

void oml_net_project(const oml_net_layout *lay, const float *params, float *X, int32_t n,
                     float *out)
{
    for (int32_t i = 0; i < n; i++) {
        float *row = X + (size_t)i * (size_t)lay->dim;
        centre_row(lay, params, row, row);
    }
    oml_basis_project(params + lay->basis, lay->in, lay->dim, X, n, out);
}

void oml_net_forward_h0(const oml_net_layout *lay, const float *params, const float *H0,
                        int32_t n, oml_net_acts *a)
{
    memcpy(a->h[0], H0, (size_t)n * (size_t)lay->in * sizeof *H0);
    forward_from_h0(lay, params, n, a);
}

static void forward_from_input(const oml_net_layout *lay, const float *params, int32_t n,
                               oml_net_acts *a)
{
    if (lay->has_basis) /* h(0) = B (x - mu): the fixed basis, no gradient */
        matmul_nt(n, lay->in, lay->dim, a->_raw, params + lay->basis, 0.0f, a->h[0]);
    forward_from_h0(lay, params, n, a);
}

static void forward_from_h0(const oml_net_layout *lay, const float *params, int32_t n,
                            oml_net_acts *a)
{
    int32_t hd = lay->hidden;
    int stacked = n <= SMALL_BATCH && lay->layers >= 1;
    if (stacked)
        forward_input_stacked(lay, params, n, a);
    for (int l = stacked ? 2 : 1; l <= lay->layers; l++) {
        /* h(l) = ReLU(h(l-1) W(l)^T): (n, width) x (width, hidden). OAHU Eq. 1. */
        int32_t w = oml_net_width(lay, l - 1);
        matmul_nt(n, hd, w, a->h[l - 1], params + lay->w[l], 0.0f, a->h[l]);
        relu(a->h[l], (size_t)n * (size_t)hd);
    }
    for (int l = 0; l <= lay->layers; l++) {
        /* z(l) = h(l) Theta(l)^T (+ b(l)), then onto the unit sphere. */
        if (!(stacked && l == 0))
            matmul_nt(n, lay->emb, oml_net_width(lay, l), a->h[l], params + lay->theta[l], 0.0f,
                      a->z[l]);
        if (lay->has_bias)
            for (int32_t i = 0; i < n; i++)
                cblas_saxpy(lay->emb, 1.0f, params + lay->bias[l], 1,
                            a->z[l] + (size_t)i * lay->emb, 1);
        head_normalize(lay->emb, n, a->z[l], a->f[l], a->znorm[l]);
    }
}

void oml_net_normalize_backward(const float *f, float znorm, const float *gf, float *gz,
                                int32_t emb)
{
    if (znorm <= NORM_EPS) {
        memset(gz, 0, sizeof *gz * (size_t)emb);
        return;
    }
    float dot = 0.0f;
    for (int32_t j = 0; j < emb; j++)
        dot += f[j] * gf[j];
    float inv = 1.0f / znorm;
    for (int32_t j = 0; j < emb; j++)
        gz[j] = (gf[j] - f[j] * dot) * inv;
}

size_t oml_net_scratch_floats(const oml_net_layout *lay, int32_t n)
{
    int32_t wide = lay->hidden + lay->emb; /* the stacked [ga | gz(0)] rows */
    int32_t w = lay->in > wide ? lay->in : wide;
    return 2 * (size_t)n * (size_t)w;
}

void oml_net_backward_sgd(const oml_net_layout *lay, float *params, const oml_net_acts *a,
                          int32_t n, float *const *gz, float eta, float *scratch)
{
    int32_t e = lay->emb, hd = lay->hidden;
    size_t half = oml_net_scratch_floats(lay, n) / 2;
    float *gh = scratch;            /* dLoss/dh(l), (n, hidden) */
    float *gh_below = scratch + half; /* dLoss/dh(l-1) */

    for (int l = 0; lay->has_bias && l <= lay->layers; l++)
        for (int32_t i = 0; i < n; i++) /* b(l) -= eta * sum of gz rows */
            cblas_saxpy(e, -eta, gz[l] + (size_t)i * e, 1, params + lay->bias[l], 1);
    for (int l = lay->layers; l >= 1; l--) {
        float *theta = params + lay->theta[l];
        /* Head l's contribution to dLoss/dh(l), at the old Theta(l): gz (n,e) x Theta (e,hd). */
        matmul_nn(n, e, hd, gz[l], theta, l == lay->layers ? 0.0f : 1.0f, gh);
        /* OAHU Eq. 21: Theta(l) -= eta * gz^T h(l). */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, e, hd, n, -eta, gz[l], e,
                    a->h[l], hd, 1.0f, theta, hd);
        /* Through the ReLU: gradient of the pre-activation. */
        const float *h = a->h[l];
        size_t m = (size_t)n * (size_t)hd;
        for (size_t k = 0; k < m; k++)
            if (h[k] <= 0.0f)
                gh[k] = 0.0f;
        int32_t w = oml_net_width(lay, l - 1);
        float *W = params + lay->w[l];
        if (l > 1) {
            /* dLoss/dh(l-1) = ga (n,hd) x W(l) (hd,w), at the old W(l); the
             * deeper heads' share reaches W(l-1) through it (Eq. 22, j >= l). */
            matmul_nn(n, hd, w, gh, W, 0.0f, gh_below);
        }
        if (l == 1 && n <= SMALL_BATCH) {
            /* OAHU Eq. 21-22 for the adjacent [W(1); Theta(0)] in one rank-n
             * update: [ga | gz(0)]^T x. */
            int32_t wide = hd + e;
            for (int32_t i = 0; i < n; i++) {
                memcpy(gh_below + (size_t)i * wide, gh + (size_t)i * hd, (size_t)hd * sizeof *gh);
                memcpy(gh_below + (size_t)i * wide + hd, gz[0] + (size_t)i * e,
                       (size_t)e * sizeof *gh);
            }
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, wide, w, n, -eta, gh_below, wide,
                        a->h[0], w, 1.0f, W, w);
            return;
        }
        /* OAHU Eq. 22: W(l) -= eta * ga^T h(l-1). */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, hd, w, n, -eta, gh, hd,
                    a->h[l - 1], w, 1.0f, W, w);
        float *t = gh;
        gh = gh_below;
        gh_below = t;
    }
    /* Head 0 is linear on the (centred) input: Theta(0) -= eta * gz^T x. */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, e, lay->in, n, -eta, gz[0], e,
                a->h[0], lay->in, 1.0f, params + lay->theta[0], lay->in);
}

void oml_net_backward(const oml_net_layout *lay, const float *params, const oml_net_acts *a,
                      int32_t n, float *const *gz, float *grad, float *scratch)
{
    int32_t e = lay->emb, hd = lay->hidden;
    size_t half = oml_net_scratch_floats(lay, n) / 2;
    float *gh = scratch;              /* dLoss/dh(l), (n, hidden) */
    float *gh_below = scratch + half; /* dLoss/dh(l-1) */

    memset(grad + lay->mu, 0, (lay->trained - lay->mu) * sizeof *grad); /* fixed */
    for (int l = 0; lay->has_bias && l <= lay->layers; l++) {
        float *gb = grad + lay->bias[l]; /* dLoss/db(l): the sum of gz rows */
        memset(gb, 0, (size_t)e * sizeof *gb);
        for (int32_t i = 0; i < n; i++)
            cblas_saxpy(e, 1.0f, gz[l] + (size_t)i * e, 1, gb, 1);
    }
    for (int l = lay->layers; l >= 1; l--) {
        const float *theta = params + lay->theta[l];
        /* Every head j >= l adds to dLoss/dh(l) (Eq. 22 read as j = l..L). */
        matmul_nn(n, e, hd, gz[l], theta, l == lay->layers ? 0.0f : 1.0f, gh);
        /* dLoss/dTheta(l) = gz^T h(l) (Eq. 21). */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, e, hd, n, 1.0f, gz[l], e, a->h[l],
                    hd, 0.0f, grad + lay->theta[l], hd);
        const float *h = a->h[l];
        size_t m = (size_t)n * (size_t)hd;
        for (size_t k = 0; k < m; k++)
            if (h[k] <= 0.0f)
                gh[k] = 0.0f;
        int32_t w = oml_net_width(lay, l - 1);
        if (l > 1)
            matmul_nn(n, hd, w, gh, params + lay->w[l], 0.0f, gh_below);
        /* dLoss/dW(l) = ga^T h(l-1) (Eq. 22). */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, hd, w, n, 1.0f, gh, hd,
                    a->h[l - 1], w, 0.0f, grad + lay->w[l], w);
        float *t = gh;
        gh = gh_below;
        gh_below = t;
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, e, lay->in, n, 1.0f, gz[0], e,
                a->h[0], lay->in, 0.0f, grad + lay->theta[0], lay->in);
}
