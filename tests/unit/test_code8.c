/* test_code8.c - int8 codes with a 16-bit scale (src/code8.c): the scale
 * is rounded up to a bfloat16 (never below max |v| / 127, the next below
 * it is), the code and its error are of that rounded scale, so the dot
 * product's bound holds on rows made to round the scale up by almost a
 * whole step; and the block kernel (AVX2 and portable) scores with the
 * decoded scale. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "code8.h"
#include "rng.h"

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Rounded up to the fewest bfloat16 that reach it, over a stride of every
 * float and the edges. */
static void test_scale_rounds_up(void **state)
{
    (void)state;
    const float edge[] = {0.0f, FLT_TRUE_MIN, FLT_MIN, 1.0f, nextafterf(1.0f, 2.0f),
                          nextafterf(1.0f, 0.0f), 1.0f / 127.0f, FLT_MAX / 127.0f};
    for (uint64_t u = 0; u < 0x7f800000u + (uint64_t)(sizeof edge / sizeof *edge); u += 7919) {
        float s = u < 0x7f800000u ? float_of((uint32_t)u) : edge[u - 0x7f800000u];
        uint16_t s16 = oml_code8_bf16_up(s);
        float d = oml_code8_bf16(s16);
        assert_true(d >= s);
        if (d > s) /* the bfloat16 below is short of it */
            assert_true(oml_code8_bf16((uint16_t)(s16 - 1)) < s);
        assert_int_equal(bits_of(d) & 0xffffu, 0);
    }
    assert_true(oml_code8_bf16(oml_code8_bf16_up(FLT_MAX)) == INFINITY);
    assert_true(oml_code8_bf16(oml_code8_bf16_up(INFINITY)) == INFINITY);
    assert_true(isnan(oml_code8_bf16(oml_code8_bf16_up(float_of(0x7f800001u)))));
    assert_true(oml_code8_bf16(oml_code8_bf16_up(0.0f)) == 0.0f);
}

/* A largest |v_j| whose scale, amax / 127, has `low` as its lower 16 bits
 * (1: rounded up by almost a whole step; 0: not at all), near `near`. */
static float amax_with_low_bits(float near, uint32_t low)
{
    float a = near;
    while ((bits_of(a / 127.0f) & 0xffffu) != low)
        a = nextafterf(a, INFINITY);
    return a;
}

typedef enum { ROW_RANDOM, ROW_ALL_MAX, ROW_HALF_STEPS, ROW_KINDS } row_kind;

/* Row v (e) of largest |v_j| amax: random below it, every value at it, or
 * values at half steps of the unrounded scale (ties for a code of it). */
static void make_row(row_kind kind, oml_rng *r, float amax, int32_t e, float *v)
{
    for (int32_t j = 0; j < e; j++) {
        float sign = oml_rng_uniform(r) < 0.5f ? -1.0f : 1.0f;
        if (kind == ROW_RANDOM)
            v[j] = amax * (2.0f * oml_rng_uniform(r) - 1.0f);
        else if (kind == ROW_ALL_MAX)
            v[j] = sign * amax;
        else
            v[j] = sign * (float)((double)(j % 127) + 0.5) * (amax / 127.0f);
    }
    v[oml_rng_below(r, (uint64_t)e)] = amax;
}

/* q's code's dot product with v's within the bound code8.h proves. */
static void check_bound(const float *q, const float *v, const int8_t *code, float s, float norm,
                        float err, int32_t e)
{
    oml_code8_query qc;
    oml_code8_query_init(&qc, q, e);
    double exact = 0.0;
    int64_t dot = 0;
    for (int32_t j = 0; j < e; j++) {
        exact += (double)q[j] * (double)v[j];
        dot += (int64_t)qc.c[j] * code[j];
    }
    double approx = (double)qc.qs * (double)s * (double)dot;
    double bound = (double)qc.err * norm + (double)qc.norm * err;
    assert_true(fabs(exact - approx) <= bound * (1.0 + 1e-6) + 1e-12);
}

