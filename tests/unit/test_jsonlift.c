/* test_jsonlift.c - the fast path for arrays of numbers (proto/jsonlift.c):
 * what is lifted and how the text reads afterwards, every lifted value
 * bit for bit the double strtod gives (jansson's), what is left to jansson,
 * and the HTTP/JSON API's conversion with and without it agreeing on
 * bodies and refusals (daemon/api.c). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api.h"
#include "jsonlift.h"
#include "omld.pb-c.h"

static void test_lifts_a_vector(void **state)
{
    (void)state;
    const char *body = "{\"query\": [1, 0, 0.5, 0, -1, 0, 0, 2.25], \"k\": 5}";
    omld_jsonlift l;
    assert_int_equal(omld_jsonlift_init(&l, body, strlen(body)), 1);
    assert_string_equal(l.text, "{\"query\": \"\\u00000\", \"k\": 5}");
    assert_int_equal(l.text_len, strlen(l.text));
    assert_int_equal(l.n_arrays, 1);
    assert_int_equal(l.arrays[0].n, 8);
    assert_int_equal(l.arrays[0].at, strlen("{\"query\": "));
    assert_int_equal(body[l.arrays[0].at + l.arrays[0].len - 1], ']');
    const double want[8] = {1, 0, 0.5, 0, -1, 0, 0, 2.25};
    assert_memory_equal(l.values + l.arrays[0].first, want, sizeof want);
    /* jansson reads the placeholder back as the string find() knows. */
    json_error_t e;
    json_t *j = json_loadb(l.text, l.text_len, JSON_ALLOW_NUL, &e);
    assert_non_null(j);
    assert_ptr_equal(omld_jsonlift_find(&l, json_object_get(j, "query")), &l.arrays[0]);
    assert_null(omld_jsonlift_find(&l, json_object_get(j, "k")));
    assert_null(omld_jsonlift_find(NULL, json_object_get(j, "query")));
    json_t *arr = omld_jsonlift_materialize(&l, &l.arrays[0]);
    assert_true(json_is_array(arr) && json_array_size(arr) == 8);
    assert_true(json_is_integer(json_array_get(arr, 0)) && json_is_real(json_array_get(arr, 2)));
    json_decref(arr);
    json_decref(j);
    omld_jsonlift_free(&l);
    omld_jsonlift_free(&l); /* a freed lift is a zeroed one */
}

/* Each number of an 8-element array: lifted or not, and if lifted, equal
 * to strtod's double in every bit (the sign of zero included). */
static void check_number(const char *num, int want_lifted)
{
    char body[512];
    snprintf(body, sizeof body, "{\"v\":[%s,%s,%s,%s,%s,%s,%s,%s]}", num, num, num, num, num, num,
             num, num);
    omld_jsonlift l;
    int rc = omld_jsonlift_init(&l, body, strlen(body));
    if (want_lifted >= 0 && rc != want_lifted)
        fail_msg("%s: lifted %d, expected %d", num, rc, want_lifted);
    if (rc == 1) {
        double ref;
        int is_int = strpbrk(num, ".eE") == NULL;
        ref = is_int ? (double)strtoll(num, NULL, 10) : strtod(num, NULL);
        if (memcmp(&ref, &l.values[0], sizeof ref) != 0)
            fail_msg("%s: lifted %.17g, strtod %.17g", num, l.values[0], ref);
    }
    omld_jsonlift_free(&l);
}

