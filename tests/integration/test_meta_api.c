/* test_meta_api.c - item metadata through the real omld: stored with the
 * items, returned by GetItems and ListItems, filtering retrieve, recommend,
 * classify, list, count and delete (equality, set membership, AND) over
 * the protobuf RPC and the HTTP/JSON API alike, refused by name when out of
 * bounds, and still there after kill -9 (from the checkpoint and from the
 * log after it).
 *
 * The data: N_ITEMS items in 8 dimensions, 2 classes; item i has
 * color = COLORS[i % 3] and, for even i, shard = "s<i % 4>". */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "blobs.h"
#include "harness.h"
#include "omlclient.h"
#include "omld.pb-c.h"

#define DIM 8
#define N_ITEMS 60
#define TIMEOUT_MS 20000

static const char *const ARGS[] = {"--dim=8", "--layers=1", "--hidden=16", "--emb=8",
                                   "--publish_ms=50", "--max_metadata_entries=3",
                                   "--max_metadata_key_bytes=12", "--seed=5", NULL};
static const char *const COLORS[] = {"red", "green", "blue"};

static omld_proc g_proc;
static omlc *g_c;
static float X[N_ITEMS][DIM];

/* ------------------------------------------------------------ RPC helpers */

/* The filter "key in values" (n values), in caller storage. */
static Omld__MetadataCondition *cond(Omld__MetadataCondition *c, const char *key,
                                     const char **values, size_t n)
{
    omld__metadata_condition__init(c);
    c->key = (char *)key;
    c->values = (char **)values;
    c->n_values = n;
    return c;
}

static Omld__Response *call(Omld__Request *req)
{
    Omld__Response *resp = NULL;
    omlc_error err;
    int rc = omlc_call(g_c, req, &resp, &err);
    if (rc != 0 && resp == NULL)
        fail_msg("call failed: %s", err.message);
    return resp;
}

static void expect_ok(const Omld__Response *r)
{
    if (r->status->code != OMLD__STATUS__CODE__OK)
        fail_msg("status %d field %s: %s", r->status->code, r->status->field, r->status->message);
}

static Omld__Response *count(char **labels, size_t n_labels, Omld__MetadataCondition **c,
                             size_t n)
{
    Omld__CountItemsRequest m = OMLD__COUNT_ITEMS_REQUEST__INIT;
    m.labels = labels;
    m.n_labels = n_labels;
    m.metadata = c;
    m.n_metadata = n;
    Omld__Request req = OMLD__REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_COUNT_ITEMS;
    req.count_items = &m;
    Omld__Response *r = call(&req);
    expect_ok(r);
    return r;
}

static uint64_t count_of(Omld__MetadataCondition **c, size_t n)
{
    Omld__Response *r = count(NULL, 0, c, n);
    uint64_t k = r->count_items->count;
    omld__response__free_unpacked(r, NULL);
    return k;
}

static Omld__ItemRef id_ref(const char *id)
{
    Omld__ItemRef q = OMLD__ITEM_REF__INIT;
    q.ref_case = OMLD__ITEM_REF__REF_ID;
    q.id = (char *)id;
    return q;
}

/* The item's metadata value of key, or NULL. */
static const char *meta_value(const Omld__Item *it, const char *key)
{
    for (size_t i = 0; i < it->n_metadata; i++)
        if (strcmp(it->metadata[i]->key, key) == 0)
            return it->metadata[i]->value;
    return NULL;
}

static int item_index(const char *id)
{
    int i = -1;
    assert_int_equal(sscanf(id, "item-%d", &i), 1);
    return i;
}

