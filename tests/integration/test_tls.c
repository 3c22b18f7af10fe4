/* test_tls.c - TLS on both ports through the real omld, with a certificate
 * made at test time (openssl req; nothing is committed): RPC over TLS with
 * libomlclient (large batches, a large answer, a pipeline), HTTPS with curl
 * (keep-alive, a large page, the /v1 API) and pipelined, a plain client
 * refused with a clear answer on both ports, nonsense handshakes survived, a wrong CA and a wrong name refused by the
 * client, a TLS client against a plain daemon, the handshake counters, and
 * a missing, malformed or mismatched certificate or key failing the start
 * with the file's name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <cmocka.h>
#include <jansson.h>

#include "harness.h"
#include "omlclient.h"

#define TIMEOUT_MS 20000
#define DIM 256
#define N_ITEMS 300

static char g_dir[256];                     /* the certificates */
static char g_cert[300], g_key[300];        /* CN=localhost, 127.0.0.1: the daemon's */
static char g_other_cert[300], g_other_key[300]; /* another self-signed pair */
static char g_cert_arg[320], g_key_arg[320];
static omld_proc g_p;

/* cmd's exit status and output (harness.h). */
static int run(const char *cmd, char *out, size_t cap)
{
    return omld_run_capture(cmd, out, cap);
}

static int make_pair(const char *cert, const char *key, const char *cn)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout %s -out %s -days 2 -subj /CN=%s "
             "-addext subjectAltName=DNS:%s,IP:127.0.0.1",
             key, cert, cn, cn);
    return run(cmd, NULL, 0);
}

static const char *port_of(const char *host_port)
{
    return strrchr(host_port, ':') + 1;
}

static int setup(void **state)
{
    (void)state;
    if (omld_cert_dir(g_dir, sizeof g_dir, "omld-tls") != 0)
        return -1;
    snprintf(g_cert, sizeof g_cert, "%s/cert.pem", g_dir);
    snprintf(g_key, sizeof g_key, "%s/key.pem", g_dir);
    snprintf(g_other_cert, sizeof g_other_cert, "%s/other.pem", g_dir);
    snprintf(g_other_key, sizeof g_other_key, "%s/other-key.pem", g_dir);
    if (make_pair(g_cert, g_key, "localhost") != 0 ||
        make_pair(g_other_cert, g_other_key, "other.example") != 0)
        return -1;
    snprintf(g_cert_arg, sizeof g_cert_arg, "--tls_cert=%s", g_cert);
    snprintf(g_key_arg, sizeof g_key_arg, "--tls_key=%s", g_key);
    const char *args[] = {"--dim=256", "--layers=1", "--hidden=16", "--emb=8",
                          "--publish_ms=50", "--max_frame_bytes=8388608",
                          "--max_conn_input_bytes=16777216", "--request_timeout_ms=1000",
                          g_cert_arg, g_key_arg, NULL};
    return omld_proc_start(&g_p, args, TIMEOUT_MS);
}

static int teardown(void **state)
{
    (void)state;
    /* A clean exit: every TLS session freed (a sanitizer build checks). */
    int rc = omld_proc_finish(&g_p, TIMEOUT_MS);
    return omld_rm_rf(g_dir) == 0 && rc == 0 ? 0 : -1;
}

static omlc *dial_tls(const char *server, const char *cafile, const char *name)
{
    omlc *c = NULL;
    omlc_error err;
    omlc_tls tls = {.cafile = cafile, .server_name = name};
    int rc = omlc_connect_tls(&c, server, &tls, TIMEOUT_MS, &err);
    if (rc != 0)
        fail_msg("connect %s: %s", server, err.message);
    return c;
}

/* The items, their ids and features (static: a test's whole data). */
static float g_feat[N_ITEMS][DIM];
static char g_ids[N_ITEMS][16];
static omlc_item g_items[N_ITEMS];

/* Everything over TLS: batches of ~100 KB, 300 items read back in one
 * ~300 KB answer, 200 classifications 32 at a time. */
