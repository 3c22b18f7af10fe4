/* notify.c - sd_notify messages (see notify.h). */
#include "notify.h"

#include <systemd/sd-daemon.h>

/* How long each sign of recovery progress buys from TimeoutStartSec. */
#define EXTEND_USEC 15000000ULL

void omld_notify_recovering(uint64_t replayed, uint64_t *last)
{
    if (replayed > *last || *last == 0)
        sd_notifyf(0, "STATUS=recovering: %llu log records replayed\nEXTEND_TIMEOUT_USEC=%llu",
                   (unsigned long long)replayed, EXTEND_USEC);
    *last = replayed > *last ? replayed : *last;
}

void omld_notify_ready(void)
{
    sd_notify(0, "READY=1\nSTATUS=ready: serving");
}

void omld_notify_stopping(void)
{
    sd_notify(0, "STOPPING=1\nSTATUS=draining and shutting down");
}
