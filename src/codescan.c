/* codescan.c - every row of a head as an int8 code (see codescan.h).
 *
 * DESIGN: row r's score is t_r (q . c) + qs s_r (q_perp^ . res_r^), its
 * slack (code8.h, Cauchy-Schwarz on q_perp . res_r)
 *   ||q_perp - q_perp^|| ||res_r|| + ||q_perp^|| ||res_r - res_r^|| + margin,
 * where the margin covers the float roundings: t_r and q . c stored as
 * floats (taken in double), their product, the code's product and the
 * sum, and res_r and q_perp rounded to floats before coding; each is a
 * few float epsilons of |q| |v|, and the margin is 64 epsilons of
 * (|q| + 1) (max ||v|| + 1), which also leaves the exact re-rank room
 * for the canonical distance's own rounding (index.c). The scan scores
 * OML_CODE8_BLOCK rows at a time and offers only those above keep's
 * threshold for the largest slack, which rises as the scan goes. One
 * allocation per head. */
#include "codescan.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "code8.h"
#include "err.h"

#define CHUNK 64 /* rows transposed out of the columns at a time: (CHUNK, emb) stays in L1 */

size_t oml_codescan_bytes(int32_t n, int32_t emb)
{
    return (size_t)emb * sizeof(float) +
           (size_t)n * (3 * sizeof(float) + sizeof(uint16_t) + (size_t)emb);
}

void oml_codescan_free(oml_codescan *cs)
{
    free(cs->_block);
    memset(cs, 0, sizeof *cs);
}

/* c: the unit mean of the n rows (0 if they cancel). Any c gives exact
 * answers (build and query split by the same c); the mean makes the
 * residuals small. Eight float sums a column, so the loop vectorises. */
static void mean_direction(const float *cols, size_t n, size_t e, float *dir)
{
    double nn = 0.0, m[OML_CODE8_MAX_EMB];
    for (size_t j = 0; j < e; j++) {
        const float *col = cols + j * n;
        float acc[8] = {0};
        size_t i = 0;
        for (; i + 8 <= n; i += 8)
            for (size_t u = 0; u < 8; u++)
                acc[u] += col[i + u];
        double s = 0.0;
        for (; i < n; i++)
            s += (double)col[i];
        for (size_t u = 0; u < 8; u++)
            s += (double)acc[u];
        m[j] = s;
        nn += s * s;
    }
    for (size_t j = 0; j < e; j++)
        dir[j] = nn > 0.0 ? (float)(m[j] / sqrt(nn)) : 0.0f;
}

/* v = t c + res with res . c = 0 (in double: two sums of each, so the
 * additions do not wait on each other; res rounded to float); returns t. */
static double split(const float *v, const float *dir, int32_t e, float *res)
{
    double d0 = 0, d1 = 0, c0 = 0, c1 = 0;
    int32_t j = 0;
    for (; j + 2 <= e; j += 2) {
        d0 += (double)v[j] * (double)dir[j];
        d1 += (double)v[j + 1] * (double)dir[j + 1];
        c0 += (double)dir[j] * (double)dir[j];
        c1 += (double)dir[j + 1] * (double)dir[j + 1];
    }
    if (j < e) {
        d0 += (double)v[j] * (double)dir[j];
        c0 += (double)dir[j] * (double)dir[j];
    }
    double cc = c0 + c1, t = cc > 0.0 ? (d0 + d1) / cc : 0.0;
    for (j = 0; j < e; j++)
        res[j] = (float)((double)v[j] - t * (double)dir[j]);
    return t;
}

