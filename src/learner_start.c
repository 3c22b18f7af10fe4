/* learner_start.c - the live model's data-dependent start (config lever
 * `init`), taken once from the stored items (learner.h, oml_learner_prepare).
 *
 * DESIGN: every start makes all heads compute one linear map of the input
 * through the PCA pass-through (pca.h), so the untrained model is a known
 * metric: a PCA projection, its whitening, or the standardised features
 * with Euclidean order (offsets). OML_INIT_AUTO takes two of them, the
 * standardised start and the whitened one, and keeps the one whose
 * leave-one-out kNN error on the labelled stored items is lower
 * (loo_knn.h) beyond chance: on images, whitening finds the directions
 * classes differ in (Fashion-MNIST 0.127 against 0.146); on a tabular set
 * it amplified directions that carry nothing (0.115 -> 0.27). Anything
 * short of a clear win, and items without labels, keep the standardised
 * start, which is never worse than the features. */
#include "learner.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "learner_int.h"
#include "loo_knn.h"
#include "pca.h"

/* OML_INIT_PCA_WHITE: whitening reshapes the metric (small-variance
 * directions, which tell classes apart by detail, count as much as the large
 * ones: README ablation) while the first row, and so the weights' overall
 * scale that eta was tuned for, stays. Only a direction's variance above
 * the noise is amplified: row r is scaled so that its variance becomes
 * var[0] * (1 - NOISE_EDGE * noise / var[r]), never less than plain PCA's
 * (scale >= 1). noise is the mean variance of the directions left out; a
 * direction of pure noise can still show up to about (1 + sqrt(d/n))^2 <= 4
 * times the noise level among the kept ones (the Marchenko-Pastur edge), so
 * only what lies above NOISE_EDGE times it counts as signal. Without this, on
 * items of low intrinsic dimension (classes spanning fewer directions than
 * emb) a direction of pure noise would count as much as the ones the classes
 * differ in. A direction with (almost) no variance is scaled at most by
 * 1/WHITE_FLOOR. */
#define WHITE_FLOOR 1e-2f
#define NOISE_EDGE 4.0f
static void whiten_rows(float *P, const float *var, float noise, int32_t k, int32_t d)
{
    for (int32_t r = 0; r < k; r++) {
        float ratio = var[0] > 0 ? var[r] / var[0] : 1.0f;
        float signal = var[r] > 0 ? fmaxf(1.0f - NOISE_EDGE * noise / var[r], 0.0f) : 0.0f;
        float scale = sqrtf(signal / fmaxf(ratio, WHITE_FLOOR * WHITE_FLOOR));
        cblas_sscal(d, fmaxf(scale, 1.0f), P + (size_t)r * d, 1);
    }
}

/* Theta(0) = the ncomp rows of P (ncomp, d), the rows below them zero. */
static void set_head0(oml_learner *l, const float *P, int32_t ncomp)
{
    const oml_net_layout *lay = &l->lay;
    float *theta0 = l->params + lay->theta[0];
    int32_t in = oml_net_width(lay, 0);
    memset(theta0, 0, (size_t)lay->emb * in * sizeof(float));
    memcpy(theta0, P, (size_t)ncomp * in * sizeof(float));
}

/* With an input basis (config basis), the start's map P (ncomp, dim)
 * becomes the fixed basis B (its first rows; the rest 0) and the trained
 * layers start from the identity on B's coordinates: the same metric, now
 * computed as I (B x). Returns the map they start from, (ncomp, in): P
 * itself, or the identity, which *owned then holds (NULL on OOM). */
static const float *take_basis(oml_learner *l, const float *P, int32_t ncomp, float **owned)
{
    const oml_net_layout *lay = &l->lay;
    *owned = NULL;
    if (!lay->has_basis)
        return P;
    float *B = l->params + lay->basis;
    memset(B, 0, (size_t)lay->in * lay->dim * sizeof(float));
    memcpy(B, P, (size_t)ncomp * lay->dim * sizeof(float)); /* ncomp <= emb <= in */
    float *eye = calloc((size_t)ncomp * lay->in, sizeof(float));
    for (int32_t r = 0; eye && r < ncomp; r++)
        eye[(size_t)r * lay->in + r] = 1.0f;
    *owned = eye;
    return eye;
}

