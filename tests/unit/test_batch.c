/* test_batch.c - the batch-training core (batch.h).
 *
 * Gradient checks: a naive double-precision forward written here, independent
 * of batch.c's sgemm path, feeds the same loss functions (which are double
 * throughout); central differences of that loss are compared with the
 * gradient oml_batch_loss_grad returns, for every parameter of every group
 * (each W(l) and Theta), for the triplet baseline, LANML and DANML, at
 * several depths. Perturbations that move a ReLU across its kink, or that
 * make the loss visibly non-smooth (a hinge or a mining choice flipping),
 * are skipped, and each group must still have most of its entries checked.
 * Then: the m x k sampler's class structure, early stopping, cancel, the
 * refusals (one class, too few items), and the model encoding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "anml.h"
#include "batch.h"
#include "batch_ref.h"
#include "rng.h"

#define MAXW OML_TEST_BATCH_MAXW

/* Reference forward of one row into f (emb); signs (depth * hidden) = ReLU pattern. */
static void ref_forward(const oml_batch_layout *lay, const double *p, const float *x, double *f,
                        signed char *signs)
{
    double xd[MAXW];
    for (int j = 0; j < lay->dim; j++)
        xd[j] = x[j];
    oml_test_batch_ref_forward(lay, p, xd, f, signs);
}

static double ref_loss(const oml_batch_layout *lay, const double *p, const float *X,
                       const int32_t *y, int32_t n, oml_batch_loss_fn loss, const void *hp,
                       signed char *signs, double *F, double *gF, double *work)
{
    for (int32_t i = 0; i < n; i++)
        ref_forward(lay, p, X + (size_t)i * lay->dim, F + (size_t)i * lay->emb,
                    signs + (size_t)i * lay->depth * lay->hidden);
    oml_rng rng;
    oml_rng_seed(&rng, 77); /* the same draws as the library call below */
    return loss(hp, F, y, n, lay->emb, gF, &rng, work);
}

static void gradcheck(oml_batch_loss_fn loss, const void *hp, int32_t depth, int normalize,
                      uint64_t seed)
{
    const int32_t n = 9, dim = 6, hidden = 8, emb = 4;
    oml_batch_layout lay;
    assert_int_equal(oml_batch_layout_init(&lay, dim, depth, hidden, emb, normalize, NULL), OML_OK);
    oml_batch_model *m = NULL;
    assert_int_equal(oml_batch_model_create(&m, &lay, seed, NULL), OML_OK);
    oml_rng rng;
    oml_rng_seed(&rng, seed + 1);
    float X[9 * 6];
    int32_t y[9];
    for (int i = 0; i < n * dim; i++)
        X[i] = oml_rng_normal(&rng);
    for (int j = 0; j < dim; j++)
        m->params[lay.mu + j] = 0.1f * oml_rng_normal(&rng); /* centring is in the path */
    for (int i = 0; i < n; i++)
        y[i] = i % 3;
    float *grad = malloc(lay.count * sizeof *grad);
    double L_lib;
    oml_rng r2;
    oml_rng_seed(&r2, 77);
    assert_int_equal(oml_batch_loss_grad(m, loss, hp, X, y, n, &r2, grad, &L_lib), OML_OK);

    double *p = malloc(lay.count * sizeof *p);
    for (size_t k = 0; k < lay.count; k++)
        p[k] = m->params[k];
    size_t ns = (size_t)n * (size_t)(depth > 0 ? depth : 1) * hidden;
    signed char *s0 = calloc(ns, 1), *s1 = calloc(ns, 1);
    double *F = malloc(sizeof(double) * n * emb), *gF = malloc(sizeof(double) * n * emb);
    double *work = malloc(sizeof(double) * oml_batch_loss_work(n));
    double L0 = ref_loss(&lay, p, X, y, n, loss, hp, s0, F, gF, work);
    if (!(L0 > 0))
        fail_msg("L0 %g L_lib %g", L0, L_lib);
    assert_true(fabs(L0 - L_lib) < 1e-4 * (1 + fabs(L0)));
    for (int j = 0; j < dim; j++)
        assert_true(grad[lay.mu + j] == 0.0f); /* mu is not trained */

    /* Groups: W(1..depth), then Theta. */
    for (int grp = 1; grp <= depth + 1; grp++) {
        size_t from = grp <= depth ? lay.w[grp] : lay.theta;
        size_t to = grp < depth ? lay.w[grp + 1] : grp == depth ? lay.theta : lay.count;
        int checked = 0, skipped = 0;
        for (size_t k = from; k < to; k++) {
            double h = 1e-6, v = p[k];
            p[k] = v + h;
            double lp = ref_loss(&lay, p, X, y, n, loss, hp, s1, F, gF, work);
            int kink = memcmp(s0, s1, ns) != 0;
            p[k] = v - h;
            double lm = ref_loss(&lay, p, X, y, n, loss, hp, s1, F, gF, work);
            kink |= memcmp(s0, s1, ns) != 0;
            p[k] = v;
            /* A hinge or a mining choice flipping shows as a second difference. */
            kink |= fabs(lp - 2 * L0 + lm) > 1e-9;
            if (kink) {
                skipped++;
                continue;
            }
            double fd = (lp - lm) / (2 * h);
            if (fabs(fd - grad[k]) > 2e-4 + 2e-3 * fabs(fd))
                fail_msg("group %d entry %zu: analytic %.8g, finite differences %.8g", grp,
                         k - from, grad[k], fd);
            checked++;
        }
        if (!(checked > 0 && checked >= 3 * skipped))
            fail_msg("group %d: %d entries checked, %d skipped at kinks", grp, checked, skipped);
    }
    free(grad);
    free(p);
    free(s0);
    free(s1);
    free(F);
    free(gF);
    free(work);
    oml_batch_model_destroy(m);
}

