/* pbjson.c - protobuf messages <-> JSON from protobuf-c's descriptors (see
 * pbjson.h for the mapping). */
#include "pbjson.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- base64 */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *omld_base64_encode(const uint8_t *p, size_t n)
{
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        *o++ = B64[v >> 18];
        *o++ = B64[(v >> 12) & 63];
        *o++ = i + 1 < n ? B64[(v >> 6) & 63] : '=';
        *o++ = i + 2 < n ? B64[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

static int b64_value(char c)
{
    const char *at = c ? strchr(B64, c) : NULL;
    return at ? (int)(at - B64) : -1;
}

int omld_base64_decode(const char *s, size_t len, uint8_t **out, size_t *out_len)
{
    while (len > 0 && s[len - 1] == '=')
        len--;
    if (len % 4 == 1)
        return -1;
    uint8_t *buf = malloc(len / 4 * 3 + 3), *o = buf;
    if (buf == NULL)
        return -1;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64_value(s[i]);
        if (v < 0) {
            free(buf);
            return -1;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            *o++ = (uint8_t)(acc >> bits);
        }
    }
    *out = buf;
    *out_len = (size_t)(o - buf);
    return 0;
}

/* -------------------------------------------------------------- reading */

typedef struct reader {
    omld_pbjson_error *err;
    const omld_jsonlift *lift; /* NULL: nothing was lifted */
    char path[256];
    size_t path_len;
    int depth;
} reader;

static void refuse(reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(reader *r, const char *fmt, ...)
{
    snprintf(r->err->field, sizeof r->err->field, "%s", r->path);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err->message, sizeof r->err->message, fmt, ap);
    va_end(ap);
}

/* Appends ".name" or "[i]" to the path; returns the length to restore. */
static size_t path_push(reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static size_t path_push(reader *r, const char *fmt, ...)
{
    size_t was = r->path_len;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(r->path + was, sizeof r->path - was, fmt, ap);
    va_end(ap);
    r->path_len = n < 0 ? was : was + (size_t)n >= sizeof r->path ? sizeof r->path - 1 : was + (size_t)n;
    return was;
}

/* Appends "[i]": path_push's most frequent use, without a printf. */
static size_t path_push_index(reader *r, size_t i)
{
    char digits[24];
    size_t nd = 0;
    do {
        digits[nd++] = (char)('0' + i % 10);
        i /= 10;
    } while (i > 0);
    size_t was = r->path_len;
    if (was + nd + 2 >= sizeof r->path)
        return path_push(r, "[%zu]", i); /* truncated as path_push truncates */
    char *o = r->path + was;
    *o++ = '[';
    while (nd > 0)
        *o++ = digits[--nd];
    *o++ = ']';
    *o = '\0';
    r->path_len = (size_t)(o - r->path);
    return was;
}

static void path_pop(reader *r, size_t was)
{
    r->path_len = was;
    r->path[was] = '\0';
}

/* "model_version" -> "modelVersion" (the canonical JSON name). */
static int camel_equals(const char *name, const char *key)
{
    for (; *name; name++) {
        if (*name == '_' && name[1]) {
            name++;
            if (*key++ != (name[0] >= 'a' && name[0] <= 'z' ? name[0] - 32 : name[0]))
                return 0;
        } else if (*key++ != *name) {
            return 0;
        }
    }
    return *key == '\0';
}

static const ProtobufCFieldDescriptor *field_named(const ProtobufCMessageDescriptor *d,
                                                   const char *key)
{
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, key);
    for (unsigned i = 0; f == NULL && i < d->n_fields; i++)
        if (camel_equals(d->fields[i].name, key))
            f = &d->fields[i];
    return f;
}

static size_t scalar_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    default:
        return 4;
    }
}

/* An integer of JSON j (a number without fraction, or a decimal string),
 * within [lo, hi] (signed) or [0, uhi] (unsigned). */
