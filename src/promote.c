/* promote.c - a batch model in the live layout (see promote.h). One list of
 * blocks (live offset, batch offset, floats) serves both the snapshot and
 * the promote, so the two can never map a block differently. */
#include "promote.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hedge.h"
#include "pca.h"

typedef struct block {
    size_t to, from, n;
} block;

/* The blocks of bm in the live layout lay (L >= depth): mu, W(1..d), Theta(d). */
static int blocks_of(const oml_net_layout *lay, const oml_batch_layout *bl, block *out)
{
    int nb = 0, d = bl->depth;
    out[nb++] = (block){lay->mu, bl->mu, (size_t)bl->dim};
    for (int k = 1; k <= d; k++)
        out[nb++] = (block){lay->w[k], bl->w[k],
                            (size_t)bl->hidden * (size_t)oml_batch_width(bl, k - 1)};
    out[nb++] = (block){lay->theta[d], bl->theta, (size_t)bl->emb * (size_t)oml_batch_width(bl, d)};
    return nb;
}

int oml_promote_compatible(const oml_config *live, const oml_batch_layout *lay, char *err,
                           size_t errlen)
{
    if (lay->dim != live->dim || lay->emb != live->emb ||
        (lay->depth > 0 && lay->hidden != live->hidden) || lay->depth > live->layers) {
        snprintf(err, errlen, "the model (dim %d, depth %d, hidden %d, emb %d) does not fit the "
                 "live model (dim %d, L %d, hidden %d, emb %d): dim, hidden and emb must be equal "
                 "and depth <= L", lay->dim, lay->depth, lay->hidden, lay->emb, live->dim,
                 live->layers, live->hidden, live->emb);
        return -1;
    }
    return 0;
}

oml_snapshot *oml_promote_snapshot(const oml_config *live, const oml_batch_model *bm,
                                   uint64_t version)
{
    oml_config cfg = *live;
    cfg.layers = bm->lay.depth;
    cfg.standardize = 0; /* a batch net: unscaled centred input, heads without offsets */
    cfg.offset = 0.0f;
    cfg.basis = 0; /* ... and reads the raw input */
    oml_net_layout lay;
    oml_net_layout_init(&lay, &cfg);
    float *p = calloc(lay.count, sizeof(float));
    if (p == NULL)
        return NULL;
    block blk[OML_MAX_LAYERS + 2];
    int nb = blocks_of(&lay, &bm->lay, blk);
    for (int i = 0; i < nb; i++)
        memcpy(p + blk[i].to, bm->params + blk[i].from, blk[i].n * sizeof(float));
    float alpha[OML_MAX_LAYERS + 1] = {0};
    alpha[bm->lay.depth] = 1.0f;
    oml_snapshot *s = oml_snapshot_create(&cfg, p, alpha, version, 0);
    free(p);
    return s;
}

/* With an input basis the live first layer reads z = E (x - mu), E = B
 * diag(s) (in, dim): the fixed basis after the input scale (net.h), not
 * x - mu itself. A batch net's first layer F (rows, dim) becomes F E+
 * (rows, in), the least-squares fit of F on E's rows: F E+ E = F Pi, Pi the
 * orthogonal projection onto their span, so the promoted net is the batch
 * net applied to the input's part in the basis's span (exact when F's rows
 * lie in it). E+ = E^T (E E^T)+, with (E E^T)+ from its eigenpairs
 * (oml_pca_components of E's columns: their second moment is E E^T / dim).
 * *out (rows, in) is malloc'd. OML_EINVAL: the basis is still zero (no
 * start was taken); OML_ENOMEM; OML_EIO (LAPACK failed). */
static int fold_into_basis(const oml_net_layout *lay, const float *params, const float *F,
                           int32_t rows, float **out)
{
    int32_t in = lay->in, dim = lay->dim;
    const float *B = params + lay->basis;
    float *Et = malloc((size_t)dim * in * sizeof(float));   /* E^T */
    float *V = malloc((size_t)in * in * sizeof(float));     /* eigenvectors, rows */
    float *var = malloc((size_t)in * sizeof(float));
    float *G = calloc((size_t)in * in, sizeof(float));      /* (E E^T)+ */
    float *Ep = malloc((size_t)dim * in * sizeof(float));   /* E+ */
    float *W = malloc((size_t)rows * in * sizeof(float));
    int rc = OML_ENOMEM;
    if (!Et || !V || !var || !G || !Ep || !W)
        goto done;
    for (int32_t r = 0; r < in; r++)
        for (int32_t j = 0; j < dim; j++)
            Et[(size_t)j * in + r] = B[(size_t)r * dim + j] *
                                     (lay->has_scale ? params[lay->scale + j] : 1.0f);
    rc = oml_pca_components(Et, NULL, dim, in, NULL, in, V, var, NULL);
    if (rc != OML_OK)
        goto done;
    rc = OML_EINVAL;
    if (!(var[0] > 0.0f))
        goto done;
    /* Directions below float precision of the largest are E's null space
     * (the rows a start with fewer than emb components leaves at zero). */
    for (int32_t r = 0; r < in && var[r] > 1e-6f * var[0]; r++)
        cblas_ssyr(CblasRowMajor, CblasUpper, in, 1.0f / (var[r] * (float)dim),
                   V + (size_t)r * in, 1, G, in);
    cblas_ssymm(CblasRowMajor, CblasRight, CblasUpper, dim, in, 1.0f, G, in, Et, in, 0.0f, Ep,
                in);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, in, dim, 1.0f, F, dim, Ep, in,
                0.0f, W, in);
    *out = W;
    W = NULL;
    rc = OML_OK;
done:
    free(Et);
    free(V);
    free(var);
    free(G);
    free(Ep);
    free(W);
    return rc;
}

int oml_promote(oml_learner *l, const oml_batch_model *bm)
{
    const oml_net_layout *lay = &l->lay;
    int32_t d = bm->lay.depth;
    block blk[OML_MAX_LAYERS + 2];
    int nb = blocks_of(lay, &bm->lay, blk);
    /* blk[1] is the first layer: W(1), or Theta(0) for a net without trunk */
    float *first = NULL;
    if (lay->has_basis) {
        int32_t rows = d >= 1 ? lay->hidden : lay->emb;
        int rc = fold_into_basis(lay, l->params, bm->params + blk[1].from, rows, &first);
        if (rc != OML_OK)
            return rc;
        blk[1].n = (size_t)rows * (size_t)lay->in;
    }
    for (int i = 0; i < nb; i++) {
        const float *src = first && i == 1 ? first : bm->params + blk[i].from;
        memcpy(l->params + blk[i].to, src, blk[i].n * sizeof(float));
        if (l->start)
            memcpy(l->start + blk[i].to, src, blk[i].n * sizeof(float));
    }
    free(first);
    /* A batch net reads the centred input unscaled and its head has no
     * offset: the live input scale becomes 1 (with a basis it stays: the
     * fold above read through it) and the promoted head's offset 0. */
    for (float *w = l->params; w; w = w == l->params ? l->start : NULL) {
        for (int32_t j = 0; lay->has_scale && !lay->has_basis && j < lay->dim; j++)
            w[lay->scale + j] = 1.0f;
        if (lay->has_bias)
            memset(w + lay->bias[d], 0, (size_t)lay->emb * sizeof(float));
    }
    oml_hedge_init(l->alpha, oml_learner_heads(l));
    /* On OOM the previous embedding stays, as the learner's own refresh does. */
    (void)oml_learner_refresh_reference(l);
    return OML_OK;
}
