/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h>

#include "common/hostlist.h"
#include "common/log.h"
#include "common/saturate.h"
#include "common/slurm_compat.h"

void phx_hostnames_free(struct phx_hostnames *hosts)
{
	if (!hosts)
		return;
	for (size_t i = 0; i < hosts->count; i++)
		free(hosts->names[i]);
	free(hosts->names);
	hosts->names = NULL;
	hosts->count = 0;
}

/*
 * Hosts one bracket body ("01-04,7") names. Read as leniently as libslurm's
 * strtoul() reads it ("0\xe9-100" is 101 hosts there), so never less.
 */
static uint64_t bracket_hosts(const char *body, size_t len)
{
	uint64_t total = 0;
	const char *end = body + len;

	while (body < end) {
		const char *comma = memchr(body, ',', (size_t)(end - body));
		const char *part_end = comma ? comma : end;
		const char *dash = memchr(body, '-', (size_t)(part_end - body));
		unsigned long long lo, hi;
		char *lo_end, *hi_end;
		uint64_t n = 1;

		if (dash) {
			lo = strtoull(body, &lo_end, 10);
			hi = strtoull(dash + 1, &hi_end, 10);
			if (lo_end != body && hi_end != dash + 1 && hi >= lo)
				n = phx_sat_add(hi - lo, 1);
		}
		total = phx_sat_add(total, n);
		body = comma ? comma + 1 : end;
	}
	return total ? total : 1;
}

struct hostlist_size {
	uint64_t hosts;
	uint64_t ranges; /* libslurm's internal ranges; taking names off costs ranges^2 */
	/* libslurm reads "[2-900][9]2-900]" as 801,908 names, slowly */
	bool bad_brackets;
};

/*
 * Sizes an expression before libslurm expands it. Slurm expands every
 * bracket of a name but the last into ranges of its own, eagerly, and
 * hands names out from a range array it shifts down each time a range is
 * used up: "n[1-1000][1-1000][1]" is a million one-host ranges and would
 * take minutes, before we could refuse the count.
 */
static struct hostlist_size hostlist_size(const char *expr)
{
	struct hostlist_size size = { 0, 0, false };
	uint64_t hosts = 0, lead = 0; /* of the current name; lead: all but its last bracket */

	for (const char *p = expr;; p++) {
		if (!*p || strchr(", \t\n", *p)) {
			size.hosts = phx_sat_add(size.hosts, hosts);
			size.ranges = phx_sat_add(size.ranges, lead);
			hosts = lead = 0;
			if (!*p)
				return size;
			continue;
		}
		if (*p == ']')
			goto bad_brackets;
		if (!hosts)
			hosts = lead = 1;
		if (*p == '[') {
			size_t body = strcspn(p + 1, "[]");

			if (p[1 + body] != ']')
				goto bad_brackets;
			lead = hosts;
			hosts = phx_sat_mul(hosts, bracket_hosts(p + 1, body));
			p += 1 + body;
		}
	}
bad_brackets:
	size.bad_brackets = true;
	return size;
}

static int refuse_brackets(const char *expr, char *err, size_t errlen)
{
	return phx_errf(err, errlen,
			"bad host list '%.200s': unbalanced brackets; use Slurm syntax such as "
			"'node[01-04,7]'",
			expr);
}

/*
 * libslurm keeps host numbers in an unsigned long and counts up to the
 * last one inclusively: a range that ends at 2^64 - 1, or at a number
 * past it read as that, never ends.
 */
static bool has_huge_number(const char *expr)
{
	const uint64_t limit = 1000000000000000000ULL; /* 10^18 */

	for (const char *p = expr; *p; p++) {
		uint64_t value = 0;

		while (*p >= '0' && *p <= '9') {
			value = value * 10 + (uint64_t)(*p++ - '0');
			if (value >= limit)
				return true;
		}
		if (!*p)
			break;
	}
	return false;
}

