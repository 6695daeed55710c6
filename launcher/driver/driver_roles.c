/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The nodes of a job whose roles run in steps of their own. Each role
 * runs on its least nodes, keeps its own spares, and an elastic pool
 * (nodes=MIN-MAX) takes what is left up to its most; the rest are spares
 * for any role. A node lost in one role touches no other role's step,
 * except where a fixed role has no spare left: then an elastic pool above
 * its least gives one up, since a pool can go on smaller and the fixed
 * role cannot go on at all.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "launcher/driver/driver_roles.h"

static bool elastic(const struct phx_drv_role *r)
{
	return r->max > r->min;
}

static bool usable(const struct phx_drv_roles *j, size_t i)
{
	return !j->bad[i] && j->owner[i] == PHX_DRV_FREE;
}

/* The first usable node kept for `keep` (a role, or PHX_DRV_FREE: shared). */
static size_t first_kept(const struct phx_drv_roles *j, int keep)
{
	for (size_t i = 0; i < j->nalloc; i++) {
		if (usable(j, i) && j->keep[i] == keep)
			return i;
	}
	return PHX_DRV_NO_NODE;
}

/* Gives role r the first `count` usable nodes kept for `keep`; how many it got. */
static unsigned give(struct phx_drv_roles *j, size_t r, int keep, unsigned count)
{
	unsigned got = 0;

	for (size_t i = 0; i < j->nalloc && got < count; i++) {
		if (usable(j, i) && j->keep[i] == keep) {
			j->owner[i] = (int)r;
			got++;
		}
	}
	j->role[r].nodes += got;
	return got;
}

static int check_roles(const struct phx_role *roles, size_t n, size_t healthy, char *err,
		       size_t errlen)
{
	unsigned long need = 0;

	for (size_t i = 0; i < n; i++) {
		if (!roles[i].nodes)
			return phx_errf(err, errlen,
					"--role %s: give every role nodes=N or nodes=MIN-MAX when "
					"roles run in steps of their own",
					roles[i].name);
		need += roles[i].nodes + roles[i].spares;
	}
	if (need > healthy)
		return phx_errf(err, errlen,
				"the roles need %lu node(s) with their spares and the allocation "
				"has %zu healthy; ask sbatch for more nodes (-N) or lower nodes= "
				"or spares=",
				need, healthy);
	return 0;
}

int phx_drv_roles_init(struct phx_drv_roles *j, const struct phx_role *roles, size_t n,
		       size_t nalloc, const bool *bad, unsigned max_relaunches, char *err,
		       size_t errlen)
{
	size_t healthy = 0;

	memset(j, 0, sizeof(*j));
	if (n > PHX_ROLE_MAX)
		return phx_errf(err, errlen, "at most %d roles", PHX_ROLE_MAX);
	for (size_t i = 0; i < nalloc; i++)
		healthy += !bad[i];
	if (check_roles(roles, n, healthy, err, errlen) < 0)
		return -1;
	j->owner = malloc((nalloc + 1) * sizeof(*j->owner));
	j->keep = malloc((nalloc + 1) * sizeof(*j->keep));
	if (!j->owner || !j->keep) {
		phx_drv_roles_free(j);
		return phx_errf(err, errlen, "out of memory");
	}
	j->nalloc = nalloc;
	j->bad = bad;
	j->n = n;
	for (size_t i = 0; i < nalloc; i++)
		j->owner[i] = j->keep[i] = PHX_DRV_FREE;
	for (size_t r = 0; r < n; r++) {
		struct phx_drv_role *x = &j->role[r];

		snprintf(x->name, sizeof(x->name), "%s", roles[r].name);
		x->min = roles[r].nodes;
		x->max = roles[r].nodes_max > x->min ? roles[r].nodes_max : x->min;
		x->spares = roles[r].spares;
		x->fatal = roles[r].fatal == PHX_FATAL_YES ||
			   (roles[r].fatal == PHX_FATAL_DEFAULT && r == 0);
		x->max_relaunches = roles[r].max_relaunches >= 0 ? (unsigned)roles[r].max_relaunches
								 : max_relaunches;
		give(j, r, PHX_DRV_FREE, x->min);
	}
	for (size_t r = 0; r < n; r++) {
		unsigned kept = 0;

		for (size_t i = 0; i < nalloc && kept < j->role[r].spares; i++) {
			if (usable(j, i) && j->keep[i] == PHX_DRV_FREE) {
				j->keep[i] = (int)r;
				kept++;
			}
		}
	}
	for (size_t r = 0; r < n; r++)
		give(j, r, PHX_DRV_FREE, j->role[r].max - j->role[r].min);
	return 0;
}

void phx_drv_roles_free(struct phx_drv_roles *j)
{
	free(j->owner);
	free(j->keep);
	j->owner = j->keep = NULL;
}

size_t phx_drv_role_nodes(const struct phx_drv_roles *j, size_t r, size_t *idx)
{
	size_t k = 0;

	for (size_t i = 0; i < j->nalloc; i++) {
		if (j->owner[i] == (int)r)
			idx[k++] = i;
	}
	return k;
}

/* The elastic pool with the most nodes above its least, not r; -1 if none has any. */
static int donor_for(const struct phx_drv_roles *j, size_t r)
{
	int best = -1;

	for (size_t p = 0; p < j->n; p++) {
		const struct phx_drv_role *x = &j->role[p];

		if (p == r || !elastic(x) || x->state != PHX_ROLE_RUNNING || x->nodes <= x->min)
			continue;
		if (best < 0 || x->nodes - x->min > j->role[best].nodes - j->role[best].min)
			best = (int)p;
	}
	return best;
}

