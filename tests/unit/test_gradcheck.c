/* test_gradcheck.c - the learner's steps against finite differences: the
 * paper's one-triplet step, the mini-batch step (margin loss and ABTL) and
 * Adam's first step.
 *
 * A naive double-precision forward written here, independent of net.c's BLAS
 * path, defines L_overall(theta) = sum_l alpha(l) L(l) with the ABTL
 * thresholds frozen at their pre-update values (OAHU Eq. 11-13). The
 * gradient the learner applies is read back from one step with eta = 1
 * (theta_after = theta - grad) and compared, for every parameter of every
 * head and every hidden layer, with central differences of that loss.
 * Parameters whose perturbation moves a ReLU across its kink are skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "abtl.h"
#include "learner.h"
#include "net.h"
#include "rng.h"

#define MAXW 64

/* Reference forward for one row; heads out (heads, emb); signs records the
 * ReLU pattern (layers, hidden) as +1/-1. */
static void ref_forward(const oml_net_layout *lay, const double *p, const double *x, double *heads,
                        signed char *signs)
{
    double h[MAXW], nh[MAXW];
    int32_t d = lay->dim, hd = lay->hidden, e = lay->emb;
    for (int j = 0; j < d; j++)
        h[j] = (x[j] - p[lay->mu + j]) * (lay->has_scale ? p[lay->scale + j] : 1.0);
    if (lay->has_basis) { /* h(0) = B (x - mu): fixed, read by W(1) and Theta(0) */
        for (int r = 0; r < lay->in; r++) {
            nh[r] = 0;
            for (int c = 0; c < d; c++)
                nh[r] += p[lay->basis + (size_t)r * d + c] * h[c];
        }
        memcpy(h, nh, sizeof(double) * (size_t)lay->in);
    }
    for (int l = 0; l <= lay->layers; l++) {
        int32_t w = oml_net_width(lay, l);
        if (l > 0) {
            const double *W = p + lay->w[l];
            int32_t win = oml_net_width(lay, l - 1);
            for (int r = 0; r < hd; r++) {
                double a = 0;
                for (int c = 0; c < win; c++)
                    a += W[r * win + c] * h[c];
                signs[(l - 1) * hd + r] = a > 0 ? 1 : -1;
                nh[r] = a > 0 ? a : 0;
            }
            memcpy(h, nh, sizeof(double) * (size_t)hd);
        }
        const double *T = p + lay->theta[l];
        double z[MAXW], nrm = 0;
        for (int r = 0; r < e; r++) {
            z[r] = 0;
            for (int c = 0; c < w; c++)
                z[r] += T[r * w + c] * h[c];
            if (lay->has_bias)
                z[r] += p[lay->bias[l] + (size_t)r];
            nrm += z[r] * z[r];
        }
        nrm = sqrt(nrm);
        for (int r = 0; r < e; r++)
            heads[l * e + r] = z[r] / nrm;
    }
}

static double dist(const double *a, const double *b, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += (a[i] - b[i]) * (a[i] - b[i]);
    return sqrt(s);
}

typedef struct frozen {
    double c1[OML_MAX_HEADS], c2[OML_MAX_HEADS];
    double alpha[OML_MAX_HEADS];
} frozen;

/* L_overall at p with frozen thresholds; signs (3, layers*hidden) out. */
static double ref_loss(const oml_net_layout *lay, const double *p, const double *x3,
                       const frozen *fz, signed char *signs)
{
    double f[3][OML_MAX_HEADS * MAXW];
    int32_t d = lay->dim, e = lay->emb, sh = lay->layers * lay->hidden;
    for (int r = 0; r < 3; r++)
        ref_forward(lay, p, x3 + r * d, f[r], signs + r * sh);
    double total = 0;
    for (int l = 0; l <= lay->layers; l++) {
        double dp = dist(f[0] + l * e, f[1] + l * e, e), dn = dist(f[0] + l * e, f[2] + l * e, e);
        double attr = fmax(0, (dp - fz->c1[l]) / (2 - fz->c1[l]));
        double rep = fmax(0, 1 - dn / fz->c2[l]);
        total += fz->alpha[l] * 0.5 * (attr + rep);
    }
    return total;
}