static void test_values_are_strtods(void **state)
{
    (void)state;
    /* Forms clients write: printf %.9g / %.17g, %e, integers, signs. */
    const char *lifted[] = {"0", "-0", "-0.0", "0.0", "1", "-1", "123456789012345678",
                            "-123456789012345678", "0.1", "0.123456791", "1e5", "1E+5", "2.5e-3",
                            "1e22", "1e-22", "9007199254740992e-3", "0.00000000000000000001",
                            /* beyond the exact case: strtod */
                            "3.40282347e+38", "1.17549435e-38", "0.30000000000000004",
                            "1234567890123456789e-22", "1e23", "1e-23", "1e-400",
                            "9007199254740993.0", "0.10000000149011612",
                            "123456789012345678901234567890.5"};
    for (size_t i = 0; i < sizeof lifted / sizeof *lifted; i++)
        check_number(lifted[i], 1);
    /* Random floats in the forms of the clients: all lifted, all exact. */
    uint64_t s = 88172645463325252ull;
    for (int i = 0; i < 20000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        float f = (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1);
        if (i % 4 == 1)
            f *= 1000;
        char num[64];
        snprintf(num, sizeof num, i % 3 == 0 ? "%.9g" : i % 3 == 1 ? "%.6f" : "%.8e", (double)f);
        check_number(num, 1);
        snprintf(num, sizeof num, "%.17g", (double)f);
        check_number(num, 1);
        snprintf(num, sizeof num, "%lld", (long long)(s >> 12) - (1ll << 51));
        check_number(num, 1);
    }
    /* Beyond the exact cases, or not JSON: left to jansson. */
    const char *left[] = {"1e400", "-1e400", "12345678901234567890", "1234567890123456789",
                          "01",    "-01",    "1.",    ".5",    "+1",  "-",  "1e",   "1e+", "--1",
                          "0x10",  "NaN",    "\"1\"", "null",  "true", "[1]", "1 2", "1e99999",
                          "1.5x",  "Infinity"};
    for (size_t i = 0; i < sizeof left / sizeof *left; i++)
        check_number(left[i], 0);
}

static void test_left_to_jansson(void **state)
{
    (void)state;
    const char *none[] = {
        "[1,2,3,4,5,6,7,8]",                               /* the top level */
        "{\"v\":[1,2,3,4,5,6,7]}",                         /* too short */
        "{\"v\":[1,2,3,4,5,6,7,null]}",                    /* a null */
        "{\"v\":[1,2,3,4,5,6,7,\"8\"]}",                   /* a string */
        "{\"v\":[1,2,3,4,5,6,7,8}",                        /* unclosed */
        "{\"v\":[1,2,3,4,5,6,7,8,]}",                      /* a trailing comma */
        "{\"v\":\"[1,2,3,4,5,6,7,8]\"}",                   /* inside a string */
        "{\"v\":\"\\\"[1,2,3,4,5,6,7,8]\"}",               /* after an escaped quote */
        "{\"s\":\"\\u0000\",\"v\":[1,2,3,4,5,6,7,8]}",     /* a NUL of its own */
        "{\"v\":[1,2,3,4,5,6,7,8]",                        /* fine: lifted (see below) */
    };
    for (size_t i = 0; i < sizeof none / sizeof *none; i++) {
        omld_jsonlift l;
        int rc = omld_jsonlift_init(&l, none[i], strlen(none[i]));
        if (rc != (i == 9))
            fail_msg("%s: lifted %d", none[i], rc);
        omld_jsonlift_free(&l);
    }
    /* Deeper than OMLD_JSONLIFT_MAX_DEPTH: nothing lifted. */
    char deep[1024];
    size_t n = 0;
    for (int d = 0; d <= OMLD_JSONLIFT_MAX_DEPTH; d++)
        deep[n++] = '[';
    n += (size_t)sprintf(deep + n, "[1,2,3,4,5,6,7,8]");
    for (int d = 0; d <= OMLD_JSONLIFT_MAX_DEPTH; d++)
        deep[n++] = ']';
    omld_jsonlift l;
    assert_int_equal(omld_jsonlift_init(&l, deep, n), 0);
    omld_jsonlift_free(&l);
    /* ... one level less is lifted; nested arrays and arrays of arrays too. */
    assert_int_equal(omld_jsonlift_init(&l, deep + 1, n - 2), 1);
    omld_jsonlift_free(&l);
    const char *nested = "{\"q\":[[1,2,3,4,5,6,7,8],{\"vector\":[8,7,6,5,4,3,2,1]},[1,2]],"
                         "\"s\":\"]\"}";
    assert_int_equal(omld_jsonlift_init(&l, nested, strlen(nested)), 1);
    assert_int_equal(l.n_arrays, 2);
    assert_string_equal(l.text, "{\"q\":[\"\\u00000\",{\"vector\":\"\\u00001\"},[1,2]],\"s\":\"]\"}");
    assert_true(l.values[l.arrays[1].first] == 8.0);
    omld_jsonlift_free(&l);
}

