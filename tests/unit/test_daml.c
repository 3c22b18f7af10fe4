/* test_daml.c - DAML (daml.h): the metric terms Eq. 8-12 and the generator
 * objective Eq. 6 against central finite differences, in double, w.r.t. the
 * embeddings (and the synthetic negatives); the whole joint step (Eq. 7,
 * both readings) through both networks for every parameter group, against a
 * naive double-precision reference forward written here; each plain term
 * through the metric network; the toy problem every method must learn
 * (R@1 > 0.8); the refusals.
 *
 * Non-smooth points (a hinge or a hard max switching, a ReLU crossing its
 * kink) show as a second difference and are skipped; most entries of each
 * group must still be checked. */
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
#include "daml.h"
#include "rng.h"

#define MAXW OML_TEST_BATCH_MAXW

static const char *const TERM[4] = {"contrastive", "triplet", "lifted", "npair"};

static void rand_rows(double *F, int32_t n, int32_t e, int normalize, oml_rng *rng)
{
    for (int32_t i = 0; i < n; i++) {
        double s = 0;
        for (int32_t k = 0; k < e; k++) {
            F[i * e + k] = oml_rng_normal(rng);
            s += F[i * e + k] * F[i * e + k];
        }
        for (int32_t k = 0; normalize && k < e; k++)
            F[i * e + k] /= sqrt(s);
    }
}

/* Central differences of f(v) at every entry of v (len) against g. */
typedef double (*scalar_fn)(void *ctx);

static void fd_check(const char *what, double *v, int32_t len, const double *g, scalar_fn f,
                     void *ctx, double atol, double rtol)
{
    double L0 = f(ctx);
    int checked = 0, skipped = 0;
    for (int32_t k = 0; k < len; k++) {
        double h = 1e-6, x = v[k];
        v[k] = x + h;
        double lp = f(ctx);
        v[k] = x - h;
        double lm = f(ctx);
        v[k] = x;
        if (fabs(lp - 2 * L0 + lm) > 1e-9) {
            skipped++;
            continue;
        }
        double fd = (lp - lm) / (2 * h);
        if (fabs(fd - g[k]) > atol + rtol * fabs(fd))
            fail_msg("%s entry %d: analytic %.10g, finite differences %.10g", what, k, g[k], fd);
        checked++;
    }
    if (!(checked > 0 && checked >= 3 * skipped))
        fail_msg("%s: %d checked, %d skipped", what, checked, skipped);
}

/* ---- J_m and J_gen w.r.t. embeddings and synthetic negatives ---- */

typedef struct jm_ctx {
    oml_daml_hp *hp;
    oml_daml_plan *pl;
    double *F, *g, *Xs, *gXs;
    float *X;
    int32_t e, dim, synthetic;
} jm_ctx;

static double jm_value(void *c_)
{
    jm_ctx *c = c_;
    return oml_daml_jm(c->hp, c->pl, c->F, c->e, c->synthetic, c->g);
}

static double jgen_value(void *c_)
{
    jm_ctx *c = c_;
    return oml_daml_jgen(c->hp, c->pl, c->Xs, c->X, c->dim, c->F, c->e, c->gXs, c->g);
}

