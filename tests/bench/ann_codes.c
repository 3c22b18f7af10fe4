/* ann_codes.c - recall of shorter codes on one head's scanned lists (see
 * ann_codes.h). Scalar C throughout: it measures what each code keeps,
 * not how fast a kernel reads it. */
#include "ann_codes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PQ_K 16     /* centroids per subspace: 4 bits */
#define PQ_ITERS 10
#define PQ_SAMPLE 65536
#define N_R 7
static const int32_t R_CUT[N_R] = {16, 32, 64, 128, 256, 512, 1024};
static volatile uint64_t sink; /* keeps stream()'s reads */

typedef struct pq {
    int32_t dsub, m;  /* dimensions per subspace, subspaces */
    float *cent;      /* (m, PQ_K, dsub) */
    uint8_t *code;    /* (n, m) by position */
} pq;

/* The nearest of the PQ_K centroids c (PQ_K, d) to x (d). */
static int nearest(const float *x, const float *c, int32_t d)
{
    float best = INFINITY;
    int at = 0;
    for (int t = 0; t < PQ_K; t++) {
        float dd = 0;
        for (int32_t u = 0; u < d; u++)
            dd += (x[u] - c[t * d + u]) * (x[u] - c[t * d + u]);
        if (dd < best) {
            best = dd;
            at = t;
        }
    }
    return at;
}

/* Lloyd's k-means of PQ_K centroids on subspace j of the residuals R (n,
 * e), over a strided sample; then every position's code. */
static void pq_train(pq *p, const float *R, size_t n, int32_t e)
{
    size_t s = n < PQ_SAMPLE ? n : PQ_SAMPLE;
    int32_t d = p->dsub;
    int32_t *near = malloc(s * sizeof *near);
    for (int32_t j = 0; j < p->m; j++) {
        float *c = p->cent + (size_t)j * PQ_K * (size_t)d;
        for (int t = 0; t < PQ_K; t++)
            memcpy(c + t * d, R + (size_t)t * (n / PQ_K) * (size_t)e + (size_t)j * (size_t)d,
                   (size_t)d * sizeof *c);
        for (int it = 0; it <= PQ_ITERS; it++) {
            double sum[PQ_K][8] = {{0}};
            int64_t cnt[PQ_K] = {0};
            for (size_t i = 0; i < s; i++) {
                const float *x = R + (i * n / s) * (size_t)e + (size_t)j * (size_t)d;
                near[i] = nearest(x, c, d);
                cnt[near[i]]++;
                for (int32_t u = 0; u < d; u++)
                    sum[near[i]][u] += x[u];
            }
            for (int t = 0; it < PQ_ITERS && t < PQ_K; t++)
                for (int32_t u = 0; cnt[t] > 0 && u < d; u++)
                    c[t * d + u] = (float)(sum[t][u] / (double)cnt[t]);
        }
    }
    free(near);
    for (size_t i = 0; i < n; i++)
        for (int32_t j = 0; j < p->m; j++) {
            const float *x = R + i * (size_t)e + (size_t)j * (size_t)d;
            p->code[i * (size_t)p->m + (size_t)j] =
                (uint8_t)nearest(x, p->cent + (size_t)j * PQ_K * (size_t)d, d);
        }
}

static double cpu_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

/* The int8 codes of lists order[0 .. np) read once, summed 8 bytes at a
 * time: the least a scan of them costs (the memory's share). */
static uint64_t stream(const oml_hlist *hl, const int32_t *order, int32_t np)
{
    uint64_t s = 0;
    for (int32_t i = 0; i < np; i++) {
        const uint64_t *w = (const uint64_t *)(const void *)(hl->codes +
                            (size_t)hl->list_start[order[i]] * (size_t)hl->emb);
        size_t words = (size_t)(hl->list_start[order[i] + 1] - hl->list_start[order[i]]) *
                       (size_t)hl->emb / 8;
        for (size_t j = 0; j < words; j++)
            s += w[j];
    }
    return s;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* A 4-bit scan's cost, for e a multiple of 64: the rows' codes + 8 as
 * nibbles (byte j of a row: value j low, value j + e/2 high), against the
 * query's int8 code qc, 8 rows at a time (as hlist.c's int8 kernel), each
 * row's integer dot product less 8 sum(qc) times its scale, the R best kept
 * by a floor: what a first pass over them would do (a list's last rows
 * short of 8 are left out: it times, it does not search). Returns the
 * floor (so nothing is optimised away). */
