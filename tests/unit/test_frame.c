/* test_frame.c - the frame reader (proto/frame.c) and the wire envelope
 * (omld.proto through protobuf-c) end to end: pack -> header -> reader ->
 * unpack.
 *
 * frame.c is included (h2o style) so that its allocations go through a
 * counting hook: the tests can then prove that an oversized length is
 * refused before anything of that size is allocated, and inject ENOMEM. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t hook_largest;   /* largest size ever requested */
static int hook_fail_next;    /* fail the next allocation */
static void *hook_realloc(void *p, size_t n);
#define OML_FRAME_REALLOC hook_realloc
#include "../../proto/frame.c"

#include "err.h"
#include "omld.pb-c.h"
#include "rng.h"

static void *hook_realloc(void *p, size_t n)
{
    if (hook_fail_next) {
        hook_fail_next = 0;
        return NULL;
    }
    if (n > hook_largest)
        hook_largest = n;
    return realloc(p, n);
}

/* ---- helpers ---- */

typedef struct {
    uint8_t *bytes;
    size_t len, cap;
} bytes_t;

static void bytes_put(bytes_t *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 16;
        b->bytes = realloc(b->bytes, b->cap);
        assert_non_null(b->bytes);
    }
    if (n)
        memcpy(b->bytes + b->len, p, n);
    b->len += n;
}

static void bytes_frame(bytes_t *b, const void *payload, uint32_t n)
{
    uint8_t h[4];
    oml_frame_write_header(h, n);
    bytes_put(b, h, 4);
    bytes_put(b, payload, n);
}

/* What a reader produced from a stream: the frames (concatenated, with a
 * separator-free length list) and the final status. */
typedef struct {
    bytes_t data;
    size_t lens[64];
    int n_frames;
    int err; /* 0, or the error next()/feed() reported */
} result_t;

static void result_free(result_t *res)
{
    free(res->data.bytes);
    memset(res, 0, sizeof *res);
}

static void drain(oml_frame_reader *r, result_t *res)
{
    const uint8_t *p = NULL;
    size_t n = 0;
    int rc;
    while ((rc = oml_frame_reader_next(r, &p, &n)) == 1) {
        assert_non_null(p);
        assert_true(res->n_frames < 64);
        res->lens[res->n_frames++] = n;
        bytes_put(&res->data, p, n);
    }
    if (rc < 0 && !res->err)
        res->err = rc;
}

/* Feeds stream in chunks: chunk <= 0 means random sizes 1..64 from rng. */
static void run_reader(const bytes_t *stream, uint32_t max, int chunk, oml_rng *rng, result_t *res)
{
    oml_frame_reader r;
    assert_int_equal(oml_frame_reader_init(&r, max), OML_OK);
    memset(res, 0, sizeof *res);
    size_t off = 0;
    while (off < stream->len) {
        size_t n = chunk > 0 ? (size_t)chunk : 1 + (size_t)(oml_rng_next(rng) % 64);
        if (n > stream->len - off)
            n = stream->len - off;
        int rc = oml_frame_reader_feed(&r, stream->bytes + off, n);
        if (rc < 0) {
            assert_int_equal(rc, res->err); /* only the sticky error */
            break;
        }
        off += n;
        drain(&r, res);
        /* The incomplete tail never exceeds one maximal frame. */
        if (!res->err)
            assert_true(oml_frame_reader_buffered(&r) <= (size_t)max + 4);
    }
    oml_frame_reader_free(&r);
}

static void assert_same_result(const result_t *a, const result_t *b)
{
    assert_int_equal(a->n_frames, b->n_frames);
    assert_int_equal(a->err, b->err);
    for (int i = 0; i < a->n_frames; i++)
        assert_int_equal(a->lens[i], b->lens[i]);
    assert_int_equal(a->data.len, b->data.len);
    if (a->data.len)
        assert_memory_equal(a->data.bytes, b->data.bytes, a->data.len);
}

/* A stream of frames of sizes 0, 1, 3, 300, 1000, 0, 77 with patterned bytes. */
static void make_stream(bytes_t *s, size_t *total_payload)
{
    static const uint32_t sizes[] = {0, 1, 3, 300, 1000, 0, 77};
    uint8_t buf[1000];
    *total_payload = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        for (uint32_t i = 0; i < sizes[k]; i++)
            buf[i] = (uint8_t)(i * 31u + k * 7u);
        bytes_frame(s, buf, sizes[k]);
        *total_payload += sizes[k];
    }
}

