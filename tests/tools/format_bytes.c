/* format_bytes.c - writes one file of every format omld keeps on disk from
 * fixed inputs, so that two builds (before and after a refactor) can be
 * compared byte for byte: tests/tools/format_identity.sh builds this
 * against an older revision and against the tree and runs cmp.
 *
 * Usage: format_bytes OUT_DIR  (OUT_DIR must not exist)
 * Writes: model.oml (learner file), store.bin, closure.bin, batch.bin
 * (oml_batch_model encoding), checkpoint-*.ckpt (those three + the learner
 * as sections), promoted.oml (a learner after a batch model's promote),
 * wal/ (one segment), models/m1.omlb (the batch model file).
 *
 * Built with -DFORMAT_OLD against revisions before issue 13, whose batch
 * model file and promote lived in daemon/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "batch.h"
#include "checkpoint.h"
#include "closure.h"
#include "hedge.h"
#include "learner.h"
#include "modelfile.h"
#include "store.h"
#include "wal.h"
#ifdef FORMAT_OLD
#include "models.h"
#else
#include "batchfile.h"
#include "promote.h"
#endif

/* The WAL salts each segment at random: fixed here so two runs agree. */
ssize_t getrandom(void *buf, size_t n, unsigned int flags)
{
    (void)flags;
    memset(buf, 0x5a, n);
    return (ssize_t)n;
}

#define DIM 12
#define N 40

static void die(const char *what)
{
    fprintf(stderr, "format_bytes: %s\n", what);
    exit(1);
}

static void save(const char *dir, const char *name, const uint8_t *b, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(b, 1, n, f) != n || fclose(f) != 0)
        die(path);
}

static void promote(oml_learner *l, const oml_batch_model *bm)
{
#ifdef FORMAT_OLD
    /* The steps of daemon/apply.c's apply_promote before issue 13. */
    const oml_batch_layout *bl = &bm->lay;
    const oml_net_layout *lay = &l->lay;
    int32_t dd = bl->depth;
    size_t to[OML_MAX_LAYERS + 2], from[OML_MAX_LAYERS + 2], n[OML_MAX_LAYERS + 2];
    int nb = 0;
    to[nb] = lay->mu, from[nb] = bl->mu, n[nb++] = (size_t)bl->dim;
    for (int k = 1; k <= dd; k++)
        to[nb] = lay->w[k], from[nb] = bl->w[k],
        n[nb++] = (size_t)bl->hidden * (size_t)oml_batch_width(bl, k - 1);
    to[nb] = lay->theta[dd], from[nb] = bl->theta,
    n[nb++] = (size_t)bl->emb * (size_t)oml_batch_width(bl, dd);
    for (int i = 0; i < nb; i++) {
        memcpy(l->params + to[i], bm->params + from[i], n[i] * sizeof(float));
        if (l->start)
            memcpy(l->start + to[i], bm->params + from[i], n[i] * sizeof(float));
    }
#if OML_MODELFILE_VERSION >= 3 /* issue 11's input scale and head offsets, in apply.c */
    for (float *w = l->params; w; w = w == l->params ? l->start : NULL) {
        for (int32_t j = 0; lay->has_scale && j < lay->dim; j++)
            w[lay->scale + j] = 1.0f;
        if (lay->has_bias)
            memset(w + lay->bias[dd], 0, (size_t)lay->emb * sizeof(float));
    }
#endif
    oml_hedge_init(l->alpha, oml_learner_heads(l));
    if (l->ref_n > 0) {
        oml_net_acts a;
        if (oml_net_acts_init(&a, &l->lay, l->ref_n) != OML_OK)
            die("acts");
        oml_net_forward(&l->lay, l->params, l->ref_x, l->ref_n, &a);
        size_t per = (size_t)l->ref_n * (size_t)l->lay.emb;
        for (int k = 0; k <= l->lay.layers; k++)
            memcpy(l->ref_emb + (size_t)k * per, a.f[k], per * sizeof(float));
        oml_net_acts_free(&a);
        l->ref_at = l->stats.updates;
    }
#else
    if (oml_promote(l, bm) != OML_OK) {
        fprintf(stderr, "format_bytes: promote failed\n");
        exit(1);
    }
#endif
}

