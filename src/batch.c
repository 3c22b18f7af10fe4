/* batch.c - the batch embedding network: layout, forward, backward, embed,
 * serialisation, and the Recall@1 used for early stopping.
 *
 * DESIGN: pure functions over one parameter block (batch.h). The training
 * workspace (oml__batch_ws) holds every activation of one mini-batch, so a
 * step allocates nothing; the public oml_batch_loss_grad builds a temporary
 * one. All matrix products are row-major cblas_sgemm. */
#include "batch.h"
#include "batch_internal.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "bytes.h"
#include "net.h"
#include "pca.h"

#define NORM_EPS 1e-12f
#define EMBED_CHUNK 1024
#define FORMAT_MAGIC 0x424c4d4fu /* "OMLB" little-endian */
#define FORMAT_VERSION 1u

const char *oml_batch_strerror(int err)
{
    return oml_strerror(err);
}

int oml_batch_layout_init(oml_batch_layout *lay, int32_t dim, int32_t depth, int32_t hidden,
                          int32_t emb, int32_t normalize, oml_diag *diag)
{
    if (dim < 1 || dim > (1 << 20))
        return oml_diag_set(diag, OML_EINVAL, "dim", "dim %d out of [1, 2^20]", dim);
    if (depth < 0 || depth > OML_BATCH_MAX_DEPTH)
        return oml_diag_set(diag, OML_EINVAL, "depth", "depth %d out of [0, %d]", depth,
                            OML_BATCH_MAX_DEPTH);
    if (hidden < 1 || hidden > 65536)
        return oml_diag_set(diag, OML_EINVAL, "hidden", "hidden %d out of [1, 65536]", hidden);
    if (emb < 1 || emb > 65536)
        return oml_diag_set(diag, OML_EINVAL, "emb", "emb %d out of [1, 65536]", emb);
    memset(lay, 0, sizeof *lay);
    lay->dim = dim;
    lay->depth = depth;
    lay->hidden = hidden;
    lay->emb = emb;
    lay->normalize = normalize != 0;
    size_t off = (size_t)dim; /* mu first */
    for (int l = 1; l <= depth; l++) {
        lay->w[l] = off;
        off += (size_t)hidden * (size_t)oml_batch_width(lay, l - 1);
    }
    lay->theta = off;
    off += (size_t)emb * (size_t)oml_batch_width(lay, depth);
    lay->count = off;
    return OML_OK;
}

static void init_uniform(oml_rng *rng, float *w, size_t rows, size_t cols)
{
    float bound = 1.0f / sqrtf((float)cols);
    for (size_t i = 0; i < rows * cols; i++)
        w[i] = (2.0f * oml_rng_uniform(rng) - 1.0f) * bound;
}

int oml_batch_model_create(oml_batch_model **out, const oml_batch_layout *lay, uint64_t seed,
                           oml_diag *diag)
{
    oml_batch_layout chk;
    int rc = oml_batch_layout_init(&chk, lay->dim, lay->depth, lay->hidden, lay->emb,
                                   lay->normalize, diag);
    if (rc != OML_OK)
        return rc;
    oml_batch_model *m = calloc(1, sizeof *m);
    float *p = calloc(chk.count, sizeof *p);
    if (m == NULL || p == NULL) {
        free(m);
        free(p);
        return OML_ENOMEM;
    }
    m->lay = chk;
    m->params = p;
    m->val_r1 = NAN;
    oml_rng rng;
    oml_rng_seed(&rng, seed);
    for (int l = 1; l <= chk.depth; l++)
        init_uniform(&rng, p + chk.w[l], (size_t)chk.hidden, (size_t)oml_batch_width(&chk, l - 1));
    init_uniform(&rng, p + chk.theta, (size_t)chk.emb, (size_t)oml_batch_width(&chk, chk.depth));
    *out = m;
    return OML_OK;
}