/* Every head equal to the PCA projection P (emb, d): Theta(0) = P, and the
 * trunk and every deeper head the pass-through of P (pca.h). OML_OK, or
 * OML_ENOMEM (the identity a basis starts from could not be held). */
static int init_pca_heads(oml_learner *l, const float *P_in, int32_t ncomp)
{
    const oml_net_layout *lay = &l->lay;
    int32_t d = oml_net_width(lay, 0), e = lay->emb, hd = lay->hidden;
    float *owned = NULL;
    const float *P = take_basis(l, P_in, ncomp, &owned);
    if (P == NULL)
        return OML_ENOMEM;
    set_head0(l, P, ncomp);
    for (int k = 1; k <= lay->layers; k++) {
        float *W = l->params + lay->w[k];
        if (k == 1)
            oml_pca_passthrough_first(W, d, P, e, ncomp);
        else
            oml_pca_passthrough_deeper(W, oml_net_width(lay, k - 1), e);
        oml_pca_passthrough_head(l->params + lay->theta[k], hd, e, ncomp);
    }
    free(owned);
    return OML_OK;
}

/* The rows a start is taken from: rows at[0 .. n) of X (row stride d),
 * or its rows 0 .. n - 1 (at NULL). The daemon passes the store's matrix
 * and a sample's slots: 65,536 items of 784 features were a 205 MB copy at
 * the first triplet, beside whatever index was being built. */
typedef struct start_rows {
    const float *X;
    const int32_t *at;
    int32_t n, d;
} start_rows;

static inline const float *row_of(const start_rows *R, int32_t i)
{
    return R->X + (size_t)(R->at ? R->at[i] : i) * (size_t)R->d;
}

/* Each feature's sd over the rows R (d), 1 where it has no spread. */
static int column_sd(const start_rows *R, const float *mean, float *sd)
{
    int32_t n = R->n, d = R->d;
    double *acc = calloc((size_t)d, sizeof(double));
    if (acc == NULL)
        return OML_ENOMEM;
    for (int32_t i = 0; i < n; i++) {
        const float *x = row_of(R, i);
        for (int32_t j = 0; j < d; j++) {
            double t = x[j] - mean[j];
            acc[j] += t * t;
        }
    }
    for (int32_t j = 0; j < d; j++) {
        double v = sqrt(acc[j] / n);
        sd[j] = v > 1e-12 ? (float)v : 1.0f;
    }
    free(acc);
    return OML_OK;
}

#define STD_PCA_ROWS 20000
/* The offsets' Euclidean order needs new items to sit in the projection as
 * the stored ones do. Fitted on fewer rows than a few times d, the top
 * directions can be mostly the stored rows' own noise: a new item then keeps
 * a small part of its norm there, lands near the offset's pole with every
 * other new item, and its Euclidean neighbours are the stored items of
 * smallest norm, whatever it is (and learning, whose ReLU layers have no
 * biases, maps it there too: kNN error 0.33 -> 0.55 on 100 items of 2,000
 * features, where the angle gives 0.26 -> 0.15). So with fewer than
 * HELD_CHECK_PER_DIM x d rows, the directions fitted on half of at most
 * HELD_CHECK_ROWS of them must keep at least HELD_MIN_RATIO of the share of
 * the other half's energy that they keep of their own half's
 * (oml_pca_heldout_ratio), or the start orders by angle (offsets 0). */
#define HELD_CHECK_PER_DIM 4
#define HELD_CHECK_ROWS 2048
#define HELD_MIN_RATIO 0.5

static int holds_new_rows(const float *Z, int32_t m, int32_t d, int32_t emb, int *holds)
{
    *holds = 1;
    if ((int64_t)m >= (int64_t)HELD_CHECK_PER_DIM * d || m < 4)
        return OML_OK;
    /* More rows than checked: a strided sample of them. */
    int32_t c = m < HELD_CHECK_ROWS ? m : HELD_CHECK_ROWS;
    float *S = c < m ? malloc((size_t)c * d * sizeof(float)) : NULL;
    if (c < m && S == NULL)
        return OML_ENOMEM;
    for (int32_t i = 0; S && i < c; i++)
        memcpy(S + (size_t)i * d, Z + (size_t)((int64_t)i * m / c) * d, (size_t)d * sizeof(float));
    double ratio = 1.0;
    int rc = oml_pca_heldout_ratio(S ? S : Z, c, d, emb, &ratio);
    *holds = rc != OML_OK || ratio >= HELD_MIN_RATIO;
    free(S);
    return rc;
}

