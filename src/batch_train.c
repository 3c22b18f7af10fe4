/* batch_train.c - the batch training loop: validation split, samplers,
 * SGD with momentum / Adam, epochs, early stopping, cancel, progress.
 *
 * DESIGN: oml_batch_train runs start to end on the calling thread (the
 * daemon's trainer thread). It owns every buffer it allocates and frees
 * them on every path; the only shared state it reads is the caller's
 * atomic cancel flag, polled before every step. The model it returns is the
 * one with the best validation Recall@1 (the last one without validation). */
#include "batch.h"
#include "batch_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "anml.h"
#include "pca.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void oml_batch_spec_default(oml_batch_spec *s, int32_t method)
{
    memset(s, 0, sizeof *s);
    s->method = method;
    s->depth = 1;
    s->hidden = 128; /* the live default's S_hidden (config.c) */
    s->emb = 64;     /* ... and S_emb */
    s->normalize = 1;
    s->center = 1;
    s->optim = OML_BATCH_ADAM;
    s->lr = 1e-3f;
    s->momentum = 0.9f;
    s->beta1 = 0.9f;
    s->beta2 = 0.999f;
    s->epochs = 40; /* a cap: early stopping (patience 3) ends most runs at 10-30 */
    s->patience = 3;
    /* Issue 4: the PCA pass-through start (our stand-in for the papers'
     * pretrained network), where the network fits it (hidden >= 2 emb). */
    s->init_pca = OML_BATCH_PCA_AUTO;
    s->sampler = OML_BATCH_SAMPLE_MK;
    s->m = 8;
    s->k = 16;
    s->batch = 128;
    s->val_frac = 0.1f;
    s->val_max = 5000;
    s->seed = 1;
    if (method == OML_BATCH_LANML) {
        /* Eq. 19 learns a Mahalanobis M = L^T L: a linear, unnormalised,
         * full-rank map starting from M = I (Euclidean), as LMNN does. */
        s->depth = 0;
        s->normalize = 0;
        s->emb = 0;
        s->init_identity = 1;
        s->init_pca = OML_BATCH_PCA_OFF;
        s->lr = 1e-5f; /* small steps around M = I (tuned on the class-disjoint split) */
    }
}

/* ---- classes and sampling ---- */

int oml_batch_classes_init(oml_batch_classes *c, const int32_t *labels, const int32_t *items,
                           int32_t n)
{
    memset(c, 0, sizeof *c);
    int32_t *rows = malloc((size_t)(n > 0 ? n : 1) * sizeof *rows);
    if (rows == NULL)
        return OML_ENOMEM;
    for (int32_t i = 0; i < n; i++)
        rows[i] = items ? items[i] : i;
    /* Stable sort of rows by label (insertion into label buckets via qsort
     * on (label, row) would also do; counting by distinct label is simpler). */
    int32_t *lab = malloc((size_t)(n > 0 ? n : 1) * sizeof *lab);
    if (lab == NULL) {
        free(rows);
        return OML_ENOMEM;
    }
    int32_t nc = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t v = labels[rows[i]], found = 0;
        for (int32_t k = 0; k < nc && !found; k++)
            found = lab[k] == v;
        if (!found)
            lab[nc++] = v;
        if (nc > 4096 && !found) {
            /* Many classes: linear search would be quadratic; fall through
             * with the list so far is still correct, only slower. */
        }
    }
    c->n_classes = nc;
    c->start = calloc((size_t)nc + 1, sizeof *c->start);
    c->idx = malloc((size_t)(n > 0 ? n : 1) * sizeof *c->idx);
    c->label = malloc((size_t)(nc > 0 ? nc : 1) * sizeof *c->label);
    c->_order = malloc((size_t)(nc > 0 ? nc : 1) * sizeof *c->_order);
    int32_t *fill = calloc((size_t)nc + 1, sizeof *fill);
    if (!c->start || !c->idx || !c->label || !c->_order || !fill) {
        free(rows);
        free(lab);
        free(fill);
        oml_batch_classes_free(c);
        return OML_ENOMEM;
    }
    memcpy(c->label, lab, (size_t)nc * sizeof *lab);
    int32_t *cls = rows; /* reuse: class number of item i, computed in place below */
    for (int32_t i = 0; i < n; i++) {
        int32_t v = labels[items ? items[i] : i], k = 0;
        while (lab[k] != v)
            k++;
        c->start[k + 1]++;
        cls[i] = k;
    }
    for (int32_t k = 0; k < nc; k++)
        c->start[k + 1] += c->start[k];
    for (int32_t i = 0; i < n; i++) {
        int32_t k = cls[i];
        c->idx[c->start[k] + fill[k]++] = items ? items[i] : i;
    }
    free(rows);
    free(lab);
    free(fill);
    return OML_OK;
}

