/* test_ingest_entry.c - Redis Stream entries as Requests (daemon/
 * ingest_entry.c), without Redis: each entry type's Request, an item's
 * meta.KEY fields as its metadata in the entry's order, and the entries
 * refused before the daemon sees them, with the reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ingest_entry.h"
#include "omld.pb-c.h"

#define MAX_FIELDS 16

/* An entry's field/value array as XREADGROUP answers it. */
typedef struct entry {
    redisReply arr;
    redisReply s[2 * MAX_FIELDS];
    redisReply *ptr[2 * MAX_FIELDS];
} entry;

/* Fields from name, value, ... (NULL-terminated); a value's length is
 * strlen unless given in lens (for bytes with a NUL). */
static void make(entry *e, const char *const *fv, const size_t *lens)
{
    memset(e, 0, sizeof *e);
    e->arr.type = REDIS_REPLY_ARRAY;
    e->arr.element = e->ptr;
    size_t n = 0;
    for (; fv[n] != NULL; n++) {
        e->s[n].type = REDIS_REPLY_STRING;
        e->s[n].str = (char *)fv[n];
        e->s[n].len = lens && lens[n] ? lens[n] : strlen(fv[n]);
        e->ptr[n] = &e->s[n];
    }
    e->arr.elements = n;
}

/* The Request of fields fv (assert it is made). */
static Omld__Request *request(const char *const *fv)
{
    entry e;
    make(&e, fv, NULL);
    uint8_t *out = NULL;
    size_t n = 0;
    char why[200] = "";
    if (omld_ingest_entry_request("clicks", "17-0", &e.arr, 1u << 20, &out, &n, why, sizeof why) !=
        0)
        fail_msg("refused: %s", why);
    Omld__Request *r = omld__request__unpack(NULL, n, out);
    free(out);
    assert_non_null(r);
    return r;
}

/* The reason fields fv are refused (assert they are). */
static const char *refusal(const char *const *fv, const size_t *lens)
{
    static char why[200];
    entry e;
    make(&e, fv, lens);
    uint8_t *out = NULL;
    size_t n = 0;
    why[0] = '\0';
    assert_int_equal(
        omld_ingest_entry_request("clicks", "17-0", &e.arr, 1u << 20, &out, &n, why, sizeof why),
        -1);
    assert_null(out);
    assert_true(why[0] != '\0');
    return why;
}

static void test_item_metadata_in_order(void **state)
{
    (void)state;
    const char *fv[] = {"type", "item", "meta.size", "42", "id", "m0", "features", "[1, 0, 0.5]",
                        "label", "boots", "meta.color", "brown", "meta.note", "", NULL};
    Omld__Request *r = request(fv);
    assert_int_equal(r->body_case, OMLD__REQUEST__BODY_PUT_ITEMS);
    assert_string_equal(r->put_items->idempotency_key, "redis:clicks:17-0");
    Omld__Item *it = r->put_items->items[0];
    assert_string_equal(it->id, "m0");
    assert_string_equal(it->label, "boots");
    assert_int_equal(it->n_features, 3);
    assert_true(it->features[2] == 0.5f);
    assert_int_equal(it->n_metadata, 3);
    const char *want[3][2] = {{"size", "42"}, {"color", "brown"}, {"note", ""}};
    for (int i = 0; i < 3; i++) {
        assert_string_equal(it->metadata[i]->key, want[i][0]);
        assert_string_equal(it->metadata[i]->value, want[i][1]);
    }
    omld__request__free_unpacked(r, NULL);
    /* Without meta fields: none; "meta." alone is the key "" (the daemon
     * refuses it by its path, as it would an RPC put's). */
    const char *plain[] = {"type", "item", "id", "m1", "features_f32", "\0\0\x80?", NULL};
    entry e;
    size_t lens[] = {0, 0, 0, 0, 0, 4, 0};
    make(&e, plain, lens);
    uint8_t *out = NULL;
    size_t n = 0;
    char why[200];
    assert_int_equal(omld_ingest_entry_request("s", "1-1", &e.arr, 1u << 20, &out, &n, why,
                                               sizeof why),
                     0);
    r = omld__request__unpack(NULL, n, out);
    free(out);
    assert_int_equal(r->put_items->items[0]->n_metadata, 0);
    assert_int_equal(r->put_items->items[0]->n_features, 1);
    assert_true(r->put_items->items[0]->features[0] == 1.0f);
    omld__request__free_unpacked(r, NULL);
    const char *empty_key[] = {"type", "item", "id", "m2", "features", "[1]", "meta.", "x", NULL};
    r = request(empty_key);
    assert_int_equal(r->put_items->items[0]->n_metadata, 1);
    assert_string_equal(r->put_items->items[0]->metadata[0]->key, "");
    omld__request__free_unpacked(r, NULL);
}

