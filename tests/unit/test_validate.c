/* test_validate.c - the stateless request checks (daemon/validate.c).
 *
 * Every rule is tried at its boundary (accepted) and just past it (refused),
 * asserting the exact status code and field path; then routes and costs, and
 * a max-size batch whose time, against a batch 8 times smaller, shows the
 * checks are linear (a quadratic repeated-id search fails the ratio). Limits: dim 8, max_batch 8,
 * max_k 16, unless a test says otherwise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "validate.h"

#define DIM 8
#define MAX_BATCH 8
#define MAX_K 16

static const omld_limits LIM = {
    .dim = DIM, .max_batch = MAX_BATCH, .max_k = MAX_K, .default_k = 5, .default_threshold = 0.5f};

static float FEAT[DIM] = {0, 1, 2, 3, 4, 5, 6, 7};

/* Runs omld_validate and checks a refusal: code, field, a non-empty
 * message (containing msg_part if given), no body, route/cost untouched. */
static void expect_err_lim(const Omld__Request *req, const omld_limits *lim, int code,
                           const char *field, const char *msg_part)
{
    omld_reply r;
    omld_reply_init(&r, 9);
    int route = -7;
    uint64_t cost = 777;
    int rc = omld_validate(req, lim, &r, &route, &cost);
    if (rc != code || (int)r.status.code != code || strcmp(r.status.field, field) != 0)
        print_error("got code %d field '%s' message '%s'; want %d '%s'\n", rc, r.status.field,
                    r.status.message, code, field);
    assert_int_equal(rc, code);
    assert_int_equal(r.status.code, code);
    assert_string_equal(r.status.field, field);
    assert_true(strlen(r.status.message) > 10);
    if (msg_part && strstr(r.status.message, msg_part) == NULL)
        print_error("message '%s' lacks '%s'\n", r.status.message, msg_part);
    if (msg_part)
        assert_non_null(strstr(r.status.message, msg_part));
    assert_int_equal(r.msg.body_case, OMLD__RESPONSE__BODY__NOT_SET);
    assert_int_equal(route, -7);
    assert_int_equal(cost, 777);
    omld_reply_free(&r);
}

static void expect_err(const Omld__Request *req, int code, const char *field,
                       const char *msg_part)
{
    expect_err_lim(req, &LIM, code, field, msg_part);
}

static void expect_ok_lim(const Omld__Request *req, const omld_limits *lim, int route,
                          uint64_t cost)
{
    omld_reply r;
    omld_reply_init(&r, 9);
    int rt = -1;
    uint64_t c = 0;
    int rc = omld_validate(req, lim, &r, &rt, &c);
    if (rc != 0)
        print_error("refused: code %d field '%s' message '%s'\n", rc, r.status.field,
                    r.status.message);
    assert_int_equal(rc, 0);
    assert_int_equal(r.status.code, OMLD__STATUS__CODE__OK);
    assert_int_equal(rt, route);
    assert_int_equal(c, cost);
    omld_reply_free(&r);
}

static void expect_ok(const Omld__Request *req, int route, uint64_t cost)
{
    expect_ok_lim(req, &LIM, route, cost);
}

/* A string of n copies of 'x' (static buffer per call site via the caller). */
static char *name_of(char *buf, size_t n)
{
    memset(buf, 'x', n);
    buf[n] = '\0';
    return buf;
}

/* ---------------------------------------------------------------- put_items */

typedef struct put_fx {
    Omld__Request req;
    Omld__PutItemsRequest put;
    Omld__Item items[MAX_BATCH + 1];
    Omld__Item *ptrs[MAX_BATCH + 1];
    char ids[MAX_BATCH + 1][8];
    float feats[MAX_BATCH + 1][DIM];
} put_fx;

/* n valid, distinct, unlabelled items. */
static void put_init(put_fx *f, size_t n)
{
    omld__request__init(&f->req);
    omld__put_items_request__init(&f->put);
    f->req.body_case = OMLD__REQUEST__BODY_PUT_ITEMS;
    f->req.put_items = &f->put;
    for (size_t i = 0; i < n; i++) {
        omld__item__init(&f->items[i]);
        snprintf(f->ids[i], sizeof f->ids[i], "id%zu", i);
        memcpy(f->feats[i], FEAT, sizeof FEAT);
        f->items[i].id = f->ids[i];
        f->items[i].n_features = DIM;
        f->items[i].features = f->feats[i];
        f->ptrs[i] = &f->items[i];
    }
    f->put.n_items = n;
    f->put.items = f->ptrs;
}

static void test_no_body(void **state)
{
    (void)state;
    Omld__Request req = OMLD__REQUEST__INIT;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "body", "no body");
    req.body_case = (Omld__Request__BodyCase)99; /* hand-built: an unknown operation */
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "body", "99");
}

static void test_put_batch_size(void **state)
{
    (void)state;
    put_fx f;
    put_init(&f, 0);
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "put_items.items", "empty");
    put_init(&f, 1);
    expect_ok(&f.req, OMLD_ROUTE_MUTATION, 1);
    put_init(&f, MAX_BATCH);
    expect_ok(&f.req, OMLD_ROUTE_MUTATION, MAX_BATCH);
    put_init(&f, MAX_BATCH + 1);
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "put_items.items", "max_batch");
}

static void test_put_ids(void **state)
{
    (void)state;
    put_fx f;
    char big[OMLD_ID_MAX + 2];
    put_init(&f, 4);
    f.items[2].id = (char *)"";
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "put_items.items[2].id", "empty");
    put_init(&f, 4);
    f.items[1].id = name_of(big, OMLD_ID_MAX);
    expect_ok(&f.req, OMLD_ROUTE_MUTATION, 4);
    f.items[1].id = name_of(big, OMLD_ID_MAX + 1);
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "put_items.items[1].id", "255");
    /* The same id twice: CONFLICT at the second, naming the first. */
    put_init(&f, 4);
    f.items[3].id = f.ids[1];
    expect_err(&f.req, OMLD__STATUS__CODE__CONFLICT, "put_items.items[3].id", "items[1]");
    /* Ids that differ only in length or in their last byte are distinct. */
    put_init(&f, 3);
    f.items[0].id = (char *)"ab";
    f.items[1].id = (char *)"abc";
    f.items[2].id = (char *)"abd";
    expect_ok(&f.req, OMLD_ROUTE_MUTATION, 3);
}

