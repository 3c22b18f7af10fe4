/* modelfile.c - versioned, checksummed learner files (see modelfile.h).
 *
 * Everything that determines the learner's future is written: configuration,
 * parameters, proximal start weights, hedge weights, counters and the RNG
 * state, so a loaded learner continues exactly as the saved one would. */
#include "modelfile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <zlib.h>

#include "atomic_file.h"
#include "bytes.h"

static const char MAGIC[8] = {'O', 'M', 'L', 'M', 'O', 'D', 'E', 'L'};

#define PUT(c, v) OML_PUT(c, v)
#define GET(c, v) OML_GET(c, v)

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

static void encode_body(const void *obj, oml_writer *c)
{
    const oml_learner *l = obj;
    uint32_t version = OML_MODELFILE_VERSION, reserved = 0;
    oml_put_bytes(c, MAGIC, sizeof MAGIC);
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
    oml_put_f32s(c, st->loss_ema, OML_MAX_HEADS);
#define W(f) PUT(c, f);
    STATS_FIELDS_V2(W, (*st))
#undef W
    oml_put_f32s(c, l->alpha, OML_MAX_HEADS);
    oml_put_le(c, l->rng.s, sizeof l->rng.s[0], sizeof l->rng.s / sizeof l->rng.s[0]);
    int32_t prepared = l->prepared, has_start = l->start != NULL;
    PUT(c, prepared);
    PUT(c, has_start);
    PUT(c, l->start_init);
    oml_put_f32s(c, l->start_error, 2);
    PUT(c, l->cfg.basis); /* since version 5: the input basis */
    uint64_t count = l->lay.count;
    PUT(c, count);
    oml_put_f32s(c, l->params, count);
    if (has_start)
        oml_put_f32s(c, l->start, count);
    /* The hedge's reference sample (OML_HEDGE_LOCAL), so that a loaded
     * learner continues bit-identically. */
    int32_t ref_n = l->ref_n;
    uint64_t ref_at = l->ref_at;
    PUT(c, ref_n);
    PUT(c, ref_at);
    if (ref_n > 0)
        oml_put_f32s(c, l->ref_x, oml__learner_ref_file_floats(&l->lay, ref_n));
    /* Adam's state (OML_OPTIM_ADAM): step count, then both moments. */
    PUT(c, l->adam_t);
    if (l->adam_m) {
        oml_put_f32s(c, l->adam_m, count);
        oml_put_f32s(c, l->adam_v, count);
    }
}

int oml_model_encode(const oml_learner *l, uint8_t **buf, size_t *len)
{
    return oml_encode_with_crc32(encode_body, l, buf, len);
}

#define FILE_HEAD (sizeof MAGIC + 2 * sizeof(uint32_t)) /* magic, version, reserved */

/* What a file says before its parameter blocks: configuration, counters,
 * hedge weights, RNG state, the block sizes and the reference header. */
typedef struct model_head {
    oml_config cfg;
    oml_learner_stats st;
    float alpha[OML_MAX_HEADS];
    uint64_t rng[4];
    int32_t prepared, has_start, ref_n, start_init;
    float start_error[2];
    uint64_t count, ref_at;
} model_head;

/* The envelope: magic, a format version this build reads, and the CRC of
 * everything before the trailing u32. */
static int check_envelope(const uint8_t *buf, size_t len, uint32_t *version, oml_diag *diag)
{
    if (len < FILE_HEAD || memcmp(buf, MAGIC, sizeof MAGIC) != 0)
        return oml_diag_set(diag, OML_EFORMAT, "model", "not an omld model file (bad magic)");
    *version = oml_le32_load(buf + sizeof MAGIC);
    if (*version < 1 || *version > OML_MODELFILE_VERSION)
        return oml_diag_set(diag, OML_EVERSION, "model",
                            "model file format version %u; this build reads version %u "
                            "(HINT: load it with the omld release that wrote it)",
                            *version, OML_MODELFILE_VERSION);
    if (len < FILE_HEAD + sizeof(uint32_t))
        return oml_diag_set(diag, OML_EFORMAT, "model", "model file truncated");
    uint32_t stored = oml_le32_load(buf + len - sizeof stored);
    if ((uint32_t)crc32(0L, buf, (uInt)(len - sizeof stored)) != stored)
        return oml_diag_set(diag, OML_EFORMAT, "model",
                            "model file checksum mismatch (truncated or altered)");
    return OML_OK;
}