/* OML_INIT_STD: the projection P (k, d) of standardised features: with
 * d <= emb the features themselves (P = I, k = d), else their top emb
 * principal directions computed on the standardised rows (a strided sample
 * of at most STD_PCA_ROWS). Unless the net standardises its input itself
 * (`scaled`), each row is then scaled by 1/sd so that P applies to the
 * centred raw input. *holds: whether new items sit in P as the stored ones
 * do (holds_new_rows; always with the identity). */
static int std_projection(const start_rows *R, int32_t emb, const float *mean, const float *sd,
                          int scaled, float *P, int32_t *k_out, int *holds)
{
    int32_t n = R->n, d = R->d;
    *holds = 1;
    if (d <= emb) {
        memset(P, 0, (size_t)d * d * sizeof(float));
        for (int32_t j = 0; j < d; j++)
            P[(size_t)j * d + j] = scaled ? 1.0f : 1.0f / sd[j];
        *k_out = d;
        return OML_OK;
    }
    int32_t m = n < STD_PCA_ROWS ? n : STD_PCA_ROWS;
    float *Z = malloc((size_t)m * d * sizeof(float));
    if (Z == NULL)
        return OML_ENOMEM;
    for (int32_t i = 0; i < m; i++) {
        const float *x = row_of(R, (int32_t)((int64_t)i * n / m));
        for (int32_t j = 0; j < d; j++)
            Z[(size_t)i * d + j] = (x[j] - mean[j]) / sd[j];
    }
    int rc = oml_pca_components(Z, NULL, m, d, NULL, emb, P, NULL, NULL);
    if (rc == OML_OK)
        rc = holds_new_rows(Z, m, d, emb, holds);
    if (rc == OML_OK) {
        for (int32_t r = 0; r < emb && !scaled; r++)
            for (int32_t j = 0; j < d; j++)
                P[(size_t)r * d + j] /= sd[j];
        *k_out = emb;
    }
    free(Z);
    return rc;
}


/* Every head's offset b 0 (a layout without offsets has none): the angle. */
static void zero_offsets(oml_learner *l)
{
    const oml_net_layout *lay = &l->lay;
    for (int h = 0; lay->has_bias && h <= lay->layers; h++)
        memset(l->params + lay->bias[h], 0, (size_t)lay->emb * sizeof(float));
}

/* The standardised start's offset: coordinate k (the first one P leaves
 * free) of every head's b is offset x the RMS norm of P (x - mean) over a
 * strided sample. On the sphere, f = (Px, c) / sqrt(|Px|^2 + c^2) and, for
 * c >> |Px|, |f(x) - f(y)|^2 = |Px - Py|^2 / c^2 + O(|P.|^4 / c^4): the
 * neighbours of the start are the Euclidean ones of the standardised
 * features (to about 1/offset^2), where without the offset they are those
 * of the angle, which discards the norm. */
static void set_offsets(oml_learner *l, const start_rows *R, const float *P, int32_t k)
{
    const oml_net_layout *lay = &l->lay;
    int32_t d = lay->dim, n = R->n, m = n < STD_PCA_ROWS ? n : STD_PCA_ROWS;
    float *xc = malloc((size_t)(d + k) * sizeof(float));
    double sum = 0;
    for (int32_t i = 0; xc && i < m; i++) {
        oml__learner_input_row(l, row_of(R, (int32_t)((int64_t)i * n / m)), xc);
        cblas_sgemv(CblasRowMajor, CblasNoTrans, k, d, 1.0f, P, d, xc, 1, 0.0f, xc + d, 1);
        float r = cblas_snrm2(k, xc + d, 1);
        sum += (double)r * r;
    }
    free(xc);
    float rms = m > 0 && sum > 0 ? (float)sqrt(sum / m) : 1.0f;
    zero_offsets(l);
    for (int h = 0; h <= lay->layers; h++)
        l->params[lay->bias[h] + k] = l->cfg.offset * rms;
}

