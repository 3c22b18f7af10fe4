/* test_limits.c - the daemon's connection limits and its authorisation,
 * against the real omld (harness.c), over raw sockets, libomlclient and
 * plain HTTP.
 *
 * Limits (one daemon with short timeouts): a slowloris client sending one
 * byte a second of a frame is dropped within request_timeout_ms while
 * others are served, and a slow but steady big frame is not; an idle
 * connection is closed after idle_timeout_ms while a busy one stays; a
 * pipelining client over max_conn_input_bytes is paused (not refused) and
 * served in full; batch, k and frame-size refusals; max_connections. Every
 * one is counted on /status ("limits") and /metrics.
 *
 * Authorisation (a daemon with one read-write and one read-only token): no
 * Auth -> UNAUTHENTICATED and nothing changed; a wrong token is refused and
 * three close the connection; read-only reads but gets PERMISSION_DENIED on
 * writes; read-write writes; HTTP /status and /metrics need the bearer
 * token, /livez and /readyz do not. And the startup warning for a
 * non-loopback bind without tokens. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "frame.h"
#include "harness.h"
#include "omlclient.h"

#define DIM 16
#define TIMEOUT_MS 20000
#define REQUEST_TIMEOUT_MS 1500
#define IDLE_TIMEOUT_MS 2000

#define RW_TOKEN "rw-secret-0123456789abcdef"
#define RO_TOKEN "ro-secret-0123456789abcdef"

static const char *const LIMIT_ARGS[] = {
    "--dim=16", "--layers=1", "--hidden=16", "--emb=8", "--publish_ms=50", "--seed=3",
    "--max_batch=50", "--max_k=10", "--max_frame_bytes=16384",
    "--max_conn_input_bytes=32768", "--request_timeout_ms=1500", "--min_request_rate=100",
    "--idle_timeout_ms=2000", "--log_level=debug", NULL};

static const char *const AUTH_ARGS[] = {
    "--dim=16", "--layers=1", "--hidden=16", "--emb=8", "--publish_ms=50", "--seed=3",
    "--tokens=rw:" RW_TOKEN ",ro:" RO_TOKEN, NULL};

static omld_proc g_lim, g_auth;

/* ------------------------------------------------------------ helpers */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int dial_raw(const char *host_port)
{
    char host[128];
    const char *colon = strrchr(host_port, ':');
    assert_non_null(colon);
    memcpy(host, host_port, (size_t)(colon - host_port));
    host[colon - host_port] = 0;
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_socktype = SOCK_STREAM;
    assert_int_equal(getaddrinfo(host, colon + 1, &hints, &ai), 0);
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, ai->ai_addr, ai->ai_addrlen), 0);
    freeaddrinfo(ai);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* 1 if the peer has closed fd (EOF or reset) within wait_ms, else 0. Any
 * bytes the daemon sent before closing are read and dropped. */
static int closed_within(int fd, int wait_ms)
{
    uint64_t end = now_ms() + (uint64_t)wait_ms;
    for (;;) {
        uint64_t t = now_ms();
        if (t >= end)
            return 0;
        struct pollfd p = {fd, POLLIN, 0};
        int rc = poll(&p, 1, (int)(end - t));
        if (rc <= 0)
            continue;
        char buf[4096];
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            return 1;
    }
}

static omlc *dial(const omld_proc *p)
{
    omlc *c = omld_proc_dial(p, TIMEOUT_MS);
    assert_non_null(c);
    return c;
}

/* HTTP GET with an optional Authorization header; status code, body in *body. */
static int http_get(const char *host_port, const char *path, const char *auth, char **body)
{
    return omld_http_get_auth(host_port, path, auth, body, NULL);
}

/* The unsigned value of "key" inside the JSON object "obj" of /status. */
static uint64_t status_value(const omld_proc *p, const char *obj, const char *key)
{
    char *body = NULL;
    int code = http_get(p->http, "/status", p == &g_auth ? "Bearer " RO_TOKEN : NULL, &body);
    assert_int_equal(code, 200);
    assert_non_null(body);
    char want[96];
    snprintf(want, sizeof want, "\"%s\":{", obj);
    const char *o = strstr(body, want);
    if (o == NULL)
        fprintf(stderr, "no object %s in %s\n", obj, body);
    assert_non_null(o);
    snprintf(want, sizeof want, "\"%s\":", key);
    const char *k = strstr(o, want);
    assert_non_null(k);
    uint64_t v = strtoull(k + strlen(want), NULL, 10);
    free(body);
    return v;
}

