/* atomic_file.h - replacing a file so that a crash leaves either the old
 * file or the whole new one, never a part (redis rdb.c's recipe): write
 * PATH.tmp, fsync it, rename it over PATH, fsync the directory so the
 * rename itself is durable. Used by checkpoints, learner and batch model
 * files and the daemon's address file. */
#ifndef OML_ATOMIC_FILE_H
#define OML_ATOMIC_FILE_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Where oml_atomic_write failed, so that each caller keeps its messages. */
enum oml_atomic_stage {
    OML_ATOMIC_OK = 0,
    OML_ATOMIC_CREATE, /* opening PATH.tmp */
    OML_ATOMIC_WRITE,  /* writing, fsync or close of PATH.tmp */
    OML_ATOMIC_RENAME, /* PATH.tmp over PATH */
    OML_ATOMIC_DIR     /* fsync of the directory: PATH is already the new file */
};

/* Writes the n parts one after another as PATH (created with mode, less
 * the umask). 0, or -1 with errno and *stage (may be NULL) saying where;
 * PATH.tmp is removed on every failure before the rename. */
int oml_atomic_write(const char *path, const struct iovec *parts, int n, mode_t mode,
                     enum oml_atomic_stage *stage);

/* fsync of a directory (after a rename or unlink in it). 0 or -1, errno. */
int oml_fsync_dir(const char *dir);

/* write() until all n bytes are written, across EINTR and short writes.
 * 0 or -1 with errno. */
int oml_write_all(int fd, const void *p, size_t n);

#endif
