/* test_wirecheck.c - NUL bytes inside string fields are found on the wire,
 * with the field's path, and nothing else is mistaken for one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "omld.pb-c.h"
#include "wirecheck.h"

static int check(const uint8_t *buf, size_t len, char *path)
{
    return oml_wire_find_nul_string(buf, len, &omld__request__descriptor, path, 128);
}

static void test_nul_in_a_top_level_string_list(void **state)
{
    /* Request{delete_items (11): DeleteItemsRequest{ids (1): "a\0b"}} */
    const uint8_t buf[] = {0x5a, 0x05, 0x0a, 0x03, 'a', 0x00, 'b'};
    char path[128];
    assert_int_equal(check(buf, sizeof buf, path), 1);
    assert_string_equal(path, "delete_items.ids");
    /* protobuf-c itself takes it, and sees only "a": the reason for the check. */
    Omld__Request *r = omld__request__unpack(NULL, sizeof buf, buf);
    assert_non_null(r);
    assert_string_equal(r->delete_items->ids[0], "a");
    omld__request__free_unpacked(r, NULL);
}

static void test_nul_deep_inside(void **state)
{
    /* add_triplets (13) { triplets (1) { anchor (1) { id (1): "x\0" } } } */
    const uint8_t buf[] = {0x6a, 0x08, 0x0a, 0x06, 0x0a, 0x04, 0x0a, 0x02, 'x', 0x00};
    char path[128];
    assert_int_equal(check(buf, sizeof buf, path), 1);
    assert_string_equal(path, "add_triplets.triplets.anchor.id");
}

static void test_clean_requests_pass(void **state)
{
    /* A real PutItems with all-zero features (packed floats full of 0x00)
     * and a label: no NUL in any string. */
    Omld__Request req;
    Omld__PutItemsRequest put;
    Omld__Item item, *items[1] = {&item};
    float x[8] = {0};
    omld__request__init(&req);
    omld__put_items_request__init(&put);
    omld__item__init(&item);
    item.id = "item-1";
    item.n_features = 8;
    item.features = x;
    item.label_opt_case = OMLD__ITEM__LABEL_OPT_LABEL;
    item.label = "shoes";
    put.n_items = 1;
    put.items = items;
    req.body_case = OMLD__REQUEST__BODY_PUT_ITEMS;
    req.put_items = &put;
    req.request_id = 0x100; /* a varint with a 0x00 continuation byte? no: 0x80 0x02 */
    uint8_t buf[256];
    size_t n = omld__request__pack(&req, buf);
    char path[128];
    assert_int_equal(check(buf, n, path), 0);
    assert_string_equal(path, "");
    /* Unknown fields of every wire type are skipped. */
    const uint8_t unknown[] = {0xf8, 0x07, 0x00,            /* field 127 varint 0 */
                               0xfa, 0x07, 0x02, 0x00, 0x00, /* field 127 bytes with NULs */
                               0xfd, 0x07, 0, 0, 0, 0};      /* field 127 fixed32 */
    assert_int_equal(check(unknown, sizeof unknown, path), 0);
}

static void test_malformed_wire(void **state)
{
    char path[128];
    const uint8_t cut[] = {0x5a, 0x05, 0x0a, 0x03, 'a'}; /* length past the end */
    assert_int_equal(check(cut, sizeof cut, path), -1);
    const uint8_t group[] = {0x0b}; /* wire type 3 */
    assert_int_equal(check(group, sizeof group, path), -1);
    const uint8_t varint[] = {0x08, 0xff}; /* unterminated varint */
    assert_int_equal(check(varint, sizeof varint, path), -1);
    assert_int_equal(check(NULL, 0, path), 0); /* an empty Request */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nul_in_a_top_level_string_list),
        cmocka_unit_test(test_nul_deep_inside),
        cmocka_unit_test(test_clean_requests_pass),
        cmocka_unit_test(test_malformed_wire),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