static int read_integer(reader *r, const json_t *j, int is_signed, int64_t lo, int64_t hi,
                        uint64_t uhi, void *out, size_t size)
{
    int64_t sv = 0;
    uint64_t uv = 0;
    int neg = 0;
    if (json_is_integer(j)) {
        sv = (int64_t)json_integer_value(j);
        neg = sv < 0;
        uv = (uint64_t)sv;
    } else if (json_is_real(j)) {
        double v = json_real_value(j);
        if (v != floor(v) || fabs(v) >= 9.2e18) {
            refuse(r, "expected an integer, got %g", v);
            return -1;
        }
        sv = (int64_t)v;
        neg = sv < 0;
        uv = (uint64_t)sv;
    } else if (json_is_string(j)) {
        const char *s = json_string_value(j), *p = s;
        neg = *p == '-';
        p += neg;
        if (*p == '\0' || strlen(s) > 20) {
            refuse(r, "expected an integer, got the string \"%.40s\"", s);
            return -1;
        }
        for (; *p; p++) {
            if (*p < '0' || *p > '9' || uv > (UINT64_MAX - (uint64_t)(*p - '0')) / 10) {
                refuse(r, "expected an integer, got the string \"%.40s\"", s);
                return -1;
            }
            uv = uv * 10 + (uint64_t)(*p - '0');
        }
        if (neg && uv > (uint64_t)INT64_MAX + 1) {
            refuse(r, "integer %.40s out of range", s);
            return -1;
        }
        sv = neg ? (int64_t)(0 - uv) : (int64_t)uv;
    } else {
        refuse(r, "expected an integer");
        return -1;
    }
    if (is_signed ? (neg ? sv < lo : uv > (uint64_t)hi) : (neg || uv > uhi)) {
        refuse(r, "integer out of range [%lld, %llu]", is_signed ? (long long)lo : 0LL,
               is_signed ? (unsigned long long)hi : (unsigned long long)uhi);
        return -1;
    }
    if (size == 8) {
        if (is_signed)
            memcpy(out, &sv, 8);
        else
            memcpy(out, &uv, 8);
    } else {
        int32_t s32 = (int32_t)sv;
        uint32_t u32 = (uint32_t)uv;
        if (is_signed)
            memcpy(out, &s32, 4);
        else
            memcpy(out, &u32, 4);
    }
    return 0;
}

static int read_real(reader *r, const json_t *j, double *v)
{
    if (json_is_number(j)) {
        *v = json_number_value(j);
        return 0;
    }
    const char *s = json_string_value(j);
    if (s && strcmp(s, "NaN") == 0)
        *v = NAN;
    else if (s && strcmp(s, "Infinity") == 0)
        *v = INFINITY;
    else if (s && strcmp(s, "-Infinity") == 0)
        *v = -INFINITY;
    else {
        refuse(r, "expected a number");
        return -1;
    }
    return 0;
}

static ProtobufCMessage *read_message(reader *r, const ProtobufCMessageDescriptor *d,
                                      const json_t *j);

/* Lifted array a as jansson reads its original text (jsonlift.h): where
 * it is not a float field's values, the reading goes on as if nothing had
 * been lifted. NULL (refused) out of memory. */
static json_t *materialize(reader *r, const omld_jsonlift_array *a)
{
    json_t *arr = omld_jsonlift_materialize(r->lift, a);
    if (arr == NULL)
        refuse(r, "out of memory");
    return arr;
}

/* One value of field f from j into out (an element of a repeated field or
 * the field itself). */
