/* hostport.c - "HOST:PORT" (see hostport.h). */
#include "hostport.h"

#include <ctype.h>
#include <stdio.h>
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