int phx_hostlist_check_size(const char *expr, uint64_t max_hosts, uint64_t max_ranges, char *err,
			    size_t errlen)
{
	struct hostlist_size size = hostlist_size(expr);

	if (size.bad_brackets)
		return refuse_brackets(expr, err, errlen);
	if (has_huge_number(expr))
		return phx_errf(err, errlen,
				"bad host list '%.200s': a host number of 10^18 or more; check for "
				"a typo",
				expr);
	if (size.hosts > max_hosts)
		return phx_errf(err, errlen,
				"host list '%.200s' names more than %" PRIu64
				" hosts; check its ranges",
				expr, max_hosts);
	if (size.ranges > max_ranges)
		return phx_errf(err, errlen,
				"host list '%.200s' has more than %" PRIu64
				" separate ranges; write it with ranges ('phalanx hostlist "
				"compress' does), the widest in the last brackets, e.g. "
				"'r[1-4]n[001-512]'",
				expr, max_ranges);
	return 0;
}

int phx_hostlist_expand(const char *expr, struct phx_hostnames *out, char *err, size_t errlen)
{
	phx_slurm_hostlist_t hl;
	int count;
	char *name;

	out->names = NULL;
	out->count = 0;
	if (!expr || !*expr) {
		snprintf(err, errlen, "empty host list; give names such as 'node[01-04]'");
		return -1;
	}
	if (phx_hostlist_check_size(expr, PHX_HOSTLIST_MAX_HOSTS, PHX_HOSTLIST_MAX_RANGES, err,
				    errlen) < 0)
		return -1;
	hl = slurm_hostlist_create(expr);
	if (!hl) {
		snprintf(err, errlen,
			 "bad host list '%.200s'; use Slurm syntax such as 'node[01-04,7]'", expr);
		return -1;
	}
	count = slurm_hostlist_count(hl);
	if (count <= 0 || (unsigned)count > PHX_HOSTLIST_MAX_HOSTS) {
		snprintf(err, errlen,
			 "host list '%.200s' names %d hosts; between 1 and %u are accepted", expr,
			 count, PHX_HOSTLIST_MAX_HOSTS);
		goto fail;
	}
	out->names = calloc((size_t)count, sizeof(*out->names));
	if (!out->names) {
		snprintf(err, errlen, "out of memory expanding %d hosts", count);
		goto fail;
	}
	/* slurm_hostlist_shift() hands out malloc'd names that we keep. */
	while (out->count < (size_t)count && (name = slurm_hostlist_shift(hl)))
		out->names[out->count++] = name;
	slurm_hostlist_destroy(hl);
	if (out->count != (size_t)count) {
		snprintf(err, errlen, "out of memory expanding '%.200s'", expr);
		phx_hostnames_free(out);
		return -1;
	}
	/* Slurm's quirks could still pass a bracket through into a name. */
	for (size_t i = 0; i < out->count; i++) {
		if (!out->names[i][0] || strpbrk(out->names[i], "[]")) {
			refuse_brackets(expr, err, errlen);
			phx_hostnames_free(out);
			return -1;
		}
	}
	return 0;
fail:
	slurm_hostlist_destroy(hl);
	return -1;
}

char *phx_hostlist_compress(char *const *names, size_t count, char *err, size_t errlen)
{
	phx_slurm_hostlist_t hl;
	char *ranged;

	if (count == 0) {
		snprintf(err, errlen, "no hosts to compress");
		return NULL;
	}
	hl = slurm_hostlist_create(NULL);
	if (!hl) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < count; i++) {
		/* push_host takes a single name literally: no brackets, no commas. */
		if (!names[i] || !*names[i] || strpbrk(names[i], "[],") ||
		    slurm_hostlist_push_host(hl, names[i]) <= 0) {
			snprintf(err, errlen, "bad host name '%.200s' at position %zu",
				 names[i] ? names[i] : "(null)", i);
			slurm_hostlist_destroy(hl);
			return NULL;
		}
	}
	ranged = phx_slurm_hostlist_ranged(hl);
	slurm_hostlist_destroy(hl);
	if (!ranged)
		snprintf(err, errlen, "out of memory");
	return ranged;
}
