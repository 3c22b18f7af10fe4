/* fuzz_request.c - hostile Request payloads through envelope decoding and
 * every request handler, in process.
 *
 * The input is one Request payload (no frame header). It goes through
 * omld_dispatch_payload, the daemon's own sequence (unpack, NUL scan,
 * authorisation with the state the first byte picks, the row's check with
 * dim 8, max_batch 64, max_k 16, route) and, when routed, is handled where
 * the daemon would handle it:
 *   QUERY    omld_query_run against a fixed view: a store of labelled items,
 *            a tiny random model and its index, built once at startup; the
 *            store also holds an item newer than the view and lacks one the
 *            view still serves (a query racing the indexer sees exactly that)
 *   MUTATION omld_apply on an engine state built by hand (store, closure,
 *            learner of dim 8, metrics, scratch, lock) holding a few items and
 *            pairs; the state is rebuilt for every input, so a run is a pure
 *            function of its input (reproducible findings, bounded memory)
 *   other    status / health (INLINE) and the trainer / model-registry
 *            operations (ADMIN): nothing to run in process; an OK reply
 * Every reply is then packed with omld_reply_pack and must round-trip:
 * header length = payload length, the payload unpacks, re-packs to the same
 * bytes, echoes request_id, has a known code, carries a body exactly when OK
 * (and then the request's case), and every string in it is UTF-8 (proto3
 * parsers other than protobuf-c refuse anything else). Any violation aborts.
 *
 * An input that starts with "/v1/NAME\n" is an HTTP/JSON API request
 * instead: the rest is the JSON body of operation NAME, turned into the
 * Request payload by the API's own conversion (omld_api_request: a refusal
 * there must name a code and, for INVALID_ARGUMENT, a field, and must be
 * what jansson alone makes of the body: omld_api_request_plain gives the
 * same payload bytes or the same refusal), which then takes the path
 * above.
 *
 * An input that starts with "/redis\n" is a Redis Stream entry instead: its
 * field names and values one per line, turned into a Request by the Redis
 * consumer's conversion (omld_ingest_entry_request; a refusal must say why),
 * which then takes the path above.
 *
 * Built as a libFuzzer target with -DOML_FUZZ=ON (clang) and always as a
 * replay program that runs the committed corpus (tests/fuzz/corpus_request)
 * under ctest. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "dispatch.h"
#include "engine_int.h"
#include "ingest_entry.h"
#include "local.h"
#include "log.h"
#include "omld.pb-c.h"
#include "query.h"
#include "reply.h"
#include "testutil.h"
#include "validate.h"
#include "wirecheck.h"
#include "view.h"

#define DIM 8
#define MAX_BATCH 64
#define MAX_K 16
#define MAX_PAYLOAD (1u << 20)
#define ENGINE_MAX_ITEMS 24 /* store + closure nodes of the engine state */
#define VIEW_VERSION 3

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "fuzz_request: check failed at %s:%d: %s\n", __FILE__, __LINE__, \
                    #cond);                                                                \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static const omld_limits LIM = {
    .dim = DIM, .max_batch = MAX_BATCH, .max_k = MAX_K, .default_k = 4, .default_threshold = 0.5f,
    .max_meta_entries = 4, .max_meta_key = 16, .max_meta_value = 32};

/* ------------------------------------------------------------ fixtures */

static void features(float *x, int cls, int i)
{
    for (int j = 0; j < DIM; j++)
        x[j] = (j % 4 == cls ? 3.0f : 0.0f) + 0.25f * (float)((i * 7 + j * 3) % 5) - 0.5f;
}

/* The query side: store + view, immutable after startup. */
static struct {
    oml_store *store;
    omld_store_lock lock;
    oml_snapshot *snap;
    omld_view view;
    omld_query_ctx q;
    int ready;
} Q;