static void check_row(const float *v, int32_t e, oml_rng *r)
{
    int8_t code[OML_CODE8_MAX_EMB];
    float norm, err, amax = 0.0f;
    uint16_t s16 = oml_code8_encode(v, e, code, &norm, &err);
    float s = oml_code8_bf16(s16);
    for (int32_t j = 0; j < e; j++)
        amax = fabsf(v[j]) > amax ? fabsf(v[j]) : amax;
    assert_true((double)s * 127.0 >= (double)amax); /* rounded up: every code fits */
    double vv = 0.0, dd = 0.0;
    float d[OML_CODE8_MAX_EMB];
    for (int32_t j = 0; j < e; j++) {
        assert_true(code[j] >= -127 && code[j] <= 127);
        double dj = (double)v[j] - (double)code[j] * (double)s;
        vv += (double)v[j] * (double)v[j];
        dd += dj * dj;
        d[j] = (float)dj;
    }
    /* Both norms of the reconstruction the scan uses, to a float's last bit. */
    assert_true(fabs((double)norm - sqrt(vv)) <= sqrt(vv) * 0x1p-23);
    assert_true(fabs((double)err - sqrt(dd)) <= sqrt(dd) * 0x1p-23);
    /* Queries along the row's code error (its side of the bound at its
     * largest), along the row, and at random. */
    float q[OML_CODE8_MAX_EMB];
    for (int t = 0; t < 3; t++) {
        for (int32_t j = 0; j < e; j++)
            q[j] = t == 0 ? d[j] : t == 1 ? v[j] : oml_rng_normal(r);
        check_bound(q, v, code, s, norm, err, e);
    }
}

/* Rows whose scale rounds up by almost a whole step, half a step, and not
 * at all: the code and its error are of the scale stored. */
static void test_encode_bounds_with_the_rounded_scale(void **state)
{
    (void)state;
    oml_rng r;
    oml_rng_seed(&r, 14);
    const uint32_t lows[] = {1, 0x8000u, 0xffffu, 0};
    const float nears[] = {0.37f, 0.0021f, 1.0f, 3.0e-5f};
    const int32_t widths[] = {96, 50, 7};
    float v[OML_CODE8_MAX_EMB];
    for (size_t a = 0; a < sizeof nears / sizeof *nears; a++)
        for (size_t b = 0; b < sizeof lows / sizeof *lows; b++) {
            float amax = amax_with_low_bits(nears[a], lows[b]);
            for (row_kind kind = ROW_RANDOM; kind < ROW_KINDS; kind++)
                for (size_t w = 0; w < sizeof widths / sizeof *widths; w++)
                    for (int t = 0; t < 20; t++) {
                        make_row(kind, &r, amax, widths[w], v);
                        check_row(v, widths[w], &r);
                    }
        }
    /* a zero row: scale 0, codes 0, no error */
    int8_t code[8];
    float norm, err, zero[8] = {0};
    assert_int_equal(oml_code8_encode(zero, 8, code, &norm, &err), 0);
    assert_true(norm == 0.0f && err == 0.0f);
}

/* The block kernel's scores are bias + dot * decoded scale * qs, bit for
 * bit, in the AVX2 path (e a multiple of 32) and the portable one, with a
 * list's base and with a component per row; the hit bits are those above
 * thr. */
static void test_block_scores_decode_the_scale(void **state)
{
    (void)state;
    enum { M = 203 };
    oml_rng r;
    oml_rng_seed(&r, 15);
    const int32_t widths[] = {64, 96, 50};
    for (size_t w = 0; w < sizeof widths / sizeof *widths; w++) {
        int32_t e = widths[w];
        int8_t *codes = malloc((size_t)M * (size_t)e), q[OML_CODE8_MAX_EMB];
        uint16_t scale[M];
        float t[M], d[M];
        int32_t dots[M];
        uint64_t hit[(M + 63) / 64];
        assert_non_null(codes);
        for (size_t i = 0; i < (size_t)M * (size_t)e; i++)
            codes[i] = (int8_t)((int)oml_rng_below(&r, 255) - 127);
        for (int32_t j = 0; j < e; j++)
            q[j] = (int8_t)((int)oml_rng_below(&r, 255) - 127);
        for (int32_t i = 0; i < M; i++) {
            scale[i] = oml_code8_bf16_up(0.01f * oml_rng_uniform(&r));
            t[i] = oml_rng_normal(&r);
        }
        oml_code8_dots(codes, M, e, q, dots);
        for (int with_t = 0; with_t < 2; with_t++) {
            oml_code8_base b = {0.25f, with_t ? t : NULL, 0.5f};
            float qs = 0.003f, thr = 0.25f;
            oml_code8_block_scores(codes, M, e, q, scale, qs, &b, thr, d, hit);
            for (int32_t i = 0; i < M; i++) {
                float want = oml_code8_bias(&b, i) + (float)dots[i] * oml_code8_bf16(scale[i]) * qs;
                assert_memory_equal(&d[i], &want, sizeof want);
                assert_int_equal((int)(hit[i / 64] >> (i % 64) & 1), want > thr);
            }
        }
        free(codes);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scale_rounds_up),
        cmocka_unit_test(test_encode_bounds_with_the_rounded_scale),
        cmocka_unit_test(test_block_scores_decode_the_scale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
