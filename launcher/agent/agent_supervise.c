/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The supervision loop. Locally: worker exits (SIGCHLD through a
 * signalfd), output, forwarded signals, heartbeats. Across nodes: rounds
 * of agreement, one collecting PMIx fence every --sync-interval-ms, in
 * which each agent contributes its report and from which each takes the
 * same decision (phx_restart_decide). A restart is: every agent stops all
 * its workers, a second fence proves they all have (and hands out a fresh
 * rendezvous port), then every agent starts the next epoch's workers.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint/proto/heartbeat.h"
#include "common/clock.h"
#include "common/log.h"
#include "launcher/launch.h"
#include "launcher/options.h"
#include "launcher/output.h"
#include "launcher/restart.h"
#include "launcher/role.h"
#include "launcher/agent/agent.h"
#include "launcher/agent/agent_ckpt.h"
#include "launcher/agent/agent_ckptd.h"
#include "launcher/agent/agent_pmix.h"
#include "launcher/agent/agent_preempt.h"
#include "launcher/agent/agent_rates.h"
#include "launcher/agent/agent_result.h"
#include "launcher/agent/agent_wake.h"
#include "launcher/agent/agent_workers.h"

#define GO_ON (-1) /* not an exit code: keep supervising */

/*
 * Every fence has a key of its own. Slurm 22.05's PMIx server with PMIx
 * 4.2 clients was seen to answer PMIx_Get of a key put again with the
 * value of an earlier fence, which would make agents decide on stale
 * reports; a fresh key cannot be stale. The cost is one small value per
 * agent and round kept in PMIx's store for the life of the step.
 */
static void round_key(const struct phx_agent *a, unsigned long round, char *buf, size_t len)
{
	(void)a;
	snprintf(buf, len, "phx.r%lu", round);
}

static char proc_state(pid_t pid)
{
	char path[64], buf[512], *p, state = '?';
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return state;
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	if (p && p[1] == ' ')
		state = p[2];
	fclose(f);
	return state;
}

/*
 * The most suspect of the hung workers: a stopped or uninterruptible one
 * first (the others usually wait for it in a collective), then the one
 * furthest behind.
 */
static bool is_stuck(char state)
{
	return state == 'T' || state == 't' || state == 'D';
}

static bool more_suspect(char sa, const struct phx_hb_snapshot *a, char sb,
			 const struct phx_hb_snapshot *b)
{
	bool ta = is_stuck(sa), tb = is_stuck(sb);

	if (ta != tb)
		return ta;
	if (a->step != b->step)
		return a->step < b->step;
	return a->beat_ns < b->beat_ns;
}

/*
 * A worker without heartbeat progress for --hang-timeout is hung. It is
 * marked failed at once, so the news goes out in the next round, and its
 * evidence is taken right after (*evidence), before anything stops it.
 */
