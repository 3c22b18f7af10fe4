/* log.c - see log.h. */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static atomic_int g_level = OMLD_LOG_INFO;
static const char *const NAMES[] = {"error", "warn", "info", "debug"};
/* syslog priorities of the levels: err, warning, info, debug */
static const char *const PRIORITY[] = {"<3>", "<4>", "<6>", "<7>"};

static pthread_once_t g_journal_once = PTHREAD_ONCE_INIT;
static int g_journal;

/* systemd sets JOURNAL_STREAM=DEV:INODE when stderr is its journal stream;
 * stderr is that stream if it has that device and inode (a redirect keeps
 * the variable but not the stream). */
static void journal_init(void)
{
    const char *v = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    g_journal = v && sscanf(v, "%llu:%llu", &dev, &ino) == 2 && fstat(2, &st) == 0 &&
                (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

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
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_once(&g_journal_once, journal_init);
    int l = level < 0 ? 0 : level > 3 ? 3 : level;
    fprintf(stderr, "%s%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s: %s\n",
            g_journal ? PRIORITY[l] : "", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
            tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, NAMES[l], subsystem, msg);
}
