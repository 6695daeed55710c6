/* SPDX-License-Identifier: Apache-2.0 */
/* phalanx(1): the admin and user command line tool. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "cli/commands.h"

struct phx_command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
	const char *usage; /* NULL: run() answers --help itself */
};

static const struct phx_command commands[] = {
	{ "check", phx_cmd_check, "test GPUs and NCCL links of nodes; drain bad ones", NULL },
	{ "ckpt", phx_cmd_ckpt, "list, verify or remove committed checkpoint generations",
	  phx_ckpt_usage },
	{ "config", phx_cmd_config, "check or show phalanx.yaml", phx_config_usage },
	{ "goodput", phx_cmd_goodput, "where a job's time went; goodput at scale (--model)",
	  phx_goodput_usage },
	{ "health", phx_cmd_health, "run the node health checks of the job prolog", NULL },
	{ "hostlist", phx_cmd_hostlist, "expand or compress Slurm host lists", phx_hostlist_usage },
	{ "keygen", phx_cmd_keygen, "create the cluster key that signs job tokens",
	  phx_keygen_usage },
	{ "plan", phx_cmd_plan, "place the ranks of a parallelism layout on nodes", NULL },
	{ "status", phx_cmd_status, "jobs, agents and intervals known to phalanx-ckptd",
	  phx_status_usage },
	{ "topo", phx_cmd_topo, "show GPUs, NICs, NUMA nodes and the NIC of each GPU", NULL },
};

static void usage(FILE *out)
{
	fprintf(out, "usage: phalanx [--version] COMMAND [ARGS]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\nSee phalanx(1) and phalanx(7).\n");
}

/* 1 when an argument before "--" is --help or -h. */
static int wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return 1;
	return 0;
}

static int run(const struct phx_command *c, int argc, char **argv)
{
	if (c->usage && wants_help(argc, argv)) {
		printf("%s\n%s\n\nSee phalanx(1).\n", c->usage, c->summary);
		return 0;
	}
	return c->run(argc, argv);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("phalanx %s\n", PACKAGE_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (!strcmp(argv[1], commands[i].name))
			return run(&commands[i], argc - 1, argv + 1);
	}
	phx_error("unknown command '%s'; run 'phalanx --help' for the list", argv[1]);
	return 2;
}
