/* http_routes.c - what each GET path of the status server answers:
 * /livez, /readyz, /status, /status/history, /metrics and the dashboard's
 * files, with the Bearer-token check (see http.c for the connections). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dashboard.h"
#include "http_int.h"
#include "log.h"
#include "metrics.h"

static int authorized(const http_conn *c);

/* Path of the request target: "/status?x" and "http://h/status" -> "/status". */
static int url_path(const http_conn *c, const char **path, size_t *len)
{
    struct http_parser_url u;
    http_parser_url_init(&u);
    if (c->url_len == 0 || http_parser_parse_url(c->url, c->url_len, 0, &u) != 0)
        return -1;
    if (!(u.field_set & (1 << UF_PATH))) {
        *path = "/";
        *len = 1;
        return 0;
    }
    *path = c->url + u.field_data[UF_PATH].off;
    *len = u.field_data[UF_PATH].len;
    return 0;
}

static int path_is(const char *p, size_t n, const char *want)
{
    return strlen(want) == n && memcmp(p, want, n) == 0;
}

/* The query string's "since=MS" (MS decimal, at most 19 digits): 1 with
 * *since set, 0 if absent, -1 if malformed. Other parameters are ignored;
 * a repeated since takes the last. */
static int query_since(const http_conn *c, uint64_t *since)
{
    struct http_parser_url u;
    http_parser_url_init(&u);
    if (http_parser_parse_url(c->url, c->url_len, 0, &u) != 0 ||
        !(u.field_set & (1 << UF_QUERY)))
        return 0;
    const char *q = c->url + u.field_data[UF_QUERY].off;
    const char *end = q + u.field_data[UF_QUERY].len;
    int found = 0;
    while (q < end) {
        const char *amp = memchr(q, '&', (size_t)(end - q));
        const char *pe = amp ? amp : end;
        if (pe - q >= 6 && memcmp(q, "since=", 6) == 0) {
            const char *d = q + 6;
            if (d == pe || pe - d > 19)
                return -1;
            uint64_t v = 0;
            for (; d < pe; d++) {
                if (*d < '0' || *d > '9')
                    return -1;
                v = v * 10 + (uint64_t)(*d - '0');
            }
            *since = v;
            found = 1;
        }
        q = pe + (amp ? 1 : 0);
    }
    return found;
}

/* What a path answers; ROUTE_DASHBOARD: any other path (the dashboard's
 * files, or 404). */
enum route { ROUTE_DASHBOARD, ROUTE_STATUS, ROUTE_METRICS, ROUTE_LIVEZ, ROUTE_READYZ,
             ROUTE_HISTORY };

static enum route route_of(const char *path, size_t plen)
{
    return path_is(path, plen, "/status")           ? ROUTE_STATUS
           : path_is(path, plen, "/metrics")        ? ROUTE_METRICS
           : path_is(path, plen, "/livez")          ? ROUTE_LIVEZ
           : path_is(path, plen, "/readyz")         ? ROUTE_READYZ
           : path_is(path, plen, "/status/history") ? ROUTE_HISTORY
                                                    : ROUTE_DASHBOARD;
}

/* GET / and /dashboard/...: the embedded dashboard (dashboard.h). */
static void answer_dashboard(http_conn *c, const char *path, size_t plen, int head,
                             int keep_alive)
{
    const omld_dashboard_asset *a = omld_dashboard_lookup(path, plen);
    if (!a) {
        omld_http_send_text(c, 404, "404 Not Found\n", head, keep_alive);
        return;
    }
    char *body = head ? NULL : malloc(a->len);
    if (body)
        memcpy(body, a->data, a->len);
    else if (!head) {
        omld_http_send_text(c, 500, "500 out of memory\n", 0, keep_alive);
        return;
    }
    omld_http_send_response(c, 200, a->content_type, body, a->len, head, keep_alive);
}

/* GET /status/history[?since=MS]: the samples kept (history.c). */
static void answer_history(http_conn *c, int head, int keep_alive)
{
    omld_http *h = c->srv;
    if (!h->history) {
        omld_http_send_text(c, 404, "404 Not Found (no history kept)\n", head, keep_alive);
        return;
    }
    uint64_t since = 0;
    int has_since = query_since(c, &since);
    if (has_since < 0) {
        omld_http_send_text(c, 400, "400 Bad Request: since= takes milliseconds (digits)\n", head,
                  keep_alive);
        return;
    }
    size_t len = 0;
    char *body = omld_history_json(h->history, has_since, since,
                                   omld_history_now_ms(h->history), &len);
    if (!body) {
        omld_http_send_text(c, 500, "500 out of memory\n", head, keep_alive);
        return;
    }
    omld_http_send_response(c, 200, "application/json", body, len, head, keep_alive);
}