void oml_batch_classes_free(oml_batch_classes *c)
{
    free(c->start);
    free(c->idx);
    free(c->label);
    free(c->_order);
    memset(c, 0, sizeof *c);
}

int32_t oml_batch_sample_mk(oml_batch_classes *c, int32_t m, int32_t k, oml_rng *rng,
                            int32_t *out)
{
    int32_t ne = 0;
    for (int32_t q = 0; q < c->n_classes; q++)
        if (c->start[q + 1] - c->start[q] >= 2)
            c->_order[ne++] = q;
    if (ne < 2)
        return 0;
    int32_t mm = m < ne ? m : ne, w = 0;
    for (int32_t t = 0; t < mm; t++) {
        /* Partial Fisher-Yates over the eligible classes: m distinct ones. */
        int32_t r = t + (int32_t)oml_rng_below(rng, (uint64_t)(ne - t));
        int32_t q = c->_order[r];
        c->_order[r] = c->_order[t];
        c->_order[t] = q;
        const int32_t *items = c->idx + c->start[q];
        int32_t size = c->start[q + 1] - c->start[q];
        int32_t *dst = out + w;
        if (size >= k) {
            /* Floyd's algorithm: k distinct positions out of size. */
            int32_t got = 0;
            for (int32_t j = size - k; j < size; j++) {
                int32_t pos = (int32_t)oml_rng_below(rng, (uint64_t)j + 1), dup = 0;
                for (int32_t u = 0; u < got && !dup; u++)
                    dup = dst[u] == items[pos];
                dst[got++] = items[dup ? j : pos];
            }
        } else {
            /* A small class: all of it, then draws with replacement. */
            for (int32_t j = 0; j < k; j++)
                dst[j] = j < size ? items[j] : items[oml_rng_below(rng, (uint64_t)size)];
        }
        w += k;
    }
    return w;
}

/* ---- optimiser ---- */

typedef struct optim_state {
    float *v, *s; /* momentum / Adam first moment; Adam second moment */
    int64_t t;
} optim_state;

static void optim_step(const oml_batch_spec *sp, optim_state *o, float *p, const float *g,
                       size_t from, size_t to)
{
    o->t++;
    if (sp->optim == OML_BATCH_ADAM) {
        double bc1 = 1.0 - pow(sp->beta1, (double)o->t), bc2 = 1.0 - pow(sp->beta2, (double)o->t);
        float a = (float)(sp->lr * sqrt(bc2) / bc1);
        for (size_t i = from; i < to; i++) {
            float gi = g[i] + sp->weight_decay * p[i];
            o->v[i] = sp->beta1 * o->v[i] + (1.0f - sp->beta1) * gi;
            o->s[i] = sp->beta2 * o->s[i] + (1.0f - sp->beta2) * gi * gi;
            p[i] -= a * o->v[i] / (sqrtf(o->s[i]) + 1e-8f);
        }
    } else {
        for (size_t i = from; i < to; i++) {
            float gi = g[i] + sp->weight_decay * p[i];
            o->v[i] = sp->momentum * o->v[i] + gi;
            p[i] -= sp->lr * o->v[i];
        }
    }
}

/* ---- the loop ---- */

