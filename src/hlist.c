/* hlist.c - one head's inverted lists over int8 codes (see hlist.h).
 *
 * DESIGN: centroids come from spherical k-means on a strided sample of the
 * head's rows (ivf.c); every row then goes to the list of its largest
 * centroid dot product, one GEMM per chunk of rows read straight from the
 * index's (emb, n) columns. A row's code is of its residual from its
 * list's centroid, res = v - c (code8.h: round(res * 127 / max |res_j|),
 * its scale max |res_j| / 127, rounded up to 16 bits). Then q . v
 * = q . c + q . res, the first term exact (the probe computed it) and the
 * second's error proportional to the list's spread, not to the vectors':
 * rows of a tight cluster (a trained metric makes them) stay apart. A
 * query is coded as round(q * 127 / max |q_j|), so a scan is integer
 * multiply-adds (exact, so the compiler vectorises them in any order), one
 * scale per row. The error of a code's dot product is bounded: with q^ the
 * query's code times qs and r^ the row's times its scale,
 *   q . res - q^ . r^ = (q - q^) . res + q^ . (res - r^),
 * at most ||q - q^|| ||res|| + ||q^|| ||res - r^|| (Cauchy-Schwarz), both
 * row norms stored at build, both query norms taken once per query. The
 * scan offers every row above what it can still keep with that slack
 * (hlist_keep.h), so the caller's exact re-rank sees every row the codes
 * cannot rule out.
 *
 * The first pass (pq4.h) stands before that: the same residuals as 4-bit
 * product codes, codebooks trained on a strided sample of them, scored a
 * list at a time with tables of the query's dot products. It only picks
 * which rows the int8 codes score; their bound then holds as before, so a
 * first pass that keeps every scanned row hands over what the int8 scan
 * keeps (the same rows that may be nearest, the same floats). What it
 * drops is a recall loss the calibration measures and pays for in lists. */
#include "hlist.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "code8.h"
#include "err.h"
#include "hlist_int.h"
#include "ivf.h"

#define CHUNK 4096       /* rows per assignment GEMM */
#define PQ_STEP 8        /* blocks the first pass scores before its threshold rises */
#define RESCORE 32       /* kept rows whose int8 codes are gathered at once */
#define SCAN_BLOCK OML_CODE8_BLOCK /* positions whose dot products a scan computes at once */

int32_t oml_hlist_lists_for(size_t n)
{
    int32_t l = (int32_t)(sqrt((double)n) / 2.0);
    return l < 16 ? 16 : l > 4096 ? 4096 : l;
}

void oml_hlist_free(oml_hlist *hl)
{
    free(hl->centroids);
    free(hl->list_start);
    free(hl->rows);
    free(hl->pos_of);
    free(hl->scale);
    free(hl->codes);
    free(hl->res_norm);
    free(hl->code_err);
    free(hl->res_q);
    free(hl->err_q);
    free(hl->list_res_max);
    free(hl->list_err_max);
    (void)oml_hlist_drop_pq(hl);
    memset(hl, 0, sizeof *hl);
}

size_t oml_hlist_drop_pq(oml_hlist *hl)
{
    size_t before = oml_hlist_bytes(hl);
    oml_pq4_free(&hl->pq);
    free(hl->blk_start);
    free(hl->pq_codes);
    hl->blk_start = NULL;
    hl->pq_codes = NULL;
    hl->pq_keep = 0;
    return before - oml_hlist_bytes(hl);
}

size_t oml_hlist_bytes(const oml_hlist *hl)
{
    size_t n = (size_t)hl->n, L = (size_t)hl->n_lists, e = (size_t)hl->emb;
    size_t maps = (hl->rows != NULL) + (hl->pos_of != NULL);
    size_t bytes = L * e * sizeof(float)                         /* centroids */
                   + (L + 1) * sizeof(int32_t)                    /* list_start */
                   + n * maps * sizeof(int32_t)                   /* rows, pos_of */
                   + n * (sizeof(uint16_t) + 2)                   /* scale, res_q, err_q */
                   + n * e                                        /* int8 codes */
                   + 2 * L * sizeof(float);                       /* list_res_max, _err_max */
    if (hl->pq.m > 0 && hl->blk_start)
        bytes += (size_t)hl->pq.m * OML_PQ4_K * OML_PQ4_DSUB * sizeof(float) +
                 (L + 1) * sizeof(int32_t) +
                 (size_t)hl->blk_start[L] * oml_pq4_block_bytes(&hl->pq);
    return bytes;
}