__attribute__((target("avx2"))) static float nib_scan(const uint8_t *nib, const float *scale,
                                                     const int32_t *list_start,
                                                     const int32_t *order, int32_t np, int32_t e,
                                                     const int8_t *qc, int32_t qsum, float *top,
                                                     int32_t R)
{
    const __m256i ones = _mm256_set1_epi16(1), low = _mm256_set1_epi8(0x0F);
    __m256i q[OML_HLIST_MAX_EMB / 32];
    for (int32_t j = 0; j < e / 32; j++)
        q[j] = _mm256_loadu_si256((const __m256i *)(const void *)(qc + 32 * j));
    int32_t half = e / 64, cnt = 0; /* 32-byte words a row */
    float floor = -INFINITY;
    for (int32_t i = 0; i < np; i++)
        for (int32_t p = list_start[order[i]]; p + 8 <= list_start[order[i] + 1]; p += 8) {
            __m256i acc[8];
            for (int r = 0; r < 8; r++) {
                const uint8_t *c = nib + (size_t)(p + r) * (size_t)(e / 2);
                __m256i a = _mm256_setzero_si256();
                for (int32_t w = 0; w < half; w++) {
                    __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(c + 32 * w));
                    __m256i lo = _mm256_and_si256(v, low);
                    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
                    a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(lo, q[w]), ones));
                    a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(hi, q[half + w]), ones));
                }
                acc[r] = a;
            }
            __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(acc[0], acc[1]),
                                          _mm256_hadd_epi32(acc[2], acc[3]));
            __m256i g = _mm256_hadd_epi32(_mm256_hadd_epi32(acc[4], acc[5]),
                                          _mm256_hadd_epi32(acc[6], acc[7]));
            __m256i d = _mm256_sub_epi32(_mm256_add_epi32(_mm256_permute2x128_si256(h, g, 0x20),
                                                          _mm256_permute2x128_si256(h, g, 0x31)),
                                         _mm256_set1_epi32(8 * qsum));
            __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(d), _mm256_loadu_ps(scale + p));
            int bits = _mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_set1_ps(floor), _CMP_GT_OQ));
            if (bits == 0)
                continue;
            float dv[8];
            _mm256_storeu_ps(dv, v);
            for (int r = 0; r < 8; r++) /* the R best in a plain min-heap */
                if (dv[r] > floor) {
                    oml_neighbor *hp = (oml_neighbor *)(void *)top;
                    if (cnt < R) {
                        hp[cnt] = (oml_neighbor){p + r, dv[r]};
                        oml_minheap_up(hp, cnt++);
                    } else {
                        hp[0] = (oml_neighbor){p + r, dv[r]};
                        oml_minheap_down(hp, cnt, 0);
                    }
                    if (cnt == R)
                        floor = hp[0].dist;
                }
        }
    return floor;
}
#define HAVE_NIB_SCAN 1
#endif

/* How many of a query's approximate scores a (m) beat a[at]: its rank. */
static int32_t rank_of(const float *a, int32_t m, int32_t at)
{
    int32_t r = 0;
    for (int32_t i = 0; i < m; i++)
        r += a[i] > a[at];
    return r;
}

