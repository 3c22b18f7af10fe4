/* models.c - the registry of named batch models (see models.h).
 *
 * DESIGN
 * One mutex guards the entry array; it is held for lookups, pointer copies
 * and omld_views_submit (which never blocks on a build), never during an
 * index build, a file write or an indexer join. Each entry owns its batch
 * model, its encoded bytes (Promote copies them into the engine's log
 * record), and an omld_views whose indexer rebuilds the model's index when
 * the engine reports that items changed. Model views keep their own
 * metrics block so that the live view counters (views_published,
 * index_build latency) keep describing the live model only. */
#include "models.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "batchfile.h"
#include "err.h"
#include "log.h"
#include "promote.h"

typedef struct model_entry {
    omld_model_info info;
    oml_batch_model *bm;
    uint8_t *bytes;        /* oml_batch_model_encode(bm) */
    size_t len;
    omld_views *views;
    uint64_t gen;          /* index generation = version of its snapshots */
} model_entry;

struct omld_models {
    char dir[512];
    oml_config live;
    const oml_store *store;
    omld_store_lock *lock;
    omld_metrics *metrics;  /* the model views' own counters */
    pthread_mutex_t mu;
    model_entry *e[OMLD_MODELS_MAX];
    int n;
};

/* ------------------------------------------------------------ helpers */

int omld_model_name_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > OMLD_MODEL_NAME_MAX || name[0] == '.' || strcmp(name, "live") == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

static void entry_free(model_entry *m)
{
    if (m == NULL)
        return;
    omld_views_destroy(m->views);
    oml_batch_model_destroy(m->bm);
    free(m->bytes);
    free(m);
}

static int find(const omld_models *reg, const char *name)
{
    for (int i = 0; i < reg->n; i++)
        if (strcmp(reg->e[i]->info.name, name) == 0)
            return i;
    return -1;
}

/* ------------------------------------------------------------ files */

static void model_path(const omld_models *reg, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s.omlb", reg->dir, name);
}

static int write_file(const omld_models *reg, const model_entry *m, char *err, size_t errlen)
{
    oml_batchfile_meta meta = {.created_ms = m->info.created_ms, .job_id = m->info.job_id,
                               .trained_items = m->info.trained_items};
    snprintf(meta.name, sizeof meta.name, "%s", m->info.name);
    snprintf(meta.method, sizeof meta.method, "%s", m->info.method);
    snprintf(meta.variant, sizeof meta.variant, "%s", m->info.variant);
    char path[1024];
    model_path(reg, m->info.name, path, sizeof path);
    oml_diag d = {0};
    if (oml_batchfile_write(path, &meta, m->bytes, m->len, &d) != OML_OK) {
        snprintf(err, errlen, "%s", d.msg);
        return -1;
    }
    return 0;
}

/* Reads and checks one file; a new entry (without views) or NULL + err. */
static model_entry *read_file(const omld_models *reg, const char *path, char *err, size_t errlen)
{
    oml_batchfile_meta meta;
    uint8_t *mb = NULL;
    size_t mlen = 0;
    oml_diag d = {0};
    if (oml_batchfile_read(path, &meta, &mb, &mlen, &d) != OML_OK) {
        snprintf(err, errlen, "%s", d.msg);
        return NULL;
    }
    oml_batch_model *bm = NULL;
    if (oml_batch_model_decode(mb, mlen, &bm, &d) != OML_OK) {
        snprintf(err, errlen, "damaged model: %s", d.msg);
        free(mb);
        return NULL;
    }
    char msg[256];
    model_entry *m = NULL;
    if (oml_promote_compatible(&reg->live, &bm->lay, msg, sizeof msg) != 0)
        snprintf(err, errlen, "%s", msg);
    else if ((m = calloc(1, sizeof *m)) == NULL)
        snprintf(err, errlen, "out of memory");
    if (m == NULL) {
        oml_batch_model_destroy(bm);
        free(mb);
        return NULL;
    }
    m->bm = bm;
    m->bytes = mb;
    m->len = mlen;
    snprintf(m->info.name, sizeof m->info.name, "%s", meta.name);
    snprintf(m->info.method, sizeof m->info.method, "%s", meta.method);
    snprintf(m->info.variant, sizeof m->info.variant, "%s", meta.variant);
    m->info.created_ms = meta.created_ms;
    m->info.job_id = meta.job_id;
    m->info.trained_items = meta.trained_items;
    return m;
}

/* ------------------------------------------------------------ views */

/* Starts the entry's indexer and builds its first view on this thread
 * (under the store's read lock unless the caller owns the store). */
