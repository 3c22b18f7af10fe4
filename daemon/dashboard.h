/* dashboard.h - the live dashboard's files, embedded in the binary.
 *
 * The sources are daemon/dashboard/ (index.html, plain JS on <canvas>, no
 * external resources); at build time daemon/dashboard/embed.cmake turns
 * them into <build>/dashboard/dashboard_assets.c, which defines the table
 * below. http.c serves them: GET / (and /dashboard, /dashboard/) is
 * index.html, GET /dashboard/NAME is the file NAME. The page polls
 * GET /status once a second and draws everything client-side.
 * Any thread; immutable data. */
#ifndef OMLD_DASHBOARD_H
#define OMLD_DASHBOARD_H

#include <stddef.h>

typedef struct omld_dashboard_asset {
    const char *name;         /* file name in daemon/dashboard/, e.g. "index.html" */
    const char *content_type; /* e.g. "text/html; charset=utf-8" */
    const unsigned char *data; /* len bytes, followed by a NUL not counted in len */
    size_t len;
} omld_dashboard_asset;

/* Generated (dashboard_assets.c): every embedded file, sorted by name. */
extern const omld_dashboard_asset omld_dashboard_assets[];
extern const size_t omld_dashboard_asset_count;

/* The asset served at a URL path (len bytes, not NUL-terminated, without
 * the query string), or NULL if the path is not the dashboard's. */
const omld_dashboard_asset *omld_dashboard_lookup(const char *path, size_t len);

#endif