static int read_value(reader *r, const ProtobufCFieldDescriptor *f, const json_t *j, void *out)
{
    const omld_jsonlift_array *a = omld_jsonlift_find(r->lift, j);
    if (a != NULL && f->type != PROTOBUF_C_TYPE_MESSAGE) {
        /* An array where a scalar goes: refused as if never lifted. */
        json_t *arr = materialize(r, a);
        int rc = arr ? read_value(r, f, arr, out) : -1;
        json_decref(arr);
        return rc;
    }
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        return read_integer(r, j, 1, INT32_MIN, INT32_MAX, 0, out, 4);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        return read_integer(r, j, 1, INT64_MIN, INT64_MAX, 0, out, 8);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        return read_integer(r, j, 0, 0, 0, UINT32_MAX, out, 4);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return read_integer(r, j, 0, 0, 0, UINT64_MAX, out, 8);
    case PROTOBUF_C_TYPE_FLOAT: {
        double v;
        if (read_real(r, j, &v) != 0)
            return -1;
        float fv = (float)v; /* beyond float's range: infinite, refused by the daemon's checks */
        memcpy(out, &fv, sizeof fv);
        return 0;
    }
    case PROTOBUF_C_TYPE_DOUBLE:
        return read_real(r, j, (double *)out);
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(j)) {
            refuse(r, "expected true or false");
            return -1;
        }
        *(protobuf_c_boolean *)out = json_is_true(j);
        return 0;
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumDescriptor *ed = f->descriptor;
        const ProtobufCEnumValue *ev = NULL;
        if (json_is_string(j))
            ev = protobuf_c_enum_descriptor_get_value_by_name(ed, json_string_value(j));
        else if (json_is_integer(j) && json_integer_value(j) >= INT32_MIN &&
                 json_integer_value(j) <= INT32_MAX)
            ev = protobuf_c_enum_descriptor_get_value(ed, (int)json_integer_value(j));
        if (ev == NULL) {
            refuse(r, "expected one of %s's values by name (e.g. \"%s\")", ed->short_name,
                   ed->n_values > 1 ? ed->values[1].name : ed->values[0].name);
            return -1;
        }
        *(int *)out = ev->value;
        return 0;
    }
    case PROTOBUF_C_TYPE_STRING: {
        if (!json_is_string(j)) {
            refuse(r, "expected a string");
            return -1;
        }
        size_t n = json_string_length(j);
        const char *s = json_string_value(j);
        if (memchr(s, '\0', n) != NULL) {
            refuse(r, "a string must not contain a NUL character (\\u0000)");
            return -1;
        }
        char *copy = malloc(n + 1);
        if (copy == NULL) {
            refuse(r, "out of memory");
            return -1;
        }
        memcpy(copy, s, n + 1);
        *(char **)out = copy;
        return 0;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        ProtobufCBinaryData *b = out;
        if (!json_is_string(j) ||
            omld_base64_decode(json_string_value(j), json_string_length(j), &b->data, &b->len) != 0) {
            refuse(r, "expected a base64 string");
            return -1;
        }
        return 0;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        ProtobufCMessage *m = read_message(r, f->descriptor, j);
        if (m == NULL)
            return -1;
        *(ProtobufCMessage **)out = m;
        return 0;
    }
    }
    refuse(r, "unsupported field type");
    return -1;
}

static int read_repeated(reader *r, const ProtobufCFieldDescriptor *f, const json_t *j,
                         ProtobufCMessage *m)
{
    if (!json_is_array(j)) {
        refuse(r, "expected an array");
        return -1;
    }
    size_t n = json_array_size(j), size = scalar_size(f->type);
    size_t *count = (size_t *)((char *)m + f->quantifier_offset);
    void **arr = (void **)((char *)m + f->offset);
    if (n == 0)
        return 0;
    *arr = calloc(n, size);
    if (*arr == NULL) {
        refuse(r, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        size_t was = path_push_index(r, i);
        if (read_value(r, f, json_array_get(j, i), (char *)*arr + i * size) != 0)
            return -1;
        path_pop(r, was);
        *count = i + 1; /* what is filled is what gets freed */
    }
    return 0;
}

/* A lifted array of numbers (jsonlift.h) into repeated float or double
 * field f: what read_repeated makes of the same numbers. */
static int read_lifted(reader *r, const ProtobufCFieldDescriptor *f, const omld_jsonlift_array *a,
                       ProtobufCMessage *m)
{
    size_t *count = (size_t *)((char *)m + f->quantifier_offset);
    void **arr = (void **)((char *)m + f->offset);
    const double *v = r->lift->values + a->first;
    *arr = calloc(a->n, scalar_size(f->type));
    if (*arr == NULL) {
        refuse(r, "out of memory");
        return -1;
    }
    if (f->type == PROTOBUF_C_TYPE_DOUBLE) {
        memcpy(*arr, v, a->n * sizeof *v);
    } else {
        float *out = *arr;
        for (size_t i = 0; i < a->n; i++)
            out[i] = (float)v[i]; /* beyond float's range: infinite, as read_value makes it */
    }
    *count = a->n;
    return 0;
}

static int read_field(reader *r, const ProtobufCFieldDescriptor *f, const json_t *j,
                      ProtobufCMessage *m)
{
    const omld_jsonlift_array *a = omld_jsonlift_find(r->lift, j);
    if (a != NULL) {
        if (f->label == PROTOBUF_C_LABEL_REPEATED &&
            (f->type == PROTOBUF_C_TYPE_FLOAT || f->type == PROTOBUF_C_TYPE_DOUBLE))
            return read_lifted(r, f, a, m);
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            json_t *arr = materialize(r, a);
            int rc = arr ? read_repeated(r, f, arr, m) : -1;
            json_decref(arr);
            return rc;
        }
        /* a single value: read_value reads the placeholder */
    }
    if (f->label == PROTOBUF_C_LABEL_REPEATED)
        return read_repeated(r, f, j, m);
    void *at = (char *)m + f->offset;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        uint32_t *which = (uint32_t *)((char *)m + f->quantifier_offset);
        if (*which != 0) {
            refuse(r, "only one member of a oneof may be set");
            return -1;
        }
        if (read_value(r, f, j, at) != 0)
            return -1;
        *which = f->id;
        return 0;
    }
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_MESSAGE &&
        f->type != PROTOBUF_C_TYPE_STRING)
        *(protobuf_c_boolean *)((char *)m + f->quantifier_offset) = 1;
    return read_value(r, f, j, at);
}