static void gradcheck(const oml_config *cfg, int prepare)
{
    oml_learner *l = NULL;
    oml_diag diag;
    assert_int_equal(oml_learner_create(&l, cfg, &diag), OML_OK);
    const oml_net_layout *lay = &l->lay;
    int32_t d = lay->dim, heads = cfg->layers + 1;
    oml_rng rng;
    oml_rng_seed(&rng, cfg->seed + 99);

    if (prepare) {
        float X[40 * MAXW];
        for (int i = 0; i < 40 * d; i++)
            X[i] = oml_rng_normal(&rng) + 0.5f;
        assert_int_equal(oml_learner_prepare(l, X, NULL, 40), OML_OK);
        /* Break the PCA start's exact symmetries so every parameter matters. */
        for (size_t i = lay->trained; i < lay->count; i++)
            l->params[i] += 0.05f * oml_rng_normal(&rng);
    }
    /* A non-uniform alpha checks that each head's gradient is weighted by it. */
    float asum = 0;
    for (int k = 0; k < heads; k++)
        asum += (l->alpha[k] = 0.5f + (float)k);
    for (int k = 0; k < heads; k++)
        l->alpha[k] /= asum;

    float x3f[3 * MAXW];
    double x3[3 * MAXW];
    for (int i = 0; i < 3 * d; i++)
        x3[i] = x3f[i] = oml_rng_normal(&rng);

    double *p = malloc(lay->count * sizeof(double));
    for (size_t i = 0; i < lay->count; i++)
        p[i] = l->params[i];

    /* Frozen thresholds from the pre-update distances, as the learner does. */
    frozen fz;
    double f[3][OML_MAX_HEADS * MAXW];
    signed char sg[3 * OML_MAX_LAYERS * MAXW];
    int32_t e = lay->emb;
    for (int r = 0; r < 3; r++)
        ref_forward(lay, p, x3 + r * d, f[r], sg);
    for (int k = 0; k < heads; k++) {
        oml_abtl ab;
        oml_abtl_eval(cfg->tau, (float)dist(f[0] + k * e, f[1] + k * e, e),
                      (float)dist(f[0] + k * e, f[2] + k * e, e), &ab);
        fz.c1[k] = ab.c1;
        fz.c2[k] = ab.c2;
        fz.alpha[k] = l->alpha[k];
    }

    /* The learner's forward must agree with the naive reference. */
    oml_net_acts acts;
    assert_int_equal(oml_net_acts_init(&acts, lay, 3), OML_OK);
    oml_net_forward(lay, l->params, x3f, 3, &acts);
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < heads; k++)
            for (int j = 0; j < e; j++)
                assert_true(fabs(acts.f[k][r * e + j] - f[r][k * e + j]) < 1e-5);
    oml_net_acts_free(&acts);

    oml_step_report rep;
    oml_learner_step(l, x3f, x3f + d, x3f + 2 * d, &rep);
    assert_true(rep.utilised);

    signed char s0[3 * OML_MAX_LAYERS * MAXW], s1[3 * OML_MAX_LAYERS * MAXW];
    size_t nsig = 3 * (size_t)(lay->layers * lay->hidden);
    double base = ref_loss(lay, p, x3, &fz, s0);
    assert_true(fabs(base - rep.overall) < 1e-5);
    const double h = 1e-6;
    int checked = 0, skipped = 0;
    for (size_t i = 0; i < lay->count; i++) {
        double analytic = (double)p[i] - (double)l->params[i]; /* eta = 1 */
        if (i < lay->trained) {
            assert_true(analytic == 0.0); /* mu and the input scale are not trained */
            continue;
        }
        double keep = p[i];
        p[i] = keep + h;
        double up = ref_loss(lay, p, x3, &fz, s1);
        int kink = memcmp(s0, s1, nsig) != 0;
        p[i] = keep - h;
        double down = ref_loss(lay, p, x3, &fz, s1);
        kink |= memcmp(s0, s1, nsig) != 0;
        p[i] = keep;
        if (kink) {
            skipped++;
            continue;
        }
        double numeric = (up - down) / (2 * h);
        double tol = 2e-4 * fmax(fabs(numeric), 1e-3);
        if (fabs(numeric - analytic) > tol)
            fail_msg("param %zu: analytic %.8g numeric %.8g", i, analytic, numeric);
        checked++;
    }
    assert_true(checked > (int)(lay->count - lay->trained) * 9 / 10);
    (void)skipped;
    free(p);
    oml_learner_destroy(l);
}

