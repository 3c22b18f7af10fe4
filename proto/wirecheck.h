/* wirecheck.h - what protobuf-c does not check: NUL bytes inside strings.
 *
 * protobuf-c decodes a string field into a NUL-terminated C string and keeps
 * no length, so a client's id "a\0b" would arrive as "a": a DeleteItems of
 * "a\0b" would delete item "a". This walks a serialized message guided by
 * its descriptor (nested messages included, unknown fields skipped) and
 * finds the first string field whose bytes contain a NUL, so the daemon can
 * refuse the request by name before decoding it. Pure; thread-safe. */
#ifndef OML_WIRECHECK_H
#define OML_WIRECHECK_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* Returns 1 and writes the field's path (e.g. "delete_items.ids") into path
 * if a string field of buf (len bytes, a message of type desc) contains a
 * NUL byte; 0 if none does; -1 if buf is not well-formed wire data as far
 * as the walk can tell (the decoder will then refuse it anyway). */
int oml_wire_find_nul_string(const uint8_t *buf, size_t len, const ProtobufCMessageDescriptor *desc,
                             char *path, size_t path_cap);

#endif
