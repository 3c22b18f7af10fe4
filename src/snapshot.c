/* snapshot.c - immutable, refcounted model copies and batched embedding. */
#include "snapshot.h"

#include <stdlib.h>
#include <string.h>

#define EMBED_CHUNK 256 /* rows per GEMM batch: big enough for BLAS, small for cache */

oml_snapshot *oml_snapshot_create(const oml_config *cfg, const float *params,
                                  const float *alpha, uint64_t version, uint64_t updates)
{
    oml_net_layout lay;
    oml_net_layout_init(&lay, cfg);
    oml_snapshot *s = malloc(sizeof *s + lay.count * sizeof(float));
    if (s == NULL)
        return NULL;
    s->cfg = *cfg;
    s->lay = lay;
    memset(s->alpha, 0, sizeof s->alpha);
    memcpy(s->alpha, alpha, sizeof(float) * (size_t)(cfg->layers + 1));
    s->version = version;
    s->updates = updates;
    atomic_init(&s->_refs, 1);
    memcpy(s->params, params, lay.count * sizeof(float));
    return s;
}

oml_snapshot *oml_snapshot_retain(oml_snapshot *s)
{
    atomic_fetch_add_explicit(&s->_refs, 1, memory_order_relaxed);
    return s;
}

void oml_snapshot_release(oml_snapshot *s)
{
    if (s != NULL && atomic_fetch_sub_explicit(&s->_refs, 1, memory_order_acq_rel) == 1)
        free(s);
}

/* Both embeds: rows of X (n, width) through the whole network, or, with
 * from_h0, through everything after the input basis. */
static int embed(const oml_snapshot *s, const float *X, int32_t width, int from_h0, int32_t n,
                 float *out)
{
    const oml_net_layout *lay = &s->lay;
    int32_t chunk = n < EMBED_CHUNK ? n : EMBED_CHUNK;
    if (n <= 0)
        return OML_OK;
    oml_net_acts a;
    if (oml_net_acts_init(&a, lay, chunk) != OML_OK)
        return OML_ENOMEM;
    size_t e = (size_t)lay->emb;
    for (int32_t i = 0; i < n; i += chunk) {
        int32_t m = n - i < chunk ? n - i : chunk;
        const float *rows = X + (size_t)i * (size_t)width;
        if (from_h0)
            oml_net_forward_h0(lay, s->params, rows, m, &a);
        else
            oml_net_forward(lay, s->params, rows, m, &a);
        for (int l = 0; l <= lay->layers; l++)
            memcpy(out + ((size_t)l * (size_t)n + (size_t)i) * e, a.f[l],
                   (size_t)m * e * sizeof(float));
    }
    oml_net_acts_free(&a);
    return OML_OK;
}

int oml_snapshot_embed(const oml_snapshot *s, const float *X, int32_t n, float *out)
{
    return embed(s, X, s->lay.dim, 0, n, out);
}

int oml_snapshot_embed_h0(const oml_snapshot *s, const float *H0, int32_t n, float *out)
{
    return embed(s, H0, s->lay.in, 1, n, out);
}