/* Shorthands for what people type most: an item named by its id ("a") or
 * given as its vector ([0.1, ...]) where an ItemRef goes, and a Vector as
 * its values. Each reads as the object {field: value}. */
static const struct shorthand {
    const char *message;
    json_type type;
    const char *field;
} SHORTHANDS[] = {
    {"omld.ItemRef", JSON_STRING, "id"},
    {"omld.ItemRef", JSON_ARRAY, "vector"},
    {"omld.Vector", JSON_ARRAY, "values"},
};

static const char *shorthand_field(const ProtobufCMessageDescriptor *d, json_type type)
{
    for (size_t i = 0; i < sizeof SHORTHANDS / sizeof *SHORTHANDS; i++)
        if (type == SHORTHANDS[i].type && strcmp(d->name, SHORTHANDS[i].message) == 0)
            return SHORTHANDS[i].field;
    return NULL;
}

static ProtobufCMessage *read_message(reader *r, const ProtobufCMessageDescriptor *d,
                                      const json_t *j)
{
    const omld_jsonlift_array *a = omld_jsonlift_find(r->lift, j);
    const char *field = shorthand_field(d, a ? JSON_ARRAY : json_typeof(j));
    if (field != NULL) {
        json_t *wrapped = json_pack("{s:O}", field, (json_t *)j);
        ProtobufCMessage *m = wrapped ? read_message(r, d, wrapped) : NULL;
        json_decref(wrapped);
        return m;
    }
    if (a != NULL) { /* an array where an object goes: refused as if never lifted */
        json_t *arr = materialize(r, a);
        ProtobufCMessage *m = arr ? read_message(r, d, arr) : NULL;
        json_decref(arr);
        return m;
    }
    if (!json_is_object(j)) {
        refuse(r, "expected an object (%s)", d->short_name);
        return NULL;
    }
    if (++r->depth > OMLD_PBJSON_MAX_DEPTH) {
        refuse(r, "nested deeper than %d", OMLD_PBJSON_MAX_DEPTH);
        return NULL;
    }
    ProtobufCMessage *m = malloc(d->sizeof_message);
    if (m == NULL) {
        refuse(r, "out of memory");
        return NULL;
    }
    protobuf_c_message_init(d, m);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)j, key, v) {
        size_t was = path_push(r, ".%s", key);
        const ProtobufCFieldDescriptor *f = field_named(d, key);
        if (f == NULL) {
            refuse(r, "unknown field \"%.60s\" in %s", key, d->short_name);
            protobuf_c_message_free_unpacked(m, NULL);
            return NULL;
        }
        if (!json_is_null(v) && read_field(r, f, v, m) != 0) {
            protobuf_c_message_free_unpacked(m, NULL);
            return NULL;
        }
        path_pop(r, was);
    }
    r->depth--;
    return m;
}

ProtobufCMessage *omld_pbjson_read(const ProtobufCMessageDescriptor *desc, const json_t *j,
                                   const char *root, omld_pbjson_error *err)
{
    return omld_pbjson_read_lifted(desc, j, NULL, root, err);
}