static void test_terms_grad_embeddings(void **state)
{
    (void)state;
    enum { N = 12, E = 5, DIM = 7 };
    int32_t y[N];
    for (int i = 0; i < N; i++)
        y[i] = i / 4; /* 3 classes x 4, class-major as the m x k sampler */
    for (int term = 0; term < 4; term++)
        for (int syn = 0; syn <= 1; syn++) {
            oml_daml_hp hp;
            oml_daml_hp_default(&hp, term);
            hp.gen_per_anchor = 3;
            hp.alpha = term == OML_DAML_LIFTED ? 1.2f : 1.0f;
            oml_daml_plan pl;
            assert_int_equal(oml_daml_plan_init(&pl, &hp, N, syn), OML_OK);
            oml_rng rng;
            oml_rng_seed(&rng, 100 + term * 2 + syn);
            int32_t T = oml_daml_plan_build(&pl, &hp, y, N, syn, &rng);
            assert_true(T > 0);
            if (term == OML_DAML_NPAIR)
                assert_int_equal(T, 2 * 3 * 2); /* k/2 tuples x C anchors x (C-1) */
            int32_t rows = N + (syn ? T : 0);
            double *F = malloc(sizeof(double) * rows * E), *g = malloc(sizeof(double) * rows * E);
            double *g2 = malloc(sizeof(double) * rows * E);
            rand_rows(F, rows, E, 1, &rng);
            jm_ctx c = {&hp, &pl, F, g2, NULL, NULL, NULL, E, DIM, syn};
            double J = oml_daml_jm(&hp, &pl, F, E, syn, g);
            assert_true(J > 0 && isfinite(J));
            char what[64];
            snprintf(what, sizeof what, "J_m %s%s", TERM[term], syn ? " (synthetic)" : "");
            fd_check(what, F, rows * E, g, jm_value, &c, 1e-7, 1e-6);
            if (syn) {
                /* J_gen, Eq. 6: w.r.t. the synthetic negatives and the embeddings. */
                double *Xs = malloc(sizeof(double) * T * DIM), *gXs = malloc(sizeof(double) * T * DIM);
                double *gXs2 = malloc(sizeof(double) * T * DIM);
                float *X = malloc(sizeof(float) * N * DIM);
                for (int k = 0; k < T * DIM; k++)
                    Xs[k] = oml_rng_normal(&rng);
                for (int k = 0; k < N * DIM; k++)
                    X[k] = oml_rng_uniform(&rng);
                hp.alpha = 0.05f; /* most adversarial hinges active */
                jm_ctx cg = {&hp, &pl, F, g2, Xs, gXs2, X, E, DIM, syn};
                double Jg = oml_daml_jgen(&hp, &pl, Xs, X, DIM, F, E, gXs, g);
                assert_true(Jg > 0);
                snprintf(what, sizeof what, "J_gen %s dF", TERM[term]);
                fd_check(what, F, rows * E, g, jgen_value, &cg, 1e-6, 1e-6);
                snprintf(what, sizeof what, "J_gen %s dXs", TERM[term]);
                fd_check(what, Xs, T * DIM, gXs, jgen_value, &cg, 1e-6, 1e-6);
                free(Xs);
                free(gXs);
                free(gXs2);
                free(X);
            }
            free(F);
            free(g);
            free(g2);
            oml_daml_plan_free(&pl);
        }
}

/* Eq. 9 by hand: one triplet in 1-d, D(a,p)^2 = 0.04, D(a,n)^2 = 0.25, alpha 1. */
static void test_terms_hand_worked(void **state)
{
    (void)state;
    oml_daml_hp hp;
    oml_daml_hp_default(&hp, OML_DAML_TRIPLET);
    int32_t a = 0, p = 1, j = 2, gs[2] = {0, 1};
    oml_daml_plan pl = {.term = OML_DAML_TRIPLET, .n = 3, .T = 1, .G = 1, .a = &a, .p = &p,
                        .j = &j, .gs = gs};
    double F[3] = {0.0, 0.2, 0.5}, g[3];
    assert_true(fabs(oml_daml_jm(&hp, &pl, F, 1, 0, g) - (0.04 - 0.25 + 1.0)) < 1e-12);
    assert_true(fabs(g[1] - 0.4) < 1e-12 && fabs(g[2] + 1.0) < 1e-12 && fabs(g[0] - 0.6) < 1e-12);
    /* Eq. 8: 0.04 + [1 - 0.25]_+ = 0.79. */
    pl.term = hp.term = OML_DAML_CONTRASTIVE;
    assert_true(fabs(oml_daml_jm(&hp, &pl, F, 1, 0, g) - 0.79) < 1e-12);
    /* Eq. 12 with 1-d "embeddings": log(1 + exp(0*0.5 - 0*0.2)) = log 2. */
    pl.term = hp.term = OML_DAML_NPAIR;
    assert_true(fabs(oml_daml_jm(&hp, &pl, F, 1, 0, g) - log(2.0)) < 1e-12);
}

