/* SPDX-License-Identifier: Apache-2.0 */
/* Subcommands of the phalanx tool; each returns the process exit status. */
#ifndef PHX_COMMANDS_H
#define PHX_COMMANDS_H

/*
 * The usage of the subcommands that main() answers --help for (the others
 * answer it themselves): the text their errors print too.
 */
extern const char phx_ckpt_usage[], phx_status_usage[], phx_config_usage[];
extern const char phx_goodput_usage[], phx_hostlist_usage[], phx_keygen_usage[];

int phx_cmd_check(int argc, char **argv);
int phx_cmd_ckpt(int argc, char **argv);
int phx_cmd_config(int argc, char **argv);
int phx_cmd_goodput(int argc, char **argv);
int phx_cmd_health(int argc, char **argv);
int phx_cmd_hostlist(int argc, char **argv);
int phx_cmd_keygen(int argc, char **argv);
int phx_cmd_plan(int argc, char **argv);
int phx_cmd_status(int argc, char **argv);
int phx_cmd_topo(int argc, char **argv);

#endif
