/* SPDX-License-Identifier: Apache-2.0 */
/* phalanx hostlist expand EXPR | compress NAME... */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hostlist.h"
#include "common/log.h"
#include "cli/commands.h"

static int expand(const char *expr)
{
	struct phx_hostnames hosts;
	char err[512];

	if (phx_hostlist_expand(expr, &hosts, err, sizeof(err)) < 0) {
		phx_error("%s", err);
		return 1;
	}
	for (size_t i = 0; i < hosts.count; i++)
		puts(hosts.names[i]);
	phx_hostnames_free(&hosts);
	return 0;
}

static int compress(int n, char **names)
{
	char err[512];
	char *ranged = phx_hostlist_compress(names, (size_t)n, err, sizeof(err));

	if (!ranged) {
		phx_error("%s", err);
		return 1;
	}
	puts(ranged);
	free(ranged);
	return 0;
}

const char phx_hostlist_usage[] =
	"usage: phalanx hostlist expand EXPR | phalanx hostlist compress NAME...\n";

int phx_cmd_hostlist(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "expand"))
		return expand(argv[2]);
	if (argc >= 3 && !strcmp(argv[1], "compress"))
		return compress(argc - 2, argv + 2);
	phx_error("%s", phx_hostlist_usage);
	return 2;
}
