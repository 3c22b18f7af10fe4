/* test_omlclient.c - libomlclient against an in-process fake daemon.
 *
 * The fake is one thread with a listening socket (TCP on 127.0.0.1 port 0,
 * or a Unix socket in /tmp) that accepts one connection, cuts Request
 * frames out of it with the shared frame reader and answers canned
 * Responses according to its mode: normal answers that echo what was asked
 * (so round trips can be checked field by field), daemon errors, a wrong
 * request_id, silence, a close, or answers held back until several
 * requests are pending (which only a pipelining client can satisfy). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "omlclient.h"

enum fake_mode {
    FAKE_NORMAL,    /* answer everything, echoing the request */
    FAKE_WRONG_ID,  /* answer with request_id + 100 */
    FAKE_SILENT,    /* read, never answer */
    FAKE_CLOSE,     /* read one request, then close */
    FAKE_BURST      /* hold answers until `burst` are pending (or all `total` came) */
};

typedef struct fake {
    int lfd;
    int port;
    char path[108];
    enum fake_mode mode;
    int burst, total;
    pthread_t th;
    pthread_mutex_t mu;
    int received;          /* requests read */
    int max_pending;       /* most requests read and not yet answered */
    Omld__Request *last;   /* last request read (owned) */
} fake;

/* ---- the fake daemon ---- */

