/* modelfile.c - versioned, checksummed learner files (see modelfile.h).
 *
 * Everything that determines the learner's future is written: configuration,
 * parameters, proximal start weights, hedge weights, counters and the RNG
 * state, so a loaded learner continues exactly as the saved one would. */
#include "modelfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static const char MAGIC[8] = {'O', 'M', 'L', 'M', 'O', 'D', 'E', 'L'};

/* A bounded little-endian writer/reader over one buffer. The host is
 * little-endian (checked at compile time below), so values are memcpy'd. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "model files assume a little-endian host");

typedef struct cursor {
    uint8_t *p;
    const uint8_t *r;
    size_t len, pos;
    int bad;
} cursor;

static void put(cursor *c, const void *v, size_t n)
{
    if (c->p)
        memcpy(c->p + c->pos, v, n);
    c->pos += n;
}

static void get(cursor *c, void *v, size_t n)
{
    if (c->bad || c->len - c->pos < n) {
        c->bad = 1;
        memset(v, 0, n);
        return;
    }
    memcpy(v, c->r + c->pos, n);
    c->pos += n;
}

#define PUT(c, v) put(c, &(v), sizeof(v))
#define GET(c, v) get(c, &(v), sizeof(v))

/* The field list is written once and used for both directions. */
#define CONFIG_FIELDS(X, c)                                                            \
    X(c.dim) X(c.layers) X(c.hidden) X(c.emb) X(c.beta) X(c.s) X(c.eta) X(c.tau)       \
    X(c.seed) X(c.init) X(c.center) X(c.eta_decay) X(c.prox) X(c.hedge_signal)
/* ... and since format version 2 (mini-batches, rehearsal, Adam). */
#define CONFIG_FIELDS_V2(X, c)                                                         \
    X(c.loss) X(c.margin) X(c.optim) X(c.batch) X(c.rehearse) X(c.replay) X(c.equal_heads)
/* ... and since version 3 (standardised input, head offsets). */
#define CONFIG_FIELDS_V3(X, c) X(c.standardize) X(c.offset)
#define STATS_FIELDS_V2(X, st)                                                         \
    X(st.steps) X(st.rehearsed) X(st.skipped) X(st.recent_n) X(st.recent_hits) X(st.recent)

static void encode_body(const oml_learner *l, cursor *c)
{
    uint32_t version = OML_MODELFILE_VERSION, reserved = 0;
    put(c, MAGIC, sizeof MAGIC);
    PUT(c, version);
    PUT(c, reserved);
#define W(f) PUT(c, l->f);
    CONFIG_FIELDS(W, cfg)
    CONFIG_FIELDS_V2(W, cfg)
    CONFIG_FIELDS_V3(W, cfg)
#undef W
    const oml_learner_stats *st = &l->stats;
    PUT(c, st->updates);
    PUT(c, st->satisfied);
    PUT(c, st->utilised);
    put(c, st->loss_ema, sizeof st->loss_ema);
#define W(f) PUT(c, f);
    STATS_FIELDS_V2(W, (*st))
#undef W
    put(c, l->alpha, sizeof l->alpha);
    put(c, l->rng.s, sizeof l->rng.s);
    int32_t prepared = l->prepared, has_start = l->start != NULL;
    PUT(c, prepared);
    PUT(c, has_start);
    uint64_t count = l->lay.count;
    PUT(c, count);
    put(c, l->params, count * sizeof(float));
    if (has_start)
        put(c, l->start, count * sizeof(float));
    /* The hedge's reference sample (OML_HEDGE_LOCAL), so that a loaded
     * learner continues bit-identically. */
    int32_t ref_n = l->ref_n;
    uint64_t ref_at = l->ref_at;
    PUT(c, ref_n);
    PUT(c, ref_at);
    if (ref_n > 0)
        put(c, l->ref_x, oml__learner_ref_file_floats(&l->lay, ref_n) * sizeof(float));
    /* Adam's state (OML_OPTIM_ADAM): step count, then both moments. */
    PUT(c, l->adam_t);
    if (l->adam_m) {
        put(c, l->adam_m, count * sizeof(float));
        put(c, l->adam_v, count * sizeof(float));
    }
}