static void make_vec(float *x, int seed)
{
    for (int j = 0; j < DIM; j++)
        x[j] = (float)((seed * 31 + j * 7) % 17) / 17.0f + (j % 4 == seed % 4 ? 1.0f : 0.0f);
}

/* A packed PutItems frame (header + payload) of n items named PREFIX-i. */
static uint8_t *put_frame(const char *prefix, int n, uint64_t request_id, size_t *len)
{
    Omld__Item *items = calloc((size_t)n, sizeof *items);
    Omld__Item **ptrs = calloc((size_t)n, sizeof *ptrs);
    float *x = calloc((size_t)n * DIM, sizeof *x);
    char (*ids)[32] = calloc((size_t)n, sizeof *ids);
    assert_true(items && ptrs && x && ids);
    for (int i = 0; i < n; i++) {
        omld__item__init(&items[i]);
        snprintf(ids[i], sizeof ids[i], "%s-%d", prefix, i);
        make_vec(x + (size_t)i * DIM, i);
        items[i].id = ids[i];
        items[i].n_features = DIM;
        items[i].features = x + (size_t)i * DIM;
        ptrs[i] = &items[i];
    }
    Omld__PutItemsRequest put = OMLD__PUT_ITEMS_REQUEST__INIT;
    put.n_items = (size_t)n;
    put.items = ptrs;
    Omld__Request req = OMLD__REQUEST__INIT;
    req.request_id = request_id;
    req.body_case = OMLD__REQUEST__BODY_PUT_ITEMS;
    req.put_items = &put;
    size_t plen = omld__request__get_packed_size(&req);
    uint8_t *out = malloc(plen + 4);
    assert_non_null(out);
    oml_frame_write_header(out, (uint32_t)plen);
    omld__request__pack(&req, out + 4);
    *len = plen + 4;
    free(items);
    free(ptrs);
    free(x);
    free(ids);
    return out;
}

static int log_contains(const omld_proc *p, const char *needle)
{
    FILE *f = fopen(p->log, "r");
    if (f == NULL)
        return 0;
    char line[2048];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

/* ------------------------------------------------------------ fixtures */

static int setup_lim(void **state)
{
    (void)state;
    return omld_proc_start(&g_lim, LIMIT_ARGS, TIMEOUT_MS);
}

static int teardown_lim(void **state)
{
    (void)state;
    int rc = omld_proc_stop(&g_lim, SIGTERM, TIMEOUT_MS);
    if (rc != 0)
        omld_proc_dump_log(&g_lim);
    omld_proc_cleanup(&g_lim);
    return rc == 0 ? 0 : -1;
}

static int setup_auth(void **state)
{
    (void)state;
    return omld_proc_start(&g_auth, AUTH_ARGS, TIMEOUT_MS);
}

static int teardown_auth(void **state)
{
    (void)state;
    int rc = omld_proc_stop(&g_auth, SIGTERM, TIMEOUT_MS);
    if (rc != 0)
        omld_proc_dump_log(&g_auth);
    omld_proc_cleanup(&g_auth);
    return rc == 0 ? 0 : -1;
}

/* ------------------------------------------------------------ limits */

typedef struct served {
    const omld_proc *p;
    atomic_int stop;                    /* shared with the client thread: atomics (TSan) */
    atomic_int calls, failures;
} served;

/* Another client, served all along: one Health every 50 ms. */
static void *serve_main(void *arg)
{
    served *s = arg;
    omlc *c = NULL;
    omlc_error err;
    if (omlc_connect(&c, s->p->rpc, TIMEOUT_MS, &err) != 0) {
        s->failures++;
        return NULL;
    }
    while (!s->stop) {
        int live, ready, draining;
        if (omlc_health(c, &live, &ready, &draining, &err) != 0)
            s->failures++;
        s->calls++;
        sleep_ms(50);
    }
    omlc_close(c);
    return NULL;
}

static void test_slowloris_dropped(void **state)
{
    (void)state;
    uint64_t before = status_value(&g_lim, "limits", "slow_dropped");
    served other = {.p = &g_lim};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, serve_main, &other), 0);

    /* A 200-byte frame, one byte a second (the header first, as a client
     * that means it would). */
    size_t len;
    uint8_t *frame = put_frame("slow", 1, 1, &len);
    int fd = dial_raw(g_lim.rpc);
    uint64_t t0 = now_ms();
    int dropped = 0;
    for (size_t i = 0; i < len && !dropped; i++) {
        if (send(fd, frame + i, 1, MSG_NOSIGNAL) != 1)
            break;
        dropped = closed_within(fd, 1000);
        if (now_ms() - t0 > 10000)
            break;
    }
    if (!dropped)
        dropped = closed_within(fd, 2000);
    uint64_t took = now_ms() - t0;
    close(fd);
    free(frame);
    other.stop = 1;
    pthread_join(th, NULL);
    fprintf(stderr, "slowloris dropped after %llu ms; the other client made %d calls\n",
            (unsigned long long)took, other.calls);
    assert_true(dropped);
    assert_true(took >= REQUEST_TIMEOUT_MS - 100);
    assert_true(took <= REQUEST_TIMEOUT_MS + 2500);
    assert_int_equal(other.failures, 0);
    assert_true(other.calls >= 10);
    assert_int_equal(status_value(&g_lim, "limits", "slow_dropped"), before + 1);
    assert_true(log_contains(&g_lim, "slow client"));
}

