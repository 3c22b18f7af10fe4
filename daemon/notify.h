/* notify.h - readiness and progress for the service manager (systemd
 * Type=notify, via libsystemd's sd_notify).
 *
 * Every call is a no-op without $NOTIFY_SOCKET (not started by systemd), so
 * the daemon calls them unconditionally. Safe from any thread. */
#ifndef OMLD_NOTIFY_H
#define OMLD_NOTIFY_H

#include <stdint.h>

/* STATUS= the recovery's progress, and while it advances (replayed grew
 * since the last call) EXTEND_TIMEOUT_USEC, so a long replay that keeps
 * going is not killed by TimeoutStartSec while a stuck one still is. */
void omld_notify_recovering(uint64_t replayed, uint64_t *last);

/* READY=1 with a STATUS line: the first view is published, /readyz is 200. */
void omld_notify_ready(void);

/* STOPPING=1: draining has begun. */
void omld_notify_stopping(void);

#endif
