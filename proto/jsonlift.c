/* jsonlift.c - the long arrays of numbers of a JSON text, read before
 * jansson reads the rest (jsonlift.h). One pass over the text: strings
 * are skipped whole, brackets counted; at a nested '[' the array is read
 * as numbers if it can be, else the scan steps into it. */
#include "jsonlift.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 10^0 .. 10^22: every one an exact double. */
static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                               1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                               1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

#define PLACEHOLDER "\"\\u0000" /* then the index and a closing quote */

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* One number at p[*k] (JSON's grammar, as jansson's lexer reads it) into
 * *v, only when *v is exactly jansson's value (jsonlift.h); 0 and *k past
 * it, or -1 (not lifted: jansson reads it, or refuses it). */
static int read_number(const char *p, size_t end, size_t *k, double *v)
{
    size_t start = *k, i = start;
    int neg = 0;
    if (i < end && p[i] == '-') {
        neg = 1;
        i++;
    }
    if (i >= end || !is_digit(p[i]) || (p[i] == '0' && i + 1 < end && is_digit(p[i + 1])))
        return -1; /* no digit, or a leading zero (a syntax error to jansson) */
    uint64_t m = 0;
    int sig = 0, frac = 0, real = 0;
    for (; i < end && is_digit(p[i]); i++)
        if ((m != 0 || p[i] != '0') && ++sig <= 19)
            m = m * 10 + (uint64_t)(p[i] - '0');
    if (i < end && p[i] == '.') {
        real = 1;
        if (++i >= end || !is_digit(p[i]))
            return -1;
        for (; i < end && is_digit(p[i]); i++, frac++)
            if ((m != 0 || p[i] != '0') && ++sig <= 19)
                m = m * 10 + (uint64_t)(p[i] - '0');
    }
    int exp = 0;
    if (i < end && (p[i] == 'e' || p[i] == 'E')) {
        real = 1;
        int eneg = 0;
        if (++i < end && (p[i] == '+' || p[i] == '-'))
            eneg = p[i++] == '-';
        if (i >= end || !is_digit(p[i]))
            return -1;
        for (; i < end && is_digit(p[i]); i++) {
            if (exp > 9999)
                return -1;
            exp = exp * 10 + (p[i] - '0');
        }
        exp = eneg ? -exp : exp;
    }
    if (!real) {
        /* jansson's json_int_t (strtoll), then its double; "-0" is 0. */
        if (sig > 18)
            return -1;
        *v = (double)(neg ? -(int64_t)m : (int64_t)m);
        *k = i;
        return 0;
    }
    int e10 = exp - frac;
    if (sig <= 19 && (m == 0 || (m <= (UINT64_C(1) << 53) && e10 >= -22 && e10 <= 22))) {
        /* Clinger's exact case: m and 10^|e| are exact doubles, so one
         * multiplication or division rounds once, as strtod does. */
        double x = m == 0 ? 0.0 : e10 >= 0 ? (double)m * POW10[e10] : (double)m / POW10[-e10];
        *v = neg ? -x : x;
        *k = i;
        return 0;
    }
    /* Otherwise (17-digit round trips, large exponents) strtod itself, as
     * jansson calls it, on a copy of the token; an overflow, which jansson
     * refuses, is left to it. */
    char tok[64];
    if (i - start >= sizeof tok)
        return -1;
    memcpy(tok, p + start, i - start);
    tok[i - start] = '\0';
    char *stop;
    double x = strtod(tok, &stop);
    if (stop != tok + (i - start) || x == HUGE_VAL || x == -HUGE_VAL)
        return -1;
    *v = x;
    *k = i;
    return 0;
}

/* Room for one more element in *arr (n used of *cap, each size bytes),
 * doubling from first. 0 or -1 (out of memory; *arr unchanged). */
static int reserve(void **arr, size_t n, size_t *cap, size_t size, size_t first)
{
    if (n < *cap)
        return 0;
    size_t want = *cap ? 2 * *cap : first;
    void *p = realloc(*arr, want * size);
    if (p == NULL)
        return -1;
    *arr = p;
    *cap = want;
    return 0;
}

static int push_value(omld_jsonlift *l, double v)
{
    if (reserve((void **)&l->values, l->n_values, &l->cap_values, sizeof *l->values, 1024) != 0)
        return -1;
    l->values[l->n_values++] = v;
    return 0;
}

/* The array at p[at] == '[' read as numbers: 1 (recorded; *next past its
 * ']'), 0 (not an array of numbers, or too short: nothing recorded), -1
 * out of memory. */
