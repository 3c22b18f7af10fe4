/* learner.c - one OAHU update per triplet (Alg. 1), single-threaded by contract.
 *
 * DESIGN: the learner owns one parameter block (net.h layout) and a fixed
 * workspace for three rows, so a step allocates nothing. The step order is
 * Alg. 1 lines 4-11: forward (a, p, n) as one (3, d) batch; per head the
 * ABTL thresholds from the pre-update distances (Eq. 11), losses (Eq. 12-13)
 * and dLoss/df; one fused backward + SGD pass (Eq. 21-22); hedge (Eq. 20).
 * Everything after that is the `default` preset's levers: a learning-rate
 * decay and a proximal pull of the weights toward their start. */
#include "learner.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "abtl.h"
#include "hedge.h"
#include "learner_int.h"

#define LOSS_EMA 0.99f
#define PROX_EVERY 32      /* apply the proximal pull every few steps, exactly compounded */
#define REF_ITEMS 256      /* OML_HEDGE_LOCAL: stored items sampled as the reference */
#define REF_K 10           /* ... neighbours compared */
#define REF_REFRESH 1000   /* ... re-embed the reference every so many updates */
#define REF_EVERY 4        /* ... the hedge moves on every 4th triplet (every 16th
                            * is ~6% faster and 0.001 worse at 1e5: README) */

/* PyTorch's nn.Linear default, U(-1/sqrt(fan_in), 1/sqrt(fan_in)): the
 * "randomly initialized ANN" of Alg. 1 as its reference implementation has it. */
static void init_uniform(oml_rng *rng, float *w, size_t rows, size_t cols)
{
    float bound = 1.0f / sqrtf((float)cols);
    for (size_t i = 0; i < rows * cols; i++)
        w[i] = (2.0f * oml_rng_uniform(rng) - 1.0f) * bound;
}

static void init_random(oml_learner *l)
{
    const oml_net_layout *lay = &l->lay;
    memset(l->params, 0, lay->count * sizeof(float));
    for (int32_t j = 0; lay->has_scale && j < lay->dim; j++)
        l->params[lay->scale + j] = 1.0f; /* until the start's sd replaces it */
    for (int k = 1; k <= lay->layers; k++)
        init_uniform(&l->rng, l->params + lay->w[k], (size_t)lay->hidden,
                     (size_t)oml_net_width(lay, k - 1));
    for (int k = 0; k <= lay->layers; k++)
        init_uniform(&l->rng, l->params + lay->theta[k], (size_t)lay->emb,
                     (size_t)oml_net_width(lay, k));
}

/* One triplet in every head, before the step: distances, the loss of
 * cfg.loss and its derivatives in D+ and D-, the hedge signal. */
typedef struct judged {
    float loss[OML_MAX_HEADS], signal[OML_MAX_HEADS];
    float dp[OML_MAX_HEADS], dn[OML_MAX_HEADS];
    float g_pos[OML_MAX_HEADS], g_neg[OML_MAX_HEADS];
    float overall, ens_pos, ens_neg;
    int finite;
} judged;

/* The mini-batch workspace and Adam's moments, when the configuration
 * asks for them (the paper's one-triplet SGD needs neither). */
static int batch_alloc(oml_learner *l)
{
    const oml_net_layout *lay = &l->lay;
    const oml_config *c = &l->cfg;
    if (c->optim == OML_OPTIM_ADAM) {
        l->adam_m = calloc(lay->count, sizeof(float));
        l->adam_v = calloc(lay->count, sizeof(float));
        if (l->adam_m == NULL || l->adam_v == NULL)
            return OML_ENOMEM;
    }
    if (c->batch == 1 && c->optim == OML_OPTIM_SGD)
        return OML_OK;
    int32_t rows = 3 * c->batch;
    int heads = c->layers + 1;
    size_t gz = (size_t)rows * (size_t)c->emb;
    size_t work = (size_t)heads * gz + lay->count + oml_net_scratch_floats(lay, rows);
    l->_bwork = malloc(work * sizeof(float));
    l->_bjudged = malloc((size_t)c->batch * sizeof(judged));
    if (l->_bwork == NULL || l->_bjudged == NULL ||
        oml_net_acts_init(&l->_bacts, lay, rows) != OML_OK)
        return OML_ENOMEM;
    float *p = l->_bwork;
    for (int k = 0; k < heads; k++, p += gz)
        l->_bgz[k] = p;
    l->_bgrad = p;
    l->_bscratch = p + lay->count;
    return OML_OK;
}

