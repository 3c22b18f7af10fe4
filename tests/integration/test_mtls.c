/* test_mtls.c - client certificates (tls_client_ca) through the real omld,
 * with a CA and certificates made at test time (openssl; nothing is
 * committed): a client certificate the CA signed works on both ports
 * (libomlclient, omlctl, curl); no certificate, or one of another CA, is
 * refused on both, with an error that says so on the client and a log line
 * and a count on the daemon; a client key that is not its certificate's is
 * refused by the client before the handshake; a tls_client_ca that is missing,
 * not PEM, or set without tls_cert fails the start naming it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "harness.h"
#include "omlclient.h"

#define TIMEOUT_MS 20000

static char g_dir[256];
static char g_server_cert[300], g_server_key[300]; /* the daemon's, self-signed */
static char g_ca[300], g_ca_key[300];              /* the clients' CA (tls_client_ca) */
static char g_client[300], g_client_key[300];      /* signed by g_ca */
static char g_other_ca[300], g_other_ca_key[300];  /* another CA ... */
static char g_stranger[300], g_stranger_key[300];  /* ... and a client it signed */
static omld_proc g_p;

/* cmd's exit status and output (harness.h). */
static int run(const char *cmd, char *out, size_t cap)
{
    return omld_run_capture(cmd, out, cap);
}

static void path(char *out, const char *name)
{
    snprintf(out, 300, "%s/%s", g_dir, name);
}

#define NEW_KEY "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"

/* A self-signed CA certificate (openssl req -x509 marks it CA:TRUE). */
static int make_ca(const char *cert, const char *key, const char *cn)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "openssl req -x509 " NEW_KEY " -keyout %s -out %s -days 2 -subj /CN=%s",
             key, cert, cn);
    return run(cmd, NULL, 0);
}

/* A client certificate for cn signed by ca. */
static int make_client(const char *cert, const char *key, const char *cn, const char *ca,
                       const char *ca_key)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "openssl req " NEW_KEY " -keyout %s -out %s.csr -subj /CN=%s && "
             "printf 'extendedKeyUsage=clientAuth\\n' > %s.ext && "
             "openssl x509 -req -in %s.csr -CA %s -CAkey %s -CAcreateserial -out %s -days 2 "
             "-extfile %s.ext",
             key, cert, cn, cert, cert, ca, ca_key, cert, cert);
    return run(cmd, NULL, 0);
}

static int setup(void **state)
{
    (void)state;
    if (omld_cert_dir(g_dir, sizeof g_dir, "omld-mtls") != 0)
        return -1;
    path(g_server_cert, "server.pem");
    path(g_server_key, "server-key.pem");
    path(g_ca, "ca.pem");
    path(g_ca_key, "ca-key.pem");
    path(g_client, "client.pem");
    path(g_client_key, "client-key.pem");
    path(g_other_ca, "other-ca.pem");
    path(g_other_ca_key, "other-ca-key.pem");
    path(g_stranger, "stranger.pem");
    path(g_stranger_key, "stranger-key.pem");
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 " NEW_KEY " -keyout %s -out %s -days 2 -subj /CN=localhost "
             "-addext subjectAltName=DNS:localhost,IP:127.0.0.1",
             g_server_key, g_server_cert);
    if (run(cmd, NULL, 0) != 0 || make_ca(g_ca, g_ca_key, "omld-clients") != 0 ||
        make_client(g_client, g_client_key, "web-1", g_ca, g_ca_key) != 0 ||
        make_ca(g_other_ca, g_other_ca_key, "omld-clients") != 0 || /* the same name, too */
        make_client(g_stranger, g_stranger_key, "web-1", g_other_ca, g_other_ca_key) != 0)
        return -1;
    static char a_cert[320], a_key[320], a_ca[320];
    snprintf(a_cert, sizeof a_cert, "--tls_cert=%s", g_server_cert);
    snprintf(a_key, sizeof a_key, "--tls_key=%s", g_server_key);
    snprintf(a_ca, sizeof a_ca, "--tls_client_ca=%s", g_ca);
    const char *args[] = {"--dim=4", "--layers=1", "--hidden=8", "--emb=4", "--publish_ms=50",
                          a_cert, a_key, a_ca, NULL};
    return omld_proc_start(&g_p, args, TIMEOUT_MS);
}

static int teardown(void **state)
{
    (void)state;
    int rc = omld_proc_finish(&g_p, TIMEOUT_MS);
    return omld_rm_rf(g_dir) == 0 && rc == 0 ? 0 : -1;
}

/* Dials with cert/key (NULL: none) and makes one call: 0 when it works,
 * else the failing step's code with its message in err. */
static int dial_and_call(const char *cert, const char *key, omlc_error *err)
{
    omlc *c = NULL;
    omlc_tls tls = {.cafile = g_server_cert, .certfile = cert, .keyfile = key};
    int rc = omlc_connect_tls(&c, g_p.rpc, &tls, TIMEOUT_MS, err);
    if (rc != 0)
        return rc;
    int live = 0, ready = 0, draining = 0;
    rc = omlc_health(c, &live, &ready, &draining, err);
    if (rc == 0 && !live)
        rc = -100;
    omlc_close(c);
    return rc;
}

