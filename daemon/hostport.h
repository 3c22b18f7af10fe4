/* hostport.h - the one parser of "HOST:PORT" addresses (options, the RPC
 * listener, the HTTP listener), and socket addresses resolved and printed.
 *
 * HOST is a name, an IPv4 address or a bracketed IPv6 address ("[::1]:7600";
 * the brackets are removed); it may be empty (the caller decides what an
 * empty host means). PORT is decimal, 0..65535 (0: any free port). The last
 * ':' separates them, so an unbracketed IPv6 address is read as a host
 * ending before its last group. */
#ifndef OMLD_HOSTPORT_H
#define OMLD_HOSTPORT_H

#include <stddef.h>
#include <sys/socket.h>

/* Splits s into host (NUL-terminated, at most cap - 1 bytes) and *port.
 * 0, or -1 with a sentence naming s in err. */
int omld_hostport_split(const char *s, char *host, size_t cap, int *port, char *err,
                        size_t errlen);

/* Resolves "HOST:PORT" (HOST may be an IPv4/IPv6 literal, "[v6]" or a
 * name; resolved once, synchronously: startup only). 0 or -1 with err. */
int omld_addr_resolve(const char *host_port, struct sockaddr_storage *out, char *err,
                      size_t errlen);
/* "HOST:PORT" ("[v6]:PORT" for IPv6) into buf. */
void omld_addr_format(const struct sockaddr_storage *a, char *buf, size_t len);
/* 1 if a is a loopback address (127.0.0.0/8, ::1). */
int omld_addr_is_loopback(const struct sockaddr_storage *a);

#endif
