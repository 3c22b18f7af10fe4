/* modelfile.c - versioned, checksummed learner files (see modelfile.h).
 *
 * Everything that determines the learner's future is written: configuration,
 * parameters, proximal start weights, hedge weights, counters and the RNG
 * state, so a loaded learner continues exactly as the saved one would. */
#include "modelfile.h"

#include <errno.h>
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

static void encode_body(const oml_learner *l, oml_writer *c)
{
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
    oml_writer c = oml_writer_counting();
    encode_body(l, &c); /* sizing pass */
    size_t n = c.pos + sizeof(uint32_t);
    uint8_t *b = malloc(n);
    if (b == NULL)
        return OML_ENOMEM;
    c = oml_writer_into(b, n);
    encode_body(l, &c);
    oml_put_u32(&c, (uint32_t)crc32(0L, b, (uInt)c.pos));
    *buf = b;
    *len = n;
    return OML_OK;
}

int oml_model_decode(oml_learner **out, const uint8_t *buf, size_t len, oml_diag *diag)
{
    size_t head = sizeof MAGIC + 2 * sizeof(uint32_t);
    if (len < head || memcmp(buf, MAGIC, sizeof MAGIC) != 0)
        return oml_diag_set(diag, OML_EFORMAT, "model", "not an omld model file (bad magic)");
    uint32_t version = oml_le32_load(buf + sizeof MAGIC);
    if (version < 1 || version > OML_MODELFILE_VERSION)
        return oml_diag_set(diag, OML_EVERSION, "model",
                            "model file format version %u; this build reads version %u "
                            "(HINT: load it with the omld release that wrote it)",
                            version, OML_MODELFILE_VERSION);
    if (len < head + sizeof(uint32_t))
        return oml_diag_set(diag, OML_EFORMAT, "model", "model file truncated");
    uint32_t stored = oml_le32_load(buf + len - sizeof stored);
    if ((uint32_t)crc32(0L, buf, (uInt)(len - sizeof stored)) != stored)
        return oml_diag_set(diag, OML_EFORMAT, "model",
                            "model file checksum mismatch (truncated or altered)");

    oml_reader c = oml_reader_of(buf, len - sizeof stored);
    c.pos = head;
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
    oml_get_f32s(&c, st.loss_ema, OML_MAX_HEADS);
    if (version >= 2) {
#define R(f) GET(&c, f);
        STATS_FIELDS_V2(R, st)
#undef R
    }
    float alpha[OML_MAX_HEADS];
    oml_get_f32s(&c, alpha, OML_MAX_HEADS);
    uint64_t rng[4];
    oml_get_le(&c, rng, sizeof rng[0], 4);
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
    ref_n = (int32_t)oml_le32_load(c.p + c.pos + params_bytes);
    ref_at = oml_le64_load(c.p + c.pos + params_bytes + sizeof ref_n);
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
    oml_get_f32s(&c, l->params, count);
    if (has_start)
        oml_get_f32s(&c, l->start, count);
    c.pos += sizeof ref_n + sizeof ref_at; /* read above */
    if (ref_n > 0) {
        if (oml__learner_ref_alloc(l, ref_n) != OML_OK) {
            oml_learner_destroy(l);
            return OML_ENOMEM;
        }
        oml_get_f32s(&c, l->ref_x, oml__learner_ref_file_floats(&l->lay, ref_n));
        l->ref_at = ref_at;
    }
    if (version >= 2) {
        GET(&c, l->adam_t);
        if (l->adam_m) {
            oml_get_f32s(&c, l->adam_m, count);
            oml_get_f32s(&c, l->adam_v, count);
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