/* A big frame that takes longer than request_timeout_ms but arrives well
 * above min_request_rate is not a slow client. */
static void test_slow_but_steady_frame_served(void **state)
{
    (void)state;
    size_t len;
    uint8_t *frame = put_frame("steady", 50, 7, &len); /* 50 items: ~4.5 KB */
    assert_true(len > 3000);
    int fd = dial_raw(g_lim.rpc);
    uint64_t t0 = now_ms();
    /* ~1,000 bytes/s (10x min_request_rate): longer than the timeout. */
    for (size_t off = 0; off < len; off += 100) {
        size_t n = len - off < 100 ? len - off : 100;
        assert_int_equal(send(fd, frame + off, n, MSG_NOSIGNAL), (ssize_t)n);
        sleep_ms(100);
    }
    assert_true(now_ms() - t0 > REQUEST_TIMEOUT_MS);
    uint8_t hdr[4];
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    assert_int_equal(recv(fd, hdr, 4, MSG_WAITALL), 4);
    uint32_t n = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
    uint8_t *payload = malloc(n + 1);
    assert_int_equal(recv(fd, payload, n, MSG_WAITALL), (ssize_t)n);
    Omld__Response *r = omld__response__unpack(NULL, n, payload);
    assert_non_null(r);
    assert_int_equal(r->request_id, 7);
    assert_int_equal(r->status->code, 0);
    assert_int_equal(r->put_items->created + r->put_items->replaced, 50);
    omld__response__free_unpacked(r, NULL);
    free(payload);
    free(frame);
    close(fd);
}

static void test_idle_connection_closed(void **state)
{
    (void)state;
    uint64_t before = status_value(&g_lim, "limits", "idle_closed");
    served busy = {.p = &g_lim};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, serve_main, &busy), 0);
    int fd = dial_raw(g_lim.rpc);
    uint64_t t0 = now_ms();
    int closed = closed_within(fd, IDLE_TIMEOUT_MS + 4000);
    uint64_t took = now_ms() - t0;
    close(fd);
    sleep_ms(500); /* the busy client lives past the idle timeout */
    busy.stop = 1;
    pthread_join(th, NULL);
    fprintf(stderr, "idle connection closed after %llu ms\n", (unsigned long long)took);
    assert_true(closed);
    assert_true(took >= IDLE_TIMEOUT_MS - 100);
    assert_int_equal(busy.failures, 0);
    assert_true(status_value(&g_lim, "limits", "idle_closed") >= before + 1);
    assert_true(log_contains(&g_lim, "idle for"));
}