static oml_config small_config(void)
{
    oml_config c;
    oml_config_preset(&c, "paper", 7);
    c.layers = 3;
    c.hidden = 10;
    c.emb = 4;
    c.eta = 1.0f; /* theta_after = theta - grad */
    c.tau = 0.5f;
    c.seed = 11;
    return c;
}

static void test_gradcheck_paper_init(void **state)
{
    (void)state;
    oml_config c = small_config();
    gradcheck(&c, 0);
    c.tau = 1.9f;
    c.seed = 12;
    gradcheck(&c, 0);
}

static void test_gradcheck_centred_pca_start(void **state)
{
    (void)state;
    oml_config c = small_config();
    c.center = 1;
    c.init = OML_INIT_PCA;
    gradcheck(&c, 1);
    c.init = OML_INIT_STD; /* with head offsets b(l), trained like Theta; small, */
    c.offset = 0.25f;      /* as the step is read off float weights (eta = 1) */
    gradcheck(&c, 1);
    c.standardize = 1; /* ... and the input scaled by 1/sd */
    gradcheck(&c, 1);
    c.basis = 1; /* ... and the start's map kept as a fixed basis (emb 4 < dim 7) */
    c.init = OML_INIT_PCA;
    c.offset = 0.0f;
    c.standardize = 0;
    gradcheck(&c, 1);
    c.init = OML_INIT_STD;
    c.offset = 0.25f;
    c.standardize = 1;
    gradcheck(&c, 1);
}

static void test_gradcheck_deep_and_linear_only(void **state)
{
    (void)state;
    oml_config c = small_config();
    c.layers = 6;
    c.seed = 5;
    gradcheck(&c, 0);
    c.layers = 0; /* the linear model alone, E_0 */
    gradcheck(&c, 0);
}

/* ---- issue 11: the mini-batch step ----
 *
 * oml_learner_train forwards the 3n rows of n triplets together, takes
 * the gradient with oml_net_backward and steps. With SGD its step is
 * -eta * n * (the batch mean), i.e. -eta times the gradient of
 *   L(theta) = sum_t v(t) sum_l w(l) L_l(t),  w(l) = alpha(l) or 1/heads,
 * v(t) the triplet's weight (oml_learner_train_weighted; 1 unweighted),
 * whatever cfg.batch is (a part batch moves as much as its share), with
 * L_l the margin loss max(0, D+ - D- + margin) or ABTL with thresholds
 * frozen at the pre-step distances. With eta = 1, theta_before -
 * theta_after is that gradient, checked against central differences. */

#define MAXT 8 /* triplets in a checked batch */

typedef struct batch_loss_def {
    int loss, heads, n;
    double margin, w[OML_MAX_HEADS], tw[MAXT];
    double c1[MAXT][OML_MAX_HEADS], c2[MAXT][OML_MAX_HEADS];
} batch_loss_def;

/* L at p for the n triplets x (3n rows of dim); the ReLU pattern (3n,
 * layers*hidden) and which pieces of each loss are active (n, heads, 2)
 * go to signs and active, so that a step across a kink can be told. */