static void ref_metric(const oml_batch_layout *lay, const double *p, const double *x, double *f)
{
    oml_test_batch_ref_forward(lay, p, x, f, NULL);
}

static void ref_gen(const oml_daml_gen *g, const double *q, const double *u, double *out)
{
    double h1[MAXW], h2[MAXW];
    int32_t d = g->dim, H = g->hidden;
    for (int r = 0; r < H; r++) {
        double a = q[g->b1 + r];
        for (int c = 0; c < 3 * d; c++)
            a += q[g->w1 + r * 3 * d + c] * u[c];
        h1[r] = a > 0 ? a : 0;
    }
    for (int r = 0; r < H; r++) {
        double a = q[g->b2 + r];
        for (int c = 0; c < H; c++)
            a += q[g->w2 + r * H + c] * h1[c];
        h2[r] = a > 0 ? a : 0;
    }
    for (int r = 0; r < d; r++) {
        double a = q[g->b3 + r];
        for (int c = 0; c < H; c++)
            a += q[g->w3 + r * H + c] * h2[c];
        out[r] = a;
    }
}

typedef struct joint_ctx {
    const oml_batch_layout *lay;
    const oml_daml_gen *gen;
    oml_daml_hp *hp;
    const oml_daml_plan *pl;
    const float *X;
    double *pf, *pg;  /* the parameters, perturbed by fd_check */
    int32_t n;
    int which;        /* 0: J_gen + lambda J_m, 1: lambda J_m, 2: J_gen */
} joint_ctx;

static double joint_value(void *c_)
{
    joint_ctx *c = c_;
    const oml_daml_plan *pl = c->pl;
    int32_t d = c->lay->dim, e = c->lay->emb, n = c->n, T = pl->T;
    double *F = malloc(sizeof(double) * (size_t)(n + T) * e);
    double *Xs = malloc(sizeof(double) * (size_t)T * d), *gF = malloc(sizeof(double) * (n + T) * e);
    double *gXs = malloc(sizeof(double) * (size_t)T * d), x[MAXW], u[3 * MAXW];
    for (int32_t i = 0; i < n; i++) {
        for (int k = 0; k < d; k++)
            x[k] = c->X[i * d + k];
        ref_metric(c->lay, c->pf, x, F + (size_t)i * e);
    }
    for (int32_t t = 0; t < T; t++) {
        int32_t pos = pl->term == OML_DAML_CONTRASTIVE ? pl->a[t] : pl->p[t];
        for (int k = 0; k < d; k++) {
            u[k] = c->X[pl->j[t] * d + k];
            u[d + k] = c->X[pl->a[t] * d + k];
            u[2 * d + k] = c->X[pos * d + k];
        }
        ref_gen(c->gen, c->pg, u, Xs + (size_t)t * d);
        ref_metric(c->lay, c->pf, Xs + (size_t)t * d, F + (size_t)(n + t) * e);
    }
    double jm = oml_daml_jm(c->hp, pl, F, e, 1, gF);
    double jg = oml_daml_jgen(c->hp, pl, Xs, c->X, d, F, e, gXs, gF);
    free(F);
    free(Xs);
    free(gF);
    free(gXs);
    return c->which == 1 ? c->hp->lambda * jm : c->which == 2 ? jg : jg + c->hp->lambda * jm;
}

