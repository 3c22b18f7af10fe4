/* serve_shard.c - one shard's part of a retrieval (serve_shard.h). The
 * search is oml_retrieve's (oml__query_neighbors), only not ranked here. */
#include "serve_shard.h"

#include <stdlib.h>
#include <string.h>

#include "serve_int.h"

int oml_retrieve_candidates(const oml_index *ix, const float *x, int32_t ranked,
                            int32_t exclude_row, const uint8_t *allow, oml_candidates *out,
                            oml_diag *diag)
{
    memset(out, 0, sizeof *out);
    int rc = oml__check_query(ix, x, ranked, exclude_row, diag);
    if (rc == OML_OK)
        rc = oml__check_columns(ix, NULL, diag);
    if (rc != OML_OK)
        return rc;
    out->heads = ix->heads;
    out->ranked = ranked;
    if (ix->n == 0)
        return OML_OK;
    size_t P = (size_t)ix->heads * (size_t)ranked;
    query_ws w;
    void *ex;
    if (oml__query_ws_init(&w, ix, ranked, P * (sizeof(int32_t) + sizeof(float)), &ex) != OML_OK)
        return oml_diag_set(diag, OML_ENOMEM, "", "retrieve workspace");
    rc = oml__query_neighbors(ix, x, ranked, exclude_row, allow, &w);
    if (rc != OML_OK) {
        free(w._block);
        return oml_diag_set(diag, rc, "", "embedding the query");
    }
    out->_block = w._block;
    out->nb = w.nb;
    out->rows = ex;
    out->similarity = (float *)(void *)((int32_t *)ex + P);
    /* The index's columns: row r's head h at emb_cols + h (emb, n) + r. */
    size_t head_stride = (size_t)ix->emb * (size_t)ix->n, stride = (size_t)ix->n;
    for (int h = 0; h < ix->heads; h++) {
        out->cnt[h] = w.cnt[h];
        for (int32_t j = 0; j < w.cnt[h]; j++) {
            int32_t r = w.nb[(size_t)h * (size_t)ranked + (size_t)j].row, seen = 0;
            for (int32_t i = 0; i < out->n_rows && !seen; i++)
                seen = out->rows[i] == r;
            if (seen)
                continue;
            out->rows[out->n_rows] = r;
            out->similarity[out->n_rows++] = oml__pair_similarity(
                ix->snap->alpha, ix->heads, ix->emb, w.q, ix->emb_cols + r, head_stride, stride);
        }
    }
    return OML_OK;
}

void oml_candidates_free(oml_candidates *c)
{
    if (c)
        free(c->_block);
}