static double batch_loss(const oml_net_layout *lay, const double *p, const double *x,
                         const batch_loss_def *b, signed char *signs, signed char *active)
{
    int32_t d = lay->dim, e = lay->emb, sh = lay->layers * lay->hidden;
    double total = 0;
    for (int t = 0; t < b->n; t++) {
        double f[3][OML_MAX_HEADS * MAXW];
        for (int r = 0; r < 3; r++)
            ref_forward(lay, p, x + (3 * t + r) * d, f[r], signs + (3 * t + r) * sh);
        for (int l = 0; l < b->heads; l++) {
            double dp = dist(f[0] + l * e, f[1] + l * e, e), dn = dist(f[0] + l * e, f[2] + l * e, e);
            signed char *act = active + (t * b->heads + l) * 2;
            double v;
            if (b->loss == OML_LOSS_MARGIN) {
                double h = dp - dn + b->margin;
                act[0] = h > 0;
                act[1] = 0;
                v = h > 0 ? h : 0;
            } else {
                double attr = (dp - b->c1[t][l]) / (2 - b->c1[t][l]), rep = 1 - dn / b->c2[t][l];
                act[0] = attr > 0;
                act[1] = rep > 0;
                v = 0.5 * (fmax(0, attr) + fmax(0, rep));
            }
            total += b->tw[t] * b->w[l] * v;
        }
    }
    return total;
}

/* A learner of cfg with a non-uniform alpha and (prepare) the centred PCA
 * start with its symmetries broken; n random triplets in x (3n rows) and
 * xf (the same in float), rows (3n pointers into xf). */
static oml_learner *batch_setup(const oml_config *cfg, int prepare, int n, double *x, float *xf,
                                const float **rows)
{
    oml_learner *l = NULL;
    oml_diag diag = {0};
    if (oml_learner_create(&l, cfg, &diag) != OML_OK)
        fail_msg("create: %s", diag.msg);
    const oml_net_layout *lay = &l->lay;
    int32_t d = lay->dim, heads = cfg->layers + 1;
    oml_rng rng;
    oml_rng_seed(&rng, cfg->seed + 99);
    if (prepare) {
        float X[40 * MAXW];
        for (int i = 0; i < 40 * d; i++)
            X[i] = oml_rng_normal(&rng) + 0.5f;
        assert_int_equal(oml_learner_prepare(l, X, NULL, 40), OML_OK);
        for (size_t i = lay->trained; i < lay->count; i++)
            l->params[i] += 0.05f * oml_rng_normal(&rng);
    }
    float asum = 0;
    for (int k = 0; k < heads; k++)
        asum += (l->alpha[k] = 0.5f + (float)k);
    for (int k = 0; k < heads; k++)
        l->alpha[k] /= asum;
    for (int i = 0; i < 3 * n * d; i++)
        x[i] = xf[i] = oml_rng_normal(&rng);
    for (int r = 0; r < 3 * n; r++)
        rows[r] = xf + r * d;
    return l;
}

/* The loss's definition at l's pre-step state: weights and, for ABTL, the
 * thresholds of Eq. 11 at the learner's own (float) pre-step distances. */
static void batch_define(const oml_learner *l, int n, const float *const *rows,
                         const float *weights, batch_loss_def *b)
{
    const oml_config *c = &l->cfg;
    int heads = c->layers + 1;
    int32_t e = l->lay.emb;
    memset(b, 0, sizeof *b);
    b->loss = c->loss;
    b->heads = heads;
    b->n = n;
    b->margin = c->margin;
    for (int k = 0; k < heads; k++)
        b->w[k] = c->equal_heads ? 1.0 / heads : l->alpha[k];
    for (int t = 0; t < n; t++)
        b->tw[t] = weights ? weights[t] : 1.0;
    oml_net_acts acts;
    assert_int_equal(oml_net_acts_init(&acts, &l->lay, 3 * n), OML_OK);
    oml_net_forward_rows(&l->lay, l->params, rows, 3 * n, &acts);
    for (int t = 0; t < n; t++)
        for (int k = 0; k < heads; k++) {
            const float *fa = acts.f[k] + (size_t)3 * t * e;
            float dp = 0, dn = 0;
            for (int j = 0; j < e; j++) {
                dp += (fa[j] - fa[e + j]) * (fa[j] - fa[e + j]);
                dn += (fa[j] - fa[2 * e + j]) * (fa[j] - fa[2 * e + j]);
            }
            oml_abtl ab;
            oml_abtl_eval(c->tau, sqrtf(dp), sqrtf(dn), &ab);
            b->c1[t][k] = ab.c1;
            b->c2[t][k] = ab.c2;
        }
    oml_net_acts_free(&acts);
}

