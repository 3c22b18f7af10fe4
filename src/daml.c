/* daml.c - DAML (daml paper): tuples, the metric terms Eq. 8-12, the
 * generator objective Eq. 6, the joint step of Eq. 7 and Alg. 1.
 *
 * DESIGN: the objective terms are pure functions in double over embeddings
 * and a plan of tuples (so the gradient checks call the training code). The
 * generator is a 3-layer fully connected net in one float block, trained
 * with its own Adam state held in the step context; the metric network,
 * its optimiser, the sampler, validation and early stopping are batch.c's,
 * reached through the oml_batch_spec step hook. A step allocates nothing.
 * Runs on the caller's thread. */
#include "daml.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "batch_internal.h"

#define DIST_EPS 1e-12

void oml_daml_hp_default(oml_daml_hp *hp, int32_t term)
{
    memset(hp, 0, sizeof *hp);
    hp->term = term;
    hp->lambda = 1.0f;   /* Sec. 3.4 */
    hp->lambda1 = 1.0f;  /* Sec. 3.4 */
    hp->lambda2 = 50.0f; /* Sec. 3.4 */
    hp->alpha = 1.0f;    /* Sec. 3.4, after [44] */
    hp->gen_hidden = 256;
    hp->gen_per_anchor = 4;
    hp->gen_lr = 1e-3f;
    hp->pretrain_epochs = 0; /* 0: the spec's epochs */
    hp->gen_warmup = 100;
    hp->joint_epochs = 10;
}

/* ---- plans ---- */

static int64_t plan_tcap(const oml_daml_hp *hp, int64_t n, int synthetic)
{
    switch (hp->term) {
    case OML_DAML_LIFTED:
        return synthetic ? n * (hp->gen_per_anchor > 0 ? hp->gen_per_anchor : 1) : n * (n - 1) + 1;
    case OML_DAML_NPAIR:
        return n * n / 4 + 1;
    default:
        return n;
    }
}

/* Lays the plan's arrays over mem (NULL: just sizes). Returns bytes. */
static size_t plan_layout(oml_daml_plan *pl, const oml_daml_hp *hp, int32_t n_cap, int synthetic,
                          void *mem)
{
    int64_t n = n_cap, T = plan_tcap(hp, n, synthetic);
    int64_t P = hp->term == OML_DAML_LIFTED ? n * (n - 1) / 2 + 1 : 1;
    int need_p = !(hp->term == OML_DAML_LIFTED && !synthetic);
    size_t bytes = (size_t)(n + 1) * sizeof(double);
    size_t ints = (size_t)T * (need_p ? 3 : 2) + (size_t)(n + 2) + 2 * (size_t)P + (size_t)(n + 1);
    bytes += ints * sizeof(int32_t);
    if (mem == NULL)
        return bytes;
    memset(pl, 0, sizeof *pl);
    pl->term = hp->term;
    pl->_rowmax = mem;
    int32_t *q = (int32_t *)(pl->_rowmax + n + 1);
    pl->a = q;
    q += T;
    pl->j = q;
    q += T;
    if (need_p) {
        pl->p = q;
        q += T;
    }
    pl->gs = q;
    q += n + 2;
    pl->pi = q;
    q += P;
    pl->pj = q;
    q += P;
    pl->_rowarg = q;
    return bytes;
}

int oml_daml_plan_init(oml_daml_plan *pl, const oml_daml_hp *hp, int32_t n_cap, int synthetic)
{
    memset(pl, 0, sizeof *pl);
    if (n_cap < 2)
        return OML_EINVAL;
    size_t bytes = plan_layout(pl, hp, n_cap, synthetic, NULL);
    void *mem = malloc(bytes);
    if (mem == NULL)
        return OML_ENOMEM;
    plan_layout(pl, hp, n_cap, synthetic, mem);
    pl->_block = mem;
    return OML_OK;
}

void oml_daml_plan_free(oml_daml_plan *pl)
{
    free(pl->_block);
    memset(pl, 0, sizeof *pl);
}

/* A uniformly random row r != i with (same ? y[r] == y[i] : y[r] != y[i]),
 * or -1 if there is none; count is the number of such rows. */
static int32_t draw_row(const int32_t *y, int32_t n, int32_t i, int same, int32_t count,
                        oml_rng *rng)
{
    if (count <= 0)
        return -1;
    int32_t pick = (int32_t)oml_rng_below(rng, (uint64_t)count);
    for (int32_t r = 0; r < n; r++) {
        if (r == i || (y[r] == y[i]) != (same != 0))
            continue;
        if (pick-- == 0)
            return r;
    }
    return -1;
}

/* The N-pair plan (Eq. 12): classes with two items or more, in order of
 * first appearance; tuple group g of class c is its (2g)-th item as anchor,
 * its (2g+1)-th as positive and the (2g+1)-th of every other class as the
 * negatives. Returns T. */
