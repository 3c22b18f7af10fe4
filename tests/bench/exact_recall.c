/* exact_recall.c - the exact retrieve answers under one model (see
 * exact_recall.h). */
#include "exact_recall.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ann_faiss.h"
#include "index.h"
#include "serve.h"
#include "store.h"

#define BLOCK 4096

/* Each query's and head's k largest dot products so far, descending,
 * with their item numbers. */
typedef struct nearest {
    float *dot;   /* (nq, heads, k) */
    int64_t *item;
    int k;
} nearest;

static void offer(nearest *nb, size_t at, float d, int64_t item)
{
    float *dot = nb->dot + at * (size_t)nb->k;
    int64_t *it = nb->item + at * (size_t)nb->k;
    int j = nb->k - 1;
    if (d <= dot[j])
        return;
    for (; j > 0 && d > dot[j - 1]; j--) {
        dot[j] = dot[j - 1];
        it[j] = it[j - 1];
    }
    dot[j] = d;
    it[j] = item;
}

/* Every item embedded under snap, block by block, its dot product with
 * each query on each head offered to nb. */
static int scan_items(oml_snapshot *snap, const catalogue *c, const float *qe, int nq,
                      nearest *nb, FILE *const *base)
{
    int heads = oml_snapshot_heads(snap);
    int32_t emb = snap->cfg.emb;
    float *X = malloc((size_t)BLOCK * (size_t)c->dim * sizeof *X);
    float *E = malloc((size_t)heads * BLOCK * (size_t)emb * sizeof *E);
    float *D = malloc((size_t)nq * BLOCK * sizeof *D);
    int rc = X && E && D ? 0 : -1;
    for (int64_t i0 = 0; rc == 0 && i0 < c->n; i0 += BLOCK) {
        int32_t m = (int32_t)(c->n - i0 < BLOCK ? c->n - i0 : BLOCK);
        for (int32_t j = 0; j < m; j++)
            catalogue_item(c, i0 + j, X + (size_t)j * (size_t)c->dim);
        if (oml_snapshot_embed(snap, X, m, E) != OML_OK) {
            rc = -1;
            break;
        }
        for (int h = 0; h < heads; h++) {
            const float *Eh = E + (size_t)h * (size_t)m * (size_t)emb;
            if (base && fwrite(Eh, sizeof *E * (size_t)emb, (size_t)m, base[h]) != (size_t)m)
                rc = -1;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, m, emb, 1.0f,
                        qe + (size_t)h * (size_t)nq * (size_t)emb, emb,
                        Eh, emb, 0.0f, D, m);
            for (int q = 0; q < nq; q++)
                for (int32_t j = 0; j < m; j++)
                    offer(nb, (size_t)q * (size_t)heads + (size_t)h, D[(size_t)q * (size_t)m + j],
                          i0 + j);
        }
    }
    free(X);
    free(E);
    free(D);
    return rc;
}