/* Puts items first .. last-1 with their metadata, answered once served. */
static void put_items(int first, int last)
{
    int n = last - first;
    Omld__Item *items = calloc((size_t)n, sizeof *items);
    Omld__Item **ip = calloc((size_t)n, sizeof *ip);
    Omld__KeyValue *kv = calloc((size_t)n * 2, sizeof *kv);
    Omld__KeyValue **kp = calloc((size_t)n * 2, sizeof *kp);
    char (*ids)[16] = calloc((size_t)n, sizeof *ids), (*shards)[8] = calloc((size_t)n, sizeof *shards);
    for (int j = 0; j < n; j++) {
        int i = first + j;
        omld__item__init(&items[j]);
        snprintf(ids[j], sizeof ids[j], "item-%d", i);
        items[j].id = ids[j];
        items[j].n_features = DIM;
        items[j].features = X[i];
        items[j].label_opt_case = OMLD__ITEM__LABEL_OPT_LABEL;
        items[j].label = i % 2 ? "odd" : "even";
        omld__key_value__init(&kv[2 * j]);
        kv[2 * j].key = "color";
        kv[2 * j].value = (char *)COLORS[i % 3];
        kp[2 * j] = &kv[2 * j];
        items[j].metadata = &kp[2 * j];
        items[j].n_metadata = 1;
        if (i % 2 == 0) {
            omld__key_value__init(&kv[2 * j + 1]);
            snprintf(shards[j], sizeof shards[j], "s%d", i % 4);
            kv[2 * j + 1].key = "shard";
            kv[2 * j + 1].value = shards[j];
            kp[2 * j + 1] = &kv[2 * j + 1];
            items[j].n_metadata = 2;
        }
        ip[j] = &items[j];
    }
    Omld__PutItemsRequest m = OMLD__PUT_ITEMS_REQUEST__INIT;
    m.items = ip;
    m.n_items = (size_t)n;
    m.wait_for_view = 1;
    Omld__Request req = OMLD__REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_PUT_ITEMS;
    req.put_items = &m;
    Omld__Response *r = call(&req);
    expect_ok(r);
    omld__response__free_unpacked(r, NULL);
    free(items);
    free(ip);
    free(kv);
    free(kp);
    free(ids);
    free(shards);
}

static int setup(void **state)
{
    (void)state;
    oml_test_blobs(&X[0][0], N_ITEMS, DIM, 2, 99, 0.5f, 0.1f);
    if (omld_proc_start(&g_proc, ARGS, TIMEOUT_MS) != 0)
        return -1;
    g_c = omld_proc_dial(&g_proc, TIMEOUT_MS);
    if (g_c == NULL)
        return -1;
    put_items(0, N_ITEMS);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    omlc_close(g_c);
    int rc = omld_proc_stop(&g_proc, SIGTERM, TIMEOUT_MS);
    if (rc != 0)
        omld_proc_dump_log(&g_proc);
    omld_proc_cleanup(&g_proc);
    return rc == 0 ? 0 : -1;
}

/* How many of items 0..N_ITEMS-1 pass pred. */
static uint64_t expected(int (*pred)(int))
{
    uint64_t n = 0;
    for (int i = 0; i < N_ITEMS; i++)
        n += (uint64_t)pred(i);
    return n;
}
static int is_red(int i) { return i % 3 == 0; }
static int red_or_blue(int i) { return i % 3 != 1; }
static int red_s0(int i) { return i % 3 == 0 && i % 4 == 0; }
static int even_red(int i) { return i % 2 == 0 && i % 3 == 0; }

/* ------------------------------------------------------------ RPC */

/* GetItems returns the metadata as put; CountItems counts equality, set
 * membership, AND, and with a label; a missing key matches nothing. */
static void test_get_and_count(void **state)
{
    (void)state;
    char *ids[] = {"item-4", "item-5"};
    Omld__Response *r;
    omlc_error err;
    assert_int_equal(omlc_get_items(g_c, (const char *const *)ids, 2, &r, &err), 0);
    const Omld__Item *a = r->get_items->items[0], *b = r->get_items->items[1];
    assert_int_equal(a->n_metadata, 2);
    assert_string_equal(a->metadata[0]->key, "color"); /* the order given */
    assert_string_equal(meta_value(a, "color"), "green");
    assert_string_equal(meta_value(a, "shard"), "s0");
    assert_int_equal(b->n_metadata, 1);
    assert_string_equal(meta_value(b, "color"), "blue");
    omld__response__free_unpacked(r, NULL);

    const char *red[] = {"red"}, *rb[] = {"red", "blue"}, *s0[] = {"s0"}, *any[] = {""};
    Omld__MetadataCondition c1, c2;
    Omld__MetadataCondition *f[2] = {cond(&c1, "color", red, 1), NULL};
    assert_int_equal(count_of(f, 1), expected(is_red));
    f[0] = cond(&c1, "color", rb, 2);
    assert_int_equal(count_of(f, 1), expected(red_or_blue));
    f[0] = cond(&c1, "color", red, 1);
    f[1] = cond(&c2, "shard", s0, 1);
    assert_int_equal(count_of(f, 2), expected(red_s0));
    f[0] = cond(&c1, "nokey", any, 1);
    assert_int_equal(count_of(f, 1), 0);
    char *even[] = {"even"};
    f[0] = cond(&c1, "color", red, 1);
    r = count(even, 1, f, 1);
    assert_int_equal(r->count_items->count, expected(even_red));
    assert_int_equal(r->count_items->total, N_ITEMS);
    omld__response__free_unpacked(r, NULL);
    r = count(NULL, 0, NULL, 0);
    assert_int_equal(r->count_items->count, N_ITEMS);
    omld__response__free_unpacked(r, NULL);
}

