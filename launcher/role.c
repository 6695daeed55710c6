/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Roles of an MPMD job: "NAME[:FIELD]...", each FIELD one of nodes=N (or
 * nodes=MIN-MAX, an elastic pool), nproc=N, restart=group|self,
 * max-restarts=N, spares=N, max-relaunches=N, fatal=yes|no, layout=SPEC (or
 * the layout bare, "tp=8,pp=2") and, last because a command may hold any
 * character, cmd=COMMAND. Pure, so every rule is unit tested and fuzzed.
 */
#include "config.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement/layout.h"
#include "common/log.h"
#include "launcher/role.h"

const char *phx_restart_policy_name(enum phx_restart_policy p)
{
	return p == PHX_RESTART_SELF ? "self" : "group";
}

static int parse_name(const char *s, size_t len, struct phx_role *r, char *err, size_t errlen)
{
	if (!len)
		return phx_errf(err, errlen,
				"--role '%s': the role has no name; write NAME[:FIELD]..., e.g. "
				"'trainer:nodes=6'",
				s);
	if (len >= sizeof(r->name))
		return phx_errf(err, errlen,
				"--role '%.*s': the name is longer than %zu characters", (int)len,
				s, sizeof(r->name) - 1);
	if (!isalpha((unsigned char)s[0]))
		return phx_errf(err, errlen, "--role '%.*s': a role name starts with a letter",
				(int)len, s);
	for (size_t i = 0; i < len; i++) {
		if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
			return phx_errf(err, errlen,
					"--role '%.*s': a role name has letters, digits, '_' and "
					"'-' only",
					(int)len, s);
	}
	memcpy(r->name, s, len);
	r->name[len] = '\0';
	return 0;
}

static int field_uint(const struct phx_role *r, const char *key, const char *v, size_t len,
		      unsigned long min, unsigned long max, unsigned long *out, char *err,
		      size_t errlen)
{
	unsigned long x = 0;

	if (!len || len > 9)
		goto bad;
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)v[i]))
			goto bad;
		x = x * 10 + (unsigned long)(v[i] - '0');
	}
	if (x < min || x > max)
		goto bad;
	*out = x;
	return 0;
bad:
	return phx_errf(err, errlen, "--role %s: %s='%.*s' is not a whole number in %lu..%lu",
			r->name, key, (int)len, v, min, max);
}

static int field_layout(struct phx_role *r, const char *v, size_t len, char *err, size_t errlen)
{
	struct phx_layout l;
	char why[512];

	if (r->layout[0])
		return phx_errf(err, errlen, "--role %s: the layout is given twice", r->name);
	if (!len || len >= sizeof(r->layout))
		return phx_errf(err, errlen, "--role %s: the layout must have 1..%zu characters",
				r->name, sizeof(r->layout) - 1);
	memcpy(r->layout, v, len);
	r->layout[len] = '\0';
	if (phx_layout_parse(r->layout, &l, why, sizeof(why)) < 0)
		return phx_errf(err, errlen, "--role %s: %s", r->name, why);
	return 0;
}

/* A field's key: a layout dimension or "order" starts a bare layout. */
static bool is_layout_key(const char *k, size_t len)
{
	return phx_dim_parse(k, len) >= 0 || (len == 5 && !memcmp(k, "order", 5));
}

enum {
	SEEN_NODES = 1,
	SEEN_NPROC = 2,
	SEEN_RESTART = 4,
	SEEN_MAX = 8,
	SEEN_SPARES = 16,
	SEEN_RELAUNCHES = 32,
	SEEN_FATAL = 64,
};

/* nodes=N or nodes=MIN-MAX. */
static int field_nodes(struct phx_role *r, const char *v, size_t len, char *err, size_t errlen)
{
	const char *dash = memchr(v, '-', len);
	size_t lo_len = dash ? (size_t)(dash - v) : len;
	unsigned long lo, hi = 0;
	char e[256];

	/* N, or no range at all: the message quotes all of it. */
	if (!dash || !lo_len || lo_len + 1 == len) {
		if (field_uint(r, "nodes", v, len, 1, 1u << 20, &lo, err, errlen) < 0)
			return -1;
		r->nodes = (unsigned)lo;
		return 0;
	}
	if (field_uint(r, "nodes", v, lo_len, 1, 1u << 20, &lo, e, sizeof(e)) < 0 ||
	    field_uint(r, "nodes", dash + 1, len - lo_len - 1, 1, 1u << 20, &hi, e, sizeof(e)) < 0)
		return phx_errf(err, errlen,
				"--role %s: nodes='%.*s' is not N or MIN-MAX in whole numbers of "
				"1..%u",
				r->name, (int)len, v, 1u << 20);
	if (hi < lo)
		return phx_errf(err, errlen,
				"--role %s: nodes=%lu-%lu: an elastic pool's least comes first, "
				"e.g. nodes=%lu-%lu",
				r->name, lo, hi, hi, lo);
	r->nodes = (unsigned)lo;
	r->nodes_max = (unsigned)hi;
	return 0;
}