int ann_codes_report(const oml_index *ix, int head, const float *Q, int32_t n_q)
{
    const oml_hlist *hl = &ix->hl[head];
    size_t n = (size_t)ix->n;
    int32_t e = ix->emb;
    float *R = malloc(n * (size_t)e * sizeof *R);       /* residuals by position */
    int8_t *c4 = malloc(n * (size_t)e);                 /* 4-bit scalar codes */
    uint8_t *nib = malloc(n * (size_t)e / 2);           /* the same + 8, two a byte */
    float *s4 = malloc(n * sizeof *s4);
    pq pq2 = {.dsub = 2, .m = e / 2}, pq4 = {.dsub = 4, .m = e / 4};
    pq2.cent = malloc((size_t)e * PQ_K * sizeof(float));
    pq4.cent = malloc((size_t)e * PQ_K * sizeof(float));
    pq2.code = malloc(n * (size_t)pq2.m);
    pq4.code = malloc(n * (size_t)pq4.m);
    int32_t *order = malloc((size_t)hl->n_lists * sizeof *order);
    float *ld = malloc((size_t)hl->n_lists * sizeof *ld);
    float *a[4];
    int32_t *pos = malloc(n * sizeof *pos), *at_pos = malloc(n * sizeof *at_pos);
    float *scratch = malloc(n * sizeof *scratch);
    int32_t *pos_of = oml_hlist_inverse(hl->rows, hl->n); /* (a scanning head keeps rows only) */
    int ok = R && c4 && nib && s4 && pq2.cent && pq4.cent && pq2.code && pq4.code && order && ld &&
             pos && at_pos && scratch && pos_of;
    for (int v = 0; v < 4; v++)
        ok = ok && (a[v] = malloc(n * sizeof(float))) != NULL;
    if (!ok)
        return 1;
    for (int32_t l = 0; l < hl->n_lists; l++)
        for (int32_t p = hl->list_start[l]; p < hl->list_start[l + 1]; p++) {
            float *r = R + (size_t)p * (size_t)e, mx = 0;
            for (int32_t j = 0; j < e; j++) {
                r[j] = oml_index_emb(ix, head, hl->rows[p], j) - hl->centroids[(size_t)l * e + j];
                mx = fabsf(r[j]) > mx ? fabsf(r[j]) : mx;
            }
            s4[p] = mx / 7.0f;
            for (int32_t j = 0; j < e; j++)
                c4[(size_t)p * e + j] = (int8_t)(mx > 0 ? lrintf(r[j] / s4[p]) : 0);
            for (int32_t j = 0; j < e / 2; j++)
                nib[(size_t)p * (size_t)(e / 2) + (size_t)j] =
                    (uint8_t)((c4[(size_t)p * e + j] + 8) | (c4[(size_t)p * e + j + e / 2] + 8) << 4);
        }
    pq_train(&pq2, R, n, e);
    pq_train(&pq4, R, n, e);
    static const char *names[4] = {"int8", "4-bit scalar", "PQ 4-bit / 2 dims", "PQ 4-bit / 4 dims"};
    int32_t bytes[4] = {e, e / 2, e / 4, e / 8};
    long found[4][N_R] = {{0}}, in_lists = 0, total = 0, scanned = 0;
    double t_scan = 0, t_stream = 0, t_nib = 0;
    oml_neighbor top[64];
    void *wmem = malloc(oml_near_ws_bytes(ix, 10));
    oml_near_ws w;
    if (wmem == NULL)
        return 1;
    oml_near_ws_init(&w, ix, 10, wmem);
    oml_neighbor exact[10];
    float lut[256 * PQ_K];
    for (int32_t qi = 0; qi < n_q; qi++) {
        const float *q = Q + ((size_t)qi * (size_t)ix->heads + (size_t)head) * (size_t)e;
        int32_t lists = oml_hlist_order(hl, q, order, ld), np = hl->n_probe < lists ? hl->n_probe : lists;
        double t0 = cpu_us();
        sink = stream(hl, order, np);
        double t1 = cpu_us();
        if (hl->shared_from < 0) /* head's own scan, the search's cost */
            oml_index_topk_near(ix, head, q, 10, np, -1, NULL, exact + 0, &w);
        double t2 = cpu_us();
        t_stream += t1 - t0;
        t_scan += t2 - t1;
#ifdef HAVE_NIB_SCAN
        if (e % 64 == 0 && __builtin_cpu_supports("avx2")) {
            int8_t qc[OML_HLIST_MAX_EMB];
            float qmax = 0;
            int32_t qsum = 0;
            for (int32_t j = 0; j < e; j++)
                qmax = fabsf(q[j]) > qmax ? fabsf(q[j]) : qmax;
            for (int32_t j = 0; j < e; j++) {
                qc[j] = (int8_t)(qmax > 0 ? lrintf(q[j] * 127.0f / qmax) : 0);
                qsum += qc[j];
            }
            double t3 = cpu_us();
            sink = (uint64_t)nib_scan(nib, s4, hl->list_start, order, np, e, qc, qsum,
                                      (float *)(void *)top, 64);
            t_nib += cpu_us() - t3;
        }
#endif
        int32_t ne = oml_index_topk(ix, head, q, 10, -1, NULL, exact, scratch);
        int32_t m = 0;
        for (int32_t i = 0; i < np; i++)
            for (int32_t p = hl->list_start[order[i]]; p < hl->list_start[order[i] + 1]; p++) {
                float base = ld[order[i]], d8 = 0, d4 = 0;
                for (int32_t j = 0; j < e; j++) {
                    d8 += q[j] * (float)hl->codes[(size_t)p * e + j];
                    d4 += q[j] * (float)c4[(size_t)p * e + j];
                }
                a[0][m] = base + d8 * oml_code8_bf16(hl->scale[p]);
                a[1][m] = base + d4 * s4[p];
                scratch[m] = base; /* the full scan's is done with */
                pos[m] = p;
                at_pos[p] = m++;
            }
        for (int v = 2; v < 4; v++) { /* the query's table per subspace, then sums */
            const pq *P = v == 2 ? &pq2 : &pq4;
            for (int32_t j = 0; j < P->m; j++)
                for (int t = 0; t < PQ_K; t++) {
                    float s = 0;
                    for (int32_t u = 0; u < P->dsub; u++)
                        s += q[j * P->dsub + u] * P->cent[((size_t)j * PQ_K + t) * P->dsub + u];
                    lut[j * PQ_K + t] = s;
                }
            for (int32_t i = 0; i < m; i++) {
                float s = 0;
                for (int32_t j = 0; j < P->m; j++)
                    s += lut[j * PQ_K + P->code[(size_t)pos[i] * P->m + j]];
                a[v][i] = scratch[i] + s;
            }
        }
        scanned += m;
        for (int32_t t = 0; t < ne; t++) {
            total++;
            int32_t p = pos_of[exact[t].row];
            int32_t i = at_pos[p];
            if (i >= m || pos[i] != p)
                continue; /* its list was not scanned */
            in_lists++;
            for (int v = 0; v < 4; v++) {
                int32_t rk = rank_of(a[v], m, i);
                for (int c = 0; c < N_R; c++)
                    found[v][c] += rk < R_CUT[c];
            }
        }
    }
    printf("head %d, %d queries: %d of %d lists scanned (%.0f rows a query); exact 10 nearest "
           "in them: %.4f\n", head, (int)n_q, (int)hl->n_probe, (int)hl->n_lists,
           (double)scanned / n_q, (double)in_lists / (double)total);
    printf("CPU a query: the lists' search (k 10) %.0f us; reading its codes once %.0f us; "
           "a 4-bit scan of them keeping 64 %.0f us (0: no AVX2 or emb not a multiple of 64)\n",
           t_scan / n_q, t_stream / n_q, t_nib / n_q);
    printf("%-20s %6s", "code (bytes a row)", "");
    for (int c = 0; c < N_R; c++)
        printf("  R=%-5d", (int)R_CUT[c]);
    printf("\n");
    for (int v = 0; v < 4; v++) {
        printf("%-20s %6d", names[v], (int)bytes[v]);
        for (int c = 0; c < N_R; c++)
            printf("  %.4f ", (double)found[v][c] / (double)total);
        printf("\n");
    }
    for (int v = 0; v < 4; v++)
        free(a[v]);
    free(R);
    free(c4);
    free(nib);
    free(s4);
    free(pq2.cent);
    free(pq4.cent);
    free(pq2.code);
    free(pq4.code);
    free(order);
    free(ld);
    free(pos);
    free(at_pos);
    free(pos_of);
    free(scratch);
    free(wmem);
    return 0;
}
