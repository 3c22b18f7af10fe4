/* modelfile.h - saving and loading a learner, bit-exactly.
 *
 * Format (all integers and floats little-endian):
 *   "OMLMODEL" | u32 format version | u32 reserved (0)
 *   configuration (every oml_config field) | counters | hedge weights
 *   RNG state | flags | i32 start taken | f32 x 2 its judged errors
 *   u64 parameter count | parameters | [start weights]
 *   i32 reference items | u64 update of their last embedding | [reference]
 *   u64 Adam steps | [Adam first moments | second moments]
 *   u32 CRC-32 of everything before it
 * Version 2 added the mini-batch / rehearsal / Adam fields of the
 * configuration, the step, rehearsal and recent-window counters and the
 * Adam section; version 3 the standardised input and head offsets (the
 * config's standardize and offset; the input's 1/sd follows mu, the b(l)
 * blocks end the parameters and b(0) at the start ends the reference).
 * Version 4 added the start the auto start took and the leave-one-out
 * errors that chose it (learner.h). Versions 1-3 are still read (1 as the
 * paper's settings, 1-2 without offsets, 1-3 with the configured start).
 * A file of another format version is refused with OML_EVERSION, a truncated
 * or altered one with OML_EFORMAT; the diag says which and what to do.
 * Saving writes a temporary file, fsyncs it and renames it over the target,
 * so a crash leaves either the old file or the new one. */
#ifndef OML_MODELFILE_H
#define OML_MODELFILE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "learner.h"

#define OML_MODELFILE_VERSION 5u

/* Serialises l into a malloc'd buffer (*buf, *len), owned by the caller. */
int oml_model_encode(const oml_learner *l, uint8_t **buf, size_t *len);
/* Rebuilds a learner from an encoded buffer (borrowed). */
int oml_model_decode(oml_learner **out, const uint8_t *buf, size_t len, oml_diag *diag);

/* Atomic save to path; OML_EIO with errno text in the diag. */
int oml_model_save(const oml_learner *l, const char *path, oml_diag *diag);
int oml_model_load(oml_learner **out, const char *path, oml_diag *diag);

#endif
