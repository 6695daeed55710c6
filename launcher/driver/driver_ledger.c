/* SPDX-License-Identifier: Apache-2.0 */
/* The roles' goodput ledger: see driver_ledger.h. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "launcher/driver/driver_ledger.h"

#define NO_ROLE ((size_t)-1)
#define DETECT_MAX_MS 600000u /* older silence is no detection time: a report was lost */

struct node_acct {
	size_t role; /* NO_ROLE: held by none */
	unsigned ranks;
	bool working; /* its workers reported a step since the launch */
	uint64_t since; /* the open interval's start */
	bool heard; /* a report came from its current agent */
	uint64_t heard_at, moved_at; /* its last report; when its step last changed */
	uint64_t step, wait_ms; /* the last report's */
	bool stepped;
	uint64_t t0, s0; /* its workers' first step since the launch, and when */
};

struct role_acct {
	struct phx_role_ledger led;
	double part[PHX_RL_PARTS]; /* rank-ms */
	bool stepped;
	uint64_t hi; /* the highest step its workers reported */
	bool resuming; /* failed: the next first step shows what is redone */
	uint64_t hi_at_fault;
	double ms_per_step; /* the newest a node's reports gave; 0: not known yet */
};

struct phx_drv_ledger {
	struct node_acct *node;
	size_t nnodes, nroles;
	struct role_acct role[PHX_RL_ROLES_MAX];
};

struct phx_drv_ledger *phx_drv_ledger_new(const char *const *names, size_t nroles, size_t nnodes,
					  uint64_t run)
{
	struct phx_drv_ledger *l = calloc(1, sizeof(*l));

	if (!l || nroles > PHX_RL_ROLES_MAX || !(l->node = calloc(nnodes, sizeof(*l->node)))) {
		free(l);
		return NULL;
	}
	l->nnodes = nnodes;
	l->nroles = nroles;
	for (size_t i = 0; i < nnodes; i++)
		l->node[i].role = NO_ROLE;
	for (size_t r = 0; r < nroles; r++) {
		snprintf(l->role[r].led.name, sizeof(l->role[r].led.name), "%s", names[r]);
		l->role[r].led.run = run;
	}
	return l;
}

void phx_drv_ledger_free(struct phx_drv_ledger *l)
{
	if (!l)
		return;
	free(l->node);
	free(l);
}

/* Node i's time since its interval began, into its role's part. */
static void close_interval(struct phx_drv_ledger *l, struct node_acct *n, uint64_t now)
{
	if (n->role != NO_ROLE && now > n->since)
		l->role[n->role].part[n->working ? PHX_RL_PRODUCTIVE : PHX_RL_RESTART] +=
			(double)(now - n->since) * n->ranks;
	if (now > n->since)
		n->since = now;
}

/* Up to ms of role r's productive time into part. */
static void take(struct role_acct *ra, enum phx_rl_part part, double ms)
{
	if (ms > ra->part[PHX_RL_PRODUCTIVE])
		ms = ra->part[PHX_RL_PRODUCTIVE];
	if (ms <= 0)
		return;
	ra->part[PHX_RL_PRODUCTIVE] -= ms;
	ra->part[part] += ms;
}

static struct node_acct *held(struct phx_drv_ledger *l, size_t i, size_t r)
{
	if (!l || i >= l->nnodes || r >= l->nroles || l->node[i].role != r)
		return NULL;
	return &l->node[i];
}

void phx_drv_ledger_launch(struct phx_drv_ledger *l, size_t i, size_t r, unsigned nproc,
			   uint64_t now_ms)
{
	struct node_acct *n;

	if (!l || i >= l->nnodes || r >= l->nroles)
		return;
	n = &l->node[i];
	close_interval(l, n, now_ms);
	*n = (struct node_acct){ .role = r, .ranks = nproc, .since = now_ms };
}

void phx_drv_ledger_idle(struct phx_drv_ledger *l, size_t i, size_t r, uint64_t now_ms)
{
	struct node_acct *n = held(l, i, r);

	if (!n)
		return;
	close_interval(l, n, now_ms);
	n->working = false;
}

void phx_drv_ledger_release(struct phx_drv_ledger *l, size_t i, size_t r, uint64_t now_ms)
{
	struct node_acct *n = held(l, i, r);

	if (!n)
		return;
	close_interval(l, n, now_ms);
	n->role = NO_ROLE;
	n->working = false;
}