static void query_fixture(void)
{
    static const struct {
        const char *id, *label;
        int cls;
    } items[] = {
        {"a0", "red", 0},  {"a1", "red", 0},     {"a2", "red", 0},   {"b0", "blue", 1},
        {"b1", "blue", 1}, {"b2", "blue", 1},    {"c0", "green", 2}, {"c1", "green", 2},
        {"u0", NULL, 3},   {"gone", "green", 2}, {"\xc3\xa9t\xc3\xa9", "\xe2\x82\xac", 3},
    };
    CHECK(oml_store_create(&Q.store, DIM, 64) == OML_OK);
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        float x[DIM];
        features(x, items[i].cls, (int)i);
        const char *lab = items[i].label;
        CHECK(oml_store_put(Q.store, items[i].id, strlen(items[i].id), x, lab,
                            lab ? strlen(lab) : 0, NULL, NULL) == OML_OK);
    }
    const float alpha[3] = {0.5f, 0.3f, 0.2f};
    Q.snap = oml_test_snapshot(2, DIM, 8, 4, NULL, alpha, 42);
    CHECK(Q.snap != NULL);
    omld_view *v = &Q.view;
    atomic_init(&v->_refs, 1);
    CHECK(oml_index_build(&v->ix, Q.snap, Q.store) == OML_OK);
    v->version = VIEW_VERSION;
    /* The store moves on after the view was built. */
    float x[DIM];
    features(x, 1, 99);
    CHECK(oml_store_put(Q.store, "late", 4, x, "blue", 4, NULL, NULL) == OML_OK);
    CHECK(oml_store_delete(Q.store, "gone", 4) == OML_OK);
    CHECK(pthread_rwlock_init(&Q.lock.rw, NULL) == 0);
    Q.q = (omld_query_ctx){.lim = &LIM, .store = Q.store, .lock = &Q.lock};
    Q.ready = 1;
}

static int Verbose; /* replay with FUZZ_REQUEST_VERBOSE=1: one line per input */

static omld_metrics Metrics; /* counters only grow; nothing else allocated */
static oml_config ModelCfg;

/* The mutation side: what omld_engine_start builds, minus threads and disk. */
static omld_engine *engine_new(void)
{
    omld_engine *e = calloc(1, sizeof *e);
    CHECK(e != NULL);
    e->opts.dim = DIM;
    e->opts.max_items = ENGINE_MAX_ITEMS;
    e->opts.max_batch = MAX_BATCH;
    e->metrics = &Metrics;
    e->model_cfg = ModelCfg;
    atomic_init(&e->queued_triplets, 0);
    CHECK(pthread_rwlock_init(&e->lock.rw, NULL) == 0);
    oml_diag d = {0};
    CHECK(oml_store_create(&e->store, DIM, ENGINE_MAX_ITEMS) == OML_OK);
    CHECK(oml_closure_create(&e->closure, ENGINE_MAX_ITEMS, 64, 7) == OML_OK);
    CHECK(oml_learner_create(&e->learner, &ModelCfg, &d) == OML_OK);
    e->derived = malloc(DERIVED_PER_PAIR * sizeof *e->derived);
    e->rows = malloc(3 * (size_t)MAX_BATCH * sizeof *e->rows);
    e->slots = malloc(3 * (size_t)MAX_BATCH * sizeof *e->slots);
    e->weights = malloc((size_t)MAX_BATCH * sizeof *e->weights);
    CHECK(e->derived != NULL && e->rows != NULL && e->slots != NULL && e->weights != NULL);
    CHECK(oml_replay_init(&e->replay, (uint32_t)ModelCfg.replay) == OML_OK);
    /* A few items (slots 0..5) and pairs: e0 ~ e1, e0 !~ e3. */
    static const char *ids[] = {"e0", "e1", "e2", "e3", "e4", "e5"};
    static const char *labels[] = {"x", "x", NULL, "y", "y", "z"};
    for (int i = 0; i < 6; i++) {
        float x[DIM];
        features(x, i % 3, i);
        CHECK(oml_store_put(e->store, ids[i], 2, x, labels[i], labels[i] ? 1 : 0, NULL, NULL) ==
              OML_OK);
    }
    int got = 0;
    CHECK(oml_closure_add_similar(e->closure, 0, 1, NULL, 0, &got) == OML_OK);
    CHECK(oml_closure_add_dissimilar(e->closure, 0, 3, NULL, 0, &got) == OML_OK);
    return e;
}

