/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Slurm hostlist expressions ("node[01-04,7],gpu5") through libslurm's own
 * hostlist code, so Phalanx reads and prints them exactly as Slurm does.
 */
#ifndef PHX_HOSTLIST_H
#define PHX_HOSTLIST_H

#include <stddef.h>
#include <stdint.h>

/* An expression naming more hosts than this is refused (typo guard). */
#define PHX_HOSTLIST_MAX_HOSTS (1u << 20)
/*
 * Nor one that libslurm would hold as more ranges than this: every bracket
 * of a name but the last multiplies them, and each name written out on its
 * own ("a,b,c") is one. Expanding costs ranges squared.
 */
#define PHX_HOSTLIST_MAX_RANGES (1u << 16)

struct phx_hostnames {
	char **names;
	size_t count;
};

/*
 * Expands expr into host names in the order Slurm gives them.
 * Returns 0, or -1 with a reason in err.
 */
int phx_hostlist_expand(const char *expr, struct phx_hostnames *out, char *err, size_t errlen);
/* Compresses names into a ranged expression; malloc'd, NULL on failure. */
char *phx_hostlist_compress(char *const *names, size_t count, char *err, size_t errlen);
/*
 * Refuses, before libslurm sees it, an expression with unbalanced or nested
 * brackets or a host number of 10^18 or more, or one naming more than
 * max_hosts or making more than max_ranges. Returns 0, or -1 with err.
 */
int phx_hostlist_check_size(const char *expr, uint64_t max_hosts, uint64_t max_ranges, char *err,
			    size_t errlen);
void phx_hostnames_free(struct phx_hostnames *hosts);

#endif
