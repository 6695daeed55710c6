/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Straggler detection. Each agent measures its workers' mean step time
 * over a window from the heartbeat page and sends the rates in its round
 * report, so every agent sees every rank's rate. A rank whose step time is
 * an outlier against the other ranks of its role (slower than their
 * median by at least a given percentage) is a straggler. The lower median keeps one
 * slow rank of two from hiding itself.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/role.h"
#include "launcher/straggler.h"

int phx_rate_format(const struct phx_rate *r, char *buf, size_t len, size_t *off)
{
	int n;

	if (*off >= len)
		return -1;
	n = snprintf(buf + *off, len - *off, " %lu:%" PRIu64 ":%" PRIu64, r->rank,
		     r->step_ns / 1000, r->steps);
	if (n < 0 || (size_t)n >= len - *off) {
		buf[*off] = '\0';
		return -1;
	}
	*off += (size_t)n;
	return 0;
}

int phx_rates_parse(const char *s, unsigned role, unsigned agent, unsigned long world,
		    struct phx_rate *out, size_t cap, size_t *n)
{
	while (*s) {
		unsigned long rank;
		uint64_t us, steps;
		int used = 0;

		if (*s != ' ' || *n >= cap ||
		    sscanf(s, " %lu:%" SCNu64 ":%" SCNu64 "%n", &rank, &us, &steps, &used) != 3 ||
		    rank >= world || !steps || us > UINT64_MAX / 1000)
			return -1;
		/* sscanf skips signs and blanks a number may not have here. */
		for (int i = 1; i < used; i++) {
			if (s[i] != ':' && (s[i] < '0' || s[i] > '9'))
				return -1;
		}
		out[*n] = (struct phx_rate){ .rank = rank,
					     .role = role,
					     .agent = agent,
					     .step_ns = us * 1000,
					     .steps = steps };
		(*n)++;
		s += used;
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The lower median of the step times of role, and how many there are. */
static uint64_t role_median(const struct phx_rate *r, size_t n, unsigned role, uint64_t *tmp,
			    unsigned *count)
{
	size_t m = 0;

	for (size_t i = 0; i < n; i++) {
		if (r[i].role == role)
			tmp[m++] = r[i].step_ns;
	}
	*count = (unsigned)m;
	if (!m)
		return 0;
	qsort(tmp, m, sizeof(*tmp), cmp_u64);
	return tmp[(m - 1) / 2];
}

size_t phx_straggler_detect(const struct phx_rate *r, size_t n, unsigned pct, uint64_t *median,
			    unsigned *peers, bool *slow)
{
	uint64_t *tmp = n ? malloc(n * sizeof(*tmp)) : NULL;
	size_t marked = 0;

	for (size_t i = 0; i < n; i++) {
		slow[i] = false;
		median[i] = 0;
		peers[i] = 0;
	}
	if (!tmp || !pct)
		goto out;
	/* Roles are few (PHX_ROLE_MAX): one pass per role keeps it O(n log n). */
	for (unsigned k = 0; k < PHX_ROLE_MAX; k++) {
		unsigned count;
		uint64_t med = role_median(r, n, k, tmp, &count);

		for (size_t j = 0; count && j < n; j++) {
			if (r[j].role != k)
				continue;
			median[j] = med;
			peers[j] = count;
			/* step >= median * (1 + pct/100), without overflow for any step time. */
			if (count >= 2 && med &&
			    (long double)r[j].step_ns * 100.0L >=
				    (long double)med * (100.0L + pct)) {
				slow[j] = true;
				marked++;
			}
		}
	}
out:
	free(tmp);
	return marked;
}