/* GET /readyz: 200 "ready", or 503 with why not (draining, or the reason
 * the daemon gives, e.g. the recovery's progress). */
static void answer_readyz(http_conn *c, const omld_status_input *in, int head, int keep_alive)
{
    int ok = in->ready && !in->draining;
    char text[320];
    if (ok || in->draining || !in->not_ready || !in->not_ready[0])
        snprintf(text, sizeof text, "%s", ok ? "ready\n" : in->draining ? "draining\n"
                                                                      : "not ready\n");
    else
        snprintf(text, sizeof text, "not ready: %s\n", in->not_ready);
    omld_http_send_text(c, ok ? 200 : 503, text, head, keep_alive);
}

/* GET /readyz, /status and /metrics: from one gather() of what the daemon
 * knows. */
static void answer_gathered(http_conn *c, enum route route, int head, int keep_alive)
{
    omld_http *h = c->srv;
    omld_status_input in;
    memset(&in, 0, sizeof in);
    h->gather(h->arg, &in);
    if (route == ROUTE_READYZ) {
        answer_readyz(c, &in, head, keep_alive);
        return;
    }
    size_t len = 0;
    char *body = route == ROUTE_STATUS ? omld_status_json(&in, &len) : omld_metrics_text(&in, &len);
    if (!body) {
        omld_http_send_text(c, 500, "500 out of memory\n", head, keep_alive);
        return;
    }
    const char *ctype =
        route == ROUTE_STATUS ? "application/json" : "text/plain; version=0.0.4; charset=utf-8";
    omld_http_send_response(c, 200, ctype, body, len, head, keep_alive);
}

void omld_http_answer(http_conn *c, int keep_alive)
{
    omld_http *h = c->srv;
    int method = c->parser.method;
    int head = method == HTTP_HEAD;
    const char *path;
    size_t plen;
    if (url_path(c, &path, &plen) != 0) {
        omld_http_send_error_and_finish(c, 400);
        return;
    }
    if (h->rpc != NULL && omld_api_path(path, plen)) {
        omld_api_answer(c, path, plen, keep_alive);
        return;
    }
    enum route route = route_of(path, plen);
    if (method != HTTP_GET && !head) {
        omld_http_send_text(c, 405, "405 Method Not Allowed\n", 0, keep_alive);
        return;
    }
    /* The probes and the dashboard's own files are open: the page holds
     * no data and asks for the token itself (on /status's 401). */
    if (route != ROUTE_LIVEZ && route != ROUTE_READYZ && route != ROUTE_DASHBOARD &&
        !authorized(c)) {
        if (h->unauthorized)
            atomic_fetch_add_explicit(h->unauthorized, 1, memory_order_relaxed);
        omld_http_send_text(c, 401,
                  "401 Unauthorized: send Authorization: Bearer TOKEN (/livez, /readyz and "
                  "the dashboard's page are open)\n",
                  head, keep_alive);
        return;
    }
    switch (route) {
    case ROUTE_DASHBOARD:
        answer_dashboard(c, path, plen, head, keep_alive);
        return;
    case ROUTE_LIVEZ:
        omld_http_send_text(c, 200, "ok\n", head, keep_alive);
        return;
    case ROUTE_HISTORY:
        answer_history(c, head, keep_alive);
        return;
    case ROUTE_STATUS:
    case ROUTE_METRICS:
    case ROUTE_READYZ:
        answer_gathered(c, route, head, keep_alive);
        return;
    }
}

const char *omld_http_bearer(const http_conn *c, size_t *len)
{
    if (!c->auth_seen || c->auth_len > sizeof c->auth)
        return NULL;
    const char *v = c->auth;
    size_t n = c->auth_len;
    while (n > 0 && (*v == ' ' || *v == '\t'))
        v++, n--;
    if (n < 7 || strncasecmp(v, "bearer ", 7) != 0)
        return NULL;
    v += 7;
    n -= 7;
    while (n > 0 && (*v == ' ' || *v == '\t'))
        v++, n--;
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    *len = n;
    return v;
}

/* 1 if no tokens are configured or the request carried "Bearer TOKEN" with
 * a configured token. */
static int authorized(const http_conn *c)
{
    const omld_tokens *t = c->srv->tokens;
    if (t == NULL || t->n == 0)
        return 1;
    size_t n = 0;
    const char *v = omld_http_bearer(c, &n);
    return v != NULL && omld_tokens_check(t, v, n) >= 0;
}
