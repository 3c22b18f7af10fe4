/* snapshot_codec.c - the exported model file (format in snapshot.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "bytes.h"
#include "snapshot.h"

static const char MAGIC[8] = "OMLSNAP";

enum { FLAG_SCALE = 1, FLAG_BIAS = 2, FLAG_BASIS = 4 }; /* BASIS: B (emb, dim) after the scale */

static void encode_body(const void *obj, oml_writer *w)
{
    const oml_snapshot *s = obj;
    oml_put_bytes(w, MAGIC, sizeof MAGIC);
    oml_put_u32(w, OML_SNAPSHOT_FILE_VERSION);
    oml_put_u32(w, (uint32_t)s->lay.dim);
    oml_put_u32(w, (uint32_t)s->lay.layers);
    oml_put_u32(w, (uint32_t)s->lay.hidden);
    oml_put_u32(w, (uint32_t)s->lay.emb);
    oml_put_u32(w, (s->lay.has_scale ? FLAG_SCALE : 0u) | (s->lay.has_bias ? FLAG_BIAS : 0u) |
                       (s->lay.has_basis ? FLAG_BASIS : 0u));
    oml_put_u64(w, s->version);
    oml_put_u64(w, s->updates);
    oml_put_f32s(w, s->alpha, (size_t)s->lay.layers + 1);
    oml_put_u64(w, (uint64_t)s->lay.count);
    oml_put_f32s(w, s->params, s->lay.count);
}

int oml_snapshot_encode(const oml_snapshot *s, uint8_t **buf, size_t *len)
{
    return oml_encode_with_crc32(encode_body, s, buf, len);
}

static int all_finite(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

#define BAD(...) oml_diag_set(diag, OML_EFORMAT, "model", __VA_ARGS__)

int oml_snapshot_decode(oml_snapshot **out, const uint8_t *buf, size_t len, oml_diag *diag)
{
    *out = NULL;
    if (len < sizeof MAGIC + 4 || memcmp(buf, MAGIC, sizeof MAGIC) != 0)
        return BAD("not an exported omld model (bad magic)");
    uint32_t version = oml_le32_load(buf + sizeof MAGIC);
    if (version != OML_SNAPSHOT_FILE_VERSION)
        return oml_diag_set(diag, OML_EVERSION, "model",
                            "exported model format version %u; this build reads version %u",
                            version, OML_SNAPSHOT_FILE_VERSION);
    if (len < sizeof MAGIC + 8 ||
        (uint32_t)crc32(0L, buf, (uInt)(len - 4)) != oml_le32_load(buf + len - 4))
        return BAD("checksum mismatch (truncated or altered)");
    oml_reader r = oml_reader_of(buf, len - 4);
    r.pos = sizeof MAGIC + 4;
    uint32_t dim = oml_get_u32(&r), layers = oml_get_u32(&r), hidden = oml_get_u32(&r);
    uint32_t emb = oml_get_u32(&r), flags = oml_get_u32(&r);
    uint64_t model_version = oml_get_u64(&r), updates = oml_get_u64(&r);
    if (r.bad)
        return BAD("truncated header");
    /* The shape is checked before the layout is computed from it. */
    if (dim < 1 || dim > (1u << 24) || layers > OML_MAX_LAYERS || hidden < 1 || hidden > 65536 ||
        emb < 1 || emb > 65536 || (flags & ~(uint32_t)(FLAG_SCALE | FLAG_BIAS | FLAG_BASIS)) != 0 ||
        ((flags & FLAG_BASIS) && emb >= dim))
        return BAD("shape out of bounds (dim %u, layers %u, hidden %u, emb %u, flags %u)", dim,
                   layers, hidden, emb, flags);
    oml_config cfg;
    oml_config_preset(&cfg, "default", (int32_t)dim);
    cfg.layers = (int32_t)layers;
    cfg.hidden = (int32_t)hidden;
    cfg.emb = (int32_t)emb;
    cfg.standardize = (flags & FLAG_SCALE) != 0;
    cfg.offset = (flags & FLAG_BIAS) ? 1.0f : 0.0f;
    cfg.basis = (flags & FLAG_BASIS) != 0;
    oml_net_layout lay;
    oml_net_layout_init(&lay, &cfg);
    float alpha[OML_MAX_LAYERS + 1] = {0};
    oml_get_f32s(&r, alpha, layers + 1);
    uint64_t count = oml_get_u64(&r);
    if (r.bad || count != lay.count || oml_reader_left(&r) != count * sizeof(float))
        return BAD("parameter block of %llu floats where the shape needs %zu, in %zu bytes",
                   (unsigned long long)count, lay.count, oml_reader_left(&r));
    if (!all_finite(alpha, layers + 1))
        return BAD("a head weight is not finite");
    float *params = malloc(count * sizeof *params + 1);
    if (params == NULL)
        return OML_ENOMEM;
    oml_get_f32s(&r, params, count);
    int rc = OML_OK;
    if (!all_finite(params, count))
        rc = BAD("a parameter is not finite");
    else if ((*out = oml_snapshot_create(&cfg, params, alpha, model_version, updates)) == NULL)
        rc = OML_ENOMEM;
    free(params);
    return rc;
}
