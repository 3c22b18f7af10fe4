/* replication.c - what replicate.c and replica.c share (replication.h). */
#include "replication.h"

#include <dirent.h>
#include <stdio.h>
#include <unistd.h>
#include <string.h>
#include <time.h>

#include "ingest.h"

int omld_repl_parse_url(const char *option, const char *url, char *host, size_t host_cap,
                        int *port, char *prefix, size_t prefix_cap, char *err, size_t errlen)
{
    char why[400];
    if (omld_ingest_parse_url(url, host, host_cap, port, prefix, prefix_cap, why, sizeof why) == 0)
        return 0;
    /* the same URL rules as ingest's; its message names "ingest" and a STREAM */
    const char *rest = strncmp(why, "ingest ", 7) == 0 ? why + 7 : why;
    char *stream = strstr(why, "STREAM");
    if (stream)
        memcpy(stream, "PREFIX", 6);
    snprintf(err, errlen, "option '%s': %s", option, rest);
    return -1;
}

void omld_repl_remove_files(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *de;
    char path[4096 + 256];
    while ((de = readdir(d)) != NULL)
        if (strncmp(de->d_name, prefix, strlen(prefix)) == 0) {
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            unlink(path);
        }
    closedir(d);
}


