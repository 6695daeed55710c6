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
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/heartbeat.h"
#include "common/log.h"
#include "launcher/agent_run.h"

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

static void hang_check(struct phx_agent *a)
{
	uint64_t now = phx_now_ns(CLOCK_MONOTONIC), limit;
	struct phx_hb_snapshot snap, best = { 0 };
	struct phx_worker *suspect = NULL;
	char best_state = '?';
	unsigned hung = 0;

	if (a->o->hang_timeout_s <= 0 || a->local.state != PHX_NODE_RUNNING)
		return;
	limit = (uint64_t)a->o->hang_timeout_s * 1000000000ull;
	for (unsigned i = 0; i < a->nproc; i++) {
		struct phx_worker *w = &a->w[i];
		char st;

		/* Only workers that report progress can be seen not to. */
		phx_hb_read(a->hb, i, &snap);
		if (!w->running || !snap.beat_ns || now - snap.beat_ns < limit)
			continue;
		hung++;
		st = proc_state(w->pid);
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
	phx_agent_evidence(a, suspect);
	a->local.state = PHX_NODE_FAILED;
	/* The last beat, in wall-clock time, orders this hang among other failures. */
	a->local.fail_ns =
		phx_now_ns(CLOCK_REALTIME) - (phx_now_ns(CLOCK_MONOTONIC) - best.beat_ns);
	a->local.fail_rank = (long)suspect->rank;
	a->local.kind = PHX_FAIL_HANG;
	a->local.code = a->o->hang_timeout_s;
	a->local.waiting = !is_stuck(best_state);
}

static const char *worker_node(const struct phx_agent *a, long agent)
{
	return agent >= 0 && (size_t)agent < a->wire.size && a->hosts ? a->hosts[agent] : "?";
}

static char *slurp(const char *path)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return NULL;
	for (;;) {
		if (len + 4096 + 1 > cap) {
			char *nb;

			if (cap >= (4u << 20))
				break;
			cap = cap ? cap * 2 : 8192;
			nb = realloc(buf, cap);
			if (!nb)
				break;
			buf = nb;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (buf)
		buf[len] = '\0';
	return buf;
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
	struct phx_worker_ctx ctx = { .run_dir = a->run_dir, .restart_count = a->epoch };
	char path[4096], what[128], msg[4096], trace[16384];
	char *text;

	phx_worker_error_file(&ctx, (unsigned long)r->fail_rank, path, sizeof(path));
	phx_error("==== root cause (first observed failure) ====");
	phx_error("rank %ld on %s %s", r->fail_rank, a->node,
		  phx_fail_describe(r, what, sizeof(what)));
	text = slurp(path);
	if (text && phx_errfile_parse(text, msg, sizeof(msg), trace, sizeof(trace)) == 0) {
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
	free(text);
}

static int read_reports(struct phx_agent *a, char **values, struct phx_report *reports)
{
	for (size_t i = 0; i < a->wire.size; i++) {
		if (phx_report_parse(values[i], &reports[i]) < 0) {
			phx_error("agent %zu (%s) sent the report '%.80s', not Phalanx's; are all "
				  "nodes running the same phalanx-launch?",
				  i, worker_node(a, (long)i), values[i]);
			return -1;
		}
	}
	return 0;
}

/* Everyone stopped: a fence proves it and hands out the next rendezvous port. */
static int restart_barrier(struct phx_agent *a, char **values)
{
	char mine[32], err[1024], key[64];
	unsigned long port;

	snprintf(mine, sizeof(mine), "%u", phx_free_port());
	round_key(a, ++a->rounds, key, sizeof(key));
	phx_debug("restart barrier on %s: round %lu", a->node, a->rounds);
	if (phx_wire_allgather(&a->wire, key, mine, values, err, sizeof(err)) < 0) {
		phx_error("restart: %s", err);
		return -1;
	}
	port = strtoul(values[a->master_agent], NULL, 10);
	for (size_t i = 0; i < a->wire.size; i++) {
		free(values[i]);
		values[i] = NULL;
	}
	if (port == 0 || port > 65535) {
		phx_error("restart: the node of rank 0 found no free port");
		return -1;
	}
	a->master_port = (unsigned)port;
	return 0;
}

static int restart(struct phx_agent *a, const struct phx_report *r, long first, char **values)
{
	char what[128];

	if (a->wire.me.rank == 0)
		phx_warn("attempt %u failed: rank %ld on %s %s; restarting all %lu workers "
			 "(restart %u of %d)",
			 a->epoch + 1, r[first].fail_rank, worker_node(a, first),
			 phx_fail_describe(&r[first], what, sizeof(what)), a->map.world,
			 a->epoch + 1, a->o->max_restarts);
	phx_agent_stop_all(a);
	phx_ckpt_restart(a);
	if (restart_barrier(a, values) < 0)
		return PHX_EXIT_PMIX;
	a->epoch++;
	if (phx_agent_spawn_all(a) < 0) {
		phx_agent_stop_all(a);
		return PHX_EXIT_SETUP;
	}
	return GO_ON;
}

static int give_up(struct phx_agent *a, const struct phx_report *r, long first)
{
	char what[128];

	if ((long)a->wire.me.rank == first)
		print_root_cause(a, &r[first]);
	if (a->wire.me.rank == 0)
		phx_error("giving up after %u restart(s) (--max-restarts %d): rank %ld on %s %s",
			  a->epoch, a->o->max_restarts, r[first].fail_rank, worker_node(a, first),
			  phx_fail_describe(&r[first], what, sizeof(what)));
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
	rc = phx_wire_round_finish(&a->wire, key, values, err, sizeof(err));
	if (rc == 0) {
		phx_ckpt_round_result(a, values);
		rc = read_reports(a, values, reports);
		for (size_t i = 0; i < a->wire.size; i++) {
			free(values[i]);
			values[i] = NULL;
		}
	} else {
		phx_error("agreement round: %s", err);
	}
	if (rc < 0) {
		phx_agent_stop_all(a);
		return PHX_EXIT_PMIX;
	}
	phx_restart_decide(reports, a->wire.size, a->epoch, (unsigned)a->o->max_restarts, &d);
	if (phx_log_get_level() >= PHX_LOG_DEBUG) {
		char mine[128];

		phx_report_format(&a->local, mine, sizeof(mine));
		phx_debug("round %lu on %s: epoch %u, action %d, first %ld, mine '%s'", a->rounds,
			  a->node, a->epoch, (int)d.action, d.first, mine);
	}
	/* Told to stop: no new workers, whatever else failed meanwhile. */
	if (a->shutdown_sig && d.action == PHX_ACT_RESTART)
		d.action = PHX_ACT_SHUTDOWN;
	switch (d.action) {
	case PHX_ACT_CONTINUE:
		return GO_ON;
	case PHX_ACT_RESTART:
		return restart(a, reports, d.first, values);
	case PHX_ACT_GIVE_UP:
		return give_up(a, reports, d.first);
	case PHX_ACT_SUCCESS:
		/* The workers are gone; what they left running is not. */
		phx_agent_stop_all(a);
		phx_ckpt_finish(a);
		if (a->wire.me.rank == 0)
			phx_info("all %lu workers finished (%u restart(s))", a->map.world,
				 a->epoch);
		return PHX_EXIT_OK;
	case PHX_ACT_SHUTDOWN:
		phx_agent_stop_all(a);
		return 128 + (a->shutdown_sig ? a->shutdown_sig : SIGTERM);
	}
	return GO_ON;
}

static int start_round(struct phx_agent *a)
{
	char report[8192], err[1024], key[64];

	phx_report_format(&a->local, report, sizeof(report));
	phx_ckpt_round_value(a, report, sizeof(report));
	round_key(a, ++a->rounds, key, sizeof(key));
	if (phx_wire_round_start(&a->wire, key, report, err, sizeof(err)) < 0) {
		phx_error("agreement round: %s", err);
		phx_agent_stop_all(a);
		return PHX_EXIT_PMIX;
	}
	return GO_ON;
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
	struct phx_report *reports = calloc(a->wire.size, sizeof(*reports));
	char **values = calloc(a->wire.size, sizeof(*values));
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
		int timeout = 200;
		bool ready = false;

		if (!a->wire.in_flight && next > now && (next - now) / 1000000 < 200)
			timeout = (int)((next - now) / 1000000);
		else if (!a->wire.in_flight && next <= now)
			timeout = 0;
		phx_agent_pump(a, timeout, a->wire.done_pipe[0], &ready);
		if (a->shutdown_sig && !stopped) {
			on_shutdown(a, &give_up_at);
			stopped = true;
		}
		if (give_up_at && phx_now_ns(CLOCK_MONOTONIC) > give_up_at) {
			phx_error("the other agents did not answer after the signal; exiting");
			rc = 128 + a->shutdown_sig;
			break;
		}
		hang_check(a);
		if (ready) {
			rc = decide(a, values, reports);
			next = phx_now_ns(CLOCK_MONOTONIC) + sync_ns;
			continue;
		}
		/* News goes out at once; the others join at their next tick. */
		if (!a->wire.in_flight &&
		    (phx_now_ns(CLOCK_MONOTONIC) >= next || a->local.state != sent_state)) {
			sent_state = a->local.state;
			rc = start_round(a);
		}
	}
	free(reports);
	free(values);
	return rc;
}
