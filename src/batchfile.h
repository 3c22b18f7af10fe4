/* batchfile.h - the file of a named batch model (<data_dir>/models/NAME.omlb).
 *
 * Format: "OMLDMDL1" | u32 meta length | meta | u32 CRC-32 of the meta |
 * the oml_batch_model encoding (batch.h; it has its own CRC). The meta is
 * text, one key=value line each: name, method, variant, created_ms,
 * job_id, trained_items (in that order when written; a reader takes them
 * in any order and leaves missing ones empty or 0). Integers are
 * little-endian. Written atomically (atomic_file.h). */
#ifndef OML_BATCHFILE_H
#define OML_BATCHFILE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define OML_BATCHFILE_NAME_MAX 255
#define OML_BATCHFILE_META_MAX 1024 /* bytes of meta text at most */

/* What the file says about the model besides its weights. */
typedef struct oml_batchfile_meta {
    char name[OML_BATCHFILE_NAME_MAX + 1];
    char method[32];
    char variant[32];
    uint64_t created_ms; /* Unix ms */
    uint64_t job_id;
    uint32_t trained_items;
} oml_batchfile_meta;

/* The file's bytes for meta and a model encoding (model, len): an owned
 * buffer in *buf (free()). OML_EINVAL ("model metadata too long") or
 * OML_ENOMEM. */
int oml_batchfile_encode(const oml_batchfile_meta *meta, const uint8_t *model, size_t len,
                         uint8_t **buf, size_t *buf_len, oml_diag *diag);

/* Checks magic and the meta's CRC and fills meta; *model / *model_len
 * point into buf at the model encoding (not decoded or checked here).
 * OML_EFORMAT with diag "not a model file (bad magic)" or "damaged
 * metadata". */
int oml_batchfile_decode(const uint8_t *buf, size_t len, oml_batchfile_meta *meta,
                         const uint8_t **model, size_t *model_len, oml_diag *diag);

/* Encodes and writes path atomically (mode 0640). OML_EIO "cannot write
 * PATH: why", or as encode. */
int oml_batchfile_write(const char *path, const oml_batchfile_meta *meta, const uint8_t *model,
                        size_t len, oml_diag *diag);

/* Reads and decodes path: meta, and an owned copy of the model encoding in
 * *model (free()). OML_EIO (diag: the errno text), OML_ENOMEM, or as
 * decode. */
int oml_batchfile_read(const char *path, oml_batchfile_meta *meta, uint8_t **model,
                       size_t *model_len, oml_diag *diag);

#endif