static void hang_check(struct phx_agent *a, struct phx_worker **evidence)
{
	uint64_t now = phx_now_ns(CLOCK_MONOTONIC), limit;
	struct phx_hb_snapshot snap, best = { 0 };
	struct phx_worker *suspect = NULL;
	bool self = a->roles[a->role].policy == PHX_RESTART_SELF;
	/*
	 * A worker that waits (likely in a collective) was reported: one
	 * stopped or stuck in the kernel found meanwhile is the better cause.
	 */
	bool better = !self && a->local.state == PHX_NODE_FAILED &&
		      a->local.kind == PHX_FAIL_HANG && a->local.waiting;
	char best_state = '?';
	unsigned hung = 0;

	if (a->o->hang_timeout_s <= 0 || a->preempting || a->shutdown_sig ||
	    (a->local.state != PHX_NODE_RUNNING && !better &&
	     !(self && a->local.state == PHX_NODE_FAILED)))
		return;
	limit = (uint64_t)a->o->hang_timeout_s * 1000000000ull;
	for (unsigned i = 0; i < a->nproc; i++) {
		struct phx_worker *w = &a->w[i];
		char st;

		/*
		 * Only workers that report progress can be seen not to. A beat
		 * after now was read is newer than now: not a wrapped-around age.
		 */
		phx_hb_read(a->hb, i, &snap);
		if (!w->running || w->failed || !snap.beat_ns || snap.beat_ns >= now ||
		    now - snap.beat_ns < limit)
			continue;
		st = proc_state(w->pid);
		if (better && !is_stuck(st))
			continue;
		hung++;
		if (!suspect || more_suspect(st, &snap, best_state, &best)) {
			suspect = w;
			best = snap;
			best_state = st;
		}
	}
	if (!suspect)
		return;
	phx_error("rank %lu on %s hung: no heartbeat progress for %d s (last step %llu, process "
		  "state %c; %u of %u workers here are stalled); capturing evidence, then "
		  "stopping it",
		  suspect->rank, a->node, a->o->hang_timeout_s, (unsigned long long)best.step,
		  best_state, hung, a->nproc);
	suspect->failed = true;
	/* The last beat, in wall-clock time, orders this hang among other failures. */
	suspect->fail_ns = phx_now_ns(CLOCK_REALTIME) - (now - best.beat_ns);
	suspect->kind = PHX_FAIL_HANG;
	suspect->code = a->o->hang_timeout_s;
	suspect->waiting = !is_stuck(best_state);
	phx_agent_update_report(a);
	*evidence = suspect;
}

static const char *worker_node(const struct phx_agent *a, long agent)
{
	return agent >= 0 && (size_t)agent < a->pmix.size && a->hosts ? a->hosts[agent] : "?";
}

static void print_block(const char *label, char *text)
{
	char *save = NULL;

	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
		phx_error("  %s%s", label, l);
}

/* By the agent whose worker failed first, once, when the job gives up. */
static void print_root_cause(struct phx_agent *a, const struct phx_report *r)
{
	char path[4096], what[128], msg[4096], trace[16384];
	bool found;

	msg[0] = '\0';
	found = phx_worker_error_read(a->run_dir, r->epoch, (unsigned long)r->fail_rank, path,
				      sizeof(path), msg, sizeof(msg), trace, sizeof(trace)) == 0;
	phx_error("==== root cause (first observed failure) ====");
	phx_error("rank %ld on %s %s", r->fail_rank, a->node,
		  phx_fail_describe(r, what, sizeof(what)));
	if (found) {
		phx_error("error file %s:", path);
		print_block("", msg);
		if (trace[0]) {
			phx_error("traceback:");
			print_block("  ", trace);
		}
	} else if (r->kind == PHX_FAIL_EXIT) {
		phx_error("no error file (%s); decorate the script's main with "
			  "torch.distributed.elastic.multiprocessing.errors.record to get the "
			  "exception here",
			  path);
	}
	phx_error("==== end of root cause ====");
	phx_agent_print_result(a, r, msg);
}

/* Rounds between two that carry the step rates: four per straggler window. */
static unsigned long rate_every(const struct phx_agent *a)
{
	unsigned long every = (unsigned long)a->o->straggler_window_s * 1000ul /
			      (4ul * (unsigned long)a->o->sync_ms);

	return every ? every : 1;
}

static unsigned restarts_total(const struct phx_agent *a)
{
	unsigned n = 0;

	for (size_t k = 0; k < a->o->nroles; k++)
		n += a->roles[k].epoch;
	return n;
}

static int read_reports(struct phx_agent *a, char **values, struct phx_report *reports)
{
	for (size_t i = 0; i < a->pmix.size; i++) {
		if (phx_report_parse(values[i], a->o->nroles, &reports[i]) < 0) {
			phx_error("agent %zu (%s) sent the report '%.80s', not Phalanx's; are all "
				  "nodes running the same phalanx-launch?",
				  i, worker_node(a, (long)i), values[i]);
			return -1;
		}
	}
	return 0;
}