/* ---- tests ---- */

static void test_write_header(void **state)
{
    (void)state;
    uint8_t h[4];
    oml_frame_write_header(h, 0x01020304u);
    assert_int_equal(h[0], 1);
    assert_int_equal(h[1], 2);
    assert_int_equal(h[2], 3);
    assert_int_equal(h[3], 4);
    oml_frame_write_header(h, 0xFFFFFFFFu);
    assert_int_equal(load_be32(h), 0xFFFFFFFFu);
    oml_frame_write_header(h, 0);
    assert_int_equal(load_be32(h), 0);
}

static void test_init_and_free(void **state)
{
    (void)state;
    oml_frame_reader r;
    assert_int_equal(oml_frame_reader_init(&r, OML_FRAME_MAX_LIMIT + 1u), OML_EINVAL);
    assert_null(r._buf);
    oml_frame_reader_free(&r);
    oml_frame_reader_free(NULL);
    assert_int_equal(oml_frame_reader_init(&r, OML_FRAME_DEFAULT_MAX), OML_OK);
    const uint8_t *p = NULL;
    size_t n = 0;
    assert_int_equal(oml_frame_reader_next(&r, &p, &n), 0);
    assert_int_equal(oml_frame_reader_feed(&r, NULL, 0), OML_OK);
    assert_int_equal(oml_frame_reader_next(&r, &p, &n), 0);
    assert_int_equal(oml_frame_reader_buffered(&r), 0);
    oml_frame_reader_free(&r);
}

/* Whole, byte by byte and many random splits give the same frames. */
static void test_splits_equal_whole(void **state)
{
    (void)state;
    bytes_t s = {0};
    size_t total;
    make_stream(&s, &total);
    result_t whole, bytewise, split;
    run_reader(&s, 4096, (int)s.len, NULL, &whole);
    assert_int_equal(whole.n_frames, 7);
    assert_int_equal(whole.err, 0);
    assert_int_equal(whole.data.len, total);
    assert_int_equal(whole.lens[3], 300);
    assert_int_equal(whole.data.bytes[4 + 5], (uint8_t)(5 * 31 + 3 * 7)); /* frame 3, byte 5 */

    run_reader(&s, 4096, 1, NULL, &bytewise);
    assert_same_result(&whole, &bytewise);
    result_free(&bytewise);

    oml_rng rng;
    oml_rng_seed(&rng, 42);
    for (int it = 0; it < 200; it++) {
        run_reader(&s, 4096, 0, &rng, &split);
        assert_same_result(&whole, &split);
        result_free(&split);
    }
    result_free(&whole);
    free(s.bytes);
}

/* Several frames in one feed are all available at once: next() does not
 * move memory, so every pointer from the same feed stays valid. */