static int check_spec(const oml_batch_spec *s, oml_diag *d)
{
    if (s->method < OML_BATCH_TRIPLET || s->method > OML_BATCH_DANML)
        if (s->loss == NULL && s->step == NULL)
            return oml_diag_set(d, OML_EINVAL, "method", "unknown method %d", s->method);
    if (s->epochs < 1)
        return oml_diag_set(d, OML_EINVAL, "epochs", "epochs must be >= 1");
    if (!(s->lr > 0) || !isfinite(s->lr))
        return oml_diag_set(d, OML_EINVAL, "lr", "learning rate must be > 0");
    if (s->optim != OML_BATCH_SGD && s->optim != OML_BATCH_ADAM)
        return oml_diag_set(d, OML_EINVAL, "optim", "unknown optimiser %d", s->optim);
    if (s->sampler == OML_BATCH_SAMPLE_MK && (s->m < 2 || s->k < 2 || s->m * s->k > 65536))
        return oml_diag_set(d, OML_EINVAL, "m", "m x k batches need m >= 2, k >= 2, m*k <= 65536");
    if (s->sampler == OML_BATCH_SAMPLE_RANDOM && (s->batch < 2 || s->batch > 65536))
        return oml_diag_set(d, OML_EINVAL, "batch", "batch size must be in [2, 65536]");
    if (s->sampler != OML_BATCH_SAMPLE_MK && s->sampler != OML_BATCH_SAMPLE_RANDOM)
        return oml_diag_set(d, OML_EINVAL, "sampler", "unknown sampler %d", s->sampler);
    if (!(s->val_frac >= 0 && s->val_frac <= 0.5f))
        return oml_diag_set(d, OML_EINVAL, "val_frac", "validation fraction must be in [0, 0.5]");
    if (s->sample != NULL && (s->batch_cap < 0 || s->batch_cap > 65536))
        return oml_diag_set(d, OML_EINVAL, "batch_cap", "batch_cap must be in [0, 65536]");
    return OML_OK;
}