static void test_put_features(void **state)
{
    (void)state;
    put_fx f;
    put_init(&f, 5);
    f.items[3].n_features = DIM - 1;
    expect_err(&f.req, OMLD__STATUS__CODE__WRONG_DIMENSION, "put_items.items[3].features",
               "features has 7 values; the daemon's dimension is 8");
    f.items[3].n_features = DIM + 1; /* (the fixture's buffer is not read past DIM) */
    expect_err(&f.req, OMLD__STATUS__CODE__WRONG_DIMENSION, "put_items.items[3].features",
               "9 values");
    f.items[3].n_features = 0;
    expect_err(&f.req, OMLD__STATUS__CODE__WRONG_DIMENSION, "put_items.items[3].features",
               "0 values");
    put_init(&f, 5);
    f.feats[3][7] = NAN;
    expect_err(&f.req, OMLD__STATUS__CODE__NON_FINITE, "put_items.items[3].features",
               "features[7] is NaN");
    f.feats[3][7] = INFINITY;
    expect_err(&f.req, OMLD__STATUS__CODE__NON_FINITE, "put_items.items[3].features", "+Inf");
    f.feats[3][7] = -INFINITY;
    expect_err(&f.req, OMLD__STATUS__CODE__NON_FINITE, "put_items.items[3].features", "-Inf");
    /* The largest finite values and subnormals are fine. */
    f.feats[3][7] = FLT_MAX;
    f.feats[3][0] = -FLT_MAX;
    f.feats[3][1] = 1e-45f;
    expect_ok(&f.req, OMLD_ROUTE_MUTATION, 5);
    /* The first offending item in request order is reported. */
    f.feats[4][0] = NAN;
    f.items[2].n_features = 3;
    expect_err(&f.req, OMLD__STATUS__CODE__WRONG_DIMENSION, "put_items.items[2].features", NULL);
}

static void test_put_labels(void **state)
{
    (void)state;
    put_fx f;
    char big[OMLD_ID_MAX + 2];
    put_init(&f, 2);
    f.items[1].label_opt_case = OMLD__ITEM__LABEL_OPT_LABEL;
    f.items[1].label = (char *)"";
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "put_items.items[1].label", "label");
    f.items[1].label = name_of(big, OMLD_ID_MAX);
    expect_ok(&f.req, OMLD_ROUTE_MUTATION, 2);
    f.items[1].label = name_of(big, OMLD_ID_MAX + 1);
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "put_items.items[1].label", "255");
    f.items[1].label = (char *)"cat";
    expect_ok(&f.req, OMLD_ROUTE_MUTATION, 2);
}

/* ------------------------------------------------------- delete / get items */

typedef struct ids_fx {
    Omld__Request req;
    Omld__DeleteItemsRequest del;
    Omld__GetItemsRequest get;
    char *ids[MAX_BATCH + 1];
    char buf[MAX_BATCH + 1][8];
} ids_fx;

static void ids_init(ids_fx *f, int get, size_t n)
{
    omld__request__init(&f->req);
    omld__delete_items_request__init(&f->del);
    omld__get_items_request__init(&f->get);
    for (size_t i = 0; i < n; i++) {
        snprintf(f->buf[i], sizeof f->buf[i], "k%zu", i);
        f->ids[i] = f->buf[i];
    }
    if (get) {
        f->req.body_case = OMLD__REQUEST__BODY_GET_ITEMS;
        f->req.get_items = &f->get;
        f->get.n_ids = n;
        f->get.ids = f->ids;
    } else {
        f->req.body_case = OMLD__REQUEST__BODY_DELETE_ITEMS;
        f->req.delete_items = &f->del;
        f->del.n_ids = n;
        f->del.ids = f->ids;
    }
}

static void test_delete_items(void **state)
{
    (void)state;
    ids_fx f;
    char big[OMLD_ID_MAX + 2];
    ids_init(&f, 0, 0);
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "delete_items.ids", "empty");
    ids_init(&f, 0, MAX_BATCH);
    expect_ok(&f.req, OMLD_ROUTE_MUTATION, MAX_BATCH);
    ids_init(&f, 0, MAX_BATCH + 1);
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "delete_items.ids", "max_batch");
    ids_init(&f, 0, 4);
    f.ids[2] = (char *)"";
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "delete_items.ids[2]", "empty");
    f.ids[2] = name_of(big, OMLD_ID_MAX);
    expect_ok(&f.req, OMLD_ROUTE_MUTATION, 4);
    f.ids[2] = name_of(big, OMLD_ID_MAX + 1);
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "delete_items.ids[2]", NULL);
    ids_init(&f, 0, 4);
    f.ids[3] = f.ids[0];
    expect_err(&f.req, OMLD__STATUS__CODE__CONFLICT, "delete_items.ids[3]", "\"k0\"");
    f.del.missing_ok = 1; /* changes nothing about repeats */
    expect_err(&f.req, OMLD__STATUS__CODE__CONFLICT, "delete_items.ids[3]", NULL);
}