static void free_values(struct phx_agent *a, char **values)
{
	for (size_t i = 0; i < a->pmix.size; i++) {
		free(values[i]);
		values[i] = NULL;
	}
}

/*
 * Every agent joins, whether its role restarts or not; those that do have
 * stopped their workers first, so the fence proves that all have. The
 * others keep pumping their workers' output meanwhile. Each node offers
 * two fresh ports: the job's and the role's rendezvous.
 */
static int restart_barrier(struct phx_agent *a, char **values, const struct phx_decision *d)
{
	char mine[32], err[1024], key[64];
	unsigned long port = 0, rport = 0;
	bool ready = false;

	snprintf(mine, sizeof(mine), "%u %u", phx_free_port(), phx_free_port());
	round_key(a, ++a->rounds, key, sizeof(key));
	phx_debug("restart barrier on %s: round %lu", a->node, a->rounds);
	if (phx_pmix_round_start(&a->pmix, key, mine, err, sizeof(err)) < 0)
		goto fail;
	while (!ready)
		phx_agent_pump(a, 200, a->pmix.done_pipe[0], &ready);
	if (phx_pmix_round_finish(&a->pmix, key, values, err, sizeof(err)) < 0)
		goto fail;
	if (sscanf(values[a->master_agent], "%lu", &port) != 1 ||
	    sscanf(values[a->role_master_agent], "%*u %lu", &rport) != 1)
		port = rport = 0;
	free_values(a, values);
	if (!port || port > 65535 || !rport || rport > 65535) {
		phx_error("restart: the node of rank 0 found no free port");
		return -1;
	}
	/* Role 0 holds the job's rank 0: a new rendezvous for everyone who starts later. */
	if (d->role_action[0] == PHX_ACT_RESTART && a->roles[0].policy == PHX_RESTART_GROUP)
		a->master_port = (unsigned)port;
	if (d->role_action[a->role] == PHX_ACT_RESTART)
		a->role_master_port = (unsigned)rport;
	return 0;
fail:
	phx_error("restart: %s", err);
	return -1;
}

static const char *role_label(const struct phx_agent *a, unsigned k, char *buf, size_t len)
{
	if (a->o->explicit_roles)
		snprintf(buf, len, " of role %s", a->o->roles[k].name);
	else
		buf[0] = '\0';
	return buf;
}

/* The self role's failed workers of this node, each on its own. */
static int restart_self(struct phx_agent *a)
{
	char what[128];

	for (unsigned i = 0; i < a->nproc; i++) {
		struct phx_worker *w = &a->w[i];
		struct phx_report one = { .kind = w->kind, .code = w->code };

		if (!w->failed)
			continue;
		phx_warn("rank %lu on %s %s; restarting it alone (restart %u of %u of this "
			 "worker)",
			 w->rank, a->node, phx_fail_describe(&one, what, sizeof(what)),
			 w->restarts + 1, a->roles[a->role].max_restarts);
		phx_agent_stop_one(a, w);
		w->restarts++;
		if (phx_agent_spawn_one(a, w) < 0) {
			phx_agent_stop_all(a);
			return PHX_EXIT_SETUP;
		}
	}
	return GO_ON;
}