int32_t *oml_hlist_inverse(const int32_t *map, int32_t n)
{
    int32_t *inv = malloc((n > 0 ? (size_t)n : 1) * sizeof *inv);
    for (int32_t i = 0; inv && i < n; i++)
        inv[map[i]] = i;
    return inv;
}

/* *want made from have, its inverse, unless it is there. */
static int make_map(int32_t **want, const int32_t *have, int32_t n)
{
    if (*want != NULL)
        return OML_OK;
    if (have == NULL)
        return OML_EINVAL;
    *want = oml_hlist_inverse(have, n);
    return *want ? OML_OK : OML_ENOMEM;
}

int oml_hlist_keep_maps(oml_hlist *hl, int rows, int pos_of)
{
    int rc = rows || pos_of ? OML_OK : OML_EINVAL;
    if (rc == OML_OK && rows)
        rc = make_map(&hl->rows, hl->pos_of, hl->n);
    if (rc == OML_OK && pos_of)
        rc = make_map(&hl->pos_of, hl->rows, hl->n);
    if (rc != OML_OK)
        return rc;
    if (!rows) {
        free(hl->rows);
        hl->rows = NULL;
    }
    if (!pos_of) {
        free(hl->pos_of);
        hl->pos_of = NULL;
    }
    return OML_OK;
}

/* Centroids trained on every (n / s)-th row, copied out of the columns. */
static int train(oml_hlist *hl, const float *cols)
{
    size_t n = (size_t)hl->n, e = (size_t)hl->emb;
    size_t s = (size_t)hl->n_lists * OML_HLIST_SAMPLE_PER_LIST;
    if (s > n)
        s = n;
    float *sample = malloc(s * e * sizeof *sample);
    if (sample == NULL)
        return OML_ENOMEM;
    for (size_t i = 0; i < s; i++)
        for (size_t j = 0; j < e; j++)
            sample[i * e + j] = cols[j * n + i * n / s];
    int rc = oml_ivf_train(sample, s, hl->emb, hl->n_lists, hl->centroids);
    free(sample);
    return rc;
}

/* The list of every row: argmax over the centroids, GEMM on the columns
 * (A = cols[:, i .. i + m) read transposed, lda n). */
static int assign(const oml_hlist *hl, const float *cols, uint16_t *list_of)
{
    size_t n = (size_t)hl->n, L = (size_t)hl->n_lists;
    float *dots = malloc((size_t)CHUNK * L * sizeof *dots);
    if (dots == NULL)
        return OML_ENOMEM;
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t m = n - i < CHUNK ? n - i : CHUNK;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasTrans, (int)m, (int)L, hl->emb, 1.0f,
                    cols + i, (int)n, hl->centroids, hl->emb, 0.0f, dots, (int)L);
        for (size_t r = 0; r < m; r++)
            list_of[i + r] = (uint16_t)oml_ivf_first_max(dots + r * L, (int32_t)L);
    }
    free(dots);
    return OML_OK;
}

/* The product codes' codebooks, trained on the residuals of a strided
 * sample of rows from their lists' centroids. Nothing (pq.m 0) where the
 * head's width does not fit them. */
static int train_pq(oml_hlist *hl, const float *cols, const uint16_t *list_of)
{
    size_t n = (size_t)hl->n, e = (size_t)hl->emb;
    if (!oml_pq4_fits(hl->emb))
        return OML_OK;
    size_t s = n < OML__HLIST_PQ_SAMPLE ? n : OML__HLIST_PQ_SAMPLE;
    float *sample = malloc(s * e * sizeof *sample);
    if (sample == NULL)
        return OML_ENOMEM;
    for (size_t i = 0; i < s; i++) {
        size_t r = i * n / s;
        const float *c = hl->centroids + (size_t)list_of[r] * e;
        for (size_t j = 0; j < e; j++)
            sample[i * e + j] = cols[j * n + r] - c[j];
    }
    int rc = oml_pq4_train(&hl->pq, sample, s, hl->emb);
    free(sample);
    return rc;
}

