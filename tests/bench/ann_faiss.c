/* ann_faiss.c - omld's embeddings and answers handed to faiss
 * (ann_faiss.h). */
#include "ann_faiss.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define K 10

int ann_faiss_present(void)
{
    return system("/usr/bin/python3 -c 'import faiss' 2>/dev/null") == 0;
}

int ann_faiss_write(const char *dir, const char *name, int h, const void *p, size_t bytes)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s%d", dir, name, h);
    FILE *f = fopen(path, "wb");
    int ok = f != NULL && fwrite(p, 1, bytes, f) == bytes;
    if (f != NULL && fclose(f) != 0)
        ok = 0;
    if (!ok)
        fprintf(stderr, "faiss: cannot write %s\n", path);
    return ok ? 0 : 1;
}

/* Head h's rows (n, emb) row-major, its queries (n_q, emb), and per query
 * omld's exact 10 nearest rows and its lists' 10 (-1 where fewer). */
static int write_head(const oml_index *ix, int h, const float *Q, int32_t n_q, const char *dir)
{
    size_t n = (size_t)ix->n, e = (size_t)ix->emb, H = (size_t)ix->heads;
    float *rows = malloc(n * e * sizeof *rows), *q = malloc((size_t)n_q * e * sizeof *q);
    float *scratch = malloc(n * sizeof *scratch);
    int32_t *exact = malloc((size_t)n_q * K * sizeof *exact);
    int32_t *near = malloc((size_t)n_q * K * sizeof *near);
    void *mem = malloc(oml_near_ws_bytes(ix, K));
    int rc = rows && q && scratch && exact && near && mem ? 0 : 1;
    if (rc == 0) {
        for (size_t r = 0; r < n; r++)
            for (size_t j = 0; j < e; j++)
                rows[r * e + j] = oml_index_emb(ix, h, (int32_t)r, (int32_t)j);
        oml_near_ws w;
        oml_near_ws_init(&w, ix, K, mem);
        oml_neighbor got[K];
        for (int32_t i = 0; i < n_q; i++) {
            const float *qi = Q + ((size_t)i * H + (size_t)h) * e;
            memcpy(q + (size_t)i * e, qi, e * sizeof *q);
            int32_t g = oml_index_topk(ix, h, qi, K, -1, NULL, got, scratch);
            for (int32_t j = 0; j < K; j++)
                exact[i * K + j] = j < g ? got[j].row : -1;
            /* a sharing head reads its donor's scan of the same query: run it first */
            int donor = ix->hl ? ix->hl[h].shared_from : -1;
            if (donor >= 0)
                oml_index_topk_near(ix, donor, Q + ((size_t)i * H + (size_t)donor) * e, K, -1, -1,
                                    NULL, got, &w);
            g = ix->hl ? oml_index_topk_near(ix, h, qi, K, -1, -1, NULL, got, &w) : g;
            for (int32_t j = 0; j < K; j++)
                near[i * K + j] = j < g ? got[j].row : -1;
        }
        rc = ann_faiss_write(dir, "base", h, rows, n * e * sizeof *rows) ||
             ann_faiss_write(dir, "queries", h, q, (size_t)n_q * e * sizeof *q) ||
             ann_faiss_write(dir, "exact", h, exact, (size_t)n_q * K * sizeof *exact) ||
             ann_faiss_write(dir, "lists", h, near, (size_t)n_q * K * sizeof *near);
    }
    free(rows);
    free(q);
    free(scratch);
    free(exact);
    free(near);
    free(mem);
    return rc;
}

static void remove_dir(const char *dir)
{
    char rm[256];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (system(rm) != 0)
        fprintf(stderr, "faiss: could not remove %s\n", dir);
}

int ann_faiss_compare(const char *dir, int64_t n, int32_t emb, int heads, int32_t n_q)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/bench/faiss_compare.py %s %lld %d %d %d",
             OML_SOURCE_DIR, dir, (long long)n, emb, heads, n_q);
    fflush(stdout);
    int rc = system(cmd) == 0 ? 0 : 1;
    if (rc)
        fprintf(stderr, "faiss: %s failed\n", cmd);
    remove_dir(dir);
    return rc;
}

int ann_faiss_report(const oml_index *ix, const float *Q, int32_t n_q)
{
    char dir[] = "/tmp/oml-faiss-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("oml-ann-bench --faiss: mkdtemp");
        return 1;
    }
    int rc = 0;
    for (int h = 0; rc == 0 && h < ix->heads; h++) /* one head's files at a time: 1M x 96 is 384 MB */
        rc = write_head(ix, h, Q, n_q, dir);
    if (rc != 0) {
        remove_dir(dir);
        return rc;
    }
    return ann_faiss_compare(dir, ix->n, ix->emb, ix->heads, n_q);
}
