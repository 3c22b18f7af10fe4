/* testutil.h - small helpers shared by the unit tests. */
#ifndef OML_TESTUTIL_H
#define OML_TESTUTIL_H

#include <stddef.h>

/* Writes a fresh temporary file path (mkstemp under $TMPDIR or /tmp) into
 * buf; the file exists and is empty. Returns 0 or -1. */
int oml_test_tmpfile(char *buf, size_t cap);

/* Reads a whole file into a malloc'd buffer; returns NULL on error. */
unsigned char *oml_test_read_file(const char *path, size_t *len);

/* Writes len bytes to path, replacing it. Returns 0 or -1. */
int oml_test_write_file(const char *path, const void *buf, size_t len);

#endif
