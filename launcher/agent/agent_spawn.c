/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Workers as processes: each starts in its own process group with its
 * output on two pipes; the agent is a child subreaper, so whatever a
 * worker leaves behind is reparented to it and stopped with the rest. A
 * stop is TERM (and CONT, for a stopped worker) to every group, a grace
 * period, then KILL, and ends only when the agent has no child left.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint/proto/heartbeat.h"
#include "common/clock.h"
#include "common/log.h"
#include "placement/torchenv.h"
#include "launcher/env.h"
#include "launcher/options.h"
#include "launcher/output.h"
#include "launcher/restart.h"
#include "launcher/role.h"
#include "launcher/agent/agent.h"
#include "launcher/agent/agent_workers.h"

unsigned phx_agent_running(const struct phx_agent *a)
{
	unsigned n = 0;

	for (unsigned i = 0; i < a->nproc; i++)
		n += a->w[i].running;
	return n;
}

/* ------------------------------------------------------------ output */

struct line_dest {
	struct phx_worker *w;
	int fd;
};

static void emit_line(void *arg, const char *line, size_t len)
{
	struct line_dest *d = arg;
	char buf[PHX_LINE_MAX + 64];
	int head = snprintf(buf, sizeof(buf), "[rank %lu] ", d->w->rank);
	size_t n = (size_t)head;
	ssize_t rc;

	memcpy(buf + n, line, len);
	n += len;
	buf[n++] = '\n';
	/* One write per line, so lines of different ranks never interleave. */
	rc = write(d->fd, buf, n);
	if (d->w->log_fd >= 0)
		rc = write(d->w->log_fd, buf + head, n - (size_t)head);
	(void)rc;
}

static void drain_fd(struct phx_worker *w, int *fd, struct phx_linebuf *lb, int to)
{
	struct line_dest d = { w, to };
	char buf[65536];
	ssize_t n;

	for (;;) {
		n = read(*fd, buf, sizeof(buf));
		if (n > 0) {
			phx_linebuf_feed(lb, buf, (size_t)n, emit_line, &d);
			continue;
		}
		if (n < 0 && (errno == EINTR))
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		/* End of file (or an error): the last partial line, then close. */
		phx_linebuf_flush(lb, emit_line, &d);
		close(*fd);
		*fd = -1;
		return;
	}
}

/* What is in a worker's pipes goes out, then they close. */
static void close_output(struct phx_worker *w)
{
	if (w->out_fd >= 0)
		drain_fd(w, &w->out_fd, &w->out, STDOUT_FILENO);
	if (w->err_fd >= 0)
		drain_fd(w, &w->err_fd, &w->err, STDERR_FILENO);
	/* Still open: a grandchild holds the pipe; it is being killed. */
	if (w->out_fd >= 0)
		close(w->out_fd);
	if (w->err_fd >= 0)
		close(w->err_fd);
	w->out_fd = w->err_fd = -1;
}

void phx_agent_close_outputs(struct phx_agent *a)
{
	for (unsigned i = 0; i < a->nproc; i++)
		close_output(&a->w[i]);
}

/* ------------------------------------------------------------ signals and reaping */

static struct phx_worker *worker_by_pid(struct phx_agent *a, pid_t pid)
{
	for (unsigned i = 0; i < a->nproc; i++) {
		if (a->w[i].pid == pid && a->w[i].running)
			return &a->w[i];
	}
	return NULL;
}

static bool first_of(const struct phx_worker *a, const struct phx_worker *b)
{
	if (a->waiting != b->waiting)
		return !a->waiting;
	return a->fail_ns < b->fail_ns;
}