int oml_model_encode(const oml_learner *l, uint8_t **buf, size_t *len)
{
    cursor c = {0};
    encode_body(l, &c); /* sizing pass */
    size_t n = c.pos + sizeof(uint32_t);
    uint8_t *b = malloc(n);
    if (b == NULL)
        return OML_ENOMEM;
    c = (cursor){.p = b};
    encode_body(l, &c);
    uint32_t crc = (uint32_t)crc32(0L, b, (uInt)c.pos);
    PUT(&c, crc);
    *buf = b;
    *len = n;
    return OML_OK;
}

int oml_model_decode(oml_learner **out, const uint8_t *buf, size_t len, oml_diag *diag)
{
    size_t head = sizeof MAGIC + 2 * sizeof(uint32_t);
    if (len < head || memcmp(buf, MAGIC, sizeof MAGIC) != 0)
        return oml_diag_set(diag, OML_EFORMAT, "model", "not an omld model file (bad magic)");
    uint32_t version;
    memcpy(&version, buf + sizeof MAGIC, sizeof version);
    if (version < 1 || version > OML_MODELFILE_VERSION)
        return oml_diag_set(diag, OML_EVERSION, "model",
                            "model file format version %u; this build reads version %u "
                            "(HINT: load it with the omld release that wrote it)",
                            version, OML_MODELFILE_VERSION);
    if (len < head + sizeof(uint32_t))
        return oml_diag_set(diag, OML_EFORMAT, "model", "model file truncated");
    uint32_t stored;
    memcpy(&stored, buf + len - sizeof stored, sizeof stored);
    if ((uint32_t)crc32(0L, buf, (uInt)(len - sizeof stored)) != stored)
        return oml_diag_set(diag, OML_EFORMAT, "model",
                            "model file checksum mismatch (truncated or altered)");

    cursor c = {.r = buf, .len = len - sizeof stored, .pos = head};
    /* Version 1 files predate the fields of CONFIG_FIELDS_V2: they were
     * all the paper's (the `paper` preset's values), and had no Adam. */
    oml_config cfg;
    oml_config_preset(&cfg, "paper", 1);
#define R(f) GET(&c, f);
    CONFIG_FIELDS(R, cfg)
    if (version >= 2) {
        CONFIG_FIELDS_V2(R, cfg)
    }
    if (version >= 3) { /* before, no offsets: the preset's 0 stays */
        CONFIG_FIELDS_V3(R, cfg)
    }
#undef R
    oml_learner_stats st;
    memset(&st, 0, sizeof st);
    GET(&c, st.updates);
    GET(&c, st.satisfied);
    GET(&c, st.utilised);
    get(&c, st.loss_ema, sizeof st.loss_ema);
    if (version >= 2) {
#define R(f) GET(&c, f);
        STATS_FIELDS_V2(R, st)
#undef R
    }
    float alpha[OML_MAX_HEADS];
    get(&c, alpha, sizeof alpha);
    uint64_t rng[4];
    get(&c, rng, sizeof rng);
    int32_t prepared, has_start;
    uint64_t count;
    GET(&c, prepared);
    GET(&c, has_start);
    GET(&c, count);
    if (c.bad)
        return oml_diag_set(diag, OML_EFORMAT, "model", "model file header truncated");

    /* Check sizes against the configuration before allocating anything. */
    if (oml_config_validate(&cfg, NULL) != OML_OK)
        return oml_diag_set(diag, OML_EFORMAT, "model", "model file holds an invalid configuration");
    oml_net_layout lay;
    oml_net_layout_init(&lay, &cfg);
    size_t params_bytes = count * sizeof(float) * (has_start ? 2 : 1);
    if (count != lay.count || c.len - c.pos < params_bytes + sizeof(int32_t) + sizeof(uint64_t))
        return oml_diag_set(diag, OML_EFORMAT, "model",
                            "model file parameter block does not match its configuration");
    /* Peek at the reference header behind the parameters to size everything first. */
    int32_t ref_n;
    uint64_t ref_at;
    memcpy(&ref_n, c.r + c.pos + params_bytes, sizeof ref_n);
    memcpy(&ref_at, c.r + c.pos + params_bytes + sizeof ref_n, sizeof ref_at);
    size_t ref_bytes = oml__learner_ref_file_floats(&lay, ref_n) * sizeof(float);
    size_t adam_bytes = version < 2 ? 0
                        : sizeof(uint64_t) +
                              (cfg.optim == OML_OPTIM_ADAM ? 2 * count * sizeof(float) : 0);
    if (ref_n < 0 || ref_n > 65536 || st.recent_n > OML_RECENT_WINDOW ||
        st.recent_hits > st.recent_n ||
        c.len - c.pos != params_bytes + sizeof ref_n + sizeof ref_at + ref_bytes + adam_bytes)
        return oml_diag_set(diag, OML_EFORMAT, "model",
                            "model file size does not match its configuration");

    oml_learner *l = NULL;
    int rc = oml_learner_create(&l, &cfg, diag);
    if (rc != OML_OK)
        return rc == OML_ENOMEM ? rc
                                : oml_diag_set(diag, OML_EFORMAT, "model",
                                               "model file holds an invalid configuration");
    if (count != l->lay.count || (has_start != 0) != (l->start != NULL)) {
        oml_learner_destroy(l);
        return oml_diag_set(diag, OML_EFORMAT, "model",
                            "model file parameter block does not match its configuration");
    }
    get(&c, l->params, count * sizeof(float));
    if (has_start)
        get(&c, l->start, count * sizeof(float));
    c.pos += sizeof ref_n + sizeof ref_at; /* read above */
    if (ref_n > 0) {
        if (oml__learner_ref_alloc(l, ref_n) != OML_OK) {
            oml_learner_destroy(l);
            return OML_ENOMEM;
        }
        get(&c, l->ref_x, oml__learner_ref_file_floats(&l->lay, ref_n) * sizeof(float));
        l->ref_at = ref_at;
    }
    if (version >= 2) {
        GET(&c, l->adam_t);
        if (l->adam_m) {
            get(&c, l->adam_m, count * sizeof(float));
            get(&c, l->adam_v, count * sizeof(float));
        }
    }
    if (c.bad || c.pos != c.len) {
        oml_learner_destroy(l);
        return oml_diag_set(diag, OML_EFORMAT, "model", "model file size does not match its contents");
    }
    l->stats = st;
    memcpy(l->alpha, alpha, sizeof alpha);
    memcpy(l->rng.s, rng, sizeof rng);
    l->prepared = prepared;
    *out = l;
    return OML_OK;
}

