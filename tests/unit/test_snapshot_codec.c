/* test_snapshot_codec.c - the exported model file: a round trip embeds bit
 * for bit as the original, a hand-checked forward pass, and every damaged
 * or malformed file refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "bytes.h"
#include "damage.h"
#include "learner.h"
#include "snapshot.h"

#define D 9
#define N 32

/* A default-preset learner (standardised input, head offsets, Adam) after
 * some steps, so that every block of the file holds something. */
static oml_snapshot *trained_snapshot(const char *preset, float *x)
{
    oml_config c;
    assert_int_equal(oml_config_preset(&c, preset, D), OML_OK);
    c.layers = 2;
    c.hidden = 16;
    c.emb = 4;
    oml_learner *l = NULL;
    assert_int_equal(oml_learner_create(&l, &c, NULL), OML_OK);
    oml_rng r;
    oml_rng_seed(&r, 3);
    for (int i = 0; i < N * D; i++)
        x[i] = 10.0f * oml_rng_uniform(&r) * (float)(1 + i % D);
    if (oml_config_needs_data(&c))
        assert_int_equal(oml_learner_prepare(l, x, NULL, N), OML_OK);
    for (int t = 0; t < 200; t++)
        oml_learner_step(l, x + (t % N) * D, x + ((t * 7 + 1) % N) * D,
                         x + ((t * 13 + 5) % N) * D, NULL);
    oml_snapshot *s = oml_learner_snapshot(l, 17);
    assert_non_null(s);
    oml_learner_destroy(l);
    return s;
}

static void test_round_trip_embeds_bit_for_bit(void **state)
{
    (void)state;
    const char *presets[] = {"default", "paper", "wide"}; /* default, wide: a fixed input basis */
    for (int p = 0; p < 3; p++) {
        float x[N * D];
        oml_snapshot *a = trained_snapshot(presets[p], x);
        uint8_t *buf = NULL;
        size_t len = 0;
        assert_int_equal(oml_snapshot_encode(a, &buf, &len), OML_OK);
        oml_snapshot *b = NULL;
        oml_diag diag = {0};
        assert_int_equal(oml_snapshot_decode(&b, buf, len, &diag), OML_OK);
        assert_int_equal(b->version, 17);
        assert_int_equal(b->updates, a->updates);
        assert_int_equal(b->lay.count, a->lay.count);
        assert_int_equal(b->lay.has_scale, a->lay.has_scale);
        assert_int_equal(b->lay.has_bias, a->lay.has_bias);
        assert_int_equal(b->lay.has_basis, a->lay.has_basis);
        assert_int_equal(a->lay.has_basis, p != 1); /* default, wide: emb < D */
        assert_memory_equal(b->params, a->params, a->lay.count * sizeof(float));
        assert_memory_equal(b->alpha, a->alpha, sizeof a->alpha);
        size_t out = (size_t)oml_snapshot_heads(a) * N * a->cfg.emb;
        float *ea = malloc(out * sizeof *ea), *eb = malloc(out * sizeof *eb);
        assert_int_equal(oml_snapshot_embed(a, x, N, ea), OML_OK);
        assert_int_equal(oml_snapshot_embed(b, x, N, eb), OML_OK);
        assert_memory_equal(ea, eb, out * sizeof *ea);
        free(ea);
        free(eb);
        free(buf);
        oml_snapshot_release(a);
        oml_snapshot_release(b);
    }
}

/* One layer, worked by hand: mu = (1, 0), 1/sd = (1, 0.5), W(1) = I,
 * Theta(0) = [[1, 0]], Theta(1) = [[0, 1]], no offsets. For x = (3, -4):
 * h0 = (2, -2); head 0: z = 2, f = 1; h1 = ReLU(h0) = (2, 0); head 1:
 * z = 0 -> the zero vector stays 0 (no direction to normalise). For
 * x = (0, 4): h0 = (-1, 2), head 0 -1 -> f = -1, h1 = (0, 2), head 1 2 -> 1. */