static void engine_free(omld_engine *e)
{
    free(e->rb_buf);      /* set by a promote (needs a model registry: none here) */
    free(e->promote_log);
    oml_learner_destroy(e->learner);
    oml_closure_destroy(e->closure);
    oml_store_destroy(e->store);
    pthread_rwlock_destroy(&e->lock.rw);
    free(e->derived);
    free(e->rows);
    free(e->slots);
    free(e->weights);
    oml_replay_free(&e->replay);
    free(e);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    omld_log_set_level(OMLD_LOG_ERROR); /* "first triplet with 1 stored item" etc. */
    query_fixture();
    CHECK(oml_config_preset(&ModelCfg, "default", DIM) == OML_OK);
    ModelCfg.layers = 2;
    ModelCfg.hidden = 8;
    ModelCfg.emb = 4;
    ModelCfg.seed = 1;
    oml_diag d = {0};
    CHECK(oml_config_validate(&ModelCfg, &d) == OML_OK);
    return 0;
}

/* ------------------------------------------------------------ checks */

static int utf8_ok(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t len;
        unsigned min;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            len = 2, min = 0x80;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3, min = 0x800;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4, min = 0x10000;
        } else {
            return 0;
        }
        if (i + len > n)
            return 0;
        unsigned cp = c & (0x7fu >> len);
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3fu);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

static void check_string(const char *s, const char *where)
{
    if (s == NULL)
        return;
    if (!utf8_ok((const unsigned char *)s, strlen(s))) {
        fprintf(stderr, "fuzz_request: reply string %s is not UTF-8: \"%s\"\n", where, s);
        abort();
    }
}

/* Every string field of m, recursively (set oneof members only). */
static void check_strings(const ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const char *base = (const char *)m;
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t which;
            memcpy(&which, base + f->quantifier_offset, sizeof which);
            if (which != f->id)
                continue;
        }
        if (f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        size_t n = 1;
        const void *const *elems = (const void *const *)(base + f->offset);
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            memcpy(&n, base + f->quantifier_offset, sizeof n);
            elems = *(const void *const *const *)(base + f->offset);
        }
        for (size_t k = 0; k < n; k++) {
            const void *p = elems[k];
            if (p == NULL)
                continue;
            if (f->type == PROTOBUF_C_TYPE_STRING)
                check_string(p, f->name);
            else
                check_strings(p);
        }
    }
}

/* Packs r and checks that the frame round-trips. */
static void check_reply(omld_reply *r, const Omld__Request *req, int body_expected)
{
    uint8_t *out = NULL;
    size_t len = 0;
    CHECK(omld_reply_pack(r, MAX_PAYLOAD, &out, &len) == 0);
    CHECK(out != NULL && len >= 4 && len - 4 <= MAX_PAYLOAD);
    uint32_t n = (uint32_t)out[0] << 24 | (uint32_t)out[1] << 16 | (uint32_t)out[2] << 8 | out[3];
    CHECK(n == len - 4);
    Omld__Response *resp = omld__response__unpack(NULL, n, out + 4);
    CHECK(resp != NULL);
    CHECK(resp->request_id == req->request_id);
    CHECK(resp->status != NULL);
    CHECK(resp->status->code >= 0 && resp->status->code <= OMLD__STATUS__CODE__CONFLICT);
    if (resp->status->code != OMLD__STATUS__CODE__OK) {
        CHECK(resp->body_case == OMLD__RESPONSE__BODY__NOT_SET);
        CHECK(resp->status->message != NULL && resp->status->message[0] != '\0');
    } else if (body_expected) {
        /* Response bodies reuse the Request's field numbers. */
        CHECK((int)resp->body_case == (int)req->body_case);
    }
    check_strings(&resp->base);
    size_t again = omld__response__get_packed_size(resp);
    CHECK(again == n);
    uint8_t *buf = malloc(again ? again : 1);
    CHECK(buf != NULL);
    CHECK(omld__response__pack(resp, buf) == again);
    CHECK(memcmp(buf, out + 4, again) == 0);
    free(buf);
    omld__response__free_unpacked(resp, NULL);
    free(out);
}

/* ------------------------------------------------------------ the target */

static int run_payload(const uint8_t *data, size_t size);