void phx_agent_update_report(struct phx_agent *a)
{
	struct phx_report *r = &a->local;
	const struct phx_worker *first = NULL;
	unsigned done = 0, most = 0;
	bool self = a->roles[a->role].policy == PHX_RESTART_SELF;

	if (r->state == PHX_NODE_SHUTDOWN || r->state == PHX_NODE_PREEMPTING ||
	    r->state == PHX_NODE_PREEMPTED)
		return;
	for (unsigned i = 0; i < a->nproc; i++) {
		const struct phx_worker *w = &a->w[i];

		if (w->failed) {
			if (!first || first_of(w, first))
				first = w;
			most = w->restarts > most ? w->restarts : most;
		} else if (w->pid && !w->running && WIFEXITED(w->status) &&
			   !WEXITSTATUS(w->status)) {
			done++;
		}
	}
	r->role = a->role;
	r->epoch = a->epoch;
	r->state = PHX_NODE_RUNNING;
	r->fail_ns = 0;
	r->fail_rank = -1;
	r->kind = PHX_FAIL_NONE;
	r->code = 0;
	r->waiting = false;
	if (first) {
		r->state = PHX_NODE_FAILED;
		/* A self role: the restarts of its most restarted failed worker count. */
		r->epoch = self ? most : a->epoch;
		r->fail_ns = first->fail_ns;
		r->fail_rank = (long)first->rank;
		r->kind = first->kind;
		r->code = first->code;
		r->waiting = first->waiting;
	} else if (done == a->nproc) {
		r->state = PHX_NODE_DONE;
	}
}

/*
 * The worker's error file says it failed because a peer went away (a
 * collective's connection closed): a consequence, which on a busy node may
 * be reaped before the failure that caused it, so it ranks after every
 * worker that failed on its own, as a waiting one does.
 */
static bool died_of_a_peer(struct phx_agent *a, const struct phx_worker *w)
{
	char path[4096], msg[1024], trace[16];

	return phx_worker_error_read(a->run_dir, w->restarts, w->rank, path, sizeof(path), msg,
				     sizeof(msg), trace, sizeof(trace)) == 0 &&
	       phx_errfile_peer_lost(msg);
}

static void note_exit(struct phx_agent *a, struct phx_worker *w, int status)
{
	w->running = false;
	w->status = status;
	/* Stopping: exits are ours, not failures. */
	if (a->shutdown_sig || a->stopping || a->preempting || w->failed)
		return;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		w->failed = true;
		w->fail_ns = phx_now_ns(CLOCK_REALTIME);
		w->kind = WIFSIGNALED(status) ? PHX_FAIL_SIGNAL : PHX_FAIL_EXIT;
		w->code = WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status);
		w->waiting = WIFEXITED(status) && died_of_a_peer(a, w);
	}
	phx_agent_update_report(a);
}

static void reap(struct phx_agent *a)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		struct phx_worker *w = worker_by_pid(a, pid);

		/* Not a worker: one of theirs, reparented to us and now gone. */
		if (w)
			note_exit(a, w, status);
	}
}

void phx_agent_forward(struct phx_agent *a, int sig)
{
	for (unsigned i = 0; i < a->nproc; i++) {
		if (!a->w[i].running)
			continue;
		if (kill(-a->w[i].pid, sig) < 0 && errno != ESRCH)
			phx_warn("cannot send signal %d to rank %lu: %s", sig, a->w[i].rank,
				 strerror(errno));
		else if (sig == SIGTERM)
			a->w[i].term_sent = true;
	}
}

static void handle_signals(struct phx_agent *a)
{
	struct signalfd_siginfo si;

	while (read(a->sig_fd, &si, sizeof(si)) == sizeof(si)) {
		int sig = (int)si.ssi_signo;

		if (sig == SIGCHLD) {
			reap(a);
			continue;
		}
		/*
		 * The agreement may have brought the preemption here before this
		 * agent's own signal (another node's woke it): once is enough.
		 */
		if (sig == a->o->preempt_sig && a->preempting) {
			phx_info("signal %d (SIG%s): the workers had it already through the "
				 "agreement",
				 sig, sigabbrev_np(sig));
			continue;
		}
		phx_info("forwarding signal %d (SIG%s) to the workers", sig, sigabbrev_np(sig));
		phx_agent_forward(a, sig);
		if (sig == a->o->preempt_sig)
			a->preempt_signal = true;
		else if ((sig == SIGTERM || sig == SIGINT) && !a->shutdown_sig)
			a->shutdown_sig = sig;
	}
	/* A SIGCHLD may have been merged with the one that woke us. */
	reap(a);
}