static void test_get_items(void **state)
{
    (void)state;
    ids_fx f;
    char big[OMLD_ID_MAX + 2];
    ids_init(&f, 1, 0);
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "get_items.ids", "empty");
    ids_init(&f, 1, 1);
    expect_ok(&f.req, OMLD_ROUTE_QUERY, 1);
    ids_init(&f, 1, MAX_BATCH);
    expect_ok(&f.req, OMLD_ROUTE_QUERY, MAX_BATCH);
    ids_init(&f, 1, MAX_BATCH + 1);
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "get_items.ids", "max_batch");
    ids_init(&f, 1, 3);
    f.ids[1] = (char *)"";
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "get_items.ids[1]", NULL);
    f.ids[1] = name_of(big, OMLD_ID_MAX + 1);
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "get_items.ids[1]", NULL);
    /* One id twice would answer the same item twice: refused like a repeat in
     * DeleteItems (issue 12: 10,000 repeats of one id made a 128-deep
     * pipeline of GetItems hold hundreds of MiB of answers). */
    f.ids[1] = f.ids[0];
    expect_err(&f.req, OMLD__STATUS__CODE__CONFLICT, "get_items.ids[1]", "appears twice");
    /* An answer that cannot fit in a frame is refused before it is built. */
    omld_limits lim = LIM;
    lim.max_answer = 4 * DIM * 3 - 1;
    ids_init(&f, 1, 3);
    expect_err_lim(&f.req, &lim, OMLD__STATUS__CODE__RESOURCE_EXHAUSTED, "get_items.ids",
                   "max_frame_bytes");
    lim.max_answer = 4 * DIM * 3 + 1000;
    expect_ok_lim(&f.req, &lim, OMLD_ROUTE_QUERY, 3);
}

/* ------------------------------------------------------------ item refs */

static void set_id(Omld__ItemRef *ref, const char *id)
{
    omld__item_ref__init(ref);
    ref->ref_case = OMLD__ITEM_REF__REF_ID;
    ref->id = (char *)id;
}

static void set_vec(Omld__ItemRef *ref, Omld__Vector *v, float *x, size_t n)
{
    omld__item_ref__init(ref);
    omld__vector__init(v);
    v->values = x;
    v->n_values = n;
    ref->ref_case = OMLD__ITEM_REF__REF_VECTOR;
    ref->vector = v;
}

static void test_ref(void **state)
{
    (void)state;
    omld_reply r;
    Omld__ItemRef ref;
    Omld__Vector v;
    float x[DIM + 1];
    char big[OMLD_ID_MAX + 2];
    memcpy(x, FEAT, sizeof FEAT);

    omld_reply_init(&r, 1);
    assert_int_equal(omld_validate_ref(NULL, &LIM, "q", &r), OMLD__STATUS__CODE__INVALID_ARGUMENT);
    assert_string_equal(r.status.field, "q");
    omld_reply_free(&r);

    omld__item_ref__init(&ref); /* neither id nor vector */
    omld_reply_init(&r, 1);
    assert_int_equal(omld_validate_ref(&ref, &LIM, "q", &r), OMLD__STATUS__CODE__INVALID_ARGUMENT);
    assert_string_equal(r.status.field, "q");
    assert_non_null(strstr(r.status.message, "id or a vector"));
    omld_reply_free(&r);

    set_id(&ref, name_of(big, OMLD_ID_MAX));
    omld_reply_init(&r, 1);
    assert_int_equal(omld_validate_ref(&ref, &LIM, "q", &r), 0);
    set_id(&ref, name_of(big, OMLD_ID_MAX + 1));
    assert_int_equal(omld_validate_ref(&ref, &LIM, "q", &r), OMLD__STATUS__CODE__INVALID_ARGUMENT);
    assert_string_equal(r.status.field, "q.id");
    omld_reply_free(&r);

    set_vec(&ref, &v, x, DIM);
    omld_reply_init(&r, 1);
    assert_int_equal(omld_validate_ref(&ref, &LIM, "q", &r), 0);
    set_vec(&ref, &v, x, DIM + 1);
    assert_int_equal(omld_validate_ref(&ref, &LIM, "q", &r), OMLD__STATUS__CODE__WRONG_DIMENSION);
    assert_string_equal(r.status.field, "q.vector");
    omld_reply_free(&r);

    x[0] = NAN;
    set_vec(&ref, &v, x, DIM);
    omld_reply_init(&r, 1);
    assert_int_equal(omld_validate_ref(&ref, &LIM, "q", &r), OMLD__STATUS__CODE__NON_FINITE);
    assert_string_equal(r.status.field, "q.vector");
    assert_non_null(strstr(r.status.message, "vector[0] is NaN"));
    omld_reply_free(&r);
}

/* Ids, labels and model names are UTF-8 (proto3 strings): well-formed
 * multi-byte text is accepted up to 255 bytes; malformed sequences are not. */
static void test_utf8(void **state)
{
    (void)state;
    put_fx f;
    static const char *const good[] = {
        "\xc3\xbcn\xc3\xaf" "code", "\xe6\x97\xa5\xe6\x9c\xac", "\xf0\x9f\x98\x80",
        "\xef\xbf\xbf", "\xf4\x8f\xbf\xbf", "\x7f"};
    static const char *const bad[] = {
        "\xff",             /* never valid */
        "ok\x80",           /* a lone continuation byte */
        "\xc0\xaf",         /* overlong '/' */
        "\xe0\x80\xaf",     /* overlong */
        "\xed\xa0\x80",     /* a surrogate */
        "\xf4\x90\x80\x80", /* above U+10FFFF */
        "\xe6\x97",         /* truncated */
        "\xe6\x97x",        /* bad continuation */
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        put_init(&f, 2);
        f.items[1].id = (char *)good[i];
        f.items[0].label_opt_case = OMLD__ITEM__LABEL_OPT_LABEL;
        f.items[0].label = (char *)good[i];
        expect_ok(&f.req, OMLD_ROUTE_MUTATION, 2);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        put_init(&f, 2);
        f.items[1].id = (char *)bad[i];
        expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "put_items.items[1].id",
                   "UTF-8");
        put_init(&f, 2);
        f.items[0].label_opt_case = OMLD__ITEM__LABEL_OPT_LABEL;
        f.items[0].label = (char *)bad[i];
        expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "put_items.items[0].label",
                   "UTF-8");
    }
    /* 85 three-byte characters are 255 bytes: accepted; one more byte is not. */
    char big[OMLD_ID_MAX + 2];
    for (int i = 0; i < 85; i++)
        memcpy(big + 3 * i, "\xe2\x82\xac", 3);
    big[255] = '\0';
    put_init(&f, 1);
    f.items[0].id = big;
    expect_ok(&f.req, OMLD_ROUTE_MUTATION, 1);
    big[255] = 'x';
    big[256] = '\0';
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "put_items.items[0].id", "255");

    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__ClassifyRequest c = OMLD__CLASSIFY_REQUEST__INIT;
    Omld__ItemRef q;
    set_id(&q, "\xc3\xa9t\xc3\xa9");
    c.query = &q;
    c.model_opt_case = OMLD__CLASSIFY_REQUEST__MODEL_OPT_MODEL;
    c.model = (char *)"mod\xe8le";
    req.body_case = OMLD__REQUEST__BODY_CLASSIFY;
    req.classify = &c;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "classify.model", "\"mod\\xe8le\"");
    c.model = (char *)"mod\xc3\xa8le";
    expect_ok(&req, OMLD_ROUTE_QUERY, 1);
    q.id = (char *)"\xe9t\xe9"; /* Latin-1, not UTF-8 */
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "classify.query.id", "byte 0");
}

