/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The role ledger record (role_ledger.h): one grammar, parsed field by
 * field with the key names in their fixed order, so that any text that is
 * not exactly a record is refused with what was wrong where.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "checkpoint/proto/ckpt_wire.h"
#include "checkpoint/proto/role_ledger.h"
#include "common/log.h"

const char *phx_rl_part_name(enum phx_rl_part p)
{
	static const char *const names[PHX_RL_PARTS] = {
		[PHX_RL_PRODUCTIVE] = "productive", [PHX_RL_WAITING] = "waiting",
		[PHX_RL_RESTART] = "restart",	    [PHX_RL_LOST] = "lost_work",
		[PHX_RL_DETECT] = "detection",
	};

	return (unsigned)p < PHX_RL_PARTS ? names[p] : "unknown";
}

int phx_rl_format(const struct phx_role_ledger *l, char *buf, size_t len)
{
	int n = snprintf(buf, len,
			 "%s run=%llu ranks=%u productive=%llu waiting=%llu restart=%llu "
			 "lost=%llu detect=%llu failures=%u",
			 l->name, (unsigned long long)l->run, l->ranks,
			 (unsigned long long)l->part_ms[PHX_RL_PRODUCTIVE],
			 (unsigned long long)l->part_ms[PHX_RL_WAITING],
			 (unsigned long long)l->part_ms[PHX_RL_RESTART],
			 (unsigned long long)l->part_ms[PHX_RL_LOST],
			 (unsigned long long)l->part_ms[PHX_RL_DETECT], l->failures);

	return n < 0 || (size_t)n >= len ? -1 : n;
}

static int name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '-';
}

/* The fields after the name, in the only order the record has. */
static const struct {
	const char *key;
	uint64_t max;
} fields[] = {
	{ "run", UINT64_MAX },
	{ "ranks", UINT32_MAX },
	{ "productive", PHX_RL_VALUE_MAX },
	{ "waiting", PHX_RL_VALUE_MAX },
	{ "restart", PHX_RL_VALUE_MAX },
	{ "lost", PHX_RL_VALUE_MAX },
	{ "detect", PHX_RL_VALUE_MAX },
	{ "failures", UINT32_MAX },
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

/* Which field key (len bytes) names; -1 for none. */
static int field_of(const char *key, size_t len)
{
	for (size_t i = 0; i < NFIELDS; i++)
		if (strlen(fields[i].key) == len && !memcmp(fields[i].key, key, len))
			return (int)i;
	return -1;
}

/* Field i's "KEY=DIGITS" at *pp: the value, and *pp past it. */
static int parse_field(const char **pp, size_t i, uint64_t *out, char *err, size_t errlen)
{
	const char *p = *pp, *key = fields[i].key;
	size_t klen = strlen(key), n = strcspn(p, "= ");
	uint64_t v = 0;
	int other;

	if (!*p)
		return phx_errf(err, errlen, "role record: it ends before \"%s=\"", key);
	if (*p == ' ')
		return phx_errf(err, errlen, "role record: more than one space before \"%s=\"",
				key);
	if (n != klen || memcmp(p, key, klen) || p[n] != '=') {
		other = field_of(p, n);
		if (other >= 0 && p[n] == '=')
			return phx_errf(err, errlen, "role record: \"%s=\" where \"%s=\" belongs",
					fields[other].key, key);
		return phx_errf(err, errlen, "role record: \"%.*s\" where \"%s=\" belongs",
				(int)(n > 32 ? 32 : n), p, key);
	}
	p += klen + 1;
	if (*p == '-' || *p == '+')
		return phx_errf(err, errlen, "role record: %s= has a sign; a value is digits only",
				key);
	if (*p < '0' || *p > '9')
		return phx_errf(err, errlen, "role record: %s= has no decimal value", key);
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (fields[i].max - d) / 10)
			return phx_errf(err, errlen, "role record: %s= is above %llu", key,
					(unsigned long long)fields[i].max);
		v = v * 10 + d;
	}
	if (*p && *p != ' ')
		return phx_errf(err, errlen, "role record: %s= has \"%.32s\" after its digits", key,
				p);
	*out = v;
	*pp = p;
	return 0;
}

int phx_rl_parse(const char *text, struct phx_role_ledger *l, char *err, size_t errlen)
{
	size_t len = strnlen(text, PHX_WIRE_REASON_MAX + 1), n;
	uint64_t v[NFIELDS];
	const char *p;

	if (len > PHX_WIRE_REASON_MAX)
		return phx_errf(err, errlen, "role record: longer than %d bytes",
				PHX_WIRE_REASON_MAX);
	n = strcspn(text, " ");
	if (!n)
		return phx_errf(err, errlen, "role record: no role name at the start");
	if (n > PHX_RL_NAME_MAX)
		return phx_errf(err, errlen,
				"role record: the role name has %zu characters, at most %d", n,
				PHX_RL_NAME_MAX);
	if (!((text[0] >= 'a' && text[0] <= 'z') || (text[0] >= 'A' && text[0] <= 'Z')))
		return phx_errf(err, errlen,
				"role record: role name \"%.*s\" does not start with a letter",
				(int)n, text);
	for (size_t i = 1; i < n; i++)
		if (!name_char(text[i]))
			return phx_errf(err, errlen,
					"role record: role name \"%.*s\" holds character 0x%02x; "
					"a name is letters, digits, _ and -",
					(int)n, text, (unsigned char)text[i]);
	p = text + n;
	for (size_t i = 0; i < NFIELDS; i++) {
		/* The name and each value end at a space or at the end. */
		if (!*p)
			return phx_errf(err, errlen, "role record: it ends before \"%s=\"",
					fields[i].key);
		p++;
		if (parse_field(&p, i, &v[i], err, errlen) < 0)
			return -1;
	}
	if (*p)
		return phx_errf(err, errlen,
				"role record: stray text \"%.32s\" after failures=", p);
	memset(l, 0, sizeof(*l));
	memcpy(l->name, text, n);
	l->run = v[0];
	l->ranks = (uint32_t)v[1];
	for (int k = 0; k < PHX_RL_PARTS; k++)
		l->part_ms[k] = v[2 + k];
	l->failures = (uint32_t)v[7];
	return 0;
}