/* ListItems pages through the items of a filter, with their metadata. */
static void test_list(void **state)
{
    (void)state;
    const char *rb[] = {"red", "blue"};
    Omld__MetadataCondition c;
    Omld__MetadataCondition *f[] = {cond(&c, "color", rb, 2)};
    Omld__ListItemsRequest m = OMLD__LIST_ITEMS_REQUEST__INIT;
    m.limit = 7;
    m.metadata = f;
    m.n_metadata = 1;
    Omld__Request req = OMLD__REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_LIST_ITEMS;
    req.list_items = &m;
    uint64_t seen = 0;
    do {
        Omld__Response *r = call(&req);
        expect_ok(r);
        for (size_t i = 0; i < r->list_items->n_items; i++) {
            const Omld__Item *it = r->list_items->items[i];
            assert_true(red_or_blue(item_index(it->id)));
            assert_string_not_equal(meta_value(it, "color"), "green");
        }
        seen += r->list_items->n_items;
        m.cursor = r->list_items->next_cursor;
        omld__response__free_unpacked(r, NULL);
    } while (m.cursor != 0);
    assert_int_equal(seen, expected(red_or_blue));
}

/* Retrieve and recommend return only matching items; classify votes with
 * matching items only (a filter nothing passes: no labelled neighbour). */
static void test_queries(void **state)
{
    (void)state;
    const char *blue[] = {"blue"}, *s2[] = {"s2"}, *none[] = {"none"};
    Omld__MetadataCondition c1, c2;
    Omld__MetadataCondition *f[] = {cond(&c1, "color", blue, 1), cond(&c2, "shard", s2, 1)};
    Omld__ItemRef q = id_ref("item-0");
    Omld__RetrieveRequest m = OMLD__RETRIEVE_REQUEST__INIT;
    m.query = &q;
    m.k_opt_case = OMLD__RETRIEVE_REQUEST__K_OPT_K;
    m.k = 20;
    m.metadata = f;
    m.n_metadata = 2;
    Omld__Request req = OMLD__REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_RETRIEVE;
    req.retrieve = &m;
    Omld__Response *r = call(&req);
    expect_ok(r);
    /* blue: i % 3 == 2; shard s2: i % 4 == 2 -> i % 12 == 2 */
    assert_int_equal(r->retrieve->n_hits, N_ITEMS / 12);
    for (size_t i = 0; i < r->retrieve->n_hits; i++) {
        assert_int_equal(item_index(r->retrieve->hits[i]->id) % 12, 2);
        assert_int_equal(r->retrieve->hits[i]->n_metadata, 0); /* not asked for */
    }
    omld__response__free_unpacked(r, NULL);
    m.with_metadata = 1;
    r = call(&req);
    expect_ok(r);
    for (size_t i = 0; i < r->retrieve->n_hits; i++) {
        const Omld__Hit *h = r->retrieve->hits[i];
        assert_int_equal(h->n_metadata, 2);
        assert_string_equal(h->metadata[0]->value, "blue");
        assert_string_equal(h->metadata[1]->value, "s2");
    }
    omld__response__free_unpacked(r, NULL);

    Omld__RecommendRequest rm = OMLD__RECOMMEND_REQUEST__INIT;
    Omld__ItemRef *pos[] = {&q};
    rm.positive = pos;
    rm.n_positive = 1;
    rm.k_opt_case = OMLD__RECOMMEND_REQUEST__K_OPT_K;
    rm.k = 30;
    rm.metadata = f;
    rm.n_metadata = 1;
    rm.with_metadata = 1;
    req.body_case = OMLD__REQUEST__BODY_RECOMMEND;
    req.recommend = &rm;
    r = call(&req);
    expect_ok(r);
    assert_int_equal(r->recommend->n_hits, N_ITEMS / 3);
    for (size_t i = 0; i < r->recommend->n_hits; i++) {
        assert_int_equal(item_index(r->recommend->hits[i]->id) % 3, 2);
        assert_string_equal(r->recommend->hits[i]->metadata[0]->value, "blue");
    }
    omld__response__free_unpacked(r, NULL);

    Omld__ClassifyRequest cm = OMLD__CLASSIFY_REQUEST__INIT;
    cm.query = &q;
    cm.metadata = f;
    cm.n_metadata = 1;
    req.body_case = OMLD__REQUEST__BODY_CLASSIFY;
    req.classify = &cm;
    r = call(&req);
    expect_ok(r);
    assert_true(r->classify->label[0] != '\0');
    omld__response__free_unpacked(r, NULL);
    f[0] = cond(&c1, "color", none, 1);
    r = call(&req);
    expect_ok(r);
    assert_string_equal(r->classify->label, ""); /* nobody may vote */
    omld__response__free_unpacked(r, NULL);
}

