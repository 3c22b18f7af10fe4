/* promote.c - a batch model in the live layout (see promote.h). One list of
 * blocks (live offset, batch offset, floats) serves both the snapshot and
 * the promote, so the two can never map a block differently. */
#include "promote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hedge.h"

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
    if (live->basis && live->dim > live->emb) {
        snprintf(err, errlen, "the live model reads its input through a fixed basis (config "
                 "basis, the wide preset) and a batch model reads the raw input: start the live "
                 "model with basis 0 to promote batch models into it");
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

void oml_promote(oml_learner *l, const oml_batch_model *bm)
{
    block blk[OML_MAX_LAYERS + 2];
    int nb = blocks_of(&l->lay, &bm->lay, blk);
    for (int i = 0; i < nb; i++) {
        memcpy(l->params + blk[i].to, bm->params + blk[i].from, blk[i].n * sizeof(float));
        if (l->start)
            memcpy(l->start + blk[i].to, bm->params + blk[i].from, blk[i].n * sizeof(float));
    }
    /* A batch net reads the centred input unscaled and its head has no
     * offset: the live input scale becomes 1 and the promoted head's offset 0. */
    const oml_net_layout *lay = &l->lay;
    int32_t d = bm->lay.depth;
    for (float *w = l->params; w; w = w == l->params ? l->start : NULL) {
        for (int32_t j = 0; lay->has_scale && j < lay->dim; j++)
            w[lay->scale + j] = 1.0f;
        if (lay->has_bias)
            memset(w + lay->bias[d], 0, (size_t)lay->emb * sizeof(float));
    }
    oml_hedge_init(l->alpha, oml_learner_heads(l));
    /* On OOM the previous embedding stays, as the learner's own refresh does. */
    (void)oml_learner_refresh_reference(l);
}