static void write_batch_file(const char *dir, oml_batch_model *bm)
{
    char mdir[1024];
    snprintf(mdir, sizeof mdir, "%s/models", dir);
#ifdef FORMAT_OLD
    /* omld_models_add writes the file, then builds a view over the store. */
    oml_store *st = NULL;
    if (oml_store_create(&st, DIM, 16) != OML_OK)
        die("store");
    omld_store_lock lock;
    pthread_rwlock_init(&lock.rw, NULL);
    oml_config live;
    oml_config_preset(&live, "default", DIM);
    live.layers = 2, live.hidden = 16, live.emb = 4;
    omld_models *reg = NULL;
    if (omld_models_create(&reg, dir, &live, st, &lock) != 0)
        die("models");
    omld_model_info info = {.created_ms = 1700000000123ull, .trained_items = 40, .job_id = 7};
    snprintf(info.name, sizeof info.name, "m1");
    snprintf(info.method, sizeof info.method, "triplet");
    snprintf(info.variant, sizeof info.variant, "plain");
    char err[256];
    if (omld_models_add(reg, &info, bm, err, sizeof err) != 0)
        die(err);
    omld_models_destroy(reg);
    oml_store_destroy(st);
#else
    mkdir(mdir, 0750);
    oml_batchfile_meta meta = {.created_ms = 1700000000123ull, .trained_items = 40, .job_id = 7};
    snprintf(meta.name, sizeof meta.name, "m1");
    snprintf(meta.method, sizeof meta.method, "triplet");
    snprintf(meta.variant, sizeof meta.variant, "plain");
    uint8_t *b;
    size_t n;
    if (oml_batch_model_encode(bm, &b, &n) != OML_OK)
        die("batch encode");
    char path[1100];
    snprintf(path, sizeof path, "%s/m1.omlb", mdir);
    oml_diag d = {0};
    if (oml_batchfile_write(path, &meta, b, n, &d) != OML_OK)
        die(d.msg);
    free(b);
    oml_batch_model_destroy(bm);
#endif
}

