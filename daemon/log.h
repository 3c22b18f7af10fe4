/* log.h - log lines with time, level and subsystem, to stderr.
 *
 *   2026-11-23T10:48:07.123Z info  engine: published view 12 (35000 items, 166 ms)
 *
 * One fprintf per line (stdio locks the stream), so lines from different
 * threads never interleave. When stderr is the systemd journal
 * (JOURNAL_STREAM names it), each line starts with its syslog priority,
 * <3> error, <4> warn, <6> info, <7> debug, which journald strips and
 * files (journalctl -p warning). A message is cut past 2 KiB. Thread-safe. */
#ifndef OMLD_LOG_H
#define OMLD_LOG_H

enum omld_log_level { OMLD_LOG_ERROR = 0, OMLD_LOG_WARN, OMLD_LOG_INFO, OMLD_LOG_DEBUG };

/* Parses "error" | "warn" | "info" | "debug"; -1 if none. */
int omld_log_parse_level(const char *name);
void omld_log_set_level(int level);

void omld_log(int level, const char *subsystem, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define LOG_ERROR(sub, ...) omld_log(OMLD_LOG_ERROR, sub, __VA_ARGS__)
#define LOG_WARN(sub, ...) omld_log(OMLD_LOG_WARN, sub, __VA_ARGS__)
#define LOG_INFO(sub, ...) omld_log(OMLD_LOG_INFO, sub, __VA_ARGS__)
#define LOG_DEBUG(sub, ...) omld_log(OMLD_LOG_DEBUG, sub, __VA_ARGS__)

#endif