static void test_rpc_over_tls(void **state)
{
    (void)state;
    omlc *c = dial_tls(g_p.rpc, g_cert, NULL);
    omlc_error err;
    for (int i = 0; i < N_ITEMS; i++) {
        for (int d = 0; d < DIM; d++)
            g_feat[i][d] = (float)((i * 31 + d * 7) % 97) / 97.0f + (float)(i % 3);
        snprintf(g_ids[i], sizeof g_ids[i], "t%d", i);
        g_items[i] = (omlc_item){.id = g_ids[i], .features = g_feat[i], .dim = DIM,
                                 .label = i % 3 == 0 ? "a" : i % 3 == 1 ? "b" : "c"};
    }
    assert_int_equal(omlc_put_items_pipelined(c, g_items, N_ITEMS, 100, 3, NULL, NULL, &err), 0);
    const char *ids[N_ITEMS];
    for (int i = 0; i < N_ITEMS; i++)
        ids[i] = g_ids[i];
    Omld__Response *r = NULL;
    assert_int_equal(omlc_get_items(c, ids, N_ITEMS, &r, &err), 0);
    assert_int_equal(r->get_items->n_items, N_ITEMS);
    assert_int_equal(r->get_items->items[N_ITEMS - 1]->n_features, DIM);
    assert_true(r->get_items->items[N_ITEMS - 1]->features[5] == g_feat[N_ITEMS - 1][5]);
    omld__response__free_unpacked(r, NULL);

    omlc_ref q[200];
    static omlc_classification out[200];
    for (int i = 0; i < 200; i++)
        q[i] = (omlc_ref){.vector = g_feat[i], .dim = DIM};
    /* Once a view with the labelled items is served. */
    for (int tries = 0; tries < 200 && out[0].label[0] == '\0'; tries++) {
        assert_int_equal(omlc_classify(c, &q[0], 3, NULL, &out[0], &err), 0);
        usleep(20000);
    }
    assert_int_equal(omlc_classify_pipelined(c, q, 200, 3, NULL, 32, out, NULL, NULL, &err), 0);
    assert_true(out[199].label[0] != '\0');
    omlc_close(c);
}

/* The name is checked: "localhost" is in the certificate, another is not. */
static void test_name_checked(void **state)
{
    (void)state;
    char server[160];
    snprintf(server, sizeof server, "localhost:%s", port_of(g_p.rpc));
    omlc *c = dial_tls(server, g_cert, NULL);
    int live = 0, ready = 0, draining = 0;
    omlc_error err;
    assert_int_equal(omlc_health(c, &live, &ready, &draining, &err), 0);
    assert_true(live);
    omlc_close(c);

    omlc_tls tls = {.cafile = g_cert, .server_name = "other.example"};
    assert_int_equal(omlc_connect_tls(&c, g_p.rpc, &tls, TIMEOUT_MS, &err), OMLC_ECONNECT);
    assert_non_null(strstr(err.message, "not trusted"));
}

/* A certificate the client's CA did not sign is refused by the client, and
 * the daemon logs and counts the failed handshake. */
static void test_wrong_ca(void **state)
{
    (void)state;
    omlc *c = NULL;
    omlc_error err;
    omlc_tls tls = {.cafile = g_other_cert};
    assert_int_equal(omlc_connect_tls(&c, g_p.rpc, &tls, TIMEOUT_MS, &err), OMLC_ECONNECT);
    assert_null(c);
    assert_non_null(strstr(err.message, "not trusted"));
    assert_non_null(strstr(err.message, "self-signed"));

    char cmd[600], out[2048];
    snprintf(cmd, sizeof cmd, "curl -sS --max-time 10 --cacert %s https://127.0.0.1:%s/livez",
             g_other_cert, port_of(g_p.http));
    assert_int_equal(run(cmd, out, sizeof out), 60); /* curl: peer certificate cannot be verified */
}