/* Refusals name the field: too many entries, a key too long, a key twice,
 * a NUL byte in a value (on the wire), a condition without values, a
 * classify_batch query with a filter. Nothing is stored. */
static void test_refusals(void **state)
{
    (void)state;
    float x[DIM] = {0};
    Omld__KeyValue kv[4];
    Omld__KeyValue *kp[4];
    static const char *const keys[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++) {
        omld__key_value__init(&kv[i]);
        kv[i].key = (char *)keys[i];
        kv[i].value = "v";
        kp[i] = &kv[i];
    }
    Omld__Item it = OMLD__ITEM__INIT;
    it.id = "bad";
    it.n_features = DIM;
    it.features = x;
    it.metadata = kp;
    Omld__Item *ip[] = {&it};
    Omld__PutItemsRequest m = OMLD__PUT_ITEMS_REQUEST__INIT;
    m.items = ip;
    m.n_items = 1;
    Omld__Request req = OMLD__REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_PUT_ITEMS;
    req.put_items = &m;
    it.n_metadata = 4; /* max_metadata_entries=3 */
    Omld__Response *r = call(&req);
    assert_int_equal(r->status->code, OMLD__STATUS__CODE__INVALID_ARGUMENT);
    assert_string_equal(r->status->field, "put_items.items[0].metadata");
    omld__response__free_unpacked(r, NULL);
    it.n_metadata = 2;
    kv[1].key = "a-key-of-13-b"; /* max_metadata_key_bytes=12 */
    r = call(&req);
    assert_string_equal(r->status->field, "put_items.items[0].metadata[1].key");
    omld__response__free_unpacked(r, NULL);
    kv[1].key = "a";
    r = call(&req);
    assert_string_equal(r->status->field, "put_items.items[0].metadata[1].key");
    assert_non_null(strstr(r->status->message, "repeats"));
    omld__response__free_unpacked(r, NULL);
    /* A NUL inside a value: found on the wire before decoding. */
    kv[1].key = "b";
    kv[1].value = "x\007y";
    req.request_id = 0; /* what omlc_recv waits for after a raw frame */
    size_t len = omld__request__get_packed_size(&req);
    uint8_t *buf = malloc(len + 4);
    omld__request__pack(&req, buf + 4);
    uint8_t *mark = memmem(buf + 4, len, "x\007y", 3);
    assert_non_null(mark);
    mark[1] = 0;
    buf[0] = (uint8_t)(len >> 24);
    buf[1] = (uint8_t)(len >> 16);
    buf[2] = (uint8_t)(len >> 8);
    buf[3] = (uint8_t)len;
    omlc_error err;
    assert_int_equal(omlc_send_raw(g_c, buf, len + 4, &err), 0);
    free(buf);
    int got = omlc_recv(g_c, &r, &err);
    if (got != OMLD__STATUS__CODE__INVALID_ARGUMENT)
        fail_msg("recv %d: %s", got, err.message);
    assert_non_null(strstr(r->status->field, "metadata"));
    omld__response__free_unpacked(r, NULL);

    Omld__MetadataCondition c;
    Omld__MetadataCondition *f[] = {cond(&c, "color", NULL, 0)};
    Omld__ListItemsRequest lm = OMLD__LIST_ITEMS_REQUEST__INIT;
    lm.metadata = f;
    lm.n_metadata = 1;
    req.body_case = OMLD__REQUEST__BODY_LIST_ITEMS;
    req.list_items = &lm;
    r = call(&req);
    assert_int_equal(r->status->code, OMLD__STATUS__CODE__INVALID_ARGUMENT);
    assert_string_equal(r->status->field, "list_items.metadata[0].values");
    omld__response__free_unpacked(r, NULL);

    const char *red[] = {"red"};
    cond(&c, "color", red, 1);
    Omld__ItemRef q = id_ref("item-0");
    Omld__ClassifyRequest cq = OMLD__CLASSIFY_REQUEST__INIT;
    cq.query = &q;
    cq.metadata = f;
    cq.n_metadata = 1;
    Omld__ClassifyRequest *qs[] = {&cq};
    Omld__ClassifyBatchRequest bm = OMLD__CLASSIFY_BATCH_REQUEST__INIT;
    bm.queries = qs;
    bm.n_queries = 1;
    req.body_case = OMLD__REQUEST__BODY_CLASSIFY_BATCH;
    req.classify_batch = &bm;
    r = call(&req);
    assert_int_equal(r->status->code, OMLD__STATUS__CODE__INVALID_ARGUMENT);
    assert_string_equal(r->status->field, "classify_batch.queries[0].metadata");
    omld__response__free_unpacked(r, NULL);
    assert_int_equal(count_of(NULL, 0), N_ITEMS);
}