static void write_frame(int fd, const Omld__Response *r)
{
    size_t n = omld__response__get_packed_size(r);
    uint8_t *buf = malloc(n + 4);
    oml_frame_write_header(buf, (uint32_t)n);
    omld__response__pack(r, buf + 4);
    size_t off = 0;
    while (off < n + 4) {
        ssize_t w = send(fd, buf + off, n + 4 - off, MSG_NOSIGNAL);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    free(buf);
}

/* Answers one request in the normal way: values derived from the request. */
static void answer(int fd, const Omld__Request *q, uint64_t id)
{
    Omld__Response r = OMLD__RESPONSE__INIT;
    Omld__Status st = OMLD__STATUS__INIT;
    r.request_id = id;
    r.status = &st;
    r.model_version = 42;
    Omld__PutItemsResponse put = OMLD__PUT_ITEMS_RESPONSE__INIT;
    Omld__AddTripletsResponse trip = OMLD__ADD_TRIPLETS_RESPONSE__INIT;
    Omld__AddPairsResponse pairs = OMLD__ADD_PAIRS_RESPONSE__INIT;
    Omld__ClassifyResponse cls = OMLD__CLASSIFY_RESPONSE__INIT;
    Omld__ClassScore s0 = OMLD__CLASS_SCORE__INIT, s1 = OMLD__CLASS_SCORE__INIT;
    Omld__ClassScore *sp[2] = {&s0, &s1};
    Omld__VerifyResponse ver = OMLD__VERIFY_RESPONSE__INIT;
    float dist[3] = {0.1f, 0.2f, 0.3f};
    Omld__RetrieveResponse ret = OMLD__RETRIEVE_RESPONSE__INIT;
    Omld__Hit h0 = OMLD__HIT__INIT, h1 = OMLD__HIT__INIT;
    Omld__Hit *hp[2] = {&h0, &h1};
    Omld__StatusResponse sta = OMLD__STATUS_RESPONSE__INIT;
    float alpha[3] = {0.5f, 0.3f, 0.2f};
    Omld__HealthResponse hea = OMLD__HEALTH_RESPONSE__INIT;
    Omld__CheckpointResponse ck = OMLD__CHECKPOINT_RESPONSE__INIT;
    char label[32];

    switch (q->body_case) {
    case OMLD__REQUEST__BODY_PUT_ITEMS: {
        const Omld__PutItemsRequest *p = q->put_items;
        if (p->n_items > 0 && strcmp(p->items[0]->id, "bad") == 0) {
            st.code = OMLD__STATUS__CODE__WRONG_DIMENSION;
            st.message = "got 3 values, want 4";
            st.field = "put_items.items[0].features";
            break;
        }
        put.created = (uint32_t)p->n_items;
        put.replaced = 7;
        r.body_case = OMLD__RESPONSE__BODY_PUT_ITEMS;
        r.put_items = &put;
        break;
    }
    case OMLD__REQUEST__BODY_ADD_TRIPLETS:
        trip.accepted = (uint32_t)q->add_triplets->n_triplets;
        trip.queue_depth = 1000 + id;
        r.body_case = OMLD__RESPONSE__BODY_ADD_TRIPLETS;
        r.add_triplets = &trip;
        break;
    case OMLD__REQUEST__BODY_ADD_PAIRS:
        pairs.accepted = (uint32_t)q->add_pairs->n_pairs;
        pairs.derived_triplets = 2 * q->add_pairs->n_pairs;
        r.body_case = OMLD__RESPONSE__BODY_ADD_PAIRS;
        r.add_pairs = &pairs;
        break;
    case OMLD__REQUEST__BODY_CLASSIFY: {
        const Omld__ClassifyRequest *c = q->classify;
        /* label = "k<k>" or, for a vector query, the first value as an int */
        if (c->query->ref_case == OMLD__ITEM_REF__REF_VECTOR && c->query->vector->n_values > 0)
            snprintf(label, sizeof label, "%d", (int)c->query->vector->values[0]);
        else
            snprintf(label, sizeof label, "k%u", c->k_opt_case ? c->k : 0);
        cls.label = label;
        s0.label = label;
        s0.score = 0.75f;
        s1.label = "other";
        s1.score = 0.25f;
        cls.n_scores = 2;
        cls.scores = sp;
        r.body_case = OMLD__RESPONSE__BODY_CLASSIFY;
        r.classify = &cls;
        break;
    }
    case OMLD__REQUEST__BODY_VERIFY:
        ver.similar = q->verify->threshold_opt_case != 0 && q->verify->threshold > 0.5f;
        ver.score = 0.625f;
        ver.n_distances = 3;
        ver.distances = dist;
        r.body_case = OMLD__RESPONSE__BODY_VERIFY;
        r.verify = &ver;
        break;
    case OMLD__REQUEST__BODY_RETRIEVE:
        h0.id = "x1";
        h0.score = 0.9f;
        h0.label_opt_case = OMLD__HIT__LABEL_OPT_LABEL;
        h0.label = "cat";
        h1.id = "x2";
        h1.score = 0.8f;
        ret.n_hits = 2;
        ret.hits = hp;
        r.body_case = OMLD__RESPONSE__BODY_RETRIEVE;
        r.retrieve = &ret;
        break;
    case OMLD__REQUEST__BODY_STATUS:
        sta.version = "0.1.0";
        sta.dim = 4;
        sta.depth = 2;
        sta.n_alpha = 3;
        sta.alpha = alpha;
        sta.items = 11;
        sta.triplets_applied = 99;
        r.body_case = OMLD__RESPONSE__BODY_STATUS_INFO;
        r.status_info = &sta;
        break;
    case OMLD__REQUEST__BODY_HEALTH:
        hea.live = 1;
        hea.ready = 1;
        hea.draining = 0;
        r.body_case = OMLD__RESPONSE__BODY_HEALTH;
        r.health = &hea;
        break;
    case OMLD__REQUEST__BODY_CHECKPOINT:
        ck.path = "/tmp/ck";
        ck.bytes = 1234;
        ck.triplets_applied = 99;
        r.body_case = OMLD__RESPONSE__BODY_CHECKPOINT;
        r.checkpoint = &ck;
        break;
    default:
        st.code = OMLD__STATUS__CODE__INVALID_ARGUMENT;
        st.message = "no body";
        st.field = "body";
        break;
    }
    write_frame(fd, &r);
}

static void *fake_main(void *arg)
{
    fake *f = arg;
    int fd = accept(f->lfd, NULL, NULL);
    if (fd < 0)
        return NULL;
    oml_frame_reader rd;
    oml_frame_reader_init(&rd, 64u << 20);
    Omld__Request *pending[256];
    int n_pending = 0, done = 0;
    uint8_t buf[65536];
    while (!done) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0)
            break;
        oml_frame_reader_feed(&rd, buf, (size_t)n);
        const uint8_t *p;
        size_t len;
        while (!done && oml_frame_reader_next(&rd, &p, &len) == 1) {
            Omld__Request *q = omld__request__unpack(NULL, len, p);
            if (q == NULL) {
                Omld__Response r = OMLD__RESPONSE__INIT;
                Omld__Status st = OMLD__STATUS__INIT;
                st.code = OMLD__STATUS__CODE__MALFORMED;
                st.message = "not a Request";
                r.status = &st;
                write_frame(fd, &r);
                continue;
            }
            pthread_mutex_lock(&f->mu);
            f->received++;
            if (f->last)
                omld__request__free_unpacked(f->last, NULL);
            f->last = omld__request__unpack(NULL, len, p);
            pthread_mutex_unlock(&f->mu);
            switch (f->mode) {
            case FAKE_NORMAL:
                answer(fd, q, q->request_id);
                break;
            case FAKE_WRONG_ID:
                answer(fd, q, q->request_id + 100);
                break;
            case FAKE_SILENT:
                break;
            case FAKE_CLOSE:
                done = 1;
                break;
            case FAKE_BURST:
                pending[n_pending++] = q;
                q = NULL;
                pthread_mutex_lock(&f->mu);
                if (n_pending > f->max_pending)
                    f->max_pending = n_pending;
                int flush = n_pending >= f->burst || f->received >= f->total;
                pthread_mutex_unlock(&f->mu);
                if (flush) {
                    for (int i = 0; i < n_pending; i++) {
                        answer(fd, pending[i], pending[i]->request_id);
                        omld__request__free_unpacked(pending[i], NULL);
                    }
                    n_pending = 0;
                }
                break;
            }
            if (q)
                omld__request__free_unpacked(q, NULL);
        }
    }
    for (int i = 0; i < n_pending; i++)
        omld__request__free_unpacked(pending[i], NULL);
    oml_frame_reader_free(&rd);
    close(fd);
    return NULL;
}