/* The last node of pool p: it leaves the pool for another role. */
static size_t take_from(struct phx_drv_roles *j, int p)
{
	for (size_t i = j->nalloc; i-- > 0;) {
		if (j->owner[i] == p) {
			j->owner[i] = PHX_DRV_FREE;
			j->role[p].nodes--;
			j->role[p].epoch++;
			return i;
		}
	}
	return PHX_DRV_NO_NODE;
}

/* Role r gives up: its nodes go back to the shared spares. */
static void give_up(struct phx_drv_roles *j, size_t r, struct phx_drv_role_decision *d)
{
	struct phx_drv_role *x = &j->role[r];

	for (size_t i = 0; i < j->nalloc; i++) {
		if (j->owner[i] == (int)r)
			j->owner[i] = PHX_DRV_FREE;
	}
	x->nodes = 0;
	x->state = PHX_ROLE_GAVE_UP;
	d->action = x->fatal ? PHX_ROLE_END_JOB : PHX_ROLE_WAIT;
	snprintf(d->why, sizeof(d->why),
		 "role %s was relaunched %u time(s), its most (max-relaunches=%u)%s", x->name,
		 x->relaunches - 1, x->max_relaunches,
		 x->fatal ? "; it is fatal, so the job ends" : "; the other roles go on");
}

/* A fixed role, or a pool below its least, short of a node: who gives one. */
static void replace(struct phx_drv_roles *j, size_t r, struct phx_drv_role_decision *d)
{
	struct phx_drv_role *x = &j->role[r];
	size_t node = first_kept(j, (int)r);
	const char *from = "its spare";

	if (node == PHX_DRV_NO_NODE) {
		node = first_kept(j, PHX_DRV_FREE);
		from = "a shared spare";
	}
	if (node == PHX_DRV_NO_NODE && !elastic(x)) {
		d->donor = donor_for(j, r);
		node = d->donor >= 0 ? take_from(j, d->donor) : PHX_DRV_NO_NODE;
		from = "a node of an elastic pool above its least";
	}
	if (node == PHX_DRV_NO_NODE) {
		x->state = PHX_ROLE_WAITING;
		d->action = x->fatal ? PHX_ROLE_END_JOB : PHX_ROLE_WAIT;
		snprintf(d->why, sizeof(d->why), "role %s has %u of its %u node(s) and no spare%s",
			 x->name, x->nodes, x->min,
			 x->fatal ? "; it is fatal, so the job is requeued"
				  : "; it waits for a node, the other roles go on");
		return;
	}
	j->owner[node] = (int)r;
	x->nodes++;
	if (!elastic(x) && ++x->relaunches > x->max_relaunches) {
		give_up(j, r, d);
		return;
	}
	d->action = elastic(x) ? PHX_ROLE_GROW : PHX_ROLE_RELAUNCH;
	d->node = node;
	snprintf(d->why, sizeof(d->why), "role %s takes %s", x->name, from);
}

void phx_drv_role_lost(struct phx_drv_roles *j, size_t r, size_t node,
		       struct phx_drv_role_decision *d)
{
	struct phx_drv_role *x = &j->role[r];

	memset(d, 0, sizeof(*d));
	d->node = PHX_DRV_NO_NODE;
	d->donor = -1;
	if (j->owner[node] == (int)r) {
		j->owner[node] = PHX_DRV_FREE;
		x->nodes--;
	}
	x->epoch++;
	if (elastic(x) && x->nodes >= x->min && first_kept(j, (int)r) == PHX_DRV_NO_NODE &&
	    first_kept(j, PHX_DRV_FREE) == PHX_DRV_NO_NODE) {
		d->action = PHX_ROLE_SHRINK;
		snprintf(d->why, sizeof(d->why),
			 "role %s goes on with %u node(s) (nodes=%u-%u), no spare to refill it",
			 x->name, x->nodes, x->min, x->max);
		return;
	}
	replace(j, r, d);
}

int phx_drv_role_returned(struct phx_drv_roles *j, size_t node, struct phx_drv_role_decision *d)
{
	memset(d, 0, sizeof(*d));
	d->node = node;
	d->donor = -1;
	if (!usable(j, node))
		return -1;
	if (j->keep[node] >= 0 && j->role[j->keep[node]].state == PHX_ROLE_GAVE_UP)
		j->keep[node] = PHX_DRV_FREE;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t r = 0; r < j->n; r++) {
			struct phx_drv_role *x = &j->role[r];
			bool wants = pass ? x->state == PHX_ROLE_RUNNING && elastic(x) &&
						     x->nodes < x->max
					  : x->state == PHX_ROLE_WAITING;

			/* A role's own spare is for it alone. */
			if (!wants || (j->keep[node] >= 0 && j->keep[node] != (int)r))
				continue;
			j->owner[node] = (int)r;
			x->nodes++;
			x->epoch++;
			if (x->nodes >= x->min)
				x->state = PHX_ROLE_RUNNING;
			d->action = elastic(x)			   ? PHX_ROLE_GROW
				    : x->state == PHX_ROLE_RUNNING ? PHX_ROLE_RELAUNCH
								   : PHX_ROLE_WAIT;
			snprintf(d->why, sizeof(d->why),
				 "role %s takes a node that came back (%u of %u)", x->name,
				 x->nodes, x->max);
			return (int)r;
		}
	}
	return -1;
}
