/* test_pbjson.c - protobuf <-> JSON (daemon/pbjson.c): known answers worked
 * by hand, round trips through the wire format, and every refusal with the
 * path it names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "omld.pb-c.h"
#include "pbjson.h"

/* The message of desc read from text; NULL with *err on a refusal. */
static ProtobufCMessage *read_text(const ProtobufCMessageDescriptor *d, const char *text,
                                   omld_pbjson_error *err)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    assert_non_null(j);
    ProtobufCMessage *m = omld_pbjson_read(d, j, "root", err);
    json_decref(j);
    return m;
}

static char *write_text(const ProtobufCMessage *m)
{
    json_t *j = omld_pbjson_write(m);
    assert_non_null(j);
    char *s = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(j);
    return s;
}

static void test_base64_known_answers(void **state)
{
    (void)state;
    /* RFC 4648 section 10. */
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const coded[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=",
                                        "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        char *e = omld_base64_encode((const uint8_t *)plain[i], strlen(plain[i]));
        assert_string_equal(e, coded[i]);
        free(e);
        uint8_t *d = NULL;
        size_t n = 0;
        assert_int_equal(omld_base64_decode(coded[i], strlen(coded[i]), &d, &n), 0);
        assert_int_equal(n, strlen(plain[i]));
        assert_memory_equal(d, plain[i], n);
        free(d);
    }
    uint8_t *d = NULL;
    size_t n;
    assert_int_equal(omld_base64_decode("Zm9v!", 5, &d, &n), -1);
    assert_int_equal(omld_base64_decode("Z", 1, &d, &n), -1);
}

/* A ClassifyResponse written by hand: names as in the .proto, floats at
 * their shortest, repeated messages as arrays. */
static void test_write_known_answer(void **state)
{
    (void)state;
    Omld__ClassScore s0 = OMLD__CLASS_SCORE__INIT, s1 = OMLD__CLASS_SCORE__INIT;
    s0.label = "cat";
    s0.score = 0.75f;
    s1.label = "dog";
    s1.score = 0.25f;
    Omld__ClassScore *scores[] = {&s0, &s1};
    Omld__ClassifyResponse r = OMLD__CLASSIFY_RESPONSE__INIT;
    r.label = "cat";
    r.n_scores = 2;
    r.scores = scores;
    char *text = write_text(&r.base);
    assert_string_equal(text, "{\"label\":\"cat\",\"scores\":[{\"label\":\"cat\",\"score\":0.75},"
                              "{\"label\":\"dog\",\"score\":0.25}]}");
    free(text);

    /* Zero scalars are written; an unset oneof member is not; enums by name;
     * invalid UTF-8 becomes U+FFFD; a non-finite float its string. */
    Omld__EntryError e = OMLD__ENTRY_ERROR__INIT;
    e.code = OMLD__STATUS__CODE__NOT_FOUND;
    e.field = "a\xff" "b";
    text = write_text(&e.base);
    assert_string_equal(text, "{\"index\":0,\"code\":\"NOT_FOUND\",\"field\":\"a\xef\xbf\xbd" "b\","
                              "\"message\":\"\"}");
    free(text);
    Omld__ClassScore nan_score = OMLD__CLASS_SCORE__INIT;
    nan_score.label = "";
    nan_score.score = __builtin_nanf("");
    text = write_text(&nan_score.base);
    assert_string_equal(text, "{\"label\":\"\",\"score\":\"NaN\"}");
    free(text);
}

/* JSON -> message -> wire == the message built directly -> wire. */
static void test_read_equals_the_message_built_directly(void **state)
{
    (void)state;
    omld_pbjson_error err;
    ProtobufCMessage *m = read_text(
        &omld__put_items_request__descriptor,
        "{\"items\": [{\"id\": \"a\", \"features\": [1, -2.5, \"Infinity\"], \"label\": \"x\"},"
        " {\"id\": \"b\", \"features\": [0.1]}]}",
        &err);
    assert_non_null(m);
    float f0[] = {1, -2.5f, __builtin_inff()}, f1[] = {0.1f};
    Omld__Item a = OMLD__ITEM__INIT, b = OMLD__ITEM__INIT;
    a.id = "a";
    a.n_features = 3;
    a.features = f0;
    a.label_opt_case = OMLD__ITEM__LABEL_OPT_LABEL;
    a.label = "x";
    b.id = "b";
    b.n_features = 1;
    b.features = f1;
    Omld__Item *items[] = {&a, &b};
    Omld__PutItemsRequest want = OMLD__PUT_ITEMS_REQUEST__INIT;
    want.n_items = 2;
    want.items = items;
    size_t n = protobuf_c_message_get_packed_size(m);
    assert_int_equal(n, omld__put_items_request__get_packed_size(&want));
    uint8_t *got_wire = malloc(n), *want_wire = malloc(n);
    protobuf_c_message_pack(m, got_wire);
    omld__put_items_request__pack(&want, want_wire);
    assert_memory_equal(got_wire, want_wire, n);
    free(got_wire);
    free(want_wire);

    /* And back: written, then read again, the same wire bytes. */
    char *text = write_text(m);
    ProtobufCMessage *again = read_text(&omld__put_items_request__descriptor, text, &err);
    assert_non_null(again);
    assert_int_equal(protobuf_c_message_get_packed_size(again), n);
    free(text);
    protobuf_c_message_free_unpacked(again, NULL);
    protobuf_c_message_free_unpacked(m, NULL);
}