int oml_learner_create(oml_learner **out, const oml_config *cfg, oml_diag *diag)
{
    int rc = oml_config_validate(cfg, diag);
    if (rc != OML_OK)
        return rc;
    oml_learner *l = calloc(1, sizeof *l);
    if (l == NULL)
        return OML_ENOMEM;
    l->cfg = *cfg;
    oml_net_layout_init(&l->lay, cfg);
    const oml_net_layout *lay = &l->lay;
    int heads = cfg->layers + 1;
    size_t emb3 = 3 * (size_t)cfg->emb;
    size_t work = (size_t)heads * emb3 + oml_net_scratch_floats(lay, 3);

    l->params = malloc(lay->count * sizeof(float));
    l->_work = malloc(work * sizeof(float));
    if (cfg->prox > 0)
        l->start = malloc(lay->count * sizeof(float));
    if (l->params == NULL || l->_work == NULL || (cfg->prox > 0 && l->start == NULL) ||
        oml_net_acts_init(&l->_acts, lay, 3) != OML_OK) {
        oml_learner_destroy(l);
        return OML_ENOMEM;
    }
    float *p = l->_work;
    for (int k = 0; k < heads; k++, p += emb3)
        l->_gz[k] = p;
    l->_scratch = p;

    if (batch_alloc(l) != OML_OK) {
        oml_learner_destroy(l);
        return OML_ENOMEM;
    }
    oml_rng_seed(&l->rng, cfg->seed);
    init_random(l);
    l->start_init = OML_INIT_RANDOM; /* until oml_learner_prepare takes a start */
    l->start_error[0] = l->start_error[1] = NAN;
    if (l->start)
        memcpy(l->start, l->params, lay->count * sizeof(float));
    oml_hedge_init(l->alpha, heads);
    *out = l;
    return OML_OK;
}

void oml_learner_destroy(oml_learner *l)
{
    if (l == NULL)
        return;
    oml_net_acts_free(&l->_acts);
    oml_net_acts_free(&l->_bacts);
    free(l->_bwork);
    free(l->_bjudged);
    free(l->adam_m);
    free(l->adam_v);
    free(l->params);
    free(l->start);
    free(l->_work);
    free(l->_ref_block);
    free(l);
}

/* Re-embeds the reference sample through every head. */
static int ref_refresh(oml_learner *l)
{
    const oml_net_layout *lay = &l->lay;
    oml_net_acts a;
    if (oml_net_acts_init(&a, lay, l->ref_n) != OML_OK)
        return OML_ENOMEM;
    oml_net_forward(lay, l->params, l->ref_x, l->ref_n, &a);
    size_t per = (size_t)l->ref_n * (size_t)lay->emb;
    for (int k = 0; k <= lay->layers; k++)
        memcpy(l->ref_emb + (size_t)k * per, a.f[k], per * sizeof(float));
    oml_net_acts_free(&a);
    l->ref_at = l->stats.updates;
    return OML_OK;
}

/* Marks in `in` (n) the REF_K rows of E (n, emb) nearest to the unit q:
 * the first REF_K by (dot descending, row ascending), kept in one pass as a
 * sorted list that most rows leave after a single comparison. */
static void ref_topk(const float *E, int32_t n, int32_t e, const float *q, unsigned char *in,
                     float *dots)
{
    cblas_sgemv(CblasRowMajor, CblasNoTrans, n, e, 1.0f, E, e, q, 1, 0.0f, dots, 1);
    int32_t top[REF_K], k = 0;
    for (int32_t i = 0; i < n; i++) {
        if (k == REF_K && !(dots[i] > dots[top[k - 1]]))
            continue; /* a later row wins only by a strictly larger dot */
        int32_t j = k < REF_K ? k++ : k - 1;
        while (j > 0 && dots[i] > dots[top[j - 1]]) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = i;
    }
    for (int32_t i = 0; i < n; i++)
        in[i] = 0;
    for (int32_t t = 0; t < k; t++)
        in[top[t]] = 1;
}

