/* SPDX-License-Identifier: Apache-2.0 */
/* What the subcommands of the phalanx tool share to check their arguments. */
#ifndef PHX_CLI_ARGS_H
#define PHX_CLI_ARGS_H

/*
 * For getopt_long's ':' (missing value) and '?' (unknown option): reports
 * the option of command cmd with its usage; returns 2, the usage status.
 */
int phx_cli_option_error(const char *cmd, int c, char **argv, const char *usage);
/* Refuses arguments left after the options; 0 when there are none, else 2. */
int phx_cli_no_arguments(const char *cmd, int argc, char **argv, const char *usage);

#endif