int oml_batch_pca_check(const oml_batch_layout *lay, oml_diag *diag)
{
    if (oml_pca_passthrough_fits(lay->dim, lay->depth, lay->hidden, lay->emb))
        return OML_OK;
    if (lay->emb > lay->dim)
        return oml_diag_set(diag, OML_EINVAL, "init_pca",
                            "PCA start needs emb <= dim (emb %d, dim %d)", lay->emb, lay->dim);
    return oml_diag_set(diag, OML_EINVAL, "init_pca",
                        "PCA start needs hidden >= 2*emb at depth >= 1 (hidden %d, emb %d)",
                        lay->hidden, lay->emb);
}

int oml_batch_model_init_pca(oml_batch_model *m, const float *X, const int32_t *rows, int32_t n,
                             oml_diag *diag)
{
    const oml_batch_layout *lay = &m->lay;
    int rc = oml_batch_pca_check(lay, diag);
    if (rc != OML_OK)
        return rc;
    if (n < 1)
        return oml_diag_set(diag, OML_EEMPTY, "items", "PCA start needs at least one item");
    int32_t d = lay->dim, e = lay->emb, hd = lay->hidden;
    float *P = malloc((size_t)e * (size_t)d * sizeof *P);
    if (P == NULL)
        return OML_ENOMEM;
    rc = oml_pca_components(X, rows, n, d, m->params + lay->mu, e, P, NULL, NULL);
    if (rc != OML_OK) {
        free(P);
        return rc == OML_EIO ? oml_diag_set(diag, OML_EIO, "init_pca",
                                            "the eigen-decomposition (ssyevr) failed")
                             : rc;
    }
    float *p = m->params;
    if (lay->depth == 0) {
        memcpy(p + lay->theta, P, (size_t)e * (size_t)d * sizeof *P);
        free(P);
        return OML_OK;
    }
    for (int l = 1; l <= lay->depth; l++) {
        if (l == 1)
            oml_pca_passthrough_first(p + lay->w[1], d, P, e, e);
        else
            oml_pca_passthrough_deeper(p + lay->w[l], oml_batch_width(lay, l - 1), e);
    }
    oml_pca_passthrough_head(p + lay->theta, hd, e, e);
    free(P);
    return OML_OK;
}

void oml_batch_model_destroy(oml_batch_model *m)
{
    if (m == NULL)
        return;
    free(m->params);
    free(m);
}

/* ---- workspace, forward, backward ---- */

int oml__batch_ws_init(oml__batch_ws *ws, const oml_batch_layout *lay, int32_t cap)
{
    memset(ws, 0, sizeof *ws);
    size_t n = (size_t)cap, e = (size_t)lay->emb, hd = (size_t)lay->hidden;
    size_t total = n * (size_t)lay->dim + n * hd * (size_t)lay->depth + 4 * n * e + n + 2 * n * hd;
    float *p = malloc(total * sizeof *p);
    double *d = malloc((2 * n * e + oml_batch_loss_work(cap)) * sizeof *d);
    if (p == NULL || d == NULL) {
        free(p);
        free(d);
        return OML_ENOMEM;
    }
    ws->cap = cap;
    ws->_fblock = p;
    for (int l = 0; l <= lay->depth; l++) {
        ws->h[l] = p;
        p += n * (size_t)oml_batch_width(lay, l);
    }
    ws->z = p;
    p += n * e;
    ws->f = p;
    p += n * e;
    ws->gf = p;
    p += n * e;
    ws->gz = p;
    p += n * e;
    ws->znorm = p;
    p += n;
    ws->g0 = p;
    p += n * hd;
    ws->g1 = p;
    ws->Fd = d;
    ws->gFd = d + n * e;
    ws->work = d + 2 * n * e;
    return OML_OK;
}

void oml__batch_ws_free(oml__batch_ws *ws)
{
    free(ws->_fblock);
    free(ws->Fd);
    memset(ws, 0, sizeof *ws);
}

