/* pq4.c - 4-bit product codes and their fast scan (see pq4.h).
 *
 * DESIGN: a block of 32 rows is m / 2 registers of 32 bytes; register s
 * holds subspaces 2s (bytes 0-15) and 2s + 1 (bytes 16-31), byte i the
 * codes of rows i (low nibble) and i + 16 (high nibble). The tables of
 * subspaces 2s and 2s + 1 are 32 consecutive bytes, one per 128-bit lane,
 * so vpshufb (which looks up within each lane) takes one load of them, and
 * a register's low nibbles then give rows 0-15 in both subspaces, its high
 * nibbles rows 16-31. The bytes are summed in 16-bit lanes without
 * unpacking them (faiss's trick): a lane's add takes its low byte plus 256
 * times its high byte, a second sum takes the high bytes alone, and the
 * low bytes' sum is the first less 256 times the second, exact modulo
 * 2^16 while a sum stays under 2^16 (pq4.h: under 2^15). */
#include "pq4.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

#define TRAIN_ITERS 10
#define TRAIN_SAMPLE 16384

int oml_pq4_fits(int32_t emb)
{
    return emb >= 4 && emb % 4 == 0 && emb <= OML_PQ4_MAX_EMB;
}

void oml_pq4_free(oml_pq4 *pq)
{
    free(pq->cent);
    memset(pq, 0, sizeof *pq);
}

/* The nearest of the 16 centroids c (16, 2) to x (2), the first of equals
 * (the encoding of every row of a head is most of the codes' build). With
 * SSE2 (every x86-64) four distances at a time, each the same float
 * operations as the portable loop's, so every machine picks the same. */
