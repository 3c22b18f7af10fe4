/* test_bytes.c - the little-endian byte cursor: the byte layout on disk,
 * the counting pass, bounds on both sides, and byte strings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "bytes.h"

/* Numbers land little-endian, whatever the host. */
static void test_layout(void **state)
{
    (void)state;
    uint8_t b[32];
    oml_writer w = oml_writer_into(b, sizeof b);
    oml_put_u32(&w, 0x04030201u);
    oml_put_u64(&w, 0x0c0b0a0908070605ull);
    float f = 1.0f; /* 0x3f800000 */
    OML_PUT(&w, f);
    uint8_t tag = 0xee;
    OML_PUT(&w, tag);
    assert_false(w.bad);
    assert_int_equal(w.pos, 17);
    const uint8_t want[17] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0, 0, 0x80, 0x3f, 0xee};
    assert_memory_equal(b, want, sizeof want);
    assert_int_equal(oml_le32_load(b), 0x04030201u);
    assert_true(oml_le64_load(b + 4) == 0x0c0b0a0908070605ull);
    uint8_t s[8];
    oml_le64_store(s, 0x0c0b0a0908070605ull);
    assert_memory_equal(s, b + 4, 8);
    oml_le32_store(s, 0x04030201u);
    assert_memory_equal(s, b, 4);
}

/* The counting writer sizes exactly what the real pass writes. */
static void test_counting_then_writing(void **state)
{
    (void)state;
    const float xs[5] = {1, -2, 3.5f, 0, 1e-3f};
    uint8_t buf[64];
    for (int pass = 0; pass < 2; pass++) {
        oml_writer w = pass == 0 ? oml_writer_counting() : oml_writer_into(buf, 28);
        oml_put_bytes(&w, "OMLX", 4);
        oml_put_f32s(&w, xs, 5);
        oml_put_u64(&w, 7);
        /* 32 bytes do not fit in 28: the u64 is refused whole */
        assert_int_equal(w.pos, pass == 0 ? 4 + 20 + 8 : 4 + 20);
        assert_int_equal(w.bad, pass == 1);
    }
    oml_writer w = oml_writer_into(buf, 32);
    oml_put_bytes(&w, "OMLX", 4);
    oml_put_f32s(&w, xs, 5);
    oml_put_u64(&w, 7);
    assert_false(w.bad);

    oml_reader r = oml_reader_of(buf, w.pos);
    char magic[4];
    float ys[5];
    oml_get_bytes(&r, magic, 4);
    oml_get_f32s(&r, ys, 5);
    assert_memory_equal(magic, "OMLX", 4);
    assert_memory_equal(xs, ys, sizeof xs);
    assert_true(oml_get_u64(&r) == 7);
    assert_false(r.bad);
    assert_int_equal(oml_reader_left(&r), 0);
}

/* A read past the end zero-fills, sets bad and stays bad. */
static void test_reader_bounds(void **state)
{
    (void)state;
    const uint8_t b[6] = {1, 0, 0, 0, 9, 9};
    oml_reader r = oml_reader_of(b, sizeof b);
    assert_int_equal(oml_get_u32(&r), 1);
    assert_int_equal(oml_reader_left(&r), 2);
    uint32_t v = 0xdeadbeef;
    OML_GET(&r, v);
    assert_int_equal(v, 0);
    assert_true(r.bad);
    assert_int_equal(oml_reader_left(&r), 0);
    uint8_t one = 5;
    OML_GET(&r, one); /* it would fit, but the reader stays bad */
    assert_int_equal(one, 0);
    assert_null(oml_get_span(&r, 0));
    r = oml_reader_of(b, sizeof b);
    const uint8_t *s = oml_get_span(&r, 6);
    assert_ptr_equal(s, b);
    assert_null(oml_get_span(&r, 1));
    assert_true(r.bad);
}

/* Widths other than 2, 4 and 8 are byte strings (OML_PUT of an array). */
static void test_byte_arrays(void **state)
{
    (void)state;
    uint8_t bits[5] = {1, 2, 3, 4, 5}, back[5];
    uint8_t b[5];
    oml_writer w = oml_writer_into(b, sizeof b);
    OML_PUT(&w, bits);
    assert_memory_equal(b, bits, 5);
    oml_reader r = oml_reader_of(b, sizeof b);
    OML_GET(&r, back);
    assert_memory_equal(back, bits, 5);
    assert_false(r.bad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_counting_then_writing),
        cmocka_unit_test(test_reader_bounds),
        cmocka_unit_test(test_byte_arrays),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
