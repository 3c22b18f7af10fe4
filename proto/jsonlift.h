/* jsonlift.h - the long arrays of numbers of a JSON text, read before
 * jansson reads the rest: the HTTP/JSON API's fast path for feature
 * vectors (a classify of 784 features is 784 numbers; jansson makes a
 * json_t of each and its strtod is most of a request's cost).
 *
 * omld_jsonlift_init scans a body once. Every array nested in it whose
 * elements are all numbers of the common forms (at least
 * OMLD_JSONLIFT_MIN_VALUES of them) is read into a table of doubles and
 * replaced in a copy of the text by a placeholder string ("\u0000" and the
 * array's index), so jansson parses only the small rest. pbjson.c then
 * fills a float field straight from the table and, anywhere else a
 * placeholder lands (a string field, an array of ids ...), reads the
 * array's original text with jansson and goes on as if nothing had been
 * lifted. The contract is that lifting changes nothing but speed:
 * - a value is the double jansson gives: an integer (up to 18 digits) is
 *   jansson's int64 as a double ("-0" is 0, "-0.0" is -0.0); a number
 *   with a fraction or an exponent is computed exactly when its digits
 *   (at most 19) are below 2^53 and its power of ten within 1e+-22
 *   (Clinger's exact case: what "%.9g" writes), else by strtod as jansson
 *   calls it; an array holding a number jansson refuses (too big, a leading
 *   zero ...), a non-number or bad syntax is left in the text for jansson
 *   (so its errors are jansson's);
 * - nothing is lifted when the text holds the six characters \u0000 (so a
 *   string of the request can never pass for a placeholder) or nests
 *   deeper than OMLD_JSONLIFT_MAX_DEPTH (jansson's own depth limit then
 *   sees the text as it came);
 * - the top level is never lifted.
 * The fuzz target fuzz_request checks that contract on every API input
 * (omld_api_request against omld_api_request_plain, byte for byte).
 *
 * Pure and thread-safe; the lift owns its copies. */
#ifndef OMLD_JSONLIFT_H
#define OMLD_JSONLIFT_H

#include <jansson.h>
#include <stddef.h>

#define OMLD_JSONLIFT_MIN_VALUES 8
#define OMLD_JSONLIFT_MAX_DEPTH 64

/* One lifted array: its text in the original body and its values. */
typedef struct omld_jsonlift_array {
    size_t at, len;  /* the original text [at, at + len), brackets included */
    size_t first, n; /* its values: values[first .. first + n) */
} omld_jsonlift_array;

typedef struct omld_jsonlift {
    const char *orig;  /* borrowed: the body lifted from */
    char *text;        /* the body with placeholders (NUL-terminated) */
    size_t text_len;
    omld_jsonlift_array *arrays;
    size_t n_arrays, cap_arrays;
    double *values;
    size_t n_values, cap_values;
} omld_jsonlift;

/* Lifts the arrays of body (n bytes, borrowed for the lift's life) into l:
 * 1 if any was lifted (parse l->text, l->text_len), 0 if none (l is empty:
 * parse body itself), -1 out of memory (l is empty). l is always safe to
 * free. */
int omld_jsonlift_init(omld_jsonlift *l, const char *body, size_t n);

/* Frees what l owns; a zeroed l is fine. */
void omld_jsonlift_free(omld_jsonlift *l);

/* The lifted array JSON value j stands for, or NULL (l may be NULL). */
const omld_jsonlift_array *omld_jsonlift_find(const omld_jsonlift *l, const json_t *j);

/* The array a as jansson reads its original text: a new reference, NULL
 * out of memory. */
json_t *omld_jsonlift_materialize(const omld_jsonlift *l, const omld_jsonlift_array *a);

#endif
