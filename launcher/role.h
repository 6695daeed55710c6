/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Roles of an MPMD job (role.c): each its own command, layout, nodes and
 * restart policy. Pure, so every rule is unit tested and fuzzed.
 */
#ifndef PHX_LAUNCHER_ROLE_H
#define PHX_LAUNCHER_ROLE_H

#include <stddef.h>

#define PHX_ROLE_MAX 16
#define PHX_ROLE_NAME_MAX 32
#define PHX_ROLE_LAYOUT_MAX 128

/* Whether a role's failure ends the job (fatal=yes|no). */
enum phx_role_fatal {
	PHX_FATAL_DEFAULT = 0, /* the first role's does, the others' do not */
	PHX_FATAL_YES,
	PHX_FATAL_NO,
};

enum phx_restart_policy {
	PHX_RESTART_GROUP = 0, /* the role's workers restart together */
	PHX_RESTART_SELF, /* only the failed worker restarts */
};

/*
 * One role of an MPMD job (--role NAME[:FIELD]...): its own command,
 * layout, nodes and restart policy. Roles take the step's nodes in Slurm's
 * order, in the order they were given; global ranks follow the same order.
 */
struct phx_role {
	char name[PHX_ROLE_NAME_MAX];
	char layout[PHX_ROLE_LAYOUT_MAX]; /* "": --layout, else dp=* */
	unsigned nodes; /* 0: the nodes the other roles leave; the least with nodes_max */
	unsigned nodes_max; /* nodes=MIN-MAX, an elastic pool: the most; 0: fixed at nodes */
	unsigned spares; /* nodes held for this role alone */
	int max_relaunches; /* -1: the job's --max-relaunches */
	enum phx_role_fatal fatal;
	unsigned nproc; /* 0: --nproc-per-node */
	enum phx_restart_policy restart;
	int max_restarts; /* -1: --max-restarts */
	char *cmd; /* run with /bin/sh -c; NULL: the command after -- */
	/* Resolved for a step by phx_roles_assign(): */
	unsigned first_node; /* agent rank of its first node */
};

/* "trainer:tp=8,pp=2:nodes=6", "rollout:nodes=2:restart=self:cmd=python r.py". 0 or -1. */
int phx_role_parse(const char *spec, struct phx_role *r, char *err, size_t errlen);
void phx_role_free(struct phx_role *r);
/* Gives each role its nodes among nagents agents (nodes=0: the rest). 0 or -1. */
int phx_roles_assign(struct phx_role *roles, size_t n, unsigned nagents, char *err, size_t errlen);
/*
 * Keeps only role `name`, on every node (the driver runs each role in a
 * step of its own); the others are freed. 0, or -1 when there is none.
 */
int phx_roles_keep(struct phx_role *roles, size_t *n, const char *name, char *err, size_t errlen);
/* The role an agent runs, after phx_roles_assign(). */
unsigned phx_role_of_agent(const struct phx_role *roles, size_t n, unsigned agent);
const char *phx_restart_policy_name(enum phx_restart_policy p);

#define PHX_ROLE_ARGV_MAX 256
/*
 * The argv of a role's cmd=: its words when it is a plain command line, so
 * the worker is the program itself (its exit status and signals are its
 * own), else /bin/sh -c CMD. *buf holds the words; free it. 0 or -1.
 */
int phx_role_argv(const char *cmd, char **buf, char *argv[PHX_ROLE_ARGV_MAX + 1]);

#endif
