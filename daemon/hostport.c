/* hostport.c - "HOST:PORT" (see hostport.h). */
#include "hostport.h"

#include <ctype.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int omld_hostport_split(const char *s, char *host, size_t cap, int *port, char *err,
                        size_t errlen)
{
    const char *colon = strrchr(s, ':');
    if (colon == NULL) {
        snprintf(err, errlen, "'%s' is not HOST:PORT", s);
        return -1;
    }
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (!isdigit((unsigned char)colon[1]) || *end != '\0' || p > 65535) {
        snprintf(err, errlen, "'%s': the port is not a number in 0..65535", s);
        return -1;
    }
    const char *h = s;
    size_t hl = (size_t)(colon - s);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl >= cap) {
        snprintf(err, errlen, "'%s': the host is too long", s);
        return -1;
    }
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (int)p;
    return 0;
}

/* ------------------------------------------------------------ socket addresses */

int omld_addr_resolve(const char *host_port, struct sockaddr_storage *out, char *err,
                      size_t errlen)
{
    char host[256]; /* a DNS name has at most 253 bytes */
    int port;
    if (omld_hostport_split(host_port, host, sizeof host, &port, err, errlen) != 0)
        return -1;
    if (host[0] == '\0') {
        snprintf(err, errlen, "'%s' is not HOST:PORT (no host)", host_port);
        return -1;
    }
    memset(out, 0, sizeof *out);
    struct sockaddr_in *in4 = (struct sockaddr_in *)out;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)out;
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        return 0;
    }
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || res == NULL) {
        snprintf(err, errlen, "cannot resolve '%s': %s", host, gai_strerror(rc));
        return -1;
    }
    memcpy(out, res->ai_addr, res->ai_addrlen);
    if (out->ss_family == AF_INET)
        ((struct sockaddr_in *)out)->sin_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in6 *)out)->sin6_port = htons((uint16_t)port);
    freeaddrinfo(res);
    return 0;
}

void omld_addr_format(const struct sockaddr_storage *a, char *buf, size_t len)
{
    char host[64] = "?";
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)a;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        snprintf(buf, len, "%s:%u", host, (unsigned)ntohs(in->sin_port));
    } else if (a->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)a;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        snprintf(buf, len, "[%s]:%u", host, (unsigned)ntohs(in6->sin6_port));
    } else {
        snprintf(buf, len, "?");
    }
}

int omld_addr_is_loopback(const struct sockaddr_storage *a)
{
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)a;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (a->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)a;
        if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
            return 1;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
            return in6->sin6_addr.s6_addr[12] == 127;
    }
    return 0;
}