void phx_drv_ledger_fault(struct phx_drv_ledger *l, size_t r, size_t i, bool hung, uint64_t now_ms)
{
	struct node_acct *n = held(l, i, r);
	struct role_acct *ra;

	if (!l || r >= l->nroles)
		return;
	ra = &l->role[r];
	ra->led.failures++;
	ra->resuming = ra->stepped;
	ra->hi_at_fault = ra->hi;
	if (!n)
		return;
	close_interval(l, n, now_ms);
	if (n->heard) {
		uint64_t from = hung ? n->moved_at : n->heard_at;

		if (from < now_ms && now_ms - from < DETECT_MAX_MS)
			take(ra, PHX_RL_DETECT, (double)(now_ms - from) * n->ranks);
	}
}

static unsigned role_ranks(const struct phx_drv_ledger *l, size_t r)
{
	unsigned ranks = 0;

	for (size_t i = 0; i < l->nnodes; i++)
		if (l->node[i].role == r)
			ranks += l->node[i].ranks;
	return ranks;
}

/*
 * The role's first step after a failure: the steps it does again are those
 * between the checkpoint its workers resumed from and the highest reported
 * before. Without a checkpoint (a stateless role, or none saved yet) it
 * redoes nothing it could have kept.
 */
static void resumed(struct phx_drv_ledger *l, size_t r, const struct phx_progress *p)
{
	struct role_acct *ra = &l->role[r];

	ra->resuming = false;
	if (p->resumed && ra->hi_at_fault > p->resumed_step && ra->ms_per_step > 0)
		take(ra, PHX_RL_LOST,
		     (double)(ra->hi_at_fault - p->resumed_step) * ra->ms_per_step *
			     role_ranks(l, r));
	ra->hi = p->step; /* this run's, from here */
}

void phx_drv_ledger_progress(struct phx_drv_ledger *l, size_t i, const struct phx_progress *p,
			     uint64_t now_ms)
{
	struct node_acct *n;
	size_t r;

	if (!l || i >= l->nnodes || (r = l->node[i].role) == NO_ROLE)
		return;
	n = &l->node[i];
	close_interval(l, n, now_ms); /* waits come out of productive time up to now */
	/* A new agent counts its waits from 0. */
	if (n->heard && p->wait_ms >= n->wait_ms)
		take(&l->role[r], PHX_RL_WAITING, (double)(p->wait_ms - n->wait_ms));
	else if (!n->heard)
		take(&l->role[r], PHX_RL_WAITING, (double)p->wait_ms);
	if (!n->heard || p->stepped != n->stepped || p->step != n->step)
		n->moved_at = now_ms;
	n->heard = true;
	n->heard_at = now_ms;
	n->wait_ms = p->wait_ms;
	n->stepped = p->stepped;
	n->step = p->step;
	if (!p->stepped)
		return;
	if (!n->working) {
		n->working = true;
		n->t0 = now_ms;
		n->s0 = p->step;
		if (l->role[r].resuming)
			resumed(l, r, p);
	} else if (p->step > n->s0 && now_ms > n->t0) {
		l->role[r].ms_per_step = (double)(now_ms - n->t0) / (double)(p->step - n->s0);
	}
	if (!l->role[r].stepped || p->step > l->role[r].hi)
		l->role[r].hi = p->step;
	l->role[r].stepped = true;
}

void phx_drv_ledger_get(const struct phx_drv_ledger *l, size_t r, uint64_t now_ms,
			struct phx_role_ledger *out)
{
	struct role_acct ra = l->role[r];

	for (size_t i = 0; i < l->nnodes; i++) {
		const struct node_acct *n = &l->node[i];

		if (n->role == r && now_ms > n->since)
			ra.part[n->working ? PHX_RL_PRODUCTIVE : PHX_RL_RESTART] +=
				(double)(now_ms - n->since) * n->ranks;
	}
	*out = ra.led;
	out->ranks = role_ranks(l, r);
	for (int k = 0; k < PHX_RL_PARTS; k++)
		out->part_ms[k] = ra.part[k] > 0 ? (uint64_t)(ra.part[k] + 0.5) : 0;
}