/* A plain client is told, on either port, in its own protocol, and closed. */
static void test_plain_client_refused(void **state)
{
    (void)state;
    omlc *c = NULL;
    omlc_error err;
    assert_int_equal(omlc_connect(&c, g_p.rpc, TIMEOUT_MS, &err), 0);
    Omld__Response *r = NULL;
    assert_int_equal(omlc_status(c, &r, &err), 8 /* UNAVAILABLE */);
    assert_non_null(strstr(err.message, "speaks TLS"));
    if (r)
        omld__response__free_unpacked(r, NULL);
    omlc_close(c);

    char *body = NULL;
    assert_int_equal(omld_http_get(g_p.http, "/status", &body, NULL), 400);
    assert_non_null(body);
    assert_non_null(strstr(body, "https://"));
    free(body);
}

/* HTTPS with curl: keep-alive (three requests on one connection), a page
 * of tens of kilobytes, and a /v1 call. */
static void test_https(void **state)
{
    (void)state;
    char cmd[1200];
    static char out[65536];
    const char *port = port_of(g_p.http);
    snprintf(cmd, sizeof cmd,
             "curl -sS --max-time 20 --cacert %s -o /dev/null -o /dev/null -o /dev/null "
             "-w '%%{http_code} %%{size_download} %%{num_connects}\\n' "
             "https://localhost:%s/livez https://localhost:%s/ https://localhost:%s/metrics",
             g_cert, port, port, port);
    if (run(cmd, out, sizeof out) != 0)
        fail_msg("%s: %s", cmd, out);
    int code[3], conns[3];
    long size[3];
    assert_int_equal(sscanf(out, "%d %ld %d %d %ld %d %d %ld %d", &code[0], &size[0], &conns[0],
                            &code[1], &size[1], &conns[1], &code[2], &size[2], &conns[2]),
                     9);
    for (int i = 0; i < 3; i++)
        assert_int_equal(code[i], 200);
    assert_true(size[1] > 20000);                  /* the dashboard */
    assert_int_equal(conns[1] + conns[2], 0);      /* the same connection */

    snprintf(cmd, sizeof cmd,
             "curl -sS --max-time 20 --cacert %s -H 'Content-Type: application/json' "
             "-d '{\"ids\":[\"t1\",\"t2\"]}' https://127.0.0.1:%s/v1/get_items",
             g_cert, port);
    assert_int_equal(run(cmd, out, sizeof out), 0);
    json_error_t e;
    json_t *j = json_loads(out, 0, &e);
    if (j == NULL)
        fail_msg("not JSON: %s", out);
    json_t *items = json_object_get(json_object_get(j, "result"), "items");
    assert_int_equal(json_array_size(items), 2);
    json_decref(j);
}

/* /status counts what the tests before did: handshakes, failures (the
 * wrong CA, the wrong name), plain clients. */
static void test_counters(void **state)
{
    (void)state;
    char cmd[600], out[65536];
    snprintf(cmd, sizeof cmd, "curl -sS --max-time 10 --cacert %s https://127.0.0.1:%s/status",
             g_cert, port_of(g_p.http));
    assert_int_equal(run(cmd, out, sizeof out), 0);
    json_error_t e;
    json_t *j = json_loads(out, 0, &e);
    assert_non_null(j);
    json_t *tls = json_object_get(j, "tls");
    assert_true(json_is_true(json_object_get(tls, "enabled")));
    assert_true(json_integer_value(json_object_get(tls, "handshakes")) >= 5);
    assert_true(json_integer_value(json_object_get(tls, "failed")) >= 3);
    assert_true(json_integer_value(json_object_get(tls, "plaintext")) >= 2);
    json_decref(j);
}

/* A TLS client against a plain daemon fails at once, and says so. */
static void test_tls_client_plain_daemon(void **state)
{
    (void)state;
    omld_proc p;
    const char *args[] = {"--dim=4", NULL};
    assert_int_equal(omld_proc_start(&p, args, TIMEOUT_MS), 0);
    omlc *c = NULL;
    omlc_error err;
    omlc_tls tls = {.cafile = g_cert};
    assert_int_equal(omlc_connect_tls(&c, p.rpc, &tls, TIMEOUT_MS, &err), OMLC_ECONNECT);
    assert_non_null(strstr(err.message, "TLS handshake"));
    omld_proc_stop(&p, 15, TIMEOUT_MS);
    omld_proc_cleanup(&p);
}

