/* curve.c - parsing and printing --curve (curve.h). */
#include "curve.h"

#include <errno.h>
#include <stdlib.h>

int oml_curve_parse(const char *s, int32_t *pts, oml_diag *diag)
{
    int n = 0;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno != 0 || v < 0 || v > (1LL << 30) || (*end != ',' && *end != '\0'))
            return oml_diag_set(diag, OML_EINVAL, "curve",
                                "'%s': want triplet counts like 0,1000,10000", s);
        if (n == OML_CURVE_MAX)
            return oml_diag_set(diag, OML_EINVAL, "curve", "more than %d points", OML_CURVE_MAX);
        if (n > 0 && v <= pts[n - 1])
            return oml_diag_set(diag, OML_EINVAL, "curve", "'%s': points must increase", s);
        pts[n++] = (int32_t)v;
        if (*end == '\0')
            break;
        p = end + 1;
    }
    if (pts[n - 1] < 2)
        return oml_diag_set(diag, OML_EINVAL, "curve", "'%s': the last point must be >= 2", s);
    return n;
}

void oml_curve_print_json(FILE *f, const int32_t *pts, const double *err, int n)
{
    fprintf(f, ",\"curve\":[");
    for (int i = 0; i < n; i++)
        fprintf(f, "%s{\"constraints\":%d,\"error_rate\":%.5f}", i ? "," : "", pts[i], err[i]);
    fprintf(f, "]");
}