/* Reads the fields before the parameter blocks, as encode_body wrote them. */
static int read_head(oml_reader *c, uint32_t version, model_head *h, oml_diag *diag)
{
    /* Version 1 files predate the fields of CONFIG_FIELDS_V2: they were
     * all the paper's (the `paper` preset's values), and had no Adam. */
    oml_config_preset(&h->cfg, "paper", 1);
#define R(f) GET(c, f);
    CONFIG_FIELDS(R, h->cfg)
    if (version >= 2) {
        CONFIG_FIELDS_V2(R, h->cfg)
    }
    if (version >= 3) { /* before, no offsets: the preset's 0 stays */
        CONFIG_FIELDS_V3(R, h->cfg)
    }
#undef R
    GET(c, h->st.updates);
    GET(c, h->st.satisfied);
    GET(c, h->st.utilised);
    oml_get_f32s(c, h->st.loss_ema, OML_MAX_HEADS);
    if (version >= 2) {
#define R(f) GET(c, f);
        STATS_FIELDS_V2(R, h->st)
#undef R
    }
    oml_get_f32s(c, h->alpha, OML_MAX_HEADS);
    oml_get_le(c, h->rng, sizeof h->rng[0], 4);
    GET(c, h->prepared);
    GET(c, h->has_start);
    h->start_init = h->cfg.init; /* before version 4: the configured start, unjudged */
    h->start_error[0] = h->start_error[1] = NAN;
    if (version >= 4) {
        GET(c, h->start_init);
        oml_get_f32s(c, h->start_error, 2);
    }
    if (version >= 5) /* before, no input basis: the preset's 0 stays */
        GET(c, h->cfg.basis);
    GET(c, h->count);
    if (c->bad)
        return oml_diag_set(diag, OML_EFORMAT, "model", "model file header truncated");
    return OML_OK;
}

/* Checks the sizes of the rest against the configuration before anything
 * is allocated, peeking at the reference header behind the parameters. */
static int check_sizes(const oml_reader *c, uint32_t version, model_head *h, oml_diag *diag)
{
    if (oml_config_validate(&h->cfg, NULL) != OML_OK || h->start_init < OML_INIT_RANDOM ||
        h->start_init > OML_INIT_AUTO)
        return oml_diag_set(diag, OML_EFORMAT, "model", "model file holds an invalid configuration");
    oml_net_layout lay;
    oml_net_layout_init(&lay, &h->cfg);
    size_t params_bytes = h->count * sizeof(float) * (h->has_start ? 2 : 1);
    if (h->count != lay.count ||
        c->len - c->pos < params_bytes + sizeof(int32_t) + sizeof(uint64_t))
        return oml_diag_set(diag, OML_EFORMAT, "model",
                            "model file parameter block does not match its configuration");
    h->ref_n = (int32_t)oml_le32_load(c->p + c->pos + params_bytes);
    h->ref_at = oml_le64_load(c->p + c->pos + params_bytes + sizeof h->ref_n);
    size_t ref_bytes = oml__learner_ref_file_floats(&lay, h->ref_n) * sizeof(float);
    size_t adam_bytes = version < 2 ? 0
                        : sizeof(uint64_t) + (h->cfg.optim == OML_OPTIM_ADAM
                                                  ? 2 * h->count * sizeof(float)
                                                  : 0);
    if (h->ref_n < 0 || h->ref_n > 65536 || h->st.recent_n > OML_RECENT_WINDOW ||
        h->st.recent_hits > h->st.recent_n ||
        c->len - c->pos !=
            params_bytes + sizeof h->ref_n + sizeof h->ref_at + ref_bytes + adam_bytes)
        return oml_diag_set(diag, OML_EFORMAT, "model",
                            "model file size does not match its configuration");
    return OML_OK;
}

