/* test_history.c - daemon/history.c and its route in daemon/http.c: the
 * ring (wrap-around, order, capacity 1), a sample taken from a hand-made
 * omld_status_input, GET /status/history's JSON (well-formed by a strict
 * validator and by Python when present; since= filtering; NaN as null),
 * the sampling timer on a real loop (it samples, and closes so that
 * uv_loop_close() succeeds), and the route over a real socket (404 with no
 * history, 200 JSON, ?since=, a bad since is 400, 401 without the bearer
 * token when tokens are configured). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "http_server.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "history.h"
#include "http.h"
#include "json.h"

#include "json_check.h"

/* ---- helpers ---- */

static omld_history_sample mk(uint64_t t)
{
    omld_history_sample s;
    memset(&s, 0, sizeof s);
    s.t_ms = t;
    s.heads = 3;
    s.alpha[0] = 0.5f;
    s.alpha[1] = 0.25f;
    s.alpha[2] = 0.25f;
    s.loss_ema[0] = 0.1f * (float)t;
    s.updates = t * 10;
    s.triplets_applied = t * 10;
    s.version = t;
    s.job_progress = NAN;
    return s;
}

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* ---- the ring ---- */

static void test_ring_wrap(void **state)
{
    (void)state;
    omld_history *h = omld_history_new(5, 1000, 0);
    assert_non_null(h);
    assert_int_equal(omld_history_capacity(h), 5);
    assert_int_equal(omld_history_interval_ms(h), 1000);
    assert_int_equal(omld_history_count(h), 0);
    assert_null(omld_history_at(h, 0));
    for (uint64_t t = 1; t <= 3; t++) {
        omld_history_sample s = mk(t);
        omld_history_push(h, &s);
    }
    assert_int_equal(omld_history_count(h), 3);
    assert_int_equal(omld_history_at(h, 0)->t_ms, 1);
    assert_int_equal(omld_history_at(h, 2)->t_ms, 3);
    assert_null(omld_history_at(h, 3));
    /* Past the capacity, twice round: the oldest go, order stays. */
    for (uint64_t t = 4; t <= 12; t++) {
        omld_history_sample s = mk(t);
        omld_history_push(h, &s);
        assert_int_equal(omld_history_count(h), t < 5 ? t : 5);
        assert_int_equal(omld_history_at(h, omld_history_count(h) - 1)->t_ms, t);
    }
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(omld_history_at(h, i)->t_ms, 8 + i);
        assert_int_equal(omld_history_at(h, i)->version, 8 + i);
    }
    assert_null(omld_history_at(h, 5));
    omld_history_free(h);

    /* Capacity 1 keeps the newest. */
    h = omld_history_new(1, 1000, 0);
    assert_non_null(h);
    for (uint64_t t = 1; t <= 4; t++) {
        omld_history_sample s = mk(t);
        omld_history_push(h, &s);
        assert_int_equal(omld_history_count(h), 1);
        assert_int_equal(omld_history_at(h, 0)->t_ms, t);
    }
    omld_history_free(h);

    assert_null(omld_history_new(0, 1000, 0));
    assert_null(omld_history_new(10, 0, 0));
    omld_history_free(NULL);
}

/* ---- a sample from what /status renders ---- */