static int once(const struct phx_role *r, unsigned *seen, unsigned bit, const char *key, char *err,
		size_t errlen)
{
	if (*seen & bit)
		return phx_errf(err, errlen, "--role %s: %s= is given twice", r->name, key);
	*seen |= bit;
	return 0;
}

static int parse_field(struct phx_role *r, const char *f, size_t len, unsigned *seen, char *err,
		       size_t errlen)
{
	const char *eq = memchr(f, '=', len);
	size_t klen = eq ? (size_t)(eq - f) : len, vlen = eq ? len - klen - 1 : 0;
	const char *v = eq ? eq + 1 : NULL;
	unsigned long x;

#define KEY(k) (klen == sizeof(k) - 1 && !memcmp(f, k, klen))
	if (!eq)
		goto unknown;
	if (KEY("nodes")) {
		if (once(r, seen, SEEN_NODES, "nodes", err, errlen) ||
		    field_nodes(r, v, vlen, err, errlen))
			return -1;
		return 0;
	}
	if (KEY("spares")) {
		if (once(r, seen, SEEN_SPARES, "spares", err, errlen) ||
		    field_uint(r, "spares", v, vlen, 0, 1u << 20, &x, err, errlen))
			return -1;
		r->spares = (unsigned)x;
		return 0;
	}
	if (KEY("max-relaunches")) {
		if (once(r, seen, SEEN_RELAUNCHES, "max-relaunches", err, errlen) ||
		    field_uint(r, "max-relaunches", v, vlen, 0, 1000000, &x, err, errlen))
			return -1;
		r->max_relaunches = (int)x;
		return 0;
	}
	if (KEY("fatal")) {
		if (once(r, seen, SEEN_FATAL, "fatal", err, errlen))
			return -1;
		if (vlen == 3 && !memcmp(v, "yes", 3))
			r->fatal = PHX_FATAL_YES;
		else if (vlen == 2 && !memcmp(v, "no", 2))
			r->fatal = PHX_FATAL_NO;
		else
			return phx_errf(err, errlen,
					"--role %s: fatal='%.*s': use yes (the role's failure ends "
					"the job) or no (the job goes on without it)",
					r->name, (int)vlen, v);
		return 0;
	}
	if (KEY("nproc")) {
		if (once(r, seen, SEEN_NPROC, "nproc", err, errlen) ||
		    field_uint(r, "nproc", v, vlen, 1, 4096, &x, err, errlen))
			return -1;
		r->nproc = (unsigned)x;
		return 0;
	}
	if (KEY("max-restarts")) {
		if (once(r, seen, SEEN_MAX, "max-restarts", err, errlen) ||
		    field_uint(r, "max-restarts", v, vlen, 0, 1000000, &x, err, errlen))
			return -1;
		r->max_restarts = (int)x;
		return 0;
	}
	if (KEY("restart")) {
		if (once(r, seen, SEEN_RESTART, "restart", err, errlen))
			return -1;
		if (vlen == 5 && !memcmp(v, "group", 5))
			r->restart = PHX_RESTART_GROUP;
		else if (vlen == 4 && !memcmp(v, "self", 4))
			r->restart = PHX_RESTART_SELF;
		else
			return phx_errf(err, errlen,
					"--role %s: restart='%.*s': use group (the role restarts "
					"together) or self (only the failed worker restarts)",
					r->name, (int)vlen, v);
		return 0;
	}
	if (KEY("layout"))
		return field_layout(r, v, vlen, err, errlen);
	if (is_layout_key(f, klen))
		return field_layout(r, f, len, err, errlen);
#undef KEY
unknown:
	return phx_errf(err, errlen,
			"--role %s: unknown field '%.*s'; use nodes=N or nodes=MIN-MAX, nproc=N, "
			"restart=group|self, max-restarts=N, spares=N, max-relaunches=N, "
			"fatal=yes|no, a layout (tp=8,pp=2) or cmd=COMMAND (last)",
			r->name, (int)len, f);
}