/* OML_HEDGE_LOCAL, the hedge signal aligned with kNN: per head, 1 minus the
 * share of the anchor's REF_K nearest reference items at the start (the PCA
 * projection, where neighbours are mostly of one class) that are still among
 * its REF_K nearest in the head now. A head that learns the triplets while
 * keeping local neighbourhoods scores near 0; one that collapses them (the
 * deep heads, measured: README) near 1. Stored features only, no labels. */
static void local_signal(oml_learner *l, const oml_net_acts *acts, int32_t row, const float *xa,
                         float *signal)
{
    const oml_net_layout *lay = &l->lay;
    int32_t d = lay->dim, e = lay->emb, n = l->ref_n;
    float *xc = l->_ref_scratch, *q = xc + d, *dots = q + e;
    unsigned char in0[REF_ITEMS], in[REF_ITEMS];
    oml__learner_input_row(l, xa, xc);
    if (l->bias0_start)
        memcpy(q, l->bias0_start, (size_t)e * sizeof(float));
    cblas_sgemv(CblasRowMajor, CblasNoTrans, e, d, 1.0f, l->theta0_start, d, xc, 1,
                l->bias0_start ? 1.0f : 0.0f, q, 1);
    float nrm = cblas_snrm2(e, q, 1);
    if (nrm > 0)
        cblas_sscal(e, 1.0f / nrm, q, 1);
    ref_topk(l->ref_start, n, e, q, in0, dots);
    for (int k = 0; k <= lay->layers; k++) {
        ref_topk(l->ref_emb + (size_t)k * (size_t)n * (size_t)e, n, e,
                 acts->f[k] + (size_t)row * e, in, dots);
        int keep = 0;
        for (int32_t i = 0; i < n; i++)
            keep += in0[i] && in[i];
        signal[k] = 1.0f - (float)keep / (float)(REF_K < n ? REF_K : n);
    }
}

/* Floats a model file holds for a reference of ref_n items: ref_x,
 * ref_start, ref_emb and theta0_start (none for ref_n = 0). */
size_t oml__learner_ref_file_floats(const oml_net_layout *lay, int32_t ref_n)
{
    if (ref_n <= 0)
        return 0;
    size_t m = (size_t)ref_n, d = (size_t)lay->dim, e = (size_t)lay->emb;
    return m * d + m * e + (size_t)(lay->layers + 1) * m * e + e * d + (lay->has_bias ? e : 0);
}

/* ... plus the scratch of local_signal: dim + emb + ref_n floats. */
static size_t ref_floats(const oml_net_layout *lay, int32_t ref_n)
{
    return oml__learner_ref_file_floats(lay, ref_n) + (size_t)lay->dim + (size_t)lay->emb +
           (size_t)ref_n;
}

int oml__learner_ref_alloc(oml_learner *l, int32_t ref_n)
{
    const oml_net_layout *lay = &l->lay;
    float *p = malloc(ref_floats(lay, ref_n) * sizeof(float));
    if (p == NULL)
        return OML_ENOMEM;
    free(l->_ref_block);
    size_t m = (size_t)ref_n, d = (size_t)lay->dim, e = (size_t)lay->emb;
    l->_ref_block = p;
    l->ref_n = ref_n;
    l->ref_x = p;
    p += m * d;
    l->ref_start = p;
    p += m * e;
    l->ref_emb = p;
    p += (size_t)(lay->layers + 1) * m * e;
    l->theta0_start = p;
    p += e * d;
    l->bias0_start = lay->has_bias ? p : NULL;
    p += lay->has_bias ? e : 0;
    l->_ref_scratch = p;
    return OML_OK;
}


/* Samples the reference from the stored items (rows at[0 .. n) of X, or
 * its rows 0 .. n - 1 with at NULL) and records where it sits at the
 * start. */