#define PCA_ROWS 40000
/* The PCA starts (plain or whitened) on the centred raw input: the scale a
 * standardising layout holds is 1 under them, and the offsets 0. */
static int take_pca_start(oml_learner *l, const start_rows *R, const float *mean, int white)
{
    const oml_net_layout *lay = &l->lay;
    int32_t d = lay->dim, n = R->n;
    for (int32_t j = 0; lay->has_scale && j < d; j++)
        l->params[lay->scale + j] = 1.0f;
    zero_offsets(l);
    /* With fewer inputs than emb, all d components; the rest stay 0. */
    int32_t e = lay->emb < d ? lay->emb : d;
    float *P = malloc(((size_t)e * d + (size_t)e) * sizeof(float));
    float noise = 0;
    /* The principal directions of at most PCA_ROWS strided rows: 65,536
     * rows cost the learner seconds at the first triplet; 20,000 moved
     * Fashion-MNIST's whitened start 0.1272 -> 0.1284 (its weak
     * directions and the noise level settle late). */
    int32_t m = n < PCA_ROWS ? n : PCA_ROWS;
    int32_t *rows = m < n ? malloc((size_t)m * sizeof *rows) : NULL;
    for (int32_t i = 0; rows && i < m; i++) {
        int32_t r = (int32_t)((int64_t)i * n / m);
        rows[i] = R->at ? R->at[r] : r;
    }
    int rc = P && (rows || m == n) ? oml_pca_components(R->X, rows ? rows : R->at, m, d, mean, e,
                                                        P, P + (size_t)e * d, &noise)
                                   : OML_ENOMEM;
    free(rows);
    if (rc == OML_OK && white)
        whiten_rows(P, P + (size_t)e * d, noise, e, d);
    if (rc == OML_OK)
        rc = init_pca_heads(l, P, e);
    free(P);
    return rc;
}

/* The standardised start: every head (head 0 only when `head0_only`, the
 * mixed start) the standardised features' projection, with the Euclidean
 * offsets when the layout has them. */
static int take_std_start(oml_learner *l, const start_rows *R, const float *mean,
                          const float *sd, int head0_only)
{
    const oml_net_layout *lay = &l->lay;
    int32_t d = lay->dim;
    for (int32_t j = 0; lay->has_scale && j < d; j++)
        l->params[lay->scale + j] = 1.0f / sd[j];
    /* With offsets, one coordinate of the embedding is kept for it. */
    int32_t room = lay->emb - (lay->has_bias && !head0_only);
    int32_t e = room < d ? room : d, k = 0;
    int holds = 1;
    float *P = malloc((size_t)e * d * sizeof(float));
    int rc = P ? std_projection(R, room, mean, sd, lay->has_scale, P, &k, &holds) : OML_ENOMEM;
    if (rc == OML_OK && head0_only) {
        set_head0(l, P, k);
    } else if (rc == OML_OK && (rc = init_pca_heads(l, P, k)) == OML_OK) {
        if (lay->has_bias && holds)
            set_offsets(l, R, P, k);
        else
            zero_offsets(l);
    }
    free(P);
    return rc;
}

static int take_start(oml_learner *l, int32_t init, const start_rows *R, const float *mean,
                      const float *sd)
{
    switch (init) {
    case OML_INIT_PCA:
        return take_pca_start(l, R, mean, 0);
    case OML_INIT_PCA_WHITE:
        return take_pca_start(l, R, mean, 1);
    case OML_INIT_STD:
        return take_std_start(l, R, mean, sd, 0);
    case OML_INIT_MIXED: { /* head 0 standardised, the trunk and deeper heads whitened */
        int rc = take_pca_start(l, R, mean, 1);
        return rc == OML_OK ? take_std_start(l, R, mean, sd, 1) : rc;
    }
    default: /* OML_INIT_RANDOM: the random weights stay */
        for (int32_t j = 0; l->lay.has_scale && j < l->lay.dim; j++)
            l->params[l->lay.scale + j] = 1.0f / sd[j];
        return OML_OK;
    }
}

