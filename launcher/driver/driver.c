/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Driver mode: phalanx-launch in a batch script. Each attempt is one step,
 *   srun --mpi=pmix --ntasks-per-node=1 -N M --nodelist=... phalanx-launch --agent ...
 * on the first M healthy nodes of the allocation (the rest are spares).
 * While it runs, Slurm's node states are polled (libslurm, cached by
 * update time); a node of the step that goes DOWN, FAIL or not responding
 * ends the step at once. When it ended, the cause decides (driver_plan.c):
 * relaunch, shrink, requeue, or stop.
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
#include "launcher/driver/driver_ckptd.h"
#include "launcher/driver/driver_lost.h"
#include "launcher/driver/driver_plan.h"
#include "launcher/driver/driver_preflight.h"

#define POLL_MS 1000 /* between looks at Slurm's node states */
#define KILL_WAIT_MS 200 /* step killed: srun passes on what it has, then goes */
#define LAUNCH_RETRY_MS 180000 /* failed launches retried this long, none counted */

struct driver {
	struct phx_launch_opts *o;
	int argc; /* the driver's arguments, without argv[0] */
	char **argv;
	uint32_t job_id;
	struct phx_hostnames alloc;
	struct phx_drv_state st;
	bool drain;
	const char *srun;
	const char *const *srun_args; /* the user's, for each step's srun */
	size_t n_srun_args;
	char self[PATH_MAX];
	int sig_fd;
	int stop_sig;
	int preempt_sig; /* --preempt-signal: forwarded to the agents' step */
	bool preempted; /* it came */
	const struct phx_conf *conf;
	bool preflight;
	const char *pf_results; /* NULL: measure live */
	bool *trusted; /* [alloc]: passed the check since it last joined a step */
	bool *slow; /* [alloc]: the check found it slow */
	bool *suspect; /* [alloc]: Slurm has it NOT_RESPONDING, not (yet) DOWN */
	bool *unconfirmed; /* [alloc]: bad by its agent's silence alone, Slurm not told yet */
	size_t *prev; /* the nodes of the last step */
	size_t nprev;
	size_t *last; /* the nodes of the last step started, in order */
	size_t nlast;
	size_t *placed_as; /* [alloc]: the node whose place in the placement it takes */
	node_info_msg_t *nodes; /* the last node table, for update-time caching */
	struct phx_drv_ckptd *ckptd; /* NULL: no phalanx-ckptd configured */
	struct phx_drv_lost *lost; /* the agents' lost-node reports; NULL: stderr only */
};

/* One attempt: srun and what it said. */
struct step {
	size_t *idx; /* allocation indices of its nodes */
	size_t n;
	pid_t pid;
	int err_fd;
	struct phx_linebuf lb;
	struct phx_result result;
	bool have_result;
	char vanished[256]; /* a node whose agent was killed, "" */
	unsigned new_bad;
	bool killed; /* by the driver, for a bad node */
	bool lost; /* srun reported an agent killed or a node failure */
	bool silent; /* ... or an agent reported the vanished node's agent silent */
	bool launch_failed; /* srun said the step's launch failed */
	int status;
	uint32_t step_id; /* NO_VAL until looked up */
};

static uint64_t now_ms(void)
{
	return phx_now_ns(CLOCK_MONOTONIC) / 1000000u;
}

static long alloc_index(const struct driver *dr, const char *name)
{
	for (size_t i = 0; i < dr->alloc.count; i++) {
		if (!strcmp(dr->alloc.names[i], name))
			return (long)i;
	}
	return -1;
}

static void drain_node(const char *node, const char *reason)
{
	char why[512], err[256];

	snprintf(why, sizeof(why), "phalanx-launch: %s", reason);
	if (phx_slurm_drain_by(node, why, getuid(), err, sizeof(err)) < 0)
		phx_warn("cannot drain node %s: %s; it is only excluded from this job (draining "
			 "needs Slurm operator rights)",
			 node, err);
	else
		phx_info("drained node %s (%s)", node, reason);
}

/*
 * The one place a node is found bad: it is excluded for the rest of the
 * job, drained when asked to, logged, and reported to phalanx-ckptd: a
 * failed check (failed_check: what it measured) as such, any other cause
 * as a restart without the node, told before the relaunch so the daemon
 * does not requeue the job for the node's silence.
 */
static void node_bad(struct driver *dr, struct step *s, size_t i, const char *reason,
		     const char *failed_check)
{
	if (dr->st.bad[i])
		return;
	dr->st.bad[i] = true;
	if (s)
		s->new_bad++;
	phx_warn("node %s is bad (%s): excluded for the rest of job %u", dr->alloc.names[i], reason,
		 dr->job_id);
	/* Before the relaunch, which it precedes still; after the line, which it may delay. */
	phx_drv_ckptd_report(dr->ckptd, failed_check ? "check" : "restart", dr->alloc.names[i], 0,
			     failed_check ? failed_check : reason);
	if (dr->drain)
		drain_node(dr->alloc.names[i], reason);
}

