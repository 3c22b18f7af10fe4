/* wirecheck.c - see wirecheck.h. */
#include "wirecheck.h"

#include <stdio.h>
#include <string.h>

#define MAX_DEPTH 32

/* Reads a base-128 varint; 0 on success. */
static int varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return -1;
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

static int walk(const uint8_t *p, const uint8_t *end, const ProtobufCMessageDescriptor *desc,
                char *path, size_t cap, size_t at, int depth)
{
    if (depth > MAX_DEPTH)
        return -1;
    while (p < end) {
        uint64_t key, n;
        if (varint(&p, end, &key) != 0)
            return -1;
        unsigned wire = (unsigned)(key & 7);
        uint64_t tag = key >> 3;
        switch (wire) {
        case 0: /* varint */
            if (varint(&p, end, &n) != 0)
                return -1;
            break;
        case 1: /* 64-bit */
            if (end - p < 8)
                return -1;
            p += 8;
            break;
        case 5: /* 32-bit */
            if (end - p < 4)
                return -1;
            p += 4;
            break;
        case 2: { /* length-delimited: string, bytes, message or packed */
            if (varint(&p, end, &n) != 0 || n > (uint64_t)(end - p))
                return -1;
            const ProtobufCFieldDescriptor *f =
                tag <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(desc, (unsigned)tag) : NULL;
            if (f && (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE)) {
                int w = snprintf(path + at, at < cap ? cap - at : 0, "%s%s", at ? "." : "", f->name);
                size_t next = w > 0 && at + (size_t)w < cap ? at + (size_t)w : at;
                if (f->type == PROTOBUF_C_TYPE_STRING) {
                    if (memchr(p, 0, (size_t)n) != NULL)
                        return 1;
                } else {
                    int rc = walk(p, p + n, f->descriptor, path, cap, next, depth + 1);
                    if (rc != 0)
                        return rc;
                }
                if (at < cap)
                    path[at] = '\0';
            }
            p += n;
            break;
        }
        default: /* groups (3, 4) are not proto3 */
            return -1;
        }
    }
    return 0;
}

int oml_wire_find_nul_string(const uint8_t *buf, size_t len, const ProtobufCMessageDescriptor *desc,
                             char *path, size_t path_cap)
{
    if (path_cap == 0)
        return -1;
    path[0] = '\0';
    if (len == 0)
        return 0;
    return walk(buf, buf + len, desc, path, path_cap, 0, 0);
}
