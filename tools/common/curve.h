/* curve.h - --curve: the test error at points of one stream (issue 11).
 *
 * "0,1000,10000" asks for the error before any triplet, after 1,000 and
 * after 10,000 triplets of the same run; the stream is as long as the last
 * point. oml-eval and omlctl eval parse and print it with these functions,
 * so both JSON lines carry the same "curve" field. */
#ifndef OML_CURVE_H
#define OML_CURVE_H

#include <stdint.h>
#include <stdio.h>

#include "err.h"

#define OML_CURVE_MAX 64

/* Parses a comma-separated list of triplet counts into pts (OML_CURVE_MAX):
 * each an integer >= 0, strictly increasing, the last >= 2 (the tools' least
 * stream) and <= 2^30.
 * Returns the number of points, or OML_EINVAL with diag saying why. */
int oml_curve_parse(const char *s, int32_t *pts, oml_diag *diag);

/* Writes ,"curve":[{"constraints":N,"error_rate":E},...] (E to 5 decimals). */
void oml_curve_print_json(FILE *f, const int32_t *pts, const double *err, int n);

#endif