/*
 * Why a node is unusable, or NULL. stop: reasons that end a running step.
 * NOT_RESPONDING is no reason: Slurm sets it when one message to the
 * node's slurmd went unanswered within MessageTimeout (a busy node does
 * that) and clears it at the next answer; it calls the node DOWN only
 * after SlurmdTimeout of silence. A dead node is that, or srun says so.
 */
static const char *bad_state(uint32_t state, bool *stop)
{
	*stop = true;
	if ((state & NODE_STATE_BASE) == NODE_STATE_DOWN)
		return "Slurm marked it DOWN";
	if ((state & NODE_STATE_BASE) == NODE_STATE_FUTURE)
		return "Slurm lists it as FUTURE";
	if (state & NODE_STATE_FAIL)
		return "Slurm marked it FAIL";
	/* A drained node (a failed health check) finishes the step it runs. */
	*stop = false;
	if (state & NODE_STATE_DRAIN)
		return "Slurm drains it";
	return NULL;
}

/* Marks the allocation's nodes Slurm calls unusable; true when one of the step's must stop it. */
static bool check_nodes(struct driver *dr, struct step *s)
{
	node_info_msg_t *msg = NULL;
	time_t since = dr->nodes ? dr->nodes->last_update : 0;
	bool stop_step = false;
	int rc;

	rc = slurm_load_node(since, &msg, SHOW_ALL);
	if (rc == SLURM_SUCCESS) {
		slurm_free_node_info_msg(dr->nodes);
		dr->nodes = msg;
	} else if (errno != SLURM_NO_CHANGE_IN_DATA) {
		phx_debug("slurm_load_node: %s", slurm_strerror(errno));
		return false;
	}
	for (uint32_t k = 0; dr->nodes && k < dr->nodes->record_count; k++) {
		node_info_t *n = &dr->nodes->node_array[k];
		const char *why;
		bool stop;
		long i;

		if (!n->name || (i = alloc_index(dr, n->name)) < 0)
			continue;
		why = bad_state(n->node_state, &stop);
		if (dr->st.bad[i]) {
			/* Slurm has caught up with the agents that found it lost. */
			dr->unconfirmed[i] &= !why;
			continue;
		}
		dr->suspect[i] = !why && (n->node_state & NODE_STATE_NO_RESPOND);
		if (!why)
			continue;
		node_bad(dr, s, (size_t)i, why, NULL);
		for (size_t j = 0; s && stop && j < s->n; j++)
			stop_step |= s->idx[j] == (size_t)i;
	}
	return stop_step;
}

/* How long Slurm may take to call a silent node DOWN: SlurmdTimeout and a ping's round. */
static uint64_t verdict_wait_ms(void)
{
	slurm_conf_t *c = NULL;
	uint64_t ms = 60000;

	if (slurm_load_ctl_conf(0, &c) == SLURM_SUCCESS && c) {
		ms = 1000ull * (c->slurmd_timeout + 2u * c->msg_timeout + 1u);
		slurm_free_ctl_conf(c);
	}
	return ms < 600000 ? ms : 600000;
}

static size_t count_sure(const struct driver *dr, size_t *suspects)
{
	size_t sure = 0;

	*suspects = 0;
	for (size_t i = 0; i < dr->alloc.count; i++) {
		if (dr->st.bad[i])
			continue;
		sure += !dr->suspect[i];
		*suspects += dr->suspect[i];
	}
	return sure;
}

/*
 * Before a step: when the nodes Slurm hears from are too few for it and
 * some are NOT_RESPONDING, waits for Slurm's verdict on those (DOWN, or
 * answering again), at most verdict_wait_ms(); a node still silent then
 * is bad. With enough answering nodes the step just avoids the others.
 */
static void settle_suspects(struct driver *dr)
{
	uint64_t until = 0;
	size_t suspects;

	while (count_sure(dr, &suspects) < dr->st.want && suspects) {
		if (!until) {
			until = now_ms() + verdict_wait_ms();
			phx_warn("%zu node(s) of job %u do not answer Slurm (NOT_RESPONDING); "
				 "waiting "
				 "up to %llu s for Slurm to hear from them or call them DOWN",
				 suspects, dr->job_id,
				 (unsigned long long)(until - now_ms()) / 1000);
		}
		if (now_ms() >= until) {
			for (size_t i = 0; i < dr->alloc.count; i++)
				if (dr->suspect[i] && !dr->st.bad[i])
					node_bad(
						dr, NULL, i,
						"its slurmd did not answer Slurm for SlurmdTimeout",
						NULL);
			return;
		}
		usleep(250000);
		check_nodes(dr, NULL);
	}
}