static int entry_start(omld_models *reg, model_entry *m, int take_lock)
{
    m->info.depth = m->bm->lay.depth;
    m->info.val_r1 = m->bm->val_r1;
    m->info.epochs_run = m->bm->epochs_run;
    if (omld_views_create(&m->views, reg->store, reg->lock, reg->metrics, NULL, NULL) != 0)
        return -1;
    m->gen = 1;
    oml_snapshot *s = oml_promote_snapshot(&reg->live, m->bm, m->gen);
    if (s == NULL)
        return -1;
    if (take_lock)
        pthread_rwlock_rdlock(&reg->lock->rw);
    int rc = omld_views_publish_now(m->views, s, omld_now_ns(), 1);
    if (take_lock)
        pthread_rwlock_unlock(&reg->lock->rw);
    return rc;
}

/* ------------------------------------------------------------ API */

int omld_models_create(omld_models **out, const char *data_dir, const oml_config *live,
                       const oml_store *store, omld_store_lock *lock)
{
    omld_models *reg = calloc(1, sizeof *reg);
    if (reg == NULL)
        return -1;
    reg->metrics = calloc(1, sizeof *reg->metrics);
    if (reg->metrics == NULL) {
        free(reg);
        return -1;
    }
    snprintf(reg->dir, sizeof reg->dir, "%s/models", data_dir);
    if (mkdir(reg->dir, 0750) != 0 && errno != EEXIST) {
        LOG_ERROR("models", "cannot create %s: %s", reg->dir, strerror(errno));
        free(reg->metrics);
        free(reg);
        return -1;
    }
    reg->live = *live;
    reg->store = store;
    reg->lock = lock;
    pthread_mutex_init(&reg->mu, NULL);
    *out = reg;
    return 0;
}

void omld_models_destroy(omld_models *reg)
{
    if (reg == NULL)
        return;
    for (int i = 0; i < reg->n; i++)
        entry_free(reg->e[i]);
    pthread_mutex_destroy(&reg->mu);
    free(reg->metrics);
    free(reg);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int omld_models_load(omld_models *reg)
{
    DIR *d = opendir(reg->dir);
    if (d == NULL)
        return 0;
    char *names[OMLD_MODELS_MAX * 2];
    int nn = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && nn < OMLD_MODELS_MAX * 2) {
        size_t l = strlen(de->d_name);
        if (l > 5 && strcmp(de->d_name + l - 5, ".omlb") == 0)
            names[nn++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)nn, sizeof names[0], by_name);
    int loaded = 0;
    for (int i = 0; i < nn; i++) {
        if (names[i] == NULL)
            continue;
        char path[1024], why[600];
        snprintf(path, sizeof path, "%s/%s", reg->dir, names[i]);
        model_entry *m = read_file(reg, path, why, sizeof why);
        char stem[OMLD_MODEL_NAME_MAX + 8];
        snprintf(stem, sizeof stem, "%.*s", (int)(strlen(names[i]) - 5), names[i]);
        if (m && strcmp(m->info.name, stem) != 0) {
            snprintf(why, sizeof why, "its name '%s' differs from the file name", m->info.name);
            entry_free(m);
            m = NULL;
        }
        if (m == NULL || reg->n >= OMLD_MODELS_MAX || entry_start(reg, m, 0) != 0) {
            if (m == NULL) {
                char bad[1100];
                snprintf(bad, sizeof bad, "%s.bad", path);
                LOG_WARN("models", "skipping %s: %s (renamed to %s)", path, why, bad);
                rename(path, bad);
            } else {
                LOG_WARN("models", "skipping %s: too many models or out of memory", path);
            }
            entry_free(m);
            free(names[i]);
            continue;
        }
        pthread_mutex_lock(&reg->mu);
        reg->e[reg->n++] = m;
        pthread_mutex_unlock(&reg->mu);
        loaded++;
        free(names[i]);
    }
    if (loaded)
        LOG_INFO("models", "loaded %d batch model(s) from %s", loaded, reg->dir);
    return loaded;
}

