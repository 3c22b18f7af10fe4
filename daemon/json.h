/* json.h - a growable text buffer and a JSON writer on top of it.
 *
 * Output only. The writer inserts commas itself: call key() before each
 * member of an object, then exactly one value (or a nested begin/end).
 * Strings are escaped so that any byte sequence yields valid JSON: quote,
 * backslash and control bytes are escaped, invalid UTF-8 bytes become
 * U+FFFD (written as \ufffd). Doubles that are not finite are written as
 * null. Errors (out of memory, nesting deeper than OMLD_JSON_MAX_DEPTH,
 * unbalanced end) are sticky: later calls do nothing and finish() returns
 * NULL. Not thread-safe; one writer per thread. */
#ifndef OMLD_JSON_H
#define OMLD_JSON_H

#include <stddef.h>
#include <stdint.h>

/* ---- growable buffer ---- */

typedef struct omld_buf {
    char *data;   /* NUL-terminated while len > 0 or after any append */
    size_t len, cap;
    int oom;      /* sticky: an append failed */
} omld_buf;

void omld_buf_init(omld_buf *b);
void omld_buf_free(omld_buf *b);  /* accepts a zeroed buffer */
void omld_buf_append(omld_buf *b, const void *p, size_t n);
void omld_buf_puts(omld_buf *b, const char *s);
void omld_buf_printf(omld_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Returns the owned NUL-terminated text (length in *len, may be NULL) and
 * leaves b empty; NULL (and b freed) if any append failed. */
char *omld_buf_take(omld_buf *b, size_t *len);

/* Shortest "%.*g" text (15..17 digits) that reads back as v; v must be
 * finite. Writes at most cap bytes (32 is always enough). */
void omld_fmt_double(char *out, size_t cap, double v);

/* The same for a float: the shortest "%.*g" (6..9 digits) that reads back
 * as f, so 0.3f prints as 0.3, not 0.30000001192092896. */
void omld_fmt_float(char *out, size_t cap, float f);

/* ---- JSON writer ---- */

#define OMLD_JSON_MAX_DEPTH 32

typedef struct omld_json {
    omld_buf out;
    int depth;                       /* open containers */
    int err;                         /* sticky misuse (depth, balance) */
    int after_key;                   /* a key was written, its value is next */
    uint8_t count[OMLD_JSON_MAX_DEPTH]; /* per level: nonzero once a member exists */
    uint8_t is_obj[OMLD_JSON_MAX_DEPTH];/* per level: object (1) or array (0) */
} omld_json;

void omld_json_init(omld_json *j);
void omld_json_free(omld_json *j); /* accepts a zeroed writer */

void omld_json_object_begin(omld_json *j);
void omld_json_object_end(omld_json *j);
void omld_json_array_begin(omld_json *j);
void omld_json_array_end(omld_json *j);
void omld_json_key(omld_json *j, const char *key);

void omld_json_string(omld_json *j, const char *s);           /* NULL writes null */
void omld_json_string_n(omld_json *j, const char *s, size_t n); /* any bytes */
void omld_json_int(omld_json *j, int64_t v);
void omld_json_uint(omld_json *j, uint64_t v);
void omld_json_double(omld_json *j, double v);                /* non-finite: null */
void omld_json_float(omld_json *j, float v);                  /* non-finite: null */
void omld_json_bool(omld_json *j, int v);
void omld_json_null(omld_json *j);

/* key + value in one call. */
void omld_json_kv_string(omld_json *j, const char *key, const char *s);
void omld_json_kv_int(omld_json *j, const char *key, int64_t v);
void omld_json_kv_uint(omld_json *j, const char *key, uint64_t v);
void omld_json_kv_double(omld_json *j, const char *key, double v);
void omld_json_kv_float(omld_json *j, const char *key, float v);
void omld_json_kv_bool(omld_json *j, const char *key, int v);

/* Appends the escaped string body (no surrounding quotes) to b. */
void omld_json_escape(omld_buf *b, const char *s, size_t n);

/* Returns the owned text (length in *len, may be NULL) if every container
 * was closed and nothing failed; otherwise NULL. Either way j is freed. */
char *omld_json_finish(omld_json *j, size_t *len);

#endif