int phx_agent_pump_add(struct phx_agent *a, const struct phx_agent_source *s)
{
	if (a->nsources == PHX_AGENT_SOURCES_MAX) {
		phx_error("the agent's main loop has room for %d event sources; raise "
			  "PHX_AGENT_SOURCES_MAX",
			  PHX_AGENT_SOURCES_MAX);
		return -1;
	}
	a->sources[a->nsources++] = *s;
	return 0;
}

/* Signals, the agreement round, the sources; then the workers' pipes. */
#define PUMP_FIXED 2

int phx_agent_pump(struct phx_agent *a, int timeout_ms, int extra_fd, bool *extra_ready)
{
	struct pollfd pfd[PUMP_FIXED + PHX_AGENT_SOURCES_MAX + 2 * 4096];
	struct phx_worker *who[2 * 4096];
	unsigned n = 0, fixed = PUMP_FIXED + a->nsources;
	int rc;

	pfd[n++] = (struct pollfd){ .fd = a->sig_fd, .events = POLLIN };
	pfd[n++] = (struct pollfd){ .fd = extra_fd, .events = POLLIN };
	for (unsigned k = 0; k < a->nsources; k++) {
		const struct phx_agent_source *s = &a->sources[k];
		short events = 0;
		int fd = s->fd ? s->fd(s->ctx, &events) : -1;

		pfd[n++] = (struct pollfd){ .fd = fd, .events = events };
	}
	for (unsigned i = 0; i < a->nproc; i++) {
		struct phx_worker *w = &a->w[i];

		if (w->out_fd >= 0) {
			who[n - fixed] = w;
			pfd[n++] = (struct pollfd){ .fd = w->out_fd, .events = POLLIN };
		}
		if (w->err_fd >= 0) {
			who[n - fixed] = w;
			pfd[n++] = (struct pollfd){ .fd = w->err_fd, .events = POLLIN };
		}
	}
	if (extra_ready)
		*extra_ready = false;
	for (unsigned k = 0; k < a->nsources; k++) {
		const struct phx_agent_source *s = &a->sources[k];
		int t = s->timeout_ms ? s->timeout_ms(s->ctx) : -1;

		if (t >= 0 && (timeout_ms < 0 || t < timeout_ms))
			timeout_ms = t;
	}
	rc = poll(pfd, n, timeout_ms);
	if (rc < 0)
		return errno == EINTR ? 0 : -1;
	for (unsigned i = fixed; i < n; i++) {
		struct phx_worker *w = who[i - fixed];

		if (!pfd[i].revents)
			continue;
		if (pfd[i].fd == w->out_fd)
			drain_fd(w, &w->out_fd, &w->out, STDOUT_FILENO);
		else if (pfd[i].fd == w->err_fd)
			drain_fd(w, &w->err_fd, &w->err, STDERR_FILENO);
	}
	if (pfd[0].revents)
		handle_signals(a);
	for (unsigned k = 0; k < a->nsources; k++) {
		const struct phx_agent_source *s = &a->sources[k];
		short revents = pfd[PUMP_FIXED + k].revents;

		if (revents || s->every_round)
			s->handle(s->ctx, revents);
	}
	if (extra_fd >= 0 && pfd[1].revents && extra_ready)
		*extra_ready = true;
	return 0;
}

/* ------------------------------------------------------------ spawning */

