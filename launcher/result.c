/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agents' result line: how the workers of a step gave up, printed by
 * the agent of the root cause on stderr, read by the driver from srun's
 * stderr. It travels through srun's output, so it needs no shared file
 * system; its parser takes any bytes (it is fuzzed).
 */
#include "config.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "common/hex.h"
#include "launcher/liveness.h"
#include "launcher/result.h"

#define RESULT_VERSION "1"
#define RESULT_WHAT "workers-failed"

static bool plain(unsigned char c)
{
	return c > ' ' && c < 0x7f && c != '%';
}

/* Percent-encodes s (at most max bytes of it) into out; stops when full. */
static void encode(const char *s, size_t max, char *out, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (size_t i = 0; s[i] && i < max; i++) {
		unsigned char c = (unsigned char)s[i];

		if (plain(c)) {
			if (o + 1 >= len)
				break;
			out[o++] = (char)c;
			continue;
		}
		if (o + 3 >= len)
			break;
		out[o++] = '%';
		out[o++] = hex[c >> 4];
		out[o++] = hex[c & 15];
	}
	if (len)
		out[o] = '\0';
}

/* Decodes s[0..n) into out (len bytes with the NUL); -1 when malformed or too long. */
static int decode(const char *s, size_t n, char *out, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		int hi, lo;
		char c = s[i];

		if (c == '%') {
			if (i + 2 >= n)
				return -1;
			hi = phx_hex_digit(s[i + 1]);
			lo = phx_hex_digit(s[i + 2]);
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return -1;
			c = (char)(hi << 4 | lo);
			i += 2;
		} else if (!plain((unsigned char)c)) {
			return -1;
		}
		if (o + 1 >= len)
			return -1;
		out[o++] = c;
	}
	out[o] = '\0';
	return 0;
}

int phx_result_format(const struct phx_result *r, char *buf, size_t len)
{
	char node[3 * sizeof(r->node)], msg[3 * PHX_RESULT_MSG_MAX + 1];

	encode(r->node, sizeof(r->node) - 1, node, sizeof(node));
	encode(r->msg, PHX_RESULT_MSG_MAX, msg, sizeof(msg));
	return snprintf(buf, len,
			PHX_RESULT_PREFIX RESULT_VERSION
			" " RESULT_WHAT " rank=%ld node=%s kind=%d code=%d step=%" PRIu64
			" restarts=%u msg=%s\n",
			r->rank, node[0] ? node : "%3F", r->kind, r->code, r->step, r->restarts,
			msg);
}

static int number(const char *s, size_t n, long long min, long long max, long long *out)
{
	char buf[32], *end;

	if (!n || n >= sizeof(buf))
		return -1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (buf[0] == '+' || buf[0] == ' ')
		return -1;
	*out = strtoll(buf, &end, 10);
	return *end || *out < min || *out > max ? -1 : 0;
}

static int field(struct phx_result *r, const char *key, size_t klen, const char *val, size_t vlen)
{
	long long v;

#define KEY(k) (klen == sizeof(k) - 1 && !memcmp(key, k, klen))
	if (KEY("node")) /* never empty: an unknown node is "?" */
		return vlen ? decode(val, vlen, r->node, sizeof(r->node)) : -1;
	if (KEY("msg"))
		return decode(val, vlen, r->msg, sizeof(r->msg));
	if (KEY("rank") && !number(val, vlen, -1, 1ll << 40, &v))
		r->rank = (long)v;
	else if (KEY("kind") && !number(val, vlen, 0, 16, &v))
		r->kind = (int)v;
	else if (KEY("code") && !number(val, vlen, -1000000, 1000000, &v))
		r->code = (int)v;
	else if (KEY("step") && !number(val, vlen, 0, INT64_MAX, &v))
		r->step = (uint64_t)v;
	else if (KEY("restarts") && !number(val, vlen, 0, 1000000, &v))
		r->restarts = (unsigned)v;
	else
		return -1;
#undef KEY
	return 0;
}

int phx_result_parse(const char *line, size_t len, struct phx_result *r)
{
	static const char head[] = PHX_RESULT_PREFIX RESULT_VERSION " " RESULT_WHAT;
	unsigned seen = 0;
	size_t i;

	memset(r, 0, sizeof(*r));
	r->rank = -1;
	if (len && line[len - 1] == '\n')
		len--;
	if (len < sizeof(head) - 1 || memcmp(line, head, sizeof(head) - 1))
		return -1;
	i = sizeof(head) - 1;
	while (i < len) {
		size_t start, eq, end;
		static const char *const keys[] = { "rank", "node",	"kind", "code",
						    "step", "restarts", "msg" };

		if (line[i++] != ' ')
			return -1;
		start = i;
		while (i < len && line[i] != ' ')
			i++;
		end = i;
		for (eq = start; eq < end && line[eq] != '='; eq++)
			;
		if (eq == end || eq == start)
			return -1;
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
			if (strlen(keys[k]) != eq - start ||
			    memcmp(keys[k], line + start, eq - start))
				continue;
			/* Each key once. */
			if (seen & (1u << k))
				return -1;
			seen |= 1u << k;
		}
		if (field(r, line + start, eq - start, line + eq + 1, end - eq - 1) < 0)
			return -1;
	}
	/* Every key present: a cut line is not a result. */
	return seen == 0x7f ? 0 : -1;
}

