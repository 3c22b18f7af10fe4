/* wal.h - the write-ahead log: CRC-framed records, group commit, fsync policy.
 *
 * A log is a directory of segment files `wal-<16 hex digits>.log`, named by
 * the LSN (log sequence number: 1, 2, 3, ... across segments) of their first
 * record. Format, all integers little-endian:
 *
 *   segment header (40 bytes)
 *     "OMLWAL01" | u32 format version | u32 header size (40)
 *     u64 first LSN | u64 salt | u32 reserved (0)
 *     u32 CRC-32 of the 36 bytes before it
 *   record (17-byte header + payload), repeated
 *     u32 payload length | u32 CRC-32 | u64 LSN | u8 type | payload
 *     The CRC (zlib crc32) covers the segment's salt, then the length field,
 *     the LSN, the type and the payload: everything in the record but itself.
 *
 * The salt (random when a log is started, copied into each new segment) is
 * there because recovery looks for valid records *after* a bad one to tell
 * damage from a torn tail (below): payloads carry client bytes, and without
 * a secret in the CRC a client could embed a well-formed fake record in a
 * payload, so that a crash tearing that record made the log look damaged in
 * the middle and recovery refuse to start. (SQLite's WAL salts its frames.)
 *
 * Segments are created complete (header written to a .tmp file, fsynced,
 * renamed, directory fsynced), so a segment file always has a whole header.
 * A commit group never spans two segments; the log rolls to a new segment
 * before a commit that would take the active one past segment_bytes (a soft
 * limit: one group larger than it still goes whole into one segment). The
 * old segment is fsynced before the new one is created, whatever the
 * policy: so a segment followed by another one was durable in full.
 *
 * Recovery (oml_wal_open) reads every segment in LSN order and hands each
 * valid record with LSN > after_lsn to a callback. The first bad record
 * (short header, length past the end of the file, checksum mismatch,
 * unexpected LSN) ends the log:
 *   - if nothing valid follows it (no later segment, no valid record further
 *     on in the same file), it is a torn tail: the file is truncated there,
 *     fsynced, and the cut is reported;
 *   - otherwise it is damage in the middle of the log: OML_EFORMAT, the
 *     files are left untouched and the diag names the segment, the offset
 *     and the LSN. Set opt->salvage to keep the records before the damage
 *     instead (later segments are renamed to *.corrupt; reported).
 * Missing LSNs between segments are an error unless the checkpoint covers
 * them (all <= after_lsn).
 *
 * Durability: oml_wal_append only buffers (no system call). oml_wal_commit
 * writes the whole group with one pwrite() and then, per policy:
 *   OML_WAL_FSYNC_ALWAYS    fdatasync before commit returns;
 *   OML_WAL_FSYNC_EVERYSEC  an internal thread fdatasyncs once a second if
 *                           anything was written (joined at close); the
 *                           owner never waits for a disk flush;
 *   OML_WAL_FSYNC_NO        the kernel decides (rollover and close still
 *                           fsync).
 * Once commit returns OK the records reached the kernel, so a process crash
 * loses nothing under any policy; a power failure loses at most about one
 * second under EVERYSEC. A failed write (ENOSPC, EIO, EFBIG) returns OML_EIO,
 * truncates the segment back to the end of the last good commit and discards
 * the group: its LSNs are reused by the next append. A failed fdatasync (here
 * or in the thread) or a failed truncate-back is sticky: the kernel may have
 * dropped the data, so every later commit fails with OML_EIO until the log
 * is reopened (restart).
 *
 * Threads: an oml_wal has one owner thread, which makes every call; the
 * EVERYSEC thread is internal. */
#ifndef OML_WAL_H
#define OML_WAL_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define OML_WAL_VERSION 1u
#define OML_WAL_SEGMENT_BYTES_DEFAULT (64ull << 20)
#define OML_WAL_MAX_PAYLOAD (1u << 30)

enum oml_wal_fsync {
    OML_WAL_FSYNC_EVERYSEC = 0, /* the default, as redis's appendfsync */
    OML_WAL_FSYNC_ALWAYS = 1,
    OML_WAL_FSYNC_NO = 2
};

typedef struct oml_wal_options {
    uint64_t after_lsn;     /* replay only records with LSN > after_lsn (the checkpoint's position) */
    uint64_t segment_bytes; /* roll over past this size; 0 = OML_WAL_SEGMENT_BYTES_DEFAULT */
    int fsync;              /* enum oml_wal_fsync */
    int salvage;            /* keep the prefix before damage in the middle instead of OML_EFORMAT */
} oml_wal_options;

