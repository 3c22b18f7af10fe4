/* testutil.h - small helpers shared by the unit tests. */
#ifndef OML_TESTUTIL_H
#define OML_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "snapshot.h"

/* Writes a fresh temporary file path (mkstemp under $TMPDIR or /tmp) into
 * buf; the file exists and is empty. Returns 0 or -1. */
int oml_test_tmpfile(char *buf, size_t cap);

/* Creates a fresh temporary directory (mkdtemp of $TMPDIR/NAME.XXXXXX or
 * /tmp/...) and writes its path into buf. Returns 0 or -1. */
int oml_test_tmpdir(char *buf, size_t cap, const char *name);

/* Removes a directory and everything below it (a test's temporary
 * directory). Returns 0 or -1. */
int oml_test_rmtree(const char *dir);

/* Reads a whole file into a malloc'd buffer; returns NULL on error. */
unsigned char *oml_test_read_file(const char *path, size_t *len);

/* Writes len bytes to path, replacing it. Returns 0 or -1. */
int oml_test_write_file(const char *path, const void *buf, size_t len);

/* A snapshot of the paper preset's shape (layers, dim, hidden, emb) with
 * parameters p (lay.count floats, borrowed) or, if p is NULL, standard
 * normal ones from seed (mu stays 0), and hedge weights alpha (layers+1).
 * Returns an owned snapshot or NULL. */
oml_snapshot *oml_test_snapshot(int32_t layers, int32_t dim, int32_t hidden, int32_t emb,
                                const float *p, const float *alpha, uint64_t seed);

#endif