/* ------------------------------------------------------------ HTTP/JSON */

static json_t *http(const char *op, const char *body, int *code)
{
    char path[64], *text = NULL;
    snprintf(path, sizeof path, "/v1/%s", op);
    *code = omld_http_call(g_proc.http, "POST", path, NULL, body, &text, NULL);
    assert_true(*code > 0);
    json_error_t e;
    json_t *j = json_loads(text ? text : "", 0, &e);
    if (j == NULL)
        fail_msg("%s answered %d with no JSON: %s", op, *code, text ? text : "");
    free(text);
    return j;
}

static const char *jfield(const json_t *j)
{
    return json_string_value(json_object_get(json_object_get(j, "status"), "field"));
}

/* The same filters over HTTP/JSON: a put with metadata, get, count,
 * retrieve, and refusals with the RPC's field paths. */
static void test_http(void **state)
{
    (void)state;
    int code;
    json_t *j = http("put_items",
                     "{\"items\":[{\"id\":\"web-1\",\"features\":[1,0,0,0,0,0,0,0],"
                     "\"metadata\":[{\"key\":\"color\",\"value\":\"violet\"},"
                     "{\"key\":\"lang\",\"value\":\"fr\"}]}],\"wait_for_view\":true}",
                     &code);
    assert_int_equal(code, 200);
    json_decref(j);
    j = http("get_items", "{\"ids\":[\"web-1\"]}", &code);
    json_t *md = json_object_get(json_array_get(json_object_get(json_object_get(j, "result"),
                                                                "items"), 0), "metadata");
    assert_int_equal(json_array_size(md), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(md, 1), "value")), "fr");
    json_decref(j);
    j = http("count_items", "{\"metadata\":[{\"key\":\"color\",\"values\":[\"violet\",\"red\"]}]}",
             &code);
    assert_int_equal(code, 200);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "result"), "count")),
                     expected(is_red) + 1);
    json_decref(j);
    j = http("retrieve", "{\"query\":{\"id\":\"item-1\"},\"k\":5,"
                         "\"metadata\":[{\"key\":\"lang\",\"values\":[\"fr\"]}]}", &code);
    assert_int_equal(code, 200);
    json_t *hits = json_object_get(json_object_get(j, "result"), "hits");
    assert_int_equal(json_array_size(hits), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(hits, 0), "id")), "web-1");
    json_decref(j);
    j = http("put_items", "{\"items\":[{\"id\":\"w\",\"features\":[1,0,0,0,0,0,0,0],"
                          "\"metadata\":[{\"key\":\"k\",\"value\":\"a\\u0000b\"}]}]}", &code);
    /* The JSON parser refuses \u0000 anywhere in a body (MALFORMED, no
     * field), before the message's own NUL check could name it. */
    assert_int_equal(code, 400);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "status"), "code")),
                        "MALFORMED");
    json_decref(j);
    j = http("retrieve", "{\"query\":{\"id\":\"item-1\"},"
                         "\"metadata\":[{\"key\":\"a-key-of-13-b\",\"values\":[\"x\"]}]}", &code);
    assert_int_equal(code, 400);
    assert_string_equal(jfield(j), "retrieve.metadata[0].key");
    json_decref(j);
}