#if defined(__SSE2__)
#include <emmintrin.h>
static inline __attribute__((always_inline)) int nearest(const float *x, const float *c)
{
    const __m128 x0 = _mm_set1_ps(x[0]), x1 = _mm_set1_ps(x[1]);
    __m128 d[4];
    for (int g = 0; g < 4; g++) {
        __m128 a = _mm_loadu_ps(c + 8 * g), b = _mm_loadu_ps(c + 8 * g + 4);
        __m128 d0 = _mm_sub_ps(x0, _mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
        __m128 d1 = _mm_sub_ps(x1, _mm_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
        d[g] = _mm_add_ps(_mm_mul_ps(d0, d0), _mm_mul_ps(d1, d1));
    }
    __m128 m = _mm_min_ps(_mm_min_ps(d[0], d[1]), _mm_min_ps(d[2], d[3]));
    m = _mm_min_ps(m, _mm_shuffle_ps(m, m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm_min_ps(m, _mm_shuffle_ps(m, m, _MM_SHUFFLE(2, 3, 0, 1)));
    int mask = 0;
    for (int g = 0; g < 4; g++)
        mask |= _mm_movemask_ps(_mm_cmpeq_ps(d[g], m)) << (4 * g);
    return mask ? __builtin_ctz((unsigned)mask) : 0; /* 0: NaN everywhere */
}
#else
static int nearest(const float *x, const float *c)
{
    float best = INFINITY;
    int at = 0;
    for (int t = 0; t < OML_PQ4_K; t++) {
        float d0 = x[0] - c[2 * t], d1 = x[1] - c[2 * t + 1];
        float d = d0 * d0 + d1 * d1;
        if (d < best) {
            best = d;
            at = t;
        }
    }
    return at;
}
#endif

int oml_pq4_train(oml_pq4 *pq, const float *sample, size_t s, int32_t emb)
{
    memset(pq, 0, sizeof *pq);
    if (!oml_pq4_fits(emb) || s == 0 || sample == NULL)
        return OML_EINVAL;
    int32_t m = emb / OML_PQ4_DSUB;
    pq->cent = malloc((size_t)m * OML_PQ4_K * OML_PQ4_DSUB * sizeof *pq->cent);
    if (pq->cent == NULL)
        return OML_ENOMEM;
    pq->emb = emb;
    pq->m = m;
    size_t use = s < TRAIN_SAMPLE ? s : TRAIN_SAMPLE, e = (size_t)emb;
    for (int32_t j = 0; j < m; j++) {
        float *c = pq->cent + (size_t)j * OML_PQ4_K * OML_PQ4_DSUB;
        for (int t = 0; t < OML_PQ4_K; t++) /* strided rows start it */
            memcpy(c + OML_PQ4_DSUB * t, sample + ((size_t)t * s / OML_PQ4_K) * e + 2 * (size_t)j,
                   OML_PQ4_DSUB * sizeof *c);
        for (int it = 0; it < TRAIN_ITERS; it++) {
            double sum[OML_PQ4_K][OML_PQ4_DSUB] = {{0}};
            int64_t cnt[OML_PQ4_K] = {0};
            for (size_t i = 0; i < use; i++) {
                const float *x = sample + (i * s / use) * e + 2 * (size_t)j;
                int t = nearest(x, c);
                cnt[t]++;
                sum[t][0] += x[0];
                sum[t][1] += x[1];
            }
            for (int t = 0; t < OML_PQ4_K; t++) /* an empty one stays where it was */
                if (cnt[t] > 0) {
                    c[2 * t] = (float)(sum[t][0] / (double)cnt[t]);
                    c[2 * t + 1] = (float)(sum[t][1] / (double)cnt[t]);
                }
        }
    }
    return OML_OK;
}

void oml_pq4_codes(const oml_pq4 *pq, const float *v, uint8_t *codes)
{
    for (int32_t j = 0; j < pq->m; j++)
        codes[j] = (uint8_t)nearest(v + 2 * j, pq->cent + (size_t)j * OML_PQ4_K * OML_PQ4_DSUB);
}

void oml_pq4_put(const oml_pq4 *pq, const uint8_t *codes, uint8_t *block, int32_t r)
{
    for (int32_t j = 0; j < pq->m; j++)
        block[(j / 2) * 32 + (j % 2) * 16 + r % 16] |=
            (uint8_t)(r < 16 ? codes[j] : codes[j] << 4);
}

void oml_pq4_encode(const oml_pq4 *pq, const float *v, uint8_t *block, int32_t r)
{
    uint8_t codes[OML_PQ4_MAX_EMB / OML_PQ4_DSUB];
    oml_pq4_codes(pq, v, codes);
    oml_pq4_put(pq, codes, block, r);
}

void oml_pq4_lut_init(const oml_pq4 *pq, const float *q, oml_pq4_lut *lut)
{
    float f[OML_PQ4_MAX_EMB / OML_PQ4_DSUB * OML_PQ4_K], lo[OML_PQ4_MAX_EMB / OML_PQ4_DSUB];
    float span = 0.0f, bias = 0.0f;
    for (int32_t j = 0; j < pq->m; j++) {
        const float *c = pq->cent + (size_t)j * OML_PQ4_K * OML_PQ4_DSUB;
        float mn = INFINITY, mx = -INFINITY;
        for (int t = 0; t < OML_PQ4_K; t++) {
            /* no fused multiply-add: the same float on every machine */
            float a = q[2 * j] * c[2 * t], b = q[2 * j + 1] * c[2 * t + 1];
            float d = a + b;
            f[j * OML_PQ4_K + t] = d;
            mn = d < mn ? d : mn;
            mx = d > mx ? d : mx;
        }
        lo[j] = mn;
        bias += mn;
        span = mx - mn > span ? mx - mn : span;
    }
    /* One scale for every table, so sums of different subspaces add up. */
    float delta = span > 0.0f ? span / 255.0f : 1.0f, inv = 1.0f / delta;
    for (int32_t j = 0; j < pq->m; j++)
        for (int t = 0; t < OML_PQ4_K; t++) {
            float x = (f[j * OML_PQ4_K + t] - lo[j]) * inv;
            long v = lrintf(x);
            lut->t[j * OML_PQ4_K + t] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    lut->delta = delta;
    lut->bias = bias;
}

void oml_pq4_scan_c(const uint8_t *blocks, int32_t nb, int32_t m, const oml_pq4_lut *lut,
                    int32_t thr, uint16_t *sums, uint32_t *hit)
{
    size_t bytes = (size_t)m * OML_PQ4_BLOCK / 2;
    for (int32_t b = 0; b < nb; b++) {
        const uint8_t *blk = blocks + (size_t)b * bytes;
        uint32_t bits = 0;
        for (int32_t r = 0; r < OML_PQ4_BLOCK; r++) {
            int32_t s = 0;
            for (int32_t j = 0; j < m; j++)
                s += lut->t[j * OML_PQ4_K + oml_pq4_code(blk, j, r)];
            sums[b * OML_PQ4_BLOCK + r] = (uint16_t)s;
            bits |= (uint32_t)(s > thr) << r;
        }
        hit[b] = bits;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX2_KERNEL 1
/* oml_pq4_scan_c with vpshufb, a block at a time (the file comment's
 * layout). */
__attribute__((target("avx2"))) static void scan_avx2(const uint8_t *blocks, int32_t nb,
                                                      int32_t m, const oml_pq4_lut *lut,
                                                      int32_t thr, uint16_t *sums, uint32_t *hit)
{
    int32_t regs = m / 2;
    __m256i tab[OML_PQ4_MAX_EMB / 4];
    for (int32_t s = 0; s < regs; s++)
        tab[s] = _mm256_loadu_si256((const __m256i *)(const void *)(lut->t + 32 * s));
    const __m256i low = _mm256_set1_epi8(0x0F);
    const __m256i vthr = _mm256_set1_epi16((int16_t)(thr < -1 ? -1 : thr > 32767 ? 32767 : thr));
    for (int32_t b = 0; b < nb; b++) {
        const uint8_t *blk = blocks + (size_t)b * (size_t)regs * 32;
        /* rows 0-15 (lo) and 16-31 (hi): every 16-bit lane's bytes summed
         * whole (even rows + 256 odd rows) and its high bytes alone (odd rows) */
        __m256i lo_all = _mm256_setzero_si256(), lo_odd = lo_all;
        __m256i hi_all = lo_all, hi_odd = lo_all;
        for (int32_t s = 0; s < regs; s++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 32 * s));
            __m256i a = _mm256_shuffle_epi8(tab[s], _mm256_and_si256(v, low));
            __m256i c = _mm256_shuffle_epi8(tab[s], _mm256_and_si256(_mm256_srli_epi16(v, 4), low));
            lo_all = _mm256_add_epi16(lo_all, a);
            lo_odd = _mm256_add_epi16(lo_odd, _mm256_srli_epi16(a, 8));
            hi_all = _mm256_add_epi16(hi_all, c);
            hi_odd = _mm256_add_epi16(hi_odd, _mm256_srli_epi16(c, 8));
        }
        __m256i lo_even = _mm256_sub_epi16(lo_all, _mm256_slli_epi16(lo_odd, 8));
        __m256i hi_even = _mm256_sub_epi16(hi_all, _mm256_slli_epi16(hi_odd, 8));
        /* the two lanes are the two subspaces of each register: add them */
        __m128i le = _mm_add_epi16(_mm256_castsi256_si128(lo_even),
                                   _mm256_extracti128_si256(lo_even, 1));
        __m128i lodd = _mm_add_epi16(_mm256_castsi256_si128(lo_odd),
                                     _mm256_extracti128_si256(lo_odd, 1));
        __m128i he = _mm_add_epi16(_mm256_castsi256_si128(hi_even),
                                   _mm256_extracti128_si256(hi_even, 1));
        __m128i hodd = _mm_add_epi16(_mm256_castsi256_si128(hi_odd),
                                     _mm256_extracti128_si256(hi_odd, 1));
        /* even and odd rows interleaved back: rows 0-15, rows 16-31 */
        __m256i r0 = _mm256_set_m128i(_mm_unpackhi_epi16(le, lodd), _mm_unpacklo_epi16(le, lodd));
        __m256i r1 = _mm256_set_m128i(_mm_unpackhi_epi16(he, hodd), _mm_unpacklo_epi16(he, hodd));
        _mm256_storeu_si256((__m256i *)(void *)(sums + (size_t)b * 32), r0);
        _mm256_storeu_si256((__m256i *)(void *)(sums + (size_t)b * 32 + 16), r1);
        /* packs works within lanes: rows 0-7, 16-23, 8-15, 24-31, reordered */
        __m256i gt = _mm256_packs_epi16(_mm256_cmpgt_epi16(r0, vthr), _mm256_cmpgt_epi16(r1, vthr));
        gt = _mm256_permute4x64_epi64(gt, 0xD8);
        hit[b] = (uint32_t)_mm256_movemask_epi8(gt);
    }
}
#endif

void oml_pq4_scan(const uint8_t *blocks, int32_t nb, int32_t m, const oml_pq4_lut *lut,
                  int32_t thr, uint16_t *sums, uint32_t *hit)
{
#ifdef HAVE_AVX2_KERNEL
    if (__builtin_cpu_supports("avx2")) {
        scan_avx2(blocks, nb, m, lut, thr, sums, hit);
        return;
    }
#endif
    oml_pq4_scan_c(blocks, nb, m, lut, thr, sums, hit);
}
