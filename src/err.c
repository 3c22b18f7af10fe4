/* err.c - error names and the diagnostic helper. */
#include "err.h"

#include <stdio.h>
#include <string.h>

const char *oml_strerror(int err)
{
    switch (err) {
    case OML_OK: return "ok";
    case OML_EINVAL: return "invalid argument";
    case OML_ENOMEM: return "out of memory";
    case OML_ENOTFOUND: return "not found";
    case OML_EDIM: return "wrong dimension";
    case OML_ENONFINITE: return "non-finite value";
    case OML_EIO: return "i/o error";
    case OML_EFORMAT: return "bad file format";
    case OML_EVERSION: return "unsupported format version";
    case OML_EFULL: return "capacity reached";
    case OML_EEMPTY: return "no data";
    case OML_ECONFLICT: return "conflicting input";
    case OML_ECANCELED: return "cancelled";
    }
    return "unknown error";
}

int oml_diag_set(oml_diag *d, int code, const char *field, const char *fmt, ...)
{
    if (d == NULL)
        return code;
    d->code = code;
    snprintf(d->field, sizeof d->field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    va_end(ap);
    return code;
}
