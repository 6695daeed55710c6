/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which nodes the driver trusts: a node runs a step only after it passed
 * the preflight check (--preflight), and one brought in by a relaunch is
 * checked again first. Pure, so every rule is unit tested.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "health/preflight.h"
#include "launcher/driver/driver_preflight.h"

static bool member(const size_t *v, size_t n, size_t x)
{
	for (size_t i = 0; i < n; i++) {
		if (v[i] == x)
			return true;
	}
	return false;
}

size_t phx_drv_to_check(const bool *bad, bool *trusted, size_t n, const size_t *prev, size_t nprev,
			const size_t *next, size_t nnext, size_t *idx)
{
	size_t k = 0;

	/* A spare may have gone bad while it waited: its first step checks it again. */
	for (size_t i = 0; prev && i < nnext; i++) {
		if (!member(prev, nprev, next[i]))
			trusted[next[i]] = false;
	}
	for (size_t i = 0; i < n; i++) {
		if (!bad[i] && !trusted[i])
			idx[k++] = i;
	}
	return k;
}

void phx_drv_verdicts_for(const struct phx_check_verdict *all, size_t nall, char *const *hosts,
			  size_t n, const char *source, struct phx_check_verdict *out)
{
	for (size_t i = 0; i < n; i++) {
		size_t j;

		for (j = 0; j < nall && strcmp(all[j].node, hosts[i]); j++)
			;
		if (j < nall) {
			out[i] = all[j];
			continue;
		}
		memset(&out[i], 0, sizeof(out[i]));
		snprintf(out[i].node, sizeof(out[i].node), "%s", hosts[i]);
		out[i].state = PHX_CHECK_FAILED;
		snprintf(out[i].reason, sizeof(out[i].reason), "no result for it in %s", source);
	}
}
