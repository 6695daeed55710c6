// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's client of phalanx-ckptd. The daemon is an observer of the
 * job, never on its path: the client is non-blocking, and whatever the
 * daemon does (away, restarted, refusing) the workers train on. Reports
 * made while it is away are queued by the client and sent on its return;
 * heartbeats are not (a late heartbeat says nothing).
 *
 * Checkpoints: agent_ckptd_ckpt.c.
 */
#include "config.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checkpoint/proto/ckpt_client.h"
#include "checkpoint/proto/heartbeat.h"
#include "common/clock.h"
#include "common/log.h"
#include "launcher/options.h"
#include "launcher/output.h"
#include "launcher/restart.h"
#include "launcher/agent/agent.h"
#include "launcher/agent/agent_ckptd.h"
#include "launcher/agent/agent_ckptd_int.h"

static void on_connected(void *arg, uint64_t committed, uint64_t step)
{
	struct phx_agent *a = arg;

	if (!a->ckptd->said_connected || phx_log_get_level() >= PHX_LOG_DEBUG)
		phx_info("registered with phalanx-ckptd from %s (its newest generation %lu at "
			 "step %lu)",
			 a->node, (unsigned long)committed, (unsigned long)step);
	a->ckptd->said_connected = true;
}

static void on_refused(void *arg, const char *reason)
{
	struct phx_agent *a = arg;

	phx_warn("phalanx-ckptd refused the agent on %s: %s; training goes on, the agent "
		 "tries again",
		 a->node, reason);
}

static void on_commit(void *arg, uint64_t gen, uint64_t step, uint64_t keep_from)
{
	struct phx_agent *a = arg;

	(void)keep_from; /* the agents collect their tiers by checkpoint.keep themselves */
	if (gen > a->ckptd->daemon_gen)
		a->ckptd->daemon_gen = gen;
	phx_debug("phalanx-ckptd cataloged generation %lu (step %lu)", (unsigned long)gen,
		  (unsigned long)step);
}

static void on_aborted(void *arg, uint64_t gen, const char *reason)
{
	struct phx_agent *a = arg;

	/* The agents' own commit stands: the daemon's catalog only lacks it. */
	phx_warn("phalanx-ckptd did not catalog generation %lu of %s: %s; it stays committed "
		 "in the agents' tiers",
		 (unsigned long)gen, a->node, reason);
}

/* The main loop's source: the client's socket, which also paces the heartbeats. */
static int link_fd(void *ctx, short *events)
{
	const struct phx_agent *a = ctx;

	if (!a->ckptd)
		return -1;
	*events = phx_ckpt_client_events(a->ckptd->client);
	return phx_ckpt_client_fd(a->ckptd->client);
}

static int link_timeout_ms(void *ctx)
{
	const struct phx_agent *a = ctx;
	uint64_t now;
	int t;

	if (!a->ckptd)
		return -1;
	t = phx_ckpt_client_timeout_ms(a->ckptd->client);
	if (!phx_ckpt_client_ready(a->ckptd->client))
		return t;
	now = phx_now_ns(CLOCK_MONOTONIC);
	if (a->ckptd->next_beat_ns <= now)
		return 0;
	return (int)((a->ckptd->next_beat_ns - now) / 1000000ull);
}

/* After every poll (revents may be 0): the client's work and a heartbeat when due. */
static void link_handle(void *ctx, short revents)
{
	struct phx_agent *a = ctx;
	struct phx_agent_ckptd *d = a->ckptd;
	uint64_t now;

	if (!d)
		return;
	phx_ckpt_client_handle(d->client, revents);
	if (!phx_ckpt_client_ready(d->client))
		return;
	now = phx_now_ns(CLOCK_MONOTONIC);
	if (now < d->next_beat_ns)
		return;
	phx_ckpt_client_heartbeat(d->client, phx_agent_ckptd_newest_step(a));
	d->next_beat_ns = now + (uint64_t)phx_ckpt_client_heartbeat_ms(d->client) * 1000000ull;
}

int phx_agent_ckptd_setup(struct phx_agent *a)
{
	const char *addr = phx_ckptd_address(&a->conf), *token = getenv("PHALANX_JOB_TOKEN");
	const char *job = getenv("SLURM_JOB_ID");
	struct phx_ckpt_client_ops ops = { .connected = on_connected,
					   .commit = on_commit,
					   .aborted = on_aborted,
					   .refused = on_refused };
	struct phx_ckpt_client_conf cc = { 0 };
	struct phx_agent_source source = { .fd = link_fd,
					   .handle = link_handle,
					   .timeout_ms = link_timeout_ms,
					   .every_round = true,
					   .ctx = a };
	char err[512];

	if (!addr[0])
		return 0;
	/* Its catalog and recovery take a job's agents for one step: not its roles' steps. */
	if (a->o->step_role) {
		if (a->pmix.me.rank == 0)
			phx_info("role %s: its step does not report to phalanx-ckptd at %s; roles "
				 "in steps of their own save through their own checkpoints",
				 a->o->step_role, addr);
		return 0;
	}
	if (!token || !job) {
		if (a->pmix.me.rank == 0)
			phx_warn("phalanx-ckptd at %s is configured but %s is not set; the "
				 "agents do not report to it (run under Slurm with the Phalanx "
				 "plugin)",
				 addr, token ? "SLURM_JOB_ID" : "PHALANX_JOB_TOKEN");
		return 0;
	}
	a->ckptd = calloc(1, sizeof(*a->ckptd));
	if (!a->ckptd) {
		phx_error("out of memory: the agent does not report to phalanx-ckptd");
		return 0;
	}
	cc.address = addr;
	cc.job = (uint32_t)strtoul(job, NULL, 10);
	cc.uid = (uint32_t)getuid();
	cc.token = token;
	cc.node = a->node;
	cc.nodes = a->pmix.size;
	cc.ranks = (uint32_t)a->world;
	cc.layout = a->o->layout ? a->o->layout : "";
	a->ckptd->client = phx_ckpt_client_new(&cc, &ops, a, err, sizeof(err));
	if (!a->ckptd->client) {
		phx_warn("phalanx-ckptd at %s: %s; the agent on %s does not report to it", addr,
			 err, a->node);
		free(a->ckptd);
		a->ckptd = NULL;
		return 0;
	}
	if (phx_agent_pump_add(a, &source) < 0) {
		phx_ckpt_client_free(a->ckptd->client);
		free(a->ckptd);
		a->ckptd = NULL;
		return 0;
	}
	/* Connects now, without waiting. */
	phx_ckpt_client_handle(a->ckptd->client, 0);
	return 0;
}

