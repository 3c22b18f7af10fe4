/* code8.h - int8 codes of embedding rows and their dot products with a
 * query, with a proven bound on the error (issue 14).
 *
 * A vector v (e floats) is coded as round(v / s), s = max |v_j| / 127
 * rounded up to 16 bits (oml_code8_bf16_up), with ||v|| and
 * ||v - s code|| of that s kept beside it; a query q likewise, with
 * ||q - qs c|| and ||qs c||. Then, Cauchy-Schwarz,
 *   |q . v - qs s (c . code)| <= ||q - q^|| ||v|| + ||q^|| ||v - v^||,
 * and the integer dot product is exact, so a scan can be vectorised in
 * any order. The inverted lists (hlist.h) code residuals from their
 * centroids with it, the exact scan (codescan.h) the rows themselves.
 * Pure; no allocation. */
#ifndef OML_CODE8_H
#define OML_CODE8_H

#include <stdint.h>
#include <string.h>

/* The widest vector coded (a query's code lives on the stack). */
#define OML_CODE8_MAX_EMB 1024
/* Rows oml_code8_block_scores scores at once. */
#define OML_CODE8_BLOCK 256

/* A query's code and what bounds a code's dot error on its side. */
typedef struct oml_code8_query {
    int8_t c[OML_CODE8_MAX_EMB];
    float qs;     /* the query's scale */
    float err;    /* ||q - qs c|| */
    float norm;   /* ||qs c|| */
    float margin; /* float rounding of a base dot (an sgemv) and of base + dot * s * qs */
} oml_code8_query;

/* A float in 16 bits: its upper half (a bfloat16), rounded up in
 * magnitude, so the float decoded (oml_code8_bf16: a shift) is never
 * below it. A row's scale is kept so (two bytes where a float took four):
 * the scale a code is made and bounded with is then never below
 * max |v_j| / 127, and the code fits in [-127, 127]. */
static inline uint16_t oml_code8_bf16_up(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)(u >> 16 | 0x40u); /* a NaN stays one */
    if (u & 0xffffu)
        u += 0x10000u; /* past the largest finite float: infinity, still up */
    return (uint16_t)(u >> 16);
}

static inline float oml_code8_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Codes q (e <= OML_CODE8_MAX_EMB). */
void oml_code8_query_init(oml_code8_query *qc, const float *q, int32_t e);

/* Codes v (e) into code (e); returns its scale (oml_code8_bf16_up) and
 * puts ||v|| and ||v - oml_code8_bf16(scale) code|| (taken in double, so
 * the bound does not round down by more than a float's last bit) into
 * *norm and *err. */
uint16_t oml_code8_encode(const float *v, int32_t e, int8_t *code, float *norm, float *err);

/* The integer dot products of q's code with m codes of e values. */
void oml_code8_dots(const int8_t *codes, int32_t m, int32_t e, const int8_t *q, int32_t *out);

/* The part of each row's dot product its code leaves out, computed apart:
 * base for every row (t NULL: a list's centroid . q), or t[i] * tq for
 * row i (codescan.h: the row's and the query's components along one
 * direction). */
typedef struct oml_code8_base {
    float base;
    const float *t; /* (m) or NULL */
    float tq;
} oml_code8_base;

static inline float oml_code8_bias(const oml_code8_base *b, int32_t i)
{
    return b->t ? b->t[i] * b->tq : b->base;
}

/* The approximate dot products of m <= OML_CODE8_BLOCK consecutive codes,
 * d[i] = bias(i) + dots[i] * oml_code8_bf16(scale[i]) * qs (the same
 * float operations in every path: AVX2 where the machine has it and e is
 * a multiple of 32, else portable), and a bit per row (bit i of word i / 64) set where
 * d > thr: the only rows the caller has to look at. b->t is b->t of the
 * block's first row. */
void oml_code8_block_scores(const int8_t *codes, int32_t m, int32_t e, const int8_t *q,
                            const uint16_t *scale, float qs, const oml_code8_base *b, float thr,
                            float *d, uint64_t *hit);

#endif
