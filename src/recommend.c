/* recommend.c - "more like these, less like those" over an index
 * (serve.h oml_recommend): the examples' embeddings make one query per
 * head, searched and ranked as retrieve does (serve_int.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"
#include "serve_int.h"

/* dst += scale * the mean of head h's rows of E (heads, n, emb). */
static void add_mean(float *dst, const float *E, int32_t n, int h, int32_t emb, float scale)
{
    for (int32_t i = 0; i < n; i++) {
        const float *e = E + ((size_t)h * (size_t)n + (size_t)i) * (size_t)emb;
        for (int32_t j = 0; j < emb; j++)
            dst[j] += scale * e[j] / (float)n;
    }
}

/* v /= |v|; 0 if v is (almost) zero. */
static int unit(float *v, int32_t emb)
{
    double s = 0;
    for (int32_t j = 0; j < emb; j++)
        s += (double)v[j] * v[j];
    if (!(s > 1e-24))
        return 0;
    float inv = (float)(1.0 / sqrt(s));
    for (int32_t j = 0; j < emb; j++)
        v[j] *= inv;
    return 1;
}

int oml_recommend(const oml_index *ix, const float *pos, int32_t n_pos, const float *neg,
                  int32_t n_neg, int32_t k, const oml_retrieve_opts *opts, oml_hit *out,
                  int32_t *n_out, oml_diag *diag)
{
    if (n_pos < 1 || pos == NULL || n_neg < 0 || (n_neg > 0 && neg == NULL))
        return oml_diag_set(diag, OML_EINVAL, "positive", "recommend needs 1 or more positive "
                            "examples (%d given) and 0 or more negative ones", n_pos);
    int rc = oml__check_query(ix, pos, k, -1, diag);
    size_t dim = rc == OML_OK ? (size_t)ix->snap->cfg.dim : 0;
    for (int32_t i = 1; i < n_pos + n_neg && rc == OML_OK; i++)
        rc = oml__check_query(ix, i < n_pos ? pos + (size_t)i * dim : neg + (size_t)(i - n_pos) * dim,
                              k, -1, diag);
    int32_t offset = opts ? opts->offset : 0;
    if (rc == OML_OK)
        rc = oml__check_offset(offset, k, diag);
    if (rc == OML_OK)
        rc = oml__check_columns(ix, opts ? opts->src : NULL, diag);
    if (rc != OML_OK)
        return rc;
    if (ix->n == 0) {
        *n_out = 0;
        return OML_OK;
    }
    int heads = ix->heads;
    int32_t emb = ix->emb, ranked = offset + k;
    size_t P = (size_t)heads * (size_t)ranked;
    float *E = malloc((size_t)heads * (size_t)(n_pos + n_neg) * (size_t)emb * sizeof *E);
    query_ws w;
    void *ex;
    if (E == NULL || oml__query_ws_init(&w, ix, ranked, P * sizeof(pool_hit), &ex) != OML_OK) {
        free(E);
        return oml_diag_set(diag, OML_ENOMEM, "", "recommend workspace");
    }
    float *Ep = E, *En = E + (size_t)heads * (size_t)n_pos * (size_t)emb;
    rc = oml_snapshot_embed(ix->snap, pos, n_pos, Ep); /* (heads, n_pos, emb) */
    if (rc == OML_OK && n_neg > 0)
        rc = oml_snapshot_embed(ix->snap, neg, n_neg, En);
    for (int h = 0; rc == OML_OK && h < heads; h++) {
        float *q = w.q + (size_t)h * (size_t)emb;
        memset(q, 0, (size_t)emb * sizeof *q);
        add_mean(q, Ep, n_pos, h, emb, n_neg > 0 ? 2.0f : 1.0f);
        if (n_pos == 1 && n_neg == 0)
            continue; /* already the unit embedding: one positive is exactly a retrieve */
        if (n_neg > 0)
            add_mean(q, En, n_neg, h, emb, -1.0f);
        if (!unit(q, emb)) { /* the means cancel: the positives alone */
            memset(q, 0, (size_t)emb * sizeof *q);
            add_mean(q, Ep, n_pos, h, emb, 1.0f);
            unit(q, emb);
        }
    }
    if (rc == OML_OK) {
        if (ix->hl)
            w.near.src = opts ? opts->src : NULL;
        oml__embedded_neighbors(ix, ranked, -1, opts ? opts->allow : NULL, &w);
        *n_out = oml__retrieve_page(ix, w.q, w.nb, w.cnt, ranked, opts, k, (pool_hit *)ex, out);
    } else {
        oml_diag_set(diag, rc, "", "embedding the examples");
    }
    free(w._block);
    free(E);
    return rc;
}