static int restart(struct phx_agent *a, const struct phx_report *r, const struct phx_decision *d,
		   char **values)
{
	enum phx_action mine = d->role_action[a->role];
	bool group = a->roles[a->role].policy == PHX_RESTART_GROUP;
	char what[128], label[64];

	for (size_t k = 0; a->pmix.me.rank == 0 && k < a->o->nroles; k++) {
		long f = d->role_first[k];

		if (d->role_action[k] != PHX_ACT_RESTART || a->roles[k].policy != PHX_RESTART_GROUP)
			continue;
		phx_warn("attempt %u failed: rank %ld on %s %s; restarting all %lu workers%s "
			 "(restart %u of %u)",
			 a->roles[k].epoch + 1, r[f].fail_rank, worker_node(a, f),
			 phx_fail_describe(&r[f], what, sizeof(what)), a->role_world[k],
			 role_label(a, (unsigned)k, label, sizeof(label)), a->roles[k].epoch + 1,
			 a->roles[k].max_restarts);
	}
	if (mine == PHX_ACT_RESTART && group) {
		phx_agent_stop_all(a);
		phx_agent_ckpt_restart(a);
	}
	if (d->barrier && restart_barrier(a, values, d) < 0) {
		phx_agent_stop_all(a);
		return PHX_EXIT_PMIX;
	}
	/* Every agent counts every group role's restarts: the next decisions need them. */
	for (size_t k = 0; k < a->o->nroles; k++) {
		if (d->role_action[k] == PHX_ACT_RESTART && a->roles[k].policy == PHX_RESTART_GROUP)
			a->roles[k].epoch++;
	}
	if (mine != PHX_ACT_RESTART)
		return GO_ON;
	if (!group)
		return a->local.state == PHX_NODE_FAILED ? restart_self(a) : GO_ON;
	a->epoch = a->roles[a->role].epoch;
	for (unsigned long i = a->role_offset[a->role];
	     a->straggler_reported && i < a->role_offset[a->role] + a->role_world[a->role]; i++)
		a->straggler_reported[i] = false;
	if (phx_agent_spawn_all(a) < 0) {
		phx_agent_stop_all(a);
		return PHX_EXIT_SETUP;
	}
	return GO_ON;
}

static int give_up(struct phx_agent *a, const struct phx_report *r, long first)
{
	const struct phx_report *f = &r[first];
	char what[128], label[64];

	if ((long)a->pmix.me.rank == first)
		print_root_cause(a, f);
	if (a->pmix.me.rank == 0)
		phx_error("giving up after %u restart(s)%s (--max-restarts %u): rank %ld on %s %s",
			  f->epoch, role_label(a, f->role, label, sizeof(label)),
			  a->roles[f->role].max_restarts, f->fail_rank, worker_node(a, first),
			  phx_fail_describe(f, what, sizeof(what)));
	phx_agent_stop_all(a);
	return PHX_EXIT_WORKERS;
}

/* One finished round: GO_ON, or the agent's exit code. */
static int decide(struct phx_agent *a, char **values, struct phx_report *reports)
{
	struct phx_decision d;
	char err[1024], key[64];
	int rc;

	round_key(a, a->rounds, key, sizeof(key));
	rc = phx_pmix_round_finish(&a->pmix, key, values, err, sizeof(err));
	if (rc == 0) {
		phx_agent_ckpt_round_result(a, values);
		rc = read_reports(a, values, reports);
		if (rc == 0)
			phx_agent_find_stragglers(a, values, reports);
		free_values(a, values);
	} else {
		phx_error("agreement round: %s", err);
	}
	if (rc < 0) {
		phx_agent_stop_all(a);
		return PHX_EXIT_PMIX;
	}
	phx_restart_decide(reports, a->pmix.size, a->roles, a->o->nroles, &d);
	if (phx_log_get_level() >= PHX_LOG_DEBUG) {
		char mine[128];

		phx_report_format(&a->local, NULL, mine, sizeof(mine));
		phx_debug("round %lu on %s: epoch %u, action %d, first %ld, mine '%s'", a->rounds,
			  a->node, a->epoch, (int)d.action, d.first, mine);
	}
	/* Told to stop: no new workers, whatever else failed meanwhile. */
	if (a->shutdown_sig && d.action == PHX_ACT_RESTART)
		d.action = PHX_ACT_SHUTDOWN;
	if (d.preempt && !a->preempting)
		phx_agent_preempt(a, false);
	if (d.first == (long)a->pmix.me.rank &&
	    (d.action == PHX_ACT_RESTART || d.action == PHX_ACT_GIVE_UP))
		phx_agent_ckptd_report_failure(a, &reports[d.first], d.action == PHX_ACT_RESTART);
	if (d.action == PHX_ACT_SUCCESS && a->pmix.me.rank == 0)
		phx_agent_ckptd_report(a, "done", 0, NULL);
	switch (d.action) {
	case PHX_ACT_CONTINUE:
		return GO_ON;
	case PHX_ACT_RESTART:
		return restart(a, reports, &d, values);
	case PHX_ACT_GIVE_UP:
		return give_up(a, reports, d.first);
	case PHX_ACT_SUCCESS:
		/* The workers are gone; what they left running is not. */
		phx_agent_stop_all(a);
		phx_agent_ckpt_finish(a);
		if (a->pmix.me.rank == 0)
			phx_info("all %lu workers finished (%u restart(s))", a->world,
				 restarts_total(a));
		return PHX_EXIT_OK;
	case PHX_ACT_SHUTDOWN:
		phx_agent_stop_all(a);
		return 128 + (a->shutdown_sig ? a->shutdown_sig : SIGTERM);
	case PHX_ACT_PREEMPTED:
		phx_agent_stop_all(a);
		if (a->pmix.me.rank == 0)
			phx_warn("preempted: the workers of all %u nodes were asked to save and "
				 "have stopped; exiting with %d so that the job can be requeued",
				 a->pmix.size, PHX_EXIT_REQUEUE);
		return PHX_EXIT_REQUEUE;
	}
	return GO_ON;
}