/* Between fork and exec: async-signal-safe calls only. */
static void __attribute__((noreturn))
child(struct phx_agent *a, int out, int err, const struct phx_binding *b, char **envp, pid_t agent)
{
	sigset_t none;
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

	/* A worker dies with its agent (killed, OOM): none trains on as an orphan. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != agent)
		_exit(127);
	setpgid(0, 0);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	if (null >= 0)
		dup2(null, STDIN_FILENO);
	dup2(out, STDOUT_FILENO);
	dup2(err, STDERR_FILENO);
	if (b->cpus_set)
		sched_setaffinity(0, sizeof(b->mask), &b->mask);
	execvpe(a->argv[0], a->argv, envp);
	{
		static const char msg[] = "phalanx: cannot run the worker command: exec failed\n";
		ssize_t rc = write(STDERR_FILENO, msg, sizeof(msg) - 1);

		(void)rc;
	}
	_exit(127);
}

static int open_log(struct phx_agent *a, struct phx_worker *w)
{
	char path[4096];

	if (!a->o->log_dir)
		return 0;
	snprintf(path, sizeof(path), "%s/rank-%lu.log", a->o->log_dir, w->rank);
	w->log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (w->log_fd < 0) {
		phx_error("cannot open the log file %s: %s; check --log-dir", path,
			  strerror(errno));
		return -1;
	}
	if (w->restarts)
		dprintf(w->log_fd, "phalanx: restart %u\n", w->restarts);
	return 0;
}

static int spawn_one(struct phx_agent *a, struct phx_worker *w, struct phx_worker_ctx *ctx)
{
	extern char **environ;
	struct phx_envv env;
	struct phx_binding b;
	int out[2] = { -1, -1 }, err[2] = { -1, -1 };
	pid_t pid, agent;

	if (phx_envv_from(&env, environ) < 0 || phx_worker_env(&env, ctx, w->slot, &b) < 0) {
		phx_error("cannot build the environment of rank %lu", w->rank);
		phx_envv_free(&env);
		return -1;
	}
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || open_log(a, w) < 0) {
		phx_error("cannot make the output pipes of rank %lu: %s", w->rank, strerror(errno));
		goto fail;
	}
	phx_hb_reset(a->hb, w->slot, 0);
	w->wait_seen_ns = 0;
	agent = getpid();
	pid = fork();
	if (pid < 0) {
		phx_error("cannot start rank %lu: fork: %s", w->rank, strerror(errno));
		goto fail;
	}
	if (pid == 0)
		child(a, out[1], err[1], &b, env.v, agent);
	/* Both sides set the group, so no signal can find the worker outside it. */
	setpgid(pid, pid);
	phx_hb_reset(a->hb, w->slot, pid);
	close(out[1]);
	close(err[1]);
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(err[0], F_SETFL, O_NONBLOCK);
	w->pid = pid;
	w->running = true;
	w->term_sent = false;
	w->status = 0;
	w->out_fd = out[0];
	w->err_fd = err[0];
	w->out.len = w->err.len = 0;
	w->start_ns = phx_now_ns(CLOCK_MONOTONIC);
	phx_envv_free(&env);
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (err[i] >= 0)
			close(err[i]);
	}
	phx_envv_free(&env);
	return -1;
}

int phx_agent_spawn_one(struct phx_agent *a, struct phx_worker *w)
{
	struct phx_worker_ctx ctx = {
		.map = &a->map,
		.topo = a->topo,
		.master_addr = a->master_addr,
		.master_port = a->master_port,
		.restart_count = w->restarts,
		.max_restarts = a->roles[a->role].max_restarts,
		.run_id = a->run_id,
		.run_dir = a->run_dir,
		.hb_fd = a->hb_fd,
		.agent_pid = getpid(),
		.node = a->node,
		.cpus = a->have_cpus ? &a->cpus : NULL,
		.role = &a->role_env,
	};
	int rc;

	a->role_env.master_addr = a->role_master_addr;
	a->role_env.master_port = a->role_master_port;
	w->failed = false;
	w->nsamples = 0;
	if (w->log_fd >= 0)
		close(w->log_fd);
	w->log_fd = -1;
	rc = spawn_one(a, w, &ctx);
	phx_agent_update_report(a);
	return rc;
}