static void joint_check(int term, int literal, int depth, uint64_t seed)
{
    enum { N = 12, DIM = 6, HID = 8, EMB = 4, GH = 7 };
    oml_batch_layout lay;
    assert_int_equal(oml_batch_layout_init(&lay, DIM, depth, HID, EMB, 1, NULL), OML_OK);
    oml_batch_model *m = NULL;
    assert_int_equal(oml_batch_model_create(&m, &lay, seed, NULL), OML_OK);
    oml_daml_hp hp;
    oml_daml_hp_default(&hp, term);
    hp.gen_hidden = GH;
    hp.gen_per_anchor = 2;
    hp.literal = literal;
    hp.alpha = 0.1f;   /* keep hinges of Eq. 6 and Eq. 8-11 active */
    hp.lambda2 = 5.0f; /* a smaller weight keeps the check's scale moderate */
    oml_daml_ctx *c = NULL;
    assert_int_equal(oml_daml_ctx_create(&c, &hp, &lay, N, seed + 1), OML_OK);
    oml_rng rng;
    oml_rng_seed(&rng, seed + 2);
    float X[N * DIM];
    int32_t y[N];
    for (int i = 0; i < N * DIM; i++)
        X[i] = oml_rng_uniform(&rng);
    for (int j = 0; j < DIM; j++)
        m->params[lay.mu + j] = 0.1f * oml_rng_normal(&rng);
    for (int i = 0; i < N; i++)
        y[i] = i / 4;
    oml_daml_plan *pl = oml_daml_ctx_plan(c);
    assert_true(oml_daml_plan_build(pl, &hp, y, N, 1, &rng) > 0);
    oml_daml_gen *gen = oml_daml_ctx_gen(c);
    float *gf = malloc(lay.count * sizeof(float)), *gg = malloc(gen->count * sizeof(float));
    double jg, jm;
    assert_int_equal(oml_daml_eval(c, m->params, X, N, &jg, &jm, gf, gg), OML_OK);
    double *pf = malloc(lay.count * sizeof(double)), *pg = malloc(gen->count * sizeof(double));
    double *af = malloc(lay.count * sizeof(double)), *ag = malloc(gen->count * sizeof(double));
    for (size_t k = 0; k < lay.count; k++) {
        pf[k] = m->params[k];
        af[k] = gf[k];
    }
    for (size_t k = 0; k < gen->count; k++) {
        pg[k] = gen->params[k];
        ag[k] = gg[k];
    }
    joint_ctx jc = {&lay, gen, &hp, pl, X, pf, pg, N, literal ? 0 : 2};
    double ref = joint_value(&jc);
    assert_true(fabs(ref - jg) < 1e-3 * (1 + fabs(jg)) || literal);
    char what[96];
    /* Generator groups: W1 b1 W2 b2 W3 b3 (Eq. 6 through G, and with literal
     * also lambda J_m through x~). */
    size_t gstart[7] = {gen->w1, gen->b1, gen->w2, gen->b2, gen->w3, gen->b3, gen->count};
    for (int q = 0; q < 6; q++) {
        snprintf(what, sizeof what, "%s literal %d depth %d generator group %d", TERM[term],
                 literal, depth, q);
        fd_check(what, pg + gstart[q], (int32_t)(gstart[q + 1] - gstart[q]), ag + gstart[q],
                 joint_value, &jc, 2e-4, 2e-3);
    }
    /* Metric groups W(1..depth), Theta: lambda J_m (adversarial) or J (literal). */
    jc.which = literal ? 0 : 1;
    for (int grp = 1; grp <= depth + 1; grp++) {
        size_t from = grp <= depth ? lay.w[grp] : lay.theta;
        size_t to = grp < depth ? lay.w[grp + 1] : grp == depth ? lay.theta : lay.count;
        snprintf(what, sizeof what, "%s literal %d depth %d metric group %d", TERM[term], literal,
                 depth, grp);
        fd_check(what, pf + from, (int32_t)(to - from), af + from, joint_value, &jc, 2e-4, 2e-3);
    }
    for (int j = 0; j < DIM; j++)
        assert_true(gf[lay.mu + j] == 0.0f);
    free(gf);
    free(gg);
    free(pf);
    free(pg);
    free(af);
    free(ag);
    oml_daml_ctx_destroy(c);
    oml_batch_model_destroy(m);
}

static void test_joint_grad_adversarial(void **state)
{
    (void)state;
    for (int term = 0; term < 4; term++)
        joint_check(term, 0, term % 2 ? 2 : 1, 40 + (uint64_t)term);
}

static void test_joint_grad_literal(void **state)
{
    (void)state;
    for (int term = 0; term < 4; term++)
        joint_check(term, 1, term % 2 ? 1 : 0, 50 + (uint64_t)term);
}

