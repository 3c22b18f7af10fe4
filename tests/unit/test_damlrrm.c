/* test_damlrrm.c - DAMLRRM (damlrrm.h): Prim's tree (Sec. 3.3) against
 * Kruskal's on small random graphs; Lg (Eq. 4), Ls (Eq. 5) and L (Eq. 6)
 * against central finite differences in double, w.r.t. the embeddings and
 * through the network for every parameter group (a naive double forward
 * written here); a hand-worked Lg; the neat / shuffled stream structure of
 * Eq. 1-2; the toy problem (R@1 > 0.8); the refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "batch_ref.h"
#include "damlrrm.h"
#include "rng.h"

#define MAXW OML_TEST_BATCH_MAXW

/* ---- Prim vs brute force ---- */

static int32_t uf_find(int32_t *par, int32_t x)
{
    while (par[x] != x)
        x = par[x] = par[par[x]];
    return x;
}

/* Kruskal's minimum spanning tree weight on the complete graph of D (k, k). */
static double kruskal(const double *D, int32_t k)
{
    int32_t E = k * (k - 1) / 2, eu[64], ev[64], par[16], order[64];
    for (int32_t i = 0, t = 0; i < k; i++)
        for (int32_t j = i + 1; j < k; j++, t++) {
            eu[t] = i;
            ev[t] = j;
            order[t] = t;
        }
    for (int32_t a = 1; a < E; a++) /* insertion sort by weight */
        for (int32_t b = a; b > 0 && D[eu[order[b]] * k + ev[order[b]]]
                                         < D[eu[order[b - 1]] * k + ev[order[b - 1]]];
             b--) {
            int32_t t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    for (int32_t i = 0; i < k; i++)
        par[i] = i;
    double w = 0;
    for (int32_t t = 0; t < E; t++) {
        int32_t a = uf_find(par, eu[order[t]]), b = uf_find(par, ev[order[t]]);
        if (a != b) {
            par[a] = b;
            w += D[eu[order[t]] * k + ev[order[t]]];
        }
    }
    return w;
}

static void test_prim_vs_kruskal(void **state)
{
    (void)state;
    oml_rng rng;
    oml_rng_seed(&rng, 9);
    for (int trial = 0; trial < 400; trial++) {
        int32_t k = 1 + (int32_t)oml_rng_below(&rng, 10);
        double D[100], key[10];
        int32_t idx[10], eu[10], ev[10], near[10], in[10], par[10];
        for (int32_t i = 0; i < k; i++) {
            D[i * k + i] = 0;
            idx[i] = i;
            for (int32_t j = i + 1; j < k; j++) {
                /* Some trials use few distinct weights: ties must not matter. */
                double w = trial % 3 == 0 ? (double)oml_rng_below(&rng, 3) : oml_rng_uniform(&rng);
                D[i * k + j] = D[j * k + i] = w;
            }
        }
        double w = oml_damlrrm_prim(D, k, idx, k, eu, ev, key, near, in);
        double sum = 0;
        for (int32_t i = 0; i < k; i++)
            par[i] = i;
        for (int32_t t = 0; t < k - 1; t++) { /* n - 1 edges joining two components each */
            assert_true(eu[t] >= 0 && eu[t] < k && ev[t] >= 0 && ev[t] < k);
            int32_t a = uf_find(par, eu[t]), b = uf_find(par, ev[t]);
            assert_true(a != b);
            par[a] = b;
            sum += D[eu[t] * k + ev[t]];
        }
        for (int32_t i = 1; i < k; i++) /* spanning */
            assert_int_equal(uf_find(par, i), uf_find(par, 0));
        assert_true(fabs(sum - w) < 1e-12);
        assert_true(fabs(w - kruskal(D, k)) < 1e-12);
    }
    /* The tree over a subset idx of a larger matrix uses only those rows. */
    double D[16] = {0, 1, 9, 2, 1, 0, 9, 5, 9, 9, 0, 9, 2, 5, 9, 0}, key[3];
    int32_t idx[3] = {0, 1, 3}, eu[2], ev[2], near[3], in[3];
    assert_true(fabs(oml_damlrrm_prim(D, 4, idx, 3, eu, ev, key, near, in) - 3.0) < 1e-15);
}

/* ---- the losses ---- */

/* Lg by hand: neat rows 0,1,2 of class 0 on a line at 0, 1, 3 and row 3 of
 * class 1 at 3.5; alpha 2, beta 0.5. Tree: (0,1) d 1 -> [1 - 1.5]_+ = 0,
 * (1,2) d 2 -> [0.5]^2 = 0.25. Negatives: (0,3) 3.5 -> 0, (1,3) 2.5 -> 0,
 * (2,3) 0.5 -> [2.5 - 0.5]^2 = 4. Pg = 2: Lg = 4.25 / 2. */
static void test_lg_hand_worked(void **state)
{
    (void)state;
    oml_damlrrm_hp hp = {2.0f, 0.5f, 0.75f};
    double F[4] = {0, 1, 3, 3.5}, D[16], g[4] = {0}, work[16];
    int32_t y[4] = {0, 0, 0, 1};
    oml_batch_pdist(F, 4, 1, D);
    assert_true(fabs(oml_damlrrm_lg(&hp, F, D, y, 4, 4, 1, g, work) - 2.125) < 1e-12);
    /* d/dF: tree pair (1,2): 2 * 0.5 / 2 = 0.5 on D(1,2); negative (2,3): -2 * 2 / 2 = -2 on D(2,3). */
    assert_true(fabs(g[1] - (-0.5)) < 1e-12);
    assert_true(fabs(g[2] - (0.5 + 2.0)) < 1e-12);
    assert_true(fabs(g[3] - (-2.0)) < 1e-12);
}

typedef struct loss_ctx {
    oml_damlrrm_hp *hp;
    double *F, *D, *g, *work;
    int32_t *y, n, neat, e, part; /* part: 0 Lg, 1 Ls, 2 L */
} loss_ctx;

static double loss_value(loss_ctx *c, double *g)
{
    oml_batch_pdist(c->F, c->n, c->e, c->D);
    memset(g, 0, sizeof(double) * (size_t)c->n * c->e);
    if (c->part == 0)
        return oml_damlrrm_lg(c->hp, c->F, c->D, c->y, c->n, c->neat, c->e, g, c->work);
    if (c->part == 1)
        return oml_damlrrm_ls(c->hp, c->F, c->D, c->y, c->n, c->neat, c->e, g);
    return oml_damlrrm_loss(c->hp, c->F, c->y, c->n, c->e, g, NULL, c->work);
}

static void check_embedding_grad(int part, uint64_t seed)
{
    enum { N = 16, E = 3 };
    oml_damlrrm_hp hp = {1.5f, 0.3f, 0.75f};
    oml_rng rng;
    oml_rng_seed(&rng, seed);
    double F[N * E], D[N * N], g[N * E], g2[N * E], work[2 * N * N + 8 * N + 8];
    int32_t y[N];
    for (int i = 0; i < N; i++)
        y[i] = i < N / 2 ? i / 3 : (int32_t)oml_rng_below(&rng, 4); /* shuffled: class 3 unseen */
    for (int i = 0; i < N * E; i++)
        F[i] = oml_rng_normal(&rng);
    loss_ctx c = {&hp, F, D, g, work, y, N, N / 2, E, part};
    double L0 = loss_value(&c, g);
    assert_true(L0 > 0);
    int checked = 0, skipped = 0;
    for (int k = 0; k < N * E; k++) {
        double h = 1e-6, v = F[k];
        F[k] = v + h;
        double lp = loss_value(&c, g2);
        F[k] = v - h;
        double lm = loss_value(&c, g2);
        F[k] = v;
        if (fabs(lp - 2 * L0 + lm) > 1e-8) { /* Pg / Ps or the tree changed */
            skipped++;
            continue;
        }
        double fd = (lp - lm) / (2 * h);
        if (fabs(fd - g[k]) > 1e-6 + 1e-5 * fabs(fd))
            fail_msg("part %d coordinate %d: analytic %.10g finite differences %.10g", part, k,
                     g[k], fd);
        checked++;
    }
    if (!(checked >= 3 * skipped && checked > 0))
        fail_msg("part %d: %d checked, %d skipped", part, checked, skipped);
}

static void test_losses_grad_embeddings(void **state)
{
    (void)state;
    for (int part = 0; part < 3; part++)
        for (uint64_t s = 1; s <= 3; s++)
            check_embedding_grad(part, 10 * (uint64_t)part + s);
}

/* Through the network: the reference forward, then oml_damlrrm_loss. */
static void ref_forward(const oml_batch_layout *lay, const double *p, const float *x, double *f)
{
    double xd[MAXW];
    for (int j = 0; j < lay->dim; j++)
        xd[j] = x[j];
    oml_test_batch_ref_forward(lay, p, xd, f, NULL);
}

static double net_loss(const oml_batch_layout *lay, const double *p, const float *X,
                       const int32_t *y, int32_t n, const oml_damlrrm_hp *hp)
{
    double F[16 * 4], gF[16 * 4], work[2 * 16 * 16 + 8 * 16 + 8];
    for (int32_t i = 0; i < n; i++)
        ref_forward(lay, p, X + (size_t)i * lay->dim, F + (size_t)i * lay->emb);
    return oml_damlrrm_loss(hp, F, y, n, lay->emb, gF, NULL, work);
}

static void test_loss_grad_network(void **state)
{
    (void)state;
    enum { N = 16, DIM = 6 };
    oml_damlrrm_hp hp = {1.0f, 0.3f, 0.75f};
    for (int depth = 0; depth <= 2; depth++) {
        oml_batch_layout lay;
        assert_int_equal(oml_batch_layout_init(&lay, DIM, depth, 8, 4, 0, NULL), OML_OK);
        oml_batch_model *m = NULL;
        assert_int_equal(oml_batch_model_create(&m, &lay, 70 + depth, NULL), OML_OK);
        oml_rng rng;
        oml_rng_seed(&rng, 80 + depth);
        float X[N * DIM];
        int32_t y[N];
        for (int i = 0; i < N * DIM; i++)
            X[i] = oml_rng_normal(&rng);
        for (int i = 0; i < N; i++)
            y[i] = i < N / 2 ? i / 4 : (int32_t)oml_rng_below(&rng, 3);
        float *grad = malloc(lay.count * sizeof(float));
        double L;
        assert_int_equal(oml_batch_loss_grad(m, oml_damlrrm_loss, &hp, X, y, N, NULL, grad, &L),
                         OML_OK);
        double *p = malloc(lay.count * sizeof(double));
        for (size_t k = 0; k < lay.count; k++)
            p[k] = m->params[k];
        double L0 = net_loss(&lay, p, X, y, N, &hp);
        assert_true(L0 > 0 && fabs(L0 - L) < 1e-4 * (1 + L0));
        for (int grp = 1; grp <= depth + 1; grp++) {
            size_t from = grp <= depth ? lay.w[grp] : lay.theta;
            size_t to = grp < depth ? lay.w[grp + 1] : grp == depth ? lay.theta : lay.count;
            int checked = 0, skipped = 0;
            for (size_t k = from; k < to; k++) {
                double h = 1e-6, v = p[k];
                p[k] = v + h;
                double lp = net_loss(&lay, p, X, y, N, &hp);
                p[k] = v - h;
                double lm = net_loss(&lay, p, X, y, N, &hp);
                p[k] = v;
                if (fabs(lp - 2 * L0 + lm) > 1e-9) {
                    skipped++;
                    continue;
                }
                double fd = (lp - lm) / (2 * h);
                if (fabs(fd - grad[k]) > 2e-4 + 2e-3 * fabs(fd))
                    fail_msg("depth %d group %d entry %zu: analytic %.8g, fd %.8g", depth, grp,
                             k - from, grad[k], fd);
                checked++;
            }
            if (!(checked > 0 && checked >= 3 * skipped))
                fail_msg("depth %d group %d: %d checked, %d skipped", depth, grp, checked, skipped);
        }
        free(grad);
        free(p);
        oml_batch_model_destroy(m);
    }
}

/* ---- the streams (Eq. 1-2) ---- */

static void test_streams(void **state)
{
    (void)state;
    enum { C = 5, PER = 40, N = C * PER, M = 3, K = 4 };
    int32_t labels[N], train[N - 10], nt = 0;
    for (int i = 0; i < N; i++)
        labels[i] = i % C;
    for (int i = 10; i < N; i++) /* items 0..9 are "validation": never drawn */
        train[nt++] = i;
    oml_batch_classes cls;
    assert_int_equal(oml_batch_classes_init(&cls, labels, train, nt), OML_OK);
    oml_damlrrm_streams st;
    assert_int_equal(oml_damlrrm_streams_init(&st, 0.75f, N), OML_OK);
    oml_rng rng;
    oml_rng_seed(&rng, 4);
    int32_t out[2 * M * K], first[M * K];
    int32_t half = M * K;
    for (int step = 0; step < 60; step++) {
        assert_int_equal(oml_damlrrm_sample(&st, &cls, M, K, &rng, out), 2 * half);
        if (step == 0) {
            /* N_s = q b/2 != N_x: q = round(0.75 * 190 / 12) = 12. */
            assert_int_equal(st.n_pool % half, 0);
            assert_true(st.n_pool != nt);
            assert_int_equal(st.n_pool, 12 * half);
            for (int i = 0; i < st.n_pool; i++) { /* distinct training items */
                assert_true(st.pool[i] >= 10 && st.pool[i] < N);
                for (int j = 0; j < i; j++)
                    assert_true(st.pool[j] != st.pool[i]);
            }
            memcpy(first, out + half, sizeof first);
        }
        /* Neat: m distinct classes, k items each, class-major. */
        for (int g = 0; g < M; g++) {
            int32_t lab = labels[out[g * K]];
            for (int h = 0; h < g; h++)
                assert_true(labels[out[h * K]] != lab);
            for (int i = 0; i < K; i++) {
                assert_int_equal(labels[out[g * K + i]], lab);
                assert_true(out[g * K + i] >= 10);
            }
        }
        /* Shuffled: the pool read in order, so B^s repeats every q = 12 steps
         * (Eq. 2: B^s_1 = B^s_l beside another neat batch). */
        for (int i = 0; i < half; i++)
            assert_int_equal(out[half + i], st.pool[(step * half + i) % st.n_pool]);
        if (step == 12 || step == 24)
            assert_memory_equal(out + half, first, sizeof first);
    }
    oml_damlrrm_streams_free(&st);
    oml_batch_classes_free(&cls);
}

/* ---- training ---- */

static void blobs(float *X, int32_t *y, int32_t n, int32_t dim, uint64_t seed)
{
    oml_rng rng;
    oml_rng_seed(&rng, seed);
    for (int32_t i = 0; i < n; i++) {
        y[i] = i % 3;
        for (int32_t j = 0; j < dim; j++)
            X[i * dim + j] = (j == y[i] ? 2.0f : 0.0f) + 0.5f * oml_rng_normal(&rng)
                             + (j >= 4 ? 3.0f * oml_rng_normal(&rng) : 0.0f);
    }
}

static void test_toy_learns(void **state)
{
    (void)state;
    enum { N = 300, D = 8 };
    float X[N * D], E[N * 4];
    int32_t y[N];
    blobs(X, y, N, D, 3);
    oml_batch_spec sp;
    oml_batch_spec_default(&sp, OML_BATCH_DAMLRRM);
    sp.hidden = 16;
    sp.emb = 4;
    sp.normalize = 0;
    sp.m = 3;
    sp.k = 8;
    sp.epochs = 30;
    sp.lr = 1e-2f;
    sp.val_frac = 0.2f;
    /* The toy's high-variance directions (dims 4-7) are pure noise, so the PCA
     * start would read only noise: these tests are about the losses learning
     * from the random start. */
    sp.init_pca = OML_BATCH_PCA_OFF;
    oml_damlrrm_hp hp;
    oml_damlrrm_hp_default(&hp);
    hp.alpha = 3.0f; /* the toy's unnormalised scale; the paper's 30 is for its 512-d CNN features */
    oml_batch_model *m = NULL;
    oml_diag d = {0};
    assert_int_equal(oml_damlrrm_train(&sp, &hp, X, y, N, D, &m, &d), OML_OK);
    assert_int_equal(m->method, OML_BATCH_DAMLRRM);
    assert_int_equal(oml_batch_model_embed(m, X, N, E), OML_OK);
    double r1 = oml_batch_recall1(E, y, N, 4);
    if (!(r1 > 0.8))
        fail_msg("damlrrm: R@1 %.3f", r1);
    oml_batch_model_destroy(m);
}

static void test_refusals(void **state)
{
    (void)state;
    enum { N = 40, D = 8 };
    float X[N * D];
    int32_t y[N], one[N];
    blobs(X, y, N, D, 6);
    for (int i = 0; i < N; i++)
        one[i] = 3;
    oml_batch_spec sp;
    oml_batch_spec_default(&sp, OML_BATCH_DAMLRRM);
    oml_damlrrm_hp hp;
    oml_damlrrm_hp_default(&hp);
    oml_batch_model *m = NULL;
    oml_diag d = {0};
    assert_int_equal(oml_damlrrm_train(&sp, &hp, X, one, N, D, &m, &d), OML_EEMPTY);
    assert_null(m);
    assert_string_equal(d.field, "labels");
    assert_non_null(strstr(d.msg, "two classes"));
    memset(&d, 0, sizeof d);
    assert_int_equal(oml_damlrrm_train(&sp, &hp, X, y, 3, D, &m, &d), OML_EEMPTY);
    assert_string_equal(d.field, "items");
    hp.beta = 40.0f;
    assert_int_equal(oml_damlrrm_train(&sp, &hp, X, y, N, D, &m, &d), OML_EINVAL);
    assert_string_equal(d.field, "beta");
    oml_damlrrm_hp_default(&hp);
    hp.pool_ratio = 0;
    assert_int_equal(oml_damlrrm_train(&sp, &hp, X, y, N, D, &m, &d), OML_EINVAL);
    assert_string_equal(d.field, "pool_ratio");
    assert_null(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prim_vs_kruskal),
        cmocka_unit_test(test_lg_hand_worked),
        cmocka_unit_test(test_losses_grad_embeddings),
        cmocka_unit_test(test_loss_grad_network),
        cmocka_unit_test(test_streams),
        cmocka_unit_test(test_toy_learns),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
