/* repl_fixture.c - see repl_fixture.h. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "repl_fixture.h"

pid_t g_redis;
int g_port;
char g_dir[256];

int repl_setup(void **state)
{
    (void)state;
    if (access(REDIS_SERVER, X_OK) != 0)
        return 0; /* each test skips */
    snprintf(g_dir, sizeof g_dir, "/tmp/omld-repl-XXXXXX");
    if (mkdtemp(g_dir) == NULL)
        return -1;
    g_port = omld_free_port();
    g_redis = omld_redis_spawn(REDIS_SERVER, g_dir, g_port);
    return g_redis > 0 ? 0 : -1;
}

int repl_teardown(void **state)
{
    (void)state;
    return omld_redis_stop(g_redis, g_dir);
}

json_t *status(const omld_proc *p)
{
    return omld_proc_status(p);
}

json_int_t figure(const json_t *s, const char *section, const char *key)
{
    return json_integer_value(json_object_get(json_object_get(s, section), key));
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void features(int i, float *x)
{
    for (int d = 0; d < DIM; d++)
        x[d] = (float)sin(0.7 * i + 1.3 * d) + (float)(i % 4) * (d == i % DIM);
}

void put_items(omlc *c, int from, int to)
{
    for (int i = from; i < to; i++) {
        char id[32], label[16];
        float x[DIM];
        snprintf(id, sizeof id, "it%d", i);
        snprintf(label, sizeof label, "c%d", i % 4);
        features(i, x);
        omlc_item it = {.id = id, .features = x, .dim = DIM, .label = label};
        omlc_error err;
        assert_int_equal(omlc_put_items(c, &it, 1, NULL, NULL, &err), 0);
    }
}

void make_triplets(int seq, int m, char ids[3][64][32], omlc_triplet *t)
{
    for (int k = 0; k < m; k++) {
        int a = (seq + k) * 7 % N_ITEMS, p = (a + 4) % N_ITEMS, q = (a + 1) % N_ITEMS;
        snprintf(ids[0][k], 32, "it%d", a);
        snprintf(ids[1][k], 32, "it%d", p);
        snprintf(ids[2][k], 32, "it%d", q);
        memset(&t[k], 0, sizeof t[k]);
        t[k].anchor.id = ids[0][k];
        t[k].positive.id = ids[1][k];
        t[k].negative.id = ids[2][k];
    }
}

void add_triplets(omlc *c, int seq, int n, int batch)
{
    char ids[3][64][32];
    omlc_triplet t[64];
    for (int done = 0; done < n;) {
        int m = n - done < batch ? n - done : batch;
        make_triplets(seq + done, m, ids, t);
        omlc_error err;
        assert_int_equal(omlc_add_triplets(c, t, (size_t)m, NULL, NULL, &err), 0);
        done += m;
    }
}

/* Until the primary's view version has not moved for a second and the
 * replica serves the same version over as many items. */
uint64_t wait_same_version(const omld_proc *pri, const omld_proc *rep)
{
    json_int_t last = -1;
    double still_since = now_s();
    for (int i = 0; i < 3000; i++) {
        json_t *a = status(pri), *b = status(rep);
        json_int_t va = a ? figure(a, "model", "version") : -2;
        json_int_t vb = b ? figure(b, "model", "version") : -3;
        json_int_t ia = a ? figure(a, "model", "view_items") : -2;
        json_int_t ib = b ? figure(b, "model", "view_items") : -3;
        json_decref(a);
        json_decref(b);
        if (va != last) {
            last = va;
            still_since = now_s();
        }
        if (va == vb && ia == ib && now_s() - still_since > 1.0)
            return (uint64_t)va;
        usleep(20000);
    }
    fail_msg("the replica did not reach the primary's view version %lld", (long long)last);
    return 0;
}

/* The same classify and retrieve answers from both, bit for bit, when
 * both answered at `version`: 0. 1 when an answer came from another
 * version (a publish after the two had settled), compared no further. */
static int answers_at(const omld_proc *pri, const omld_proc *rep, uint64_t version)
{
    omlc *a = omld_proc_dial(pri, TIMEOUT_MS), *b = omld_proc_dial(rep, TIMEOUT_MS);
    assert_non_null(a);
    assert_non_null(b);
    int moved = 0;
    for (int q = 0; q < 24 && !moved; q++) {
        float x[DIM];
        features(1000 + q, x);
        omlc_ref ref = {.vector = x, .dim = DIM};
        if (q % 3 == 0)
            ref = (omlc_ref){.id = NULL, .vector = NULL}, ref.id = q % 2 ? "it3" : "it10";
        omlc_classification ca, cb;
        omlc_error err;
        assert_int_equal(omlc_classify(a, &ref, 5, NULL, &ca, &err), 0);
        assert_int_equal(omlc_classify(b, &ref, 5, NULL, &cb, &err), 0);
        omlc_hit ha[10], hb[10];
        size_t na = 0, nb = 0;
        uint64_t va = 0, vb = 0;
        assert_int_equal(omlc_retrieve(a, &ref, 10, NULL, ha, 10, &na, &va, &err), 0);
        assert_int_equal(omlc_retrieve(b, &ref, 10, NULL, hb, 10, &nb, &vb, &err), 0);
        if (ca.model_version != version || cb.model_version != version || va != version ||
            vb != version) {
            moved = 1;
            break;
        }
        expect_class_equal(&ca, &cb);
        assert_int_equal(na, nb);
        for (size_t h = 0; h < na; h++) {
            assert_string_equal(ha[h].id, hb[h].id);
            assert_memory_equal(&ha[h].score, &hb[h].score, sizeof(float));
            assert_memory_equal(&ha[h].similarity, &hb[h].similarity, sizeof(float));
        }
    }
    omlc_close(a);
    omlc_close(b);
    return moved;
}

/* The same answers from both at one version: `version`, or, when the
 * primary published again after the two had settled (seen under
 * ThreadSanitizer on a loaded machine), the next version both settle on. */
void expect_same_answers(const omld_proc *pri, const omld_proc *rep, uint64_t version)
{
    for (int attempt = 0; answers_at(pri, rep, version); attempt++) {
        if (attempt == 5)
            fail_msg("the primary's version moved during 6 comparisons");
        version = wait_same_version(pri, rep);
    }
}


uint64_t wait_all_versions(const omld_proc *p, int n)
{
    json_int_t last = -1;
    double since = now_s();
    for (int i = 0; i < 3000; i++) {
        json_t *s = status(&p[0]);
        json_int_t v = s ? figure(s, "model", "version") : -1;
        json_decref(s);
        int same = v > 0;
        for (int j = 1; j < n && same; j++) {
            json_t *t = status(&p[j]);
            same = t && figure(t, "model", "version") == v;
            json_decref(t);
        }
        if (v != last) {
            last = v;
            since = now_s();
        } else if (same && now_s() - since > 1.0) {
            return (uint64_t)v;
        }
        usleep(20000);
    }
    for (int j = 0; j < n; j++) { /* who is behind, and what it says */
        json_t *t = status(&p[j]);
        char *r = t ? json_dumps(json_object_get(t, "replication"), JSON_COMPACT) : NULL;
        fprintf(stderr, "node %d (%s): version %lld, replication %s\n", j, p[j].rpc,
                t ? (long long)figure(t, "model", "version") : -1LL, r ? r : "?");
        free(r);
        json_decref(t);
    }
    fail_msg("the replicas did not reach the primary's version %lld", (long long)last);
    return 0;
}

void expect_class_equal(const omlc_classification *a, const omlc_classification *b)
{
    assert_int_equal(a->model_version, b->model_version);
    assert_string_equal(a->label, b->label);
    assert_int_equal(a->n_scores, b->n_scores);
    for (int s = 0; s < a->n_scores; s++) {
        assert_string_equal(a->scores[s].label, b->scores[s].label);
        assert_memory_equal(&a->scores[s].score, &b->scores[s].score, sizeof(float));
    }
}

void expect_hits_equal(const omlc_hit *a, size_t na, const omlc_hit *b, size_t nb)
{
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++) {
        assert_string_equal(a[i].id, b[i].id);
        assert_string_equal(a[i].label, b[i].label);
        assert_memory_equal(&a[i].score, &b[i].score, sizeof(float));
        assert_memory_equal(&a[i].similarity, &b[i].similarity, sizeof(float));
    }
}