void oml__hlist_encode(oml_hlist *hl, const float *v, size_t p, uint8_t *pq_rows)
{
    float norm, err;
    hl->scale[p] = oml_code8_encode(v, hl->emb, hl->codes + p * (size_t)hl->emb, &norm, &err);
    hl->res_norm[p] = oml_code8_bf16_up(norm); /* upper bounds: rounded up */
    hl->code_err[p] = oml_code8_bf16_up(err);
    if (pq_rows == NULL)
        return;
    uint8_t pc[OML_PQ4_MAX_EMB / OML_PQ4_DSUB];
    oml_pq4_codes(&hl->pq, v, pc);
    for (int32_t j = 0; j < hl->pq.m; j += 2)
        pq_rows[p * (size_t)(hl->pq.m / 2) + (size_t)(j / 2)] = (uint8_t)(pc[j] | pc[j + 1] << 4);
}

int oml__hlist_group(oml_hlist *hl, const uint16_t *list_of, int blocks)
{
    int32_t *pos_of = hl->pos_of, *at = hl->list_start;
    size_t n = (size_t)hl->n, L = (size_t)hl->n_lists;
    memset(at, 0, (L + 1) * sizeof *at);
    for (size_t r = 0; r < n; r++)
        at[list_of[r] + 1]++;
    if (hl->pq.m > 0) {
        if ((hl->blk_start = calloc(L + 1, sizeof *hl->blk_start)) == NULL)
            return OML_ENOMEM;
        for (size_t l = 0; l < L; l++)
            hl->blk_start[l + 1] = hl->blk_start[l] + (at[l + 1] + OML_PQ4_BLOCK - 1) /
                                                          OML_PQ4_BLOCK;
        hl->pq_keep = OML_HLIST_PQ_KEEP;
        if (blocks && (hl->pq_codes = calloc((size_t)hl->blk_start[L],
                                             oml_pq4_block_bytes(&hl->pq))) == NULL)
            return OML_ENOMEM;
    }
    for (size_t l = 0; l < L; l++)
        at[l + 1] += at[l];
    for (size_t r = 0; r < n; r++) { /* at[l] walks list l; shifted back below */
        pos_of[r] = at[list_of[r]]++;
        hl->rows[pos_of[r]] = (int32_t)r;
    }
    memmove(at + 1, at, L * sizeof *at);
    at[0] = 0;
    return OML_OK;
}

/* The fewest steps of `step` (at most 255) that reach x: the product is
 * taken as slack_of takes it, so the bound it gives is never below x. */
static uint8_t steps_up(float x, float step)
{
    if (!(x > 0.0f) || !(step > 0.0f))
        return 0;
    float q = ceilf(x / step);
    q = q > 255.0f ? 255.0f : q;
    while (q < 255.0f && q * step < x)
        q += 1.0f;
    return (uint8_t)q;
}

/* A list's largest bound, raised so that 255 of its steps reach it
 * (255 * (max / 255) can round below max). */
static float reachable(float max)
{
    float m = max;
    while (255.0f * oml_hlist_step(m) < max)
        m = nextafterf(m, INFINITY);
    return m;
}