/* ---- each plain term through the metric network (oml_batch_loss_grad) ---- */

typedef struct plain_ctx {
    const oml_batch_layout *lay;
    oml_daml_hp *hp;
    const float *X;
    const int32_t *y;
    double *p;
    int32_t n;
} plain_ctx;

static double plain_value(void *c_)
{
    plain_ctx *c = c_;
    int32_t e = c->lay->emb, d = c->lay->dim;
    double *F = malloc(sizeof(double) * c->n * e), *gF = malloc(sizeof(double) * c->n * e);
    double *work = malloc(sizeof(double) * oml_batch_loss_work(c->n)), x[MAXW];
    for (int32_t i = 0; i < c->n; i++) {
        for (int k = 0; k < d; k++)
            x[k] = c->X[i * d + k];
        ref_metric(c->lay, c->p, x, F + (size_t)i * e);
    }
    oml_rng rng;
    oml_rng_seed(&rng, 77); /* the same tuples as the library call */
    double L = oml_daml_plain_loss(c->hp, F, c->y, c->n, e, gF, &rng, work);
    free(F);
    free(gF);
    free(work);
    return L;
}

static void test_plain_grad_network(void **state)
{
    (void)state;
    enum { N = 12, DIM = 6 };
    for (int term = 0; term < 4; term++)
        for (int depth = 0; depth <= 2; depth += 2) {
            oml_batch_layout lay;
            assert_int_equal(oml_batch_layout_init(&lay, DIM, depth, 8, 4, 1, NULL), OML_OK);
            oml_batch_model *m = NULL;
            assert_int_equal(oml_batch_model_create(&m, &lay, 60 + term, NULL), OML_OK);
            oml_rng rng;
            oml_rng_seed(&rng, 61 + term);
            float X[N * DIM];
            int32_t y[N];
            for (int i = 0; i < N * DIM; i++)
                X[i] = oml_rng_normal(&rng);
            for (int i = 0; i < N; i++)
                y[i] = i / 4;
            oml_daml_hp hp;
            oml_daml_hp_default(&hp, term);
            hp.alpha = 1.5f;
            float *grad = malloc(lay.count * sizeof(float));
            double L;
            oml_rng r2;
            oml_rng_seed(&r2, 77);
            assert_int_equal(oml_batch_loss_grad(m, oml_daml_plain_loss, &hp, X, y, N, &r2, grad, &L),
                             OML_OK);
            double *p = malloc(lay.count * sizeof(double)), *g = malloc(lay.count * sizeof(double));
            for (size_t k = 0; k < lay.count; k++) {
                p[k] = m->params[k];
                g[k] = grad[k];
            }
            plain_ctx pc = {&lay, &hp, X, y, p, N};
            assert_true(fabs(plain_value(&pc) - L) < 1e-4 * (1 + fabs(L)));
            for (int grp = 1; grp <= depth + 1; grp++) {
                size_t from = grp <= depth ? lay.w[grp] : lay.theta;
                size_t to = grp < depth ? lay.w[grp + 1] : grp == depth ? lay.theta : lay.count;
                char what[64];
                snprintf(what, sizeof what, "plain %s depth %d group %d", TERM[term], depth, grp);
                fd_check(what, p + from, (int32_t)(to - from), g + from, plain_value, &pc, 2e-4,
                         2e-3);
            }
            free(grad);
            free(p);
            free(g);
            oml_batch_model_destroy(m);
        }
}

/* ---- training ---- */

/* Three Gaussian classes in 8-d with 4 noisy dimensions (as test_batch). */
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

static void toy_spec(oml_batch_spec *sp)
{
    oml_batch_spec_default(sp, OML_BATCH_TRIPLET);
    sp->hidden = 16;
    sp->emb = 4;
    sp->m = 3;
    sp->k = 8;
    sp->epochs = 15;
    sp->lr = 1e-2f;
    sp->val_frac = 0.2f;
    /* The toy's high-variance directions (dims 4-7) are pure noise, so the PCA
     * start would read only noise: these tests are about the losses learning
     * from the random start. */
    sp->init_pca = OML_BATCH_PCA_OFF;
}