int main(int argc, char **argv)
{
    if (argc != 2)
        die("usage: format_bytes OUT_DIR");
    const char *dir = argv[1];
    if (mkdir(dir, 0750) != 0)
        die("cannot create OUT_DIR");

    float X[N * DIM];
    uint64_t z = 12345;
    for (int i = 0; i < N * DIM; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        X[i] = (float)((z >> 40) % 2000) / 1000.0f - 1.0f;
    }

    /* the learner: prepared (PCA start, local hedge reference), 30 steps */
    oml_config cfg;
    oml_config_preset(&cfg, "default", DIM);
    cfg.layers = 2, cfg.hidden = 16, cfg.emb = 4;
    oml_learner *l = NULL;
    oml_diag d = {0};
#ifdef FORMAT_OLD /* before the auto start, prepare took no labels */
    if (oml_learner_create(&l, &cfg, &d) != OML_OK || oml_learner_prepare(l, X, N) != OML_OK)
        die("learner");
#else
    if (oml_learner_create(&l, &cfg, &d) != OML_OK || oml_learner_prepare(l, X, NULL, N) != OML_OK)
        die("learner");
#endif
    for (int t = 0; t < 30; t++)
        oml_learner_step(l, X + (t % N) * DIM, X + ((t + 1) % N) * DIM, X + ((t + 7) % N) * DIM,
                         NULL);
    char path[1024];
    snprintf(path, sizeof path, "%s/model.oml", dir);
    if (oml_model_save(l, path, &d) != OML_OK)
        die(d.msg);

    /* the store: labelled and unlabelled items, a delete (a free slot), a reuse */
    oml_store *st = NULL;
    if (oml_store_create(&st, DIM, 64) != OML_OK)
        die("store");
    for (int i = 0; i < 10; i++) {
        char id[16], lab[8];
        snprintf(id, sizeof id, "item-%d", i);
        snprintf(lab, sizeof lab, "c%d", i % 3);
        if (oml_store_put(st, id, strlen(id), X + i * DIM, i % 4 ? lab : NULL,
                          i % 4 ? strlen(lab) : 0, NULL, &d) != OML_OK)
            die(d.msg);
    }
    oml_store_delete(st, "item-3", 6);
    oml_store_put(st, "late", 4, X + 20 * DIM, "c9", 2, NULL, &d);
    uint8_t *sb, *cb, *mb, *bb;
    size_t sn, cn, mn, bn;
    if (oml_store_encode(st, &sb, &sn) != OML_OK)
        die("store encode");
    save(dir, "store.bin", sb, sn);

    /* the closure: two components, a dissimilar edge, a removal */
    oml_closure *c = NULL;
    if (oml_closure_create(&c, 64, 64, 99) != OML_OK)
        die("closure");
    oml_closure_add_similar(c, 0, 1, NULL, 0, NULL);
    oml_closure_add_similar(c, 1, 2, NULL, 0, NULL);
    oml_closure_add_similar(c, 5, 6, NULL, 0, NULL);
    oml_closure_add_similar(c, 6, 8, NULL, 0, NULL);
    oml_closure_add_dissimilar(c, 2, 5, NULL, 0, NULL);
    oml_closure_add_dissimilar(c, 0, 9, NULL, 0, NULL);
    oml_closure_remove(c, 8);
    if (oml_closure_encode(c, &cb, &cn) != OML_OK)
        die("closure encode");
    save(dir, "closure.bin", cb, cn);

    /* the checkpoint: the three states as sections */
    if (oml_model_encode(l, &mb, &mn) != OML_OK)
        die("model encode");
    oml_ckpt_section sec[3] = {{.tag = 1, .data = mb, .len = mn}, {.tag = 2, .data = sb, .len = sn},
                               {.tag = 3, .data = cb, .len = cn}};
    if (oml_ckpt_write(dir, 42, sec, 3, 2, NULL, 0, NULL, &d) != OML_OK)
        die(d.msg);

    /* the write-ahead log: a few records in one segment */
    snprintf(path, sizeof path, "%s/wal", dir);
    oml_wal *w = NULL;
    if (oml_wal_open(&w, path, NULL, NULL, NULL, NULL, &d) != OML_OK)
        die(d.msg);
    for (int i = 0; i < 5; i++) {
        if (oml_wal_append(w, (uint8_t)(i + 1), sb, (size_t)(i * 37) % sn, NULL) != OML_OK)
            die("wal append");
        if (i % 2 == 1 && oml_wal_commit(w, &d) != OML_OK)
            die(d.msg);
    }
    if (oml_wal_commit(w, &d) != OML_OK || oml_wal_close(w, &d) != OML_OK)
        die(d.msg);

    /* the batch model: its encoding, its file, and a promote of it */
    oml_batch_layout bl;
    oml_batch_model *bm = NULL;
    if (oml_batch_layout_init(&bl, DIM, 1, 16, 4, 1, &d) != OML_OK ||
        oml_batch_model_create(&bm, &bl, 5, &d) != OML_OK)
        die(d.msg);
    bm->epochs_run = 3;
    bm->val_r1 = 0.625f;
    if (oml_batch_model_encode(bm, &bb, &bn) != OML_OK)
        die("batch encode");
    save(dir, "batch.bin", bb, bn);
    promote(l, bm);
    snprintf(path, sizeof path, "%s/promoted.oml", dir);
    if (oml_model_save(l, path, &d) != OML_OK)
        die(d.msg);
    write_batch_file(dir, bm); /* takes bm */

    free(sb);
    free(cb);
    free(mb);
    free(bb);
    oml_closure_destroy(c);
    oml_store_destroy(st);
    oml_learner_destroy(l);
    return 0;
}