int oml__hlist_finish_lists(oml_hlist *hl, const uint8_t *pq_rows)
{
    const int32_t *at = hl->list_start;
    for (int32_t l = 0; pq_rows && l < hl->n_lists; l++)
        for (int32_t p = at[l]; p < at[l + 1]; p++) {
            uint8_t c[OML_PQ4_MAX_EMB / OML_PQ4_DSUB];
            oml__hlist_pq_unpack(pq_rows + (size_t)p * (size_t)(hl->pq.m / 2), hl->pq.m, c);
            size_t b = (size_t)(hl->blk_start[l] + (p - at[l]) / OML_PQ4_BLOCK);
            oml_pq4_put(&hl->pq, c, hl->pq_codes + b * oml_pq4_block_bytes(&hl->pq),
                        (p - at[l]) % OML_PQ4_BLOCK);
        }
    size_t n = (size_t)hl->n;
    hl->res_q = malloc(n ? n : 1);
    hl->err_q = malloc(n ? n : 1);
    if (hl->res_q == NULL || hl->err_q == NULL)
        return OML_ENOMEM; /* (oml_hlist_free frees them) */
    for (int32_t l = 0; l < hl->n_lists; l++) {
        float rm = 0.0f, em = 0.0f;
        for (int32_t p = at[l]; p < at[l + 1]; p++) {
            float r = oml_code8_bf16(hl->res_norm[p]), e = oml_code8_bf16(hl->code_err[p]);
            rm = r > rm ? r : rm;
            em = e > em ? e : em;
        }
        hl->list_res_max[l] = reachable(rm);
        hl->list_err_max[l] = reachable(em);
        float rs = oml_hlist_step(hl->list_res_max[l]), es = oml_hlist_step(hl->list_err_max[l]);
        for (int32_t p = at[l]; p < at[l + 1]; p++) {
            hl->res_q[p] = steps_up(oml_code8_bf16(hl->res_norm[p]), rs);
            hl->err_q[p] = steps_up(oml_code8_bf16(hl->code_err[p]), es);
        }
    }
    free(hl->res_norm);
    free(hl->code_err);
    hl->res_norm = NULL;
    hl->code_err = NULL;
    return OML_OK;
}

/* Positions grouped by list, then the code of each row's residual from
 * its centroid, CHUNK rows at a time: the chunk's columns are read in
 * order into rows (t), and each row's code is written whole to its
 * position; its product codes likewise into pq_rows (by position), then
 * into their blocks. */
static int lay_out(oml_hlist *hl, const float *cols, const uint16_t *list_of, float *t,
                   uint8_t *pq_rows)
{
    int rc = oml__hlist_group(hl, list_of, 1);
    if (rc != OML_OK)
        return rc;
    size_t n = (size_t)hl->n, e = (size_t)hl->emb;
    for (size_t r0 = 0; r0 < n; r0 += CHUNK) {
        size_t m = n - r0 < CHUNK ? n - r0 : CHUNK;
        for (size_t j = 0; j < e; j++)
            for (size_t i = 0; i < m; i++)
                t[i * e + j] = cols[j * n + r0 + i];
        for (size_t i = 0; i < m; i++) {
            float *v = t + i * e;
            const float *c = hl->centroids + (size_t)list_of[r0 + i] * e;
            for (size_t j = 0; j < e; j++)
                v[j] -= c[j];
            oml__hlist_encode(hl, v, (size_t)hl->pos_of[r0 + i], pq_rows);
        }
    }
    (void)oml_hlist_keep_maps(hl, 1, 0); /* laid out: a built head scans (rows only) */
    return oml__hlist_finish_lists(hl, pq_rows);
}

