/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The restart protocol's decisions. Agents agree in rounds: each puts its
 * report, all meet in one PMIx fence that collects the reports, and each
 * decides from the same set of reports with the same pure function, so
 * they take the same action without a leader. A failure that happens after
 * an agent put its report is in the next round's; by then every agent is
 * stopping its workers, the epoch has moved on, and the stale failure is
 * not acted on twice.
 */
#include "config.h"

#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "launcher/restart.h"
#include "launcher/role.h"

/*
 * The root cause: a worker that exited, died or stopped before one that
 * merely waits; then the earliest; the agent rank breaks ties, so all agree.
 */
static bool earlier(const struct phx_report *a, const struct phx_report *b)
{
	if (a->waiting != b->waiting)
		return !a->waiting;
	return a->fail_ns < b->fail_ns;
}

/*
 * The first failure of role k in this round, or -1; *spent: the first
 * failure of a worker out of restarts, or -1. In a group role that is the
 * role's epoch; in a self role each failed worker has its own count.
 */
static long role_first(const struct phx_report *r, size_t n, unsigned k,
		       const struct phx_role_state *role, long *spent)
{
	long first = -1;

	*spent = -1;
	for (size_t i = 0; i < n; i++) {
		if (r[i].role != k || r[i].state != PHX_NODE_FAILED)
			continue;
		/* Another epoch of a group role: workers already stopped for a restart. */
		if (role->policy == PHX_RESTART_GROUP && r[i].epoch != role->epoch)
			continue;
		if (first < 0 || earlier(&r[i], &r[first]))
			first = (long)i;
		if (r[i].epoch >= role->max_restarts && (*spent < 0 || earlier(&r[i], &r[*spent])))
			*spent = (long)i;
	}
	return first;
}

static bool is_done(const struct phx_report *r, const struct phx_role_state *roles, size_t nroles)
{
	if (r->state != PHX_NODE_DONE || r->role >= nroles)
		return false;
	return roles[r->role].policy == PHX_RESTART_SELF || r->epoch == roles[r->role].epoch;
}

static void decide_roles(const struct phx_report *r, size_t n, const struct phx_role_state *roles,
			 size_t nroles, struct phx_decision *d)
{
	long give_up = -1, restart = -1;

	for (size_t k = 0; k < nroles && k < PHX_ROLE_MAX; k++) {
		long spent, f = role_first(r, n, (unsigned)k, &roles[k], &spent);

		if (spent >= 0)
			f = spent;
		d->role_first[k] = f;
		if (f < 0)
			continue;
		if (spent < 0) {
			d->role_action[k] = PHX_ACT_RESTART;
			d->barrier |= roles[k].policy == PHX_RESTART_GROUP;
			if (restart < 0 || earlier(&r[f], &r[restart]))
				restart = f;
		} else {
			d->role_action[k] = PHX_ACT_GIVE_UP;
			if (give_up < 0 || earlier(&r[f], &r[give_up]))
				give_up = f;
		}
	}
	if (give_up >= 0) {
		d->action = PHX_ACT_GIVE_UP;
		d->first = give_up;
	} else if (restart >= 0) {
		d->action = PHX_ACT_RESTART;
		d->first = restart;
	}
}

void phx_restart_decide(const struct phx_report *r, size_t n, const struct phx_role_state *roles,
			size_t nroles, struct phx_decision *d)
{
	size_t done = 0, preempted = 0;
	bool shutdown = false;

	memset(d, 0, sizeof(*d));
	d->first = -1;
	for (size_t k = 0; k < PHX_ROLE_MAX; k++)
		d->role_first[k] = -1;
	for (size_t i = 0; i < n; i++) {
		shutdown |= r[i].state == PHX_NODE_SHUTDOWN;
		d->preempt |= r[i].state == PHX_NODE_PREEMPTING || r[i].state == PHX_NODE_PREEMPTED;
		preempted += r[i].state == PHX_NODE_PREEMPTED || r[i].state == PHX_NODE_DONE;
		done += is_done(&r[i], roles, nroles);
	}
	decide_roles(r, n, roles, nroles, d);
	if (shutdown) {
		d->action = PHX_ACT_SHUTDOWN;
	} else if (d->preempt) {
		/* Preempted: no restart, only waiting until every node's workers are gone. */
		for (size_t k = 0; k < PHX_ROLE_MAX; k++)
			d->role_action[k] = PHX_ACT_CONTINUE;
		d->barrier = false;
		d->action = preempted == n ? PHX_ACT_PREEMPTED : PHX_ACT_CONTINUE;
	} else if (d->action == PHX_ACT_CONTINUE && n && done == n) {
		d->action = PHX_ACT_SUCCESS;
	}
}

int phx_report_format(const struct phx_report *r, const char *rates, char *buf, size_t len)
{
	return snprintf(buf, len, "2 %u %u %d %" PRIu64 " %ld %d %d %d%s%s", r->role, r->epoch,
			(int)r->state, r->fail_ns, r->fail_rank, (int)r->kind, r->code,
			r->waiting ? 1 : 0, rates ? " ;" : "", rates ? rates : "");
}

int phx_report_parse(const char *s, size_t nroles, struct phx_report *r)
{
	int version, state, kind, waiting, used = 0;

	memset(r, 0, sizeof(*r));
	if (sscanf(s, "%d %u %u %d %" SCNu64 " %ld %d %d %d%n", &version, &r->role, &r->epoch,
		   &state, &r->fail_ns, &r->fail_rank, &kind, &r->code, &waiting, &used) != 9 ||
	    version != 2 || r->role >= nroles || state < PHX_NODE_RUNNING ||
	    state > PHX_NODE_PREEMPTED || kind < PHX_FAIL_NONE || kind > PHX_FAIL_HANG ||
	    (waiting != 0 && waiting != 1) || r->fail_rank < -1)
		return -1;
	if (s[used] && strncmp(s + used, " ;", 2))
		return -1;
	r->rates_at = s[used] ? (size_t)used + 2 : 0;
	r->waiting = waiting;
	r->state = (enum phx_node_state)state;
	r->kind = (enum phx_fail_kind)kind;
	return 0;
}

const char *phx_fail_describe(const struct phx_report *r, char *buf, size_t len)
{
	switch (r->kind) {
	case PHX_FAIL_EXIT:
		snprintf(buf, len, "exited with code %d", r->code);
		break;
	case PHX_FAIL_SIGNAL:
		snprintf(buf, len, "was killed by signal %d (SIG%s)", r->code,
			 sigabbrev_np(r->code) ? sigabbrev_np(r->code) : "?");
		break;
	case PHX_FAIL_HANG:
		snprintf(buf, len, "hung: no heartbeat progress for %d s", r->code);
		break;
	default:
		snprintf(buf, len, "failed");
	}
	return buf;
}