static int cmp_item(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The exact answer for query x from the rows its heads' k nearest name
 * (items, cnt of them in ascending order, duplicates included): oml_retrieve on an index of
 * those rows alone. */
static int answer_among(oml_snapshot *snap, const catalogue *c, const float *x,
                        const int64_t *items, int cnt, int k, int64_t *out)
{
    oml_store *st = NULL;
    oml_index *ix = NULL;
    oml_hit *hits = malloc((size_t)k * sizeof *hits);
    float *f = malloc((size_t)c->dim * sizeof *f);
    oml_diag diag = {0};
    int rc = hits && f ? oml_store_create(&st, c->dim, (uint32_t)cnt) : OML_ENOMEM;
    for (int i = 0; rc == OML_OK && i < cnt; i++) {
        char id[32];
        int len = snprintf(id, sizeof id, "%lld", (long long)items[i]);
        catalogue_item(c, items[i], f);
        rc = oml_store_put(st, id, (size_t)len, f, NULL, 0, NULL, &diag); /* a repeat: same */
    }
    if (rc == OML_OK)
        rc = oml_index_build(&ix, snap, st);
    int32_t n = 0;
    if (rc == OML_OK)
        rc = oml_retrieve(ix, x, k, -1, NULL, hits, &n, &diag);
    for (int j = 0; j < k; j++) {
        size_t len;
        out[j] = rc == OML_OK && j < n
                     ? strtoll(oml_store_id(st, ix->slots[hits[j].row], &len), NULL, 10)
                     : -1;
    }
    if (rc != OML_OK)
        fprintf(stderr, "exact recall: %s (%s)\n", oml_strerror(rc), diag.msg);
    oml_index_destroy(ix);
    oml_store_destroy(st);
    free(hits);
    free(f);
    return rc == OML_OK ? 0 : -1;
}

/* Each head's file of item embeddings in dir, opened for scan_items
 * (base[h] NULL: failed, said). */
static int open_bases(const char *dir, int heads, FILE **base)
{
    int rc = 0;
    for (int h = 0; h < heads; h++) {
        char path[512];
        snprintf(path, sizeof path, "%s/base%d", dir, h);
        if ((base[h] = fopen(path, "wb")) == NULL) {
            perror(path);
            rc = -1;
        }
    }
    return rc;
}

static int close_bases(int heads, FILE **base)
{
    int rc = 0;
    for (int h = 0; h < heads; h++)
        if (base[h] != NULL && fclose(base[h]) != 0)
            rc = -1;
    return rc;
}

/* The queries' embeddings and their exact k nearest a head, as
 * faiss_compare.py reads them. */
static int write_queries(const char *dir, int heads, int emb, const float *qe, int nq,
                         const nearest *nb)
{
    int rc = 0;
    int32_t *exact = malloc((size_t)nq * (size_t)nb->k * sizeof *exact);
    for (int h = 0; exact && rc == 0 && h < heads; h++) {
        for (int q = 0; q < nq; q++)
            for (int j = 0; j < nb->k; j++)
                exact[q * nb->k + j] =
                    (int32_t)nb->item[((size_t)q * (size_t)heads + (size_t)h) * (size_t)nb->k + j];
        rc = ann_faiss_write(dir, "queries", h, qe + (size_t)h * (size_t)nq * (size_t)emb,
                             (size_t)nq * (size_t)emb * sizeof *qe) ||
             ann_faiss_write(dir, "exact", h, exact, (size_t)nq * (size_t)nb->k * sizeof *exact);
    }
    free(exact);
    return exact && rc == 0 ? 0 : -1;
}

int exact_retrieve(oml_snapshot *snap, const catalogue *c, const float *Q, int nq, int k,
                   const char *faiss_dir, int64_t *out)
{
    int heads = oml_snapshot_heads(snap);
    size_t cells = (size_t)nq * (size_t)heads * (size_t)k;
    nearest nb = {malloc(cells * sizeof *nb.dot), malloc(cells * sizeof *nb.item), k};
    float *qe = malloc((size_t)heads * (size_t)nq * (size_t)snap->cfg.emb * sizeof *qe);
    int rc = nb.dot && nb.item && qe ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < cells; i++) {
        nb.dot[i] = -INFINITY;
        nb.item[i] = -1;
    }
    if (rc == 0 && oml_snapshot_embed(snap, Q, nq, qe) != OML_OK)
        rc = -1;
    FILE *base[OML_MAX_LAYERS + 1] = {NULL};
    if (rc == 0 && faiss_dir)
        rc = open_bases(faiss_dir, heads, base);
    if (rc == 0)
        rc = scan_items(snap, c, qe, nq, &nb, faiss_dir ? base : NULL);
    if (faiss_dir && close_bases(heads, base) != 0)
        rc = -1;
    if (rc == 0 && faiss_dir) /* before the answers below reorder each query's nearest */
        rc = write_queries(faiss_dir, heads, snap->cfg.emb, qe, nq, &nb);
    for (int q = 0; rc == 0 && q < nq; q++) {
        int64_t *items = nb.item + (size_t)q * (size_t)heads * (size_t)k;
        int cnt = 0;
        for (int i = 0; i < heads * k; i++) /* fewer than k items: a head's -1s */
            if (items[i] >= 0)
                items[cnt++] = items[i];
        /* Rows in item order, as the daemon's slots are (the bench puts
         * items in order): Eq. 27's ties go to the smaller row there too. */
        qsort(items, (size_t)cnt, sizeof *items, cmp_item);
        rc = answer_among(snap, c, Q + (size_t)q * (size_t)c->dim, items, cnt, k,
                          out + (size_t)q * (size_t)k);
    }
    if (rc != 0)
        fprintf(stderr, "exact recall: out of memory, an engine error or a file not written\n");
    free(nb.dot);
    free(nb.item);
    free(qe);
    return rc;
}