int oml__learner_ref_prepare(oml_learner *l, const float *X, const int32_t *at, int32_t n)
{
    const oml_net_layout *lay = &l->lay;
    int32_t d = lay->dim, e = lay->emb, m = n < REF_ITEMS ? n : REF_ITEMS;
    if (oml__learner_ref_alloc(l, m) != OML_OK)
        return OML_ENOMEM;
    for (int32_t i = 0; i < m; i++) {
        uint64_t r = oml_rng_below(&l->rng, (uint64_t)n);
        memcpy(l->ref_x + (size_t)i * d, X + (size_t)(at ? (uint64_t)at[r] : r) * d,
               (size_t)d * sizeof(float));
    }
    memcpy(l->theta0_start, l->params + lay->theta[0], (size_t)e * d * sizeof(float));
    if (lay->has_bias)
        memcpy(l->bias0_start, l->params + lay->bias[0], (size_t)e * sizeof(float));
    int rc = ref_refresh(l);
    if (rc == OML_OK)
        memcpy(l->ref_start, l->ref_emb, (size_t)m * e * sizeof(float));
    return rc;
}


static float distance(const float *a, const float *b, int32_t n)
{
    float s = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        float t = a[i] - b[i];
        s += t * t;
    }
    return sqrtf(s);
}

/* The [0, 1] signal the hedge sees for one head. OML_HEDGE_ABTL is the paper's
 * local loss; OML_HEDGE_MARGIN is a ranking loss that is 0.5 when the
 * positive and the negative are equally far and reaches 0 only when the
 * triplet is satisfied by the full margin; OML_HEDGE_HARD and
 * OML_HEDGE_VIOLATION are the head's 0/1 violation. */
static float hedge_signal(const oml_learner *l, float abtl_loss, float dp, float dn)
{
    if (l->cfg.hedge_signal == OML_HEDGE_HARD || l->cfg.hedge_signal == OML_HEDGE_VIOLATION)
        return dp >= dn ? 1.0f : 0.0f;
    if (l->cfg.hedge_signal == OML_HEDGE_MARGIN) {
        float m = 0.5f + 0.25f * (dp - dn);
        return m < 0.0f ? 0.0f : (m > 1.0f ? 1.0f : m);
    }
    return abtl_loss;
}

/* Proximal pull toward the start weights, W <- W - eta*prox*(W - W0), applied
 * every PROX_EVERY steps as the compounded factor 1 - (1 - eta*prox)^k so the
 * cost per step is one pass over the block every few steps. mu is untouched. */
static void proximal_pull(oml_learner *l, float eta, int steps)
{
    float keep = powf(1.0f - eta * l->cfg.prox, (float)steps);
    float pull = 1.0f - keep;
    const oml_net_layout *lay = &l->lay;
    size_t from = lay->trained;
    float *p = l->params + from;
    const float *s = l->start + from;
    size_t n = lay->count - from;
    for (size_t i = 0; i < n; i++)
        p[i] -= pull * (p[i] - s[i]);
}

static void judge(const oml_learner *l, const oml_net_acts *acts, int32_t row, judged *j)
{
    int32_t e = l->lay.emb;
    int heads = l->lay.layers + 1;
    j->overall = j->ens_pos = j->ens_neg = 0.0f;
    j->finite = 1;
    for (int k = 0; k < heads; k++) {
        const float *fa = acts->f[k] + (size_t)row * e, *fp = fa + e, *fn = fa + 2 * e;
        float dp = distance(fa, fp, e), dn = distance(fa, fn, e);
        /* Lines 5-6: ABTL with thresholds from these pre-update distances. */
        oml_abtl ab;
        oml_abtl_eval(l->cfg.tau, dp, dn, &ab);
        if (l->cfg.loss == OML_LOSS_MARGIN) {
            float h = dp - dn + l->cfg.margin;
            j->loss[k] = h > 0.0f ? h : 0.0f;
            j->g_pos[k] = h > 0.0f ? 1.0f : 0.0f;
            j->g_neg[k] = h > 0.0f ? -1.0f : 0.0f;
        } else {
            j->loss[k] = ab.loss;
            j->g_pos[k] = ab.g_pos;
            j->g_neg[k] = ab.g_neg;
        }
        j->dp[k] = dp;
        j->dn[k] = dn;
        j->signal[k] = hedge_signal(l, ab.loss, dp, dn);
        j->overall += l->alpha[k] * j->loss[k];
        j->ens_pos += l->alpha[k] * dp;
        j->ens_neg += l->alpha[k] * dn;
        for (int r = 0; r < 3; r++)
            j->finite &= isfinite(acts->znorm[k][row + r]) != 0;
    }
    j->finite &= isfinite(j->overall) && isfinite(j->ens_pos) && isfinite(j->ens_neg);
}