static int32_t plan_npair(oml_daml_plan *pl, const int32_t *y, int32_t n)
{
    int32_t T = 0, G = 0;
    int32_t *cls = pl->_rowarg; /* (n) first row of each class */
    int32_t C = 0, pairs = INT32_MAX;
    for (int32_t r = 0; r < n; r++) {
        int32_t c = 0;
        while (c < C && y[cls[c]] != y[r])
            c++;
        if (c == C)
            cls[C++] = r;
    }
    int32_t keep = 0;
    for (int32_t c = 0; c < C; c++) {
        int32_t cnt = 0;
        for (int32_t r = 0; r < n; r++)
            cnt += y[r] == y[cls[c]];
        if (cnt >= 2) {
            cls[keep++] = cls[c];
            pairs = cnt / 2 < pairs ? cnt / 2 : pairs;
        }
    }
    C = keep;
    if (C < 2)
        return 0;
    /* The (2g)-th and (2g+1)-th item of each class form N-pair tuple g. */
    for (int32_t g = 0; g < pairs; g++) {
        for (int32_t c = 0; c < C; c++) {
            int32_t anc = -1, pos = -1, seen = 0;
            for (int32_t r = 0; r < n && pos < 0; r++)
                if (y[r] == y[cls[c]]) {
                    if (seen == 2 * g)
                        anc = r;
                    else if (seen == 2 * g + 1)
                        pos = r;
                    seen++;
                }
            pl->gs[G++] = T;
            for (int32_t c2 = 0; c2 < C; c2++) {
                if (c2 == c)
                    continue;
                int32_t seen2 = 0, neg = -1;
                for (int32_t r = 0; r < n && neg < 0; r++)
                    if (y[r] == y[cls[c2]] && seen2++ == 2 * g + 1)
                        neg = r; /* x_c'+ */
                pl->a[T] = anc;
                pl->p[T] = pos;
                pl->j[T] = neg;
                T++;
            }
        }
    }
    pl->gs[G] = T;
    pl->T = T;
    pl->G = G;
    return T;
}

/* The tuples of every anchor i, one group each: all its negatives (plain
 * lifted), or a drawn positive with gen_per_anchor (lifted) or one drawn
 * negative. Anchors without a positive or a negative get an empty group.
 * Returns T. */
static int32_t plan_anchors(oml_daml_plan *pl, const oml_daml_hp *hp, const int32_t *y,
                            int32_t n, int synthetic, oml_rng *rng)
{
    int32_t T = 0, G = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t same = 0, other = 0;
        for (int32_t r = 0; r < n; r++) {
            same += r != i && y[r] == y[i];
            other += y[r] != y[i];
        }
        pl->gs[G++] = T;
        if (same == 0 || other == 0)
            continue;
        if (pl->term == OML_DAML_LIFTED && !synthetic) {
            for (int32_t r = 0; r < n; r++)
                if (y[r] != y[i]) {
                    pl->a[T] = i;
                    pl->j[T++] = r;
                }
            continue;
        }
        int32_t pos = draw_row(y, n, i, 1, same, rng);
        int32_t cnt = pl->term == OML_DAML_LIFTED ? (hp->gen_per_anchor > 0 ? hp->gen_per_anchor : 1)
                                                  : 1;
        for (int32_t s = 0; s < cnt; s++) {
            pl->a[T] = i;
            pl->p[T] = pos;
            pl->j[T++] = draw_row(y, n, i, 0, other, rng);
        }
    }
    pl->gs[G] = T;
    pl->G = G;
    return T;
}

/* The positive pairs (i < r, same label) of the lifted term (Eq. 10). */
static int32_t plan_lifted_pairs(oml_daml_plan *pl, const int32_t *y, int32_t n)
{
    int32_t P = 0;
    for (int32_t i = 0; i < n; i++)
        for (int32_t r = i + 1; r < n; r++)
            if (y[r] == y[i]) {
                pl->pi[P] = i;
                pl->pj[P++] = r;
            }
    pl->P = P;
    return P;
}

int32_t oml_daml_plan_build(oml_daml_plan *pl, const oml_daml_hp *hp, const int32_t *y, int32_t n,
                            int synthetic, oml_rng *rng)
{
    pl->n = n;
    pl->T = pl->G = pl->P = 0;
    if (pl->term == OML_DAML_NPAIR)
        return plan_npair(pl, y, n);
    int32_t T = plan_anchors(pl, hp, y, n, synthetic, rng);
    if (pl->term == OML_DAML_LIFTED && plan_lifted_pairs(pl, y, n) == 0)
        T = 0;
    pl->T = T;
    return T;
}

/* ---- the metric terms ---- */

static double sqdist(const double *F, int32_t e, int32_t r, int32_t s)
{
    const double *u = F + (size_t)r * e, *v = F + (size_t)s * e;
    double acc = 0.0;
    for (int32_t k = 0; k < e; k++) {
        double t = u[k] - v[k];
        acc += t * t;
    }
    return acc;
}