int oml_codescan_build(oml_codescan *cs, const float *cols, int32_t n, int32_t emb)
{
    memset(cs, 0, sizeof *cs);
    if (cols == NULL || n < 0 || emb < 1 || emb > OML_CODE8_MAX_EMB)
        return OML_EINVAL;
    size_t N = (size_t)n, e = (size_t)emb;
    char *p = malloc(oml_codescan_bytes(n, emb));
    float *t = malloc((size_t)CHUNK * e * 2 * sizeof *t);
    if (p == NULL || t == NULL) {
        free(p);
        free(t);
        return OML_ENOMEM;
    }
    *cs = (oml_codescan){.n = n, .emb = emb, ._block = p};
    cs->dir = (float *)(void *)p;
    cs->t = cs->dir + e;
    cs->res_norm = cs->t + N;
    cs->err = cs->res_norm + N;
    cs->scale = (uint16_t *)(void *)(cs->err + N); /* after the floats: aligned */
    cs->codes = (int8_t *)(void *)(cs->scale + N);
    mean_direction(cols, N, e, cs->dir);
    float *res = t + (size_t)CHUNK * e;
    for (size_t r0 = 0; r0 < N; r0 += CHUNK) {
        size_t m = N - r0 < CHUNK ? N - r0 : CHUNK;
        for (size_t j = 0; j < e; j++) /* the chunk's rows, read column by column */
            for (size_t i = 0; i < m; i++)
                t[i * e + j] = cols[j * N + r0 + i];
        for (size_t i = 0; i < m; i++) {
            size_t r = r0 + i;
            cs->t[r] = (float)split(t + i * e, cs->dir, emb, res);
            cs->scale[r] = oml_code8_encode(res, emb, cs->codes + r * e, &cs->res_norm[r],
                                            &cs->err[r]);
            cs->norm_max = cs->res_norm[r] > cs->norm_max ? cs->res_norm[r] : cs->norm_max;
            cs->err_max = cs->err[r] > cs->err_max ? cs->err[r] : cs->err_max;
        }
    }
    free(t);
    return OML_OK;
}

int32_t oml_codescan_scan(const oml_codescan *cs, const float *q, int32_t exclude,
                          const uint8_t *allow, oml_hlist_keep *keep)
{
    int32_t e = cs->emb;
    float q_perp[OML_CODE8_MAX_EMB];
    double tq = split(q, cs->dir, e, q_perp), qq = 0.0;
    for (int32_t j = 0; j < e; j++)
        qq += (double)q[j] * (double)q[j];
    oml_code8_query qc;
    oml_code8_query_init(&qc, q_perp, e);
    /* the largest ||v|| is at most max |t| + max ||res||; |t| <= ||v|| of unit rows ~ 1 */
    float margin = 64.0f * FLT_EPSILON * (float)(sqrt(qq) + 1.0) * (2.0f + cs->norm_max);
    float smax = qc.err * cs->norm_max + qc.norm * cs->err_max + margin;
    float d[OML_CODE8_BLOCK];
    uint64_t hit[OML_CODE8_BLOCK / 64];
    for (int32_t r0 = 0; r0 < cs->n; r0 += OML_CODE8_BLOCK) {
        int32_t m = cs->n - r0 < OML_CODE8_BLOCK ? cs->n - r0 : OML_CODE8_BLOCK;
        oml_code8_base b = {0.0f, cs->t + r0, (float)tq};
        oml_code8_block_scores(cs->codes + (size_t)r0 * (size_t)e, m, e, qc.c, cs->scale + r0,
                               qc.qs, &b, oml_hlist_keep_threshold(keep, smax), d, hit);
        for (int32_t w = 0; w < (m + 63) / 64; w++)
            for (uint64_t bits = hit[w]; bits; bits &= bits - 1) {
                int32_t t = w * 64 + __builtin_ctzll(bits), row = r0 + t;
                if (!(d[t] > oml_hlist_keep_threshold(keep, smax)))
                    continue; /* the threshold rose since the block was scored */
                if (row == exclude || (allow && !allow[row]))
                    continue;
                oml_hlist_keep_offer(keep, row, d[t],
                                     qc.err * cs->res_norm[row] + qc.norm * cs->err[row] + margin);
            }
    }
    return keep->cnt;
}