/*
 * A worker that failed because a peer went away tells the others only
 * PEER_LOST_GRACE_NS later: the peer's own failure, the root cause, may
 * still be on its way (an exception whose process closed its connections
 * and is still exiting); reported at once, the consequence could be taken
 * for the cause. A worker of this node that failed on its own is news at
 * once, and so is the consequence once the grace is over.
 */
#define PEER_LOST_GRACE_NS (3ull * 1000000000ull)

static bool news_held(const struct phx_agent *a)
{
	const struct phx_report *r = &a->local;

	return r->state == PHX_NODE_FAILED && r->waiting && r->kind != PHX_FAIL_HANG &&
	       phx_now_ns(CLOCK_REALTIME) < r->fail_ns + PEER_LOST_GRACE_NS;
}

/* What this agent tells the others now. */
static struct phx_report news(const struct phx_agent *a)
{
	struct phx_report r = a->local;

	if (news_held(a)) {
		r.state = PHX_NODE_RUNNING;
		r.epoch = a->epoch;
		r.fail_ns = 0;
		r.fail_rank = -1;
		r.kind = PHX_FAIL_NONE;
		r.code = 0;
		r.waiting = false;
	}
	return r;
}

static int start_round(struct phx_agent *a, enum phx_node_state *sent_state)
{
	char report[16384], rates[16000], err[1024], key[64];
	struct phx_report mine = news(a);
	bool with_rates;

	/* Rates every few rounds, the same ones on every agent: the window is long. */
	with_rates = a->o->straggler_pct > 0 && (a->rounds + 1) % rate_every(a) == 0;
	if (a->o->straggler_pct > 0)
		phx_agent_sample_rates(a);
	if (with_rates)
		phx_agent_rates_text(a, rates, sizeof(rates));
	*sent_state = mine.state;
	phx_report_format(&mine, with_rates ? rates : NULL, report, sizeof(report));
	phx_agent_ckpt_round_value(a, report, sizeof(report));
	round_key(a, ++a->rounds, key, sizeof(key));
	if (phx_pmix_round_start(&a->pmix, key, report, err, sizeof(err)) < 0) {
		phx_error("agreement round: %s", err);
		phx_agent_stop_all(a);
		return PHX_EXIT_PMIX;
	}
	return GO_ON;
}

