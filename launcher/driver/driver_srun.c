/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A step: srun started, its output read, its node failures found, the
 * step stopped; one or several at once.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/drain.h"
#include "common/hostlist.h"
#include "common/log.h"
#include "common/requeue.h"
#include "common/slurm_compat.h"
#include "health/preflight.h"
#include "launcher/env.h"
#include "launcher/launch.h"
#include "launcher/options.h"
#include "launcher/output.h"
#include "launcher/result.h"
#include "launcher/standin.h"
#include "launcher/driver/driver.h"
#include "launcher/driver/driver_ledger.h"
#include "launcher/driver/driver_ckptd.h"
#include "launcher/driver/driver_lost.h"
#include "launcher/driver/driver_plan.h"
#include "launcher/driver/driver_preflight.h"
#include "launcher/driver/driver_int.h"

#define POLL_MS 1000 /* between looks at Slurm's node states */
#define KILL_WAIT_MS 200 /* step killed: srun passes on what it has, then goes */

/* An agent reported node lost (its line, or its datagram: whichever comes first). */
static void note_lost(void *arg, const char *node)
{
	struct step *s = arg;

	/* The first node named lost; a watcher cut off itself names the others later. */
	if (!s->vanished[0]) {
		snprintf(s->vanished, sizeof(s->vanished), "%s", node);
		s->silent = true;
	}
	s->lost = true;
}

static void on_line(void *arg, const char *line, size_t len)
{
	struct step *s = arg;
	char node[256];
	int kind;

	/* srun's stderr is the driver's: passed on as it came. */
	if (write(STDERR_FILENO, line, len) < 0 || write(STDERR_FILENO, "\n", 1) < 0)
		return;
	if (!strncmp(line, PHX_RESULT_PREFIX, sizeof(PHX_RESULT_PREFIX) - 1)) {
		if (phx_result_parse(line, len, &s->result) == 0)
			s->have_result = true;
		return;
	}
	if (phx_lost_parse(line, len, node, sizeof(node)) == 0) {
		note_lost(s, node);
		return;
	}
	kind = phx_srun_line_parse(line, len, node, sizeof(node));
	if (kind == 3)
		s->launch_failed = true;
	if ((kind == 2 && !s->vanished[0]) || kind == 1) {
		snprintf(s->vanished, sizeof(s->vanished), "%s", node);
		s->silent = false;
		s->lost = true;
	}
}

static void drain_pipe(struct step *s)
{
	char buf[16384];
	ssize_t n;

	while ((n = read(s->err_fd, buf, sizeof(buf))) > 0)
		phx_linebuf_feed(&s->lb, buf, (size_t)n, on_line, s);
	if (n == 0) {
		phx_linebuf_flush(&s->lb, on_line, s);
		close(s->err_fd);
		s->err_fd = -1;
	}
}

static void exec_srun(struct driver *dr, const struct step *s, const char *list,
		      const char *stand_ins, int err_w)
{
	char nodes[32], nodelist[PATH_MAX + 16], **agent, **av, *slow;
	size_t n = s->n;
	int an, k = 0;

	snprintf(nodes, sizeof(nodes), "%zu", n);
	snprintf(nodelist, sizeof(nodelist), "--nodelist=%s", list);
	agent = phx_driver_agent_args(dr->argc, dr->argv,
				      dr->st.layout_now[0] ? dr->st.layout_now : NULL, &an);
	av = calloc((size_t)an + 20 + dr->n_srun_args, sizeof(*av));
	/* The slow nodes among the step's, for the agents' placement. */
	slow = phx_drv_flagged_list(dr, dr->slow, s->idx, s->n);
	if (!agent || !av)
		_exit(127);
	av[k++] = (char *)dr->srun;
	av[k++] = "--mpi=pmix";
	av[k++] = "--ntasks-per-node=1";
	av[k++] = "-N";
	av[k++] = nodes;
	av[k++] = "-n";
	av[k++] = nodes;
	av[k++] = nodelist;
	/* A step that lost a node may hold its CPUs until Slurm hears of it. */
	av[k++] = "--overlap";
	/* After the driver's own: srun takes the last of an option (--mpi=pmix_v5). */
	for (size_t i = 0; i < dr->n_srun_args; i++)
		av[k++] = (char *)dr->srun_args[i];
	av[k++] = dr->self;
	av[k++] = "--agent";
	if (s->role) {
		av[k++] = "--step-role";
		av[k++] = (char *)s->role;
	}
	if (slow) {
		/* Before the user's options: every agent computes the same plan from it. */
		av[k++] = "--slow-nodes";
		av[k++] = slow;
	}
	if (stand_ins) {
		av[k++] = "--stand-ins";
		av[k++] = (char *)stand_ins;
	}
	for (int i = 0; i < an; i++)
		av[k++] = agent[i];
	av[k] = NULL;
	dup2(err_w, STDERR_FILENO);
	execvp(av[0], av);
	fprintf(stderr,
		"phalanx: cannot run %s: %s; is Slurm's srun installed and on PATH (or "
		"give --srun)?\n",
		av[0], strerror(errno));
	_exit(127);
}

