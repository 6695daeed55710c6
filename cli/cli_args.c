/* SPDX-License-Identifier: Apache-2.0 */
/* Argument errors of the phalanx subcommands, worded the same in each. */
#include "config.h"

#include <getopt.h>

#include "common/log.h"
#include "cli/cli_args.h"

int phx_cli_option_error(const char *cmd, int c, char **argv, const char *usage)
{
	if (c == ':')
		phx_error("%s: option '%s' needs a value\n%s", cmd, argv[optind - 1], usage);
	else
		phx_error("%s: unknown option '%s'\n%s", cmd, argv[optind - 1], usage);
	return 2;
}

int phx_cli_no_arguments(const char *cmd, int argc, char **argv, const char *usage)
{
	if (optind == argc)
		return 0;
	phx_error("%s: unexpected argument '%s'\n%s", cmd, argv[optind], usage);
	return 2;
}