/* The first round's end: every node runs its workers. */
static void startup_done(struct phx_agent *a)
{
	const uint64_t *t = a->up_ns;
	struct rusage ru = { 0 };

	a->up_ns[PHX_UP_AGREED] = phx_now_ns(CLOCK_REALTIME);
	if (!a->o->startup_times)
		return;
	/* The agent's CPU so far: what a loaded node (or a lab sharing its cores) pays for it. */
	getrusage(RUSAGE_SELF, &ru);
	phx_info("start-up on %s, ns since the epoch: exec %" PRIu64 " pmix %" PRIu64
		 " wireup %" PRIu64 " placed %" PRIu64 " spawned %" PRIu64 " agreed %" PRIu64
		 "; cpu_us %lld",
		 a->node, t[PHX_UP_EXEC], t[PHX_UP_PMIX], t[PHX_UP_WIRED], t[PHX_UP_PLACED],
		 t[PHX_UP_SPAWNED], t[PHX_UP_AGREED],
		 (long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000ll +
			 ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static void on_shutdown(struct phx_agent *a, uint64_t *give_up_at)
{
	phx_info("stopping the workers on %s (signal %d)", a->node, a->shutdown_sig);
	phx_agent_stop_all(a);
	a->local.state = PHX_NODE_SHUTDOWN;
	/* If the other agents are gone, no round will end: do not wait forever. */
	*give_up_at = phx_now_ns(CLOCK_MONOTONIC) + 10ull * 1000000000ull;
}

int phx_agent_supervise(struct phx_agent *a)
{
	struct phx_report *reports = calloc(a->pmix.size, sizeof(*reports));
	char **values = calloc(a->pmix.size, sizeof(*values));
	uint64_t sync_ns = (uint64_t)a->o->sync_ms * 1000000ull, next = 0, give_up_at = 0;
	enum phx_node_state sent_state = PHX_NODE_RUNNING;
	bool stopped = false;
	int rc = GO_ON;

	if (!reports || !values) {
		phx_error("out of memory");
		phx_agent_stop_all(a);
		rc = PHX_EXIT_SETUP;
	}
	while (rc == GO_ON) {
		uint64_t now = phx_now_ns(CLOCK_MONOTONIC);
		struct phx_worker *evidence = NULL;
		int timeout = 200;
		bool ready = false;

		if (!a->pmix.in_flight && next > now && (next - now) / 1000000 < 200)
			timeout = (int)((next - now) / 1000000);
		else if (!a->pmix.in_flight && next <= now)
			timeout = 0;
		phx_agent_pump(a, timeout, a->pmix.done_pipe[0], &ready);
		if (a->shutdown_sig && !stopped) {
			on_shutdown(a, &give_up_at);
			stopped = true;
		}
		if (give_up_at && phx_now_ns(CLOCK_MONOTONIC) > give_up_at) {
			phx_error("the other agents did not answer after the signal; exiting");
			rc = 128 + a->shutdown_sig;
			break;
		}
		if (a->preempt_signal && !a->preempting)
			phx_agent_preempt(a, true);
		if (a->preempting)
			phx_agent_preempt_check(a);
		hang_check(a, &evidence);
		phx_agent_wake_check_settled(a);
		if (ready) {
			if (evidence)
				phx_agent_evidence(a, evidence);
			rc = decide(a, values, reports);
			if (!a->up_ns[PHX_UP_AGREED])
				startup_done(a);
			next = phx_now_ns(CLOCK_MONOTONIC) + phx_agent_ckpt_round_gap(a, sync_ns);
			continue;
		}
		/* News goes out at once, and wakes the others to join the round now. */
		if (!a->pmix.in_flight) {
			bool fresh = news(a).state != sent_state;

			if (fresh || phx_agent_wake_due(a) || phx_now_ns(CLOCK_MONOTONIC) >= next)
				rc = start_round(a, &sent_state);
			if (fresh && rc == GO_ON)
				phx_agent_wake_send(a, a->rounds);
		}
		/* The evidence while the news travels, before anything stops the worker. */
		if (evidence)
			phx_agent_evidence(a, evidence);
	}
	free(reports);
	free(values);
	return rc;
}
