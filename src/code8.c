/* code8.c - int8 codes and their dot products (see code8.h).
 *
 * DESIGN: the integer products are exact, so the portable loop and the
 * AVX2 kernel (picked at run time: the build targets baseline x86-64)
 * give the same sums; the float step after them, bias + dot * scale * qs,
 * is written the same way in both (no fused multiply-add), so every path
 * scores a row to the same float. */
#include "code8.h"

#include <float.h>
#include <math.h>
#include <stddef.h>

/* Integer dot products of q with m codes of e values, portable. */
static void code_dots_c(const int8_t *codes, int32_t m, int32_t e, const int8_t *q, int32_t *out)
{
    for (int32_t i = 0; i < m; i++) {
        const int8_t *c = codes + (size_t)i * (size_t)e;
        int32_t s = 0;
        for (int32_t j = 0; j < e; j++)
            s += (int16_t)c[j] * (int16_t)q[j];
        out[i] = s;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX2_KERNEL 1
/* The same for e a multiple of 32 (the build targets baseline x86-64, so
 * this is picked at run time): |q| (unsigned) times the codes with q's
 * signs, 32 products summed in pairs to int16 by one vpmaddubsw (no
 * overflow: 2 x 127 x 127 < 32767), then to int32; four rows' sums are
 * reduced together. */
__attribute__((target("avx2"))) static void code_dots_avx2(const int8_t *codes, int32_t m,
                                                           int32_t e, const int8_t *q,
                                                           int32_t *out)
{
    const __m256i ones = _mm256_set1_epi16(1);
    int32_t i = 0;
    for (; i + 4 <= m; i += 4) {
        __m256i acc[4];
        for (int r = 0; r < 4; r++) {
            const int8_t *c = codes + (size_t)(i + r) * (size_t)e;
            acc[r] = _mm256_setzero_si256();
            for (int32_t j = 0; j < e; j += 32) {
                __m256i qv = _mm256_loadu_si256((const __m256i *)(const void *)(q + j));
                __m256i cv = _mm256_loadu_si256((const __m256i *)(const void *)(c + j));
                __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(qv), _mm256_sign_epi8(cv, qv));
                acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(p, ones));
            }
        }
        /* [r0 r0 r1 r1 | r0 r0 r1 r1], then [r0 r1 r2 r3 | r0 r1 r2 r3] */
        __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(acc[0], acc[1]),
                                      _mm256_hadd_epi32(acc[2], acc[3]));
        __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        _mm_storeu_si128((__m128i *)(void *)(out + i), s);
    }
    code_dots_c(codes + (size_t)i * (size_t)e, m - i, e, q, out + i);
}

/* Eight 16-bit scales decoded (oml_code8_bf16: each shifted into a
 * float's upper half). */
__attribute__((target("avx2"))) static __m256 scales_avx2(const uint16_t *s)
{
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)s);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* The approximate dot products of a block of m positions, 8 rows at a
 * time: each row's integer dot product as code_dots_avx2 computes it
 * (|q| and q's signs taken once per block, not per row), then
 * bias + dot * scale[p] * qs (the scale decoded) in the same float
 * operations, in the same order, as the portable path (no fused
 * multiply-add), into d (m). Returns a bit per position (bit i of word
 * i / 64) set where d > thr: the only rows the caller has to look at. e a
 * multiple of 32, m <= OML_CODE8_BLOCK. */
__attribute__((target("avx2"))) static void block_scores_avx2(const int8_t *codes, int32_t m,
                                                              int32_t e, const int8_t *q,
                                                              const uint16_t *scale, float qs,
                                                              const oml_code8_base *b,
                                                              float thr, float *d,
                                                              uint64_t *hit)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i qa[OML_CODE8_MAX_EMB / 32], qv[OML_CODE8_MAX_EMB / 32];
    int32_t nj = e / 32;
    for (int32_t j = 0; j < nj; j++) {
        qv[j] = _mm256_loadu_si256((const __m256i *)(const void *)(q + 32 * j));
        qa[j] = _mm256_abs_epi8(qv[j]);
    }
    const __m256 vqs = _mm256_set1_ps(qs), vbase = _mm256_set1_ps(b->base),
                 vtq = _mm256_set1_ps(b->tq), vthr = _mm256_set1_ps(thr);
    for (int32_t w = 0; w < (m + 63) / 64; w++)
        hit[w] = 0;
    int32_t i = 0;
    for (; i + 8 <= m; i += 8) {
        __m256i acc[8];
        for (int r = 0; r < 8; r++) {
            const int8_t *c = codes + (size_t)(i + r) * (size_t)e;
            __m256i a = _mm256_setzero_si256();
            for (int32_t j = 0; j < nj; j++) {
                __m256i cv = _mm256_loadu_si256((const __m256i *)(const void *)(c + 32 * j));
                __m256i p = _mm256_maddubs_epi16(qa[j], _mm256_sign_epi8(cv, qv[j]));
                a = _mm256_add_epi32(a, _mm256_madd_epi16(p, ones));
            }
            acc[r] = a;
        }
        /* rows 0-3 and 4-7 as [r0 r1 r2 r3 | r0 r1 r2 r3] (lane halves), then
         * the halves added: [r0 .. r7] */
        __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(acc[0], acc[1]),
                                      _mm256_hadd_epi32(acc[2], acc[3]));
        __m256i g = _mm256_hadd_epi32(_mm256_hadd_epi32(acc[4], acc[5]),
                                      _mm256_hadd_epi32(acc[6], acc[7]));
        __m256i dots = _mm256_add_epi32(_mm256_permute2x128_si256(h, g, 0x20),
                                        _mm256_permute2x128_si256(h, g, 0x31));
        __m256 v = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(dots),
                                               scales_avx2(scale + i)), vqs);
        __m256 bias = b->t ? _mm256_mul_ps(_mm256_loadu_ps(b->t + i), vtq) : vbase;
        v = _mm256_add_ps(bias, v);
        _mm256_storeu_ps(d + i, v);
        uint64_t bits = (uint64_t)_mm256_movemask_ps(_mm256_cmp_ps(v, vthr, _CMP_GT_OQ));
        hit[i / 64] |= bits << (i % 64);
    }
    if (i < m) {
        int32_t dots[8];
        code_dots_c(codes + (size_t)i * (size_t)e, m - i, e, q, dots);
        for (int32_t t = i; t < m; t++) {
            d[t] = oml_code8_bias(b, t) + (float)dots[t - i] * oml_code8_bf16(scale[t]) * qs;
            if (d[t] > thr)
                hit[t / 64] |= (uint64_t)1 << (t % 64);
        }
    }
}
#endif

