/* err.h - error codes and diagnostics of liboml.
 *
 * Every fallible function returns 0 on success or a negative OML_E* code.
 * Functions that validate input also fill an oml_diag naming the offending
 * field, so the RPC layer can answer with code + field + message. The library
 * never prints and never exits. */
#ifndef OML_ERR_H
#define OML_ERR_H

#include <stdarg.h>

enum oml_err {
    OML_OK = 0,
    OML_EINVAL = -1,    /* an argument is out of range or malformed */
    OML_ENOMEM = -2,    /* an allocation failed */
    OML_ENOTFOUND = -3, /* an id, item or model does not exist */
    OML_EDIM = -4,      /* a vector has the wrong dimension */
    OML_ENONFINITE = -5,/* a value is NaN or infinite */
    OML_EIO = -6,       /* a read or write failed (errno kept in the diag) */
    OML_EFORMAT = -7,   /* a file is truncated, corrupt or not ours */
    OML_EVERSION = -8,  /* a file was written by another format version */
    OML_EFULL = -9,     /* a bounded container is at its capacity */
    OML_EEMPTY = -10,   /* the operation needs data that is not there yet */
    OML_ECONFLICT = -11,/* the input contradicts state (e.g. sim and dis) */
    OML_ECANCELED = -12 /* a long operation was cancelled on request */
};

/* Returns a static, human-readable name for an error code. */
const char *oml_strerror(int err);

/* A diagnostic filled by validating functions; may be NULL everywhere. */
typedef struct oml_diag {
    int code;
    char field[48];
    char msg[512];          /* room for two paths and a hint: never cut in practice */
} oml_diag;

/* Fills d (if not NULL) and returns code, so callers can write
 *   return oml_diag_set(d, OML_EDIM, "features", "got %d values, want %d", n, dim); */
int oml_diag_set(oml_diag *d, int code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