static void test_sample_from(void **state)
{
    (void)state;
    static omld_metrics mt; /* zeroed atomics */
    omld_model_stats model;
    memset(&model, 0, sizeof model);
    model.heads = 3;
    model.alpha[0] = 0.2f;
    model.alpha[1] = 0.3f;
    model.alpha[2] = 0.5f;
    model.loss_ema[2] = 0.75f;
    model.updates = 100;
    model.satisfied = 60;
    model.utilised = 40;
    model.items = 400;
    model.view_items = 390;
    model.view_version = 17;
    model.queue_depth = 12;
    model.queue_capacity = 4096;
    omld_count(&mt.triplets_received, 120);
    omld_count(&mt.triplets_applied, 100);
    omld_count(&mt.items_put, 400);
    omld_count(&mt.pairs_received, 3);
    omld_count(&mt.backpressure_events, 2);
    omld_count(&mt.queries[OMLD_Q_RETRIEVE], 9);
    atomic_store(&mt.connections_open, 4);
    omld_job_info jobs[3];
    memset(jobs, 0, sizeof jobs);
    jobs[0].state = OMLD_JOB_QUEUED;
    jobs[1].state = OMLD_JOB_RUNNING;
    jobs[1].progress = 0.25;
    jobs[2].state = OMLD_JOB_DONE;
    jobs[2].progress = 1.0;
    omld_status_input in;
    memset(&in, 0, sizeof in);
    in.uptime_ms = 5000;
    in.model = &model;
    in.metrics = &mt;
    in.jobs = jobs;
    in.n_jobs = 3;

    omld_history *h = omld_history_new(4, 1000, 0);
    assert_non_null(h);
    omld_history_record(h, &in);
    const omld_history_sample *s = omld_history_at(h, 0);
    assert_non_null(s);
    assert_int_equal(s->t_ms, 5000);
    assert_int_equal(s->heads, 3);
    assert_true(s->alpha[2] == 0.5f && s->loss_ema[2] == 0.75f);
    assert_int_equal(s->updates, 100);
    assert_int_equal(s->satisfied, 60);
    assert_int_equal(s->utilised, 40);
    assert_int_equal(s->items, 400);
    assert_int_equal(s->view_items, 390);
    assert_int_equal(s->version, 17);
    assert_int_equal(s->queue_depth, 12);
    assert_int_equal(s->queue_capacity, 4096);
    assert_int_equal(s->triplets_received, 120);
    assert_int_equal(s->triplets_applied, 100);
    assert_int_equal(s->items_put, 400);
    assert_int_equal(s->pairs_received, 3);
    assert_int_equal(s->backpressure_events, 2);
    assert_int_equal(s->queries[OMLD_Q_RETRIEVE], 9);
    assert_int_equal(s->queries[OMLD_Q_CLASSIFY], 0);
    assert_int_equal(s->connections_open, 4);
    assert_int_equal(s->jobs_active, 2);
    assert_true(s->job_progress == 0.25);

    /* Nothing known yet (engine stopped): zeros, no heads, no job. */
    omld_status_input empty;
    memset(&empty, 0, sizeof empty);
    empty.uptime_ms = 6000;
    omld_history_record(h, &empty);
    s = omld_history_at(h, 1);
    assert_int_equal(s->t_ms, 6000);
    assert_int_equal(s->heads, 0);
    assert_int_equal(s->updates, 0);
    assert_int_equal(s->jobs_active, 0);
    assert_true(isnan(s->job_progress));
    omld_history_free(h);
}

/* ---- JSON ---- */