/* "/v1/NAME\nJSON": the API's conversion, then the payload's path. */
static int run_api(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    if (nl == NULL)
        return 0;
    const omld_op *op = omld_api_op((const char *)data + 4, (size_t)(nl - data) - 4);
    if (op == NULL)
        return 0;
    uint8_t *payload = NULL;
    size_t n = 0;
    omld_api_refusal why;
    const char *body = (const char *)nl + 1;
    size_t body_len = size - (size_t)(nl + 1 - data);
    int rc = omld_api_request(op, body, body_len, MAX_PAYLOAD, &payload, &n, &why);
    /* The fast path for arrays of numbers (proto/jsonlift.h) changes
     * nothing but speed: jansson alone gives the same bytes or refusal. */
    uint8_t *plain = NULL;
    size_t plain_n = 0;
    omld_api_refusal plain_why;
    int plain_rc = omld_api_request_plain(op, body, body_len, MAX_PAYLOAD, &plain, &plain_n,
                                          &plain_why);
    CHECK(rc == plain_rc);
    if (rc == 0)
        CHECK(n == plain_n && memcmp(payload, plain, n) == 0);
    else
        CHECK(why.code == plain_why.code && strcmp(why.field, plain_why.field) == 0 &&
              strcmp(why.message, plain_why.message) == 0);
    free(plain);
    if (rc != 0) {
        CHECK(why.code != OMLD__STATUS__CODE__OK && why.message[0] != '\0');
        CHECK(why.code != OMLD__STATUS__CODE__INVALID_ARGUMENT || why.field[0] != '\0');
        return 0;
    }
    run_payload(payload, n);
    free(payload);
    return 0;
}

/* "/redis\nNAME\nVALUE\n...": a Redis Stream entry's fields (one per line,
 * any bytes but a newline), turned into its Request by the consumer's own
 * conversion (omld_ingest_entry_request: a refusal must say why), which
 * then takes the payload's path. */
static int run_redis(const uint8_t *data, size_t size)
{
    enum { MAX_FIELDS = 64 };
    redisReply s[MAX_FIELDS], *ptr[MAX_FIELDS], arr;
    memset(&arr, 0, sizeof arr);
    arr.type = REDIS_REPLY_ARRAY;
    arr.element = ptr;
    char *copy = malloc(size + 1); /* each field NUL-terminated, as hiredis gives them */
    if (copy == NULL)
        return 0;
    memcpy(copy, data, size);
    copy[size] = '\0';
    size_t at = 7; /* past "/redis\n" */
    while (at <= size && arr.elements < MAX_FIELDS) {
        char *nl = memchr(copy + at, '\n', size - at);
        size_t len = nl ? (size_t)(nl - (copy + at)) : size - at;
        memset(&s[arr.elements], 0, sizeof s[0]);
        s[arr.elements].type = REDIS_REPLY_STRING;
        s[arr.elements].str = copy + at;
        s[arr.elements].len = len;
        copy[at + len] = '\0';
        ptr[arr.elements] = &s[arr.elements];
        arr.elements++;
        at += len + 1;
    }
    arr.elements &= ~(size_t)1; /* pairs */
    uint8_t *payload = NULL;
    size_t n = 0;
    char why[200] = "";
    if (omld_ingest_entry_request("fuzz", "1-0", &arr, MAX_PAYLOAD, &payload, &n, why,
                                  sizeof why) != 0) {
        CHECK(why[0] != '\0' && payload == NULL);
    } else {
        run_payload(payload, n);
        free(payload);
    }
    free(copy);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!Q.ready)
        LLVMFuzzerInitialize(NULL, NULL);
    if (size > 4 && memcmp(data, "/v1/", 4) == 0)
        return run_api(data, size);
    if (size >= 7 && memcmp(data, "/redis\n", 7) == 0)
        return run_redis(data, size);
    return run_payload(data, size);
}