/* ------------------------------------------------------ triplets and pairs */

typedef struct trip_fx {
    Omld__Request req;
    Omld__AddTripletsRequest add;
    Omld__Triplet t[MAX_BATCH + 1];
    Omld__Triplet *ptrs[MAX_BATCH + 1];
    Omld__ItemRef refs[MAX_BATCH + 1][3];
    Omld__Vector vecs[MAX_BATCH + 1];
    float x[MAX_BATCH + 1][DIM];
} trip_fx;

/* n triplets: anchor by id, positive by vector, negative by id. */
static void trip_init(trip_fx *f, size_t n)
{
    omld__request__init(&f->req);
    omld__add_triplets_request__init(&f->add);
    f->req.body_case = OMLD__REQUEST__BODY_ADD_TRIPLETS;
    f->req.add_triplets = &f->add;
    for (size_t i = 0; i < n; i++) {
        omld__triplet__init(&f->t[i]);
        memcpy(f->x[i], FEAT, sizeof FEAT);
        set_id(&f->refs[i][0], "a");
        set_vec(&f->refs[i][1], &f->vecs[i], f->x[i], DIM);
        set_id(&f->refs[i][2], "n");
        f->t[i].anchor = &f->refs[i][0];
        f->t[i].positive = &f->refs[i][1];
        f->t[i].negative = &f->refs[i][2];
        f->ptrs[i] = &f->t[i];
    }
    f->add.n_triplets = n;
    f->add.triplets = f->ptrs;
}

static void test_triplets(void **state)
{
    (void)state;
    trip_fx f;
    trip_init(&f, 0);
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "add_triplets.triplets", "empty");
    trip_init(&f, MAX_BATCH);
    expect_ok(&f.req, OMLD_ROUTE_MUTATION, MAX_BATCH);
    trip_init(&f, MAX_BATCH + 1);
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "add_triplets.triplets", NULL);

    trip_init(&f, 3);
    f.t[1].anchor = NULL;
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "add_triplets.triplets[1].anchor",
               NULL);
    /* Partial: the entries are checked where they are applied, one by one
     * (apply.c); the batch itself still is here. */
    f.add.partial = 1;
    expect_ok(&f.req, OMLD_ROUTE_MUTATION, 3);
    trip_init(&f, 0);
    f.add.partial = 1;
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "add_triplets.triplets", "empty");
    trip_init(&f, MAX_BATCH + 1);
    f.add.partial = 1;
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "add_triplets.triplets", NULL);
    trip_init(&f, 3);
    omld__item_ref__init(&f.refs[1][2]); /* set but empty */
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "add_triplets.triplets[1].negative",
               NULL);
    trip_init(&f, 3);
    f.refs[2][2].id = (char *)"";
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT,
               "add_triplets.triplets[2].negative.id", NULL);
    trip_init(&f, 3);
    f.vecs[2].n_values = DIM - 1;
    expect_err(&f.req, OMLD__STATUS__CODE__WRONG_DIMENSION,
               "add_triplets.triplets[2].positive.vector", "vector has 7 values");
    trip_init(&f, 3);
    f.x[0][5] = -INFINITY;
    expect_err(&f.req, OMLD__STATUS__CODE__NON_FINITE, "add_triplets.triplets[0].positive.vector",
               "vector[5] is -Inf");

    /* The negative must be another item (issue 12: (a, p, a) was learned). */
    trip_init(&f, 3);
    set_id(&f.refs[1][2], "a"); /* a == n */
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "add_triplets.triplets[1].negative",
               "same item as the anchor");
    trip_init(&f, 3);
    set_id(&f.refs[2][1], "n"); /* p == n, by id */
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "add_triplets.triplets[2].negative",
               "same item as the positive");
    trip_init(&f, 3);
    Omld__Vector neg;
    float y[DIM];
    memcpy(y, FEAT, sizeof y);
    y[0] = -0.0f; /* FEAT[0] is +0: the same point */
    set_vec(&f.refs[0][2], &neg, y, DIM); /* p == n, equal inline vectors */
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "add_triplets.triplets[0].negative",
               "same item as the positive");
    y[7] = 7.5f; /* one value apart: another point */
    expect_ok(&f.req, OMLD_ROUTE_MUTATION, 3);
    set_id(&f.refs[0][0], "n2"); /* a == p allowed: only the negative must differ */
    set_id(&f.refs[0][1], "n2");
    expect_ok(&f.req, OMLD_ROUTE_MUTATION, 3);
}