int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void measure_lag(omlc *c, const omld_proc *rep, int n_rep, double secs, int seq,
                 lag_figures *f)
{
    size_t cap = (size_t)(secs * 60) + 16, n = 0;
    double *lag_s = calloc(cap, sizeof *lag_s), *lag_r = calloc(cap, sizeof *lag_r);
    double *delay = calloc(cap, sizeof *delay);
    assert_true(lag_s && lag_r && delay);
    double t0 = now_s(), next_sample = t0;
    int sent = 0;
    for (int tick = 0; now_s() - t0 < secs; tick++) {
        add_triplets(c, seq + sent, 50, 50);
        sent += 50;
        double due = t0 + (tick + 1) * 0.01;
        do { /* at least one look a tick: behind the rate (a sanitizer build), still samples */
            if (now_s() >= next_sample && n < cap) {
                json_t *s = status(&rep[n % (size_t)n_rep]);
                json_t *r = json_object_get(s, "replication");
                lag_r[n] = (double)json_integer_value(json_object_get(r, "lag_records"));
                lag_s[n] = json_number_value(json_object_get(r, "lag_seconds"));
                delay[n] = json_number_value(json_object_get(r, "apply_delay_seconds"));
                n++;
                json_decref(s);
                next_sample += 0.02;
            }
            usleep(500);
        } while (now_s() < due);
    }
    assert_true(n > 0);
    f->rate = sent / (now_s() - t0);
    f->samples = n;
    qsort(lag_s, n, sizeof *lag_s, cmp_double);
    qsort(lag_r, n, sizeof *lag_r, cmp_double);
    qsort(delay, n, sizeof *delay, cmp_double);
    f->rec_p50 = lag_r[n / 2], f->rec_p99 = lag_r[n * 99 / 100], f->rec_max = lag_r[n - 1];
    f->sec_p50 = lag_s[n / 2], f->sec_p99 = lag_s[n * 99 / 100], f->sec_max = lag_s[n - 1];
    f->delay_p50 = delay[n / 2], f->delay_p99 = delay[n * 99 / 100];
    f->delay_max = delay[n - 1];
    free(lag_s);
    free(lag_r);
    free(delay);
}