int oml_hlist_build(oml_hlist *hl, const float *cols, int32_t n, int32_t emb, int32_t n_lists)
{
    memset(hl, 0, sizeof *hl);
    if (cols == NULL || emb < 1 || emb > OML_HLIST_MAX_EMB || n_lists < 1 ||
        n_lists > OML_HLIST_MAX_LISTS || n < n_lists)
        return OML_EINVAL;
    *hl = (oml_hlist){.n_lists = n_lists, .emb = emb, .n = n, .n_probe = (n_lists + 3) / 4,
                      .shared_from = -1};
    size_t N = (size_t)n, L = (size_t)n_lists, e = (size_t)emb;
    hl->centroids = malloc(L * e * sizeof *hl->centroids);
    hl->list_start = malloc((L + 1) * sizeof *hl->list_start);
    hl->rows = malloc(N * sizeof *hl->rows);
    hl->scale = malloc(N * sizeof *hl->scale);
    hl->codes = malloc(N * e * sizeof *hl->codes);
    hl->pos_of = malloc(N * sizeof *hl->pos_of);
    hl->res_norm = malloc(N * sizeof *hl->res_norm);
    hl->code_err = malloc(N * sizeof *hl->code_err);
    hl->list_res_max = malloc(L * sizeof *hl->list_res_max);
    hl->list_err_max = malloc(L * sizeof *hl->list_err_max);
    uint16_t *list_of = malloc(N * sizeof *list_of);
    float *t = malloc((size_t)CHUNK * e * sizeof *t);
    int rc = hl->centroids && hl->list_start && hl->rows && hl->scale && hl->codes && list_of &&
                     hl->pos_of && t &&
                     hl->res_norm && hl->code_err && hl->list_res_max && hl->list_err_max
                 ? OML_OK
                 : OML_ENOMEM;
    if (rc == OML_OK)
        rc = train(hl, cols);
    if (rc == OML_OK)
        rc = assign(hl, cols, list_of);
    if (rc == OML_OK)
        rc = train_pq(hl, cols, list_of);
    uint8_t *pq_rows = NULL;
    if (rc == OML_OK && hl->pq.m > 0 && (pq_rows = malloc(N * (size_t)(hl->pq.m / 2))) == NULL)
        rc = OML_ENOMEM;
    if (rc == OML_OK)
        rc = lay_out(hl, cols, list_of, t, pq_rows);
    free(pq_rows);
    free(list_of);
    free(t);
    if (rc != OML_OK)
        oml_hlist_free(hl);
    return rc;
}

/* Larger dot product first, then the smaller list. */
static int by_dot_desc(const void *pa, const void *pb, void *arg)
{
    const float *dots = arg;
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    if (dots[a] != dots[b])
        return dots[a] > dots[b] ? -1 : 1;
    return (a > b) - (a < b);
}

void oml_hlist_dots(const oml_hlist *hl, const float *q, float *dots)
{
    cblas_sgemv(CblasRowMajor, CblasNoTrans, hl->n_lists, hl->emb, 1.0f, hl->centroids,
                hl->emb, q, 1, 0.0f, dots, 1);
}

int32_t oml_hlist_order(const oml_hlist *hl, const float *q, int32_t *order, float *dots)
{
    return oml_hlist_order_first(hl, q, hl->n_lists, order, dots);
}

/* Past this many of the lists, oml_hlist_order_first sorts them all. */
#define ORDER_FIRST_MAX 64

int32_t oml_hlist_order_first(const oml_hlist *hl, const float *q, int32_t want, int32_t *order,
                              float *dots)
{
    oml_hlist_dots(hl, q, dots);
    int32_t m = 0;
    for (int32_t l = 0; l < hl->n_lists; l++)
        if (isfinite(dots[l]))
            order[m++] = l;
    if (want >= m || want > ORDER_FIRST_MAX) {
        qsort_r(order, (size_t)m, sizeof *order, by_dot_desc, dots);
        return m;
    }
    if (want <= 0)
        return m;
    /* order[0 .. want) kept sorted by insertion; a list that does not
     * beat the last of them stays behind them. */
    qsort_r(order, (size_t)want, sizeof *order, by_dot_desc, dots);
    for (int32_t i = want; i < m; i++) {
        int32_t l = order[i];
        if (by_dot_desc(&l, &order[want - 1], dots) >= 0)
            continue;
        order[i] = order[want - 1];
        int32_t j = want - 1;
        while (j > 0 && by_dot_desc(&l, &order[j - 1], dots) < 0) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = l;
    }
    return m;
}

/* Position p's slack, p in list l: bound of |its code's dot - q . row|
 * (file comment), from its norms' steps. */
static float slack_of(const oml_hlist *hl, const oml_code8_query *qc, int32_t p, int32_t l)
{
    return qc->err * ((float)hl->res_q[p] * oml_hlist_step(hl->list_res_max[l])) +
           qc->norm * ((float)hl->err_q[p] * oml_hlist_step(hl->list_err_max[l])) + qc->margin;
}

/* The largest slack of any position of list l. */
static float slack_max(const oml_hlist *hl, const oml_code8_query *qc, int32_t l)
{
    return qc->err * (255.0f * oml_hlist_step(hl->list_res_max[l])) +
           qc->norm * (255.0f * oml_hlist_step(hl->list_err_max[l])) + qc->margin;
}

