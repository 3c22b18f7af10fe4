/* json.c - see json.h. Any thread; no global state. */
#include "json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- growable buffer ---- */

void omld_buf_init(omld_buf *b)
{
    memset(b, 0, sizeof *b);
}

void omld_buf_free(omld_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* Makes room for n more bytes plus the NUL; 0 or -1 (sets oom). */
static int buf_reserve(omld_buf *b, size_t n)
{
    if (b->oom)
        return -1;
    if (n > SIZE_MAX / 2 - b->len) {
        b->oom = 1;
        return -1;
    }
    size_t need = b->len + n + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

void omld_buf_append(omld_buf *b, const void *p, size_t n)
{
    if (buf_reserve(b, n) != 0)
        return;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void omld_buf_puts(omld_buf *b, const char *s)
{
    omld_buf_append(b, s, strlen(s));
}

void omld_buf_printf(omld_buf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        omld_buf_append(b, small, (size_t)n);
        return;
    }
    if (buf_reserve(b, (size_t)n) != 0)
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *omld_buf_take(omld_buf *b, size_t *len)
{
    if (b->oom) {
        omld_buf_free(b);
        return NULL;
    }
    if (!b->data && buf_reserve(b, 0) != 0)
        return NULL;
    b->data[b->len] = '\0';
    char *p = b->data;
    if (len)
        *len = b->len;
    memset(b, 0, sizeof *b);
    return p;
}

void omld_fmt_double(char *out, size_t cap, double v)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(out, cap, "%.*g", prec, v);
        if (prec == 17 || strtod(out, NULL) == v)
            return;
    }
}

void omld_fmt_float(char *out, size_t cap, float f)
{
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(out, cap, "%.*g", prec, (double)f);
        if (prec == 9 || strtof(out, NULL) == f)
            return;
    }
}

/* ---- JSON writer ---- */

void omld_json_init(omld_json *j)
{
    memset(j, 0, sizeof *j);
    omld_buf_init(&j->out);
}

void omld_json_free(omld_json *j)
{
    omld_buf_free(&j->out);
    memset(j, 0, sizeof *j);
}

static int failed(const omld_json *j)
{
    return j->err || j->out.oom;
}

/* Before any value: the comma between array elements / object members.
 * Inside an object a value must follow its key. */
static int before_value(omld_json *j)
{
    if (j->after_key) {
        j->after_key = 0;
        return 0;
    }
    if (j->depth == 0 && j->out.len > 0) { /* a second top-level value */
        j->err = 1;
        return -1;
    }
    if (j->depth > 0 && j->is_obj[j->depth - 1]) { /* a member needs its key first */
        j->err = 1;
        return -1;
    }
    if (j->depth > 0) {
        if (j->count[j->depth - 1])
            omld_buf_append(&j->out, ",", 1);
        j->count[j->depth - 1] = 1;
    }
    return 0;
}

static void open_container(omld_json *j, char c)
{
    if (failed(j))
        return;
    if (j->depth >= OMLD_JSON_MAX_DEPTH) {
        j->err = 1;
        return;
    }
    if (before_value(j) != 0)
        return;
    omld_buf_append(&j->out, &c, 1);
    j->is_obj[j->depth] = c == '{';
    j->count[j->depth++] = 0;
}

static void close_container(omld_json *j, char c)
{
    if (failed(j))
        return;
    if (j->depth == 0 || j->after_key || j->is_obj[j->depth - 1] != (c == '}')) {
        j->err = 1;
        return;
    }
    j->depth--;
    omld_buf_append(&j->out, &c, 1);
}

void omld_json_object_begin(omld_json *j) { open_container(j, '{'); }
void omld_json_object_end(omld_json *j) { close_container(j, '}'); }
void omld_json_array_begin(omld_json *j) { open_container(j, '['); }
void omld_json_array_end(omld_json *j) { close_container(j, ']'); }

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 if the byte
 * at s does not start one (RFC 3629: no overlongs, no surrogates, nothing
 * above U+10FFFF). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; /* range of the second byte */
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return len;
}