static double dot(const double *F, int32_t e, int32_t r, int32_t s)
{
    const double *u = F + (size_t)r * e, *v = F + (size_t)s * e;
    double acc = 0.0;
    for (int32_t k = 0; k < e; k++)
        acc += u[k] * v[k];
    return acc;
}

/* gF[r] += c (f_r - f_s), gF[s] -= c (f_r - f_s): the gradient of c/2 ||f_r - f_s||^2 ... x2. */
static void add_diff(const double *F, int32_t e, int32_t r, int32_t s, double c, double *gF)
{
    const double *u = F + (size_t)r * e, *v = F + (size_t)s * e;
    double *gu = gF + (size_t)r * e, *gv = gF + (size_t)s * e;
    for (int32_t k = 0; k < e; k++) {
        double t = c * (u[k] - v[k]);
        gu[k] += t;
        gv[k] -= t;
    }
}

/* Adds c dD(r, s)/dF with D the (unsquared) Euclidean distance d. */
static void add_dist(const double *F, int32_t e, int32_t r, int32_t s, double d, double c,
                     double *gF)
{
    if (d > DIST_EPS)
        add_diff(F, e, r, s, c / d, gF);
}

/* The row of tuple t's negative in F: the synthetic row n + t, or the real j[t]. */
static int32_t neg_row(const oml_daml_plan *pl, int synthetic, int32_t t)
{
    return synthetic ? pl->n + t : pl->j[t];
}

static double jm_contrastive(double alpha, const oml_daml_plan *pl, const double *F, int32_t e,
                             int synthetic, double *gF)
{
    /* Eq. 8: sum_i D(x_i+, x_i)^2 + sum_j [alpha - D(x~_j-, x_j)^2]_+, over T. */
    int32_t T = pl->T;
    double inv = 1.0 / T, J = 0.0;
    for (int32_t t = 0; t < T; t++) {
        int32_t a = pl->a[t], p = pl->p[t], ng = neg_row(pl, synthetic, t);
        J += sqdist(F, e, a, p);
        add_diff(F, e, a, p, 2.0 * inv, gF);
        double dn = sqdist(F, e, a, ng);
        if (alpha - dn > 0) {
            J += alpha - dn;
            add_diff(F, e, a, ng, -2.0 * inv, gF);
        }
    }
    return J * inv;
}

static double jm_triplet(double alpha, const oml_daml_plan *pl, const double *F, int32_t e,
                         int synthetic, double *gF)
{
    /* Eq. 9: sum_i [D(x_i+, x_i)^2 - D(x~_i-, x_i)^2 + alpha]_+, over T. */
    int32_t T = pl->T;
    double inv = 1.0 / T, J = 0.0;
    for (int32_t t = 0; t < T; t++) {
        int32_t a = pl->a[t], p = pl->p[t], ng = neg_row(pl, synthetic, t);
        double x = sqdist(F, e, a, p) - sqdist(F, e, a, ng) + alpha;
        if (x <= 0)
            continue;
        J += x;
        add_diff(F, e, a, p, 2.0 * inv, gF);
        add_diff(F, e, a, ng, -2.0 * inv, gF);
    }
    return J * inv;
}

static double jm_lifted(double alpha, const oml_daml_plan *pl, const double *F, int32_t e,
                        int synthetic, double *gF)
{
    /* Eq. 11: J_{i+,i} = max( max_k alpha - D~(x_i+)_k, max_l alpha - D~(x_i)_l )
     *                   + D(x_i+, x_i);  Eq. 10: J = 1/(2 N_i) sum max(0, J_{i+,i}).
     * max_k (alpha - D_k) = alpha - min_k D_k: one pass per row. */
    for (int32_t q = 0; q < pl->G; q++) {
        double best = INFINITY;
        int32_t arg = -1;
        for (int32_t t = pl->gs[q]; t < pl->gs[q + 1]; t++) {
            double d = sqrt(sqdist(F, e, pl->a[t], neg_row(pl, synthetic, t)));
            if (d < best) {
                best = d;
                arg = t;
            }
        }
        pl->_rowmax[q] = alpha - best; /* -inf when the row has no negative */
        pl->_rowarg[q] = arg;
    }
    if (pl->P == 0)
        return 0.0;
    double inv = 1.0 / (2.0 * pl->P), J = 0.0;
    for (int32_t k = 0; k < pl->P; k++) {
        int32_t i = pl->pi[k], ip = pl->pj[k];
        double mi = pl->_rowmax[i], mp = pl->_rowmax[ip];
        if (!isfinite(mi) && !isfinite(mp))
            continue;
        int32_t side = mi >= mp ? i : ip, t = pl->_rowarg[side];
        double dpos = sqrt(sqdist(F, e, i, ip)), x = (mi >= mp ? mi : mp) + dpos;
        if (x <= 0)
            continue;
        J += x;
        add_dist(F, e, i, ip, dpos, inv, gF);
        add_dist(F, e, pl->a[t], neg_row(pl, synthetic, t), alpha - pl->_rowmax[side], -inv, gF);
    }
    return J * inv;
}