int phx_agent_spawn_all(struct phx_agent *a)
{
	memset(&a->local, 0, sizeof(a->local));
	a->local.role = a->role;
	a->local.epoch = a->epoch;
	a->local.fail_rank = -1;
	for (unsigned i = 0; i < a->nproc; i++) {
		struct phx_worker *w = &a->w[i];

		w->slot = i;
		w->rank = a->role_env.rank_offset + a->map.slot_rank[i];
		w->restarts = a->epoch;
		w->pid = 0;
		w->running = false;
	}
	for (unsigned i = 0; i < a->nproc; i++) {
		if (phx_agent_spawn_one(a, &a->w[i]) < 0)
			return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ stopping */

/* Our children that are not running workers: left behind by a worker, reparented here. */
static unsigned signal_orphans(struct phx_agent *a, int sig)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	unsigned n = 0;
	pid_t me = getpid();

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char path[64], buf[512], *p;
		long pid = strtol(e->d_name, &p, 10), ppid;
		FILE *f;

		if (*p || pid <= 0 || worker_by_pid(a, (pid_t)pid))
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
		f = fopen(path, "re");
		if (!f)
			continue;
		p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
		fclose(f);
		/* ") S PPID ...": the name may hold anything, the last ')' ends it. */
		if (!p || sscanf(p + 1, " %*c %ld", &ppid) != 1 || ppid != me)
			continue;
		kill((pid_t)pid, sig);
		if (sig != SIGKILL)
			kill((pid_t)pid, SIGCONT);
		n++;
	}
	closedir(d);
	return n;
}

static void signal_all(struct phx_agent *a, int sig)
{
	for (unsigned i = 0; i < a->nproc; i++) {
		if (!a->w[i].running)
			continue;
		if (sig != SIGTERM || !a->w[i].term_sent)
			kill(-a->w[i].pid, sig);
		/* A stopped worker (SIGSTOP, a debugger gone) only sees TERM once it runs. */
		if (sig != SIGKILL)
			kill(-a->w[i].pid, SIGCONT);
	}
	signal_orphans(a, sig);
}

static bool has_children(void)
{
	siginfo_t si = { 0 };

	return waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == 0;
}

void phx_agent_stop_all(struct phx_agent *a)
{
	uint64_t deadline =
		phx_now_ns(CLOCK_MONOTONIC) + (uint64_t)a->o->term_timeout_s * 1000000000ull;
	/* Exits from here on are ours: not failures. */
	a->stopping = true;
	signal_all(a, SIGTERM);
	/* Whatever a worker left behind gets the same grace as the worker. */
	while ((phx_agent_running(a) || has_children()) && phx_now_ns(CLOCK_MONOTONIC) < deadline)
		phx_agent_pump(a, 50, -1, NULL);
	for (int tries = 0; tries < 100 && (phx_agent_running(a) || has_children()); tries++) {
		signal_all(a, SIGKILL);
		phx_agent_pump(a, 50, -1, NULL);
	}
	if (phx_agent_running(a) || has_children())
		phx_error("some processes of the workers did not die after SIGKILL "
			  "(stuck in the kernel, state D?); see ps -o pid,stat,wchan");
	phx_agent_close_outputs(a);
	a->stopping = false;
}

void phx_agent_stop_one(struct phx_agent *a, struct phx_worker *w)
{
	uint64_t deadline =
		phx_now_ns(CLOCK_MONOTONIC) + (uint64_t)a->o->term_timeout_s * 1000000000ull;

	a->stopping = true;
	if (w->running) {
		kill(-w->pid, SIGTERM);
		kill(-w->pid, SIGCONT);
	}
	while (w->running && phx_now_ns(CLOCK_MONOTONIC) < deadline)
		phx_agent_pump(a, 50, -1, NULL);
	for (int tries = 0; tries < 100 && w->running; tries++) {
		kill(-w->pid, SIGKILL);
		phx_agent_pump(a, 50, -1, NULL);
	}
	if (w->running)
		phx_error("rank %lu (pid %d) did not die after SIGKILL (stuck in the kernel, "
			  "state D?); see ps -o pid,stat,wchan",
			  w->rank, (int)w->pid);
	close_output(w);
	a->stopping = false;
}