/* A blocking TCP connection to host_port (127.0.0.1:PORT), or -1. */
static int dial(const char *host_port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port_of(host_port)))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Three pipelined HTTPS requests in one write (two GETs, a /v1 POST
 * between them, which is answered later): three answers, in order. */
static void test_https_pipelined(void **state)
{
    (void)state;
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    assert_int_equal(SSL_CTX_load_verify_locations(ctx, g_cert, NULL), 1);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    int fd = dial(g_p.http);
    assert_true(fd >= 0);
    SSL *ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    assert_int_equal(SSL_connect(ssl), 1);
    const char *body = "{\"ids\":[\"t7\"]}";
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"
                     "POST /v1/get_items HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s"
                     "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                     strlen(body), body);
    assert_int_equal(SSL_write(ssl, req, n), n);
    static char got[1 << 16];
    size_t len = 0;
    for (int r; (r = SSL_read(ssl, got + len, (int)(sizeof got - 1 - len))) > 0;)
        len += (size_t)r;
    got[len] = '\0';
    const char *a = strstr(got, "HTTP/1.1 200"), *b = a ? strstr(a + 1, "HTTP/1.1 200") : NULL;
    const char *c = b ? strstr(b + 1, "HTTP/1.1 200") : NULL;
    if (c == NULL)
        fail_msg("three answers expected: %s", got);
    assert_true(strstr(got, "\"t7\"") > b && strstr(got, "\"t7\"") < c); /* in order */
    SSL_free(ssl);
    close(fd);
    SSL_CTX_free(ctx);
}

/* Nonsense at the handshake never hurts the daemon: a record header and
 * garbage, half a record then a close, a connect and a close, a TLS 1.0
 * only client; each on both ports. Then it still serves. */
static void test_bad_handshakes(void **state)
{
    (void)state;
    const char *ports[2] = {g_p.rpc, g_p.http};
    for (int i = 0; i < 2; i++) {
        unsigned char junk[600];
        for (size_t k = 0; k < sizeof junk; k++)
            junk[k] = (unsigned char)(k * 131 + 7);
        junk[0] = 0x16; /* a handshake record's type, then nonsense */
        int fd = dial(ports[i]);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
        char buf[256];
        while (read(fd, buf, sizeof buf) > 0) { /* an alert, then the end: never a hang */
        }
        close(fd);
        fd = dial(ports[i]);
        assert_int_equal(write(fd, junk, 3), 3); /* half a record header */
        close(fd);
        fd = dial(ports[i]);
        close(fd);

        SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
        SSL_CTX_set_security_level(ctx, 0);
        SSL_CTX_set_max_proto_version(ctx, TLS1_1_VERSION); /* below the daemon's TLS 1.2 */
        fd = dial(ports[i]);
        SSL *ssl = SSL_new(ctx);
        SSL_set_fd(ssl, fd);
        assert_true(SSL_connect(ssl) != 1);
        SSL_free(ssl);
        close(fd);
        SSL_CTX_free(ctx);
    }
    omlc *c = dial_tls(g_p.rpc, g_cert, NULL);
    int live = 0, ready = 0, draining = 0;
    omlc_error err;
    assert_int_equal(omlc_health(c, &live, &ready, &draining, &err), 0);
    assert_true(live);
    omlc_close(c);
}

/* A handshake that stops half-way is dropped after request_timeout_ms
 * (1 s here) on the RPC port, as a slow client. */
static void test_stalled_handshake(void **state)
{
    (void)state;
    int fd = dial(g_p.rpc);
    assert_true(fd >= 0);
    const unsigned char part[3] = {0x16, 0x03, 0x01}; /* a record header's start */
    assert_int_equal(write(fd, part, sizeof part), 3);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[64];
    double t0 = (double)time(NULL);
    assert_int_equal(read(fd, buf, sizeof buf), 0); /* closed by the daemon, not the timeout */
    assert_true((double)time(NULL) - t0 < 8);
    close(fd);
}