/* dLoss/dz of one triplet's three rows in head k, scaled by w: w * dL/dD *
 * dD/df, then through the L2 normalisation (OAHU Eq. 3) row by row (in
 * place is safe: the helper reads gf fully into a dot product first). */
static void head_grad(const oml_net_acts *acts, int k, int32_t row, int32_t e, float w,
                      float g_pos, float g_neg, float dp, float dn, float *gz)
{
    const float *fa = acts->f[k] + (size_t)row * e, *fp = fa + e, *fn = fa + 2 * e;
    float gp = dp > 1e-12f ? w * g_pos / dp : 0.0f;
    float gn = dn > 1e-12f ? w * g_neg / dn : 0.0f;
    for (int32_t j = 0; j < e; j++) {
        float up = fa[j] - fp[j], un = fa[j] - fn[j];
        gz[j] = gp * up + gn * un; /* anchor */
        gz[e + j] = -gp * up;      /* positive */
        gz[2 * e + j] = -gn * un;  /* negative */
    }
    for (int r = 0; r < 3; r++)
        oml_net_normalize_backward(fa + (size_t)r * e, acts->znorm[k][row + r],
                                   gz + (size_t)r * e, gz + (size_t)r * e, e);
}

/* Test-then-train bookkeeping of one new triplet: counters, the recent
 * window, the loss averages. */
static void note_new(oml_learner *l, const judged *j)
{
    int heads = l->lay.layers + 1;
    int satisfied = j->ens_pos < j->ens_neg;
    oml_learner_stats *st = &l->stats;
    uint32_t bit = (uint32_t)(st->updates % OML_RECENT_WINDOW);
    uint8_t mask = (uint8_t)(1u << (bit % 8));
    if (st->recent_n == OML_RECENT_WINDOW)
        st->recent_hits -= (st->recent[bit / 8] & mask) != 0;
    else
        st->recent_n++;
    st->recent[bit / 8] = (uint8_t)(satisfied ? st->recent[bit / 8] | mask
                                              : st->recent[bit / 8] & ~mask);
    st->recent_hits += (uint32_t)satisfied;
    st->updates++;
    st->satisfied += (uint64_t)satisfied;
    st->utilised += (uint64_t)(j->overall > 0.0f);
    for (int k = 0; k < heads; k++)
        st->loss_ema[k] = st->updates == 1 ? j->loss[k]
                                           : LOSS_EMA * st->loss_ema[k] + (1 - LOSS_EMA) * j->loss[k];
}

double oml_learner_recent_accuracy(const oml_learner *l)
{
    return l->stats.recent_n ? (double)l->stats.recent_hits / l->stats.recent_n : NAN;
}

/* Lines 9-11 for one new triplet: hedge, floor, normalise. With the `hard`
 * signal only the triplets the ensemble got wrong move the weights. */
static void hedge_step(oml_learner *l, const oml_net_acts *acts, int32_t row, const float *xa,
                       judged *j)
{
    int heads = l->lay.layers + 1;
    if (l->cfg.hedge_signal == OML_HEDGE_EQUAL)
        return;
    if (l->cfg.hedge_signal == OML_HEDGE_LOCAL) {
        /* A failed re-embedding (out of memory) keeps the previous one. */
        if (l->ref_n > 0 && l->stats.updates % REF_EVERY == 0) {
            if (l->stats.updates - l->ref_at >= REF_REFRESH)
                ref_refresh(l);
            local_signal(l, acts, row, xa, j->signal);
            oml_hedge_update(l->alpha, j->signal, heads, l->cfg.beta, l->cfg.s);
        }
    } else if (l->cfg.hedge_signal != OML_HEDGE_HARD || !(j->ens_pos < j->ens_neg)) {
        oml_hedge_update(l->alpha, j->signal, heads, l->cfg.beta, l->cfg.s);
    }
}