ProtobufCMessage *omld_pbjson_read_lifted(const ProtobufCMessageDescriptor *desc, const json_t *j,
                                          const omld_jsonlift *lift, const char *root,
                                          omld_pbjson_error *err)
{
    reader r = {.err = err, .lift = lift};
    memset(err, 0, sizeof *err);
    path_push(&r, "%s", root);
    return read_message(&r, desc, j);
}

/* -------------------------------------------------------------- writing */

/* A JSON string of s (n bytes): invalid UTF-8 becomes U+FFFD. */
static json_t *write_string(const char *s, size_t n)
{
    json_t *j = json_stringn(s, n);
    if (j != NULL)
        return j;
    char *clean = malloc(3 * n + 1), *o = clean;
    if (clean == NULL)
        return NULL;
    for (size_t i = 0; i < n;) {
        /* Take the longest prefix jansson accepts as one character. */
        size_t len = (unsigned char)s[i] < 0x80   ? 1
                     : (unsigned char)s[i] >= 0xf0 ? 4
                     : (unsigned char)s[i] >= 0xe0 ? 3
                     : (unsigned char)s[i] >= 0xc0 ? 2
                                                   : 0;
        json_t *t = len && i + len <= n ? json_stringn(s + i, len) : NULL;
        if (t != NULL && s[i] != '\0') {
            memcpy(o, s + i, len);
            o += len;
            i += len;
        } else {
            memcpy(o, "\xef\xbf\xbd", 3);
            o += 3;
            i += 1;
        }
        json_decref(t);
    }
    j = json_stringn(clean, (size_t)(o - clean));
    free(clean);
    return j;
}

static json_t *write_real(double v)
{
    if (isnan(v))
        return json_string("NaN");
    if (isinf(v))
        return json_string(v > 0 ? "Infinity" : "-Infinity");
    return json_real(v);
}

static json_t *write_value(const ProtobufCFieldDescriptor *f, const void *at)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        return json_integer(*(const int32_t *)at);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        return json_integer(*(const int64_t *)at);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        return json_integer(*(const uint32_t *)at);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: {
        uint64_t v = *(const uint64_t *)at;
        if (v <= (uint64_t)INT64_MAX)
            return json_integer((json_int_t)v);
        char text[24];
        snprintf(text, sizeof text, "%llu", (unsigned long long)v);
        return json_string(text);
    }
    case PROTOBUF_C_TYPE_FLOAT:
        return write_real(*(const float *)at);
    case PROTOBUF_C_TYPE_DOUBLE:
        return write_real(*(const double *)at);
    case PROTOBUF_C_TYPE_BOOL:
        return json_boolean(*(const protobuf_c_boolean *)at);
    case PROTOBUF_C_TYPE_ENUM: {
        int v = *(const int *)at;
        const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(f->descriptor, v);
        return ev ? json_string(ev->name) : json_integer(v);
    }
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)at;
        return s ? write_string(s, strlen(s)) : json_string("");
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = at;
        char *text = omld_base64_encode(b->data, b->len);
        json_t *j = text ? json_string(text) : NULL;
        free(text);
        return j;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *m = *(ProtobufCMessage *const *)at;
        return m ? omld_pbjson_write(m) : json_null();
    }
    }
    return json_null();
}

static json_t *write_repeated(const ProtobufCFieldDescriptor *f, const ProtobufCMessage *m)
{
    size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);
    const char *arr = *(char *const *)((const char *)m + f->offset);
    size_t size = scalar_size(f->type);
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, write_value(f, arr + i * size)) != 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

json_t *omld_pbjson_write(const ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    json_t *o = json_object();
    for (unsigned i = 0; o && i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const char *base = (const char *)m;
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            if (*(const uint32_t *)(base + f->quantifier_offset) != f->id)
                continue;
        } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_MESSAGE &&
                   f->type != PROTOBUF_C_TYPE_STRING &&
                   !*(const protobuf_c_boolean *)(base + f->quantifier_offset)) {
            continue;
        }
        if (f->type == PROTOBUF_C_TYPE_MESSAGE && f->label != PROTOBUF_C_LABEL_REPEATED &&
            *(ProtobufCMessage *const *)(base + f->offset) == NULL)
            continue;
        json_t *v = f->label == PROTOBUF_C_LABEL_REPEATED ? write_repeated(f, m)
                                                          : write_value(f, base + f->offset);
        if (v == NULL || json_object_set_new(o, f->name, v) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}