static double jm_npair(const oml_daml_plan *pl, const double *F, int32_t e, int synthetic,
                       double *gF)
{
    /* Eq. 12: (1/C) sum_c log(1 + sum_c' exp(f_c.f~_c' - f_c.f_c+)), D = f_i^T f_j. */
    if (pl->G == 0)
        return 0.0;
    double inv = 1.0 / pl->G, J = 0.0;
    for (int32_t q = 0; q < pl->G; q++) {
        int32_t t0 = pl->gs[q], t1 = pl->gs[q + 1];
        if (t1 == t0)
            continue;
        int32_t a = pl->a[t0], p = pl->p[t0];
        double sp = dot(F, e, a, p), mx = 0.0; /* the "1" is exp(0) */
        for (int32_t t = t0; t < t1; t++) {
            double s = dot(F, e, a, neg_row(pl, synthetic, t)) - sp;
            mx = s > mx ? s : mx;
        }
        double Z = exp(-mx);
        for (int32_t t = t0; t < t1; t++)
            Z += exp(dot(F, e, a, neg_row(pl, synthetic, t)) - sp - mx);
        J += mx + log(Z);
        double *ga = gF + (size_t)a * e, *gp = gF + (size_t)p * e;
        const double *fa = F + (size_t)a * e, *fp = F + (size_t)p * e;
        for (int32_t t = t0; t < t1; t++) {
            int32_t ng = neg_row(pl, synthetic, t);
            double w = exp(dot(F, e, a, ng) - sp - mx) / Z * inv;
            const double *fn = F + (size_t)ng * e;
            double *gn = gF + (size_t)ng * e;
            for (int32_t k = 0; k < e; k++) {
                ga[k] += w * (fn[k] - fp[k]);
                gn[k] += w * fa[k];
                gp[k] -= w * fa[k];
            }
        }
    }
    return J * inv;
}

double oml_daml_jm(const oml_daml_hp *hp, const oml_daml_plan *pl, const double *F, int32_t e,
                   int synthetic, double *gF)
{
    int32_t n = pl->n, T = pl->T;
    size_t rows = (size_t)n + (synthetic ? (size_t)T : 0);
    memset(gF, 0, rows * (size_t)e * sizeof *gF);
    if (T == 0)
        return 0.0;
    double alpha = hp->alpha;
    switch (pl->term) {
    case OML_DAML_CONTRASTIVE:
        return jm_contrastive(alpha, pl, F, e, synthetic, gF);
    case OML_DAML_TRIPLET:
        return jm_triplet(alpha, pl, F, e, synthetic, gF);
    case OML_DAML_LIFTED:
        return jm_lifted(alpha, pl, F, e, synthetic, gF);
    case OML_DAML_NPAIR:
        return jm_npair(pl, F, e, synthetic, gF);
    default:
        return NAN;
    }
}

double oml_daml_jgen(const oml_daml_hp *hp, const oml_daml_plan *pl, const double *Xs,
                     const float *X, int32_t dim, const double *F, int32_t e, double *gXs,
                     double *gF)
{
    int32_t n = pl->n, T = pl->T;
    memset(gXs, 0, (size_t)T * (size_t)dim * sizeof *gXs);
    memset(gF, 0, ((size_t)n + (size_t)T) * (size_t)e * sizeof *gF);
    if (T == 0)
        return 0.0;
    double inv = 1.0 / T, l1 = hp->lambda1, l2 = hp->lambda2, J = 0.0;
    for (int32_t t = 0; t < T; t++) {
        const double *xs = Xs + (size_t)t * dim;
        const float *xa = X + (size_t)pl->a[t] * dim, *xn = X + (size_t)pl->j[t] * dim;
        double *g = gXs + (size_t)t * dim, hard = 0.0, reg = 0.0;
        for (int32_t k = 0; k < dim; k++) {
            double u = xs[k] - xa[k], v = xs[k] - xn[k];
            hard += u * u; /* J_hard: ||x~ - x||^2 */
            reg += v * v;  /* J_reg: ||x~ - x-||^2 */
            g[k] = inv * (2.0 * u + 2.0 * l1 * v);
        }
        /* J_adv: [D(x~, x)^2 - D(x+, x)^2 - alpha]_+, x+ = x for contrastive pairs. */
        int32_t a = pl->a[t], p = pl->term == OML_DAML_CONTRASTIVE ? a : pl->p[t], s = n + t;
        double adv = sqdist(F, e, s, a) - (p == a ? 0.0 : sqdist(F, e, p, a)) - hp->alpha;
        J += hard + l1 * reg;
        if (adv > 0) {
            J += l2 * adv;
            add_diff(F, e, s, a, 2.0 * l2 * inv, gF);
            if (p != a)
                add_diff(F, e, p, a, -2.0 * l2 * inv, gF);
        }
    }
    return J * inv;
}