static void test_file_written_by_hand(void **state)
{
    (void)state;
    const float alpha[2] = {0.25f, 0.75f};
    const float params[] = {1, 0, 1, 0.5f, /* mu, 1/sd */
                            1, 0, 0, 1,    /* W(1) (2, 2) */
                            1, 0,          /* Theta(0) (1, 2) */
                            0, 1};         /* Theta(1) (1, 2) */
    uint8_t buf[256];
    oml_writer w = oml_writer_into(buf, sizeof buf);
    oml_put_bytes(&w, "OMLSNAP", 8);
    oml_put_u32(&w, 1);
    oml_put_u32(&w, 2); /* dim */
    oml_put_u32(&w, 1); /* layers */
    oml_put_u32(&w, 2); /* hidden */
    oml_put_u32(&w, 1); /* emb */
    oml_put_u32(&w, 1); /* standardised, no offsets */
    oml_put_u64(&w, 5);
    oml_put_u64(&w, 1000);
    oml_put_f32s(&w, alpha, 2);
    oml_put_u64(&w, 12);
    oml_put_f32s(&w, params, 12);
    oml_put_u32(&w, (uint32_t)crc32(0L, buf, (uInt)w.pos));
    oml_snapshot *s = NULL;
    oml_diag diag = {0};
    assert_int_equal(oml_snapshot_decode(&s, buf, w.pos, &diag), OML_OK);
    assert_int_equal(s->version, 5);
    assert_true(s->alpha[1] == 0.75f);
    const float x[4] = {3, -4, 0, 4};
    float f[4]; /* (heads 2, rows 2, emb 1) */
    assert_int_equal(oml_snapshot_embed(s, x, 2, f), OML_OK);
    assert_true(f[0] == 1.0f && f[1] == -1.0f); /* head 0, rows 0 and 1 */
    assert_true(f[2] == 0.0f && f[3] == 1.0f);  /* head 1 */
    oml_snapshot_release(s);

    /* The same bytes with a shape the block does not fit: refused by name. */
    buf[sizeof "OMLSNAP" + 4 + 12] = 3; /* emb 3 */
    uint32_t crc = (uint32_t)crc32(0L, buf, (uInt)(w.pos - 4));
    oml_le32_store(buf + w.pos - 4, crc);
    assert_int_equal(oml_snapshot_decode(&s, buf, w.pos, &diag), OML_EFORMAT);
    assert_non_null(strstr(diag.msg, "parameter block"));
    assert_null(s);
}

static int decode_check(const uint8_t *copy, size_t len, void *arg, uint64_t k)
{
    (void)arg;
    (void)k;
    oml_snapshot *s = NULL;
    oml_diag diag = {0};
    int rc = oml_snapshot_decode(&s, copy, len, &diag);
    if (rc != OML_OK) {
        assert_true(rc == OML_EFORMAT || rc == OML_EVERSION);
        assert_true(diag.msg[0] != '\0');
        assert_null(s);
        return 0;
    }
    oml_snapshot_release(s);
    return 1;
}

static void test_damaged_files_refused(void **state)
{
    (void)state;
    float x[N * D];
    oml_snapshot *a = trained_snapshot("default", x);
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(oml_snapshot_encode(a, &buf, &len), OML_OK);
    /* The CRC catches every single-bit flip. */
    assert_int_equal(oml_test_damage(buf, len, 9, 200, NULL, decode_check, NULL), 0);
    oml_diag diag = {0};
    oml_snapshot *s = NULL;
    for (size_t cut = 0; cut < len; cut += 1 + cut / 4)
        assert_int_not_equal(oml_snapshot_decode(&s, buf, cut, &diag), OML_OK);
    buf[8] = 2; /* another format version */
    assert_int_equal(oml_snapshot_decode(&s, buf, len, &diag), OML_EVERSION);
    assert_null(s);
    free(buf);
    oml_snapshot_release(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_embeds_bit_for_bit),
        cmocka_unit_test(test_file_written_by_hand),
        cmocka_unit_test(test_damaged_files_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