static void shuffle(int32_t *a, int32_t n, oml_rng *rng)
{
    for (int32_t i = n - 1; i > 0; i--) {
        int32_t j = (int32_t)oml_rng_below(rng, (uint64_t)i + 1), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* Stratified held-out split by item: per class round(frac * n_c) items,
 * never leaving a class fewer than two training items. */
static int split_items(const oml_batch_spec *sp, const int32_t *labels, int32_t n, oml_rng *rng,
                       int32_t *train, int32_t *n_train, int32_t *val, int32_t *n_val)
{
    oml_batch_classes all;
    int rc = oml_batch_classes_init(&all, labels, NULL, n);
    if (rc != OML_OK)
        return rc;
    double frac = sp->val_frac;
    if (sp->val_max > 0 && frac * n > sp->val_max)
        frac = (double)sp->val_max / n;
    int32_t nt = 0, nv = 0;
    for (int32_t q = 0; q < all.n_classes; q++) {
        int32_t *it = all.idx + all.start[q], size = all.start[q + 1] - all.start[q];
        shuffle(it, size, rng);
        int32_t v = (int32_t)floor(frac * size + 0.5);
        if (size - v < 2)
            v = size > 2 ? size - 2 : 0;
        for (int32_t j = 0; j < size; j++) {
            if (j < v)
                val[nv++] = it[j];
            else
                train[nt++] = it[j];
        }
    }
    oml_batch_classes_free(&all);
    *n_train = nt;
    *n_val = nv;
    return OML_OK;
}

/* One run: what it reads (borrowed), the choices made at its start, and
 * every buffer it owns, so that each step of the run is a function of it. */
typedef struct train_ctx {
    const oml_batch_spec *sp;
    const float *X;        /* (n, dim) borrowed */
    const int32_t *labels; /* (n) borrowed */
    int32_t dim;
    oml_diag *diag;
    oml_batch_layout lay;
    int use_pca;
    oml_batch_loss_fn loss; /* the spec's loss, or the method's ... */
    const void *hp;         /* ... with its hyperparameters, maybe thp/lhp/dhp below */
    oml_triplet_hp thp;
    oml_lanml_hp lhp;
    oml_danml_hp dhp;
    int32_t bsz, cap; /* batch size (sets the epoch length); rows one batch may hold */
    oml_rng rng;
    oml_batch_model *model;
    int32_t n_train, n_val;
    int32_t pos, bad; /* random sampler position; epochs without a better Recall@1 */
    oml_batch_progress pr;
    double t0;
    oml_batch_classes cls;
    oml__batch_ws ws;
    optim_state opt;
    int32_t *train, *val, *batch_idx, *yb, *vy;
    float *Xb, *grad, *best, *Xv, *Ev;
} train_ctx;

static void ctx_free(train_ctx *c)
{
    oml_batch_classes_free(&c->cls);
    oml__batch_ws_free(&c->ws);
    free(c->opt.v);
    free(c->opt.s);
    free(c->train);
    free(c->val);
    free(c->batch_idx);
    free(c->yb);
    free(c->vy);
    free(c->Xb);
    free(c->grad);
    free(c->best);
    free(c->Xv);
    free(c->Ev);
}

/* Refuses a spec that cannot run on n items, lays out the network and
 * decides on the PCA start. Allocates nothing. */
static int check_run(train_ctx *c, int32_t n)
{
    const oml_batch_spec *sp = c->sp;
    oml_diag *diag = c->diag;
    int rc = check_spec(sp, diag);
    if (rc != OML_OK)
        return rc;
    if (n < OML_BATCH_MIN_ITEMS)
        return oml_diag_set(diag, OML_EEMPTY, "items",
                            "too few items to train: %d, need at least %d", n, OML_BATCH_MIN_ITEMS);
    int32_t emb = sp->emb > 0 ? sp->emb : c->dim;
    if (sp->init_identity && sp->depth != 0)
        return oml_diag_set(diag, OML_EINVAL, "init_identity", "identity start needs depth 0");
    if ((rc = oml_batch_layout_init(&c->lay, c->dim, sp->depth, sp->hidden, emb, sp->normalize,
                                    diag)) != OML_OK)
        return rc;
    if (sp->init == NULL && sp->init_pca != OML_BATCH_PCA_OFF) {
        if (sp->init_pca != OML_BATCH_PCA_ON && sp->init_pca != OML_BATCH_PCA_AUTO)
            return oml_diag_set(diag, OML_EINVAL, "init_pca", "unknown init_pca %d", sp->init_pca);
        if (sp->init_identity)
            return oml_diag_set(diag, OML_EINVAL, "init_pca",
                                "init_pca and init_identity are two different starts");
        c->use_pca = oml_pca_passthrough_fits(c->lay.dim, c->lay.depth, c->lay.hidden, c->lay.emb);
        if (!c->use_pca && sp->init_pca == OML_BATCH_PCA_ON)
            return oml_batch_pca_check(&c->lay, diag); /* says which condition fails */
    }
    return OML_OK;
}

/* The loss of a step: the spec's, else the method's, with the method's
 * default hyperparameters (kept in c) unless the spec gives its own. */
static void choose_loss(train_ctx *c)
{
    const oml_batch_spec *sp = c->sp;
    c->loss = sp->loss;
    c->hp = sp->loss_hp;
    c->thp = (oml_triplet_hp){0.2f, 0};
    oml_lanml_hp_default(&c->lhp);
    oml_danml_hp_default(&c->dhp);
    if (c->loss == NULL) {
        c->loss = sp->method == OML_BATCH_TRIPLET ? oml_triplet_loss
                  : sp->method == OML_BATCH_LANML ? oml_lanml_loss
                                                  : oml_danml_loss;
        if (c->hp == NULL)
            c->hp = sp->method == OML_BATCH_TRIPLET ? (const void *)&c->thp
                    : sp->method == OML_BATCH_LANML ? (const void *)&c->lhp
                                                    : (const void *)&c->dhp;
    }
}

/* Sizes a batch and allocates the buffers every run needs (the item split,
 * one batch, the gradient and the optimiser's moments). */
static int alloc_buffers(train_ctx *c, int32_t n)
{
    const oml_batch_spec *sp = c->sp;
    c->bsz = sp->sampler == OML_BATCH_SAMPLE_MK ? sp->m * sp->k : sp->batch;
    /* Rows of one batch: the sampler hook may compose more than bsz (the
     * epoch length stays n_train / bsz steps). */
    c->cap = sp->sample != NULL && sp->batch_cap > 0 ? sp->batch_cap : c->bsz;
    size_t count = c->lay.count;
    c->train = malloc((size_t)n * sizeof *c->train);
    c->val = malloc((size_t)n * sizeof *c->val);
    c->batch_idx = malloc((size_t)c->cap * sizeof *c->batch_idx);
    c->yb = malloc((size_t)c->cap * sizeof *c->yb);
    c->Xb = malloc((size_t)c->cap * (size_t)c->dim * sizeof *c->Xb);
    c->grad = malloc(count * sizeof *c->grad);
    c->opt.v = calloc(count, sizeof *c->opt.v);
    c->opt.s = calloc(count, sizeof *c->opt.s);
    if (!c->train || !c->val || !c->batch_idx || !c->yb || !c->Xb || !c->grad || !c->opt.v ||
        !c->opt.s)
        return OML_ENOMEM;
    return OML_OK;
}

/* Holds out the validation items (none if fewer than two) and groups the
 * training ones by class, refusing data the samplers cannot draw from. */
static int split_train_val(train_ctx *c, int32_t n)
{
    int rc = split_items(c->sp, c->labels, n, &c->rng, c->train, &c->n_train, c->val, &c->n_val);
    if (rc != OML_OK)
        return rc;
    if (c->n_val < 2)
        c->n_val = 0;
    if ((rc = oml_batch_classes_init(&c->cls, c->labels, c->train, c->n_train)) != OML_OK)
        return rc;
    int32_t usable = 0;
    for (int32_t q = 0; q < c->cls.n_classes; q++)
        usable += c->cls.start[q + 1] - c->cls.start[q] >= 2;
    if (usable < 2)
        return oml_diag_set(c->diag, OML_EEMPTY, "labels",
                            "training needs at least two classes with two items each; "
                            "the data has %d such class(es) among %d",
                            usable, c->cls.n_classes);
    return OML_OK;
}

/* Input centring: mu = mean of the training items (OAHU's centring). */
static int center_inputs(train_ctx *c)
{
    int32_t dim = c->dim;
    double *acc = calloc((size_t)dim, sizeof *acc);
    if (acc == NULL)
        return OML_ENOMEM;
    for (int32_t i = 0; i < c->n_train; i++) {
        const float *x = c->X + (size_t)c->train[i] * dim;
        for (int32_t j = 0; j < dim; j++)
            acc[j] += x[j];
    }
    for (int32_t j = 0; j < dim; j++)
        c->model->params[c->lay.mu + j] = (float)(acc[j] / c->n_train);
    free(acc);
    return OML_OK;
}

/* Creates the model at its start: the spec's initial model, the identity
 * (M = I), or the random init, then centred and PCA-started as asked. */
static int start_model(train_ctx *c)
{
    const oml_batch_spec *sp = c->sp;
    const oml_batch_layout *lay = &c->lay;
    int rc = oml_batch_model_create(&c->model, lay, sp->seed ^ 0x9e3779b97f4a7c15ull, c->diag);
    if (rc != OML_OK)
        return rc;
    c->model->method = sp->method;
    if (sp->init != NULL) {
        const oml_batch_layout *il = &sp->init->lay;
        if (il->dim != lay->dim || il->depth != lay->depth || il->hidden != lay->hidden
            || il->emb != lay->emb || il->normalize != lay->normalize)
            return oml_diag_set(c->diag, OML_EINVAL, "init",
                                "the initial model's network differs from the spec's");
        memcpy(c->model->params, sp->init->params, lay->count * sizeof *c->model->params);
    } else if (sp->init_identity) {
        float *T = c->model->params + lay->theta;
        memset(T, 0, (size_t)lay->emb * (size_t)c->dim * sizeof *T);
        for (int32_t r = 0; r < lay->emb && r < c->dim; r++)
            T[(size_t)r * c->dim + r] = 1.0f;
    }
    if (sp->center && sp->init == NULL && (rc = center_inputs(c)) != OML_OK)
        return rc;
    /* The PCA pass-through start, from the training items (never the
     * validation ones), centred at mu (the origin without centring). */
    if (c->use_pca &&
        (rc = oml_batch_model_init_pca(c->model, c->X, c->train, c->n_train, c->diag)) != OML_OK)
        return rc;
    return OML_OK;
}

/* Copies the validation items out once, with room for their embeddings
 * and for the best parameters seen. */
static int prepare_validation(train_ctx *c)
{
    if (c->n_val == 0)
        return OML_OK;
    int32_t n_val = c->n_val, dim = c->dim;
    c->best = malloc(c->lay.count * sizeof *c->best);
    c->vy = malloc((size_t)n_val * sizeof *c->vy);
    c->Xv = malloc((size_t)n_val * (size_t)dim * sizeof *c->Xv);
    c->Ev = malloc((size_t)n_val * (size_t)c->lay.emb * sizeof *c->Ev);
    if (!c->best || !c->vy || !c->Xv || !c->Ev)
        return OML_ENOMEM;
    for (int32_t i = 0; i < n_val; i++) {
        c->vy[i] = c->labels[c->val[i]];
        memcpy(c->Xv + (size_t)i * dim, c->X + (size_t)c->val[i] * dim,
               (size_t)dim * sizeof *c->X);
    }
    return OML_OK;
}

/* The rows of the next batch into batch_idx: the sampler hook's, an m x k
 * draw, or the next bsz of a pass over the training items (reshuffled at
 * its end). */
static int draw_batch(train_ctx *c, int32_t *rows)
{
    const oml_batch_spec *sp = c->sp;
    int32_t b;
    if (sp->sample != NULL) {
        b = sp->sample(sp->sample_ctx, &c->cls, sp->m, sp->k, &c->rng, c->batch_idx);
        if (b < 2 || b > c->cap)
            return oml_diag_set(c->diag, OML_EEMPTY, "labels",
                                "the batch sampler could not draw a batch (%d rows)", b);
    } else if (sp->sampler == OML_BATCH_SAMPLE_MK) {
        b = oml_batch_sample_mk(&c->cls, sp->m, sp->k, &c->rng, c->batch_idx);
    } else {
        if (c->pos + c->bsz > c->n_train) {
            shuffle(c->train, c->n_train, &c->rng);
            c->pos = 0;
        }
        b = c->n_train < c->bsz ? c->n_train : c->bsz;
        memcpy(c->batch_idx, c->train + c->pos, (size_t)b * sizeof *c->batch_idx);
        c->pos += b;
    }
    *rows = b;
    return OML_OK;
}

/* One step (st of epoch ep): draw and gather a batch, its loss and
 * gradient (the step hook's, or the loss's through the network), the
 * optimiser update, and the epoch's running mean loss. */
static int train_step(train_ctx *c, int32_t ep, int32_t st, double *sum)
{
    const oml_batch_spec *sp = c->sp;
    if (sp->cancel != NULL && atomic_load(sp->cancel))
        return OML_ECANCELED;
    int32_t b = 0, dim = c->dim;
    int rc = draw_batch(c, &b);
    if (rc != OML_OK)
        return rc;
    for (int32_t i = 0; i < b; i++) {
        c->yb[i] = c->labels[c->batch_idx[i]];
        memcpy(c->Xb + (size_t)i * dim, c->X + (size_t)c->batch_idx[i] * dim,
               (size_t)dim * sizeof *c->X);
    }
    float *params = c->model->params;
    double L = sp->step != NULL
                   ? sp->step(sp->step_ctx, &c->lay, params, c->Xb, c->yb, b, ep, c->pr.step,
                              &c->rng, c->grad)
                   : oml__batch_loss_grad_ws(&c->lay, params, c->loss, c->hp, c->Xb, c->yb, b,
                                             &c->rng, c->grad, &c->ws);
    if (!isfinite(L))
        return oml_diag_set(c->diag, OML_ENONFINITE, "loss",
                            "the loss diverged at epoch %d step %d: lower the learning rate", ep,
                            st);
    optim_step(sp, &c->opt, params, c->grad, (size_t)dim, c->lay.count);
    *sum += L;
    c->pr.step++;
    c->pr.loss = *sum / (st + 1);
    if (sp->progress && sp->progress_every > 0 && c->pr.step % sp->progress_every == 0) {
        c->pr.elapsed_s = now_s() - c->t0;
        sp->progress(sp->progress_ctx, &c->pr);
    }
    return OML_OK;
}

/* End of an epoch with validation: Recall@1 of the held-out items; keeps
 * the best parameters, and sets *stop after `patience` epochs without a
 * better one (early stopping). */
static int validate(train_ctx *c, int *stop)
{
    oml_batch_progress *pr = &c->pr;
    int rc = oml_batch_model_embed(c->model, c->Xv, c->n_val, c->Ev);
    if (rc != OML_OK)
        return rc;
    pr->val_r1 = oml_batch_recall1(c->Ev, c->vy, c->n_val, c->lay.emb);
    if (!(pr->val_r1 <= pr->best_val_r1)) { /* first, or better (NaN-safe) */
        pr->best_val_r1 = pr->val_r1;
        memcpy(c->best, c->model->params, c->lay.count * sizeof *c->best);
        c->bad = 0;
    } else if (++c->bad >= c->sp->patience && c->sp->patience > 0) {
        *stop = 1;
    }
    return OML_OK;
}

/* The epochs: n_train / bsz steps each, then validation and a progress
 * report, until the epoch cap or early stopping. */
static int run_epochs(train_ctx *c)
{
    const oml_batch_spec *sp = c->sp;
    int32_t steps_epoch = (c->n_train + c->bsz - 1) / c->bsz;
    c->pr.epochs = sp->epochs;
    c->pr.steps_total = (int64_t)steps_epoch * sp->epochs;
    c->pr.val_r1 = c->pr.best_val_r1 = NAN;
    c->t0 = now_s();
    c->bad = 0;
    c->pos = c->n_train; /* the random sampler shuffles before its first batch */
    for (int32_t ep = 1; ep <= sp->epochs; ep++) {
        c->pr.epoch = ep;
        c->pr.epoch_end = 0;
        double sum = 0.0;
        int rc, stop = 0;
        for (int32_t st = 0; st < steps_epoch; st++)
            if ((rc = train_step(c, ep, st, &sum)) != OML_OK)
                return rc;
        c->model->epochs_run = ep;
        if (c->n_val > 0 && (rc = validate(c, &stop)) != OML_OK)
            return rc;
        c->pr.epoch_end = 1;
        c->pr.elapsed_s = now_s() - c->t0;
        if (sp->progress)
            sp->progress(sp->progress_ctx, &c->pr);
        if (stop)
            break;
    }
    return OML_OK;
}

int oml_batch_train(const oml_batch_spec *sp, const float *X, const int32_t *labels, int32_t n,
                    int32_t dim, oml_batch_model **out, oml_diag *diag)
{
    train_ctx c;
    memset(&c, 0, sizeof c);
    c.sp = sp;
    c.X = X;
    c.labels = labels;
    c.dim = dim;
    c.diag = diag;
    int rc = check_run(&c, n);
    if (rc != OML_OK)
        return rc;
    choose_loss(&c);
    oml_rng_seed(&c.rng, sp->seed);
    if ((rc = alloc_buffers(&c, n)) != OML_OK || (rc = split_train_val(&c, n)) != OML_OK ||
        (rc = start_model(&c)) != OML_OK)
        goto done;
    if (sp->step == NULL && (rc = oml__batch_ws_init(&c.ws, &c.lay, c.cap)) != OML_OK)
        goto done;
    if ((rc = prepare_validation(&c)) != OML_OK || (rc = run_epochs(&c)) != OML_OK)
        goto done;
    if (c.n_val > 0) { /* the model is the one with the best validation Recall@1 */
        memcpy(c.model->params, c.best, c.lay.count * sizeof *c.best);
        c.model->val_r1 = (float)c.pr.best_val_r1;
    }
    *out = c.model;
    c.model = NULL;
done:
    oml_batch_model_destroy(c.model);
    ctx_free(&c);
    return rc;
}