/* The CA's client works: health, a put and a read back. */
static void test_good_certificate(void **state)
{
    (void)state;
    omlc_error err;
    assert_int_equal(dial_and_call(g_client, g_client_key, &err), 0);
    omlc *c = NULL;
    omlc_tls tls = {.cafile = g_server_cert, .certfile = g_client, .keyfile = g_client_key};
    assert_int_equal(omlc_connect_tls(&c, g_p.rpc, &tls, TIMEOUT_MS, &err), 0);
    float f[4] = {1, 0, 0, 0.5f};
    omlc_item it = {.id = "m1", .features = f, .dim = 4, .label = "a"};
    assert_int_equal(omlc_put_items(c, &it, 1, NULL, NULL, &err), 0);
    const char *ids[] = {"m1"};
    Omld__Response *r = NULL;
    assert_int_equal(omlc_get_items(c, ids, 1, &r, &err), 0);
    assert_int_equal(r->get_items->n_items, 1);
    omld__response__free_unpacked(r, NULL);
    omlc_close(c);
}

/* Dials with cert/key: refused, and the client's error says `why`. */
static void expect_refused(const char *cert, const char *key, const char *why)
{
    omlc_error err;
    int rc = dial_and_call(cert, key, &err);
    if ((rc != OMLC_ECONNECT && rc != OMLC_EIO) || strstr(err.message, why) == NULL)
        fail_msg("code %d, expected a refusal saying \"%s\": %s", rc, why, err.message);
}

/* Without a certificate: refused, and the client says why. */
static void test_no_certificate(void **state)
{
    (void)state;
    expect_refused(NULL, NULL, "requires a client certificate");
}

/* A certificate of another CA (same names): refused, and said so. */
static void test_other_ca(void **state)
{
    (void)state;
    expect_refused(g_stranger, g_stranger_key, "refused the client certificate");
}

/* A key that is not the certificate's: the client refuses before the handshake,
 * naming the files; so does a missing certificate file, or a key alone. */
static void test_bad_client_files(void **state)
{
    (void)state;
    omlc *c = NULL;
    omlc_error err;
    omlc_tls tls = {.cafile = g_server_cert, .certfile = g_client, .keyfile = g_stranger_key};
    assert_int_equal(omlc_connect_tls(&c, g_p.rpc, &tls, TIMEOUT_MS, &err), OMLC_EARG);
    assert_null(c);
    assert_non_null(strstr(err.message, g_stranger_key));
    assert_non_null(strstr(err.message, "is not the key"));
    tls.certfile = "/nonexistent/client.pem";
    assert_int_equal(omlc_connect_tls(&c, g_p.rpc, &tls, TIMEOUT_MS, &err), OMLC_EARG);
    assert_non_null(strstr(err.message, "/nonexistent/client.pem"));
    tls.certfile = NULL; /* a key alone */
    assert_int_equal(omlc_connect_tls(&c, g_p.rpc, &tls, TIMEOUT_MS, &err), OMLC_EARG);
    assert_non_null(strstr(err.message, "without its certificate"));
}

/* omlctl: --client-cert/--client-key work (and $OMLCTL_CLIENT_CERT); without,
 * exit 4 with the reason. */
static void test_omlctl(void **state)
{
    (void)state;
#ifdef OMLCTL_BIN
    char cmd[2000], out[4096];
    snprintf(cmd, sizeof cmd, "%s --server %s --cacert %s --client-cert %s --client-key %s health",
             OMLCTL_BIN, g_p.rpc, g_server_cert, g_client, g_client_key);
    if (run(cmd, out, sizeof out) != 0)
        fail_msg("%s: %s", cmd, out);
    snprintf(cmd, sizeof cmd,
             "OMLCTL_CLIENT_CERT=%s OMLCTL_CLIENT_KEY=%s OMLCTL_CACERT=%s %s --server %s status "
             "--json",
             g_client, g_client_key, g_server_cert, OMLCTL_BIN, g_p.rpc);
    if (run(cmd, out, sizeof out) != 0)
        fail_msg("%s: %s", cmd, out);
    snprintf(cmd, sizeof cmd, "%s --server %s --cacert %s health", OMLCTL_BIN, g_p.rpc,
             g_server_cert);
    assert_int_equal(run(cmd, out, sizeof out), 4);
    if (strstr(out, "requires a client certificate") == NULL)
        fail_msg("omlctl without a certificate: %s", out);
#else
    skip();
#endif
}

/* HTTPS: curl with the certificate reads /livez and the /v1 API; without
 * one, or with the other CA's, it is refused. */