/*
 * Each spare of this step takes, in the placement, the place of the node
 * it replaces (and keeps it over later relaunches), so the other nodes
 * keep their ranks and restore from their own local tiers. The agents'
 * --stand-ins, or NULL when every node is placed as itself.
 */
static char *stand_ins(struct driver *dr, const struct step *s)
{
	size_t *lost = calloc(s->n + 1, sizeof(*lost)), *spare = calloc(s->n + 1, sizeof(*spare));
	size_t k, len = 0, cap = 1;
	char *spec = NULL;

	if (!lost || !spare)
		goto out;
	k = phx_stand_ins_pair(dr->last, dr->nlast, s->idx, s->n, lost, spare);
	for (size_t i = 0; i < k; i++)
		dr->placed_as[spare[i]] = dr->placed_as[lost[i]];
	memcpy(dr->last, s->idx, s->n * sizeof(*s->idx));
	dr->nlast = s->n;
	for (size_t i = 0; i < s->n; i++)
		cap += strlen(dr->alloc.names[s->idx[i]]) * 2 + 2;
	spec = malloc(cap);
	for (size_t i = 0; spec && i < s->n; i++) {
		size_t at = s->idx[i], as = dr->placed_as[at];

		if (as != at)
			len += (size_t)snprintf(spec + len, cap - len, "%s%s=%s", len ? "," : "",
						dr->alloc.names[as], dr->alloc.names[at]);
	}
	if (spec && !len) {
		free(spec);
		spec = NULL;
	}
out:
	free(lost);
	free(spare);
	return spec;
}

/* A role's workers learn the epochs they started at (launcher/env.h). */
static void epoch_env(const struct step *s)
{
	char v[32];

	snprintf(v, sizeof(v), "%lu", s->epoch);
	setenv(PHX_EPOCH_ENV, v, 1);
	snprintf(v, sizeof(v), "%lu", s->role_epoch);
	setenv(PHX_ROLE_EPOCH_ENV, v, 1);
}

int phx_drv_step_start(struct driver *dr, struct step *s)
{
	char *list = phx_drv_node_list(dr, s->idx, s->n), *spec = s->role ? NULL : stand_ins(dr, s);
	const char *report = s->role ? dr->lost_env : phx_drv_lost_rekey(dr->lost);
	sigset_t none;
	int p[2];

	if (!list || pipe2(p, O_CLOEXEC) < 0) {
		free(list);
		free(spec);
		return -1;
	}
	if (s->role)
		phx_info("starting role %s on %zu node(s) %s (job epoch %lu, role epoch %lu)",
			 s->role, s->n, list, s->epoch, s->role_epoch);
	else
		phx_info("starting the step on %zu node(s) %s (%zu spare, %zu excluded)%s%s", s->n,
			 list, phx_drv_healthy(dr->st.bad, dr->alloc.count) - s->n,
			 dr->alloc.count - phx_drv_healthy(dr->st.bad, dr->alloc.count),
			 dr->st.layout_now[0] ? ", layout " : "", dr->st.layout_now);
	/* srun passes the environment on to the step's agents. */
	if (report)
		setenv(PHX_LOST_ENV, report, 1);
	s->pid = fork();
	if (s->pid == 0) {
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (s->role)
			epoch_env(s);
		exec_srun(dr, s, list, spec, p[1]);
	}
	free(list);
	free(spec);
	close(p[1]);
	if (s->pid < 0) {
		close(p[0]);
		phx_error("cannot start srun: %s", strerror(errno));
		return -1;
	}
	s->err_fd = p[0];
	fcntl(s->err_fd, F_SETFL, O_NONBLOCK);
	/* A new agent on each node: watched once it beats. */
	for (size_t k = 0; dr->alive_ms && k < s->n; k++)
		dr->alive_ms[s->idx[k]] = 0;
	return 0;
}

/* The step srun started, by srun's PID on this host; NO_VAL when not found. */
static uint32_t find_step(const struct driver *dr, pid_t srun)
{
	job_step_info_response_msg_t *resp = NULL;
	uint32_t id = NO_VAL;

	if (slurm_get_job_steps(0, dr->job_id, NO_VAL, &resp, SHOW_ALL) != SLURM_SUCCESS)
		return NO_VAL;
	for (uint32_t i = 0; i < resp->job_step_count; i++) {
		if (resp->job_steps[i].srun_pid == (uint32_t)srun)
			id = resp->job_steps[i].step_id.step_id;
	}
	slurm_free_job_step_info_response_msg(resp);
	return id;
}