double oml_daml_plain_loss(const void *hp_, const double *F, const int32_t *y, int32_t n, int32_t e,
                           double *gF, oml_rng *rng, double *work)
{
    const oml_daml_hp *hp = hp_;
    oml_daml_plan pl;
    /* The plan fits oml_batch_loss_work(n): at most 12 n^2 + 4 n + 12 bytes. */
    plan_layout(&pl, hp, n, 0, work);
    if (oml_daml_plan_build(&pl, hp, y, n, 0, rng) == 0) {
        memset(gF, 0, (size_t)n * (size_t)e * sizeof *gF);
        return 0.0;
    }
    return oml_daml_jm(hp, &pl, F, e, 0, gF);
}

/* ---- the generator ---- */

static void uniform_init(oml_rng *rng, float *w, size_t count, size_t fan_in)
{
    float bound = 1.0f / sqrtf((float)fan_in);
    for (size_t i = 0; i < count; i++)
        w[i] = (2.0f * oml_rng_uniform(rng) - 1.0f) * bound;
}

int oml_daml_gen_init(oml_daml_gen *g, int32_t dim, int32_t hidden, uint64_t seed)
{
    memset(g, 0, sizeof *g);
    if (dim < 1 || hidden < 1 || dim > (1 << 20) || hidden > 65536)
        return OML_EINVAL;
    size_t d = (size_t)dim, h = (size_t)hidden, off = 0;
    g->dim = dim;
    g->hidden = hidden;
    g->w1 = off;
    off += h * 3 * d;
    g->b1 = off;
    off += h;
    g->w2 = off;
    off += h * h;
    g->b2 = off;
    off += h;
    g->w3 = off;
    off += d * h;
    g->b3 = off;
    off += d;
    g->count = off;
    g->params = malloc(off * sizeof *g->params);
    if (g->params == NULL)
        return OML_ENOMEM;
    oml_rng rng;
    oml_rng_seed(&rng, seed);
    uniform_init(&rng, g->params + g->w1, h * 3 * d + h, 3 * d);
    uniform_init(&rng, g->params + g->w2, h * h + h, h);
    uniform_init(&rng, g->params + g->w3, d * h + d, h);
    return OML_OK;
}

void oml_daml_gen_free(oml_daml_gen *g)
{
    free(g->params);
    memset(g, 0, sizeof *g);
}

/* U (T, 3 dim) -> h1, h2 (T, hidden) -> out (T, dim). */
static void gen_forward(const oml_daml_gen *g, const float *U, int32_t T, float *h1, float *h2,
                        float *out)
{
    int32_t d = g->dim, h = g->hidden;
    const float *p = g->params;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, h, 3 * d, 1.0f, U, 3 * d, p + g->w1,
                3 * d, 0.0f, h1, h);
    for (int32_t t = 0; t < T; t++)
        for (int32_t k = 0; k < h; k++) {
            float v = h1[(size_t)t * h + k] + p[g->b1 + k];
            h1[(size_t)t * h + k] = v > 0 ? v : 0;
        }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, h, h, 1.0f, h1, h, p + g->w2, h, 0.0f,
                h2, h);
    for (int32_t t = 0; t < T; t++)
        for (int32_t k = 0; k < h; k++) {
            float v = h2[(size_t)t * h + k] + p[g->b2 + k];
            h2[(size_t)t * h + k] = v > 0 ? v : 0;
        }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, d, h, 1.0f, h2, h, p + g->w3, h, 0.0f,
                out, d);
    for (int32_t t = 0; t < T; t++)
        for (int32_t k = 0; k < d; k++)
            out[(size_t)t * d + k] += p[g->b3 + k];
}

/* From gout = dJ/dout (T, dim): grad (count). gh1, gh2 (T, hidden) scratch. */
static void gen_backward(const oml_daml_gen *g, const float *U, int32_t T, const float *h1,
                         const float *h2, const float *gout, float *gh1, float *gh2, float *grad)
{
    int32_t d = g->dim, h = g->hidden;
    const float *p = g->params;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d, h, T, 1.0f, gout, d, h2, h, 0.0f,
                grad + g->w3, h);
    for (int32_t k = 0; k < d; k++) {
        float s = 0;
        for (int32_t t = 0; t < T; t++)
            s += gout[(size_t)t * d + k];
        grad[g->b3 + k] = s;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, h, d, 1.0f, gout, d, p + g->w3, h,
                0.0f, gh2, h);
    for (size_t k = 0; k < (size_t)T * (size_t)h; k++)
        if (h2[k] <= 0)
            gh2[k] = 0;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, h, h, T, 1.0f, gh2, h, h1, h, 0.0f,
                grad + g->w2, h);
    for (int32_t k = 0; k < h; k++) {
        float s = 0;
        for (int32_t t = 0; t < T; t++)
            s += gh2[(size_t)t * h + k];
        grad[g->b2 + k] = s;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, h, h, 1.0f, gh2, h, p + g->w2, h,
                0.0f, gh1, h);
    for (size_t k = 0; k < (size_t)T * (size_t)h; k++)
        if (h1[k] <= 0)
            gh1[k] = 0;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, h, 3 * d, T, 1.0f, gh1, h, U, 3 * d, 0.0f,
                grad + g->w1, 3 * d);
    for (int32_t k = 0; k < h; k++) {
        float s = 0;
        for (int32_t t = 0; t < T; t++)
            s += gh1[(size_t)t * h + k];
        grad[g->b1 + k] = s;
    }
}