/* The magnitude bound (max_feature_abs, issue 12): values up to the bound
 * pass, a finite value past it is INVALID_ARGUMENT naming the field and the
 * bound, for stored items, inline triplet members and query vectors alike;
 * NaN / Inf stay NON_FINITE; a bound of 0 means none. */
static void test_feature_bound(void **state)
{
    (void)state;
    omld_limits lim = LIM;
    lim.max_abs = 1e6f;
    put_fx f;
    put_init(&f, 5);
    f.feats[3][2] = 1e6f;
    f.feats[3][4] = -1e6f;
    expect_ok_lim(&f.req, &lim, OMLD_ROUTE_MUTATION, 5);
    f.feats[3][6] = 1.0001e6f;
    expect_err_lim(&f.req, &lim, OMLD__STATUS__CODE__INVALID_ARGUMENT,
                   "put_items.items[3].features", "features[6] is 1.0001e+06");
    f.feats[3][6] = -1e37f;
    expect_err_lim(&f.req, &lim, OMLD__STATUS__CODE__INVALID_ARGUMENT,
                   "put_items.items[3].features", "max_feature_abs");
    f.feats[3][1] = NAN; /* the first offender in the vector decides */
    expect_err_lim(&f.req, &lim, OMLD__STATUS__CODE__NON_FINITE, "put_items.items[3].features",
                   "features[1] is NaN");

    trip_fx t;
    trip_init(&t, 3);
    t.x[2][0] = 1e37f;
    expect_err_lim(&t.req, &lim, OMLD__STATUS__CODE__INVALID_ARGUMENT,
                   "add_triplets.triplets[2].positive.vector", "vector[0] is 1e+37");
    expect_ok_lim(&t.req, &LIM, OMLD_ROUTE_MUTATION, 3); /* no bound (0): finite passes */

    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__RetrieveRequest rt = OMLD__RETRIEVE_REQUEST__INIT;
    Omld__ItemRef q;
    Omld__Vector v;
    float x[DIM] = {0, 0, 0, 0, 0, 0, 0, -3e30f};
    set_vec(&q, &v, x, DIM);
    rt.query = &q;
    req.body_case = OMLD__REQUEST__BODY_RETRIEVE;
    req.retrieve = &rt;
    expect_err_lim(&req, &lim, OMLD__STATUS__CODE__INVALID_ARGUMENT, "retrieve.query.vector",
                   "vector[7]");

    assert_int_equal(omld_first_bad_feature(x, DIM, 1e6f), 7);
    assert_int_equal(omld_first_bad_feature(x, 7, 1e6f), 7);
    assert_int_equal(omld_first_bad_feature(x, DIM, 0), DIM);
    x[3] = INFINITY;
    assert_int_equal(omld_first_bad_feature(x, DIM, 0), 3);
}

typedef struct pair_fx {
    Omld__Request req;
    Omld__AddPairsRequest add;
    Omld__Pair p[MAX_BATCH + 1];
    Omld__Pair *ptrs[MAX_BATCH + 1];
    Omld__ItemRef refs[MAX_BATCH + 1][2];
} pair_fx;

static void pair_init(pair_fx *f, size_t n)
{
    omld__request__init(&f->req);
    omld__add_pairs_request__init(&f->add);
    f->req.body_case = OMLD__REQUEST__BODY_ADD_PAIRS;
    f->req.add_pairs = &f->add;
    for (size_t i = 0; i < n; i++) {
        omld__pair__init(&f->p[i]);
        set_id(&f->refs[i][0], "a");
        set_id(&f->refs[i][1], "b");
        f->p[i].a = &f->refs[i][0];
        f->p[i].b = &f->refs[i][1];
        f->p[i].relation = i % 2 ? OMLD__PAIR__RELATION__DISSIMILAR : OMLD__PAIR__RELATION__SIMILAR;
        f->ptrs[i] = &f->p[i];
    }
    f->add.n_pairs = n;
    f->add.pairs = f->ptrs;
}

static void test_pairs(void **state)
{
    (void)state;
    pair_fx f;
    pair_init(&f, 0);
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "add_pairs.pairs", "empty");
    pair_init(&f, MAX_BATCH);
    expect_ok(&f.req, OMLD_ROUTE_MUTATION, MAX_BATCH);
    pair_init(&f, MAX_BATCH + 1);
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "add_pairs.pairs", NULL);

    pair_init(&f, 3);
    f.p[2].relation = OMLD__PAIR__RELATION__RELATION_UNSPECIFIED;
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "add_pairs.pairs[2].relation",
               "unspecified");
    f.p[2].relation = (Omld__Pair__Relation)3; /* a value from a newer client */
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "add_pairs.pairs[2].relation",
               "unknown");
    f.p[2].relation = (Omld__Pair__Relation)-1;
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "add_pairs.pairs[2].relation", NULL);
    pair_init(&f, 3);
    f.p[1].b = NULL;
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "add_pairs.pairs[1].b", NULL);
    pair_init(&f, 3);
    f.refs[0][0].id = (char *)"";
    expect_err(&f.req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "add_pairs.pairs[0].a.id", NULL);
}

/* ---------------------------------------------------------------- queries */

