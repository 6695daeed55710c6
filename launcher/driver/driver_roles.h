/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The nodes of a job whose roles run in steps of their own
 * (driver_roles.c), free of system state so every rule is unit tested:
 * which nodes each role runs on and keeps as spares, and what a role does
 * when one of its nodes is lost, or a node comes back.
 */
#ifndef PHX_LAUNCHER_DRIVER_DRIVER_ROLES_H
#define PHX_LAUNCHER_DRIVER_DRIVER_ROLES_H

#include <stdbool.h>
#include <stddef.h>

#include "launcher/role.h"

#define PHX_DRV_NO_NODE ((size_t)-1)
#define PHX_DRV_FREE (-1) /* owner[] or keep[]: no role */

enum phx_drv_role_state {
	PHX_ROLE_RUNNING = 0,
	PHX_ROLE_WAITING, /* fewer nodes than its least: waits for one */
	PHX_ROLE_GAVE_UP, /* relaunched as often as it may */
};

struct phx_drv_role {
	char name[PHX_ROLE_NAME_MAX];
	unsigned min, max; /* nodes: min == max for a fixed role */
	unsigned spares; /* nodes kept for it alone */
	bool fatal; /* its failure ends the job */
	unsigned relaunches, max_relaunches;
	unsigned epoch; /* goes up whenever its nodes change */
	unsigned nodes; /* nodes it runs on now */
	enum phx_drv_role_state state;
};

struct phx_drv_roles {
	size_t nalloc;
	const bool *bad; /* [nalloc]: the driver's, excluded for the rest of the job */
	int *owner; /* [nalloc]: the role running on it, or PHX_DRV_FREE */
	int *keep; /* [nalloc]: the role whose spare it is, or PHX_DRV_FREE (shared) */
	struct phx_drv_role role[PHX_ROLE_MAX];
	size_t n;
};

enum phx_drv_role_action {
	PHX_ROLE_RELAUNCH = 0, /* a fixed role: its step again, a spare in the lost node's place */
	PHX_ROLE_SHRINK, /* an elastic pool: goes on without the node */
	PHX_ROLE_GROW, /* an elastic pool: a step on d->node joins it */
	PHX_ROLE_WAIT, /* too few nodes, not fatal: the rest of the job goes on */
	PHX_ROLE_END_JOB, /* a fatal role cannot go on: requeue the job */
};

struct phx_drv_role_decision {
	enum phx_drv_role_action action;
	size_t node; /* RELAUNCH, GROW: the node it takes */
	int donor; /* the elastic pool that gave the node up (its step there ends), or -1 */
	char why[512];
};

/*
 * The roles' nodes, in allocation order over the healthy nodes: each role
 * its least, then each its spares, then the elastic pools up to their most;
 * the rest are spares any role may take. The first role is fatal unless
 * fatal=no, the others only with fatal=yes; max_relaunches is the job's
 * where a role has none. 0, or -1 with err set.
 */
int phx_drv_roles_init(struct phx_drv_roles *j, const struct phx_role *roles, size_t n,
		       size_t nalloc, const bool *bad, unsigned max_relaunches, char *err,
		       size_t errlen);
void phx_drv_roles_free(struct phx_drv_roles *j);
/* The nodes role r runs on, in allocation order, into idx[]; how many. */
size_t phx_drv_role_nodes(const struct phx_drv_roles *j, size_t r, size_t *idx);
/*
 * Node `node` of role r was lost (the caller marked it bad): what r does.
 * A fixed role takes its own spare, then a shared one, then a node of an
 * elastic pool above its least; an elastic pool refills from a spare, else
 * shrinks while it has its least.
 */
void phx_drv_role_lost(struct phx_drv_roles *j, size_t r, size_t node,
		       struct phx_drv_role_decision *d);
/*
 * A node came back (repaired, or its role's step ended): a waiting role or
 * an elastic pool below its most takes it (GROW, or RELAUNCH for a fixed
 * role that was waiting); returns the role, or -1 if it stays a spare.
 */
int phx_drv_role_returned(struct phx_drv_roles *j, size_t node, struct phx_drv_role_decision *d);

#endif
