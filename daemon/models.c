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
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "log.h"
#include "net.h"

#define FILE_MAGIC "OMLDMDL1"

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

static uint32_t crc32_of(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return ~c;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

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

int omld_models_compatible(const oml_config *live, const oml_batch_layout *lay, char *err,
                           size_t errlen)
{
    if (lay->dim != live->dim || lay->emb != live->emb ||
        (lay->depth > 0 && lay->hidden != live->hidden) || lay->depth > live->layers) {
        snprintf(err, errlen, "the model (dim %d, depth %d, hidden %d, emb %d) does not fit the "
                 "live model (dim %d, L %d, hidden %d, emb %d): dim, hidden and emb must be equal "
                 "and depth <= L", lay->dim, lay->depth, lay->hidden, lay->emb, live->dim,
                 live->layers, live->hidden, live->emb);
        return -1;
    }
    return 0;
}

oml_snapshot *omld_models_snapshot(const oml_config *live, const oml_batch_model *bm,
                                   uint64_t version)
{
    const oml_batch_layout *bl = &bm->lay;
    oml_config cfg = *live;
    cfg.layers = bl->depth;
    cfg.standardize = 0; /* a batch net: unscaled centred input, heads without offsets */
    cfg.offset = 0.0f;
    oml_net_layout lay;
    oml_net_layout_init(&lay, &cfg);
    float *p = calloc(lay.count, sizeof(float));
    if (p == NULL)
        return NULL;
    memcpy(p + lay.mu, bm->params + bl->mu, (size_t)bl->dim * sizeof(float));
    for (int l = 1; l <= bl->depth; l++)
        memcpy(p + lay.w[l], bm->params + bl->w[l],
               (size_t)bl->hidden * (size_t)oml_batch_width(bl, l - 1) * sizeof(float));
    memcpy(p + lay.theta[bl->depth], bm->params + bl->theta,
           (size_t)bl->emb * (size_t)oml_batch_width(bl, bl->depth) * sizeof(float));
    float alpha[OML_MAX_LAYERS + 1] = {0};
    alpha[bl->depth] = 1.0f;
    oml_snapshot *s = oml_snapshot_create(&cfg, p, alpha, version, 0);
    free(p);
    return s;
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
    char meta[1024];
    int ml = snprintf(meta, sizeof meta,
                      "name=%s\nmethod=%s\nvariant=%s\ncreated_ms=%llu\njob_id=%llu\n"
                      "trained_items=%u\n",
                      m->info.name, m->info.method, m->info.variant,
                      (unsigned long long)m->info.created_ms, (unsigned long long)m->info.job_id,
                      m->info.trained_items);
    if (ml < 0 || (size_t)ml >= sizeof meta) {
        snprintf(err, errlen, "model metadata too long");
        return -1;
    }
    size_t total = 8 + 4 + (size_t)ml + 4 + m->len;
    uint8_t *b = malloc(total);
    if (b == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(b, FILE_MAGIC, 8);
    put_u32(b + 8, (uint32_t)ml);
    memcpy(b + 12, meta, (size_t)ml);
    put_u32(b + 12 + ml, crc32_of((const uint8_t *)meta, (size_t)ml));
    memcpy(b + 16 + ml, m->bytes, m->len);

    char path[1024], tmp[1100];
    model_path(reg, m->info.name, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    int ok = fd >= 0;
    size_t off = 0;
    while (ok && off < total) {
        ssize_t w = write(fd, b + off, total - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            ok = 0;
        else
            off += (size_t)w;
    }
    ok = ok && fsync(fd) == 0;
    if (fd >= 0 && close(fd) != 0)
        ok = 0;
    ok = ok && rename(tmp, path) == 0;
    free(b);
    if (!ok) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    int dfd = open(reg->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

static void meta_get(const char *meta, size_t n, const char *key, char *out, size_t cap)
{
    size_t kl = strlen(key);
    out[0] = '\0';
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && meta[j] != '\n')
            j++;
        if (j - i > kl && memcmp(meta + i, key, kl) == 0 && meta[i + kl] == '=') {
            size_t vl = j - i - kl - 1;
            if (vl >= cap)
                vl = cap - 1;
            memcpy(out, meta + i + kl + 1, vl);
            out[vl] = '\0';
            return;
        }
        i = j + 1;
    }
}

/* Reads and checks one file; a new entry (without views) or NULL + why. */
static model_entry *read_file(const omld_models *reg, const char *path, char *why, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(why, cap, "%s", strerror(errno));
        return NULL;
    }
    uint8_t *b = NULL;
    size_t n = 0, capb = 0;
    for (;;) {
        if (n == capb) {
            capb = capb ? 2 * capb : 65536;
            uint8_t *nb = realloc(b, capb);
            if (nb == NULL) {
                free(b);
                fclose(f);
                snprintf(why, cap, "out of memory");
                return NULL;
            }
            b = nb;
        }
        size_t r = fread(b + n, 1, capb - n, f);
        if (r == 0)
            break;
        n += r;
    }
    fclose(f);
    model_entry *m = NULL;
    if (n < 16 || memcmp(b, FILE_MAGIC, 8) != 0) {
        snprintf(why, cap, "not a model file (bad magic)");
        goto out;
    }
    uint32_t ml = get_u32(b + 8);
    if ((size_t)ml + 16 > n || crc32_of(b + 12, ml) != get_u32(b + 12 + ml)) {
        snprintf(why, cap, "damaged metadata");
        goto out;
    }
    oml_batch_model *bm = NULL;
    oml_diag d = {0};
    const uint8_t *mb = b + 16 + ml;
    size_t mlen = n - 16 - ml;
    if (oml_batch_model_decode(mb, mlen, &bm, &d) != OML_OK) {
        snprintf(why, cap, "damaged model: %s", d.msg);
        goto out;
    }
    char msg[256];
    if (omld_models_compatible(&reg->live, &bm->lay, msg, sizeof msg) != 0) {
        snprintf(why, cap, "%s", msg);
        oml_batch_model_destroy(bm);
        goto out;
    }
    m = calloc(1, sizeof *m);
    uint8_t *copy = malloc(mlen);
    if (m == NULL || copy == NULL) {
        free(m);
        free(copy);
        m = NULL;
        oml_batch_model_destroy(bm);
        snprintf(why, cap, "out of memory");
        goto out;
    }
    memcpy(copy, mb, mlen);
    m->bm = bm;
    m->bytes = copy;
    m->len = mlen;
    const char *meta = (const char *)b + 12;
    char v[300];
    meta_get(meta, ml, "name", m->info.name, sizeof m->info.name);
    meta_get(meta, ml, "method", m->info.method, sizeof m->info.method);
    meta_get(meta, ml, "variant", m->info.variant, sizeof m->info.variant);
    meta_get(meta, ml, "created_ms", v, sizeof v);
    m->info.created_ms = strtoull(v, NULL, 10);
    meta_get(meta, ml, "job_id", v, sizeof v);
    m->info.job_id = strtoull(v, NULL, 10);
    meta_get(meta, ml, "trained_items", v, sizeof v);
    m->info.trained_items = (uint32_t)strtoul(v, NULL, 10);
out:
    free(b);
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
    oml_snapshot *s = omld_models_snapshot(&reg->live, m->bm, m->gen);
    if (s == NULL)
        return -1;
    if (take_lock)
        pthread_rwlock_rdlock(&reg->lock->rw);
    int rc = omld_views_publish_now(m->views, s, omld_now_ns());
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
    if (omld_models_compatible(&reg->live, &bm->lay, err, errlen) != 0)
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
        oml_snapshot *s = omld_models_snapshot(&reg->live, m->bm, m->gen + 1);
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