void oml__batch_forward(const oml_batch_layout *lay, const float *params, const float *X,
                        int32_t n, oml__batch_ws *ws)
{
    int32_t d = lay->dim, hd = lay->hidden, e = lay->emb;
    const float *mu = params + lay->mu;
    for (int32_t i = 0; i < n; i++) {
        const float *x = X + (size_t)i * d;
        float *h0 = ws->h[0] + (size_t)i * d;
        for (int32_t j = 0; j < d; j++)
            h0[j] = x[j] - mu[j];
    }
    for (int l = 1; l <= lay->depth; l++) {
        /* h(l) = ReLU(h(l-1) W(l)^T): (n, w) x (w, hidden). OAHU Eq. 1. */
        int32_t w = oml_batch_width(lay, l - 1);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, hd, w, 1.0f, ws->h[l - 1], w,
                    params + lay->w[l], w, 0.0f, ws->h[l], hd);
        float *h = ws->h[l];
        for (size_t k = 0; k < (size_t)n * (size_t)hd; k++)
            h[k] = h[k] > 0.0f ? h[k] : 0.0f;
    }
    int32_t w = oml_batch_width(lay, lay->depth);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, e, w, 1.0f, ws->h[lay->depth], w,
                params + lay->theta, w, 0.0f, ws->z, e);
    for (int32_t i = 0; i < n; i++) {
        const float *zi = ws->z + (size_t)i * e;
        float *fi = ws->f + (size_t)i * e;
        float nrm = cblas_snrm2(e, zi, 1);
        ws->znorm[i] = nrm;
        float inv = !lay->normalize ? 1.0f : nrm > NORM_EPS ? 1.0f / nrm : 0.0f;
        for (int32_t j = 0; j < e; j++)
            fi[j] = zi[j] * inv;
    }
}

void oml__batch_backward(const oml_batch_layout *lay, const float *params, int32_t n,
                         oml__batch_ws *ws, const float *gf, float *grad)
{
    oml__batch_backward_x(lay, params, n, ws, gf, grad, NULL);
}

void oml__batch_backward_x(const oml_batch_layout *lay, const float *params, int32_t n,
                           oml__batch_ws *ws, const float *gf, float *grad, float *gx)
{
    int32_t e = lay->emb, hd = lay->hidden;
    float *gz = ws->gz;
    for (int32_t i = 0; i < n; i++) {
        const float *gfi = gf + (size_t)i * e;
        float *gzi = gz + (size_t)i * e;
        if (lay->normalize) /* through f = z / ||z||, as net.c */
            oml_net_normalize_backward(ws->f + (size_t)i * e, ws->znorm[i], gfi, gzi, e);
        else
            memcpy(gzi, gfi, (size_t)e * sizeof *gzi);
    }
    memset(grad + lay->mu, 0, (size_t)lay->dim * sizeof *grad);
    int32_t w = oml_batch_width(lay, lay->depth);
    /* dL/dTheta = gz^T h(depth): (e, n) x (n, w). */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, e, w, n, 1.0f, gz, e, ws->h[lay->depth],
                w, 0.0f, grad + lay->theta, w);
    if (lay->depth == 0) {
        if (gx != NULL) /* dL/dx = gz Theta: (n, e) x (e, dim). */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, lay->dim, e, 1.0f, gz, e,
                        params + lay->theta, lay->dim, 0.0f, gx, lay->dim);
        return;
    }
    float *gh = ws->g0, *other = ws->g1;
    /* dL/dh(depth) = gz Theta: (n, e) x (e, hidden). */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, hd, e, 1.0f, gz, e,
                params + lay->theta, hd, 0.0f, gh, hd);
    for (int l = lay->depth; l >= 1; l--) {
        const float *h = ws->h[l];
        for (size_t k = 0; k < (size_t)n * (size_t)hd; k++)
            if (h[k] <= 0.0f)
                gh[k] = 0.0f;
        int32_t win = oml_batch_width(lay, l - 1);
        /* dL/dW(l) = ga^T h(l-1): (hidden, n) x (n, win); the chain of OAHU Eq. 22. */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, hd, win, n, 1.0f, gh, hd,
                    ws->h[l - 1], win, 0.0f, grad + lay->w[l], win);
        if (l > 1) {
            /* dL/dh(l-1) = ga W(l): (n, hidden) x (hidden, hidden). */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, win, hd, 1.0f, gh, hd,
                        params + lay->w[l], win, 0.0f, other, win);
            float *t = gh;
            gh = other;
            other = t;
        } else if (gx != NULL) {
            /* dL/dx = ga(1) W(1): (n, hidden) x (hidden, dim). */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, win, hd, 1.0f, gh, hd,
                        params + lay->w[1], win, 0.0f, gx, win);
        }
    }
}

