// SPDX-License-Identifier: Apache-2.0
/*
 * Crash signatures for phalanx-ckptd's user-error rule: the daemon cancels a
 * job whose crash has the same signature recovery.user_error_repeats
 * times, so the signature must not change with what differs between two
 * runs of the same failure (addresses, pids, sizes in the message).
 */
#include "config.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "launcher/agent/agent_ckptd.h"

/* Length of a dotted identifier at s followed by ':', else 0. */
static size_t exception_name(const char *s)
{
	size_t i = 0;

	if (!isalpha((unsigned char)s[0]) && s[0] != '_')
		return 0;
	while (isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '.')
		i++;
	return s[i] == ':' || s[i] == '\0' || s[i] == '\n' ? i : 0;
}

/* The first line, digit runs as one '#', at most 80 characters. */
static void fold_line(const char *s, char *out, size_t len)
{
	size_t o = 0;

	while (*s && *s != '\n' && o + 1 < len && o < 80) {
		if (isdigit((unsigned char)*s)) {
			out[o++] = '#';
			while (isdigit((unsigned char)*s))
				s++;
			continue;
		}
		out[o++] = isspace((unsigned char)*s) ? ' ' : *s;
		s++;
	}
	while (o && out[o - 1] == ' ')
		o--;
	out[o] = '\0';
}

uint64_t phx_straggler_lost_us(uint64_t step_ns, uint64_t median_ns, uint64_t steps)
{
	if (step_ns <= median_ns)
		return 0;
	/* Microseconds first: a long window of slow steps must not overflow. */
	return (step_ns - median_ns) / 1000 * steps;
}

void phx_crash_signature(const char *msg, const char *how, uint64_t step, char *buf, size_t len)
{
	char what[96];
	size_t n;

	if (!len)
		return;
	while (msg && isspace((unsigned char)*msg))
		msg++;
	what[0] = '\0';
	if (msg && *msg) {
		n = exception_name(msg);
		if (n) {
			const char *dot = memrchr(msg, '.', n);

			/* "builtins.ValueError" and "ValueError" are one exception. */
			if (dot) {
				n -= (size_t)(dot + 1 - msg);
				msg = dot + 1;
			}
			snprintf(what, sizeof(what), "%.*s", (int)(n < 80 ? n : 80), msg);
		} else {
			fold_line(msg, what, sizeof(what));
		}
	}
	if (!what[0])
		snprintf(what, sizeof(what), "%s", how && *how ? how : "failure");
	snprintf(buf, len, "%s@step %" PRIu64, what, step);
}
