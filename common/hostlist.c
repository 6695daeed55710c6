/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h>

#include "common/hostlist.h"

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

int phx_hostlist_expand(const char *expr, struct phx_hostnames *out, char *err, size_t errlen)
{
	hostlist_t hl;
	int count;
	char *name;

	out->names = NULL;
	out->count = 0;
	if (!expr || !*expr) {
		snprintf(err, errlen, "empty host list; give names such as 'node[01-04]'");
		return -1;
	}
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
	/* Slurm passes unbalanced brackets through as part of a name, or as none. */
	for (size_t i = 0; i < out->count; i++) {
		if (!out->names[i][0] || strpbrk(out->names[i], "[]")) {
			snprintf(err, errlen,
				 "bad host list '%.200s': unbalanced brackets; use Slurm syntax "
				 "such as 'node[01-04,7]'",
				 expr);
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
	hostlist_t hl;
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
	ranged = slurm_hostlist_ranged_string_malloc(hl);
	slurm_hostlist_destroy(hl);
	if (!ranged)
		snprintf(err, errlen, "out of memory");
	return ranged;
}