double oml__batch_loss_grad_ws(const oml_batch_layout *lay, const float *params,
                               oml_batch_loss_fn loss, const void *hp, const float *X,
                               const int32_t *y, int32_t n, oml_rng *rng, float *grad,
                               oml__batch_ws *ws)
{
    int32_t e = lay->emb;
    oml__batch_forward(lay, params, X, n, ws);
    size_t ne = (size_t)n * (size_t)e;
    for (size_t k = 0; k < ne; k++)
        ws->Fd[k] = ws->f[k];
    double L = loss(hp, ws->Fd, y, n, e, ws->gFd, rng, ws->work);
    for (size_t k = 0; k < ne; k++)
        ws->gf[k] = (float)ws->gFd[k];
    oml__batch_backward(lay, params, n, ws, ws->gf, grad);
    return L;
}

int oml_batch_loss_grad(const oml_batch_model *m, oml_batch_loss_fn loss, const void *hp,
                        const float *X, const int32_t *y, int32_t n, oml_rng *rng, float *grad,
                        double *loss_out)
{
    oml__batch_ws ws;
    if (oml__batch_ws_init(&ws, &m->lay, n) != OML_OK)
        return OML_ENOMEM;
    *loss_out = oml__batch_loss_grad_ws(&m->lay, m->params, loss, hp, X, y, n, rng, grad, &ws);
    oml__batch_ws_free(&ws);
    return OML_OK;
}

int oml_batch_model_embed(const oml_batch_model *m, const float *X, int32_t n, float *out)
{
    int32_t cap = n < EMBED_CHUNK ? (n > 0 ? n : 1) : EMBED_CHUNK;
    oml__batch_ws ws;
    if (oml__batch_ws_init(&ws, &m->lay, cap) != OML_OK)
        return OML_ENOMEM;
    int32_t d = m->lay.dim, e = m->lay.emb;
    for (int32_t i = 0; i < n; i += cap) {
        int32_t b = n - i < cap ? n - i : cap;
        oml__batch_forward(&m->lay, m->params, X + (size_t)i * d, b, &ws);
        memcpy(out + (size_t)i * e, ws.f, (size_t)b * (size_t)e * sizeof *out);
    }
    oml__batch_ws_free(&ws);
    return OML_OK;
}

/* ---- distances and Recall@1 ---- */

void oml_batch_pdist(const double *F, int32_t n, int32_t e, double *D)
{
    for (int32_t i = 0; i < n; i++) {
        D[(size_t)i * n + i] = 0.0;
        for (int32_t j = i + 1; j < n; j++) {
            const double *a = F + (size_t)i * e, *b = F + (size_t)j * e;
            double s = 0.0;
            for (int32_t k = 0; k < e; k++) {
                double t = a[k] - b[k];
                s += t * t;
            }
            s = sqrt(s);
            D[(size_t)i * n + j] = s;
            D[(size_t)j * n + i] = s;
        }
    }
}

double oml_batch_recall1(const float *E, const int32_t *y, int32_t n, int32_t e)
{
    enum { BLK = 256 };
    if (n < 2)
        return NAN;
    float *G = malloc((size_t)BLK * (size_t)n * sizeof *G);
    float *sq = malloc((size_t)n * sizeof *sq);
    if (G == NULL || sq == NULL) {
        free(G);
        free(sq);
        return NAN;
    }
    for (int32_t i = 0; i < n; i++)
        sq[i] = cblas_sdot(e, E + (size_t)i * e, 1, E + (size_t)i * e, 1);
    int64_t hit = 0;
    for (int32_t q0 = 0; q0 < n; q0 += BLK) {
        int32_t b = n - q0 < BLK ? n - q0 : BLK;
        /* G (b, n) = E[q0..] E^T; ||q - g||^2 = sq[q] + sq[g] - 2 G. */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, n, e, 1.0f, E + (size_t)q0 * e, e,
                    E, e, 0.0f, G, n);
        for (int32_t r = 0; r < b; r++) {
            int32_t q = q0 + r, best = -1;
            float bd = INFINITY;
            const float *g = G + (size_t)r * n;
            for (int32_t j = 0; j < n; j++) {
                float dd = sq[j] - 2.0f * g[j];
                if (j != q && dd < bd) {
                    bd = dd;
                    best = j;
                }
            }
            hit += best >= 0 && y[best] == y[q];
        }
    }
    free(G);
    free(sq);
    return (double)hit / n;
}