static void test_toy_learns(void **state)
{
    (void)state;
    enum { N = 300, D = 8 };
    float X[N * D], E[N * 4];
    int32_t y[N];
    blobs(X, y, N, D, 3);
    for (int daml = 0; daml <= 1; daml++)
        for (int term = 0; term < 4; term++) {
            oml_batch_spec sp;
            toy_spec(&sp);
            oml_daml_hp hp;
            oml_daml_hp_default(&hp, term);
            hp.gen_hidden = 16;
            hp.pretrain_epochs = 5;
            hp.joint_epochs = 5;
            hp.gen_warmup = 10;
            if (term == OML_DAML_LIFTED) { /* Eq. 11's hard max plateaus for a few epochs */
                sp.epochs = 30;
                sp.patience = 0;
                hp.pretrain_epochs = 20;
            }
            oml_batch_model *m = NULL;
            oml_diag d = {0};
            int rc = daml ? oml_daml_train(&sp, &hp, X, y, N, D, &m, &d)
                          : oml_daml_train_plain(&sp, &hp, X, y, N, D, &m, &d);
            if (rc != OML_OK)
                fail_msg("%s%s: %d %s", daml ? "daml-" : "", TERM[term], rc, d.msg);
            assert_int_equal(m->method, daml ? OML_BATCH_DAML_CONTRASTIVE + term
                                             : term == OML_DAML_TRIPLET
                                                   ? OML_BATCH_TRIPLET
                                                   : OML_BATCH_CONTRASTIVE + (term == 0 ? 0 : term - 1));
            assert_int_equal(oml_batch_model_embed(m, X, N, E), OML_OK);
            double r1 = oml_batch_recall1(E, y, N, 4);
            if (!(r1 > 0.8))
                fail_msg("%s%s: R@1 %.3f", daml ? "daml-" : "", TERM[term], r1);
            oml_batch_model_destroy(m);
        }
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
    toy_spec(&sp);
    oml_daml_hp hp;
    oml_daml_hp_default(&hp, OML_DAML_LIFTED);
    oml_batch_model *m = NULL;
    oml_diag d = {0};
    assert_int_equal(oml_daml_train(&sp, &hp, X, one, N, D, &m, &d), OML_EEMPTY);
    assert_null(m);
    assert_string_equal(d.field, "labels");
    assert_non_null(strstr(d.msg, "two classes"));
    memset(&d, 0, sizeof d);
    assert_int_equal(oml_daml_train(&sp, &hp, X, y, 3, D, &m, &d), OML_EEMPTY);
    assert_string_equal(d.field, "items");
    assert_int_equal(oml_daml_train_plain(&sp, &hp, X, one, N, D, &m, &d), OML_EEMPTY);
    assert_null(m);
    hp.term = 9;
    assert_int_equal(oml_daml_train(&sp, &hp, X, y, N, D, &m, &d), OML_EINVAL);
    assert_string_equal(d.field, "term");
    oml_daml_hp_default(&hp, OML_DAML_NPAIR);
    hp.alpha = -1;
    assert_int_equal(oml_daml_train(&sp, &hp, X, y, N, D, &m, &d), OML_EINVAL);
    assert_string_equal(d.field, "alpha");
    oml_daml_hp_default(&hp, OML_DAML_NPAIR);
    sp.sampler = OML_BATCH_SAMPLE_RANDOM;
    assert_int_equal(oml_daml_train(&sp, &hp, X, y, N, D, &m, &d), OML_EINVAL);
    assert_string_equal(d.field, "sampler");
    assert_null(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_terms_hand_worked),
        cmocka_unit_test(test_terms_grad_embeddings),
        cmocka_unit_test(test_joint_grad_adversarial),
        cmocka_unit_test(test_joint_grad_literal),
        cmocka_unit_test(test_plain_grad_network),
        cmocka_unit_test(test_toy_learns),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