static void test_json(void **state)
{
    (void)state;
    omld_history *h = omld_history_new(5, 1000, 0);
    assert_non_null(h);
    size_t len = 0;
    char *text = omld_history_json(h, 0, 0, 42, &len);
    assert_non_null(text);
    assert_int_equal(strlen(text), len);
    assert_true(oml_test_json_valid(text, len));
    assert_non_null(strstr(text, "\"samples\":[]"));
    assert_non_null(strstr(text, "\"interval_ms\":1000"));
    assert_non_null(strstr(text, "\"now_ms\":42"));
    free(text);

    for (uint64_t t = 1; t <= 12; t++) {
        omld_history_sample s = mk(t * 1000);
        if (t == 12) {
            s.jobs_active = 1;
            s.job_progress = 0.5;
            s.loss_ema[1] = NAN; /* never produced, but must stay valid JSON */
        }
        omld_history_push(h, &s);
    }
    text = omld_history_json(h, 0, 0, 12500, &len);
    assert_non_null(text);
    assert_true(oml_test_json_valid(text, len));
    assert_int_equal(text[len - 1], '\n');
    assert_int_equal(count_of(text, "\"t_ms\":"), 5);
    /* Oldest first: 8000 .. 12000. */
    const char *p8 = strstr(text, "\"t_ms\":8000"), *p12 = strstr(text, "\"t_ms\":12000");
    assert_non_null(p8);
    assert_non_null(p12);
    assert_true(p8 < p12);
    assert_null(strstr(text, "\"t_ms\":7000"));
    assert_non_null(strstr(text, "\"job_progress\":null"));
    assert_non_null(strstr(text, "\"job_progress\":0.5"));
    assert_non_null(strstr(text, "\"alpha\":[0.5,0.25,0.25]"));
    int py = oml_test_python_check(text,
                          "import json,sys\n"
                          "d=json.load(sys.stdin)\n"
                          "s=d[\"samples\"]\n"
                          "assert d[\"interval_ms\"]==1000 and d[\"capacity\"]==5\n"
                          "assert d[\"now_ms\"]==12500\n"
                          "assert [x[\"t_ms\"] for x in s]==[8000,9000,10000,11000,12000]\n"
                          "assert all(len(x[\"alpha\"])==3 and len(x[\"loss_ema\"])==3 for x in s)\n"
                          "assert s[-1][\"loss_ema\"][1] is None\n"
                          "assert s[0][\"triplets_applied\"]==80000 and s[0][\"version\"]==8000\n"
                          "assert set(s[0][\"queries\"])=={\"classify\",\"verify\",\"retrieve\","
                          "\"embed\",\"get_items\",\"classify_batch\",\"retrieve_batch\",\"recommend\",\"list_items\",\"export_model\",\"count_items\",\"shard_retrieve\"}\n"
                          "assert s[-1][\"jobs_active\"]==1 and s[-1][\"job_progress\"]==0.5\n");
    if (py >= 0)
        assert_int_equal(py, 1);
    free(text);

    /* since=: strictly newer samples only. */
    struct { uint64_t since; int n; uint64_t first; } cases[] = {
        {0, 5, 8000}, {7999, 5, 8000}, {8000, 4, 9000}, {10500, 2, 11000},
        {11999, 1, 12000}, {12000, 0, 0}, {UINT64_MAX, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        text = omld_history_json(h, 1, cases[i].since, 13000, &len);
        assert_non_null(text);
        if (!oml_test_json_valid(text, len))
            fail_msg("since=%llu: not valid JSON: %s", (unsigned long long)cases[i].since, text);
        assert_int_equal(count_of(text, "\"t_ms\":"), cases[i].n);
        if (cases[i].n) {
            char want[64];
            snprintf(want, sizeof want, "\"samples\":[{\"t_ms\":%llu,",
                     (unsigned long long)cases[i].first);
            if (!strstr(text, want))
                fail_msg("since=%llu: expected %s in %s", (unsigned long long)cases[i].since,
                         want, text);
        } else {
            assert_non_null(strstr(text, "\"samples\":[]"));
        }
        free(text);
    }

    /* A full-size ring renders valid JSON too. */
    omld_history_free(h);
    h = omld_history_new(OMLD_HISTORY_SAMPLES, OMLD_HISTORY_INTERVAL_MS, 0);
    assert_non_null(h);
    for (uint64_t t = 0; t < OMLD_HISTORY_SAMPLES + 17; t++) {
        omld_history_sample s = mk(t * 1000);
        omld_history_push(h, &s);
    }
    text = omld_history_json(h, 0, 0, 0, &len);
    assert_non_null(text);
    assert_true(oml_test_json_valid(text, len));
    assert_int_equal(count_of(text, "\"t_ms\":"), OMLD_HISTORY_SAMPLES);
    free(text);
    omld_history_free(h);
}

/* ---- the timer on a loop ---- */

static int g_gathers;
static uint64_t g_fake_uptime;
static omld_model_stats g_model;
static omld_metrics g_metrics;
static omld_config g_cfg;

static void fake_gather(void *arg, omld_status_input *in)
{
    (void)arg;
    g_gathers++;
    in->version = "9.9.9";
    in->uptime_ms = g_fake_uptime;
    g_fake_uptime += 1000;
    in->cfg = &g_cfg;
    in->model = &g_model;
    in->metrics = &g_metrics;
    in->ready = 1;
}

static void on_stop_timer(uv_timer_t *t)
{
    omld_history_stop(t->data);
    omld_history_stop(t->data); /* idempotent */
    uv_close((uv_handle_t *)t, NULL);
}

static void test_timer(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    omld_history *h = omld_history_new(4, 20, omld_now_ns());
    assert_non_null(h);
    g_gathers = 0;
    g_fake_uptime = 0;
    g_model.heads = 2;
    g_model.alpha[0] = g_model.alpha[1] = 0.5f;
    assert_int_equal(omld_history_start(h, &loop, fake_gather, NULL), 0);
    assert_int_equal(omld_history_count(h), 1); /* one sample at once */
    uv_timer_t stop;
    assert_int_equal(uv_timer_init(&loop, &stop), 0);
    stop.data = h;
    assert_int_equal(uv_timer_start(&stop, on_stop_timer, 250, 0), 0);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_true(g_gathers >= 4); /* 1 + ~12 ticks, at least the ring full */
    assert_int_equal(omld_history_count(h), 4);
    for (size_t i = 1; i < 4; i++)
        assert_true(omld_history_at(h, i)->t_ms == omld_history_at(h, i - 1)->t_ms + 1000);
    assert_int_equal(omld_history_at(h, 3)->heads, 2);
    assert_true(omld_history_now_ms(h) >= 150); /* the loop clock is coarse and cached */
    assert_int_equal(uv_loop_close(&loop), 0); /* the timer was closed */
    omld_history_free(h);
}

/* ---- the route over a real socket ---- */

typedef struct http_setup {
    const omld_history *hist;
    const omld_tokens *tokens;
} http_setup;

static void configure(omld_http *h, void *arg)
{
    const http_setup *c = arg;
    if (c->hist)
        omld_http_set_history(h, c->hist);
    if (c->tokens)
        omld_http_set_tokens(h, c->tokens, NULL);
}

static oml_test_http_server *server_start(const omld_history *hist, const omld_tokens *tokens)
{
    http_setup c = {hist, tokens};
    return oml_test_http_start(fake_gather, configure, &c);
}

/* One request with Connection: close; the whole answer (malloc'd), or
 * fails. *code: the status code; *body: where the body starts. */
static char *exchange(int port, const char *target, const char *auth, int *code, char **body)
{
    char req[1024];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n%s%s%sConnection: close\r\n\r\n",
             target, auth ? "Authorization: Bearer " : "", auth ? auth : "", auth ? "\r\n" : "");
    char *buf = oml_test_http_exchange(port, req, NULL);
    assert_true(sscanf(buf, "HTTP/1.1 %d", code) == 1);
    char *sep = strstr(buf, "\r\n\r\n");
    assert_non_null(sep);
    *body = sep + 4;
    return buf;
}

