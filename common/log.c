/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

#include "common/log.h"

#define PHX_LOG_LINE_MAX 4096

static enum phx_log_level log_level = PHX_LOG_INFO;
static phx_log_sink_fn log_sink;
static bool log_time;

static const char *const level_names[] = {
	[PHX_LOG_ERROR] = "error",
	[PHX_LOG_WARN] = "warn",
	[PHX_LOG_INFO] = "info",
	[PHX_LOG_DEBUG] = "debug",
};

void phx_log_set_level(enum phx_log_level level)
{
	if (level >= PHX_LOG_ERROR && level <= PHX_LOG_DEBUG)
		log_level = level;
}

enum phx_log_level phx_log_get_level(void)
{
	return log_level;
}

void phx_log_set_time(bool on)
{
	log_time = on;
}

/* "2026-12-03T18:45:42.123+01:00 " into buf; its length, 0 when the clock cannot be read. */
static size_t stamp(char *buf, size_t len)
{
	struct timeval tv;
	struct tm tm;
	char zone[8];
	int n;

	if (gettimeofday(&tv, NULL) < 0 || !localtime_r(&tv.tv_sec, &tm) ||
	    !strftime(zone, sizeof(zone), "%z", &tm) || strlen(zone) != 5)
		return 0;
	n = snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03ld%.3s:%.2s ", tm.tm_year + 1900,
		     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		     (long)(tv.tv_usec / 1000), zone, zone + 3);
	return n > 0 && (size_t)n < len ? (size_t)n : 0;
}

void phx_log_set_sink(phx_log_sink_fn sink)
{
	log_sink = sink;
}

int phx_log_level_parse(const char *name, enum phx_log_level *level)
{
	if (!name)
		return -1;
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (strcasecmp(name, level_names[i]) == 0) {
			*level = (enum phx_log_level)i;
			return 0;
		}
	}
	return -1;
}

const char *phx_log_level_name(enum phx_log_level level)
{
	if (level < PHX_LOG_ERROR || level > PHX_LOG_DEBUG)
		return "unknown";
	return level_names[level];
}

static void stderr_sink(enum phx_log_level level, const char *line)
{
	/* One fprintf per line keeps lines whole when ranks share stderr. */
	fprintf(stderr, "%s\n", line);
}

void phx_vlog(enum phx_log_level level, const char *fmt, va_list ap)
{
	static const char prefix[] = "phalanx: ";
	char line[PHX_LOG_LINE_MAX];
	size_t off = sizeof(prefix) - 1;
	int n;

	if (level > log_level)
		return;
	memcpy(line, prefix, off);
	if (log_time)
		off += stamp(line + off, sizeof(line) - off);
	if (level == PHX_LOG_ERROR || level == PHX_LOG_WARN) {
		n = snprintf(line + off, sizeof(line) - off,
			     "%s: ", level == PHX_LOG_ERROR ? "error" : "warning");
		off += (size_t)n;
	}
	n = vsnprintf(line + off, sizeof(line) - off, fmt, ap);
	if (n < 0)
		line[off] = '\0';
	/* Messages end without a newline; drop one a caller added anyway. */
	off = strlen(line);
	if (off > 0 && line[off - 1] == '\n')
		line[off - 1] = '\0';
	(log_sink ? log_sink : stderr_sink)(level, line);
}

void phx_log(enum phx_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	phx_vlog(level, fmt, ap);
	va_end(ap);
}

int phx_errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return -1;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}