int phx_role_parse(const char *spec, struct phx_role *r, char *err, size_t errlen)
{
	const char *p = strchr(spec, ':'), *end;
	unsigned seen = 0;

	memset(r, 0, sizeof(*r));
	r->max_restarts = -1;
	r->max_relaunches = -1;
	if (parse_name(spec, p ? (size_t)(p - spec) : strlen(spec), r, err, errlen) < 0)
		return -1;
	while (p) {
		p++;
		if (!strncmp(p, "cmd=", 4)) {
			/* The rest, colons and all: it is a shell command. */
			if (!p[4] || strspn(p + 4, " \t") == strlen(p + 4))
				return phx_errf(err, errlen, "--role %s: cmd= is empty", r->name);
			r->cmd = strdup(p + 4);
			if (!r->cmd)
				return phx_errf(err, errlen, "out of memory");
			return 0;
		}
		end = strchr(p, ':');
		if (parse_field(r, p, end ? (size_t)(end - p) : strlen(p), &seen, err, errlen) <
		    0) {
			phx_role_free(r);
			return -1;
		}
		p = end;
	}
	return 0;
}

void phx_role_free(struct phx_role *r)
{
	free(r->cmd);
	r->cmd = NULL;
}

int phx_roles_keep(struct phx_role *roles, size_t *n, const char *name, char *err, size_t errlen)
{
	size_t k = *n;

	for (size_t i = 0; i < *n; i++) {
		if (!strcmp(roles[i].name, name))
			k = i;
	}
	if (k == *n)
		return phx_errf(err, errlen,
				"--step-role %s: no --role of that name; the driver gives each "
				"role's step its own name",
				name);
	for (size_t i = 0; i < *n; i++) {
		if (i != k)
			phx_role_free(&roles[i]);
	}
	roles[0] = roles[k];
	roles[0].nodes = 0;
	roles[0].nodes_max = 0;
	roles[0].spares = 0;
	*n = 1;
	return 0;
}

int phx_roles_assign(struct phx_role *roles, size_t n, unsigned nagents, char *err, size_t errlen)
{
	unsigned long given = 0, rest = 0;
	long open = -1;
	unsigned next = 0;

	for (size_t i = 0; i < n; i++) {
		if (roles[i].nodes) {
			given += roles[i].nodes;
			continue;
		}
		if (open >= 0)
			return phx_errf(err, errlen,
					"roles %s and %s both leave nodes= out; only one role "
					"can take the nodes the others leave",
					roles[open].name, roles[i].name);
		open = (long)i;
	}
	if (given > nagents || (open < 0 && given != nagents) || (open >= 0 && given == nagents))
		return phx_errf(err, errlen,
				"the roles ask for %lu node(s)%s and the step has %u; give the "
				"step as many nodes (srun -N) or leave nodes= out of one role",
				given, open >= 0 ? " plus at least one" : "", nagents);
	rest = nagents - given;
	for (size_t i = 0; i < n; i++) {
		if ((long)i == open)
			roles[i].nodes = (unsigned)rest;
		roles[i].first_node = next;
		next += roles[i].nodes;
	}
	return 0;
}

unsigned phx_role_of_agent(const struct phx_role *roles, size_t n, unsigned agent)
{
	for (size_t i = 0; i < n; i++) {
		if (agent >= roles[i].first_node && agent - roles[i].first_node < roles[i].nodes)
			return (unsigned)i;
	}
	return 0;
}

int phx_role_argv(const char *cmd, char **buf, char *argv[PHX_ROLE_ARGV_MAX + 1])
{
	static const char shell[] = "|&;<>()$`\\\"'*?[]#~{}!\n";
	size_t n = 0;
	char *save = NULL;

	*buf = strdup(cmd);
	if (!*buf)
		return -1;
	/* Shell syntax: the shell runs it; a plain command line: exec'd directly. */
	if (strpbrk(cmd, shell) || strspn(cmd, " \t") == strlen(cmd)) {
		argv[0] = "/bin/sh";
		argv[1] = "-c";
		argv[2] = *buf;
		argv[3] = NULL;
		return 0;
	}
	for (char *w = strtok_r(*buf, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
		if (n == PHX_ROLE_ARGV_MAX) {
			strcpy(*buf, cmd);
			argv[0] = "/bin/sh";
			argv[1] = "-c";
			argv[2] = *buf;
			argv[3] = NULL;
			return 0;
		}
		argv[n++] = w;
	}
	argv[n] = NULL;
	return 0;
}