static void test_grad_triplet(void **state)
{
    (void)state;
    oml_triplet_hp semi = {0.5f, 0}, rnd = {0.5f, 1};
    gradcheck(oml_triplet_loss, &semi, 2, 1, 11);
    gradcheck(oml_triplet_loss, &rnd, 2, 1, 12);
    gradcheck(oml_triplet_loss, &semi, 0, 1, 13);
}

static void test_grad_lanml(void **state)
{
    (void)state;
    oml_lanml_hp h = {-1.0f, 1.0f, 3.0f, 0.1f};
    gradcheck(oml_lanml_loss, &h, 0, 0, 21); /* the paper's linear L, M = L^T L */
    gradcheck(oml_lanml_loss, &h, 2, 0, 22); /* ... and through a trunk */
}

static void test_grad_danml(void **state)
{
    (void)state;
    oml_danml_hp h;
    oml_danml_hp_default(&h);
    gradcheck(oml_danml_loss, &h, 2, 1, 31);
    gradcheck(oml_danml_loss, &h, 1, 1, 32);
    gradcheck(oml_danml_loss, &h, 0, 1, 33);
    h.gamma2 = 5.0f;
    h.scale = 1.0f;
    gradcheck(oml_danml_loss, &h, 3, 1, 34);
}

static void test_sampler_mk(void **state)
{
    (void)state;
    /* Class sizes 30, 20, 10, 3, 1 (label 40 has one item: never eligible). */
    int32_t sizes[5] = {30, 20, 10, 3, 1}, labels[64], n = 0;
    for (int c = 0; c < 5; c++)
        for (int i = 0; i < sizes[c]; i++)
            labels[n++] = 10 * c;
    oml_batch_classes cls;
    assert_int_equal(oml_batch_classes_init(&cls, labels, NULL, n), OML_OK);
    assert_int_equal(cls.n_classes, 5);
    oml_rng rng;
    oml_rng_seed(&rng, 5);
    int32_t out[64];
    for (int trial = 0; trial < 200; trial++) {
        int32_t b = oml_batch_sample_mk(&cls, 3, 5, &rng, out);
        assert_int_equal(b, 15);
        int32_t seen[3];
        for (int g = 0; g < 3; g++) {
            int32_t lab = labels[out[g * 5]];
            assert_true(lab != 40);
            for (int h = 0; h < g; h++)
                assert_true(seen[h] != lab); /* m distinct classes */
            seen[g] = lab;
            for (int i = 0; i < 5; i++) {
                int32_t it = out[g * 5 + i];
                assert_true(it >= 0 && it < n);
                assert_int_equal(labels[it], lab); /* class-major blocks of k */
                if (lab != 30) /* classes with >= k items: k distinct items */
                    for (int j = 0; j < i; j++)
                        assert_true(out[g * 5 + j] != it);
            }
        }
    }
    /* m larger than the eligible classes (4) is clipped. */
    assert_int_equal(oml_batch_sample_mk(&cls, 9, 2, &rng, out), 8);
    oml_batch_classes_free(&cls);
    /* Fewer than two eligible classes: nothing to draw. */
    int32_t one[4] = {7, 7, 7, 8};
    assert_int_equal(oml_batch_classes_init(&cls, one, NULL, 4), OML_OK);
    assert_int_equal(oml_batch_sample_mk(&cls, 2, 2, &rng, out), 0);
    oml_batch_classes_free(&cls);
}