static fake *fake_start(enum fake_mode mode, int unix_socket)
{
    fake *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->mode = mode;
    pthread_mutex_init(&f->mu, NULL);
    if (unix_socket) {
        snprintf(f->path, sizeof f->path, "/tmp/omlc-test-%d-%ld.sock", (int)getpid(),
                 (long)random());
        unlink(f->path);
        struct sockaddr_un sun;
        memset(&sun, 0, sizeof sun);
        sun.sun_family = AF_UNIX;
        memcpy(sun.sun_path, f->path, strlen(f->path));
        f->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
        assert_true(f->lfd >= 0);
        assert_int_equal(bind(f->lfd, (struct sockaddr *)&sun, sizeof sun), 0);
    } else {
        struct sockaddr_in sin;
        memset(&sin, 0, sizeof sin);
        sin.sin_family = AF_INET;
        sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sin.sin_port = 0;
        f->lfd = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(f->lfd >= 0);
        assert_int_equal(bind(f->lfd, (struct sockaddr *)&sin, sizeof sin), 0);
        socklen_t sl = sizeof sin;
        assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&sin, &sl), 0);
        f->port = ntohs(sin.sin_port);
    }
    assert_int_equal(listen(f->lfd, 4), 0);
    assert_int_equal(pthread_create(&f->th, NULL, fake_main, f), 0);
    return f;
}

static void fake_addr(const fake *f, char *buf, size_t cap)
{
    if (f->path[0])
        snprintf(buf, cap, "unix:%s", f->path);
    else
        snprintf(buf, cap, "127.0.0.1:%d", f->port);
}