static void fill_report(const oml_learner *l, const judged *j, oml_step_report *report)
{
    size_t heads = (size_t)l->lay.layers + 1;
    memcpy(report->loss, j->loss, sizeof(float) * heads);
    memcpy(report->d_pos, j->dp, sizeof(float) * heads);
    memcpy(report->d_neg, j->dn, sizeof(float) * heads);
    report->overall = j->overall;
    report->satisfied = j->ens_pos < j->ens_neg;
    report->utilised = j->overall > 0.0f;
}

void oml_learner_step(oml_learner *l, const float *xa, const float *xp, const float *xn,
                      oml_step_report *report)
{
    oml_learner_step_weighted(l, xa, xp, xn, 1.0f, report);
}

void oml_learner_step_weighted(oml_learner *l, const float *xa, const float *xp, const float *xn,
                               float weight, oml_step_report *report)
{
    const oml_net_layout *lay = &l->lay;
    int32_t e = lay->emb;
    int heads = lay->layers + 1;
    if (l->_bwork) { /* a mini-batch configuration: a batch of one */
        const float *rows[3] = {xa, xp, xn};
        oml_learner_train_weighted(l, rows, &weight, 1, 1, report);
        return;
    }

    /* Alg. 1 line 4: the three members go through the network together. */
    const float *rows[3] = {xa, xp, xn};
    oml_net_forward_rows(lay, l->params, rows, 3, &l->_acts);
    judged j;
    judge(l, &l->_acts, 0, &j);
    if (!j.finite) { /* an activation overflowed: learning it would poison every weight */
        l->stats.skipped++;
        if (report)
            memset(report, 0, sizeof *report);
        return;
    }
    for (int k = 0; k < heads; k++)
        head_grad(&l->_acts, k, 0, e, l->alpha[k] * weight, j.g_pos[k], j.g_neg[k], j.dp[k],
                  j.dn[k], l->_gz[k]);

    float eta = l->cfg.eta / (1.0f + l->cfg.eta_decay * (float)l->stats.updates);
    /* Lines 7-8: Eq. 21 and Eq. 22 in one backward pass. */
    oml_net_backward_sgd(lay, l->params, &l->_acts, 3, l->_gz, eta, l->_scratch);
    if (l->start && (l->stats.updates + 1) % PROX_EVERY == 0)
        proximal_pull(l, eta, PROX_EVERY);
    l->stats.steps++;
    hedge_step(l, &l->_acts, 0, xa, &j);
    note_new(l, &j);
    if (report)
        fill_report(l, &j, report);
}

/* Adam (Kingma & Ba 2015, Alg. 1) over the whole block but mu, with the
 * decoupled pull toward the start weights (`prox`) as its weight decay. */
#define ADAM_B1 0.9f
#define ADAM_B2 0.999f
#define ADAM_EPS 1e-8f
static void adam_step(oml_learner *l, const float *restrict g, float lr)
{
    const oml_net_layout *lay = &l->lay;
    l->adam_t++;
    float c1 = 1.0f - powf(ADAM_B1, (float)l->adam_t);
    float c2 = 1.0f - powf(ADAM_B2, (float)l->adam_t);
    float step = lr * sqrtf(c2) / c1, decay = l->start ? lr * l->cfg.prox : 0.0f;
    size_t from = lay->trained, n = lay->count - from;
    /* restrict and no branch inside: the loops vectorise (sqrt too, with
     * -fno-math-errno); each element sees the same operations in the same
     * order as one fused loop, so the weights are bit for bit the same. */
    float *restrict p = l->params + from, *restrict m = l->adam_m + from,
                    *restrict v = l->adam_v + from;
    g += from;
    for (size_t i = 0; i < n; i++) {
        m[i] = ADAM_B1 * m[i] + (1.0f - ADAM_B1) * g[i];
        v[i] = ADAM_B2 * v[i] + (1.0f - ADAM_B2) * g[i] * g[i];
        p[i] -= step * m[i] / (sqrtf(v[i]) + ADAM_EPS);
    }
    if (decay > 0.0f) {
        const float *restrict s = l->start + from;
        for (size_t i = 0; i < n; i++)
            p[i] -= decay * (p[i] - s[i]);
    }
}

