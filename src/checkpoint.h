/* checkpoint.h - checkpoint files: the full state at one log position.
 *
 * A checkpoint is one file `checkpoint-<LSN as 16 hex digits>.ckpt` in the
 * data directory, holding tagged sections (the caller decides what: model,
 * store, closure, counters) and the write-ahead log position it covers:
 *
 *   "OMLCKPT1" | u32 format version | u32 sections | u64 lsn
 *   sections: u32 tag | u64 length | bytes
 *   u32 CRC-32 of everything before it
 *
 * Little-endian. Writing is atomic (temporary file, fsync, rename, fsync of
 * the directory), so a crash leaves the old checkpoint or the new one, never
 * half of one. Loading tries the newest file first and falls back to older
 * ones when a file is corrupt, truncated or of a newer format, reporting
 * each one it refused and why. Writers keep the newest `keep` files, so
 * there is always a previous good checkpoint to fall back to.
 *
 * Thread: the functions share no state; one writer per directory. */
#ifndef OML_CHECKPOINT_H
#define OML_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define OML_CKPT_VERSION 1u
#define OML_CKPT_MAX_SECTIONS 64

#define OML_CKPT_MAX_PARTS 4

/* One piece of a section being written (borrowed). */
typedef struct oml_ckpt_part {
    const uint8_t *data;
    uint64_t len;
} oml_ckpt_part;

typedef struct oml_ckpt_section {
    uint32_t tag;
    const uint8_t *data; /* borrowed (write) or pointing into the loaded file (load) */
    uint64_t len;
    /* Write only: with n_parts > 0 (at most OML_CKPT_MAX_PARTS) the section's
     * bytes are these pieces in order, and data and len are not read. A
     * caller writes large state where it lies instead of copying it into
     * one buffer first (the store's features: 3.1 GB at a million items of
     * 784). The file is the same as for their concatenation. */
    const oml_ckpt_part *parts;
    int n_parts;
} oml_ckpt_section;

/* Writes dir/checkpoint-<lsn>.ckpt atomically, then deletes all but the
 * newest `keep` (>= 1) checkpoints. path_out (may be NULL) gets the path,
 * *bytes (may be NULL) the file size. OML_EIO with errno text (e.g. disk
 * full; nothing is left behind but a removed temporary file), OML_EINVAL. */
int oml_ckpt_write(const char *dir, uint64_t lsn, const oml_ckpt_section *sections, int n,
                   int keep, char *path_out, size_t path_cap, uint64_t *bytes, oml_diag *diag);

typedef struct oml_ckpt {
    uint64_t lsn;
    int n;
    oml_ckpt_section s[OML_CKPT_MAX_SECTIONS];
    uint8_t *_file;          /* the whole file; sections point into it */
    size_t _mapped;          /* _file is a read-only mapping of this many bytes (0:
                                malloc'd): its pages are the file's, so a decoder that
                                is done with a section can give them back
                                (oml_bigmem_read_done) instead of holding a second
                                copy of the state until the load ends */
    char path[512];
} oml_ckpt;

/* Called for every checkpoint file that was refused (newest first), with
 * the reason; may be NULL. */
typedef void (*oml_ckpt_refused_fn)(void *arg, const char *path, const char *why);

/* Loads the newest good checkpoint of dir into *out. OML_EEMPTY if there is
 * none at all (a fresh directory: not an error for the caller), OML_EFORMAT
 * if files exist but none is good (the diag says so; the caller must not
 * silently start empty over them), OML_EIO. */
int oml_ckpt_load_newest(const char *dir, oml_ckpt *out, oml_ckpt_refused_fn refused, void *arg,
                         oml_diag *diag);

/* Loads one file (tests, tools). */
int oml_ckpt_load_file(const char *path, oml_ckpt *out, oml_diag *diag);

/* The section with tag, or NULL. */
const oml_ckpt_section *oml_ckpt_find(const oml_ckpt *c, uint32_t tag);

void oml_ckpt_free(oml_ckpt *c); /* accepts a zeroed one */

#endif