/* omld_api_request (lifted) and omld_api_request_plain agree. */
static void agree(const char *op_name, const char *body, int want_rc, int want_code,
                  const char *want_field)
{
    const omld_op *op = omld_api_op(op_name, strlen(op_name));
    assert_non_null(op);
    uint8_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    omld_api_refusal wa, wb;
    int ra = omld_api_request(op, body, strlen(body), 1u << 20, &a, &na, &wa);
    int rb = omld_api_request_plain(op, body, strlen(body), 1u << 20, &b, &nb, &wb);
    if (ra != rb || ra != want_rc)
        fail_msg("%s %s: lifted %d, plain %d, expected %d (%s)", op_name, body, ra, rb, want_rc,
                 ra ? wa.message : rb ? wb.message : "");
    if (ra == 0) {
        assert_int_equal(na, nb);
        assert_memory_equal(a, b, na);
    } else {
        assert_int_equal(wa.code, want_code);
        assert_int_equal(wb.code, want_code);
        assert_string_equal(wa.field, want_field);
        assert_string_equal(wa.field, wb.field);
        assert_string_equal(wa.message, wb.message);
    }
    free(a);
    free(b);
}

static void test_api_agrees(void **state)
{
    (void)state;
    const int BAD = OMLD__STATUS__CODE__INVALID_ARGUMENT, MAL = OMLD__STATUS__CODE__MALFORMED;
    agree("classify", "{\"query\":[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9],\"k\":5}", 0, 0, "");
    agree("classify", "{\"query\":{\"vector\":{\"values\":[1,2,3,4,5,6,7,8]}}}", 0, 0, "");
    agree("put_items",
          "{\"items\":[{\"id\":\"a\",\"features\":[1e-3,-0,-0.0,1E+2,0.1234567891234,"
          "12345678901234567,3.4e38,1e-30]},{\"id\":\"b\",\"features\":[1,2,3,4,5,6,7,8]}]}",
          0, 0, "");
    agree("classify_batch",
          "{\"queries\":[{\"query\":[1,2,3,4,5,6,7,8]},{\"query\":[8,7,6,5,4,3,2,1],\"k\":2}]}",
          0, 0, "");
    /* An array of numbers where it does not belong: the plain refusal. */
    agree("retrieve", "{\"query\":\"a\",\"exclude_ids\":[1,2,3,4,5,6,7,8]}", -1, BAD,
          "retrieve.exclude_ids[0]");
    agree("classify", "{\"query\":\"a\",\"model\":[1,2,3,4,5,6,7,8]}", -1, BAD, "classify.model");
    agree("classify", "{\"query\":\"a\",\"k\":[1,2,3,4,5,6,7,8]}", -1, BAD, "classify.k");
    agree("put_items", "{\"items\":[[1,2,3,4,5,6,7,8]]}", -1, BAD, "put_items.items[0]");
    agree("put_items", "{\"items\":[{\"id\":\"a\",\"features\":[1,2,3,4,5,6,7,8],"
                       "\"metadata\":[1,2,3,4,5,6,7,8]}]}", -1, BAD,
          "put_items.items[0].metadata[0]");
    agree("classify", "{\"query\":[1,2,3,4,5,6,7,8],\"queryx\":1}", -1, BAD, "classify.queryx");
    /* Not JSON: jansson's message about the body as sent. */
    agree("classify", "{\"query\":[1,2,3,4,5,6,7,8],}", -1, MAL, "");
    agree("classify", "{\"query\":[1,2,3,4,5,6,7,8]} x", -1, MAL, "");
    agree("classify", "{\"query\":[1,2,3,4,5,6,7,8], \"k\": 01}", -1, MAL, "");
    agree("classify", "{\"query\":[1,2,3,4,5,6,7,1e999]}", -1, MAL, "");
    agree("classify", "{\"query\":[1,2,3,4,5,6,7,8],\"query\":[1,2,3,4,5,6,7,8]}", -1, MAL, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lifts_a_vector),
        cmocka_unit_test(test_values_are_strtods),
        cmocka_unit_test(test_left_to_jansson),
        cmocka_unit_test(test_api_agrees),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
