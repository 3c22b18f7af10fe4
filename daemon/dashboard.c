/* dashboard.c - see dashboard.h: which embedded file a URL path names. */
#include "dashboard.h"

#include <string.h>

#define PREFIX "/dashboard/"

static const omld_dashboard_asset *by_name(const char *name, size_t len)
{
    for (size_t i = 0; i < omld_dashboard_asset_count; i++) {
        const omld_dashboard_asset *a = &omld_dashboard_assets[i];
        if (strlen(a->name) == len && memcmp(a->name, name, len) == 0)
            return a;
    }
    return NULL;
}

const omld_dashboard_asset *omld_dashboard_lookup(const char *path, size_t len)
{
    size_t plen = sizeof PREFIX - 1;
    if ((len == 1 && path[0] == '/') || (len == plen - 1 && memcmp(path, PREFIX, len) == 0) ||
        (len == plen && memcmp(path, PREFIX, len) == 0))
        return by_name("index.html", strlen("index.html"));
    if (len <= plen || memcmp(path, PREFIX, plen) != 0)
        return NULL;
    /* Only plain names: nothing can climb out of the table anyway, but a
     * second slash is never one of ours. */
    if (memchr(path + plen, '/', len - plen))
        return NULL;
    return by_name(path + plen, len - plen);
}