/* Whether x holds no NaN or infinity: x * 0 is 0 for every finite x and
 * NaN otherwise. Eight partial sums, so the loop vectorises (their order
 * cannot change whether the total is 0). */
static int all_finite(const float *restrict x, size_t n)
{
    float acc[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            acc[k] += x[i + k] * 0.0f;
    for (; i < n; i++)
        acc[0] += x[i] * 0.0f;
    float sum = 0.0f;
    for (int k = 0; k < 8; k++)
        sum += acc[k];
    return sum == 0.0f;
}

int oml_learner_train(oml_learner *l, const float *const *rows, int32_t n, int32_t n_new,
                      oml_step_report *report)
{
    return oml_learner_train_weighted(l, rows, NULL, n, n_new, report);
}

int oml_learner_train_weighted(oml_learner *l, const float *const *rows, const float *weights,
                               int32_t n, int32_t n_new, oml_step_report *report)
{
    const oml_net_layout *lay = &l->lay;
    int32_t e = lay->emb;
    int heads = lay->layers + 1;
    if (n < 1 || n > l->cfg.batch || n_new < 0 || n_new > n || l->_bwork == NULL)
        return 1;
    oml_net_acts *acts = &l->_bacts;
    oml_net_forward_rows(lay, l->params, rows, 3 * n, acts);

    /* Judge every triplet at the pre-step weights and alpha; the new ones,
     * first, are kept for the hedge and the counters after the step. */
    judged *jt = l->_bjudged;
    float inv = 1.0f / (float)n;
    int ok = 1;
    for (int32_t t = 0; t < n && ok; t++) {
        judged *j = &jt[t];
        judge(l, acts, 3 * t, j);
        ok = j->finite;
        float tw = weights ? weights[t] * inv : inv;
        for (int k = 0; k < heads && ok; k++) {
            float w = (l->cfg.equal_heads ? 1.0f / (float)heads : l->alpha[k]) * tw;
            head_grad(acts, k, 3 * t, e, w, j->g_pos[k], j->g_neg[k], j->dp[k], j->dn[k],
                      l->_bgz[k] + (size_t)3 * t * e);
        }
    }
    if (ok) {
        oml_net_backward(lay, l->params, acts, 3 * n, l->_bgz, l->_bgrad, l->_bscratch);
        ok = all_finite(l->_bgrad, lay->count);
    }
    if (!ok) {
        l->stats.skipped++;
        if (report)
            memset(report, 0, sizeof *report);
        return 1;
    }
    float eta = l->cfg.eta / (1.0f + l->cfg.eta_decay * (float)l->stats.updates);
    float lr = eta * (float)n / (float)l->cfg.batch;
    if (l->cfg.optim == OML_OPTIM_ADAM) {
        adam_step(l, l->_bgrad, lr);
    } else {
        cblas_saxpy((int)lay->count, -lr * (float)l->cfg.batch, l->_bgrad, 1, l->params, 1);
        if (l->start && (l->stats.steps + 1) % PROX_EVERY == 0)
            proximal_pull(l, eta, PROX_EVERY);
    }
    l->stats.steps++;
    l->stats.rehearsed += (uint64_t)(n - n_new);
    for (int32_t t = 0; t < n_new; t++) {
        hedge_step(l, acts, 3 * t, rows[3 * t], &jt[t]);
        note_new(l, &jt[t]);
        if (report && t == n_new - 1)
            fill_report(l, &jt[t], report);
    }
    return 0;
}

oml_snapshot *oml_learner_snapshot(const oml_learner *l, uint64_t version)
{
    return oml_snapshot_create(&l->cfg, l->params, l->alpha, version, l->stats.updates);
}

/* ---- for promote.c: new weights from outside the learner ---- */

int oml_learner_refresh_reference(oml_learner *l)
{
    return l->ref_n > 0 ? ref_refresh(l) : OML_OK;
}