/* Three well-separated Gaussian classes in 8-d with 4 noise dimensions. */
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

typedef struct prog_log {
    int epoch_ends, calls;
    int64_t cancel_at;
    atomic_int *flag;
} prog_log;

static void on_progress(void *ctx, const oml_batch_progress *p)
{
    prog_log *l = ctx;
    l->calls++;
    l->epoch_ends += p->epoch_end;
    if (l->flag && p->step >= l->cancel_at)
        atomic_store(l->flag, 1);
}

static void test_train_learns(void **state)
{
    (void)state;
    enum { N = 300, D = 8 };
    float X[N * D];
    int32_t y[N];
    blobs(X, y, N, D, 3);
    int32_t methods[3] = {OML_BATCH_TRIPLET, OML_BATCH_LANML, OML_BATCH_DANML};
    for (int t = 0; t < 3; t++) {
        oml_batch_spec sp;
        oml_batch_spec_default(&sp, methods[t]);
        sp.hidden = 16;
        sp.emb = 4;
        sp.m = 3;
        sp.k = 8;
        sp.epochs = 15;
        sp.lr = 1e-2f;
        sp.val_frac = 0.2f;
        /* The toy's high-variance directions (dims 4-7) are pure noise, so the PCA
         * start would read only noise: these tests are about the losses learning
         * from the random start. */
        sp.init_pca = OML_BATCH_PCA_OFF;
        oml_batch_model *m = NULL;
        oml_diag d = {0};
        assert_int_equal(oml_batch_train(&sp, X, y, N, D, &m, &d), OML_OK);
        assert_non_null(m);
        assert_true(m->val_r1 > 0.8f);
        float E[N * 4];
        assert_int_equal(oml_batch_model_embed(m, X, N, E), OML_OK);
        assert_true(oml_batch_recall1(E, y, N, 4) > 0.8);
        oml_batch_model_destroy(m);
    }
}

static void test_early_stop(void **state)
{
    (void)state;
    enum { N = 120, D = 8 };
    float X[N * D];
    int32_t y[N];
    blobs(X, y, N, D, 4);
    oml_batch_spec sp;
    oml_batch_spec_default(&sp, OML_BATCH_TRIPLET);
    sp.hidden = 8;
    sp.emb = 3;
    sp.m = 3;
    sp.k = 4;
    sp.epochs = 50;
    sp.patience = 2;
    sp.lr = 1e-12f; /* nothing moves: validation R@1 never improves after epoch 1 */
    sp.val_frac = 0.25f;
    prog_log log = {0};
    sp.progress = on_progress;
    sp.progress_ctx = &log;
    oml_batch_model *m = NULL;
    assert_int_equal(oml_batch_train(&sp, X, y, N, D, &m, NULL), OML_OK);
    assert_int_equal(m->epochs_run, 3);
    assert_int_equal(log.epoch_ends, 3);
    oml_batch_model_destroy(m);
}