/* The shorthands, camelCase names, 64-bit strings and enums by number. */
static void test_read_shorthands_and_alternatives(void **state)
{
    (void)state;
    omld_pbjson_error err;
    Omld__AddTripletsRequest *t = (Omld__AddTripletsRequest *)read_text(
        &omld__add_triplets_request__descriptor,
        "{\"triplets\": [{\"anchor\": \"a\", \"positive\": [1, 2], \"negative\": {\"id\": \"c\"}}]}",
        &err);
    assert_non_null(t);
    assert_int_equal(t->n_triplets, 1);
    assert_string_equal(t->triplets[0]->anchor->id, "a");
    assert_int_equal(t->triplets[0]->positive->ref_case, OMLD__ITEM_REF__REF_VECTOR);
    assert_int_equal(t->triplets[0]->positive->vector->n_values, 2);
    assert_true(t->triplets[0]->positive->vector->values[1] == 2.0f);
    assert_string_equal(t->triplets[0]->negative->id, "c");
    omld__add_triplets_request__free_unpacked(t, NULL);

    Omld__RetrieveRequest *r = (Omld__RetrieveRequest *)read_text(
        &omld__retrieve_request__descriptor,
        "{\"query\": \"a\", \"excludeIds\": [\"b\"], \"minSimilarity\": 0.5, \"k\": \"7\"}", &err);
    assert_non_null(r);
    assert_int_equal(r->n_exclude_ids, 1);
    assert_int_equal(r->k_opt_case, OMLD__RETRIEVE_REQUEST__K_OPT_K);
    assert_int_equal(r->k, 7);
    assert_true(r->min_similarity == 0.5f);
    omld__retrieve_request__free_unpacked(r, NULL);

    Omld__Pair *p = (Omld__Pair *)read_text(&omld__pair__descriptor,
                                            "{\"a\": \"x\", \"b\": \"y\", \"relation\": 2}", &err);
    assert_non_null(p);
    assert_int_equal(p->relation, OMLD__PAIR__RELATION__DISSIMILAR);
    omld__pair__free_unpacked(p, NULL);

    Omld__Response *resp = (Omld__Response *)read_text(
        &omld__response__descriptor, "{\"request_id\": \"18446744073709551615\", \"model_version\": null}",
        &err);
    assert_non_null(resp);
    assert_true(resp->request_id == UINT64_MAX);
    char *text = write_text(&resp->base);
    assert_non_null(strstr(text, "\"request_id\":\"18446744073709551615\""));
    free(text);
    omld__response__free_unpacked(resp, NULL);
}

/* Every refusal names the path of the value it refuses. */
static void test_refusals_name_their_path(void **state)
{
    (void)state;
    static const struct {
        const ProtobufCMessageDescriptor *d;
        const char *text, *field, *message;
    } cases[] = {
        {&omld__classify_request__descriptor, "{\"k\": 5, \"kk\": 1}", "root.kk", "unknown field"},
        {&omld__classify_request__descriptor, "{\"k\": 1.5}", "root.k", "expected an integer"},
        {&omld__classify_request__descriptor, "{\"k\": 4294967296}", "root.k", "out of range"},
        {&omld__classify_request__descriptor, "{\"k\": \"12x\"}", "root.k", "expected an integer"},
        {&omld__classify_request__descriptor, "{\"k\": true}", "root.k", "expected an integer"},
        {&omld__classify_request__descriptor, "{\"query\": 5}", "root.query", "expected an object"},
        {&omld__classify_request__descriptor, "{\"query\": {\"id\": \"a\", \"vector\": [1]}}",
         "root.query.vector", "only one member of a oneof"},
        {&omld__classify_request__descriptor, "{\"query\": [1, \"x\"]}", "root.query.vector.values[1]",
         "expected a number"},
        {&omld__classify_request__descriptor, "{\"query\": \"a\\u0000b\"}", "root.query.id",
         "NUL"},
        {&omld__add_triplets_request__descriptor, "{\"triplets\": {}}", "root.triplets",
         "expected an array"},
        {&omld__add_triplets_request__descriptor, "{\"partial\": 1}", "root.partial",
         "expected true or false"},
        {&omld__pair__descriptor, "{\"relation\": \"SIMILARR\"}", "root.relation", "Relation"},
        {&omld__response__descriptor, "{\"request_id\": -1}", "root.request_id", "out of range"},
        {&omld__response__descriptor, "{\"request_id\": \"18446744073709551616\"}", "root.request_id",
         "expected an integer"},
        {&omld__get_items_request__descriptor, "{\"ids\": [\"a\", 3]}", "root.ids[1]",
         "expected a string"},
        {&omld__classify_request__descriptor, "[]", "root", "expected an object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        omld_pbjson_error err;
        json_error_t je;
        json_t *j = json_loads(cases[i].text, JSON_ALLOW_NUL, &je);
        assert_non_null(j);
        ProtobufCMessage *m = omld_pbjson_read(cases[i].d, j, "root", &err);
        json_decref(j);
        if (m != NULL)
            fail_msg("case %zu (%s) was read", i, cases[i].text);
        if (strcmp(err.field, cases[i].field) != 0 || strstr(err.message, cases[i].message) == NULL)
            fail_msg("case %zu (%s): field %s, message %s", i, cases[i].text, err.field, err.message);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base64_known_answers),
        cmocka_unit_test(test_write_known_answer),
        cmocka_unit_test(test_read_equals_the_message_built_directly),
        cmocka_unit_test(test_read_shorthands_and_alternatives),
        cmocka_unit_test(test_refusals_name_their_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
