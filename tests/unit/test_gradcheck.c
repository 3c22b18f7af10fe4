/* test_gradcheck.c - the learner's step against finite differences.
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
        h[j] = x[j] - p[lay->mu + j];
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
        assert_int_equal(oml_learner_prepare(l, X, 40), OML_OK);
        /* Break the PCA start's exact symmetries so every parameter matters. */
        for (size_t i = lay->mu + (size_t)d; i < lay->count; i++)
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
        if (i < lay->mu + (size_t)d) {
            assert_true(analytic == 0.0); /* mu is not trained */
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
    assert_true(checked > (int)(lay->count - lay->mu - (size_t)d) * 9 / 10);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradcheck_paper_init),
        cmocka_unit_test(test_gradcheck_centred_pca_start),
        cmocka_unit_test(test_gradcheck_deep_and_linear_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