/* ---- the step context ---- */

struct oml_daml_ctx {
    oml_daml_hp hp;
    oml_batch_layout lay;
    int32_t b_cap, t_cap, rows_cap;
    oml_daml_gen gen;
    oml_daml_plan plan;
    oml__batch_ws ws;
    float *U, *h1, *h2, *xs, *gxs, *gh1, *gh2, *Xall, *gx, *gf, *gscratch, *ggrad, *v, *s;
    double *Fd, *gFm, *gFg, *Xsd, *gXsd;
    int64_t adam_t, steps;
};

oml_daml_gen *oml_daml_ctx_gen(oml_daml_ctx *c)
{
    return &c->gen;
}

oml_daml_plan *oml_daml_ctx_plan(oml_daml_ctx *c)
{
    return &c->plan;
}

void oml_daml_ctx_destroy(oml_daml_ctx *c)
{
    if (c == NULL)
        return;
    oml_daml_gen_free(&c->gen);
    oml_daml_plan_free(&c->plan);
    oml__batch_ws_free(&c->ws);
    float *fs[] = {c->U,  c->h1, c->h2,       c->xs,    c->gxs, c->gh1, c->gh2,
                   c->Xall, c->gx, c->gf, c->gscratch, c->ggrad, c->v, c->s};
    for (size_t i = 0; i < sizeof fs / sizeof *fs; i++)
        free(fs[i]);
    double *ds[] = {c->Fd, c->gFm, c->gFg, c->Xsd, c->gXsd};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++)
        free(ds[i]);
    free(c);
}

int oml_daml_ctx_create(oml_daml_ctx **out, const oml_daml_hp *hp, const oml_batch_layout *lay,
                        int32_t b_cap, uint64_t seed)
{
    if (hp->term < OML_DAML_CONTRASTIVE || hp->term > OML_DAML_NPAIR || b_cap < 2)
        return OML_EINVAL;
    oml_daml_ctx *c = calloc(1, sizeof *c);
    if (c == NULL)
        return OML_ENOMEM;
    c->hp = *hp;
    c->lay = *lay;
    c->b_cap = b_cap;
    c->t_cap = (int32_t)plan_tcap(hp, b_cap, 1);
    c->rows_cap = b_cap + c->t_cap;
    size_t d = (size_t)lay->dim, e = (size_t)lay->emb, T = (size_t)c->t_cap,
           R = (size_t)c->rows_cap;
    int32_t H = hp->gen_hidden > 0 ? hp->gen_hidden : 256;
    int rc = oml_daml_gen_init(&c->gen, lay->dim, H, seed);
    if (rc == OML_OK)
        rc = oml_daml_plan_init(&c->plan, hp, b_cap, 1);
    if (rc == OML_OK)
        rc = oml__batch_ws_init(&c->ws, lay, c->rows_cap);
    if (rc != OML_OK) {
        oml_daml_ctx_destroy(c);
        return rc;
    }
    c->U = malloc(T * 3 * d * sizeof(float));
    c->h1 = malloc(T * (size_t)H * sizeof(float));
    c->h2 = malloc(T * (size_t)H * sizeof(float));
    c->gh1 = malloc(T * (size_t)H * sizeof(float));
    c->gh2 = malloc(T * (size_t)H * sizeof(float));
    c->xs = malloc(T * d * sizeof(float));
    c->gxs = malloc(T * d * sizeof(float));
    c->Xall = malloc(R * d * sizeof(float));
    c->gx = malloc(R * d * sizeof(float));
    c->gf = malloc(R * e * sizeof(float));
    c->gscratch = malloc(lay->count * sizeof(float));
    c->ggrad = malloc(c->gen.count * sizeof(float));
    c->v = calloc(c->gen.count, sizeof(float));
    c->s = calloc(c->gen.count, sizeof(float));
    c->Fd = malloc(R * e * sizeof(double));
    c->gFm = malloc(R * e * sizeof(double));
    c->gFg = malloc(R * e * sizeof(double));
    c->Xsd = malloc(T * d * sizeof(double));
    c->gXsd = malloc(T * d * sizeof(double));
    if (!c->U || !c->h1 || !c->h2 || !c->gh1 || !c->gh2 || !c->xs || !c->gxs || !c->Xall || !c->gx
        || !c->gf || !c->gscratch || !c->ggrad || !c->v || !c->s || !c->Fd || !c->gFm || !c->gFg
        || !c->Xsd || !c->gXsd) {
        oml_daml_ctx_destroy(c);
        return OML_ENOMEM;
    }
    *out = c;
    return OML_OK;
}