/* Call after the client closed its connection (the thread then ends). */
static void fake_stop(fake *f)
{
    pthread_join(f->th, NULL);
    close(f->lfd);
    if (f->path[0])
        unlink(f->path);
    if (f->last)
        omld__request__free_unpacked(f->last, NULL);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

static omlc *connect_to(fake *f, int timeout_ms)
{
    char addr[160];
    fake_addr(f, addr, sizeof addr);
    omlc *c = NULL;
    omlc_error err;
    int rc = omlc_connect(&c, addr, timeout_ms, &err);
    if (rc != 0)
        fail_msg("connect %s: %d %s", addr, rc, err.message);
    return c;
}

static long elapsed_ms(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

/* ---- tests ---- */

static void test_round_trips(void **state)
{
    (void)state;
    fake *f = fake_start(FAKE_NORMAL, 0);
    omlc *c = connect_to(f, 2000);
    omlc_error err;

    /* put: ids, features and labels arrive as sent */
    float fa[4] = {1, 2, 3, 4}, fb[4] = {5, 6, 7, 8};
    omlc_item items[2] = {{"a", fa, 4, "cat"}, {"b", fb, 4, NULL}};
    uint32_t created = 0, replaced = 0;
    assert_int_equal(omlc_put_items(c, items, 2, &created, &replaced, &err), 0);
    assert_int_equal(created, 2);
    assert_int_equal(replaced, 7);
    assert_int_equal(omlc_last_model_version(c), 42);
    pthread_mutex_lock(&f->mu);
    assert_int_equal(f->last->request_id, 1);
    assert_int_equal(f->last->body_case, OMLD__REQUEST__BODY_PUT_ITEMS);
    Omld__PutItemsRequest *p = f->last->put_items;
    assert_int_equal(p->n_items, 2);
    assert_string_equal(p->items[0]->id, "a");
    assert_int_equal(p->items[0]->n_features, 4);
    assert_memory_equal(p->items[0]->features, fa, sizeof fa);
    assert_int_equal(p->items[0]->label_opt_case, OMLD__ITEM__LABEL_OPT_LABEL);
    assert_string_equal(p->items[0]->label, "cat");
    assert_int_equal(p->items[1]->label_opt_case, OMLD__ITEM__LABEL_OPT__NOT_SET);
    pthread_mutex_unlock(&f->mu);

    /* classify by id with k and model */
    omlc_ref byid = {.id = "a"};
    omlc_classification cl;
    assert_int_equal(omlc_classify(c, &byid, 9, "batch1", &cl, &err), 0);
    assert_string_equal(cl.label, "k9");
    assert_int_equal(cl.n_scores, 2);
    assert_string_equal(cl.scores[1].label, "other");
    assert_true(cl.scores[0].score == 0.75f);
    assert_int_equal(cl.model_version, 42);
    pthread_mutex_lock(&f->mu);
    assert_int_equal(f->last->request_id, 2);
    assert_int_equal(f->last->classify->query->ref_case, OMLD__ITEM_REF__REF_ID);
    assert_string_equal(f->last->classify->query->id, "a");
    assert_int_equal(f->last->classify->model_opt_case, OMLD__CLASSIFY_REQUEST__MODEL_OPT_MODEL);
    assert_string_equal(f->last->classify->model, "batch1");
    pthread_mutex_unlock(&f->mu);

    /* classify by vector, k = 0 leaves k unset */
    omlc_ref byvec = {.vector = fb, .dim = 4};
    assert_int_equal(omlc_classify(c, &byvec, 0, NULL, &cl, &err), 0);
    assert_string_equal(cl.label, "5");
    pthread_mutex_lock(&f->mu);
    assert_int_equal(f->last->classify->k_opt_case, OMLD__CLASSIFY_REQUEST__K_OPT__NOT_SET);
    assert_int_equal(f->last->classify->model_opt_case, OMLD__CLASSIFY_REQUEST__MODEL_OPT__NOT_SET);
    assert_int_equal(f->last->classify->query->vector->n_values, 4);
    assert_memory_equal(f->last->classify->query->vector->values, fb, sizeof fb);
    pthread_mutex_unlock(&f->mu);

    /* verify */
    omlc_verification v;
    assert_int_equal(omlc_verify(c, &byid, &byvec, 0.75f, NULL, &v, &err), 0);
    assert_true(v.similar);
    assert_true(v.score == 0.625f);
    assert_int_equal(v.n_heads, 3);
    assert_true(v.distances[2] == 0.3f);
    pthread_mutex_lock(&f->mu);
    assert_true(f->last->verify->threshold == 0.75f);
    assert_string_equal(f->last->verify->a->id, "a");
    pthread_mutex_unlock(&f->mu);

    /* retrieve */
    omlc_hit hits[4];
    size_t nh = 0;
    uint64_t mv = 0;
    assert_int_equal(omlc_retrieve(c, &byid, 2, NULL, hits, 4, &nh, &mv, &err), 0);
    assert_int_equal(nh, 2);
    assert_string_equal(hits[0].id, "x1");
    assert_string_equal(hits[0].label, "cat");
    assert_string_equal(hits[1].label, "");
    assert_int_equal(mv, 42);

    /* triplets, pairs */
    omlc_triplet t[3] = {{{"a", 0, 0}, {"b", 0, 0}, {NULL, fa, 4}, 0.0f}};
    t[1] = t[0];
    t[2] = t[0];
    uint32_t acc = 0;
    uint64_t qd = 0;
    assert_int_equal(omlc_add_triplets(c, t, 3, &acc, &qd, &err), 0);
    assert_int_equal(acc, 3);
    pthread_mutex_lock(&f->mu);
    assert_int_equal(f->last->add_triplets->n_triplets, 3);
    assert_string_equal(f->last->add_triplets->triplets[2]->positive->id, "b");
    assert_int_equal(f->last->add_triplets->triplets[2]->negative->ref_case, OMLD__ITEM_REF__REF_VECTOR);
    pthread_mutex_unlock(&f->mu);
    omlc_pair pr[2] = {{{"a", 0, 0}, {"b", 0, 0}, 1}, {{"a", 0, 0}, {"c", 0, 0}, 0}};
    uint64_t derived = 0;
    assert_int_equal(omlc_add_pairs(c, pr, 2, &acc, &derived, &err), 0);
    assert_int_equal(acc, 2);
    assert_int_equal(derived, 4);
    pthread_mutex_lock(&f->mu);
    assert_int_equal(f->last->add_pairs->pairs[0]->relation, OMLD__PAIR__RELATION__SIMILAR);
    assert_int_equal(f->last->add_pairs->pairs[1]->relation, OMLD__PAIR__RELATION__DISSIMILAR);
    pthread_mutex_unlock(&f->mu);

    /* status, health, checkpoint */
    Omld__Response *r = NULL;
    assert_int_equal(omlc_status(c, &r, &err), 0);
    assert_string_equal(r->status_info->version, "0.1.0");
    assert_int_equal(r->status_info->n_alpha, 3);
    assert_int_equal(r->status_info->triplets_applied, 99);
    omld__response__free_unpacked(r, NULL);
    int live = 0, ready = 0, draining = 1;
    assert_int_equal(omlc_health(c, &live, &ready, &draining, &err), 0);
    assert_true(live && ready && !draining);
    assert_int_equal(omlc_checkpoint(c, &r, &err), 0);
    assert_string_equal(r->checkpoint->path, "/tmp/ck");
    assert_int_equal(r->checkpoint->bytes, 1234);
    omld__response__free_unpacked(r, NULL);

    /* request ids were 1, 2, ... */
    pthread_mutex_lock(&f->mu);
    assert_int_equal(f->last->request_id, 10);
    pthread_mutex_unlock(&f->mu);

    omlc_close(c);
    fake_stop(f);
}

static void test_daemon_error(void **state)
{
    (void)state;
    fake *f = fake_start(FAKE_NORMAL, 0);
    omlc *c = connect_to(f, 2000);
    omlc_error err;
    float x[3] = {1, 2, 3};
    omlc_item it = {"bad", x, 3, NULL};
    uint32_t created = 123;
    int rc = omlc_put_items(c, &it, 1, &created, NULL, &err);
    assert_int_equal(rc, OMLD__STATUS__CODE__WRONG_DIMENSION);
    assert_int_equal(err.code, OMLD__STATUS__CODE__WRONG_DIMENSION);
    assert_string_equal(err.message, "got 3 values, want 4");
    assert_string_equal(err.field, "put_items.items[0].features");
    assert_int_equal(created, 123); /* untouched on error */
    assert_string_equal(omlc_code_name(rc), "WRONG_DIMENSION");
    /* the connection is still usable after a daemon error */
    int live = 0;
    assert_int_equal(omlc_health(c, &live, NULL, NULL, &err), 0);
    assert_true(live);
    /* raw bytes: a frame that is not a Request gets MALFORMED, id 0, and
     * the connection stays in step */
    uint8_t junk[7] = {0, 0, 0, 3, 0xff, 0xff, 0xff};
    assert_int_equal(omlc_send_raw(c, junk, sizeof junk, &err), 0);
    Omld__Response *r = NULL;
    assert_int_equal(omlc_recv(c, &r, &err), OMLD__STATUS__CODE__MALFORMED);
    assert_non_null(r);
    assert_int_equal(r->request_id, 0);
    omld__response__free_unpacked(r, NULL);
    assert_int_equal(omlc_health(c, &live, NULL, NULL, &err), 0);
    omlc_close(c);
    fake_stop(f);
}

static void test_wrong_id(void **state)
{
    (void)state;
    fake *f = fake_start(FAKE_WRONG_ID, 0);
    omlc *c = connect_to(f, 2000);
    omlc_error err;
    int live;
    assert_int_equal(omlc_health(c, &live, NULL, NULL, &err), OMLC_EPROTO);
    assert_int_equal(err.code, OMLC_EPROTO);
    /* unusable afterwards */
    assert_int_equal(omlc_health(c, &live, NULL, NULL, &err), OMLC_EIO);
    omlc_close(c);
    fake_stop(f);
}

static void test_timeout(void **state)
{
    (void)state;
    fake *f = fake_start(FAKE_SILENT, 0);
    omlc *c = connect_to(f, 300);
    omlc_error err;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    Omld__Response *r = NULL;
    assert_int_equal(omlc_status(c, &r, &err), OMLC_ETIMEOUT);
    long ms = elapsed_ms(&t0);
    assert_null(r);
    assert_true(ms >= 250);
    assert_true(ms < 2000);
    assert_string_equal(omlc_code_name(OMLC_ETIMEOUT), "timeout");
    omlc_close(c);
    fake_stop(f);
}

static void test_server_closes(void **state)
{
    (void)state;
    fake *f = fake_start(FAKE_CLOSE, 0);
    omlc *c = connect_to(f, 2000);
    omlc_error err;
    int live;
    assert_int_equal(omlc_health(c, &live, NULL, NULL, &err), OMLC_EIO);
    assert_int_equal(err.code, OMLC_EIO);
    omlc_close(c);
    fake_stop(f);
}

static void test_connect_refused(void **state)
{
    (void)state;
    /* bind a port, then close it: nothing listens there */
    fake *f = fake_start(FAKE_NORMAL, 0);
    char addr[160];
    fake_addr(f, addr, sizeof addr);
    omlc *c0 = connect_to(f, 1000); /* let the fake thread finish */
    omlc_close(c0);
    fake_stop(f);
    omlc *c = NULL;
    omlc_error err;
    assert_int_equal(omlc_connect(&c, addr, 1000, &err), OMLC_ECONNECT);
    assert_null(c);
    assert_int_equal(omlc_connect(&c, "no-port-here", 1000, &err), OMLC_EARG);
    assert_int_equal(omlc_connect(&c, "unix:/nonexistent/omlc.sock", 1000, &err), OMLC_ECONNECT);
}

static size_t progress_calls, progress_last;
static void on_progress(size_t done, size_t total, void *arg)
{
    (void)arg;
    assert_true(done > progress_last || progress_calls == 0);
    assert_true(done <= total);
    progress_calls++;
    progress_last = done;
}

static void test_pipelined(void **state)
{
    (void)state;
    /* 10 triplet batches of 3 (the last of 1), window 4: the fake answers
     * only when 4 requests are pending, so a client that waited for each
     * answer would time out. */
    fake *f = fake_start(FAKE_BURST, 0);
    f->burst = 4;
    f->total = 10;
    omlc *c = connect_to(f, 2000);
    omlc_error err;
    omlc_triplet t[28];
    for (int i = 0; i < 28; i++)
        t[i] = (omlc_triplet){{"a", 0, 0}, {"b", 0, 0}, {"c", 0, 0}, 0.0f};
    progress_calls = progress_last = 0;
    int rc = omlc_add_triplets_pipelined(c, t, 28, 3, 4, on_progress, NULL, &err);
    if (rc != 0)
        fail_msg("pipelined: %d %s", rc, err.message);
    assert_int_equal(progress_calls, 10);
    assert_int_equal(progress_last, 28);
    omlc_totals tot;
    omlc_last_totals(c, &tot);
    assert_int_equal(tot.accepted, 28);
    assert_int_equal(tot.queue_depth, 1010); /* the last answer's, in order */
    assert_int_equal(tot.model_version, 42);
    pthread_mutex_lock(&f->mu);
    assert_int_equal(f->max_pending, 4);
    pthread_mutex_unlock(&f->mu);
    omlc_close(c);
    fake_stop(f);

    /* classify: one request per query, answers land in order */
    f = fake_start(FAKE_BURST, 0);
    f->burst = 8;
    f->total = 20;
    c = connect_to(f, 2000);
    float v[20];
    omlc_ref q[20];
    omlc_classification out[20];
    for (int i = 0; i < 20; i++) {
        v[i] = (float)i;
        q[i] = (omlc_ref){.vector = &v[i], .dim = 1};
    }
    rc = omlc_classify_pipelined(c, q, 20, 5, NULL, 8, out, NULL, NULL, &err);
    assert_int_equal(rc, 0);
    for (int i = 0; i < 20; i++) {
        char want[16];
        snprintf(want, sizeof want, "%d", i);
        assert_string_equal(out[i].label, want);
    }
    pthread_mutex_lock(&f->mu);
    assert_int_equal(f->max_pending, 8);
    pthread_mutex_unlock(&f->mu);
    omlc_close(c);
    fake_stop(f);
}

static void test_pipelined_error(void **state)
{
    (void)state;
    /* the second of four put batches fails: the error comes back, the
     * remaining answers are drained, and the connection is still usable */
    fake *f = fake_start(FAKE_NORMAL, 0);
    omlc *c = connect_to(f, 2000);
    omlc_error err;
    float x[4] = {0};
    omlc_item items[8];
    for (int i = 0; i < 8; i++)
        items[i] = (omlc_item){"ok", x, 4, "l"};
    items[2].id = "bad";
    int rc = omlc_put_items_pipelined(c, items, 8, 2, 4, NULL, NULL, &err);
    assert_int_equal(rc, OMLD__STATUS__CODE__WRONG_DIMENSION);
    assert_string_equal(err.field, "put_items.items[0].features");
    int live = 0;
    assert_int_equal(omlc_health(c, &live, NULL, NULL, &err), 0);
    assert_true(live);
    omlc_close(c);
    fake_stop(f);
}

static void test_unix_socket(void **state)
{
    (void)state;
    fake *f = fake_start(FAKE_NORMAL, 1);
    omlc *c = connect_to(f, 2000);
    omlc_error err;
    Omld__Response *r = NULL;
    assert_int_equal(omlc_status(c, &r, &err), 0);
    assert_int_equal(r->status_info->dim, 4);
    omld__response__free_unpacked(r, NULL);
    float fa[4] = {1, 2, 3, 4};
    omlc_item it[300];
    for (int i = 0; i < 300; i++)
        it[i] = (omlc_item){"u", fa, 4, NULL};
    assert_int_equal(omlc_put_items_pipelined(c, it, 300, 64, 3, NULL, NULL, &err), 0);
    omlc_totals tot;
    omlc_last_totals(c, &tot);
    assert_int_equal(tot.created, 300);
    omlc_close(c);
    fake_stop(f);
}

static void test_args(void **state)
{
    (void)state;
    omlc_error err;
    omlc *c = NULL;
    assert_int_equal(omlc_connect(&c, "127.0.0.1:1", 0, &err), OMLC_EARG);
    omlc_close(NULL);
    fake *f = fake_start(FAKE_NORMAL, 0);
    c = connect_to(f, 2000);
    omlc_ref none = {0};
    omlc_classification cl;
    assert_int_equal(omlc_classify(c, &none, 5, NULL, &cl, &err), OMLC_EARG);
    /* a local argument error does not break the connection */
    int live = 0;
    assert_int_equal(omlc_health(c, &live, NULL, NULL, &err), 0);
    Omld__Response *r;
    assert_int_equal(omlc_recv(c, &r, &err), OMLC_EARG); /* nothing outstanding */
    omlc_close(c);
    fake_stop(f);
}

int main(void)
{
    srandom((unsigned)time(NULL) ^ (unsigned)getpid());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_daemon_error),
        cmocka_unit_test(test_wrong_id),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_server_closes),
        cmocka_unit_test(test_connect_refused),
        cmocka_unit_test(test_pipelined),
        cmocka_unit_test(test_pipelined_error),
        cmocka_unit_test(test_unix_socket),
        cmocka_unit_test(test_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