void phx_agent_ckptd_fini(struct phx_agent *a)
{
	struct phx_agent_ckptd *d = a->ckptd;
	uint64_t until;

	if (!d)
		return;
	/* The last reports ("done") get a moment to leave, never more. */
	until = phx_now_ns(CLOCK_MONOTONIC) + 500000000ull;
	while (phx_ckpt_client_ready(d->client) && phx_now_ns(CLOCK_MONOTONIC) < until &&
	       (phx_ckpt_client_events(d->client) & POLLOUT)) {
		struct pollfd p = { phx_ckpt_client_fd(d->client),
				    phx_ckpt_client_events(d->client), 0 };

		if (poll(&p, 1, 50) < 0)
			break;
		phx_ckpt_client_handle(d->client, p.revents);
	}
	phx_ckpt_client_free(d->client);
	free(d);
	a->ckptd = NULL;
}

uint64_t phx_agent_ckptd_newest_step(const struct phx_agent *a)
{
	const struct phx_hb_slot *s;
	uint64_t best = 0;

	if (!a->hb)
		return 0;
	s = (const struct phx_hb_slot *)((const char *)a->hb + sizeof(struct phx_hb_header));
	for (unsigned i = 0; i < a->nproc; i++) {
		uint64_t v = atomic_load(&s[i].step);

		if (atomic_load(&s[i].beat_ns) && v > best)
			best = v;
	}
	return best;
}

void phx_agent_ckptd_report(struct phx_agent *a, const char *kind, uint64_t value,
			    const char *reason)
{
	if (!a->ckptd)
		return;
	if (phx_ckpt_client_report(a->ckptd->client, kind, NULL, phx_agent_ckptd_newest_step(a),
				   value, reason) < 0)
		phx_warn("phalanx-ckptd: the %s report of %s was not queued", kind, a->node);
	else
		phx_debug("phalanx-ckptd: %s report from %s queued", kind, a->node);
}

void phx_agent_ckptd_xid(struct phx_agent *a, unsigned code, const char *reason)
{
	if (!a->ckptd)
		return;
	if (phx_ckpt_client_report(a->ckptd->client, "xid", a->node, phx_agent_ckptd_newest_step(a),
				   code, reason) < 0)
		phx_warn("phalanx-ckptd: the Xid report of %s was not queued", a->node);
}

void phx_agent_ckptd_straggler(struct phx_agent *a, const char *node, uint64_t lost_us,
			       const char *reason)
{
	if (!a->ckptd)
		return;
	if (phx_ckpt_client_report(a->ckptd->client, "straggler", node,
				   phx_agent_ckptd_newest_step(a), lost_us, reason) < 0)
		phx_warn("phalanx-ckptd: the straggler report of %s was not queued", node);
}

/* The failed worker's step, or the node's newest when it never beat. */
static uint64_t worker_step(const struct phx_agent *a, long rank)
{
	const struct phx_hb_slot *s;

	s = (const struct phx_hb_slot *)((const char *)a->hb + sizeof(struct phx_hb_header));
	for (unsigned i = 0; a->hb && i < a->nproc; i++) {
		if ((long)a->w[i].rank == rank && atomic_load(&s[i].beat_ns))
			return atomic_load(&s[i].step);
	}
	return phx_agent_ckptd_newest_step(a);
}

void phx_agent_ckptd_report_failure(struct phx_agent *a, const struct phx_report *r,
				    bool restarting)
{
	char path[4096], how[128], msg[1024], trace[4096], sig[256];
	uint64_t now = phx_now_ns(CLOCK_REALTIME), late = 0;

	if (!a->ckptd)
		return;
	if (phx_worker_error_read(a->run_dir, r->epoch, (unsigned long)r->fail_rank, path,
				  sizeof(path), msg, sizeof(msg), trace, sizeof(trace)) < 0)
		msg[0] = '\0';
	phx_fail_describe(r, how, sizeof(how));
	phx_crash_signature(msg, how, worker_step(a, r->fail_rank), sig, sizeof(sig));
	/* Detection: from the failure (a hang: its last beat) to this report. */
	if (r->fail_ns && now > r->fail_ns)
		late = (now - r->fail_ns) / 1000;
	phx_agent_ckptd_report(a, r->kind == PHX_FAIL_HANG ? "hang" : "crash", late, sig);
	if (restarting)
		phx_agent_ckptd_report(a, "restart", 0, NULL);
}
