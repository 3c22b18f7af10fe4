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

typedef struct train_ctx {
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

int oml_batch_train(const oml_batch_spec *sp, const float *X, const int32_t *labels, int32_t n,
                    int32_t dim, oml_batch_model **out, oml_diag *diag)
{
    int rc = check_spec(sp, diag);
    if (rc != OML_OK)
        return rc;
    if (n < OML_BATCH_MIN_ITEMS)
        return oml_diag_set(diag, OML_EEMPTY, "items",
                            "too few items to train: %d, need at least %d", n, OML_BATCH_MIN_ITEMS);
    oml_batch_layout lay;
    int32_t emb = sp->emb > 0 ? sp->emb : dim;
    if (sp->init_identity && sp->depth != 0)
        return oml_diag_set(diag, OML_EINVAL, "init_identity", "identity start needs depth 0");
    if ((rc = oml_batch_layout_init(&lay, dim, sp->depth, sp->hidden, emb, sp->normalize,
                                    diag)) != OML_OK)
        return rc;
    int use_pca = 0;
    if (sp->init == NULL && sp->init_pca != OML_BATCH_PCA_OFF) {
        if (sp->init_pca != OML_BATCH_PCA_ON && sp->init_pca != OML_BATCH_PCA_AUTO)
            return oml_diag_set(diag, OML_EINVAL, "init_pca", "unknown init_pca %d", sp->init_pca);
        if (sp->init_identity)
            return oml_diag_set(diag, OML_EINVAL, "init_pca",
                                "init_pca and init_identity are two different starts");
        use_pca = oml_pca_passthrough_fits(lay.dim, lay.depth, lay.hidden, lay.emb);
        if (!use_pca && sp->init_pca == OML_BATCH_PCA_ON)
            return oml_batch_pca_check(&lay, diag); /* says which condition fails */
    }
    oml_batch_loss_fn loss = sp->loss;
    const void *hp = sp->loss_hp;
    oml_triplet_hp thp = {0.2f, 0};
    oml_lanml_hp lhp;
    oml_danml_hp dhp;
    oml_lanml_hp_default(&lhp);
    oml_danml_hp_default(&dhp);
    if (loss == NULL) {
        loss = sp->method == OML_BATCH_TRIPLET ? oml_triplet_loss
               : sp->method == OML_BATCH_LANML ? oml_lanml_loss
                                               : oml_danml_loss;
        if (hp == NULL)
            hp = sp->method == OML_BATCH_TRIPLET ? (const void *)&thp
                 : sp->method == OML_BATCH_LANML ? (const void *)&lhp
                                                 : (const void *)&dhp;
    }
    int32_t bsz = sp->sampler == OML_BATCH_SAMPLE_MK ? sp->m * sp->k : sp->batch;
    /* Rows of one batch: the sampler hook may compose more than bsz (the
     * epoch length stays n_train / bsz steps). */
    int32_t cap = sp->sample != NULL && sp->batch_cap > 0 ? sp->batch_cap : bsz;
    oml_rng rng;
    oml_rng_seed(&rng, sp->seed);
    train_ctx c;
    memset(&c, 0, sizeof c);
    oml_batch_model *model = NULL;
    c.train = malloc((size_t)n * sizeof *c.train);
    c.val = malloc((size_t)n * sizeof *c.val);
    c.batch_idx = malloc((size_t)cap * sizeof *c.batch_idx);
    c.yb = malloc((size_t)cap * sizeof *c.yb);
    c.Xb = malloc((size_t)cap * (size_t)dim * sizeof *c.Xb);
    c.grad = malloc(lay.count * sizeof *c.grad);
    c.opt.v = calloc(lay.count, sizeof *c.opt.v);
    c.opt.s = calloc(lay.count, sizeof *c.opt.s);
    if (!c.train || !c.val || !c.batch_idx || !c.yb || !c.Xb || !c.grad || !c.opt.v || !c.opt.s) {
        rc = OML_ENOMEM;
        goto done;
    }
    int32_t n_train = 0, n_val = 0;
    if ((rc = split_items(sp, labels, n, &rng, c.train, &n_train, c.val, &n_val)) != OML_OK)
        goto done;
    if (n_val < 2)
        n_val = 0;
    if ((rc = oml_batch_classes_init(&c.cls, labels, c.train, n_train)) != OML_OK)
        goto done;
    int32_t usable = 0;
    for (int32_t q = 0; q < c.cls.n_classes; q++)
        usable += c.cls.start[q + 1] - c.cls.start[q] >= 2;
    if (usable < 2) {
        rc = oml_diag_set(diag, OML_EEMPTY, "labels",
                          "training needs at least two classes with two items each; "
                          "the data has %d such class(es) among %d",
                          usable, c.cls.n_classes);
        goto done;
    }
    if ((rc = oml_batch_model_create(&model, &lay, sp->seed ^ 0x9e3779b97f4a7c15ull, diag)) != OML_OK)
        goto done;
    model->method = sp->method;
    if (sp->init != NULL) {
        const oml_batch_layout *il = &sp->init->lay;
        if (il->dim != lay.dim || il->depth != lay.depth || il->hidden != lay.hidden
            || il->emb != lay.emb || il->normalize != lay.normalize) {
            rc = oml_diag_set(diag, OML_EINVAL, "init",
                              "the initial model's network differs from the spec's");
            goto done;
        }
        memcpy(model->params, sp->init->params, lay.count * sizeof *model->params);
    } else if (sp->init_identity) {
        float *T = model->params + lay.theta;
        memset(T, 0, (size_t)lay.emb * (size_t)dim * sizeof *T);
        for (int32_t r = 0; r < lay.emb && r < dim; r++)
            T[(size_t)r * dim + r] = 1.0f;
    }
    if (sp->center && sp->init == NULL) {
        /* Input centring: mu = mean of the training items (OAHU's centring). */
        double *acc = calloc((size_t)dim, sizeof *acc);
        if (acc == NULL) {
            rc = OML_ENOMEM;
            goto done;
        }
        for (int32_t i = 0; i < n_train; i++) {
            const float *x = X + (size_t)c.train[i] * dim;
            for (int32_t j = 0; j < dim; j++)
                acc[j] += x[j];
        }
        for (int32_t j = 0; j < dim; j++)
            model->params[lay.mu + j] = (float)(acc[j] / n_train);
        free(acc);
    }
    /* The PCA pass-through start, from the training items (never the
     * validation ones), centred at mu (the origin without centring). */
    if (use_pca && (rc = oml_batch_model_init_pca(model, X, c.train, n_train, diag)) != OML_OK)
        goto done;
    if (sp->step == NULL && (rc = oml__batch_ws_init(&c.ws, &lay, cap)) != OML_OK)
        goto done;
    if (n_val > 0) {
        c.best = malloc(lay.count * sizeof *c.best);
        c.vy = malloc((size_t)n_val * sizeof *c.vy);
        c.Xv = malloc((size_t)n_val * (size_t)dim * sizeof *c.Xv);
        c.Ev = malloc((size_t)n_val * (size_t)lay.emb * sizeof *c.Ev);
        if (!c.best || !c.vy || !c.Xv || !c.Ev) {
            rc = OML_ENOMEM;
            goto done;
        }
        for (int32_t i = 0; i < n_val; i++) {
            c.vy[i] = labels[c.val[i]];
            memcpy(c.Xv + (size_t)i * dim, X + (size_t)c.val[i] * dim, (size_t)dim * sizeof *X);
        }
    }

    int32_t steps_epoch = (n_train + bsz - 1) / bsz;
    oml_batch_progress pr = {0};
    pr.epochs = sp->epochs;
    pr.steps_total = (int64_t)steps_epoch * sp->epochs;
    pr.val_r1 = pr.best_val_r1 = NAN;
    double t0 = now_s();
    int32_t bad = 0, pos = n_train; /* random sampler position (reshuffle at the end) */
    for (int32_t ep = 1; ep <= sp->epochs; ep++) {
        pr.epoch = ep;
        pr.epoch_end = 0;
        double sum = 0.0;
        for (int32_t st = 0; st < steps_epoch; st++) {
            if (sp->cancel != NULL && atomic_load(sp->cancel)) {
                rc = OML_ECANCELED;
                goto done;
            }
            int32_t b;
            if (sp->sample != NULL) {
                b = sp->sample(sp->sample_ctx, &c.cls, sp->m, sp->k, &rng, c.batch_idx);
                if (b < 2 || b > cap) {
                    rc = oml_diag_set(diag, OML_EEMPTY, "labels",
                                      "the batch sampler could not draw a batch (%d rows)", b);
                    goto done;
                }
            } else if (sp->sampler == OML_BATCH_SAMPLE_MK) {
                b = oml_batch_sample_mk(&c.cls, sp->m, sp->k, &rng, c.batch_idx);
            } else {
                if (pos + bsz > n_train) {
                    shuffle(c.train, n_train, &rng);
                    pos = 0;
                }
                b = n_train < bsz ? n_train : bsz;
                memcpy(c.batch_idx, c.train + pos, (size_t)b * sizeof *c.batch_idx);
                pos += b;
            }
            for (int32_t i = 0; i < b; i++) {
                c.yb[i] = labels[c.batch_idx[i]];
                memcpy(c.Xb + (size_t)i * dim, X + (size_t)c.batch_idx[i] * dim,
                       (size_t)dim * sizeof *X);
            }
            double L = sp->step != NULL
                           ? sp->step(sp->step_ctx, &lay, model->params, c.Xb, c.yb, b, ep,
                                      pr.step, &rng, c.grad)
                           : oml__batch_loss_grad_ws(&lay, model->params, loss, hp, c.Xb, c.yb, b,
                                                     &rng, c.grad, &c.ws);
            if (!isfinite(L)) {
                rc = oml_diag_set(diag, OML_ENONFINITE, "loss",
                                  "the loss diverged at epoch %d step %d: lower the learning rate",
                                  ep, st);
                goto done;
            }
            optim_step(sp, &c.opt, model->params, c.grad, (size_t)dim, lay.count);
            sum += L;
            pr.step++;
            pr.loss = sum / (st + 1);
            if (sp->progress && sp->progress_every > 0 && pr.step % sp->progress_every == 0) {
                pr.elapsed_s = now_s() - t0;
                sp->progress(sp->progress_ctx, &pr);
            }
        }
        model->epochs_run = ep;
        int stop = 0;
        if (n_val > 0) {
            if ((rc = oml_batch_model_embed(model, c.Xv, n_val, c.Ev)) != OML_OK)
                goto done;
            pr.val_r1 = oml_batch_recall1(c.Ev, c.vy, n_val, lay.emb);
            if (!(pr.val_r1 <= pr.best_val_r1)) { /* first, or better (NaN-safe) */
                pr.best_val_r1 = pr.val_r1;
                memcpy(c.best, model->params, lay.count * sizeof *c.best);
                bad = 0;
            } else if (++bad >= sp->patience && sp->patience > 0) {
                stop = 1;
            }
        }
        pr.epoch_end = 1;
        pr.elapsed_s = now_s() - t0;
        if (sp->progress)
            sp->progress(sp->progress_ctx, &pr);
        if (stop)
            break;
    }
    if (n_val > 0) {
        memcpy(model->params, c.best, lay.count * sizeof *c.best);
        model->val_r1 = (float)pr.best_val_r1;
    }
    *out = model;
    model = NULL;
    rc = OML_OK;
done:
    oml_batch_model_destroy(model);
    ctx_free(&c);
    return rc;
}