static void test_classify(void **state)
{
    (void)state;
    char big[OMLD_ID_MAX + 2];
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__ClassifyRequest c = OMLD__CLASSIFY_REQUEST__INIT;
    Omld__ItemRef q;
    set_id(&q, "x");
    req.body_case = OMLD__REQUEST__BODY_CLASSIFY;
    req.classify = &c;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "classify.query", NULL);
    c.query = &q;
    expect_ok(&req, OMLD_ROUTE_QUERY, 1); /* k absent */

    c.k_opt_case = OMLD__CLASSIFY_REQUEST__K_OPT_K;
    c.k = 0;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "classify.k", "k is 0");
    c.k = 1;
    expect_ok(&req, OMLD_ROUTE_QUERY, 1);
    c.k = MAX_K;
    expect_ok(&req, OMLD_ROUTE_QUERY, 1);
    c.k = MAX_K + 1;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "classify.k", "max_k");
    c.k = UINT32_MAX;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "classify.k", NULL);
    c.k = 3;

    c.model_opt_case = OMLD__CLASSIFY_REQUEST__MODEL_OPT_MODEL;
    c.model = (char *)"";
    expect_ok(&req, OMLD_ROUTE_QUERY, 1);
    c.model = name_of(big, OMLD_ID_MAX);
    expect_ok(&req, OMLD_ROUTE_QUERY, 1); /* unknown names are query.c's business */
    c.model = name_of(big, OMLD_ID_MAX + 1);
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "classify.model", NULL);
    c.model = (char *)"live";

    q.id = name_of(big, OMLD_ID_MAX + 1);
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "classify.query.id", NULL);
}

static void test_verify(void **state)
{
    (void)state;
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__VerifyRequest vr = OMLD__VERIFY_REQUEST__INIT;
    Omld__ItemRef a, b;
    Omld__Vector v;
    float x[DIM];
    memcpy(x, FEAT, sizeof FEAT);
    set_id(&a, "a");
    set_vec(&b, &v, x, DIM);
    req.body_case = OMLD__REQUEST__BODY_VERIFY;
    req.verify = &vr;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "verify.a", NULL);
    vr.a = &a;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "verify.b", NULL);
    vr.b = &b;
    expect_ok(&req, OMLD_ROUTE_QUERY, 1);
    v.n_values = DIM + 1;
    expect_err(&req, OMLD__STATUS__CODE__WRONG_DIMENSION, "verify.b.vector", NULL);
    v.n_values = DIM;

    vr.threshold_opt_case = OMLD__VERIFY_REQUEST__THRESHOLD_OPT_THRESHOLD;
    const float ok[] = {1.0f, 0.5f, 1e-30f, nextafterf(0.0f, 1.0f)};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        vr.threshold = ok[i];
        expect_ok(&req, OMLD_ROUTE_QUERY, 1);
    }
    const float bad[] = {nextafterf(1.0f, 2.0f), 0.0f, -0.0f, -0.5f, 2.0f, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vr.threshold = bad[i];
        expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "verify.threshold", "(0, 1]");
    }
    vr.threshold = 0.25f;
    vr.model_opt_case = OMLD__VERIFY_REQUEST__MODEL_OPT_MODEL;
    char big[OMLD_ID_MAX + 2];
    vr.model = name_of(big, OMLD_ID_MAX + 1);
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "verify.model", NULL);
}

static void test_retrieve_and_embed(void **state)
{
    (void)state;
    char big[OMLD_ID_MAX + 2];
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__RetrieveRequest rr = OMLD__RETRIEVE_REQUEST__INIT;
    Omld__ItemRef q;
    set_id(&q, "x");
    req.body_case = OMLD__REQUEST__BODY_RETRIEVE;
    req.retrieve = &rr;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "retrieve.query", NULL);
    rr.query = &q;
    expect_ok(&req, OMLD_ROUTE_QUERY, 1);
    rr.k_opt_case = OMLD__RETRIEVE_REQUEST__K_OPT_K;
    rr.k = MAX_K;
    expect_ok(&req, OMLD_ROUTE_QUERY, 1);
    rr.k = MAX_K + 1;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "retrieve.k", NULL);
    rr.k = 0;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "retrieve.k", NULL);
    rr.k = 1;
    rr.model_opt_case = OMLD__RETRIEVE_REQUEST__MODEL_OPT_MODEL;
    rr.model = name_of(big, OMLD_ID_MAX + 1);
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "retrieve.model", NULL);
    rr.model_opt_case = OMLD__RETRIEVE_REQUEST__MODEL_OPT__NOT_SET;

    /* Paging: offset + k within max_k (k absent: default_k, 5). */
    rr.k = 3;
    rr.offset = MAX_K - 3;
    expect_ok(&req, OMLD_ROUTE_QUERY, 1);
    rr.offset = MAX_K - 2;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "retrieve.offset", "max_k");
    rr.k_opt_case = OMLD__RETRIEVE_REQUEST__K_OPT__NOT_SET;
    rr.offset = MAX_K - 5;
    expect_ok(&req, OMLD_ROUTE_QUERY, 1);
    rr.offset = MAX_K - 4;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "retrieve.offset", NULL);
    rr.offset = 0;
    /* Filters: valid names, at most max_batch of each. */
    char *names[MAX_BATCH + 1];
    for (int i = 0; i <= MAX_BATCH; i++)
        names[i] = (char *)"red";
    rr.labels = names;
    rr.n_labels = MAX_BATCH;
    expect_ok(&req, OMLD_ROUTE_QUERY, 1);
    rr.n_labels = MAX_BATCH + 1;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "retrieve.labels", "max_batch");
    rr.n_labels = 2;
    names[1] = (char *)"";
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "retrieve.labels[1]", "empty");
    rr.n_labels = 0;
    rr.exclude_ids = names;
    rr.n_exclude_ids = 2;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "retrieve.exclude_ids[1]", "empty");
    names[1] = name_of(big, OMLD_ID_MAX + 1);
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "retrieve.exclude_ids[1]", "longer");
    rr.n_exclude_ids = 0;
    /* A similarity floor in [-1, 1]. */
    rr.min_similarity_opt_case = OMLD__RETRIEVE_REQUEST__MIN_SIMILARITY_OPT_MIN_SIMILARITY;
    const float floors_ok[3] = {-1.0f, 0.0f, 1.0f}, floors_bad[3] = {-1.01f, 1.5f, NAN};
    for (int i = 0; i < 3; i++) {
        rr.min_similarity = floors_ok[i];
        expect_ok(&req, OMLD_ROUTE_QUERY, 1);
        rr.min_similarity = floors_bad[i];
        expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "retrieve.min_similarity", NULL);
    }

    Omld__EmbedRequest er = OMLD__EMBED_REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_EMBED;
    req.embed = &er;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "embed.item", NULL);
    er.item = &q;
    expect_ok(&req, OMLD_ROUTE_QUERY, 1);
    q.id = (char *)"";
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "embed.item.id", NULL);
    q.id = (char *)"x";
    er.model_opt_case = OMLD__EMBED_REQUEST__MODEL_OPT_MODEL;
    er.model = name_of(big, OMLD_ID_MAX + 1);
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "embed.model", NULL);
    er.model = (char *)"live";
    expect_ok(&req, OMLD_ROUTE_QUERY, 1);
}