static void test_cancel(void **state)
{
    (void)state;
    enum { N = 120, D = 8 };
    float X[N * D];
    int32_t y[N];
    blobs(X, y, N, D, 5);
    atomic_int flag;
    atomic_init(&flag, 0);
    oml_batch_spec sp;
    oml_batch_spec_default(&sp, OML_BATCH_DANML);
    sp.hidden = 8;
    sp.emb = 3;
    sp.m = 3;
    sp.k = 4;
    sp.epochs = 100;
    sp.cancel = &flag;
    prog_log log = {0, 0, 5, &flag};
    sp.progress = on_progress;
    sp.progress_ctx = &log;
    sp.progress_every = 1;
    oml_batch_model *m = NULL;
    /* Raised from the progress callback at step 5, mid-epoch 1. */
    assert_int_equal(oml_batch_train(&sp, X, y, N, D, &m, NULL), OML_ECANCELED);
    assert_null(m);
    assert_int_equal(log.calls, 5);
    assert_int_equal(log.epoch_ends, 0);
    assert_string_equal(oml_batch_strerror(OML_ECANCELED), "cancelled");
    /* Already raised: no step at all. */
    sp.progress = NULL;
    assert_int_equal(oml_batch_train(&sp, X, y, N, D, &m, NULL), OML_ECANCELED);
    assert_null(m);
}

static void test_refusals(void **state)
{
    (void)state;
    enum { N = 40, D = 8 };
    float X[N * D];
    int32_t y[N];
    blobs(X, y, N, D, 6);
    oml_batch_spec sp;
    oml_batch_spec_default(&sp, OML_BATCH_TRIPLET);
    oml_batch_model *m = NULL;
    oml_diag d = {0};
    int32_t one[N];
    for (int i = 0; i < N; i++)
        one[i] = 3;
    assert_int_equal(oml_batch_train(&sp, X, one, N, D, &m, &d), OML_EEMPTY);
    assert_null(m);
    assert_string_equal(d.field, "labels");
    assert_non_null(strstr(d.msg, "two classes"));
    memset(&d, 0, sizeof d);
    assert_int_equal(oml_batch_train(&sp, X, y, 3, D, &m, &d), OML_EEMPTY);
    assert_null(m);
    assert_string_equal(d.field, "items");
    /* Two classes, but one of them has a single item. */
    int32_t lone[6] = {0, 0, 0, 0, 0, 1};
    assert_int_equal(oml_batch_train(&sp, X, lone, 6, D, &m, &d), OML_EEMPTY);
    assert_null(m);
    sp.epochs = 0;
    assert_int_equal(oml_batch_train(&sp, X, y, N, D, &m, &d), OML_EINVAL);
    assert_string_equal(d.field, "epochs");
}

static void test_encode_decode(void **state)
{
    (void)state;
    oml_batch_layout lay;
    assert_int_equal(oml_batch_layout_init(&lay, 7, 2, 5, 3, 1, NULL), OML_OK);
    oml_batch_model *m = NULL, *back = NULL;
    assert_int_equal(oml_batch_model_create(&m, &lay, 9, NULL), OML_OK);
    m->method = OML_BATCH_DANML;
    m->epochs_run = 4;
    m->val_r1 = 0.75f;
    uint8_t *buf;
    size_t len;
    assert_int_equal(oml_batch_model_encode(m, &buf, &len), OML_OK);
    assert_int_equal(oml_batch_model_decode(buf, len, &back, NULL), OML_OK);
    assert_int_equal(back->lay.count, lay.count);
    assert_memory_equal(back->params, m->params, lay.count * sizeof(float));
    assert_int_equal(back->method, OML_BATCH_DANML);
    assert_true(back->val_r1 == 0.75f);
    float X[2 * 7] = {1, 2, 3, 4, 5, 6, 7, -1, 0, 1, 0, -1, 0, 1}, E1[6], E2[6];
    assert_int_equal(oml_batch_model_embed(m, X, 2, E1), OML_OK);
    assert_int_equal(oml_batch_model_embed(back, X, 2, E2), OML_OK);
    assert_memory_equal(E1, E2, sizeof E1);
    for (int i = 0; i < 2; i++) /* the head is on the unit sphere */
        assert_true(fabsf(E1[3 * i] * E1[3 * i] + E1[3 * i + 1] * E1[3 * i + 1]
                          + E1[3 * i + 2] * E1[3 * i + 2] - 1.0f) < 1e-5f);
    oml_batch_model_destroy(back);
    back = NULL;
    oml_diag d = {0};
    buf[len / 2] ^= 0x10;
    assert_int_equal(oml_batch_model_decode(buf, len, &back, &d), OML_EFORMAT);
    assert_null(back);
    assert_int_equal(oml_batch_model_decode(buf, len - 1, &back, &d), OML_EFORMAT);
    buf[len / 2] ^= 0x10;
    buf[4] = 99; /* version */
    assert_int_equal(oml_batch_model_decode(buf, len, &back, &d), OML_EVERSION);
    free(buf);
    oml_batch_model_destroy(m);
}

