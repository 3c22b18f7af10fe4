/* test_catalogue.c - the benchmarks' catalogue (tests/bench/catalogue.h):
 * its items are what its comment says, on images built so that every
 * pixel is known. Before stop 28 its noise was 255 times too large (whole
 * units on images in [0, 1]) and every 1M figure measured noise: the
 * first test catches that. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "../bench/catalogue.h"

#define SIDE 28
#define DIM (SIDE * SIDE)
#define IMAGES 3
#define GREY (1.0f / 255.0f)

static float images[IMAGES * DIM];
static int32_t labels[IMAGES] = {4, 7, 1};

/* Image m's pixel (y, x): distinct across pixels and images, inside
 * [0.1, 0.9] so that noise is never clamped. */
static float pixel(int m, int y, int x)
{
    return 0.1f + 0.8f * (float)((m * 131 + y * SIDE + x) % 997) / 997.0f;
}

static catalogue make(int kind)
{
    for (int m = 0; m < IMAGES; m++)
        for (int j = 0; j < DIM; j++)
            images[m * DIM + j] = pixel(m, j / SIDE, j % SIDE);
    return (catalogue){.n = 100 * IMAGES, .dim = DIM, .kind = kind, .images = images,
                       .labels = labels, .n_images = IMAGES};
}

/* copies: every feature is its image's within 4 grey levels, the noise
 * takes both signs, the same item comes out the same, and the label is
 * its image's. */
static void test_copies_add_grey_levels(void **state)
{
    (void)state;
    catalogue c = make(CATALOGUE_COPIES);
    float x[DIM], again[DIM];
    for (int64_t i = 0; i < 20; i++) {
        catalogue_item(&c, i, x);
        const float *img = images + (i % IMAGES) * DIM;
        int below = 0, above = 0;
        for (int j = 0; j < DIM; j++) {
            float d = x[j] - img[j];
            assert_true(fabsf(d) <= 4 * GREY + 1e-6f);
            below += d < -0.5f * GREY;
            above += d > 0.5f * GREY;
        }
        assert_true(below > DIM / 8 && above > DIM / 8);
        catalogue_item(&c, i, again);
        assert_memory_equal(x, again, sizeof x);
        assert_int_equal(catalogue_label(&c, i), labels[i % IMAGES]);
    }
}

/* shifted: copy v of an image is it moved by the v-th offset (zeros
 * shifted in), plus grey levels; the 25 offsets are all different and
 * copy 0 is not moved. */
static void test_shifted_moves_each_copy(void **state)
{
    (void)state;
    catalogue c = make(CATALOGUE_SHIFTED);
    assert_int_equal(catalogue_offsets[0][0], 0);
    assert_int_equal(catalogue_offsets[0][1], 0);
    for (int a = 0; a < 25; a++)
        for (int b = 0; b < a; b++)
            assert_false(catalogue_offsets[a][0] == catalogue_offsets[b][0] &&
                         catalogue_offsets[a][1] == catalogue_offsets[b][1]);
    float x[DIM];
    for (int v = 0; v < 25; v++) {
        int64_t i = (int64_t)v * IMAGES + 2; /* image 2, copy v */
        int dy = catalogue_offsets[v][0], dx = catalogue_offsets[v][1];
        catalogue_item(&c, i, x);
        for (int y = 0; y < SIDE; y++)
            for (int xx = 0; xx < SIDE; xx++) {
                int y0 = y - dy, x0 = xx - dx;
                float want = y0 >= 0 && y0 < SIDE && x0 >= 0 && x0 < SIDE ? pixel(2, y0, x0) : 0;
                float got = x[y * SIDE + xx];
                assert_true(fabsf(got - want) <= 4 * GREY + 1e-6f);
                assert_true(got >= 0 && got <= 1);
            }
    }
}

/* noise (the catalogue before stop 28, kept to compare with its figures):
 * the noise is whole units, so it drowns images in [0, 1]: a pixel raised
 * leaves the images' range. */
static void test_noise_is_whole_units(void **state)
{
    (void)state;
    catalogue c = make(CATALOGUE_NOISE);
    float x[DIM];
    catalogue_item(&c, 5, x);
    int far = 0;
    for (int j = 0; j < DIM; j++) {
        assert_true(x[j] >= 0 && x[j] <= 5);
        far += x[j] > 1.0f; /* raised by a whole unit or more: 4 values of 9 */
    }
    assert_true(far > DIM / 3);
    assert_int_equal(catalogue_kind("shifted"), CATALOGUE_SHIFTED);
    assert_int_equal(catalogue_kind("noise"), CATALOGUE_NOISE);
    assert_int_equal(catalogue_kind("copies"), CATALOGUE_COPIES);
    assert_int_equal(catalogue_kind("shifty"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copies_add_grey_levels),
        cmocka_unit_test(test_shifted_moves_each_copy),
        cmocka_unit_test(test_noise_is_whole_units),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