static int read_array(omld_jsonlift *l, const char *p, size_t end, size_t at, size_t *next)
{
    size_t first = l->n_values, k = at + 1;
    for (;;) {
        while (k < end && is_space(p[k]))
            k++;
        double v;
        if (read_number(p, end, &k, &v) != 0)
            break;
        if (push_value(l, v) != 0)
            return -1;
        while (k < end && is_space(p[k]))
            k++;
        if (k < end && p[k] == ',') {
            k++;
            continue;
        }
        if (k < end && p[k] == ']' && l->n_values - first >= OMLD_JSONLIFT_MIN_VALUES) {
            if (reserve((void **)&l->arrays, l->n_arrays, &l->cap_arrays, sizeof *l->arrays,
                        8) != 0)
                return -1;
            l->arrays[l->n_arrays++] =
                (omld_jsonlift_array){.at = at, .len = k + 1 - at, .first = first,
                                      .n = l->n_values - first};
            *next = k + 1;
            return 1;
        }
        break;
    }
    l->n_values = first;
    return 0;
}

/* Records the arrays to lift: 0, or -1 (out of memory, or nothing may be
 * lifted: too deep). */
static int scan(omld_jsonlift *l, const char *p, size_t n)
{
    int depth = 0;
    for (size_t i = 0; i < n;) {
        char c = p[i];
        if (c == '"') {
            for (i++; i < n && p[i] != '"'; i++)
                if (p[i] == '\\')
                    i++;
            i++; /* an unterminated string ends the scan; jansson refuses it */
        } else if (c == '[' || c == '{') {
            if (c == '[' && depth > 0) {
                size_t next;
                int rc = read_array(l, p, n, i, &next);
                if (rc < 0)
                    return -1;
                if (rc > 0) {
                    i = next;
                    continue;
                }
            }
            if (++depth > OMLD_JSONLIFT_MAX_DEPTH)
                return -1;
            i++;
        } else {
            if (c == ']' || c == '}')
                depth--;
            i++;
        }
    }
    return 0;
}

int omld_jsonlift_init(omld_jsonlift *l, const char *body, size_t n)
{
    memset(l, 0, sizeof *l);
    l->orig = body;
    if (n < 6 || memmem(body, n, "\\u0000", 6) != NULL)
        return 0;
    if (scan(l, body, n) != 0 || l->n_arrays == 0) {
        omld_jsonlift_free(l);
        l->orig = body;
        return 0; /* out of memory here just means the slow path */
    }
    size_t len = n + 1;
    for (size_t a = 0; a < l->n_arrays; a++)
        len += sizeof PLACEHOLDER + 21; /* at most: the quote, the index, the quote */
    l->text = malloc(len);
    if (l->text == NULL) {
        omld_jsonlift_free(l);
        return -1;
    }
    size_t from = 0, o = 0;
    for (size_t a = 0; a < l->n_arrays; a++) {
        memcpy(l->text + o, body + from, l->arrays[a].at - from);
        o += l->arrays[a].at - from;
        o += (size_t)snprintf(l->text + o, len - o, PLACEHOLDER "%zu\"", a);
        from = l->arrays[a].at + l->arrays[a].len;
    }
    memcpy(l->text + o, body + from, n - from);
    o += n - from;
    l->text[o] = '\0';
    l->text_len = o;
    return 1;
}

void omld_jsonlift_free(omld_jsonlift *l)
{
    free(l->text);
    free(l->arrays);
    free(l->values);
    memset(l, 0, sizeof *l);
}

const omld_jsonlift_array *omld_jsonlift_find(const omld_jsonlift *l, const json_t *j)
{
    if (l == NULL || l->n_arrays == 0 || !json_is_string(j))
        return NULL;
    size_t len = json_string_length(j);
    const char *s = json_string_value(j);
    if (len < 2 || len > 21 || s[0] != '\0')
        return NULL;
    size_t idx = 0;
    for (size_t i = 1; i < len; i++) {
        if (!is_digit(s[i]))
            return NULL;
        idx = idx * 10 + (size_t)(s[i] - '0');
    }
    return idx < l->n_arrays ? &l->arrays[idx] : NULL;
}

json_t *omld_jsonlift_materialize(const omld_jsonlift *l, const omld_jsonlift_array *a)
{
    json_error_t e;
    return json_loadb(l->orig + a->at, a->len, JSON_DECODE_ANY, &e);
}