/* The PCA pass-through start on a hand-made set whose principal directions
 * are known: 8 points c +- 3 u1, c +- 2 u2, c +- 1 e3, c +- 0.5 e4 with
 * u1 = (0.6, 0.8, 0, 0), u2 = (0.8, -0.6, 0, 0): mean c, covariance
 * eigenvalues 9/4, 1, 1/4, 1/16 along u1, u2, e3, e4 (each signed with its
 * largest entry positive). With emb 2 the untrained embedding must be
 * (u1 . (x - c), u2 . (x - c)), divided by its norm when normalize = 1. */
static void pca_set(float *X, int32_t *y)
{
    static const float c[4] = {0.5f, -1.0f, 2.0f, 0.25f};
    static const float dirs[4][4] = {
        {0.6f, 0.8f, 0, 0}, {0.8f, -0.6f, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}};
    static const float amp[4] = {3.0f, 2.0f, 1.0f, 0.5f};
    for (int q = 0; q < 4; q++)
        for (int s = 0; s < 2; s++) {
            int i = 2 * q + s;
            for (int j = 0; j < 4; j++)
                X[i * 4 + j] = c[j] + (s ? -amp[q] : amp[q]) * dirs[q][j];
            y[i] = i % 2; /* two classes of four, for the trainer's sampler */
        }
}

static void pca_expect(const float *x, int normalize, float *out)
{
    static const float c[4] = {0.5f, -1.0f, 2.0f, 0.25f};
    float d[4];
    for (int j = 0; j < 4; j++)
        d[j] = x[j] - c[j];
    out[0] = 0.6f * d[0] + 0.8f * d[1];
    out[1] = 0.8f * d[0] - 0.6f * d[1];
    if (normalize) {
        float nrm = sqrtf(out[0] * out[0] + out[1] * out[1]);
        out[0] /= nrm;
        out[1] /= nrm;
    }
}

/* m embeds the 5 rows of Q as pca_expect says, then is destroyed. */
static void assert_embeds_as_pca(oml_batch_model *m, const float *Q, int normalize)
{
    float E[5 * 2], want[2];
    assert_int_equal(oml_batch_model_embed(m, Q, 5, E), OML_OK);
    for (int i = 0; i < 5; i++) {
        pca_expect(Q + i * 4, normalize, want);
        assert_true(fabsf(E[2 * i] - want[0]) < 1e-4f);
        assert_true(fabsf(E[2 * i + 1] - want[1]) < 1e-4f);
    }
    oml_batch_model_destroy(m);
}