static int write_all(int fd, const uint8_t *b, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

int oml_model_save(const oml_learner *l, const char *path, oml_diag *diag)
{
    uint8_t *buf;
    size_t len;
    if (oml_model_encode(l, &buf, &len) != OML_OK)
        return OML_ENOMEM;
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        free(buf);
        return oml_diag_set(diag, OML_EINVAL, "path", "path too long");
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = OML_OK;
    if (fd < 0 || write_all(fd, buf, len) != 0 || fsync(fd) != 0) {
        rc = oml_diag_set(diag, OML_EIO, "path", "cannot write %s: %s", tmp, strerror(errno));
        if (fd >= 0)
            close(fd);
        unlink(tmp);
    } else if (close(fd) != 0 || rename(tmp, path) != 0) {
        rc = oml_diag_set(diag, OML_EIO, "path", "cannot replace %s: %s", path, strerror(errno));
        unlink(tmp);
    } else {
        /* Make the rename itself durable. */
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", path);
        int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
    }
    free(buf);
    return rc;
}

int oml_model_load(oml_learner **out, const char *path, oml_diag *diag)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return oml_diag_set(diag, OML_EIO, "path", "cannot open %s: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 1 << 20;
            uint8_t *nb = realloc(buf, cap);
            if (nb == NULL) {
                free(buf);
                fclose(f);
                return OML_ENOMEM;
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    int err = ferror(f);
    fclose(f);
    int rc = err ? oml_diag_set(diag, OML_EIO, "path", "cannot read %s", path)
                 : oml_model_decode(out, buf, len, diag);
    free(buf);
    return rc;
}