/* Central differences of L at p for every trained parameter: numeric (count)
 * gets them, kink (count) whether the step crossed a ReLU or a loss's kink.
 * Returns L(p). */
static double batch_numeric(const oml_net_layout *lay, double *p, const double *x,
                            const batch_loss_def *b, double *numeric, unsigned char *kink)
{
    static signed char s0[3 * MAXT * OML_MAX_LAYERS * MAXW], s1[sizeof s0];
    static signed char a0[MAXT * OML_MAX_HEADS * 2], a1[sizeof a0];
    size_t nsig = (size_t)3 * b->n * (size_t)(lay->layers * lay->hidden);
    size_t nact = (size_t)b->n * b->heads * 2;
    double base = batch_loss(lay, p, x, b, s0, a0);
    const double h = 1e-6;
    for (size_t i = lay->trained; i < lay->count; i++) {
        double keep = p[i];
        p[i] = keep + h;
        double up = batch_loss(lay, p, x, b, s1, a1);
        int k = memcmp(s0, s1, nsig) != 0 || memcmp(a0, a1, nact) != 0;
        p[i] = keep - h;
        double down = batch_loss(lay, p, x, b, s1, a1);
        k |= memcmp(s0, s1, nsig) != 0 || memcmp(a0, a1, nact) != 0;
        p[i] = keep;
        numeric[i] = (up - down) / (2 * h);
        kink[i] = (unsigned char)k;
    }
    return base;
}

/* One SGD mini-batch step of n triplets (cfg.batch >= n, eta 1) weighing
 * weights (NULL: 1) against central differences of L. */
static void batch_gradcheck_weighted(const oml_config *cfg, int prepare, int n,
                                     const float *weights)
{
    assert_true(cfg->optim == OML_OPTIM_SGD && cfg->eta == 1.0f && cfg->prox == 0.0f &&
                n <= cfg->batch && n <= MAXT);
    static double x[3 * MAXT * MAXW];
    static float xf[3 * MAXT * MAXW];
    const float *rows[3 * MAXT];
    oml_learner *l = batch_setup(cfg, prepare, n, x, xf, rows);
    const oml_net_layout *lay = &l->lay;
    batch_loss_def b;
    batch_define(l, n, rows, weights, &b);
    double *p = malloc(lay->count * sizeof(double)), *numeric = calloc(lay->count, sizeof(double));
    unsigned char *kink = calloc(lay->count, 1);
    for (size_t i = 0; i < lay->count; i++)
        p[i] = l->params[i];
    double base = batch_numeric(lay, p, x, &b, numeric, kink);
    assert_true(base > 0);

    assert_int_equal(oml_learner_train_weighted(l, rows, weights, n, n, NULL), 0);
    assert_int_equal(l->stats.steps, 1);
    assert_int_equal(l->stats.updates, n);
    int checked = 0, nonzero = 0;
    size_t trained = lay->count - lay->trained;
    for (size_t i = 0; i < lay->count; i++) {
        double analytic = p[i] - (double)l->params[i];
        if (i < lay->trained) {
            assert_true(analytic == 0.0); /* mu is not trained */
            continue;
        }
        if (kink[i])
            continue;
        double tol = 2e-4 * fmax(fabs(numeric[i]), 1e-3);
        if (fabs(numeric[i] - analytic) > tol)
            fail_msg("%s, %d triplets, param %zu: analytic %.8g numeric %.8g",
                     cfg->loss == OML_LOSS_MARGIN ? "margin" : "abtl", n, i, analytic, numeric[i]);
        checked++;
        nonzero += fabs(numeric[i]) > 1e-4;
    }
    assert_true(checked > (int)trained * 9 / 10);
    assert_true(nonzero > (int)trained / 4); /* the check is not vacuous */
    free(p);
    free(numeric);
    free(kink);
    oml_learner_destroy(l);
}