static void test_route(void **state)
{
    (void)state;
    int code;
    char *body, *r;

    /* No history attached: 404, and /status still works. */
    oml_test_http_server *s = server_start(NULL, NULL);
    r = exchange(s->port, "/status/history", NULL, &code, &body);
    assert_int_equal(code, 404);
    free(r);
    r = exchange(s->port, "/status", NULL, &code, &body);
    assert_int_equal(code, 200);
    free(r);
    oml_test_http_stop(s);

    omld_history *h = omld_history_new(10, 1000, omld_now_ns());
    assert_non_null(h);
    for (uint64_t t = 1; t <= 6; t++) {
        omld_history_sample smp = mk(t * 1000);
        omld_history_push(h, &smp);
    }
    s = server_start(h, NULL);
    r = exchange(s->port, "/status/history", NULL, &code, &body);
    assert_int_equal(code, 200);
    assert_non_null(strstr(r, "Content-Type: application/json"));
    assert_true(oml_test_json_valid(body, strlen(body)));
    assert_int_equal(count_of(body, "\"t_ms\":"), 6);
    free(r);
    r = exchange(s->port, "/status/history?since=4000", NULL, &code, &body);
    assert_int_equal(code, 200);
    assert_true(oml_test_json_valid(body, strlen(body)));
    assert_int_equal(count_of(body, "\"t_ms\":"), 2);
    assert_non_null(strstr(body, "\"samples\":[{\"t_ms\":5000,"));
    free(r);
    r = exchange(s->port, "/status/history?x=1&since=5500&y", NULL, &code, &body);
    assert_int_equal(code, 200);
    assert_int_equal(count_of(body, "\"t_ms\":"), 1);
    free(r);
    r = exchange(s->port, "/status/history?since=99999999", NULL, &code, &body);
    assert_int_equal(code, 200);
    assert_non_null(strstr(body, "\"samples\":[]"));
    free(r);
    const char *bad[] = {"/status/history?since=", "/status/history?since=abc",
                         "/status/history?since=-1", "/status/history?since=12345678901234567890"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = exchange(s->port, bad[i], NULL, &code, &body);
        if (code != 400)
            fail_msg("%s: %d, want 400", bad[i], code);
        free(r);
    }
    r = exchange(s->port, "/status/historyx", NULL, &code, &body);
    assert_int_equal(code, 404);
    free(r);
    oml_test_http_stop(s);

    /* With tokens: 401 without the bearer token, 200 with it. */
    static omld_tokens tok;
    memset(&tok, 0, sizeof tok);
    const char *secret = "history-test-token-0123456789";
    tok.n = tok.n_ro = 1;
    memcpy(tok.t[0].secret, secret, strlen(secret));
    tok.t[0].len = strlen(secret);
    s = server_start(h, &tok);
    r = exchange(s->port, "/status/history", NULL, &code, &body);
    assert_int_equal(code, 401);
    free(r);
    r = exchange(s->port, "/status/history", "wrong-token", &code, &body);
    assert_int_equal(code, 401);
    free(r);
    r = exchange(s->port, "/status/history?since=1000", secret, &code, &body);
    assert_int_equal(code, 200);
    assert_int_equal(count_of(body, "\"t_ms\":"), 5);
    free(r);
    oml_test_http_stop(s);
    omld_history_free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_wrap),
        cmocka_unit_test(test_sample_from),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_timer),
        cmocka_unit_test(test_route),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