/* What recovery found; filled by oml_wal_open (also when it fails, as far
 * as it got, so the caller can log it). */
typedef struct oml_wal_recovery {
    uint64_t segments;      /* segment files read */
    uint64_t records;       /* valid records found (replayed or not) */
    uint64_t replayed;      /* records handed to the callback (LSN > after_lsn) */
    uint64_t first_lsn;     /* first valid LSN in the log, 0 if none */
    uint64_t last_lsn;      /* last valid LSN in the log, 0 if none */
    uint64_t next_lsn;      /* the LSN the next append will get */
    int torn;               /* 1: a bad tail was cut off (or damage salvaged) */
    int salvaged;           /* 1: damage in the middle was cut off under opt->salvage */
    int behind_checkpoint;  /* 1: the log ended before after_lsn; appends continue at after_lsn + 1 */
    uint64_t bytes_dropped; /* bytes truncated away (plus the size of segments renamed away) */
    uint64_t cut_offset;    /* offset of the cut in cut_segment */
    uint64_t cut_lsn;       /* the LSN expected at the cut */
    char cut_segment[32];   /* file name of the segment cut, "" if none */
    char reason[96];        /* why the cut: "checksum mismatch", ... */
} oml_wal_recovery;

typedef struct oml_wal oml_wal;

/* Called once per replayed record, in LSN order. payload (len bytes, not
 * aligned) is borrowed for the call. A non-zero return stops recovery and
 * is returned by oml_wal_open. If open fails, the callback may already have
 * seen a prefix of the log: discard whatever it built. */
typedef int (*oml_wal_replay_fn)(void *arg, uint8_t type, uint64_t lsn, const uint8_t *payload,
                                 size_t len);

/* Opens (creating the directory and a first segment if needed) the log in
 * dir, replays it through fn (may be NULL), cuts a torn tail, and leaves it
 * ready for appends after its last valid record. opt may be NULL (defaults).
 * report and diag may be NULL. Errors: OML_EINVAL, OML_ENOMEM, OML_EIO,
 * OML_EFORMAT (damage in the middle, foreign or overlapping segments, missing
 * records), OML_EVERSION, or the callback's non-zero value. *out is NULL on
 * error. */
int oml_wal_open(oml_wal **out, const char *dir, const oml_wal_options *opt, oml_wal_replay_fn fn,
                 void *arg, oml_wal_recovery *report, oml_diag *diag);

/* Buffers one record (copies payload) and tells its LSN. No system call.
 * The LSN is final only once oml_wal_commit succeeds; after a failed commit
 * the next append reuses it. OML_EINVAL (len > OML_WAL_MAX_PAYLOAD),
 * OML_ENOMEM, or OML_EIO if the log is broken (sticky error). */
int oml_wal_append(oml_wal *w, uint8_t type, const void *payload, size_t len, uint64_t *lsn);

/* Writes the buffered records (one write) and syncs them per policy; no-op
 * if nothing is buffered. On OML_EIO (message with errno text in diag) none
 * of the group is in the log and the caller must answer them with an error. */
int oml_wal_commit(oml_wal *w, oml_diag *diag);

/* fdatasync now, whatever the policy (e.g. before writing a checkpoint that
 * covers the log's tail). Does not commit buffered records. */
int oml_wal_sync(oml_wal *w, oml_diag *diag);

/* Deletes the oldest segments whose records are all < lsn (a durable
 * checkpoint covers them), never the active one. Returns how many were
 * deleted, or OML_EIO. */
int oml_wal_truncate_before(oml_wal *w, uint64_t lsn, oml_diag *diag);

/* The last committed LSN (0 if none: then after_lsn). */
uint64_t oml_wal_last_lsn(const oml_wal *w);
/* The last LSN known to be on stable storage (fdatasync returned). */
uint64_t oml_wal_synced_lsn(oml_wal *w);
/* Bytes in all segment files, and how many segments. */
uint64_t oml_wal_bytes(const oml_wal *w);
uint32_t oml_wal_segments(const oml_wal *w);

/* Commits what is buffered, fsyncs, stops the sync thread, closes and frees
 * (always, even on error). Returns the first error met. NULL is a no-op. */
int oml_wal_close(oml_wal *w, oml_diag *diag);

/* Test hook: the fdatasync the log calls (default: fdatasync). */
extern int (*oml__wal_fdatasync)(int fd);

#endif