/* ------------------------------------------------------------ durability */

/* Delete by metadata, a checkpoint, more items (in the log only), kill -9:
 * after the restart every item's metadata, and the deletion, are there. */
static void test_delete_and_kill(void **state)
{
    (void)state;
    const char *green[] = {"green"}, *violet[] = {"violet"};
    Omld__MetadataCondition c;
    Omld__MetadataCondition *f[] = {cond(&c, "color", green, 1)};
    Omld__DeleteItemsRequest dm = OMLD__DELETE_ITEMS_REQUEST__INIT;
    dm.metadata = f;
    dm.n_metadata = 1;
    Omld__Request req = OMLD__REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_DELETE_ITEMS;
    req.delete_items = &dm;
    Omld__Response *r = call(&req);
    expect_ok(r);
    assert_int_equal(r->delete_items->deleted, N_ITEMS / 3);
    omld__response__free_unpacked(r, NULL);
    omlc_error err;
    assert_int_equal(omlc_checkpoint(g_c, &r, &err), 0);
    omld__response__free_unpacked(r, NULL);
    /* After the checkpoint: item-1 (green, deleted) comes back as blue by
     * a put, and web-1's metadata is replaced by none. */
    float x[DIM] = {0, 1};
    Omld__KeyValue kv = OMLD__KEY_VALUE__INIT;
    kv.key = "color";
    kv.value = "blue";
    Omld__KeyValue *kp[] = {&kv};
    Omld__Item a = OMLD__ITEM__INIT, b = OMLD__ITEM__INIT;
    a.id = "item-1";
    a.n_features = b.n_features = DIM;
    a.features = b.features = x;
    a.metadata = kp;
    a.n_metadata = 1;
    b.id = "web-1";
    Omld__Item *ip[] = {&a, &b};
    Omld__PutItemsRequest pm = OMLD__PUT_ITEMS_REQUEST__INIT;
    pm.items = ip;
    pm.n_items = 2;
    req.body_case = OMLD__REQUEST__BODY_PUT_ITEMS;
    req.put_items = &pm;
    r = call(&req);
    expect_ok(r);
    omld__response__free_unpacked(r, NULL);

    omlc_close(g_c);
    assert_int_equal(omld_proc_stop(&g_proc, SIGKILL, TIMEOUT_MS), 128 + SIGKILL);
    assert_int_equal(omld_proc_restart(&g_proc, ARGS, TIMEOUT_MS), 0);
    g_c = omld_proc_dial(&g_proc, TIMEOUT_MS);
    assert_non_null(g_c);

    f[0] = cond(&c, "color", green, 1);
    assert_int_equal(count_of(f, 1), 0);
    f[0] = cond(&c, "color", violet, 1);
    assert_int_equal(count_of(f, 1), 0);
    char *ids[] = {"item-1", "item-6", "web-1"};
    assert_int_equal(omlc_get_items(g_c, (const char *const *)ids, 3, &r, &err), 0);
    assert_string_equal(meta_value(r->get_items->items[0], "color"), "blue");
    assert_string_equal(meta_value(r->get_items->items[1], "color"), "red");
    assert_string_equal(meta_value(r->get_items->items[1], "shard"), "s2");
    assert_int_equal(r->get_items->items[2]->n_metadata, 0);
    omld__response__free_unpacked(r, NULL);
    r = count(NULL, 0, NULL, 0);
    assert_int_equal(r->count_items->total, N_ITEMS - N_ITEMS / 3 + 2);
    omld__response__free_unpacked(r, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_and_count),
        cmocka_unit_test(test_list),
        cmocka_unit_test(test_queries),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_http),
        cmocka_unit_test(test_delete_and_kill),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