static void test_several_frames_one_feed(void **state)
{
    (void)state;
    bytes_t s = {0};
    bytes_frame(&s, "alpha", 5);
    bytes_frame(&s, "", 0);
    bytes_frame(&s, "gamma!", 6);
    bytes_put(&s, "\0\0", 2); /* half a header */

    oml_frame_reader r;
    assert_int_equal(oml_frame_reader_init(&r, 16), OML_OK);
    assert_int_equal(oml_frame_reader_feed(&r, s.bytes, s.len), OML_OK);
    const uint8_t *p[3];
    size_t n[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(oml_frame_reader_next(&r, &p[i], &n[i]), 1);
    const uint8_t *none = NULL;
    size_t none_n = 0;
    assert_int_equal(oml_frame_reader_next(&r, &none, &none_n), 0);
    assert_int_equal(n[0], 5);
    assert_int_equal(n[1], 0);
    assert_int_equal(n[2], 6);
    assert_memory_equal(p[0], "alpha", 5);
    assert_non_null(p[1]);
    assert_memory_equal(p[2], "gamma!", 6);
    assert_int_equal(oml_frame_reader_buffered(&r), 2);

    /* Complete the pending header: a zero-length frame. */
    assert_int_equal(oml_frame_reader_feed(&r, "\0\0", 2), OML_OK);
    assert_int_equal(oml_frame_reader_buffered(&r), 4); /* consumed prefix compacted */
    const uint8_t *q;
    size_t m = 99;
    assert_int_equal(oml_frame_reader_next(&r, &q, &m), 1);
    assert_int_equal(m, 0);
    assert_non_null(q);
    assert_int_equal(oml_frame_reader_next(&r, &q, &m), 0);
    oml_frame_reader_free(&r);
    free(s.bytes);
}

static void test_zero_length_frame(void **state)
{
    (void)state;
    oml_frame_reader r;
    assert_int_equal(oml_frame_reader_init(&r, 0), OML_OK);
    static const uint8_t z[8] = {0};
    assert_int_equal(oml_frame_reader_feed(&r, z, 8), OML_OK);
    const uint8_t *p = NULL;
    size_t n = 7;
    assert_int_equal(oml_frame_reader_next(&r, &p, &n), 1);
    assert_non_null(p);
    assert_int_equal(n, 0);
    assert_int_equal(oml_frame_reader_next(&r, &p, &n), 1);
    assert_int_equal(oml_frame_reader_next(&r, &p, &n), 0);
    /* With max 0 any non-empty frame is oversized. */
    static const uint8_t one[4] = {0, 0, 0, 1};
    assert_int_equal(oml_frame_reader_feed(&r, one, 4), OML_OK);
    assert_int_equal(oml_frame_reader_next(&r, &p, &n), OML_EFULL);
    oml_frame_reader_free(&r);
}

/* A length over the maximum is refused from the header alone: the frames
 * before it are delivered, then OML_EFULL (sticky), and nothing of the
 * announced size is ever allocated, however the stream is split. */
static void test_oversized_refused_before_alloc(void **state)
{
    (void)state;
    const uint32_t max = 1024;
    bytes_t s = {0};
    uint8_t ok[1024];
    memset(ok, 0xab, sizeof ok);
    bytes_frame(&s, ok, 10);
    bytes_frame(&s, ok, max); /* exactly the maximum is fine */
    uint8_t h[4];
    oml_frame_write_header(h, 0xFFFFFFFFu);
    bytes_put(&s, h, 4);
    for (int i = 0; i < 256; i++) /* 256 KiB that must never be buffered */
        bytes_put(&s, ok, sizeof ok);

    result_t whole, bytewise;
    hook_largest = 0;
    run_reader(&s, max, (int)s.len, NULL, &whole);
    assert_int_equal(whole.n_frames, 2);
    assert_int_equal(whole.lens[1], max);
    assert_int_equal(whole.err, OML_EFULL);
    assert_true(hook_largest <= 4 * (max + 4 + 14)); /* sized by real bytes only */

    hook_largest = 0;
    run_reader(&s, max, 1, NULL, &bytewise);
    assert_same_result(&whole, &bytewise);
    assert_true(hook_largest <= 4 * (max + 4));
    result_free(&whole);
    result_free(&bytewise);

    /* max + 1 is refused; the error is sticky for next() and feed(). */
    oml_frame_reader r;
    assert_int_equal(oml_frame_reader_init(&r, max), OML_OK);
    oml_frame_write_header(h, max + 1);
    hook_largest = 0;
    assert_int_equal(oml_frame_reader_feed(&r, h, 3), OML_OK);
    assert_int_equal(oml_frame_reader_feed(&r, h + 3, 1), OML_OK);
    assert_int_equal(oml_frame_reader_feed(&r, ok, sizeof ok), OML_OK); /* dropped */
    assert_int_equal(oml_frame_reader_buffered(&r), 4);
    assert_true(hook_largest < 1024);
    const uint8_t *p = NULL;
    size_t n = 0;
    assert_int_equal(oml_frame_reader_next(&r, &p, &n), OML_EFULL);
    assert_int_equal(oml_frame_reader_next(&r, &p, &n), OML_EFULL);
    assert_int_equal(oml_frame_reader_feed(&r, ok, 1), OML_EFULL);
    oml_frame_reader_free(&r);
    free(s.bytes);
}

/* The unconsumed tail never exceeds max + 4 bytes, whatever arrives. */
static void test_buffer_bound(void **state)
{
    (void)state;
    const uint32_t max = 64;
    oml_frame_reader r;
    assert_int_equal(oml_frame_reader_init(&r, max), OML_OK);
    uint8_t h[4], body[64];
    memset(body, 1, sizeof body);
    oml_frame_write_header(h, max);
    assert_int_equal(oml_frame_reader_feed(&r, h, 4), OML_OK);
    assert_int_equal(oml_frame_reader_feed(&r, body, max - 1), OML_OK);
    assert_int_equal(oml_frame_reader_buffered(&r), max + 3);
    const uint8_t *p = NULL;
    size_t n = 0;
    assert_int_equal(oml_frame_reader_next(&r, &p, &n), 0);
    assert_int_equal(oml_frame_reader_feed(&r, body, 1), OML_OK);
    assert_int_equal(oml_frame_reader_next(&r, &p, &n), 1);
    assert_int_equal(n, max);
    oml_frame_reader_free(&r);

    /* Random garbage: either frames or the error, and the bound always holds
     * (checked inside run_reader after every drain). */
    oml_rng rng;
    oml_rng_seed(&rng, 7);
    for (int it = 0; it < 50; it++) {
        bytes_t s = {0};
        for (int i = 0; i < 2000; i++) {
            uint8_t b = (uint8_t)oml_rng_next(&rng);
            if (i % 4 < 2 && (oml_rng_next(&rng) & 3))
                b = 0; /* make small lengths likely so frames do occur */
            bytes_put(&s, &b, 1);
        }
        result_t res;
        run_reader(&s, max, 0, &rng, &res);
        assert_true(res.n_frames > 0 || res.err == OML_EFULL);
        result_free(&res);
        free(s.bytes);
    }
}

/* An allocation failure takes nothing and leaves the reader usable. */
static void test_enomem_leaves_reader_usable(void **state)
{
    (void)state;
    oml_frame_reader r;
    assert_int_equal(oml_frame_reader_init(&r, 100), OML_OK);
    bytes_t s = {0};
    bytes_frame(&s, "hello", 5);
    hook_fail_next = 1;
    assert_int_equal(oml_frame_reader_feed(&r, s.bytes, s.len), OML_ENOMEM);
    assert_int_equal(oml_frame_reader_buffered(&r), 0);
    assert_int_equal(oml_frame_reader_feed(&r, s.bytes, s.len), OML_OK);
    const uint8_t *p = NULL;
    size_t n = 0;
    assert_int_equal(oml_frame_reader_next(&r, &p, &n), 1);
    assert_int_equal(n, 5);
    assert_memory_equal(p, "hello", 5);
    oml_frame_reader_free(&r);
    free(s.bytes);
}

/* ---- the envelope through protobuf-c ---- */

/* Packs msg into a frame appended to s. */
static void put_request(bytes_t *s, const Omld__Request *req)
{
    size_t n = omld__request__get_packed_size(req);
    uint8_t *buf = malloc(n ? n : 1);
    assert_non_null(buf);
    assert_int_equal(omld__request__pack(req, buf), n);
    bytes_frame(s, buf, (uint32_t)n);
    free(buf);
}

static void test_envelope_round_trip(void **state)
{
    (void)state;
    static const char *ID = "\xe7\x94\xbb\xe5\x83\x8f-42/\xc3\xa9t\xc3\xa9"; /* "画像-42/été" */
    float feats[3] = {0.5f, -1.25f, 3e-7f};

    /* PutItems: one labelled item with a non-ASCII id, one unlabelled. */
    Omld__Item it0 = OMLD__ITEM__INIT, it1 = OMLD__ITEM__INIT;
    it0.id = (char *)ID;
    it0.n_features = 3;
    it0.features = feats;
    it0.label_opt_case = OMLD__ITEM__LABEL_OPT_LABEL;
    it0.label = "sandal";
    it1.id = "b";
    it1.n_features = 3;
    it1.features = feats;
    Omld__Item *items[2] = {&it0, &it1};
    Omld__PutItemsRequest put = OMLD__PUT_ITEMS_REQUEST__INIT;
    put.n_items = 2;
    put.items = items;
    Omld__Request r1 = OMLD__REQUEST__INIT;
    r1.request_id = 0x1122334455667788ull;
    r1.body_case = OMLD__REQUEST__BODY_PUT_ITEMS;
    r1.put_items = &put;

    /* Classify by inline vector with k = 5. */
    float q[3] = {1.0f, 2.0f, -0.0f};
    Omld__Vector vec = OMLD__VECTOR__INIT;
    vec.n_values = 3;
    vec.values = q;
    Omld__ItemRef ref = OMLD__ITEM_REF__INIT;
    ref.ref_case = OMLD__ITEM_REF__REF_VECTOR;
    ref.vector = &vec;
    Omld__ClassifyRequest cls = OMLD__CLASSIFY_REQUEST__INIT;
    cls.query = &ref;
    cls.k_opt_case = OMLD__CLASSIFY_REQUEST__K_OPT_K;
    cls.k = 5;
    Omld__Request r2 = OMLD__REQUEST__INIT;
    r2.request_id = 2;
    r2.body_case = OMLD__REQUEST__BODY_CLASSIFY;
    r2.classify = &cls;

    /* Health: an empty body message; and a request with no body at all. */
    Omld__HealthRequest hr = OMLD__HEALTH_REQUEST__INIT;
    Omld__Request r3 = OMLD__REQUEST__INIT;
    r3.request_id = 3;
    r3.body_case = OMLD__REQUEST__BODY_HEALTH;
    r3.health = &hr;
    Omld__Request r4 = OMLD__REQUEST__INIT; /* packs to zero bytes */

    bytes_t s = {0};
    put_request(&s, &r1);
    put_request(&s, &r2);
    put_request(&s, &r3);
    put_request(&s, &r4);

    /* Through the reader in 3-byte chunks. */
    oml_frame_reader rd;
    assert_int_equal(oml_frame_reader_init(&rd, OML_FRAME_DEFAULT_MAX), OML_OK);
    int seen = 0;
    for (size_t off = 0; off < s.len; off += 3) {
        size_t n = s.len - off < 3 ? s.len - off : 3;
        assert_int_equal(oml_frame_reader_feed(&rd, s.bytes + off, n), OML_OK);
        const uint8_t *p = NULL;
        size_t len = 0;
        while (oml_frame_reader_next(&rd, &p, &len) == 1) {
            Omld__Request *m = omld__request__unpack(NULL, len, p);
            assert_non_null(m);
            switch (seen++) {
            case 0:
                assert_true(m->request_id == 0x1122334455667788ull);
                assert_int_equal(m->body_case, OMLD__REQUEST__BODY_PUT_ITEMS);
                assert_int_equal(m->put_items->n_items, 2);
                assert_string_equal(m->put_items->items[0]->id, ID);
                assert_int_equal(m->put_items->items[0]->n_features, 3);
                assert_memory_equal(m->put_items->items[0]->features, feats, sizeof feats);
                assert_int_equal(m->put_items->items[0]->label_opt_case, OMLD__ITEM__LABEL_OPT_LABEL);
                assert_string_equal(m->put_items->items[0]->label, "sandal");
                assert_int_equal(m->put_items->items[1]->label_opt_case, OMLD__ITEM__LABEL_OPT__NOT_SET);
                break;
            case 1:
                assert_int_equal(m->body_case, OMLD__REQUEST__BODY_CLASSIFY);
                assert_int_equal(m->classify->query->ref_case, OMLD__ITEM_REF__REF_VECTOR);
                assert_int_equal(m->classify->query->vector->n_values, 3);
                assert_memory_equal(m->classify->query->vector->values, q, sizeof q);
                assert_int_equal(m->classify->k_opt_case, OMLD__CLASSIFY_REQUEST__K_OPT_K);
                assert_int_equal(m->classify->k, 5);
                assert_int_equal(m->classify->model_opt_case, OMLD__CLASSIFY_REQUEST__MODEL_OPT__NOT_SET);
                break;
            case 2:
                assert_int_equal(m->request_id, 3);
                assert_int_equal(m->body_case, OMLD__REQUEST__BODY_HEALTH);
                break;
            case 3:
                assert_int_equal(len, 0);
                assert_int_equal(m->request_id, 0);
                assert_int_equal(m->body_case, OMLD__REQUEST__BODY__NOT_SET);
                break;
            }
            omld__request__free_unpacked(m, NULL);
        }
    }
    assert_int_equal(seen, 4);
    oml_frame_reader_free(&rd);
    free(s.bytes);
}

/* An error Response: status with code and field, model_version, no body. */
static void test_error_response_round_trip(void **state)
{
    (void)state;
    Omld__Status st = OMLD__STATUS__INIT;
    st.code = OMLD__STATUS__CODE__WRONG_DIMENSION;
    st.message = "got 3 values, want 784";
    st.field = "put_items.items[0].features";
    Omld__Response resp = OMLD__RESPONSE__INIT;
    resp.request_id = 9;
    resp.status = &st;
    resp.model_version = 17;
    size_t n = omld__response__get_packed_size(&resp);
    uint8_t *buf = malloc(4 + n);
    assert_non_null(buf);
    oml_frame_write_header(buf, (uint32_t)n);
    omld__response__pack(&resp, buf + 4);

    oml_frame_reader rd;
    assert_int_equal(oml_frame_reader_init(&rd, OML_FRAME_DEFAULT_MAX), OML_OK);
    assert_int_equal(oml_frame_reader_feed(&rd, buf, 4 + n), OML_OK);
    const uint8_t *p = NULL;
    size_t len = 0;
    assert_int_equal(oml_frame_reader_next(&rd, &p, &len), 1);
    Omld__Response *m = omld__response__unpack(NULL, len, p);
    assert_non_null(m);
    assert_int_equal(m->request_id, 9);
    assert_int_equal(m->model_version, 17);
    assert_non_null(m->status);
    assert_int_equal(m->status->code, OMLD__STATUS__CODE__WRONG_DIMENSION);
    assert_string_equal(m->status->field, "put_items.items[0].features");
    assert_int_equal(m->body_case, OMLD__RESPONSE__BODY__NOT_SET);
    omld__response__free_unpacked(m, NULL);
    oml_frame_reader_free(&rd);
    free(buf);
}

/* Payloads protobuf-c refuses come back as NULL, and the reader carries on
 * with the next frame (framing stays in step, as the daemon relies on). */
static void test_malformed_payloads(void **state)
{
    (void)state;
    static const uint8_t bad_varint[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
                                         0xff, 0xff, 0xff, 0xff, 0xff, 0xff}; /* 11+ byte varint */
    static const uint8_t bad_wire[] = {0x0f, 0x00};                      /* wire type 7 */
    static const uint8_t bad_len[] = {0x52, 0x7f, 0x0a};                 /* put_items, len 127 > left */
    static const uint8_t bad_utf8[] = {0x52, 0x05, 0x0a, 0x03, 0x0a, 0x01, 0xff}; /* id "\xff" */

    /* A valid Request, cut one byte short. */
    Omld__HealthRequest hr = OMLD__HEALTH_REQUEST__INIT;
    Omld__Request ok = OMLD__REQUEST__INIT;
    ok.request_id = 300;
    ok.body_case = OMLD__REQUEST__BODY_HEALTH;
    ok.health = &hr;
    uint8_t good[32];
    size_t good_n = omld__request__pack(&ok, good);
    assert_true(good_n > 2);

    bytes_t s = {0};
    bytes_frame(&s, bad_varint, sizeof bad_varint);
    bytes_frame(&s, bad_wire, sizeof bad_wire);
    bytes_frame(&s, bad_len, sizeof bad_len);
    bytes_frame(&s, bad_utf8, sizeof bad_utf8);
    bytes_frame(&s, good, (uint32_t)(good_n - 1));
    bytes_frame(&s, good, (uint32_t)good_n);

    oml_frame_reader rd;
    assert_int_equal(oml_frame_reader_init(&rd, 1024), OML_OK);
    assert_int_equal(oml_frame_reader_feed(&rd, s.bytes, s.len), OML_OK);
    const uint8_t *p = NULL;
    size_t len = 0;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(oml_frame_reader_next(&rd, &p, &len), 1);
        Omld__Request *m = omld__request__unpack(NULL, len, p);
        if (m) /* protobuf-c 1.4 checks UTF-8 in proto3 strings; be robust */
            omld__request__free_unpacked(m, NULL);
        if (i != 3)
            assert_null(m);
    }
    assert_int_equal(oml_frame_reader_next(&rd, &p, &len), 1);
    Omld__Request *m = omld__request__unpack(NULL, len, p);
    assert_non_null(m);
    assert_int_equal(m->request_id, 300);
    assert_int_equal(m->body_case, OMLD__REQUEST__BODY_HEALTH);
    omld__request__free_unpacked(m, NULL);
    assert_int_equal(oml_frame_reader_next(&rd, &p, &len), 0);
    oml_frame_reader_free(&rd);
    free(s.bytes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_header),
        cmocka_unit_test(test_init_and_free),
        cmocka_unit_test(test_splits_equal_whole),
        cmocka_unit_test(test_several_frames_one_feed),
        cmocka_unit_test(test_zero_length_frame),
        cmocka_unit_test(test_oversized_refused_before_alloc),
        cmocka_unit_test(test_buffer_bound),
        cmocka_unit_test(test_enomem_leaves_reader_usable),
        cmocka_unit_test(test_envelope_round_trip),
        cmocka_unit_test(test_error_response_round_trip),
        cmocka_unit_test(test_malformed_payloads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