/* ---- serialisation ---- */

#define HDR_INTS 10

int oml_batch_model_encode(const oml_batch_model *m, uint8_t **buf, size_t *len)
{
    size_t body = (size_t)HDR_INTS * 4 + m->lay.count * sizeof(float);
    size_t total = body + 4;
    uint8_t *b = malloc(total);
    if (b == NULL)
        return OML_ENOMEM;
    uint32_t h[HDR_INTS];
    float vr = m->val_r1;
    uint32_t vbits;
    memcpy(&vbits, &vr, 4);
    h[0] = FORMAT_MAGIC;
    h[1] = FORMAT_VERSION;
    h[2] = (uint32_t)m->lay.dim;
    h[3] = (uint32_t)m->lay.depth;
    h[4] = (uint32_t)m->lay.hidden;
    h[5] = (uint32_t)m->lay.emb;
    h[6] = (uint32_t)m->lay.normalize;
    h[7] = (uint32_t)m->method;
    h[8] = (uint32_t)m->epochs_run;
    h[9] = vbits;
    oml_writer w = oml_writer_into(b, total);
    oml_put_le(&w, h, 4, HDR_INTS);
    oml_put_f32s(&w, m->params, m->lay.count);
    oml_put_u32(&w, (uint32_t)crc32(0L, b, (uInt)body));
    *buf = b;
    *len = total;
    return OML_OK;
}

int oml_batch_model_decode(const uint8_t *buf, size_t len, oml_batch_model **out,
                           oml_diag *diag)
{
    uint32_t h[HDR_INTS];
    if (len < sizeof h + 4)
        return oml_diag_set(diag, OML_EFORMAT, "model", "truncated: %zu bytes", len);
    oml_reader r = oml_reader_of(buf, len);
    oml_get_le(&r, h, 4, HDR_INTS);
    if (h[0] != FORMAT_MAGIC)
        return oml_diag_set(diag, OML_EFORMAT, "model", "not a batch model (bad magic)");
    if (h[1] != FORMAT_VERSION)
        return oml_diag_set(diag, OML_EVERSION, "model",
                            "format version %u, this build reads %u: retrain or convert",
                            h[1], FORMAT_VERSION);
    oml_batch_layout lay;
    int rc = oml_batch_layout_init(&lay, (int32_t)h[2], (int32_t)h[3], (int32_t)h[4],
                                   (int32_t)h[5], (int32_t)h[6], diag);
    if (rc != OML_OK)
        return OML_EFORMAT;
    size_t body = sizeof h + lay.count * sizeof(float);
    if (len != body + 4)
        return oml_diag_set(diag, OML_EFORMAT, "model", "size %zu, header says %zu", len,
                            body + 4);
    if (oml_le32_load(buf + body) != (uint32_t)crc32(0L, buf, (uInt)body))
        return oml_diag_set(diag, OML_EFORMAT, "model", "CRC mismatch: corrupt model");
    oml_batch_model *m = calloc(1, sizeof *m);
    float *p = malloc(lay.count * sizeof *p);
    if (m == NULL || p == NULL) {
        free(m);
        free(p);
        return OML_ENOMEM;
    }
    oml_get_f32s(&r, p, lay.count);
    m->lay = lay;
    m->params = p;
    m->method = (int32_t)h[7];
    m->epochs_run = (int32_t)h[8];
    memcpy(&m->val_r1, &h[9], 4);
    *out = m;
    return OML_OK;
}