static void batch_gradcheck(const oml_config *cfg, int prepare, int n)
{
    batch_gradcheck_weighted(cfg, prepare, n, NULL);
}

static oml_config batch_config(int loss, int equal_heads, int batch)
{
    oml_config c = small_config();
    c.loss = loss;
    c.margin = 0.5f; /* random triplets: most, but not all, inside the margin */
    c.equal_heads = equal_heads;
    c.batch = batch;
    c.optim = OML_OPTIM_SGD;
    return c;
}

static void test_batch_gradcheck_margin(void **state)
{
    (void)state;
    oml_config c = batch_config(OML_LOSS_MARGIN, 0, 8);
    batch_gradcheck(&c, 0, 5); /* a part batch: alpha-weighted heads */
    c = batch_config(OML_LOSS_MARGIN, 1, 6);
    c.seed = 13;
    batch_gradcheck(&c, 0, 6); /* a full one: every head weighs 1/heads */
    c.center = 1;
    c.init = OML_INIT_STD;
    c.seed = 14;
    batch_gradcheck(&c, 1, 4); /* from the standardised start */
    c.offset = 2.0f;
    c.seed = 15;
    batch_gradcheck(&c, 1, 4); /* ... with head offsets */
    c.standardize = 1;
    batch_gradcheck(&c, 1, 4); /* ... and the input scaled by 1/sd */
    c.basis = 1;
    c.offset = 0.25f; /* small: a step is read off float weights, and b's offset
                         coordinate's ulp is that of its value */
    batch_gradcheck(&c, 1, 4); /* ... and read through the start's fixed basis */
    c = batch_config(OML_LOSS_MARGIN, 0, 4);
    c.layers = 0; /* the linear model alone */
    batch_gradcheck(&c, 0, 4);
    /* Weighted triplets (omld.proto Triplet.weight): each one's loss scaled. */
    const float weights[5] = {0.5f, 2.0f, 1.0f, 3.5f, 0.25f};
    c = batch_config(OML_LOSS_MARGIN, 1, 8);
    c.seed = 21;
    batch_gradcheck_weighted(&c, 0, 5, weights);
}

static void test_batch_gradcheck_abtl(void **state)
{
    (void)state;
    oml_config c = batch_config(OML_LOSS_ABTL, 0, 8);
    batch_gradcheck(&c, 0, 7);
    c = batch_config(OML_LOSS_ABTL, 1, 3);
    c.tau = 1.9f;
    c.seed = 17;
    c.center = 1;
    c.init = OML_INIT_PCA;
    batch_gradcheck(&c, 1, 3);
}

/* Adam's first step from zero moments (Kingma & Ba, Alg. 1, t = 1):
 * m = (1 - b1) g, v = (1 - b2) g^2, and the bias-corrected step is
 * lr sqrt(1 - b2) / (1 - b1) * m / (sqrt(v) + eps)
 *   = lr g / (|g| + eps / sqrt(1 - b2)),
 * i.e. lr sign(g) wherever |g| >> 3e-7, and exactly 0 where g = 0; lr is
 * eta * n / cfg.batch (a part batch moves as much as its share), g the
 * batch mean gradient (prox 0: no pull toward the start). Checked against
 * a twin learner taking the SGD step on the same batch (the same gradient,
 * read back exactly), and the direction against central differences. */