static void test_init_pca(void **state)
{
    (void)state;
    float X[8 * 4], Q[5 * 4];
    int32_t y[8];
    pca_set(X, y);
    oml_rng rng;
    oml_rng_seed(&rng, 11);
    for (int i = 0; i < 5 * 4; i++)
        Q[i] = 2.0f * oml_rng_normal(&rng);
    for (int depth = 0; depth <= 2; depth++)
        for (int normalize = 0; normalize <= 1; normalize++) {
            /* Directly on a model whose mu is the mean, as the trainer sets it. */
            oml_batch_layout lay;
            assert_int_equal(oml_batch_layout_init(&lay, 4, depth, 5, 2, normalize, NULL), OML_OK);
            oml_batch_model *m = NULL;
            assert_int_equal(oml_batch_model_create(&m, &lay, 3, NULL), OML_OK);
            for (int j = 0; j < 4; j++) {
                float s = 0;
                for (int i = 0; i < 8; i++)
                    s += X[i * 4 + j];
                m->params[lay.mu + j] = s / 8;
            }
            assert_int_equal(oml_batch_model_init_pca(m, X, NULL, 8, NULL), OML_OK);
            assert_embeds_as_pca(m, Q, normalize);

            /* Through the trainer: a step of 1e-12 leaves the start in place. */
            oml_batch_spec sp;
            oml_batch_spec_default(&sp, OML_BATCH_TRIPLET);
            sp.depth = depth;
            sp.hidden = 5;
            sp.emb = 2;
            sp.normalize = normalize;
            sp.init_pca = OML_BATCH_PCA_ON;
            sp.m = 2;
            sp.k = 2;
            sp.epochs = 1;
            sp.lr = 1e-12f;
            sp.val_frac = 0;
            oml_diag d = {0};
            assert_int_equal(oml_batch_train(&sp, X, y, 8, 4, &m, &d), OML_OK);
            assert_embeds_as_pca(m, Q, normalize);
        }
}

/* Training with sp on the 8 rows of X is refused: OML_EINVAL, no model,
 * field "init_pca", a message containing `says`. */
static void assert_pca_refused(const oml_batch_spec *sp, const float *X, const int32_t *y,
                               const char *says)
{
    oml_batch_model *m = NULL;
    oml_diag d = {0};
    assert_int_equal(oml_batch_train(sp, X, y, 8, 4, &m, &d), OML_EINVAL);
    assert_null(m);
    assert_string_equal(d.field, "init_pca");
    assert_non_null(strstr(d.msg, says));
}

static void test_init_pca_refusals(void **state)
{
    (void)state;
    float X[8 * 4];
    int32_t y[8];
    pca_set(X, y);
    oml_batch_spec sp;
    oml_batch_spec_default(&sp, OML_BATCH_TRIPLET);
    sp.m = 2;
    sp.k = 2;
    sp.epochs = 1;
    sp.val_frac = 0;
    sp.init_pca = OML_BATCH_PCA_ON;
    oml_batch_model *m = NULL;
    oml_diag d = {0};
    /* depth >= 1 needs hidden >= 2*emb. */
    sp.depth = 1;
    sp.hidden = 3;
    sp.emb = 2;
    assert_pca_refused(&sp, X, y, "hidden >= 2*emb");
    /* emb <= dim (depth 0 needs nothing else). */
    sp.depth = 0;
    sp.emb = 5;
    assert_pca_refused(&sp, X, y, "emb <= dim");
    /* Not with the identity start. */
    sp.emb = 2;
    sp.init_identity = 1;
    assert_pca_refused(&sp, X, y, "init_identity");
    sp.init_identity = 0;
    /* The direct call refuses the same way. */
    oml_batch_layout lay;
    assert_int_equal(oml_batch_layout_init(&lay, 4, 2, 3, 2, 1, NULL), OML_OK);
    assert_int_equal(oml_batch_model_create(&m, &lay, 1, NULL), OML_OK);
    assert_int_equal(oml_batch_model_init_pca(m, X, NULL, 8, &d), OML_EINVAL);
    assert_string_equal(d.field, "init_pca");
    oml_batch_model_destroy(m);
    m = NULL;
    /* AUTO: a network the start does not fit trains from the random start. */
    sp.init_pca = OML_BATCH_PCA_AUTO;
    sp.depth = 1;
    sp.hidden = 3;
    assert_int_equal(oml_batch_train(&sp, X, y, 8, 4, &m, &d), OML_OK);
    oml_batch_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_triplet),
        cmocka_unit_test(test_grad_lanml),
        cmocka_unit_test(test_grad_danml),
        cmocka_unit_test(test_sampler_mk),
        cmocka_unit_test(test_train_learns),
        cmocka_unit_test(test_early_stop),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_encode_decode),
        cmocka_unit_test(test_init_pca),
        cmocka_unit_test(test_init_pca_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
