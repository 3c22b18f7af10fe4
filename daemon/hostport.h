/* hostport.h - the one parser of "HOST:PORT" addresses (options, the RPC
 * listener, the HTTP listener).
 *
 * HOST is a name, an IPv4 address or a bracketed IPv6 address ("[::1]:7600";
 * the brackets are removed); it may be empty (the caller decides what an
 * empty host means). PORT is decimal, 0..65535 (0: any free port). The last
 * ':' separates them, so an unbracketed IPv6 address is read as a host
 * ending before its last group. */
#ifndef OMLD_HOSTPORT_H
#define OMLD_HOSTPORT_H

#include <stddef.h>

/* Splits s into host (NUL-terminated, at most cap - 1 bytes) and *port.
 * 0, or -1 with a sentence naming s in err. */
int omld_hostport_split(const char *s, char *host, size_t cap, int *port, char *err,
                        size_t errlen);

#endif