/* The labelled rows of X that judge a start: every (count/LOO_ROWS)-th,
 * each classified among all the others of them. A start's kNN error
 * depends on how dense the references are (Fashion-MNIST, whitened: 0.1465
 * among 16,384 dev items, 0.1355 among all 35,000, where the standardised
 * start's moved 0.1510 -> 0.1495: on 16,384 the choice went the wrong
 * way), so they are as many as the cost allows: LOO_QUERIES of them are
 * classified, two GEMMs of LOO_QUERIES x rows x emb (65,536 rows took the
 * learner 8 s at the first triplet; 32,768 about half). At 2,000 queries
 * the test below missed Fashion-MNIST's 0.017 on one seed of three. */
#define LOO_ROWS 32768
#define LOO_QUERIES 8192
#define LOO_K 5
#define FORWARD_ROWS 1024

/* The sample's labelled rows: idx (m) their rows in X, labs (m) their
 * labels, every (count/LOO_ROWS)-th labelled row. Returns m (0 when the
 * labels name fewer than two classes or too few rows), -1 on OOM. */
static int32_t labelled_sample(const int32_t *labels, int32_t n, int32_t **idx_out,
                               int32_t **labs_out)
{
    int32_t have = 0, first = -1, classes = 1;
    for (int32_t i = 0; i < n; i++)
        if (labels[i] >= 0) {
            have++;
            if (first < 0)
                first = labels[i];
            else if (labels[i] != first)
                classes = 2;
        }
    if (have <= LOO_K || classes < 2)
        return 0;
    int32_t m = have < LOO_ROWS ? have : LOO_ROWS, k = 0, seen = 0;
    int32_t *idx = malloc((size_t)m * sizeof(int32_t));
    int32_t *labs = malloc((size_t)m * sizeof(int32_t));
    if (idx == NULL || labs == NULL) {
        free(idx);
        free(labs);
        return -1;
    }
    for (int32_t i = 0; i < n && k < m; i++)
        if (labels[i] >= 0 && (int64_t)seen++ * m / have == k) {
            idx[k] = i;
            labs[k++] = labels[i];
        }
    *idx_out = idx;
    *labs_out = labs;
    return k;
}

/* The leave-one-out kNN error of the current weights on the m rows idx of
 * R: head 0 stands for all heads, since every start makes them equal.
 * wrong (LOO_QUERIES bytes) gets each query's miss. */
static float start_error(const oml_learner *l, const start_rows *R, const int32_t *idx,
                         const int32_t *labs, int32_t m, uint8_t *wrong)
{
    const oml_net_layout *lay = &l->lay;
    int32_t e = lay->emb;
    float *E = malloc((size_t)m * e * sizeof(float));
    const float *rows[FORWARD_ROWS];
    oml_net_acts a;
    if (E == NULL || oml_net_acts_init(&a, lay, FORWARD_ROWS) != OML_OK) {
        free(E);
        return NAN;
    }
    for (int32_t i = 0; i < m; i += FORWARD_ROWS) {
        int32_t b = m - i < FORWARD_ROWS ? m - i : FORWARD_ROWS;
        for (int32_t r = 0; r < b; r++)
            rows[r] = row_of(R, idx[i + r]);
        oml_net_forward_rows(lay, l->params, rows, b, &a);
        memcpy(E + (size_t)i * e, a.f[0], (size_t)b * e * sizeof(float));
    }
    oml_net_acts_free(&a);
    float err = oml_loo_knn_error(E, labs, m, e, LOO_K, LOO_QUERIES, wrong);
    free(E);
    return err;
}

/* Whether the whitened start is better beyond chance: McNemar's test on
 * the queries the two starts disagree on (b: only the whitened one
 * misses, c: only the standardised one), one-sided at 5%: whitened when
 * c - b exceeds 1.645 times its standard error under "equally good",
 * sqrt(b + c). On a few hundred items a lower error alone is noise
 * (breast cancer, 285 items: the whitened start's LOO error was lower
 * and its test error 0.070 against 0.042). */
static int whitened_wins(const uint8_t *wrong_std, const uint8_t *wrong_white, int32_t q)
{
    int32_t b = 0, c = 0;
    for (int32_t i = 0; i < q; i++) {
        b += wrong_white[i] && !wrong_std[i];
        c += wrong_std[i] && !wrong_white[i];
    }
    return c - b > 0 && (double)(c - b) > 1.645 * sqrt((double)(b + c));
}