/* A frame header over max_frame_bytes is answered FRAME_TOO_LARGE and the
 * connection closed, over TLS as in plain; writing on is an error for the
 * client (EPIPE), never a SIGPIPE that kills it. */
static void test_closed_under_a_writer(void **state)
{
    (void)state;
    omlc *c = dial_tls(g_p.rpc, g_cert, NULL);
    omlc_error err;
    const unsigned char header[4] = {0x10, 0, 0, 0}; /* 256 MiB announced */
    assert_int_equal(omlc_send_raw(c, header, sizeof header, &err), 0);
    static unsigned char junk[1 << 20];
    int rc = 0;
    for (int i = 0; i < 64 && rc == 0; i++) {
        rc = omlc_send_raw(c, junk, sizeof junk, &err);
        usleep(10000);
    }
    assert_int_equal(rc, OMLC_EIO);
    omlc_close(c);
}

/* omld with these TLS options: its exit status and log in out. */
static int start_with(const char *cert, const char *key, char *out, size_t cap)
{
    char dir[300], cmd[1400];
    snprintf(dir, sizeof dir, "%s/data", g_dir);
    snprintf(cmd, sizeof cmd,
             "%s --data_dir=%s --listen=127.0.0.1:0 --http=127.0.0.1:0 --dim=4 "
             "--tls_cert=%s --tls_key=%s",
             OMLD_BIN, dir, cert, key);
    return run(cmd, out, cap);
}

/* A missing, malformed or mismatched file fails the start with its name;
 * a certificate without its key is refused as an option. */
static void test_bad_files(void **state)
{
    (void)state;
    char out[8192], junk[300], missing[300];
    snprintf(junk, sizeof junk, "%s/junk.pem", g_dir);
    snprintf(missing, sizeof missing, "%s/missing.pem", g_dir);
    FILE *f = fopen(junk, "w");
    assert_non_null(f);
    fputs("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n", f);
    fclose(f);

    assert_int_equal(start_with(missing, g_key, out, sizeof out), 1);
    assert_non_null(strstr(out, "tls_cert"));
    assert_non_null(strstr(out, missing));
    assert_int_equal(start_with(g_cert, missing, out, sizeof out), 1);
    assert_non_null(strstr(out, missing));
    assert_int_equal(start_with(junk, g_key, out, sizeof out), 1);
    assert_non_null(strstr(out, junk));
    assert_int_equal(start_with(g_cert, junk, out, sizeof out), 1);
    assert_non_null(strstr(out, "tls_key"));
    assert_int_equal(start_with(g_cert, g_other_key, out, sizeof out), 1);
    assert_non_null(strstr(out, "is not the key of the certificate"));
    char locked[300], cmd[800];
    snprintf(locked, sizeof locked, "%s/locked-key.pem", g_dir);
    snprintf(cmd, sizeof cmd, "openssl pkey -in %s -out %s -aes256 -passout pass:secret", g_key,
             locked);
    assert_int_equal(run(cmd, NULL, 0), 0);
    assert_int_equal(start_with(g_cert, locked, out, sizeof out), 1); /* never a prompt */
    assert_non_null(strstr(out, "is encrypted"));
    assert_int_equal(start_with(g_cert, "", out, sizeof out), 2);
    assert_non_null(strstr(out, "tls_key"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rpc_over_tls),
        cmocka_unit_test(test_name_checked),
        cmocka_unit_test(test_wrong_ca),
        cmocka_unit_test(test_plain_client_refused),
        cmocka_unit_test(test_https),
        cmocka_unit_test(test_https_pipelined),
        cmocka_unit_test(test_bad_handshakes),
        cmocka_unit_test(test_closed_under_a_writer),
        cmocka_unit_test(test_stalled_handshake),
        cmocka_unit_test(test_counters),
        cmocka_unit_test(test_tls_client_plain_daemon),
        cmocka_unit_test(test_bad_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