#define ADAM_B1 0.9f
#define ADAM_B2 0.999f
#define ADAM_EPS 1e-8f
static void adam_first_step(int loss, int equal_heads, int batch, int n, float eta)
{
    oml_config cs = batch_config(loss, equal_heads, batch), ca = cs;
    ca.optim = OML_OPTIM_ADAM;
    ca.eta = eta;
    static double x[3 * MAXT * MAXW];
    static float xf[3 * MAXT * MAXW];
    const float *rows[3 * MAXT];
    oml_learner *s = batch_setup(&cs, 0, n, x, xf, rows);
    oml_learner *a = batch_setup(&ca, 0, n, x, xf, rows);
    const oml_net_layout *lay = &a->lay;
    assert_memory_equal(s->params, a->params, lay->count * sizeof(float));
    assert_null(a->start);
    assert_int_equal(a->adam_t, 0);
    batch_loss_def b;
    batch_define(a, n, rows, NULL, &b);
    double *p = malloc(lay->count * sizeof(double)), *numeric = calloc(lay->count, sizeof(double));
    unsigned char *kink = calloc(lay->count, 1);
    for (size_t i = 0; i < lay->count; i++)
        p[i] = a->params[i];
    batch_numeric(lay, p, x, &b, numeric, kink);

    assert_int_equal(oml_learner_train(s, rows, n, n, NULL), 0);
    assert_int_equal(oml_learner_train(a, rows, n, n, NULL), 0);
    assert_int_equal(a->adam_t, 1);
    double lr = (double)eta * n / batch;
    double c1 = 1.0f - ADAM_B1, c2 = 1.0f - ADAM_B2; /* float, as the learner has them */
    double scale = lr * sqrt(c2) / c1;
    int signs = 0, zeros = 0;
    for (size_t i = lay->trained; i < lay->count; i++) {
        double g = (p[i] - (double)s->params[i]) / n; /* SGD: eta 1, n x the mean */
        double moved = p[i] - (double)a->params[i];
        double m = (1.0f - ADAM_B1) * g, v = (1.0f - ADAM_B2) * g * g;
        double want = scale * m / (sqrt(v) + ADAM_EPS);
        /* |p| <= ~2: the float weight itself is good to ~2.4e-7. */
        if (fabs(g) > 1e-5 && fabs(moved - want) > 1e-4 * lr + 5e-7)
            fail_msg("param %zu: Adam moved %.9g, want %.9g (g %.3g, lr %g)", i, moved, want, g,
                     lr);
        assert_true(fabs(moved) <= lr * (1 + 1e-5) + 5e-7);
        if (fabs(g) > 1e-5) {
            assert_true(fabs(a->adam_m[i] - m) <= 1e-3 * fabs(m));
            assert_true(fabs(a->adam_v[i] - v) <= 1e-3 * v);
        }
        if (kink[i])
            continue;
        if (numeric[i] == 0.0) { /* no gradient at all (a silent unit): no move */
            if (moved != 0.0)
                fail_msg("param %zu: zero gradient, Adam moved %.9g", i, moved);
            zeros++;
        } else if (fabs(numeric[i]) > 1e-3) { /* a full step, against the gradient */
            if (!(moved * numeric[i] > 0 && fabs(fabs(moved) - lr) < 2e-3 * lr + 5e-7))
                fail_msg("param %zu: Adam moved %.9g, numeric gradient %.6g, lr %g", i, moved,
                         numeric[i], lr);
            signs++;
        }
    }
    assert_true(signs > (int)(lay->count - lay->trained) / 4);
    (void)zeros;
    free(p);
    free(numeric);
    free(kink);
    oml_learner_destroy(s);
    oml_learner_destroy(a);
}

static void test_adam_first_step_is_sign_step(void **state)
{
    (void)state;
    adam_first_step(OML_LOSS_MARGIN, 1, 8, 5, 0.016f); /* lr = 0.01 */
    adam_first_step(OML_LOSS_MARGIN, 0, 4, 4, 0.02f);  /* a full batch: lr = eta */
    adam_first_step(OML_LOSS_ABTL, 0, 8, 2, 0.04f);    /* lr = 0.01 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradcheck_paper_init),
        cmocka_unit_test(test_gradcheck_centred_pca_start),
        cmocka_unit_test(test_gradcheck_deep_and_linear_only),
        cmocka_unit_test(test_batch_gradcheck_margin),
        cmocka_unit_test(test_batch_gradcheck_abtl),
        cmocka_unit_test(test_adam_first_step_is_sign_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