void oml_code8_dots(const int8_t *codes, int32_t m, int32_t e, const int8_t *q, int32_t *out)
{
#ifdef HAVE_AVX2_KERNEL
    if (e % 32 == 0 && __builtin_cpu_supports("avx2")) {
        code_dots_avx2(codes, m, e, q, out);
        return;
    }
#endif
    code_dots_c(codes, m, e, q, out);
}

void oml_code8_block_scores(const int8_t *codes, int32_t m, int32_t e, const int8_t *q,
                            const uint16_t *scale, float qs, const oml_code8_base *b, float thr,
                            float *d, uint64_t *hit)
{
#ifdef HAVE_AVX2_KERNEL
    if (e % 32 == 0 && __builtin_cpu_supports("avx2")) {
        block_scores_avx2(codes, m, e, q, scale, qs, b, thr, d, hit);
        return;
    }
#endif
    int32_t dots[OML_CODE8_BLOCK];
    oml_code8_dots(codes, m, e, q, dots);
    for (int32_t w = 0; w < (m + 63) / 64; w++)
        hit[w] = 0;
    for (int32_t t = 0; t < m; t++) {
        d[t] = oml_code8_bias(b, t) + (float)dots[t] * oml_code8_bf16(scale[t]) * qs;
        if (d[t] > thr)
            hit[t / 64] |= (uint64_t)1 << (t % 64);
    }
}

void oml_code8_query_init(oml_code8_query *qc, const float *q, int32_t e)
{
    float qmax = 0;
    for (int32_t j = 0; j < e; j++)
        qmax = fabsf(q[j]) > qmax ? fabsf(q[j]) : qmax;
    float qs = qmax > 0 ? qmax / 127.0f : 0.0f;
    double err = 0.0, norm = 0.0, qq = 0.0;
    for (int32_t j = 0; j < e; j++) {
        qc->c[j] = (int8_t)(qs > 0 ? lrintf(q[j] / qs) : 0);
        double h = (double)qc->c[j] * (double)qs, dq = (double)q[j] - h;
        err += dq * dq;
        norm += h * h;
        qq += (double)q[j] * (double)q[j];
    }
    qc->qs = qs;
    qc->err = (float)sqrt(err);
    qc->norm = (float)sqrt(norm);
    /* |q| |c| e eps for a base's sgemv (a list's centroid), a few eps of
     * the sum's magnitude (|q| (|c| + |res|) <= 3 |q|) for the rest,
     * doubled to spare. */
    qc->margin = 8.0f * (float)(e + 4) * FLT_EPSILON * (float)(sqrt(qq) + 1.0);
}

/* v[j]'s code (inv: 1 / s) and its error, in double. */
static inline double code_one(float v, float inv, float s, int8_t *c)
{
    float x = v * inv;
    *c = (int8_t)lrintf(x > 127.0f ? 127.0f : x < -127.0f ? -127.0f : x);
    return (double)v - (double)*c * (double)s;
}

uint16_t oml_code8_encode(const float *v, int32_t e, int8_t *code, float *norm, float *err)
{
    float amax = 0;
    for (int32_t j = 0; j < e; j++)
        amax = fabsf(v[j]) > amax ? fabsf(v[j]) : amax;
    /* The code and its error of the scale stored (rounded up), not of
     * max |v| / 127: the bound is of the reconstruction a scan uses. */
    uint16_t s16 = oml_code8_bf16_up(amax / 127.0f);
    float s = oml_code8_bf16(s16), inv = s > 0 ? 1.0f / s : 0.0f;
    /* In double, so the bound does not round down; four sums of each, so
     * the additions do not wait on each other. */
    double v0 = 0, v1 = 0, v2 = 0, v3 = 0, e0 = 0, e1 = 0, e2 = 0, e3 = 0;
    int32_t j = 0;
    for (; j + 4 <= e; j += 4) {
        double d0 = code_one(v[j], inv, s, &code[j]), d1 = code_one(v[j + 1], inv, s, &code[j + 1]);
        double d2 = code_one(v[j + 2], inv, s, &code[j + 2]);
        double d3 = code_one(v[j + 3], inv, s, &code[j + 3]);
        v0 += (double)v[j] * (double)v[j];
        v1 += (double)v[j + 1] * (double)v[j + 1];
        v2 += (double)v[j + 2] * (double)v[j + 2];
        v3 += (double)v[j + 3] * (double)v[j + 3];
        e0 += d0 * d0;
        e1 += d1 * d1;
        e2 += d2 * d2;
        e3 += d3 * d3;
    }
    for (; j < e; j++) {
        double d = code_one(v[j], inv, s, &code[j]);
        v0 += (double)v[j] * (double)v[j];
        e0 += d * d;
    }
    *norm = (float)sqrt((v0 + v1) + (v2 + v3));
    *err = (float)sqrt((e0 + e1) + (e2 + e3));
    return s16;
}