/* A client pipelining far more than max_conn_input_bytes is paused (its
 * reading stops while its requests are held) and then served in full. */
static void test_input_bound_pauses(void **state)
{
    (void)state;
    uint64_t before = status_value(&g_lim, "limits", "input_paused");
    enum { N = 60 };
    size_t len[N];
    uint8_t *frames[N];
    size_t total = 0;
    char prefix[32];
    for (int i = 0; i < N; i++) {
        snprintf(prefix, sizeof prefix, "pipe%d", i);
        frames[i] = put_frame(prefix, 50, (uint64_t)(1000 + i), &len[i]);
        assert_true(len[i] < 16384);
        total += len[i];
    }
    uint8_t *all = malloc(total);
    size_t off = 0;
    for (int i = 0; i < N; i++) {
        memcpy(all + off, frames[i], len[i]);
        off += len[i];
        free(frames[i]);
    }
    /* One write of everything: ~270 KB, 8x the bound. */
    int fd = dial_raw(g_lim.rpc);
    assert_int_equal(send(fd, all, total, MSG_NOSIGNAL), (ssize_t)total);
    struct timeval tv = {20, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (int i = 0; i < N; i++) {
        uint8_t hdr[4];
        assert_int_equal(recv(fd, hdr, 4, MSG_WAITALL), 4);
        uint32_t n = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
        uint8_t *payload = malloc(n + 1);
        assert_int_equal(recv(fd, payload, n, MSG_WAITALL), (ssize_t)n);
        Omld__Response *r = omld__response__unpack(NULL, n, payload);
        assert_non_null(r);
        assert_int_equal(r->request_id, (uint64_t)(1000 + i));
        assert_int_equal(r->status->code, 0);
        omld__response__free_unpacked(r, NULL);
        free(payload);
    }
    close(fd);
    free(all);
    assert_true(status_value(&g_lim, "limits", "input_paused") > before);
}

static void test_refusals_counted(void **state)
{
    (void)state;
    uint64_t batch0 = status_value(&g_lim, "limits", "batch_too_large");
    uint64_t k0 = status_value(&g_lim, "limits", "k_too_large");
    uint64_t big0 = status_value(&g_lim, "limits", "frames_too_large");
    omlc *c = dial(&g_lim);
    omlc_error err;
    /* 51 items > max_batch 50. */
    static float x[51][DIM];
    static char ids[51][16];
    omlc_item items[51];
    for (int i = 0; i < 51; i++) {
        make_vec(x[i], i);
        snprintf(ids[i], sizeof ids[i], "b-%d", i);
        items[i] = (omlc_item){ids[i], x[i], DIM, "c"};
    }
    uint32_t created, replaced;
    assert_int_equal(omlc_put_items(c, items, 51, &created, &replaced, &err), 1);
    /* k 11 > max_k 10 (validation comes before any view is needed). */
    omlc_ref q = {NULL, x[0], DIM};
    omlc_classification cl;
    assert_int_equal(omlc_classify(c, &q, 11, NULL, &cl, &err), 1);
    assert_string_equal(err.field, "classify.k");
    omlc_hit hits[4];
    size_t nh;
    uint64_t mv;
    assert_int_equal(omlc_retrieve(c, &q, 11, NULL, hits, 4, &nh, &mv, &err), 1);
    omlc_close(c);
    /* A frame header over max_frame_bytes. */
    int fd = dial_raw(g_lim.rpc);
    uint8_t hdr[4];
    oml_frame_write_header(hdr, 16385);
    assert_int_equal(send(fd, hdr, 4, MSG_NOSIGNAL), 4);
    assert_true(closed_within(fd, 5000));
    close(fd);

    assert_int_equal(status_value(&g_lim, "limits", "batch_too_large"), batch0 + 1);
    assert_int_equal(status_value(&g_lim, "limits", "k_too_large"), k0 + 2);
    assert_int_equal(status_value(&g_lim, "limits", "frames_too_large"), big0 + 1);
    char *body = NULL;
    assert_int_equal(http_get(g_lim.http, "/metrics", NULL, &body), 200);
    assert_non_null(strstr(body, "omld_limit_events_total{limit=\"request_timeout_ms\"}"));
    assert_non_null(strstr(body, "omld_limit_events_total{limit=\"max_batch\"}"));
    assert_non_null(strstr(body, "omld_auth_total{result=\"unauthenticated\"} 0"));
    free(body);
}

/* Query batches: max_batch counts the queries, max_k bounds each query's
 * k, and a batch whose answers outgrow max_frame_bytes (16 KiB here) is
 * RESOURCE_EXHAUSTED, the daemon stopping as soon as they do. */
static void test_query_batch_limits(void **state)
{
    (void)state;
    omlc *c = dial(&g_lim);
    omlc_error err;
    enum { N = 12, LONG_ID = 200 };
    static float x[N][DIM];
    static char ids[N][LONG_ID + 8];
    omlc_item items[N];
    for (int i = 0; i < N; i++) {
        make_vec(x[i], 200 + i);
        memset(ids[i], 'q', LONG_ID);
        snprintf(ids[i] + LONG_ID, 8, "-%d", i);
        items[i] = (omlc_item){ids[i], x[i], DIM, "long-ids"};
    }
    assert_int_equal(omlc_put_items(c, items, N, NULL, NULL, &err), 0);
    omlc_ref q[51];
    for (int i = 0; i < 51; i++)
        q[i] = (omlc_ref){NULL, x[i % N], DIM};
    static omlc_classification cl[51];
    assert_int_equal(omlc_classify_batch(c, q, 51, 5, NULL, cl, &err), 1);
    assert_string_equal(err.field, "classify_batch.queries");
    assert_int_equal(omlc_classify_batch(c, q, 50, 11, NULL, cl, &err), 1);
    assert_string_equal(err.field, "classify_batch.queries[0].k");
    /* Once a view serves the items: 2 x 10 hits fit, 50 x 10 with long ids
     * do not. */
    static omlc_hit hits[50 * 10];
    size_t n_hits[50];
    int rc = 8; /* UNAVAILABLE until a view is published */
    for (int i = 0; i < 400 && rc != 0; i++) {
        rc = omlc_retrieve_batch(c, q, 2, 10, NULL, NULL, hits, 10, n_hits, NULL, &err);
        if (rc == 0 && strcmp(hits[0].id, ids[0]) != 0)
            rc = -1; /* a view from before the items (x[0] is item 0's own vector) */
        if (rc != 0)
            usleep(20000);
    }
    assert_int_equal(rc, 0);
    const char *mine[1] = {"long-ids"};
    omlc_retrieve_filter f[50];
    for (int i = 0; i < 50; i++) /* only these items: every hit has a long id */
        f[i] = (omlc_retrieve_filter){mine, 1, NULL, 0, 0, 0, 0.0f, NULL, 0};
    assert_int_equal(omlc_retrieve_batch(c, q, 50, 10, NULL, f, hits, 10, n_hits, NULL, &err),
                     5 /* RESOURCE_EXHAUSTED */);
    assert_string_equal(err.field, "retrieve_batch.queries");
    assert_non_null(strstr(err.message, "max_frame_bytes"));
    omlc_close(c);
}

static void test_max_connections(void **state)
{
    (void)state;
    static const char *const args[] = {"--dim=16", "--layers=1", "--hidden=8", "--emb=4",
                                       "--max_connections=2", NULL};
    omld_proc p;
    assert_int_equal(omld_proc_start(&p, args, TIMEOUT_MS), 0);
    omlc *a = dial(&p), *b = dial(&p);
    omlc_error err;
    int live, ready, draining;
    assert_int_equal(omlc_health(a, &live, &ready, &draining, &err), 0);
    assert_int_equal(omlc_health(b, &live, &ready, &draining, &err), 0);
    int fd = dial_raw(p.rpc);
    assert_true(closed_within(fd, 5000)); /* accepted and closed at once */
    close(fd);
    assert_int_equal(omlc_health(a, &live, &ready, &draining, &err), 0);
    assert_int_equal(status_value(&p, "limits", "connections_refused"), 1);
    omlc_close(a);
    omlc_close(b);
    assert_int_equal(omld_proc_stop(&p, SIGTERM, TIMEOUT_MS), 0);
    assert_true(log_contains(&p, "connection refused: max_connections (2)"));
    omld_proc_cleanup(&p);
}

/* ------------------------------------------------------------ authorisation */

static uint64_t items_now(omlc *rw)
{
    Omld__Response *r = NULL;
    omlc_error err;
    assert_int_equal(omlc_status(rw, &r, &err), 0);
    uint64_t n = r->status_info->items;
    omld__response__free_unpacked(r, NULL);
    return n;
}

static void test_unauthenticated_changes_nothing(void **state)
{
    (void)state;
    omlc *c = dial(&g_auth);
    omlc_error err;
    float x[DIM];
    make_vec(x, 1);
    omlc_item it = {"u-1", x, DIM, "a"};
    uint32_t created = 0, replaced = 0;
    assert_int_equal(omlc_put_items(c, &it, 1, &created, &replaced, &err), 10);
    Omld__Response *r = NULL;
    assert_int_equal(omlc_status(c, &r, &err), 10); /* reads too */
    int live, ready, draining;
    assert_int_equal(omlc_health(c, &live, &ready, &draining, &err), 10);
    omlc_triplet t = {{"u-1", NULL, 0}, {"u-1", NULL, 0}, {"u-1", NULL, 0}, 0.0f};
    uint32_t acc;
    uint64_t depth;
    assert_int_equal(omlc_add_triplets(c, &t, 1, &acc, &depth, &err), 10);
    /* The same connection, once authenticated, sees nothing changed. */
    int rw = -1;
    assert_int_equal(omlc_auth(c, RW_TOKEN, &rw, &err), 0);
    assert_int_equal(rw, 1);
    assert_int_equal(items_now(c), 0);
    assert_int_equal(omlc_get_items(c, (const char *const[]){"u-1"}, 1, &r, &err), 2);
    omlc_close(c);
    assert_true(status_value(&g_auth, "auth", "unauthenticated") >= 4);
}

static void test_wrong_token_refused(void **state)
{
    (void)state;
    uint64_t failed0 = status_value(&g_auth, "auth", "failed");
    omlc *c = dial(&g_auth);
    omlc_error err;
    int rw = -1;
    assert_int_equal(omlc_auth(c, "rw-secret-0123456789abcdeX", &rw, &err), 10);
    assert_string_equal(err.field, "auth.token");
    assert_int_equal(rw, -1);
    Omld__Response *r = NULL;
    assert_int_equal(omlc_status(c, &r, &err), 10);
    assert_int_equal(omlc_auth(c, "", &rw, &err), 10);
    /* A prefix of a real token, and a real one with a suffix. */
    assert_int_equal(omlc_auth(c, RW_TOKEN "x", &rw, &err), 10);
    /* Three wrong tokens: the daemon closes the connection. */
    int live, ready, draining;
    assert_true(omlc_health(c, &live, &ready, &draining, &err) < 0);
    omlc_close(c);

    c = dial(&g_auth);
    assert_int_equal(omlc_auth(c, "rw-secret", &rw, &err), 10);
    assert_int_equal(omlc_auth(c, RO_TOKEN, &rw, &err), 0); /* a later good token works */
    assert_int_equal(rw, 0);
    omlc_close(c);
    assert_int_equal(status_value(&g_auth, "auth", "failed"), failed0 + 4);
    /* The secrets are never logged. */
    assert_false(log_contains(&g_auth, RW_TOKEN));
    assert_false(log_contains(&g_auth, RO_TOKEN));
    assert_true(log_contains(&g_auth, "authentication failed"));
}

static void test_read_only_and_read_write(void **state)
{
    (void)state;
    omlc_error err;
    omlc *w = dial(&g_auth);
    int rw = -1;
    assert_int_equal(omlc_auth(w, RW_TOKEN, &rw, &err), 0);
    assert_int_equal(rw, 1);
    static float x[8][DIM];
    static char ids[8][16];
    omlc_item items[8];
    for (int i = 0; i < 8; i++) {
        make_vec(x[i], i);
        snprintf(ids[i], sizeof ids[i], "rw-%d", i);
        items[i] = (omlc_item){ids[i], x[i], DIM, i % 2 ? "odd" : "even"};
    }
    uint32_t created = 0, replaced = 0;
    assert_int_equal(omlc_put_items(w, items, 8, &created, &replaced, &err), 0);
    assert_int_equal(created, 8);

    omlc *ro = dial(&g_auth);
    assert_int_equal(omlc_auth(ro, RO_TOKEN, &rw, &err), 0);
    assert_int_equal(rw, 0);
    /* Reads, query batches among them. */
    assert_int_equal(items_now(ro), 8);
    omlc_ref bq[2] = {{"rw-1", NULL, 0}, {NULL, x[2], DIM}};
    omlc_classification bcl[2];
    int brc = 8; /* UNAVAILABLE until a view is published */
    for (int i = 0; i < 400 && brc == 8; i++)
        if ((brc = omlc_classify_batch(ro, bq, 2, 3, NULL, bcl, &err)) == 8)
            usleep(20000);
    assert_int_equal(brc, 0);
    Omld__Response *r = NULL;
    assert_int_equal(omlc_get_items(ro, (const char *const[]){"rw-3"}, 1, &r, &err), 0);
    assert_string_equal(r->get_items->items[0]->id, "rw-3");
    omld__response__free_unpacked(r, NULL);
    int live, ready, draining;
    assert_int_equal(omlc_health(ro, &live, &ready, &draining, &err), 0);
    /* Writes: PERMISSION_DENIED, nothing changed. */
    make_vec(x[0], 99);
    omlc_item nitem = {"ro-new", x[0], DIM, "even"};
    assert_int_equal(omlc_put_items(ro, &nitem, 1, &created, &replaced, &err), 11);
    assert_string_equal(err.field, "put_items");
    uint32_t deleted;
    assert_int_equal(omlc_delete_items(ro, (const char *const[]){"rw-1"}, 1, 0, &deleted, &err),
                     11);
    omlc_triplet t = {{"rw-0", NULL, 0}, {"rw-2", NULL, 0}, {"rw-1", NULL, 0}, 0.0f};
    uint32_t acc;
    uint64_t depth;
    assert_int_equal(omlc_add_triplets(ro, &t, 1, &acc, &depth, &err), 11);
    omlc_pair pr = {{"rw-0", NULL, 0}, {"rw-2", NULL, 0}, 1};
    uint64_t derived;
    assert_int_equal(omlc_add_pairs(ro, &pr, 1, &acc, &derived, &err), 11);
    assert_int_equal(omlc_checkpoint(ro, &r, &err), 11);
    assert_int_equal(items_now(ro), 8);
    Omld__Response *st = NULL;
    assert_int_equal(omlc_status(w, &st, &err), 0);
    assert_int_equal(st->status_info->triplets_received, 0);
    omld__response__free_unpacked(st, NULL);
    /* The read-write connection writes. */
    assert_int_equal(omlc_add_triplets(w, &t, 1, &acc, &depth, &err), 0);
    assert_int_equal(acc, 1);
    assert_int_equal(omlc_delete_items(w, (const char *const[]){"rw-7"}, 1, 0, &deleted, &err), 0);
    assert_int_equal(items_now(ro), 7);
    omlc_close(ro);
    omlc_close(w);
    assert_true(status_value(&g_auth, "auth", "permission_denied") >= 5);
}

static void test_http_bearer(void **state)
{
    (void)state;
    uint64_t u0 = status_value(&g_auth, "auth", "http_unauthorized");
    char *body = NULL;
    assert_int_equal(http_get(g_auth.http, "/status", NULL, &body), 401);
    free(body);
    assert_int_equal(http_get(g_auth.http, "/metrics", NULL, NULL), 401);
    assert_int_equal(http_get(g_auth.http, "/status", "Bearer wrong-token", NULL), 401);
    assert_int_equal(http_get(g_auth.http, "/status", "Basic " RO_TOKEN, NULL), 401);
    /* The dashboard's page is open (it asks for the token on /status's 401). */
    assert_int_equal(http_get(g_auth.http, "/", NULL, NULL), 200);
    assert_int_equal(http_get(g_auth.http, "/status", "Bearer " RO_TOKEN, &body), 200);
    assert_non_null(strstr(body, "\"auth\":{\"required\":true,\"tokens_rw\":1,\"tokens_ro\":1"));
    assert_null(strstr(body, RO_TOKEN));
    assert_null(strstr(body, RW_TOKEN));
    free(body);
    assert_int_equal(http_get(g_auth.http, "/metrics", "bearer   " RW_TOKEN, &body), 200);
    assert_non_null(strstr(body, "omld_auth_tokens 2"));
    free(body);
    /* Probes stay open. */
    assert_int_equal(http_get(g_auth.http, "/livez", NULL, NULL), 200);
    int ready = http_get(g_auth.http, "/readyz", NULL, NULL);
    assert_true(ready == 200 || ready == 503);
    assert_int_equal(status_value(&g_auth, "auth", "http_unauthorized"), u0 + 4);
}

/* No tokens: Auth is accepted (read_write), and binding beyond loopback
 * without tokens logs a loud warning. */
static void test_no_tokens_warning(void **state)
{
    (void)state;
    static const char *const args[] = {"--dim=16", "--layers=1", "--hidden=8", "--emb=4",
                                       "--listen=0.0.0.0:0", NULL};
    omld_proc p;
    assert_int_equal(omld_proc_start(&p, args, TIMEOUT_MS), 0);
    assert_true(log_contains(&p, "WARNING: the RPC listener"));
    assert_true(log_contains(&p, "no token is configured"));
    /* The address file says 0.0.0.0:PORT: dial loopback on that port. */
    char addr[160];
    snprintf(addr, sizeof addr, "127.0.0.1:%s", strrchr(p.rpc, ':') + 1);
    omlc *c = NULL;
    omlc_error err;
    assert_int_equal(omlc_connect(&c, addr, TIMEOUT_MS, &err), 0);
    int rw = -1;
    assert_int_equal(omlc_auth(c, "anything", &rw, &err), 0);
    assert_int_equal(rw, 1);
    omlc_close(c);
    assert_int_equal(omld_proc_stop(&p, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&p);

    /* With tokens: no warning. */
    static const char *const args2[] = {"--dim=16", "--layers=1", "--hidden=8", "--emb=4",
                                        "--listen=0.0.0.0:0", "--tokens=ro:" RO_TOKEN, NULL};
    assert_int_equal(omld_proc_start(&p, args2, TIMEOUT_MS), 0);
    assert_false(log_contains(&p, "WARNING: the RPC listener"));
    assert_true(log_contains(&p, "authorisation on"));
    assert_false(log_contains(&p, RO_TOKEN));
    assert_int_equal(omld_proc_stop(&p, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&p);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest limits[] = {
        cmocka_unit_test(test_slowloris_dropped),
        cmocka_unit_test(test_slow_but_steady_frame_served),
        cmocka_unit_test(test_idle_connection_closed),
        cmocka_unit_test(test_input_bound_pauses),
        cmocka_unit_test(test_refusals_counted),
        cmocka_unit_test(test_query_batch_limits),
    };
    const struct CMUnitTest auth[] = {
        cmocka_unit_test(test_unauthenticated_changes_nothing),
        cmocka_unit_test(test_wrong_token_refused),
        cmocka_unit_test(test_read_only_and_read_write),
        cmocka_unit_test(test_http_bearer),
    };
    const struct CMUnitTest alone[] = {
        cmocka_unit_test(test_max_connections),
        cmocka_unit_test(test_no_tokens_warning),
    };
    int failed = cmocka_run_group_tests_name("limits", limits, setup_lim, teardown_lim);
    failed += cmocka_run_group_tests_name("auth", auth, setup_auth, teardown_auth);
    failed += cmocka_run_group_tests_name("alone", alone, NULL, NULL);
    return failed ? 1 : 0;
}