/* The list holding position p (list_start ascending). */
static int32_t list_of_pos(const oml_hlist *hl, int32_t p)
{
    int32_t lo = 0, hi = hl->n_lists - 1;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (hl->list_start[mid] <= p)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Fetches what scoring position p reads: its code, scale and bounds. */
static void prefetch_position(const oml_hlist *hl, size_t p)
{
    size_t e = (size_t)hl->emb;
    for (size_t off = 0; off < e; off += 64)
        __builtin_prefetch(hl->codes + p * e + off);
    __builtin_prefetch(hl->codes + p * e + e - 1);
    __builtin_prefetch(hl->scale + p);
    __builtin_prefetch(hl->res_q + p);
    __builtin_prefetch(hl->err_q + p);
}

/* The positions of cand[i0 .. i0 + g), their rows' data fetched. */
static void rescore_positions_of(const oml_hlist *hl, const oml_hlist_hit *cand, int32_t i0,
                                 int32_t g, int32_t *pos)
{
    for (int32_t i = 0; i < g; i++) {
        pos[i] = hl->pos_of[cand[i0 + i].row];
        prefetch_position(hl, (size_t)pos[i]);
    }
}

/* Positions pos[0 .. g) (g <= RESCORE), of rows row[], scored by their
 * int8 codes (one batched dot product) and offered to keep with their
 * bound: the dot and slack the int8 scan gives them. */
static void offer_group(const oml_hlist *hl, const oml_code8_query *qc, const float *dots_c,
                        const int32_t *pos, const int32_t *row, int32_t g, oml_hlist_keep *keep)
{
    size_t e = (size_t)hl->emb;
    int8_t codes[RESCORE * OML_HLIST_MAX_EMB];
    int32_t dot[RESCORE];
    if (g < 1)
        return;
    for (int32_t i = 0; i < g; i++)
        memcpy(codes + (size_t)i * e, hl->codes + (size_t)pos[i] * e, e);
    oml_code8_dots(codes, g, hl->emb, qc->c, dot);
    for (int32_t i = 0; i < g; i++) {
        int32_t p = pos[i], l = list_of_pos(hl, p);
        float d = dots_c[l] + (float)dot[i] * oml_code8_bf16(hl->scale[p]) * qc->qs;
        oml_hlist_keep_offer(keep, row[i], d, slack_of(hl, qc, p, l));
    }
}

/* The rows are far apart in a large index: each costs a few cache misses
 * (its position, code, scale, bounds), which were two thirds of a fresh
 * view's rescoring at a million rows. So they go in groups, each group's
 * data fetched while the one before is scored, its positions one group
 * earlier still; the dots and offers are those of one row at a time. */
int32_t oml_hlist_rescore(const oml_hlist *hl, const float *q, const float *dots_c,
                          const oml_hlist_hit *cand, int32_t m, oml_hlist_keep *keep)
{
    int32_t e = hl->emb;
    if (e > OML_HLIST_MAX_EMB)
        return 0;
    oml_code8_query qc;
    oml_code8_query_init(&qc, q, e);
    int32_t pos[RESCORE], next[RESCORE], row[RESCORE];
    for (int32_t i = 0; i < m && i < 2 * RESCORE; i++)
        __builtin_prefetch(hl->pos_of + cand[i].row);
    rescore_positions_of(hl, cand, 0, m < RESCORE ? m : RESCORE, next);
    for (int32_t i0 = 0; i0 < m; i0 += RESCORE) {
        int32_t g = m - i0 < RESCORE ? m - i0 : RESCORE;
        memcpy(pos, next, (size_t)g * sizeof *pos);
        if (i0 + RESCORE < m) {
            int32_t g1 = m - i0 - RESCORE < RESCORE ? m - i0 - RESCORE : RESCORE;
            rescore_positions_of(hl, cand, i0 + RESCORE, g1, next);
        }
        for (int32_t i = i0 + 2 * RESCORE; i < m && i < i0 + 3 * RESCORE; i++)
            __builtin_prefetch(hl->pos_of + cand[i].row);
        for (int32_t i = 0; i < g; i++)
            row[i] = cand[i0 + i].row;
        offer_group(hl, &qc, dots_c, pos, row, g, keep);
    }
    return keep->cnt;
}

/* Is candidate a (row: a position, dist: its score) ahead of b? A larger
 * score, then the smaller position: a total order, so the first pass's
 * pick does not depend on how it was sorted. */
static int ahead(const oml_neighbor *a, const oml_neighbor *b)
{
    return a->dist > b->dist || (a->dist == b->dist && a->row < b->row);
}

/* Moves the R best of v[0 .. n) (n > R > 0) to its front, v[R - 1] the
 * R-th (Hoare's selection). */
static void select_best(oml_neighbor *v, int32_t n, int32_t R)
{
    int32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        oml_neighbor piv = v[lo + (hi - lo) / 2];
        int32_t i = lo, j = hi;
        while (i <= j) {
            while (ahead(&v[i], &piv))
                i++;
            while (ahead(&piv, &v[j]))
                j--;
            if (i <= j) {
                oml_neighbor t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (R - 1 <= j)
            hi = j;
        else if (R - 1 >= i)
            lo = i;
        else
            break;
    }
}

/* The first pass: the R positions of lists order[0 .. n_probe) (not
 * `exclude`'s, not those allow refuses) with the largest product-code
 * scores, dots_c[l] + bias + delta * sum, into best (2R; row: the
 * position, dist: the score), unordered; returns how many. Rows above the
 * R-th best so far are gathered and cut back to R whenever 2R are (a heap
 * step per row cost more than the scan). A step of PQ_STEP blocks passes
 * the kernel the integer sum a row must beat to be scored in float (one
 * below what the R-th best asks, so rounding never shuts a row out); the
 * float steps are the same code in every path. */
static int32_t first_pass(const oml_hlist *hl, const float *q, const int32_t *order,
                          const float *dots_c, int32_t n_probe, int32_t exclude,
                          const uint8_t *allow, int32_t R, oml_neighbor *best)
{
    oml_pq4_lut lut;
    oml_pq4_lut_init(&hl->pq, q, &lut);
    size_t bb = oml_pq4_block_bytes(&hl->pq);
    uint16_t sums[PQ_STEP * OML_PQ4_BLOCK];
    uint32_t hit[PQ_STEP];
    int32_t cnt = 0;
    float floor = -INFINITY; /* the R-th best score once R were seen */
    for (int32_t i = 0; i < n_probe; i++) {
        int32_t l = order[i], a = hl->list_start[l], rows = hl->list_start[l + 1] - a;
        int32_t b0 = hl->blk_start[l], nbl = hl->blk_start[l + 1] - b0;
        float base = dots_c[l] + lut.bias;
        for (int32_t c = 0; c < nbl; c += PQ_STEP) {
            int32_t nb = nbl - c < PQ_STEP ? nbl - c : PQ_STEP;
            float x = (floor - base) / lut.delta;
            int32_t thr = !(x < 32767.0f) ? 32767 : !(x > 0.0f) ? -1 : (int32_t)x - 1;
            oml_pq4_scan(hl->pq_codes + (size_t)(b0 + c) * bb, nb, hl->pq.m, &lut, thr, sums,
                         hit);
            for (int32_t u = 0; u < nb; u++)
                for (uint32_t bits = hit[u]; bits; bits &= bits - 1) {
                    int32_t t = u * OML_PQ4_BLOCK + __builtin_ctz(bits);
                    if (c * OML_PQ4_BLOCK + t >= rows)
                        break; /* the last block's padding */
                    float sc = base + lut.delta * (float)sums[t];
                    if (!(sc > floor))
                        continue;
                    int32_t p = a + c * OML_PQ4_BLOCK + t, row = hl->rows[p];
                    if (row == exclude || (allow && !allow[row]))
                        continue;
                    best[cnt++] = (oml_neighbor){p, sc};
                    if (cnt == 2 * R) {
                        select_best(best, cnt, R);
                        cnt = R;
                        floor = best[R - 1].dist;
                    }
                }
        }
    }
    if (cnt > R) {
        select_best(best, cnt, R);
        cnt = R;
    }
    return cnt;
}

/* The m positions best[].row rescored by their int8 codes, with their
 * bound, into keep: the same dot and slack the int8 scan gives them. The
 * rows are far apart, so each costs a few cache misses (code, scale,
 * norms, row): the next group's are fetched while this one is scored. */
static void rescore_positions(const oml_hlist *hl, const oml_code8_query *qc,
                              const float *dots_c, const oml_neighbor *best, int32_t m,
                              oml_hlist_keep *keep)
{
    size_t e = (size_t)hl->emb;
    int32_t pos[RESCORE], row[RESCORE];
    for (int32_t i = 0; i < m && i < RESCORE; i++)
        __builtin_prefetch(hl->codes + (size_t)best[i].row * e);
    for (int32_t i0 = 0; i0 < m; i0 += RESCORE) {
        int32_t g = m - i0 < RESCORE ? m - i0 : RESCORE;
        for (int32_t i = i0 + RESCORE; i < m && i < i0 + 2 * RESCORE; i++) {
            prefetch_position(hl, (size_t)best[i].row);
            __builtin_prefetch(hl->rows + best[i].row);
        }
        for (int32_t i = 0; i < g; i++) {
            pos[i] = best[i0 + i].row;
            row[i] = hl->rows[pos[i]];
        }
        offer_group(hl, qc, dots_c, pos, row, g, keep);
    }
}

int32_t oml_hlist_scan(const oml_hlist *hl, const float *q, const int32_t *order,
                       const float *dots_c, int32_t n_probe, int32_t exclude,
                       const uint8_t *allow, oml_hlist_keep *keep)
{
    int32_t e = hl->emb;
    if (e > OML_HLIST_MAX_EMB)
        return 0;
    oml_code8_query qc;
    oml_code8_query_init(&qc, q, e);
    /* (a keep by dot beyond what the first pass can hand over: every row) */
    int32_t R = hl->pq_keep + keep->keep;
    if (hl->pq.m > 0 && hl->pq_keep > 0 && R <= OML_HLIST_PQ_MAX_KEEP) {
        oml_neighbor best[2 * OML_HLIST_PQ_MAX_KEEP];
        int32_t m = first_pass(hl, q, order, dots_c, n_probe, exclude, allow, R, best);
        rescore_positions(hl, &qc, dots_c, best, m, keep);
        return keep->cnt;
    }
    float d[SCAN_BLOCK];
    uint64_t hit[SCAN_BLOCK / 64];
    for (int32_t i = 0; i < n_probe; i++) {
        int32_t l = order[i], a = hl->list_start[l], b = hl->list_start[l + 1];
        float base = dots_c[l]; /* q . centroid, exact up to float */
        /* No row of this list has more slack. */
        float smax = slack_max(hl, &qc, l);
        for (int32_t p0 = a; p0 < b; p0 += SCAN_BLOCK) {
            int32_t m = b - p0 < SCAN_BLOCK ? b - p0 : SCAN_BLOCK;
            /* every position whose score exceeds the threshold (a superset of
             * the ones kept: it only rises) */
            oml_code8_block_scores(hl->codes + (size_t)p0 * (size_t)e, m, e, qc.c,
                                   hl->scale + p0, qc.qs, &(oml_code8_base){base, NULL, 0.0f},
                                   oml_hlist_keep_threshold(keep, smax), d, hit);
            for (int32_t w = 0; w < (m + 63) / 64; w++)
                for (uint64_t bits = hit[w]; bits; bits &= bits - 1) {
                    int32_t t = w * 64 + __builtin_ctzll(bits);
                    if (!(d[t] > oml_hlist_keep_threshold(keep, smax)))
                        continue; /* the threshold rose since the block was scored */
                    int32_t row = hl->rows[p0 + t];
                    if (row == exclude || (allow && !allow[row]))
                        continue;
                    oml_hlist_keep_offer(keep, row, d[t], slack_of(hl, &qc, p0 + t, l));
                }
        }
    }
    return keep->cnt;
}