/* Batches of queries: 1..max_batch of them, each checked as alone with
 * its place in the path, all naming one model. */
static void test_query_batches(void **state)
{
    (void)state;
    char big[OMLD_ID_MAX + 2];
    Omld__ItemRef ids[MAX_BATCH + 1], vec;
    Omld__Vector v;
    float x[DIM];
    memcpy(x, FEAT, sizeof FEAT);
    set_vec(&vec, &v, x, DIM);
    Omld__ClassifyRequest cq[MAX_BATCH + 1], *cp[MAX_BATCH + 1];
    Omld__RetrieveRequest rq[MAX_BATCH + 1], *rp[MAX_BATCH + 1];
    for (int i = 0; i <= MAX_BATCH; i++) {
        set_id(&ids[i], "x");
        omld__classify_request__init(&cq[i]);
        omld__retrieve_request__init(&rq[i]);
        cq[i].query = rq[i].query = i == 1 ? &vec : &ids[i];
        cp[i] = &cq[i];
        rp[i] = &rq[i];
    }
    Omld__ClassifyBatchRequest cb = OMLD__CLASSIFY_BATCH_REQUEST__INIT;
    Omld__RetrieveBatchRequest rb = OMLD__RETRIEVE_BATCH_REQUEST__INIT;
    cb.queries = cp;
    rb.queries = rp;
    Omld__Request req = OMLD__REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_CLASSIFY_BATCH;
    req.classify_batch = &cb;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "classify_batch.queries", "empty");
    cb.n_queries = MAX_BATCH + 1;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "classify_batch.queries",
               "max_batch");
    cb.n_queries = MAX_BATCH;
    expect_ok(&req, OMLD_ROUTE_QUERY, MAX_BATCH); /* the cost is the queries */
    cq[3].k_opt_case = OMLD__CLASSIFY_REQUEST__K_OPT_K;
    cq[3].k = MAX_K + 1;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "classify_batch.queries[3].k",
               "max_k");
    cq[3].k = MAX_K;
    v.n_values = DIM - 1;
    expect_err(&req, OMLD__STATUS__CODE__WRONG_DIMENSION,
               "classify_batch.queries[1].query.vector", NULL);
    v.n_values = DIM;
    x[2] = NAN;
    expect_err(&req, OMLD__STATUS__CODE__NON_FINITE, "classify_batch.queries[1].query.vector",
               NULL);
    x[2] = 2;
    ids[5].id = (char *)"";
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "classify_batch.queries[5].query.id",
               "empty");
    ids[5].id = (char *)"x";
    cq[7].query = NULL;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "classify_batch.queries[7].query",
               NULL);
    cq[7].query = &ids[7];
    /* One model for the batch: none, "" and "live" are the same one. */
    cq[2].model_opt_case = OMLD__CLASSIFY_REQUEST__MODEL_OPT_MODEL;
    cq[2].model = (char *)"live";
    cq[4].model_opt_case = OMLD__CLASSIFY_REQUEST__MODEL_OPT_MODEL;
    cq[4].model = (char *)"";
    expect_ok(&req, OMLD_ROUTE_QUERY, MAX_BATCH);
    cq[6].model_opt_case = OMLD__CLASSIFY_REQUEST__MODEL_OPT_MODEL;
    cq[6].model = (char *)"daml-1";
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "classify_batch.queries[6].model",
               "same model");
    cq[6].model = name_of(big, OMLD_ID_MAX + 1);
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "classify_batch.queries[6].model",
               "longer");
    for (int i = 0; i < MAX_BATCH; i++) {
        cq[i].model_opt_case = OMLD__CLASSIFY_REQUEST__MODEL_OPT_MODEL;
        cq[i].model = (char *)"daml-1";
    }
    expect_ok(&req, OMLD_ROUTE_QUERY, MAX_BATCH);

    req.body_case = OMLD__REQUEST__BODY_RETRIEVE_BATCH;
    req.retrieve_batch = &rb;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "retrieve_batch.queries", "empty");
    rb.n_queries = 3;
    expect_ok(&req, OMLD_ROUTE_QUERY, 3);
    rq[2].k_opt_case = OMLD__RETRIEVE_REQUEST__K_OPT_K;
    rq[2].k = 3;
    rq[2].offset = MAX_K - 2;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "retrieve_batch.queries[2].offset",
               "max_k");
    rq[2].offset = 0;
    char *names[2] = {(char *)"red", (char *)""};
    rq[1].labels = names;
    rq[1].n_labels = 2;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "retrieve_batch.queries[1].labels[1]",
               "empty");
    rq[1].n_labels = 1;
    rq[0].exclude_ids = names;
    rq[0].n_exclude_ids = 2;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT,
               "retrieve_batch.queries[0].exclude_ids[1]", "empty");
    rq[0].n_exclude_ids = 1;
    rq[2].min_similarity_opt_case = OMLD__RETRIEVE_REQUEST__MIN_SIMILARITY_OPT_MIN_SIMILARITY;
    rq[2].min_similarity = 1.5f;
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT,
               "retrieve_batch.queries[2].min_similarity", NULL);
    rq[2].min_similarity = 0.5f;
    expect_ok(&req, OMLD_ROUTE_QUERY, 3);
    rq[0].model_opt_case = OMLD__RETRIEVE_REQUEST__MODEL_OPT_MODEL;
    rq[0].model = (char *)"m";
    expect_err(&req, OMLD__STATUS__CODE__INVALID_ARGUMENT, "retrieve_batch.queries[1].model",
               "same model");
}