int omld_models_add(omld_models *reg, const omld_model_info *meta, oml_batch_model *bm,
                    char *err, size_t errlen)
{
    model_entry *m = calloc(1, sizeof *m);
    if (m == NULL) {
        oml_batch_model_destroy(bm);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    m->info = *meta;
    m->bm = bm;
    if (oml_promote_compatible(&reg->live, &bm->lay, err, errlen) != 0)
        goto fail;
    if (oml_batch_model_encode(bm, &m->bytes, &m->len) != OML_OK) {
        snprintf(err, errlen, "out of memory encoding the model");
        goto fail;
    }
    pthread_mutex_lock(&reg->mu);
    int taken = find(reg, meta->name) >= 0, full = reg->n >= OMLD_MODELS_MAX;
    pthread_mutex_unlock(&reg->mu);
    if (taken || full) {
        if (taken)
            snprintf(err, errlen, "a model named '%s' exists", meta->name);
        else
            snprintf(err, errlen, "too many models (%d): delete some first", OMLD_MODELS_MAX);
        goto fail;
    }
    if (write_file(reg, m, err, errlen) != 0)
        goto fail;
    if (entry_start(reg, m, 1) != 0) {
        snprintf(err, errlen, "cannot build the model's index (out of memory?)");
        char path[1024];
        model_path(reg, meta->name, path, sizeof path);
        unlink(path);
        goto fail;
    }
    pthread_mutex_lock(&reg->mu);
    if (find(reg, meta->name) >= 0 || reg->n >= OMLD_MODELS_MAX) {
        pthread_mutex_unlock(&reg->mu);
        snprintf(err, errlen, "a model named '%s' was added meanwhile", meta->name);
        goto fail; /* its file was overwritten by the same name: keep it for the other */
    }
    reg->e[reg->n++] = m;
    pthread_mutex_unlock(&reg->mu);
    return 0;
fail:
    entry_free(m);
    return -1;
}

int omld_models_exists(omld_models *reg, const char *name)
{
    pthread_mutex_lock(&reg->mu);
    int i = find(reg, name);
    pthread_mutex_unlock(&reg->mu);
    return i >= 0;
}

omld_view *omld_models_acquire(omld_models *reg, const char *name)
{
    pthread_mutex_lock(&reg->mu);
    int i = find(reg, name);
    omld_view *v = i >= 0 ? omld_views_acquire(reg->e[i]->views) : NULL;
    pthread_mutex_unlock(&reg->mu);
    return v;
}

int omld_models_bytes(omld_models *reg, const char *name, uint8_t **buf, size_t *len)
{
    pthread_mutex_lock(&reg->mu);
    int i = find(reg, name), rc = OML_ENOTFOUND;
    if (i >= 0) {
        *buf = malloc(reg->e[i]->len);
        rc = *buf ? OML_OK : OML_ENOMEM;
        if (*buf) {
            memcpy(*buf, reg->e[i]->bytes, reg->e[i]->len);
            *len = reg->e[i]->len;
        }
    }
    pthread_mutex_unlock(&reg->mu);
    return rc;
}

int omld_models_delete(omld_models *reg, const char *name)
{
    pthread_mutex_lock(&reg->mu);
    int i = find(reg, name);
    model_entry *m = NULL;
    if (i >= 0) {
        m = reg->e[i];
        memmove(&reg->e[i], &reg->e[i + 1], (size_t)(reg->n - i - 1) * sizeof reg->e[0]);
        reg->n--;
    }
    pthread_mutex_unlock(&reg->mu);
    if (m == NULL)
        return OML_ENOTFOUND;
    char path[1024];
    model_path(reg, name, path, sizeof path);
    if (unlink(path) != 0 && errno != ENOENT)
        LOG_WARN("models", "cannot remove %s: %s", path, strerror(errno));
    entry_free(m); /* joins its indexer; views held by queries live on */
    return OML_OK;
}

void omld_models_store_changed(omld_models *reg)
{
    pthread_mutex_lock(&reg->mu);
    for (int i = 0; i < reg->n; i++) {
        model_entry *m = reg->e[i];
        oml_snapshot *s = oml_promote_snapshot(&reg->live, m->bm, m->gen + 1);
        if (s == NULL) {
            LOG_ERROR("models", "out of memory rebuilding model %s", m->info.name);
            continue;
        }
        m->gen++;
        omld_views_submit(m->views, s, omld_now_ns());
    }
    pthread_mutex_unlock(&reg->mu);
}

static int info_by_name(const void *a, const void *b)
{
    return strcmp(((const omld_model_info *)a)->name, ((const omld_model_info *)b)->name);
}

int omld_models_list(omld_models *reg, omld_model_info *out, int cap)
{
    pthread_mutex_lock(&reg->mu);
    int n = reg->n;
    for (int i = 0; i < n && i < cap; i++) {
        out[i] = reg->e[i]->info;
        omld_view *v = omld_views_acquire(reg->e[i]->views);
        out[i].items_indexed = v ? (uint64_t)v->ix->n : 0;
        out[i].index_version = v ? v->version : 0;
        omld_view_release(v);
    }
    pthread_mutex_unlock(&reg->mu);
    qsort(out, (size_t)(n < cap ? n : cap), sizeof *out, info_by_name);
    return n;
}