void omld_json_escape(omld_buf *b, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t run = 0; /* start of the pending run of bytes copied verbatim */
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        const char *esc = NULL;
        char ubuf[8];
        size_t step = 1;
        if (c == '"')
            esc = "\\\"";
        else if (c == '\\')
            esc = "\\\\";
        else if (c == '\n')
            esc = "\\n";
        else if (c == '\r')
            esc = "\\r";
        else if (c == '\t')
            esc = "\\t";
        else if (c == '\b')
            esc = "\\b";
        else if (c == '\f')
            esc = "\\f";
        else if (c < 0x20 || c == 0x7F) {
            snprintf(ubuf, sizeof ubuf, "\\u%04x", c);
            esc = ubuf;
        } else if (c >= 0x80) {
            step = utf8_len(s + i, n - i);
            if (step == 0) {
                esc = "\\ufffd";
                step = 1;
            }
        }
        if (esc) {
            omld_buf_append(b, s + run, i - run);
            omld_buf_puts(b, esc);
            run = i + step;
        }
        i += step;
    }
    omld_buf_append(b, s + run, n - run);
}

void omld_json_key(omld_json *j, const char *key)
{
    if (failed(j))
        return;
    if (j->depth == 0 || j->after_key || !j->is_obj[j->depth - 1]) {
        j->err = 1;
        return;
    }
    if (j->count[j->depth - 1])
        omld_buf_append(&j->out, ",", 1);
    j->count[j->depth - 1] = 1;
    omld_buf_append(&j->out, "\"", 1);
    omld_json_escape(&j->out, key, strlen(key));
    omld_buf_append(&j->out, "\":", 2);
    j->after_key = 1;
}

void omld_json_string_n(omld_json *j, const char *s, size_t n)
{
    if (failed(j))
        return;
    if (before_value(j) != 0)
        return;
    omld_buf_append(&j->out, "\"", 1);
    omld_json_escape(&j->out, s, n);
    omld_buf_append(&j->out, "\"", 1);
}

void omld_json_string(omld_json *j, const char *s)
{
    if (!s)
        omld_json_null(j);
    else
        omld_json_string_n(j, s, strlen(s));
}

static void raw_value(omld_json *j, const char *text)
{
    if (failed(j))
        return;
    if (before_value(j) != 0)
        return;
    omld_buf_puts(&j->out, text);
}

void omld_json_int(omld_json *j, int64_t v)
{
    char t[32];
    snprintf(t, sizeof t, "%lld", (long long)v);
    raw_value(j, t);
}

void omld_json_uint(omld_json *j, uint64_t v)
{
    char t[32];
    snprintf(t, sizeof t, "%llu", (unsigned long long)v);
    raw_value(j, t);
}

void omld_json_double(omld_json *j, double v)
{
    if (!isfinite(v)) {
        raw_value(j, "null");
        return;
    }
    char t[40];
    omld_fmt_double(t, sizeof t, v);
    raw_value(j, t);
}

void omld_json_float(omld_json *j, float v)
{
    if (!isfinite(v)) {
        raw_value(j, "null");
        return;
    }
    char t[40];
    omld_fmt_float(t, sizeof t, v);
    raw_value(j, t);
}

void omld_json_bool(omld_json *j, int v) { raw_value(j, v ? "true" : "false"); }
void omld_json_null(omld_json *j) { raw_value(j, "null"); }

void omld_json_kv_string(omld_json *j, const char *key, const char *s)
{
    omld_json_key(j, key);
    omld_json_string(j, s);
}

void omld_json_kv_int(omld_json *j, const char *key, int64_t v)
{
    omld_json_key(j, key);
    omld_json_int(j, v);
}

void omld_json_kv_uint(omld_json *j, const char *key, uint64_t v)
{
    omld_json_key(j, key);
    omld_json_uint(j, v);
}

void omld_json_kv_double(omld_json *j, const char *key, double v)
{
    omld_json_key(j, key);
    omld_json_double(j, v);
}

void omld_json_kv_float(omld_json *j, const char *key, float v)
{
    omld_json_key(j, key);
    omld_json_float(j, v);
}

void omld_json_kv_bool(omld_json *j, const char *key, int v)
{
    omld_json_key(j, key);
    omld_json_bool(j, v);
}

char *omld_json_finish(omld_json *j, size_t *len)
{
    if (failed(j) || j->depth != 0 || j->after_key || j->out.len == 0) {
        omld_json_free(j);
        return NULL;
    }
    char *p = omld_buf_take(&j->out, len);
    omld_json_free(j);
    return p;
}
