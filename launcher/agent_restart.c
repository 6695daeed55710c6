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
#include <stdio.h>
#include <string.h>

#include "launcher/agent.h"

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

void phx_restart_decide(const struct phx_report *r, size_t n, unsigned epoch, unsigned max_restarts,
			struct phx_decision *d)
{
	size_t done = 0;
	bool shutdown = false;

	d->action = PHX_ACT_CONTINUE;
	d->first = -1;
	for (size_t i = 0; i < n; i++) {
		if (r[i].state == PHX_NODE_SHUTDOWN) {
			shutdown = true;
			continue;
		}
		/* Another epoch: workers already stopped for a restart. */
		if (r[i].epoch != epoch)
			continue;
		if (r[i].state == PHX_NODE_DONE)
			done++;
		else if (r[i].state == PHX_NODE_FAILED &&
			 (d->first < 0 || earlier(&r[i], &r[d->first])))
			d->first = (long)i;
	}
	if (shutdown)
		d->action = PHX_ACT_SHUTDOWN;
	else if (d->first >= 0)
		d->action = epoch < max_restarts ? PHX_ACT_RESTART : PHX_ACT_GIVE_UP;
	else if (n && done == n)
		d->action = PHX_ACT_SUCCESS;
}

int phx_report_format(const struct phx_report *r, char *buf, size_t len)
{
	return snprintf(buf, len, "1 %u %d %" PRIu64 " %ld %d %d %d", r->epoch, (int)r->state,
			r->fail_ns, r->fail_rank, (int)r->kind, r->code, r->waiting ? 1 : 0);
}

int phx_report_parse(const char *s, struct phx_report *r)
{
	int version, state, kind, waiting, used = 0;

	memset(r, 0, sizeof(*r));
	if (sscanf(s, "%d %u %d %" SCNu64 " %ld %d %d %d%n", &version, &r->epoch, &state,
		   &r->fail_ns, &r->fail_rank, &kind, &r->code, &waiting, &used) != 8 ||
	    s[used] || version != 1 || state < PHX_NODE_RUNNING || state > PHX_NODE_SHUTDOWN ||
	    kind < PHX_FAIL_NONE || kind > PHX_FAIL_HANG || (waiting != 0 && waiting != 1))
		return -1;
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