/* The step's nodes: the first healthy ones, answering ones first. */
static size_t pick(struct driver *dr, size_t *idx)
{
	bool *avoid = calloc(dr->alloc.count, sizeof(*avoid));
	size_t n = 0;

	for (size_t i = 0; avoid && i < dr->alloc.count; i++)
		avoid[i] = dr->st.bad[i] || dr->suspect[i];
	if (avoid)
		n = phx_drv_pick(avoid, dr->alloc.count, dr->st.want, idx);
	free(avoid);
	if (n < dr->st.want)
		n = phx_drv_pick(dr->st.bad, dr->alloc.count, dr->st.want, idx);
	return n;
}

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

static char *node_list(const struct driver *dr, const size_t *idx, size_t n)
{
	char **names = calloc(n ? n : 1, sizeof(*names)), err[256], *list;

	if (!names)
		return NULL;
	for (size_t i = 0; i < n; i++)
		names[i] = dr->alloc.names[idx[i]];
	list = phx_hostlist_compress(names, n, err, sizeof(err));
	if (!list)
		phx_error("cannot write the node list: %s", err);
	free(names);
	return list;
}

/*
 * The nodes i of idx[0..n) (NULL: the whole allocation) with flag[i], as
 * a host list; NULL: none.
 */
static char *flagged_list(const struct driver *dr, const bool *flag, const size_t *idx, size_t n)
{
	size_t *sel = calloc(n ? n : 1, sizeof(*sel)), k = 0;
	char *list = NULL;

	for (size_t i = 0; sel && i < n; i++) {
		size_t a = idx ? idx[i] : i;

		if (flag[a])
			sel[k++] = a;
	}
	if (k)
		list = node_list(dr, sel, k);
	free(sel);
	return list;
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
	av = calloc((size_t)an + 18 + dr->n_srun_args, sizeof(*av));
	/* The slow nodes among the step's, for the agents' placement. */
	slow = flagged_list(dr, dr->slow, s->idx, s->n);
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

static int start_step(struct driver *dr, struct step *s)
{
	char *list = node_list(dr, s->idx, s->n), *spec = stand_ins(dr, s);
	const char *report = phx_drv_lost_rekey(dr->lost);
	sigset_t none;
	int p[2];

	if (!list || pipe2(p, O_CLOEXEC) < 0) {
		free(list);
		free(spec);
		return -1;
	}
	phx_info("starting the step on %zu node(s) %s (%zu spare, %zu excluded)%s%s", s->n, list,
		 phx_drv_healthy(dr->st.bad, dr->alloc.count) - s->n,
		 dr->alloc.count - phx_drv_healthy(dr->st.bad, dr->alloc.count),
		 dr->st.layout_now[0] ? ", layout " : "", dr->st.layout_now);
	/* srun passes the environment on to the step's agents. */
	if (report)
		setenv(PHX_LOST_ENV, report, 1);
	s->pid = fork();
	if (s->pid == 0) {
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
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

static void kill_step(struct driver *dr, struct step *s)
{
	uint32_t id = find_step(dr, s->pid);

	s->killed = true;
	if (id != NO_VAL && phx_slurm_kill_job_step(dr->job_id, id, SIGKILL) != SLURM_SUCCESS)
		phx_warn("cannot kill step %u.%u: %s", dr->job_id, id, slurm_strerror(errno));
	phx_info("stopped step %u.%u after a node failure", dr->job_id, id);
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

static void handle_signals(struct driver *dr, struct step *s, bool *child)
{
	struct signalfd_siginfo si;

	while (read(dr->sig_fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGCHLD) {
			*child = true;
			continue;
		}
		if (dr->preempt_sig && (int)si.ssi_signo == dr->preempt_sig) {
			forward_preemption(dr, s, (int)si.ssi_signo);
			continue;
		}
		/* TERM, INT: srun passes them to the agents, which stop the workers. */
		dr->stop_sig = (int)si.ssi_signo;
		kill(s->pid, (int)si.ssi_signo);
	}
}

static int reap(struct step *s)
{
	int st;

	if (waitpid(s->pid, &st, WNOHANG) != s->pid)
		return 0;
	s->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return 1;
}

/*
 * srun's own report of a lost agent counts when Slurm names no bad node:
 * when Slurm ends a step for a node failure, the agents of the healthy
 * nodes are killed too, and Slurm's view says which node it was.
 */
static void srun_report(struct driver *dr, struct step *s)
{
	long i;

	/* After a failed launch srun kills the agents it had started: no node's fault. */
	if (s->new_bad || s->killed || dr->stop_sig || !s->vanished[0] || s->have_result ||
	    s->launch_failed)
		return;
	i = alloc_index(dr, s->vanished);
	if (i >= 0 && s->silent)
		dr->unconfirmed[i] = true;
	if (i >= 0)
		node_bad(dr, s, (size_t)i,
			 s->silent ? "its agent stopped beating: the node is dead, hung or cut off"
				   : "srun reported its agent killed or the node failed",
			 NULL);
}

/* Until srun exits: its output, signals, node states. */
static void watch(struct driver *dr, struct step *s)
{
	uint64_t next_poll = 0, kill_at = 0;
	bool gone = false;

	while (!gone) {
		struct pollfd pf[3] = { { dr->sig_fd, POLLIN, 0 },
					{ phx_drv_lost_fd(dr->lost), POLLIN, 0 },
					{ s->err_fd, POLLIN, 0 } };
		uint64_t now;
		bool child = false;

		poll(pf, s->err_fd >= 0 ? 3 : 2, 200);
		if (pf[0].revents)
			handle_signals(dr, s, &child);
		if (pf[1].revents)
			phx_drv_lost_read(dr->lost, note_lost, s);
		if (s->err_fd >= 0 && pf[2].revents)
			drain_pipe(s);
		gone = reap(s);
		if (gone)
			break;
		now = now_ms();
		if (kill_at && now >= kill_at) {
			phx_debug("srun did not end after its step was killed; killing srun");
			kill(s->pid, SIGKILL);
			kill_at = 0;
		}
		if (!s->killed && !dr->stop_sig && (now >= next_poll || s->lost)) {
			/*
			 * The watchers name the lost node themselves: no call to a
			 * loaded controller before acting. srun's reports need
			 * Slurm's view (it kills every node's agent for one node).
			 */
			bool stop = !(s->lost && s->silent) && check_nodes(dr, s);

			next_poll = now + POLL_MS;
			if (s->lost && !stop) {
				srun_report(dr, s);
				stop = s->new_bad > 0;
			}
			s->lost = false;
			if (stop) {
				kill_step(dr, s);
				kill_at = now + KILL_WAIT_MS;
			}
		}
	}
	if (s->err_fd >= 0) {
		fcntl(s->err_fd, F_SETFL, 0);
		drain_pipe(s);
	}
}

/* The job is pending again: done ending its old run (nodes freed, epilogs run). */
static bool pending_again(uint32_t job_id)
{
	job_info_msg_t *info = NULL;
	bool pending = false;

	if (slurm_load_job(&info, job_id, SHOW_DETAIL) == SLURM_SUCCESS && info &&
	    info->record_count) {
		uint32_t st = info->job_array[0].job_state;

		pending = (st & JOB_STATE_BASE) == JOB_PENDING && !(st & JOB_COMPLETING);
	}
	slurm_free_job_info_msg(info);
	return pending;
}

/*
 * A requeued job waits about two minutes unless its begin time is set to
 * now (phx_requeue_begin_time), and avoids the bad nodes only once they are excluded. Slurm also
 * looks at it again only on some event: the job turning pending after its
 * old run ends is not one, so it could sit until the next periodic pass.
 * Updating the job once it is pending is such an event. Slurm ends this
 * batch script meanwhile (TERM, KILL after KillWait); TERM is blocked here
 * (signalfd), so the driver keeps at it until then.
 */
static void nudge_requeued(struct driver *dr, char *bad)
{
	bool told = false;

	for (int t = 0; t < 600; t++) {
		bool pending = pending_again(dr->job_id);
		job_desc_msg_t jd;

		slurm_init_job_desc_msg(&jd);
		jd.job_id = dr->job_id;
		/* Until it is pending, Slurm's own hold stays: the old run may still be killed. */
		jd.begin_time = pending ? phx_requeue_begin_time() : 0;
		jd.exc_nodes = bad;
		if (slurm_update_job(&jd) == SLURM_SUCCESS) {
			if (!told)
				phx_info("job %u requeued%s%s", dr->job_id,
					 bad ? ", excluding " : "", bad ? bad : "");
			told = true;
			if (pending)
				return;
		}
		usleep(100000);
	}
}

/*
 * Slurm's view decides what a requeue excludes (common/requeue.h): never
 * into a partition too small for the job without its bad nodes. NULL
 * *exclude with 0: exclude nothing; -1: do not requeue (said why).
 */
static int plan_requeue(struct driver *dr, char *bad, char **exclude)
{
	struct phx_requeue_plan plan;
	char err[512];

	/* The run started on the job's whole request: the requeue needs as many. */
	if (phx_requeue_check(dr->job_id, bad, dr->alloc.count,
			      (enum phx_too_few)dr->conf->recovery.too_few_nodes, &plan, exclude,
			      err, sizeof(err)) < 0) {
		phx_warn("cannot ask Slurm whether job %u fits without %s (%s); requeueing it "
			 "excluding them",
			 dr->job_id, bad ? bad : "any node", err);
		*exclude = bad ? strdup(bad) : NULL;
		return 0;
	}
	switch (plan.verdict) {
	case PHX_REQUEUE_OK:
		phx_debug("job %u: %s", dr->job_id, plan.why);
		return 0;
	case PHX_REQUEUE_WAIT:
		phx_warn("job %u: %s", dr->job_id, plan.why);
		phx_drv_ckptd_report(dr->ckptd, "wait", NULL, 0, plan.why);
		return 0;
	case PHX_REQUEUE_DEAD_END:
		break;
	}
	phx_error("stopping job %u: %s", dr->job_id, plan.why);
	phx_drv_ckptd_report(dr->ckptd, "stop", NULL, 0, plan.why);
	free(*exclude);
	*exclude = NULL;
	return -1;
}

/* Counts the nodes found bad by their agent's silence alone that Slurm still calls usable. */
static size_t count_unconfirmed(struct driver *dr)
{
	size_t n = 0;

	check_nodes(dr, NULL);
	for (size_t i = 0; i < dr->alloc.count; i++)
		n += dr->unconfirmed[i];
	return n;
}

/*
 * The agents find a dead node seconds before Slurm calls it DOWN. A requeue
 * short of nodes must leave such a node to Slurm, which keeps the job off it
 * until it returns, not exclude it for good: the job would then wait for
 * other nodes only. So first wait for Slurm's verdict, at most
 * verdict_wait_ms(); a node Slurm still calls usable then is excluded.
 */
static void await_slurm_verdict(struct driver *dr, const char *bad)
{
	struct phx_requeue_plan plan;
	char *exclude = NULL, err[256];
	size_t n = count_unconfirmed(dr);
	uint64_t until;

	if (!n || phx_requeue_check(dr->job_id, bad, dr->alloc.count,
				    (enum phx_too_few)dr->conf->recovery.too_few_nodes, &plan,
				    &exclude, err, sizeof(err)) < 0)
		return;
	free(exclude);
	if (plan.verdict == PHX_REQUEUE_OK)
		return;
	until = now_ms() + verdict_wait_ms();
	phx_warn("job %u has too few nodes for a requeue without %s; waiting up to %llu s for "
		 "Slurm to call the %zu node(s) its agents found lost DOWN, so that Slurm keeps "
		 "the job off them only until they return",
		 dr->job_id, bad, (unsigned long long)(until - now_ms()) / 1000, n);
	while (n && now_ms() < until) {
		usleep(250000);
		n = count_unconfirmed(dr);
	}
}

static int requeue(struct driver *dr, const char *why)
{
	char *bad = flagged_list(dr, dr->st.bad, NULL, dr->alloc.count), *exclude = NULL;

	phx_error("requeueing job %u: %s", dr->job_id, why);
	if (bad)
		await_slurm_verdict(dr, bad);
	if (plan_requeue(dr, bad, &exclude) < 0) {
		free(bad);
		return PHX_EXIT_NO_NODES;
	}
	free(bad);
	if (slurm_requeue(dr->job_id, 0) != SLURM_SUCCESS) {
		phx_error("Slurm refused to requeue job %u: %s; exiting with %d, which requeues it "
			  "where slurm.conf has RequeueExit=%d (unless the job was submitted "
			  "with --no-requeue, from Slurm 23.11.5 on); resubmit it otherwise",
			  dr->job_id, slurm_strerror(errno), PHX_EXIT_REQUEUE, PHX_EXIT_REQUEUE);
		free(exclude);
		return PHX_EXIT_REQUEUE;
	}
	nudge_requeued(dr, exclude);
	free(exclude);
	return PHX_EXIT_REQUEUE;
}

static int finish(struct driver *dr, const struct phx_drv_decision *d)
{
	switch (d->action) {
	case PHX_DRV_DONE:
		phx_info("the job finished (%u relaunch(es))", dr->st.relaunches);
		return PHX_EXIT_OK;
	case PHX_DRV_REPEATED:
		phx_error("stopping: %s", d->why);
		return d->exit_code;
	case PHX_DRV_REQUEUE:
		return requeue(dr, d->why);
	case PHX_DRV_STOP:
		phx_error("stopping: %s", d->why);
		return d->exit_code ? d->exit_code : PHX_EXIT_WORKERS;
	case PHX_DRV_RELAUNCH:
		break;
	}
	return -1;
}

/* Verdicts on nodes idx[0..n): failed ones are bad, slow ones go to placement. */
static size_t apply_verdicts(struct driver *dr, const size_t *idx, size_t n,
			     const struct phx_check_verdict *v)
{
	size_t failed = 0;

	for (size_t k = 0; k < n; k++) {
		size_t i = idx[k];
		char why[PHX_CHECK_TEXT + 64];

		switch (v[k].state) {
		case PHX_CHECK_FAILED:
			snprintf(why, sizeof(why), "preflight check failed: %s", v[k].reason);
			node_bad(dr, NULL, i, why, v[k].reason);
			failed++;
			break;
		case PHX_CHECK_SLOW:
		case PHX_CHECK_SUSPECT:
			phx_warn("node %s is %s in the preflight check (%s): placement keeps it "
				 "off the critical path",
				 dr->alloc.names[i], phx_check_state_name(v[k].state), v[k].reason);
			dr->slow[i] = true;
			dr->trusted[i] = true;
			phx_drv_ckptd_report(dr->ckptd, "check", dr->alloc.names[i], 1,
					     v[k].reason);
			break;
		case PHX_CHECK_OK:
			dr->slow[i] = false;
			dr->trusted[i] = true;
			phx_drv_ckptd_report(dr->ckptd, "check", dr->alloc.names[i], 1, NULL);
			break;
		}
	}
	return failed;
}

/*
 * Checks the nodes a step is about to use (and, the first time, the
 * spares) that have not passed since they last joined. -1: none passed
 * in the first check, where requeueing would only fail the same way.
 */
static int preflight(struct driver *dr, const size_t *next, size_t nnext, bool first)
{
	size_t *idx = calloc(dr->alloc.count, sizeof(*idx)), n, failed;
	struct phx_check_verdict *v = calloc(dr->alloc.count, sizeof(*v));
	char **hosts = calloc(dr->alloc.count, sizeof(*hosts)), err[1024];
	int rc = -1;

	if (!idx || !v || !hosts)
		goto out;
	n = phx_drv_to_check(dr->st.bad, dr->trusted, dr->alloc.count, dr->nprev ? dr->prev : NULL,
			     dr->nprev, next, nnext, idx);
	rc = 0;
	if (!n)
		goto out;
	for (size_t k = 0; k < n; k++)
		hosts[k] = dr->alloc.names[idx[k]];
	phx_info("preflight: checking %zu node(s)%s%s", n, dr->pf_results ? " from " : "",
		 dr->pf_results ? dr->pf_results : "");
	if (phx_drv_preflight_run(dr->conf, dr->pf_results, hosts, n, v, err, sizeof(err)) < 0) {
		/* No measurement is no pass: every node fails with the reason. */
		for (size_t k = 0; k < n; k++) {
			memset(&v[k], 0, sizeof(v[k]));
			v[k].state = PHX_CHECK_FAILED;
			snprintf(v[k].reason, sizeof(v[k].reason), "%.250s", err);
		}
	}
	failed = apply_verdicts(dr, idx, n, v);
	if (first && failed == n) {
		phx_error("preflight: every node failed the check, so the job is not run (nor "
			  "requeued); see the reasons above, or run 'phalanx check' on them");
		rc = -1;
	}
out:
	free(idx);
	free(v);
	free(hosts);
	return rc;
}

/*
 * The nodes of the next step into s, after the preflight check of the
 * ones not trusted (which may exclude some, and bring in spares that are
 * checked in turn). 1: start it; 0: finished with *rc (requeue, stop).
 */
static int pick_nodes(struct driver *dr, struct step *s, bool first, int *rc)
{
	struct phx_drv_decision d;
	bool ok;

	for (;;) {
		settle_suspects(dr);
		phx_drv_fit(&dr->st, &d);
		if (d.action != PHX_DRV_RELAUNCH) {
			*rc = finish(dr, &d);
			return 0;
		}
		s->n = pick(dr, s->idx);
		if (!dr->preflight)
			return 1;
		if (preflight(dr, s->idx, s->n, first) < 0) {
			*rc = PHX_EXIT_SETUP;
			return 0;
		}
		first = false;
		/* Just checked: not checked again for this step. */
		dr->nprev = 0;
		for (size_t i = 0; i < dr->alloc.count; i++) {
			if (dr->trusted[i] && !dr->st.bad[i])
				dr->prev[dr->nprev++] = i;
		}
		ok = true;
		for (size_t k = 0; k < s->n; k++)
			ok &= !dr->st.bad[s->idx[k]];
		if (ok)
			break;
		/* Nodes failed: spares in their place, or fewer nodes, or requeue. */
		phx_drv_fit(&dr->st, &d);
		if (d.action != PHX_DRV_RELAUNCH) {
			*rc = finish(dr, &d);
			return 0;
		}
	}
	/* A node that joins a later step and is not among these is checked again. */
	memcpy(dr->prev, s->idx, s->n * sizeof(*s->idx));
	dr->nprev = s->n;
	return 1;
}

/*
 * A launch that failed with no node lost is retried after a pause, not
 * counted as a relaunch: the usual cause is a step of the job's earlier
 * run (the same job and step id after a requeue) still ending on a node,
 * whose Slurm PMIx server socket is still bound there; Slurm's PMIx plugin
 * can take tens of seconds to give up on a dead peer. A node that really
 * died is called DOWN by Slurm meanwhile, and left out of the next try.
 * False once LAUNCH_RETRY_MS of tries are spent.
 */
static bool retry_launch(struct driver *dr, uint64_t *since, unsigned *tries)
{
	uint64_t now = now_ms(), wait = 1000ull << (*tries < 3 ? *tries : 3);
	struct pollfd pf = { dr->sig_fd, POLLIN, 0 };

	if (!*since)
		*since = now;
	if (now - *since + wait > LAUNCH_RETRY_MS)
		return false;
	(*tries)++;
	phx_warn("the step's launch failed (srun's lines above) and no node is lost: trying again "
		 "in %llu s (try %u; a step of the job's earlier run may still be ending on one of "
		 "its nodes)",
		 (unsigned long long)wait / 1000, *tries);
	/* A TERM, INT or the preemption signal meanwhile is taken as during a step. */
	if (poll(&pf, 1, (int)wait) > 0) {
		struct signalfd_siginfo si;

		while (read(dr->sig_fd, &si, sizeof(si)) == sizeof(si)) {
			if (dr->preempt_sig && (int)si.ssi_signo == dr->preempt_sig)
				dr->preempted = true;
			else if (si.ssi_signo != SIGCHLD)
				dr->stop_sig = (int)si.ssi_signo;
		}
	}
	return !dr->stop_sig && !dr->preempted;
}

/* The agents were preempted: requeue now rather than relaunch. */
static int after_preemption(struct driver *dr, const struct step *s)
{
	if (phx_drv_preempted(dr->preempted, s->status))
		return requeue(dr, "the agents were preempted and their workers stopped");
	phx_error("stopping: the step ended with exit %d after the preemption signal; not "
		  "relaunched while the job is being preempted",
		  s->status);
	return s->status;
}

static int run(struct driver *dr)
{
	struct phx_drv_decision d;
	struct step s;
	bool first = true;
	uint64_t retry_since = 0;
	unsigned retries = 0;
	int rc;

	check_nodes(dr, NULL);
	phx_drv_fit(&dr->st, &d);
	if (d.action != PHX_DRV_RELAUNCH)
		return finish(dr, &d);
	for (;;) {
		struct phx_drv_outcome out = { 0 };

		memset(&s, 0, sizeof(s));
		s.err_fd = -1;
		s.idx = calloc(dr->alloc.count, sizeof(*s.idx));
		if (!s.idx)
			return PHX_EXIT_SETUP;
		if (!pick_nodes(dr, &s, first, &rc)) {
			free(s.idx);
			return rc;
		}
		first = false;
		if (start_step(dr, &s) < 0) {
			free(s.idx);
			return PHX_EXIT_SETUP;
		}
		watch(dr, &s);
		/* After srun: Slurm's view once more, then srun's own reports. */
		check_nodes(dr, &s);
		/* A step that ended well lost no node, whatever a watcher heard as it ended. */
		if (s.status || !s.silent)
			srun_report(dr, &s);
		free(s.idx);
		if (s.launch_failed && !s.new_bad && !dr->stop_sig && !dr->preempted) {
			if (retry_launch(dr, &retry_since, &retries))
				continue;
			/* No worker ran since the last step: nothing to save first. */
			if (dr->preempted)
				return requeue(dr,
					       "preempted while the step waited to launch again");
		}
		retry_since = 0;
		retries = 0;
		/* A step that finished before the preemption took hold is done. */
		if (dr->preempted && s.status != 0)
			return after_preemption(dr, &s);
		out.status = s.status;
		out.new_bad = s.new_bad;
		out.stopped = dr->stop_sig != 0;
		out.result = s.have_result ? &s.result : NULL;
		if (out.stopped)
			out.status = 128 + dr->stop_sig;
		phx_drv_decide(&dr->st, &out, &d);
		rc = finish(dr, &d);
		if (rc >= 0)
			return rc;
		phx_warn("relaunching (%u of %u): %s", dr->st.relaunches, dr->st.max_relaunches,
			 d.why);
	}
}

static int setup(struct driver *dr, const struct phx_conf *conf)
{
	const char *list = getenv("SLURM_JOB_NODELIST"), *id = getenv("SLURM_JOB_ID");
	struct phx_launch_opts *o = dr->o;
	char err[1024];
	ssize_t n;
	int spares = o->driver.spares >= 0 ? o->driver.spares : conf->launcher.spares;

	if (!list || phx_hostlist_expand(list, &dr->alloc, err, sizeof(err)) < 0) {
		phx_error("cannot read the allocation's nodes from SLURM_JOB_NODELIST '%s': %s",
			  list ? list : "", list ? err : "not set");
		return PHX_EXIT_USAGE;
	}
	if ((size_t)spares >= dr->alloc.count) {
		phx_error("--spares %d leaves no node to run on: the allocation has %zu node(s); "
			  "ask sbatch for more nodes (-N) or hold fewer spares",
			  spares, dr->alloc.count);
		return PHX_EXIT_USAGE;
	}
	dr->job_id = (uint32_t)strtoul(id, NULL, 10);
	dr->st.nalloc = dr->alloc.count;
	dr->st.bad = calloc(dr->alloc.count, sizeof(*dr->st.bad));
	if (!dr->st.bad)
		return PHX_EXIT_SETUP;
	dr->st.want = (unsigned)(dr->alloc.count - (size_t)spares);
	dr->st.nproc = o->nproc_per_node ? o->nproc_per_node
					 : phx_cuda_count(getenv("CUDA_VISIBLE_DEVICES"));
	if (!dr->st.nproc)
		dr->st.nproc = 1;
	dr->st.layout = o->layout;
	dr->st.elastic = o->driver.elastic;
	dr->st.max_relaunches =
		(unsigned)(o->driver.max_relaunches >= 0 ? o->driver.max_relaunches
							 : conf->launcher.max_relaunches);
	dr->st.same_limit =
		(unsigned)(o->driver.same_failure_limit >= 0 ? o->driver.same_failure_limit
							     : conf->launcher.same_failure_limit);
	dr->drain = o->driver.drain >= 0 ? o->driver.drain : conf->launcher.drain_bad_nodes;
	dr->srun = o->driver.srun ? o->driver.srun : "srun";
	dr->srun_args = o->driver.srun_args;
	dr->n_srun_args = o->driver.n_srun_args;
	dr->conf = conf;
	dr->preflight = o->driver.preflight >= 0 ? o->driver.preflight : conf->launcher.preflight;
	dr->pf_results = o->driver.preflight_results;
	dr->preempt_sig = o->preempt_sig;
	dr->trusted = calloc(dr->alloc.count, sizeof(*dr->trusted));
	dr->slow = calloc(dr->alloc.count, sizeof(*dr->slow));
	dr->suspect = calloc(dr->alloc.count, sizeof(*dr->suspect));
	dr->unconfirmed = calloc(dr->alloc.count, sizeof(*dr->unconfirmed));
	dr->prev = calloc(dr->alloc.count, sizeof(*dr->prev));
	dr->last = calloc(dr->alloc.count, sizeof(*dr->last));
	dr->placed_as = calloc(dr->alloc.count, sizeof(*dr->placed_as));
	for (size_t i = 0; dr->placed_as && i < dr->alloc.count; i++)
		dr->placed_as[i] = i;
	if (!dr->trusted || !dr->slow || !dr->suspect || !dr->unconfirmed || !dr->prev ||
	    !dr->last || !dr->placed_as)
		return PHX_EXIT_SETUP;
	n = readlink("/proc/self/exe", dr->self, sizeof(dr->self) - 1);
	if (n <= 0) {
		phx_error("cannot find this program's own path: %s", strerror(errno));
		return PHX_EXIT_SETUP;
	}
	dr->self[n] = '\0';
	dr->ckptd = phx_drv_ckptd_open(conf, dr->job_id);
	dr->lost = phx_drv_lost_open();
	return 0;
}

static int setup_signals(struct driver *dr)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if (dr->preempt_sig) {
		/* A shell's trap '' would leave it ignored, and never read here. */
		signal(dr->preempt_sig, SIG_DFL);
		sigaddset(&set, dr->preempt_sig);
	}
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return -1;
	signal(SIGPIPE, SIG_IGN);
	dr->sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	return dr->sig_fd < 0 ? -1 : 0;
}

int phx_driver_main(struct phx_launch_opts *o, const struct phx_conf *conf, int argc, char **argv)
{
	struct driver dr = { .o = o, .argc = argc - 1, .argv = argv + 1, .sig_fd = -1 };
	int rc;

	slurm_init(NULL);
	rc = setup(&dr, conf);
	if (!rc && setup_signals(&dr) < 0) {
		phx_error("cannot set up signal handling: %s", strerror(errno));
		rc = PHX_EXIT_SETUP;
	}
	if (!rc)
		rc = run(&dr);
	phx_drv_ckptd_close(dr.ckptd);
	phx_drv_lost_close(dr.lost);
	if (dr.sig_fd >= 0)
		close(dr.sig_fd);
	slurm_free_node_info_msg(dr.nodes);
	free(dr.st.bad);
	free(dr.trusted);
	free(dr.slow);
	free(dr.suspect);
	free(dr.unconfirmed);
	free(dr.prev);
	free(dr.last);
	free(dr.placed_as);
	phx_hostnames_free(&dr.alloc);
	slurm_fini();
	return rc;
}