int oml_daml_eval(oml_daml_ctx *c, const float *params_f, const float *Xb, int32_t b,
                  double *jgen, double *jm, float *grad_f, float *grad_g)
{
    const oml_daml_plan *pl = &c->plan;
    const oml_daml_hp *hp = &c->hp;
    int32_t T = pl->T, d = c->lay.dim, e = c->lay.emb, R = b + T;
    if (b > c->b_cap || T > c->t_cap || pl->n != b)
        return OML_EINVAL;
    if (T == 0) {
        *jgen = *jm = 0.0;
        if (grad_f)
            memset(grad_f, 0, c->lay.count * sizeof *grad_f);
        if (grad_g)
            memset(grad_g, 0, c->gen.count * sizeof *grad_g);
        return OML_OK;
    }
    /* Eq. 5: x~ = G(x-, x, x+), the input rows concatenated (Sec. 3.4). */
    for (int32_t t = 0; t < T; t++) {
        int32_t pos = pl->term == OML_DAML_CONTRASTIVE ? pl->a[t] : pl->p[t];
        float *u = c->U + (size_t)t * 3 * d;
        memcpy(u, Xb + (size_t)pl->j[t] * d, (size_t)d * sizeof *u);
        memcpy(u + d, Xb + (size_t)pl->a[t] * d, (size_t)d * sizeof *u);
        memcpy(u + 2 * d, Xb + (size_t)pos * d, (size_t)d * sizeof *u);
    }
    gen_forward(&c->gen, c->U, T, c->h1, c->h2, c->xs);
    memcpy(c->Xall, Xb, (size_t)b * d * sizeof *Xb);
    memcpy(c->Xall + (size_t)b * d, c->xs, (size_t)T * d * sizeof *c->xs);
    oml__batch_forward(&c->lay, params_f, c->Xall, R, &c->ws);
    size_t Re = (size_t)R * (size_t)e;
    for (size_t k = 0; k < Re; k++)
        c->Fd[k] = c->ws.f[k];
    for (size_t k = 0; k < (size_t)T * d; k++)
        c->Xsd[k] = c->xs[k];
    *jm = oml_daml_jm(hp, pl, c->Fd, e, 1, c->gFm);
    *jgen = oml_daml_jgen(hp, pl, c->Xsd, Xb, d, c->Fd, e, c->gXsd, c->gFg);
    double lam = hp->lambda;
    if (hp->literal) {
        /* Eq. 7 on both players: dJ = dJ_gen + lambda dJ_m everywhere. */
        for (size_t k = 0; k < Re; k++)
            c->gf[k] = (float)(c->gFg[k] + lam * c->gFm[k]);
        oml__batch_backward_x(&c->lay, params_f, R, &c->ws, c->gf, grad_f ? grad_f : c->gscratch,
                              grad_g ? c->gx : NULL);
    } else {
        if (grad_f != NULL) { /* theta_f descends lambda J_m (Eq. 8-12) */
            for (size_t k = 0; k < Re; k++)
                c->gf[k] = (float)(lam * c->gFm[k]);
            oml__batch_backward(&c->lay, params_f, R, &c->ws, c->gf, grad_f);
        }
        if (grad_g != NULL) { /* theta_g descends J_gen (Eq. 6): J_adv through the metric */
            for (size_t k = 0; k < Re; k++)
                c->gf[k] = (float)c->gFg[k];
            oml__batch_backward_x(&c->lay, params_f, R, &c->ws, c->gf, c->gscratch, c->gx);
        }
    }
    if (grad_g != NULL) {
        for (size_t k = 0; k < (size_t)T * d; k++)
            c->gxs[k] = c->gx[(size_t)b * d + k] + (float)c->gXsd[k];
        gen_backward(&c->gen, c->U, T, c->h1, c->h2, c->gxs, c->gh1, c->gh2, grad_g);
    }
    return OML_OK;
}

/* The generator's own Adam (beta 0.9 / 0.999). */
static void gen_adam(oml_daml_ctx *c)
{
    float *p = c->gen.params, b1 = 0.9f, b2 = 0.999f;
    c->adam_t++;
    double bc1 = 1.0 - pow(b1, (double)c->adam_t), bc2 = 1.0 - pow(b2, (double)c->adam_t);
    float a = (float)(c->hp.gen_lr * sqrt(bc2) / bc1);
    for (size_t i = 0; i < c->gen.count; i++) {
        float g = c->ggrad[i];
        c->v[i] = b1 * c->v[i] + (1.0f - b1) * g;
        c->s[i] = b2 * c->s[i] + (1.0f - b2) * g * g;
        p[i] -= a * c->v[i] / (sqrtf(c->s[i]) + 1e-8f);
    }
}