void phx_drv_step_kill(struct driver *dr, struct step *s, const char *why)
{
	uint32_t id = find_step(dr, s->pid);

	s->killed = true;
	s->kill_at = phx_drv_now_ms() + KILL_WAIT_MS;
	if (id != NO_VAL && phx_slurm_kill_job_step(dr->job_id, id, SIGKILL) != SLURM_SUCCESS)
		phx_warn("cannot kill step %u.%u: %s", dr->job_id, id, slurm_strerror(errno));
	phx_info("stopped step %u.%u %s", dr->job_id, id, why);
}

/*
 * The preemption signal (sbatch --signal=B:USR1@T reaches only the batch
 * script's processes): the agents' step gets it from Slurm, so every
 * agent asks its workers to save and stops them, and exits 75.
 */
static void forward_preemption(struct driver *dr, struct step *s, int sig)
{
	uint32_t id = find_step(dr, s->pid);

	if (!dr->preempted)
		phx_warn("job %u is being preempted (signal %d): the workers are asked to save "
			 "and stop, then the job is requeued",
			 dr->job_id, sig);
	dr->preempted = true;
	if (id == NO_VAL ||
	    phx_slurm_kill_job_step(dr->job_id, id, (uint16_t)sig) != SLURM_SUCCESS) {
		/* No step known yet: srun passes the signal on to the agents. */
		phx_debug("signalling srun instead of step %u.%u", dr->job_id, id);
		kill(s->pid, sig);
	}
}

static void on_signals(struct driver *dr, struct step **steps, size_t n)
{
	struct signalfd_siginfo si;

	while (read(dr->sig_fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGCHLD)
			continue;
		for (size_t k = 0; k < n; k++) {
			if (steps[k]->ended)
				continue;
			if (dr->preempt_sig && (int)si.ssi_signo == dr->preempt_sig) {
				forward_preemption(dr, steps[k], (int)si.ssi_signo);
				continue;
			}
			/* TERM, INT: srun passes them to the agents, which stop the workers. */
			kill(steps[k]->pid, (int)si.ssi_signo);
		}
		if (!dr->preempt_sig || (int)si.ssi_signo != dr->preempt_sig)
			dr->stop_sig = (int)si.ssi_signo;
	}
}

static bool reap(struct step *s)
{
	int st;

	if (waitpid(s->pid, &st, WNOHANG) != s->pid)
		return false;
	s->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	s->ended = true;
	if (s->err_fd >= 0) {
		fcntl(s->err_fd, F_SETFL, 0);
		drain_pipe(s);
	}
	return true;
}

/*
 * srun's own report of a lost agent counts when Slurm names no bad node:
 * when Slurm ends a step for a node failure, the agents of the healthy
 * nodes are killed too, and Slurm's view says which node it was.
 */
void phx_drv_step_report(struct driver *dr, struct step *s)
{
	long i;

	/* After a failed launch srun kills the agents it had started: no node's fault. */
	if (s->new_bad || s->killed || dr->stop_sig || !s->vanished[0] || s->have_result ||
	    s->launch_failed)
		return;
	i = phx_drv_alloc_index(dr, s->vanished);
	if (i >= 0 && s->silent)
		dr->unconfirmed[i] = true;
	if (i >= 0)
		phx_drv_node_bad(
			dr, s, (size_t)i,
			s->silent ? "its agent stopped beating: the node is dead, hung or cut off"
				  : "srun reported its agent killed or the node failed",
			NULL);
}

/* A lost-node datagram, to the step that runs on the node. */
struct lost_to {
	struct driver *dr;
	struct step **steps;
	size_t n;
};

static void route_lost(void *arg, const char *node);
static void route_alive(void *arg, const char *node, enum phx_beat state);
static void route_progress(void *arg, const char *node, const struct phx_progress *p);

static const struct phx_drv_lost_ops lost_ops = { route_lost, route_alive, route_progress };

static void route_lost(void *arg, const char *node)
{
	struct lost_to *to = arg;
	long i = phx_drv_alloc_index(to->dr, node);

	for (size_t k = 0; i >= 0 && k < to->n; k++) {
		for (size_t j = 0; j < to->steps[k]->n; j++) {
			if (to->steps[k]->idx[j] == (size_t)i && !to->steps[k]->ended)
				note_lost(to->steps[k], node);
		}
	}
}