/* OML_INIT_AUTO: the standardised start, unless the whitened one has a
 * lower leave-one-out kNN error on the labelled items, beyond chance
 * (labels NULL, or fewer than two classes: the standardised start,
 * unjudged). */
static int choose_start(oml_learner *l, const start_rows *R, const int32_t *labels,
                        const float *mean, const float *sd)
{
    int32_t n = R->n;
    l->start_init = OML_INIT_STD;
    int rc = take_start(l, OML_INIT_STD, R, mean, sd);
    int32_t *idx = NULL, *labs = NULL;
    int32_t m = rc == OML_OK && labels ? labelled_sample(labels, n, &idx, &labs) : 0;
    if (m <= 0)
        return m < 0 ? OML_ENOMEM : rc;
    size_t bytes = l->lay.count * sizeof(float);
    float *std_params = malloc(bytes);
    uint8_t *wrong = malloc(2 * LOO_QUERIES);
    if (std_params == NULL || wrong == NULL) {
        free(std_params);
        free(wrong);
        free(idx);
        free(labs);
        return OML_ENOMEM;
    }
    memcpy(std_params, l->params, bytes);
    l->start_error[0] = start_error(l, R, idx, labs, m, wrong);
    rc = take_start(l, OML_INIT_PCA_WHITE, R, mean, sd);
    if (rc == OML_OK)
        l->start_error[1] = start_error(l, R, idx, labs, m, wrong + LOO_QUERIES);
    if (rc == OML_OK && isfinite(l->start_error[0]) && isfinite(l->start_error[1]) &&
        whitened_wins(wrong, wrong + LOO_QUERIES, m < LOO_QUERIES ? m : LOO_QUERIES))
        l->start_init = OML_INIT_PCA_WHITE;
    else
        memcpy(l->params, std_params, bytes);
    free(std_params);
    free(wrong);
    free(idx);
    free(labs);
    return OML_OK; /* a whitening that failed left the standardised start */
}

/* Mean and sd of every feature over the rows R (mean, sd: dim each). */
static int feature_moments(const start_rows *R, float *mean, float *sd)
{
    int32_t n = R->n, d = R->d;
    double *acc = calloc((size_t)d, sizeof(double));
    if (acc == NULL)
        return OML_ENOMEM;
    for (int32_t i = 0; i < n; i++) {
        const float *x = row_of(R, i);
        for (int32_t j = 0; j < d; j++)
            acc[j] += x[j];
    }
    for (int32_t j = 0; j < d; j++)
        mean[j] = (float)(acc[j] / n);
    free(acc);
    return column_sd(R, mean, sd);
}

int oml_learner_prepare(oml_learner *l, const float *X, const int32_t *labels, int32_t n)
{
    return oml_learner_prepare_at(l, X, NULL, labels, n);
}

int oml_learner_prepare_at(oml_learner *l, const float *X, const int32_t *at,
                           const int32_t *labels, int32_t n)
{
    const oml_net_layout *lay = &l->lay;
    int32_t d = lay->dim;
    if (n < 2)
        return OML_EEMPTY;
    const start_rows R = {X, at, n, d};
    float *mean = malloc((size_t)d * sizeof(float));
    float *sd = malloc((size_t)d * sizeof(float));
    int rc = mean && sd ? feature_moments(&R, mean, sd) : OML_ENOMEM;
    /* The input's fixed transform first: the starts below read it. */
    if (rc == OML_OK && l->cfg.center)
        memcpy(l->params + lay->mu, mean, (size_t)d * sizeof(float));
    if (rc == OML_OK) {
        l->start_init = l->cfg.init;
        l->start_error[0] = l->start_error[1] = NAN;
        rc = l->cfg.init == OML_INIT_AUTO ? choose_start(l, &R, labels, mean, sd)
                                          : take_start(l, l->cfg.init, &R, mean, sd);
    }
    if (rc == OML_OK && l->cfg.hedge_signal == OML_HEDGE_LOCAL)
        rc = oml__learner_ref_prepare(l, X, at, n);
    if (rc == OML_OK) {
        if (l->start)
            memcpy(l->start, l->params, lay->count * sizeof(float));
        l->prepared = 1;
    }
    free(sd);
    free(mean);
    return rc;
}