static void test_https(void **state)
{
    (void)state;
    const char *port = strrchr(g_p.http, ':') + 1;
    char cmd[2000], out[8192];
    snprintf(cmd, sizeof cmd,
             "curl -sS --max-time 10 --cacert %s --cert %s --key %s https://127.0.0.1:%s/livez",
             g_server_cert, g_client, g_client_key, port);
    if (run(cmd, out, sizeof out) != 0)
        fail_msg("%s: %s", cmd, out);
    snprintf(cmd, sizeof cmd,
             "curl -sS --max-time 10 --cacert %s --cert %s --key %s -d '{}' "
             "https://127.0.0.1:%s/v1/status",
             g_server_cert, g_client, g_client_key, port);
    if (run(cmd, out, sizeof out) != 0)
        fail_msg("%s: %s", cmd, out);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "status"), "code")),
                        "OK");
    json_decref(j);
    snprintf(cmd, sizeof cmd, "curl -sS --max-time 10 --cacert %s https://127.0.0.1:%s/livez",
             g_server_cert, port);
    assert_int_not_equal(run(cmd, out, sizeof out), 0);
    snprintf(cmd, sizeof cmd,
             "curl -sS --max-time 10 --cacert %s --cert %s --key %s https://127.0.0.1:%s/livez",
             g_server_cert, g_stranger, g_stranger_key, port);
    assert_int_not_equal(run(cmd, out, sizeof out), 0);
}

/* The daemon logged each refusal with its reason and counted it. */
static void test_logged_and_counted(void **state)
{
    (void)state;
    /* One more of each, so this test stands alone. */
    omlc_error err;
    dial_and_call(NULL, NULL, &err);
    dial_and_call(g_stranger, g_stranger_key, &err);
    char cmd[2000], out[8192];
    snprintf(cmd, sizeof cmd, "grep -c 'no client certificate' %s", g_p.log);
    assert_int_equal(run(cmd, out, sizeof out), 0);
    snprintf(cmd, sizeof cmd, "grep \"client's certificate is not trusted\" %s", g_p.log);
    if (run(cmd, out, sizeof out) != 0)
        fail_msg("no log line for the other CA's certificate");
    snprintf(cmd, sizeof cmd, "grep -c 'client certificates required' %s", g_p.log);
    assert_int_equal(run(cmd, out, sizeof out), 0);
    /* /metrics needs a client certificate too: read it with curl. */
    snprintf(cmd, sizeof cmd,
             "curl -sS --max-time 10 --cacert %s --cert %s --key %s "
             "https://127.0.0.1:%s/metrics | grep 'omld_tls_handshakes_total{result=\"failed\"}'",
             g_server_cert, g_client, g_client_key, strrchr(g_p.http, ':') + 1);
    assert_int_equal(run(cmd, out, sizeof out), 0);
    long failed = atol(strrchr(out, ' ') + 1);
    if (failed < 4)
        fail_msg("failed handshakes counted: %ld (%s)", failed, out);
}

/* tls_client_ca missing, not PEM, or without tls_cert: the start fails
 * naming it. */
static void test_bad_ca_option(void **state)
{
    (void)state;
#ifdef OMLD_BIN
    char cmd[2400], out[4096];
    snprintf(cmd, sizeof cmd,
             "%s --data_dir %s/d1 --listen 127.0.0.1:0 --http 127.0.0.1:0 --tls_cert %s "
             "--tls_key %s --tls_client_ca %s/nope.pem",
             OMLD_BIN, g_dir, g_server_cert, g_server_key, g_dir);
    assert_int_not_equal(run(cmd, out, sizeof out), 0);
    if (strstr(out, "tls_client_ca") == NULL || strstr(out, "nope.pem") == NULL)
        fail_msg("missing tls_client_ca: %s", out);
    snprintf(cmd, sizeof cmd,
             "%s --data_dir %s/d2 --listen 127.0.0.1:0 --http 127.0.0.1:0 --tls_cert %s "
             "--tls_key %s --tls_client_ca %s",
             OMLD_BIN, g_dir, g_server_cert, g_server_key, g_server_key);
    assert_int_not_equal(run(cmd, out, sizeof out), 0);
    if (strstr(out, "holds no PEM CA certificate") == NULL)
        fail_msg("a key as tls_client_ca: %s", out);
    snprintf(cmd, sizeof cmd, "%s --data_dir %s/d3 --tls_client_ca %s --print-config", OMLD_BIN,
             g_dir, g_ca);
    assert_int_not_equal(run(cmd, out, sizeof out), 0);
    if (strstr(out, "'tls_client_ca' is set without 'tls_cert'") == NULL)
        fail_msg("tls_client_ca without tls_cert: %s", out);
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_certificate),
        cmocka_unit_test(test_no_certificate),
        cmocka_unit_test(test_other_ca),
        cmocka_unit_test(test_bad_client_files),
        cmocka_unit_test(test_omlctl),
        cmocka_unit_test(test_https),
        cmocka_unit_test(test_logged_and_counted),
        cmocka_unit_test(test_bad_ca_option),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