static void test_inline_and_checkpoint(void **state)
{
    (void)state;
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__StatusRequest st = OMLD__STATUS_REQUEST__INIT;
    Omld__HealthRequest he = OMLD__HEALTH_REQUEST__INIT;
    Omld__CheckpointRequest cp = OMLD__CHECKPOINT_REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_STATUS;
    req.status = &st;
    expect_ok(&req, OMLD_ROUTE_INLINE, 1);
    req.body_case = OMLD__REQUEST__BODY_HEALTH;
    req.health = &he;
    expect_ok(&req, OMLD_ROUTE_INLINE, 1);
    req.body_case = OMLD__REQUEST__BODY_CHECKPOINT;
    req.checkpoint = &cp;
    expect_ok(&req, OMLD_ROUTE_MUTATION, 1);
}

/* Requests decoded from the wire (not hand-built structs) behave the same. */
static void test_decoded(void **state)
{
    (void)state;
    put_fx f;
    put_init(&f, 2);
    f.items[1].id = f.ids[0];
    size_t n = omld__request__get_packed_size(&f.req);
    uint8_t *buf = malloc(n);
    assert_non_null(buf);
    omld__request__pack(&f.req, buf);
    Omld__Request *req = omld__request__unpack(NULL, n, buf);
    assert_non_null(req);
    expect_err(req, OMLD__STATUS__CODE__CONFLICT, "put_items.items[1].id", NULL);
    omld__request__free_unpacked(req, NULL);
    free(buf);
}

/* ------------------------------------------------------------- big batches */

/* A full PutItems batch and a full DeleteItems batch of n entries (max_batch
 * = n), each once valid and once with a repeat at the very end, then one
 * past the limit; returns the CPU seconds of the four validations. */
static double validate_full_batches(size_t n)
{
    omld_limits lim = LIM;
    lim.max_batch = (uint32_t)n;
    Omld__Item *items = malloc(n * sizeof *items);
    Omld__Item **ptrs = malloc(n * sizeof *ptrs);
    char **ids = malloc(n * sizeof *ids);
    char *idbuf = malloc(n * 12);
    assert_true(items && ptrs && ids && idbuf);
    for (size_t i = 0; i < n; i++) {
        ids[i] = idbuf + i * 12;
        snprintf(ids[i], 12, "u%zu", i);
        omld__item__init(&items[i]);
        items[i].id = ids[i];
        items[i].n_features = DIM;
        items[i].features = FEAT;
        ptrs[i] = &items[i];
    }
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__PutItemsRequest put = OMLD__PUT_ITEMS_REQUEST__INIT;
    put.n_items = n;
    put.items = ptrs;
    req.body_case = OMLD__REQUEST__BODY_PUT_ITEMS;
    req.put_items = &put;

    clock_t t0 = clock();
    expect_ok_lim(&req, &lim, OMLD_ROUTE_MUTATION, n);
    items[n - 1].id = ids[n / 2];
    char field[64];
    snprintf(field, sizeof field, "put_items.items[%zu].id", n - 1);
    expect_err_lim(&req, &lim, OMLD__STATUS__CODE__CONFLICT, field, NULL);

    Omld__DeleteItemsRequest del = OMLD__DELETE_ITEMS_REQUEST__INIT;
    del.n_ids = n;
    del.ids = ids;
    req.body_case = OMLD__REQUEST__BODY_DELETE_ITEMS;
    req.delete_items = &del;
    expect_ok_lim(&req, &lim, OMLD_ROUTE_MUTATION, n);
    ids[n - 1] = ids[0];
    snprintf(field, sizeof field, "delete_items.ids[%zu]", n - 1);
    expect_err_lim(&req, &lim, OMLD__STATUS__CODE__CONFLICT, field, NULL);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;

    lim.max_batch = (uint32_t)n - 1; /* one past the limit */
    expect_err_lim(&req, &lim, OMLD__STATUS__CODE__INVALID_ARGUMENT, "delete_items.ids",
                   "max_batch");
    free(items);
    free(ptrs);
    free(ids);
    free(idbuf);
    return secs;
}

/* max_batch = 2^20 (the option's upper bound) is checked in time linear in
 * the batch: 8 times the entries of a 2^17 batch take 8 times as long, up
 * to 40 for caches and noise (16.5 measured), where a quadratic repeat
 * search takes 64 times as long. The smaller batch's time is the best of
 * three. */
static void test_large_batches_are_linear(void **state)
{
    (void)state;
    const size_t big = (size_t)1 << 20, small = big / 8;
    double t_small = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        double t = validate_full_batches(small);
        t_small = t < t_small ? t : t_small;
    }
    double t_big = validate_full_batches(big);
    print_message("4 validations of %zu entries: %.3f s CPU; of %zu: %.3f s (ratio %.1f)\n",
                  big, t_big, small, t_small, t_big / t_small);
    assert_true(t_big < 40.0 * t_small + 0.01);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_body),
        cmocka_unit_test(test_put_batch_size),
        cmocka_unit_test(test_put_ids),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_put_features),
        cmocka_unit_test(test_put_labels),
        cmocka_unit_test(test_delete_items),
        cmocka_unit_test(test_get_items),
        cmocka_unit_test(test_ref),
        cmocka_unit_test(test_triplets),
        cmocka_unit_test(test_feature_bound),
        cmocka_unit_test(test_pairs),
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_verify),
        cmocka_unit_test(test_retrieve_and_embed),
        cmocka_unit_test(test_query_batches),
        cmocka_unit_test(test_inline_and_checkpoint),
        cmocka_unit_test(test_decoded),
        cmocka_unit_test(test_large_batches_are_linear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