static void test_triplets_and_pairs(void **state)
{
    (void)state;
    const char *t[] = {"type", "triplet", "anchor", "a", "positive", "b", "negative", "c",
                       "weight", "2.5", "source", "ignored", NULL};
    Omld__Request *r = request(t);
    assert_int_equal(r->body_case, OMLD__REQUEST__BODY_ADD_TRIPLETS);
    Omld__Triplet *tr = r->add_triplets->triplets[0];
    assert_string_equal(tr->anchor->id, "a");
    assert_string_equal(tr->negative->id, "c");
    assert_true(tr->weight == 2.5f);
    omld__request__free_unpacked(r, NULL);
    const char *p[] = {"type", "pair", "a", "x", "b", "y", "relation", "dissimilar", NULL};
    r = request(p);
    assert_int_equal(r->add_pairs->pairs[0]->relation, OMLD__PAIR__RELATION__DISSIMILAR);
    omld__request__free_unpacked(r, NULL);
}

static void test_refusals(void **state)
{
    (void)state;
    const char *meta_triplet[] = {"type", "triplet", "anchor", "a", "positive", "b", "negative",
                                  "c", "meta.color", "red", NULL};
    assert_non_null(strstr(refusal(meta_triplet, NULL), "meta.color: metadata (meta.KEY) belongs "
                                                        "to item entries"));
    const char *meta_pair[] = {"type", "pair", "a", "x", "b", "y", "relation", "similar",
                               "meta.k", "v", NULL};
    assert_non_null(strstr(refusal(meta_pair, NULL), "belongs to item entries"));
    const char *nul_value[] = {"type", "item", "id", "m", "features", "[1]", "meta.k", "a\0b",
                               NULL};
    size_t lens[] = {0, 0, 0, 0, 0, 0, 0, 3, 0};
    assert_non_null(strstr(refusal(nul_value, lens), "must not hold a NUL byte"));
    const char *nul_key[] = {"type", "item", "id", "m", "features", "[1]", "meta.k\0x", "v", NULL};
    size_t klens[] = {0, 0, 0, 0, 0, 0, 8, 0, 0};
    assert_non_null(strstr(refusal(nul_key, klens), "must not hold a NUL byte"));
    const char *no_features[] = {"type", "item", "id", "m", "meta.k", "v", NULL};
    assert_non_null(strstr(refusal(no_features, NULL), "an item needs features"));
    const char *bad_features[] = {"type", "item", "id", "m", "features", "[1, \"x\"]", NULL};
    assert_non_null(strstr(refusal(bad_features, NULL), "features[1] is not a number"));
    const char *no_type[] = {"id", "m", NULL};
    assert_non_null(strstr(refusal(no_type, NULL), "type must be"));
    const char *bad_weight[] = {"type", "triplet", "anchor", "a", "positive", "b", "negative",
                                "c", "weight", "heavy", NULL};
    assert_non_null(strstr(refusal(bad_weight, NULL), "weight must be a number"));
    /* Larger than the frame once packed. */
    entry e;
    const char *big[] = {"type", "item", "id", "m", "features", "[1]", "meta.k", "0123456789", NULL};
    make(&e, big, NULL);
    uint8_t *out = NULL;
    size_t n = 0;
    char why[200];
    assert_int_equal(omld_ingest_entry_request("s", "1-1", &e.arr, 16, &out, &n, why, sizeof why),
                     -1);
    assert_non_null(strstr(why, "max_frame_bytes"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_item_metadata_in_order),
        cmocka_unit_test(test_triplets_and_pairs),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