/*
 * srun's own reports on its stderr (Slurm 22.05 to 24.11):
 *   srun: error: Node failure on NODE
 *   srun: error: NODE: task(s) LIST: MESSAGE
 *   srun: error: task N launch failed: MESSAGE
 *   srun: error: Task launch for STEP failed on node NODE: MESSAGE
 *   srun: error: Application launch failed: MESSAGE
 *   srun: ...STEP aborted before step completely launched.
 * 1: a node failure, 2: an agent that did not exit by itself (killed by
 * a signal: MESSAGE is not "Exited with exit code N"), 3: the step's
 * launch failed, 0: anything else.
 */
/* A host name as srun prints it: printable, no spaces, no ':'. */
static bool host_ok(const char *p, size_t n)
{
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (!plain((unsigned char)p[i]) || p[i] == ':')
			return false;
	}
	return true;
}

static bool has_text(const char *p, const char *end, const char *text)
{
	size_t k = strlen(text);

	for (; (size_t)(end - p) >= k; p++)
		if (!memcmp(p, text, k))
			return true;
	return false;
}

static bool starts(const char *p, const char *end, const char *text)
{
	size_t k = strlen(text);

	return (size_t)(end - p) >= k && !memcmp(p, text, k);
}

/* srun's error MESSAGE (after "srun: error: ") says the step's launch failed. */
static bool launch_failed(const char *p, const char *end)
{
	if (starts(p, end, "Application launch failed") || starts(p, end, "Task launch for "))
		return true;
	if (!starts(p, end, "task "))
		return false;
	for (p += 5; p < end && *p >= '0' && *p <= '9'; p++)
		;
	return starts(p, end, " launch failed");
}

int phx_srun_line_parse(const char *line, size_t len, char *node, size_t nodelen)
{
	static const char err[] = "srun: error: ", fail[] = "Node failure on ";
	static const char exited[] = "Exited with exit code";
	const char *p = line + sizeof(err) - 1, *end = line + len, *colon;
	size_t n;

	if (len && line[len - 1] == '\n')
		end--;
	if (!starts(line, end, "srun: "))
		return 0;
	if (has_text(line, end, " aborted before step completely launched"))
		return 3;
	if (!starts(line, end, err))
		return 0;
	if (launch_failed(p, end))
		return 3;
	if ((size_t)(end - p) > sizeof(fail) - 1 && !memcmp(p, fail, sizeof(fail) - 1)) {
		p += sizeof(fail) - 1;
		n = (size_t)(end - p);
		if (n >= nodelen || !host_ok(p, n))
			return 0;
		memcpy(node, p, n);
		node[n] = '\0';
		return 1;
	}
	colon = memchr(p, ':', (size_t)(end - p));
	if (!colon || !host_ok(p, (size_t)(colon - p)))
		return 0;
	n = (size_t)(colon - p);
	if (n >= nodelen || (size_t)(end - colon) < 7 || memcmp(colon, ": task", 6))
		return 0;
	colon = memchr(colon + 1, ':', (size_t)(end - colon - 1));
	if (!colon || end - colon < 2 || colon[1] != ' ')
		return 0;
	if ((size_t)(end - colon - 2) >= sizeof(exited) - 1 &&
	    !memcmp(colon + 2, exited, sizeof(exited) - 1))
		return 0;
	memcpy(node, p, n);
	node[n] = '\0';
	return 2;
}

int phx_lost_format(const char *node, unsigned long ms, const char *by, char *buf, size_t len)
{
	return snprintf(buf, len,
			PHX_LOST_PREFIX "%s: no beat from its agent for %lu ms (watched from %s); "
					"the node is dead, hung or cut off\n",
			node, ms, by);
}

/* A datagram's line after its key, or NULL when the key is not this one. */
static const char *keyed(const char *d, size_t n, const char *key)
{
	/* In constant time: a refusal's time tells a stranger nothing of the key. */
	if (strlen(key) != PHX_LOST_KEY_HEX || n <= PHX_LOST_KEY_HEX + 1 ||
	    n > PHX_LOST_REPORT_MAX || d[PHX_LOST_KEY_HEX] != ' ' ||
	    CRYPTO_memcmp(d, key, PHX_LOST_KEY_HEX))
		return NULL;
	return d + PHX_LOST_KEY_HEX + 1;
}

