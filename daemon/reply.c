/* reply.c - building, packing and freeing one Response (see reply.h). */
#include "reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "frame.h"

/* Arena: a singly linked list of malloc'd chunks, newest first. Replies are
 * small and short-lived, so one malloc per allocation is fine; the list is
 * only there so that one free releases everything. */
typedef struct chunk {
    struct chunk *next;
    max_align_t data[];
} chunk;

void omld_reply_init(omld_reply *r, uint64_t request_id)
{
    memset(r, 0, sizeof *r);
    omld__response__init(&r->msg);
    omld__status__init(&r->status);
    r->msg.request_id = request_id;
    r->msg.status = &r->status;
}

void omld_reply_free(omld_reply *r)
{
    chunk *c = r->_arena;
    while (c) {
        chunk *next = c->next;
        free(c);
        c = next;
    }
    r->_arena = NULL;
    if (r->after && r->after_free)
        r->after_free(r->after);
    r->after = NULL;
}

void *omld_reply_alloc(omld_reply *r, size_t bytes)
{
    chunk *c = calloc(1, sizeof(chunk) + (bytes ? bytes : 1));
    if (c == NULL)
        return NULL;
    c->next = r->_arena;
    r->_arena = c;
    return c->data;
}

char *omld_reply_strdup(omld_reply *r, const char *s, size_t len)
{
    char *p = omld_reply_alloc(r, len + 1);
    if (p && len)
        memcpy(p, s, len);
    return p;
}

int omld_reply_error(omld_reply *r, Omld__Status__Code code, const char *field, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof msg) {
        n = sizeof msg - 1;
        while (n > 0 && ((unsigned char)msg[n] & 0xc0) == 0x80)
            n--; /* never cut inside a UTF-8 sequence */
        msg[n] = '\0';
    }
    r->msg.body_case = OMLD__RESPONSE__BODY__NOT_SET;
    r->status.code = code;
    char *m = omld_reply_strdup(r, msg, (size_t)n);
    char *f = field ? omld_reply_strdup(r, field, strlen(field)) : NULL;
    r->status.message = m ? m : (char *)protobuf_c_empty_string;
    r->status.field = f ? f : (char *)protobuf_c_empty_string;
    return code;
}

const char *omld_reply_quote(char *buf, size_t cap, const char *s, size_t len)
{
    size_t o = 0, shown = len > 40 ? 40 : len;
    buf[o++] = '"';
    for (size_t i = 0; i < shown && o + 8 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            buf[o++] = (char)c;
        else
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
    }
    if (shown < len && o + 4 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

Omld__Status__Code omld_status_from_oml(int oml_err)
{
    switch (oml_err) {
    case OML_OK: return OMLD__STATUS__CODE__OK;
    case OML_EINVAL: return OMLD__STATUS__CODE__INVALID_ARGUMENT;
    case OML_ENOTFOUND: return OMLD__STATUS__CODE__NOT_FOUND;
    case OML_EDIM: return OMLD__STATUS__CODE__WRONG_DIMENSION;
    case OML_ENONFINITE: return OMLD__STATUS__CODE__NON_FINITE;
    case OML_EFULL: return OMLD__STATUS__CODE__RESOURCE_EXHAUSTED;
    case OML_ECONFLICT: return OMLD__STATUS__CODE__CONFLICT;
    case OML_EEMPTY: return OMLD__STATUS__CODE__UNAVAILABLE;
    default: return OMLD__STATUS__CODE__INTERNAL;
    }
}

static int pack_msg(const Omld__Response *m, uint8_t **out, size_t *out_len)
{
    size_t n = omld__response__get_packed_size(m);
    uint8_t *buf = malloc(OML_FRAME_HEADER_BYTES + n);
    if (buf == NULL)
        return -1;
    omld__response__pack(m, buf + OML_FRAME_HEADER_BYTES);
    oml_frame_write_header(buf, (uint32_t)n);
    *out = buf;
    *out_len = OML_FRAME_HEADER_BYTES + n;
    return 0;
}

int omld_reply_pack(omld_reply *r, uint32_t max_payload, uint8_t **out, size_t *out_len)
{
    if (omld__response__get_packed_size(&r->msg) > max_payload)
        omld_reply_error(r, OMLD__STATUS__CODE__RESOURCE_EXHAUSTED, NULL,
                         "the answer is larger than max_frame_bytes (%u); ask for less", max_payload);
    return pack_msg(&r->msg, out, out_len);
}

int omld_reply_pack_error(uint64_t request_id, uint64_t model_version, Omld__Status__Code code,
                          const char *field, const char *message, uint8_t **out, size_t *out_len)
{
    Omld__Response m;
    Omld__Status st;
    omld__response__init(&m);
    omld__status__init(&st);
    st.code = code;
    st.field = (char *)(field ? field : "");
    st.message = (char *)(message ? message : "");
    m.request_id = request_id;
    m.model_version = model_version;
    m.status = &st;
    return pack_msg(&m, out, out_len);
}