static int run_payload(const uint8_t *data, size_t size)
{
    /* The server's NUL-in-string check walks every frame before decoding:
     * it must take any bytes, and whatever protobuf-c decodes it must have
     * walked as well-formed (it may not call decodable input malformed). */
    char nul_path[128];
    int nul = oml_wire_find_nul_string(data, size, &omld__request__descriptor, nul_path,
                                       sizeof nul_path);
    /* The daemon's own sequence: unpack, NUL scan, authorisation, check,
     * route. The connection's authorisation comes from bits 32-33 of the
     * request id, so every refusal is reachable and the corpus (small ids)
     * runs with tokens off: 0 off, 1 none yet, 2 read-only, 3 read-write. */
    Omld__Request *peek = omld__request__unpack(NULL, size, data);
    int mode = peek ? (int)((peek->request_id >> 32) & 3) : 0;
    omld__request__free_unpacked(peek, NULL);
    static const int RIGHTS[4] = {OMLD_RIGHTS_NONE, OMLD_RIGHTS_NONE, OMLD_RIGHTS_READ_ONLY,
                                  OMLD_RIGHTS_READ_WRITE};
    omld_dispatch_in in = {.lim = &LIM, .auth_required = mode > 0, .rights = RIGHTS[mode]};
    omld_dispatch dp;
    int refused = omld_dispatch_payload(data, size, &in, &dp);
    Omld__Request *req = dp.req;
    omld_reply *r = &dp.reply; /* self-referencing: never copied */
    int route = -1;
    int body_expected = 0;
    if (req == NULL) {
        CHECK(refused == OMLD_REFUSED_MALFORMED);
        omld_reply_free(r); /* answered by the server with request_id 0 */
        return 0;
    }
    if (nul < 0)
        abort();
    CHECK((nul == 1) == (refused == OMLD_REFUSED_NUL));
    if (refused) {
        CHECK(dp.op == NULL && r->status.code != OMLD__STATUS__CODE__OK);
        if (refused == OMLD_REFUSED_PERMISSION)
            CHECK(omld_op_of(req)->writes && mode == 2);
        if (refused == OMLD_REFUSED_UNAUTHENTICATED)
            CHECK(mode == 1);
    } else {
        CHECK(dp.cost >= 1 && dp.op == omld_op_of(req));
        route = (int)dp.op->route;
        switch (dp.op->route) {
        case OMLD_ROUTE_QUERY:
            omld_query_run(&Q.q, &Q.view, req, r);
            CHECK(r->msg.model_version == VIEW_VERSION);
            body_expected = 1;
            break;
        case OMLD_ROUTE_MUTATION: {
            omld_engine *e = engine_new();
            /* As omld_engine_submit does before queueing. */
            if (req->body_case == OMLD__REQUEST__BODY_ADD_TRIPLETS)
                atomic_fetch_add(&e->queued_triplets, req->add_triplets->n_triplets);
            uint32_t slots = oml_store_slots(e->store);
            int changed = omld_apply(e, req, r);
            if (r->status.code != OMLD__STATUS__CODE__OK && !changed)
                CHECK(oml_store_slots(e->store) == slots); /* a refusal changes nothing */
            CHECK(atomic_load(&e->queued_triplets) == 0);
            body_expected = 1;
            engine_free(e);
            break;
        }
        default:
            /* INLINE (status, health, auth) and ADMIN (trainer jobs, the
             * model registry) need the server's or the trainer's state:
             * nothing to run in process; the OK reply must still pack. */
            break;
        }
    }
    if (Verbose)
        printf("  route %d: code %d field '%s' body %d: %s\n", route, (int)r->status.code,
               r->status.field ? r->status.field : "", (int)r->msg.body_case,
               r->status.message ? r->status.message : "");
    check_reply(r, req, body_expected);
    omld_reply_free(r);
    omld__request__free_unpacked(req, NULL);
    return 0;
}

#ifndef OML_LIBFUZZER
/* Replay: runs every file named on the command line once. Exit status 0
 * unless a check aborts. */
int main(int argc, char **argv)
{
    LLVMFuzzerInitialize(&argc, &argv);
    Verbose = getenv("FUZZ_REQUEST_VERBOSE") != NULL;
    static uint8_t buf[4u << 20];
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (f == NULL) {
            fprintf(stderr, "fuzz_request: cannot open %s\n", argv[i]);
            return 1;
        }
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        if (Verbose)
            printf("%s\n", argv[i]);
        LLVMFuzzerTestOneInput(buf, n);
    }
    printf("fuzz_request: replayed %d inputs\n", argc - 1);
    /* The fixture lives for the process; freed here so LeakSanitizer sees
     * only what a request leaked. */
    oml_index_destroy(Q.view.ix);
    oml_snapshot_release(Q.snap);
    oml_store_destroy(Q.store);
    pthread_rwlock_destroy(&Q.lock.rw);
    return 0;
}
#endif