static void route_alive(void *arg, const char *node, enum phx_beat state)
{
	struct lost_to *to = arg;
	long i = phx_drv_alloc_index(to->dr, node);

	if (i < 0 || !to->dr->alive_ms)
		return;
	to->dr->alive_ms[i] = phx_drv_now_ms();
	to->dr->alive_state[i] = state;
}

static void route_progress(void *arg, const char *node, const struct phx_progress *p)
{
	struct lost_to *to = arg;
	long i = phx_drv_alloc_index(to->dr, node);

	if (i >= 0)
		phx_drv_ledger_progress(to->dr->ledger, (size_t)i, p, phx_drv_now_ms());
}

/*
 * An agent alone in its role's step has no peer to watch it: the driver
 * does, as a peer would (launcher/liveness.h), once it has heard it.
 */
static void check_alone(struct driver *dr, struct step **steps, size_t n, uint64_t now)
{
	uint64_t timeout = dr->alive_ms ? (uint64_t)dr->o->peer_timeout_ms : 0;

	for (size_t k = 0; timeout && k < n; k++) {
		struct step *s = steps[k];
		size_t i = s->idx[0];
		uint64_t limit = timeout, quiet;

		if (s->ended || s->killed || !s->role || s->n != 1 || !dr->alive_ms[i] ||
		    dr->alive_state[i] == PHX_BEAT_END)
			continue;
		if (dr->alive_state[i] == PHX_BEAT_SETTLING)
			limit *= PHX_LIVENESS_SETTLE_FACTOR;
		quiet = now - dr->alive_ms[i];
		if (quiet <= limit)
			continue;
		phx_warn("lost %s: no beat from its agent for %llu ms (watched from the driver); "
			 "the node is dead, hung or cut off",
			 dr->alloc.names[i], (unsigned long long)quiet);
		dr->alive_ms[i] = 0;
		note_lost(s, dr->alloc.names[i]);
	}
}

/*
 * Slurm's view and the agents' reports: a step with a node gone is
 * stopped. The watchers name the lost node themselves: no call to a
 * loaded controller before acting on that. srun's reports need Slurm's
 * view (it kills every node's agent for one node).
 */
static void stop_failed(struct driver *dr, struct step **steps, size_t n)
{
	bool ask = false;

	for (size_t k = 0; k < n; k++)
		ask |= !steps[k]->ended && !(steps[k]->lost && steps[k]->silent);
	if (ask)
		phx_drv_check_nodes(dr, steps, n);
	for (size_t k = 0; k < n; k++) {
		struct step *s = steps[k];

		if (s->ended || s->killed)
			continue;
		if (s->lost && !s->stop) {
			phx_drv_step_report(dr, s);
			s->stop = s->new_bad > 0;
		}
		s->lost = false;
		if (s->stop)
			phx_drv_step_kill(dr, s, "after a node failure");
	}
}

struct step *phx_drv_steps_watch(struct driver *dr, struct step **steps, size_t n,
				 uint64_t until_ms)
{
	struct pollfd *pf = calloc(n + 2, sizeof(*pf));
	struct lost_to to = { dr, steps, n };
	uint64_t next_poll = 0;
	struct step *gone = NULL;

	while (pf && !gone && (!until_ms || phx_drv_now_ms() < until_ms)) {
		uint64_t now;
		bool lost = false, drained;

		pf[0] = (struct pollfd){ dr->sig_fd, POLLIN, 0 };
		pf[1] = (struct pollfd){ phx_drv_lost_fd(dr->lost), POLLIN, 0 };
		for (size_t k = 0; k < n; k++)
			pf[k + 2] = (struct pollfd){ steps[k]->ended ? -1 : steps[k]->err_fd,
						     POLLIN, 0 };
		poll(pf, n + 2, 200);
		if (pf[0].revents)
			on_signals(dr, steps, n);
		/* A silence is judged on an empty socket: beats queued behind others are no
		 * silence. */
		drained = !pf[1].revents || phx_drv_lost_read(dr->lost, &lost_ops, &to);
		now = phx_drv_now_ms();
		if (drained)
			check_alone(dr, steps, n, now);
		for (size_t k = 0; k < n; k++) {
			struct step *s = steps[k];

			if (s->ended)
				continue;
			if (s->err_fd >= 0 && pf[k + 2].revents)
				drain_pipe(s);
			if (!gone && reap(s)) {
				gone = s;
				continue;
			}
			if (s->kill_at && now >= s->kill_at) {
				phx_debug(
					"srun did not end after its step was killed; killing srun");
				kill(s->pid, SIGKILL);
				s->kill_at = 0;
			}
			lost |= s->lost && !s->killed;
		}
		if (!gone && !dr->stop_sig && (now >= next_poll || lost)) {
			next_poll = now + POLL_MS;
			stop_failed(dr, steps, n);
		}
	}
	free(pf);
	return gone;
}