/* Reads the blocks into the learner made from the configuration: the
 * parameters, the proximal start, the hedge's reference sample and Adam's
 * state. The caller destroys l on an error. */
static int read_blocks(oml_reader *c, uint32_t version, const model_head *h, oml_learner *l,
                       oml_diag *diag)
{
    if (h->count != l->lay.count || (h->has_start != 0) != (l->start != NULL))
        return oml_diag_set(diag, OML_EFORMAT, "model",
                            "model file parameter block does not match its configuration");
    oml_get_f32s(c, l->params, h->count);
    if (h->has_start)
        oml_get_f32s(c, l->start, h->count);
    c->pos += sizeof h->ref_n + sizeof h->ref_at; /* read by check_sizes */
    if (h->ref_n > 0) {
        if (oml__learner_ref_alloc(l, h->ref_n) != OML_OK)
            return OML_ENOMEM;
        oml_get_f32s(c, l->ref_x, oml__learner_ref_file_floats(&l->lay, h->ref_n));
        l->ref_at = h->ref_at;
    }
    if (version >= 2) {
        GET(c, l->adam_t);
        if (l->adam_m) {
            oml_get_f32s(c, l->adam_m, h->count);
            oml_get_f32s(c, l->adam_v, h->count);
        }
    }
    if (c->bad || c->pos != c->len)
        return oml_diag_set(diag, OML_EFORMAT, "model", "model file size does not match its contents");
    return OML_OK;
}

int oml_model_decode(oml_learner **out, const uint8_t *buf, size_t len, oml_diag *diag)
{
    uint32_t version = 0;
    int rc = check_envelope(buf, len, &version, diag);
    if (rc != OML_OK)
        return rc;
    oml_reader c = oml_reader_of(buf, len - sizeof(uint32_t));
    c.pos = FILE_HEAD;
    model_head h;
    memset(&h, 0, sizeof h);
    if ((rc = read_head(&c, version, &h, diag)) != OML_OK ||
        (rc = check_sizes(&c, version, &h, diag)) != OML_OK)
        return rc;

    oml_learner *l = NULL;
    rc = oml_learner_create(&l, &h.cfg, diag);
    if (rc != OML_OK)
        return rc == OML_ENOMEM ? rc
                                : oml_diag_set(diag, OML_EFORMAT, "model",
                                               "model file holds an invalid configuration");
    if ((rc = read_blocks(&c, version, &h, l, diag)) != OML_OK) {
        oml_learner_destroy(l);
        return rc;
    }
    l->stats = h.st;
    memcpy(l->alpha, h.alpha, sizeof h.alpha);
    memcpy(l->rng.s, h.rng, sizeof h.rng);
    l->prepared = h.prepared;
    l->start_init = h.start_init;
    memcpy(l->start_error, h.start_error, sizeof h.start_error);
    *out = l;
    return OML_OK;
}

int oml_model_save(const oml_learner *l, const char *path, oml_diag *diag)
{
    uint8_t *buf;
    size_t len;
    if (oml_model_encode(l, &buf, &len) != OML_OK)
        return OML_ENOMEM;
    int rc = OML_OK;
    enum oml_atomic_stage stage;
    struct iovec part = {buf, len};
    if (oml_atomic_write(path, &part, 1, 0644, &stage) != 0 && stage != OML_ATOMIC_DIR) {
        if (stage == OML_ATOMIC_RENAME)
            rc = oml_diag_set(diag, OML_EIO, "path", "cannot replace %s: %s", path,
                              strerror(errno));
        else
            rc = oml_diag_set(diag, OML_EIO, "path", "cannot write %s.tmp: %s", path,
                              strerror(errno));
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
