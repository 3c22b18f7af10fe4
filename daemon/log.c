/* log.c - see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static atomic_int g_level = OMLD_LOG_INFO;
static const char *const NAMES[] = {"error", "warn", "info", "debug"};

int omld_log_parse_level(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(name, NAMES[i]) == 0)
            return i;
    return -1;
}

void omld_log_set_level(int level)
{
    atomic_store(&g_level, level);
}

void omld_log(int level, const char *subsystem, const char *fmt, ...)
{
    if (level > atomic_load(&g_level))
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s: %s\n", tm.tm_year + 1900,
            tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
            NAMES[level < 0 ? 0 : level > 3 ? 3 : level], subsystem, msg);
}
