/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging shared by every Phalanx part. Each line starts with "phalanx:" so
 * it can be found in mixed srun/slurmd output; inside the SPANK plugin the
 * lines go through slurm_error()/slurm_info() instead of stderr.
 */
#ifndef PHX_LOG_H
#define PHX_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

enum phx_log_level {
	PHX_LOG_ERROR = 0,
	PHX_LOG_WARN,
	PHX_LOG_INFO,
	PHX_LOG_DEBUG,
};

/* Receives one finished line, "phalanx: " prefix included, no newline. */
typedef void (*phx_log_sink_fn)(enum phx_log_level level, const char *line);

void phx_log_set_level(enum phx_log_level level);
enum phx_log_level phx_log_get_level(void);
/*
 * Whether each line carries the local time after its "phalanx: " prefix,
 * RFC 3339 to the millisecond ("phalanx: 2026-12-03T18:45:42.123+01:00
 * ..."): for the long-running launcher, whose lines land in a job's output
 * file with nothing else to date them. Off by default.
 */
void phx_log_set_time(bool on);
/* NULL restores the default sink (stderr). */
void phx_log_set_sink(phx_log_sink_fn sink);
/* Parses "error", "warn", "info", "debug"; returns -1 on anything else. */
int phx_log_level_parse(const char *name, enum phx_log_level *level);
const char *phx_log_level_name(enum phx_log_level level);

void phx_vlog(enum phx_log_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
void phx_log(enum phx_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Formats the reason for a failure into a caller's buffer (err may be
 * NULL), for library code that reports instead of printing; returns -1.
 */
int phx_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define phx_error(...) phx_log(PHX_LOG_ERROR, __VA_ARGS__)
#define phx_warn(...) phx_log(PHX_LOG_WARN, __VA_ARGS__)
#define phx_info(...) phx_log(PHX_LOG_INFO, __VA_ARGS__)
#define phx_debug(...) phx_log(PHX_LOG_DEBUG, __VA_ARGS__)

#endif