/* The oml_batch_step_fn of the joint phase (Alg. 1 steps 4-6), preceded by
 * hp.gen_warmup generator-only steps (step 2, "initialize the generator
 * adversarial to the pre-trained metric", Sec. 3.2). */
static double daml_step(void *ctx, const oml_batch_layout *lay, const float *params,
                        const float *Xb, const int32_t *yb, int32_t n, int32_t epoch, int64_t step,
                        oml_rng *rng, float *grad)
{
    (void)epoch;
    (void)step;
    oml_daml_ctx *c = ctx;
    int warm = c->steps < c->hp.gen_warmup;
    c->steps++;
    if (oml_daml_plan_build(&c->plan, &c->hp, yb, n, 1, rng) == 0) {
        memset(grad, 0, lay->count * sizeof *grad);
        return 0.0;
    }
    double jg, jm;
    if (oml_daml_eval(c, params, Xb, n, &jg, &jm, warm ? NULL : grad, c->ggrad) != OML_OK)
        return NAN;
    if (warm)
        memset(grad, 0, lay->count * sizeof *grad);
    gen_adam(c);
    return jg + c->hp.lambda * jm; /* Eq. 7 */
}

static int32_t plain_method(int32_t term)
{
    return term == OML_DAML_CONTRASTIVE ? OML_BATCH_CONTRASTIVE
           : term == OML_DAML_TRIPLET   ? OML_BATCH_TRIPLET
           : term == OML_DAML_LIFTED    ? OML_BATCH_LIFTED
                                        : OML_BATCH_NPAIR;
}

static int check_hp(const oml_daml_hp *hp, oml_diag *diag)
{
    if (hp->term < OML_DAML_CONTRASTIVE || hp->term > OML_DAML_NPAIR)
        return oml_diag_set(diag, OML_EINVAL, "term", "unknown DAML metric term %d", hp->term);
    if (!(hp->alpha >= 0) || !(hp->lambda >= 0) || !(hp->lambda1 >= 0) || !(hp->lambda2 >= 0))
        return oml_diag_set(diag, OML_EINVAL, "alpha", "alpha and the lambdas must be >= 0");
    return OML_OK;
}

int oml_daml_train_plain(const oml_batch_spec *spec, const oml_daml_hp *hp, const float *X,
                         const int32_t *labels, int32_t n, int32_t dim, oml_batch_model **out,
                         oml_diag *diag)
{
    int rc = check_hp(hp, diag);
    if (rc != OML_OK)
        return rc;
    oml_batch_spec sp = *spec;
    sp.method = plain_method(hp->term);
    sp.loss = oml_daml_plain_loss;
    sp.loss_hp = hp;
    return oml_batch_train(&sp, X, labels, n, dim, out, diag);
}

int oml_daml_train(const oml_batch_spec *spec, const oml_daml_hp *hp, const float *X,
                   const int32_t *labels, int32_t n, int32_t dim, oml_batch_model **out,
                   oml_diag *diag)
{
    int rc = check_hp(hp, diag);
    if (rc != OML_OK)
        return rc;
    if (spec->sampler != OML_BATCH_SAMPLE_MK)
        return oml_diag_set(diag, OML_EINVAL, "sampler", "DAML draws its tuples from m x k batches");
    if (hp->joint_epochs < 1)
        return oml_diag_set(diag, OML_EINVAL, "joint_epochs", "joint_epochs must be >= 1");
    /* Alg. 1 step 1: pre-train theta_f without the generator. */
    oml_batch_spec s1 = *spec;
    if (hp->pretrain_epochs > 0)
        s1.epochs = hp->pretrain_epochs;
    oml_batch_model *pre = NULL, *m = NULL;
    if ((rc = oml_daml_train_plain(&s1, hp, X, labels, n, dim, &pre, diag)) != OML_OK)
        return rc;
    /* Steps 2-7: the generator, then both jointly from the pre-trained metric. */
    oml_daml_ctx *c = NULL;
    if ((rc = oml_daml_ctx_create(&c, hp, &pre->lay, spec->m * spec->k,
                                  spec->seed ^ 0x5851f42d4c957f2dull)) != OML_OK) {
        oml_batch_model_destroy(pre);
        return rc;
    }
    oml_batch_spec s2 = *spec;
    s2.method = OML_BATCH_DAML_CONTRASTIVE + hp->term;
    s2.epochs = hp->joint_epochs;
    s2.init = pre;
    s2.step = daml_step;
    s2.step_ctx = c;
    s2.loss = NULL;
    rc = oml_batch_train(&s2, X, labels, n, dim, &m, diag);
    oml_daml_ctx_destroy(c);
    oml_batch_model_destroy(pre);
    if (rc != OML_OK)
        return rc;
    m->method = OML_BATCH_DAML_CONTRASTIVE + hp->term;
    *out = m;
    return OML_OK;
}