int phx_lost_report_parse(const char *d, size_t n, const char *key, char *node, size_t nodelen)
{
	const char *line = keyed(d, n, key);

	return line ? phx_lost_parse(line, n - PHX_LOST_KEY_HEX - 1, node, nodelen) : -1;
}

static const char *const alive_state[] = { "steady", "settling", "end" };

int phx_alive_format(const char *node, enum phx_beat state, char *buf, size_t len)
{
	return snprintf(buf, len, PHX_ALIVE_PREFIX "%s %s", node, alive_state[state]);
}

int phx_alive_report_parse(const char *d, size_t n, const char *key, char *node, size_t nodelen,
			   enum phx_beat *state)
{
	const char *line = keyed(d, n, key), *end = d + n, *p, *sp;
	size_t len;

	if (!line || !starts(line, end, PHX_ALIVE_PREFIX))
		return -1;
	p = line + sizeof(PHX_ALIVE_PREFIX) - 1;
	sp = memchr(p, ' ', (size_t)(end - p));
	if (!sp || (len = (size_t)(sp - p)) >= nodelen || !host_ok(p, len))
		return -1;
	for (enum phx_beat b = PHX_BEAT_STEADY; b <= PHX_BEAT_END; b++) {
		if ((size_t)(end - sp - 1) == strlen(alive_state[b]) &&
		    !memcmp(sp + 1, alive_state[b], strlen(alive_state[b]))) {
			memcpy(node, p, len);
			node[len] = '\0';
			*state = b;
			return 0;
		}
	}
	return -1;
}

/* A count or "-" (none) into buf, for a progress line. */
static const char *maybe(bool have, uint64_t v, char *buf, size_t len)
{
	if (!have)
		return "-";
	snprintf(buf, len, "%llu", (unsigned long long)v);
	return buf;
}

int phx_progress_format(const char *node, const struct phx_progress *p, char *buf, size_t len)
{
	char step[24], resumed[24];

	return snprintf(buf, len, PHX_PROGRESS_PREFIX "%s %s %llu %s", node,
			maybe(p->stepped, p->step, step, sizeof(step)),
			(unsigned long long)p->wait_ms,
			maybe(p->resumed, p->resumed_step, resumed, sizeof(resumed)));
}

/*
 * Decimal digits (at most 19: no overflow), or "-" when dash, up to the
 * next space or end; past it, or NULL.
 */
static const char *count_field(const char *p, const char *end, bool dash, bool *have, uint64_t *v)
{
	const char *q = p;

	*v = 0;
	*have = !(dash && end - p >= 1 && *p == '-' && (end - p == 1 || p[1] == ' '));
	if (!*have)
		return p + 1;
	for (; q < end && *q != ' '; q++) {
		if (*q < '0' || *q > '9' || q - p >= 19)
			return NULL;
		*v = *v * 10 + (uint64_t)(*q - '0');
	}
	return q > p ? q : NULL;
}

int phx_progress_report_parse(const char *d, size_t n, const char *key, char *node, size_t nodelen,
			      struct phx_progress *out)
{
	const char *line = keyed(d, n, key), *end = d + n, *p, *sp;
	struct phx_progress v = { 0 };
	bool waited;
	size_t len;

	if (!line || !starts(line, end, PHX_PROGRESS_PREFIX))
		return -1;
	p = line + sizeof(PHX_PROGRESS_PREFIX) - 1;
	sp = memchr(p, ' ', (size_t)(end - p));
	if (!sp || (len = (size_t)(sp - p)) >= nodelen || !host_ok(p, len))
		return -1;
	p = count_field(sp + 1, end, true, &v.stepped, &v.step);
	if (!p || p >= end || *p != ' ')
		return -1;
	p = count_field(p + 1, end, false, &waited, &v.wait_ms);
	if (!p || p >= end || *p != ' ')
		return -1;
	p = count_field(p + 1, end, true, &v.resumed, &v.resumed_step);
	if (!p || p != end)
		return -1;
	memcpy(node, sp - len, len);
	node[len] = '\0';
	*out = v;
	return 0;
}

int phx_lost_parse(const char *line, size_t len, char *node, size_t nodelen)
{
	const char *p = line + sizeof(PHX_LOST_PREFIX) - 1, *end = line + len, *colon;
	size_t n;

	if (!starts(line, end, PHX_LOST_PREFIX))
		return -1;
	colon = memchr(p, ':', (size_t)(end - p));
	if (!colon)
		return -1;
	n = (size_t)(colon - p);
	if (n >= nodelen || !host_ok(p, n))
		return -1;
	memcpy(node, p, n);
	node[n] = '\0';
	return 0;
}
