/* test_dashboard.c - the embedded dashboard (daemon/dashboard.c) and its
 * route in daemon/http.c: which paths name which asset, that the page is
 * the whole of daemon/dashboard/index.html (self-contained, with every
 * chart's canvas), and GET / HEAD / POST on / over a real socket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "dashboard.h"
#include "http.h"

static const char *const CANVASES[] = {
    "canvas-hedge",        "canvas-loss",    "canvas-quality", "canvas-ingest",
    "canvas-queries",      "canvas-queue",   "canvas-backpressure", "canvas-version",
    "canvas-items",        "canvas-connections",
};

static const omld_dashboard_asset *lookup(const char *path)
{
    return omld_dashboard_lookup(path, strlen(path));
}

static void test_lookup(void **state)
{
    (void)state;
    const omld_dashboard_asset *index = lookup("/");
    assert_non_null(index);
    assert_string_equal(index->name, "index.html");
    assert_string_equal(index->content_type, "text/html; charset=utf-8");
    assert_ptr_equal(lookup("/dashboard"), index);
    assert_ptr_equal(lookup("/dashboard/"), index);
    assert_ptr_equal(lookup("/dashboard/index.html"), index);

    assert_null(lookup(""));
    assert_null(lookup("/index.html"));
    assert_null(lookup("/dashboardx"));
    assert_null(lookup("/dashboard/nope.js"));
    assert_null(lookup("/dashboard//index.html"));
    assert_null(lookup("/dashboard/../index.html"));
    assert_null(lookup("/status"));
    /* The length is what counts, not a NUL. */
    assert_ptr_equal(omld_dashboard_lookup("/status", 1), index);
    assert_null(omld_dashboard_lookup("/dashboard/index.htmlX", strlen("/dashboard/index.html") + 1));
}

static void test_page(void **state)
{
    (void)state;
    const omld_dashboard_asset *a = lookup("/");
    assert_non_null(a);
    assert_true(a->len > 1000);
    assert_int_equal(strlen((const char *)a->data), a->len); /* NUL after, none inside */
    const char *html = (const char *)a->data;
    assert_true(strncmp(html, "<!DOCTYPE html>", 15) == 0);
    for (size_t i = 0; i < sizeof CANVASES / sizeof CANVASES[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "<canvas id=\"%s\">", CANVASES[i]);
        if (!strstr(html, want))
            fail_msg("the page has no %s", want);
    }
    /* Self-contained: nothing fetched from elsewhere. */
    assert_null(strstr(html, "<script src"));
    assert_null(strstr(html, "<link rel=\"stylesheet\""));
    assert_null(strstr(html, "https://"));
    assert_null(strstr(html, "@import"));
    for (size_t i = 0; i < omld_dashboard_asset_count; i++)
        assert_non_null(omld_dashboard_assets[i].name);
}

/* ---- the route, over a socket ---- */

static void fake_gather(void *arg, omld_status_input *in)
{
    (void)arg;
    static omld_config cfg;
    static omld_model_stats model;
    static omld_metrics metrics;
    in->version = "9.9.9";
    in->cfg = &cfg;
    in->model = &model;
    in->metrics = &metrics;
    in->ready = 1;
}

static const char *body_of(const char *resp)
{
    const char *e = strstr(resp, "\r\n\r\n");
    assert_non_null(e);
    return e + 4;
}

static void test_route(void **state)
{
    (void)state;
    oml_test_http_server *s = oml_test_http_start(fake_gather, NULL, NULL);

    const omld_dashboard_asset *a = lookup("/");
    char cl[64];
    snprintf(cl, sizeof cl, "Content-Length: %zu\r\n", a->len);
    size_t n;

    char *r = oml_test_http_exchange(s->port, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &n);
    assert_true(strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0);
    assert_non_null(strstr(r, "Content-Type: text/html; charset=utf-8\r\n"));
    assert_non_null(strstr(r, cl));
    assert_int_equal((size_t)(r + n - body_of(r)), a->len);
    assert_memory_equal(body_of(r), a->data, a->len);
    assert_non_null(strstr(body_of(r), "<canvas id=\"canvas-hedge\">"));
    free(r);

    r = oml_test_http_exchange(s->port, "GET /dashboard/?since=1 HTTP/1.1\r\nConnection: close\r\n\r\n", &n);
    assert_true(strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0);
    assert_int_equal((size_t)(r + n - body_of(r)), a->len);
    free(r);

    r = oml_test_http_exchange(s->port, "HEAD / HTTP/1.1\r\nConnection: close\r\n\r\n", &n);
    assert_true(strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0);
    assert_non_null(strstr(r, cl));
    assert_string_equal(body_of(r), ""); /* no body for HEAD */
    free(r);

    r = oml_test_http_exchange(s->port, "POST / HTTP/1.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", &n);
    assert_true(strncmp(r, "HTTP/1.1 405 ", 13) == 0);
    free(r);

    r = oml_test_http_exchange(s->port, "GET /dashboard/nope.js HTTP/1.1\r\nConnection: close\r\n\r\n", &n);
    assert_true(strncmp(r, "HTTP/1.1 404 ", 13) == 0);
    free(r);

    /* The other routes are untouched. */
    r = oml_test_http_exchange(s->port, "GET /status HTTP/1.1\r\nConnection: close\r\n\r\n", &n);
    assert_true(strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0);
    assert_non_null(strstr(r, "application/json"));
    free(r);

    oml_test_http_stop(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_page),
        cmocka_unit_test(test_route),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
