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
#include "launcher/driver/driver_int.h"

#define LAUNCH_RETRY_MS 180000 /* failed launches retried this long, none counted */

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
		phx_drv_settle_suspects(dr);
		phx_drv_fit(&dr->st, &d);
		if (d.action != PHX_DRV_RELAUNCH) {
			*rc = phx_drv_finish(dr, &d);
			return 0;
		}
		s->n = phx_drv_pick_healthy(dr, s->idx);
		if (!dr->preflight)
			return 1;
		if (phx_drv_preflight(dr, s->idx, s->n, first) < 0) {
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
			*rc = phx_drv_finish(dr, &d);
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
	uint64_t now = phx_drv_now_ms(), wait = 1000ull << (*tries < 3 ? *tries : 3);
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
		return phx_drv_requeue(dr, "the agents were preempted and their workers stopped");
	phx_error("stopping: the step ended with exit %d after the preemption signal; not "
		  "relaunched while the job is being preempted",
		  s->status);
	return s->status;
}

static int run(struct driver *dr)
{
	struct phx_drv_decision d;
	struct step s, *sp = &s;
	bool first = true;
	uint64_t retry_since = 0;
	unsigned retries = 0;
	int rc;

	phx_drv_check_nodes(dr, NULL, 0);
	phx_drv_fit(&dr->st, &d);
	if (d.action != PHX_DRV_RELAUNCH)
		return phx_drv_finish(dr, &d);
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
		if (phx_drv_step_start(dr, &s) < 0) {
			free(s.idx);
			return PHX_EXIT_SETUP;
		}
		phx_drv_steps_watch(dr, &sp, 1, 0);
		/* After srun: Slurm's view once more, then srun's own reports. */
		phx_drv_check_nodes(dr, &sp, 1);
		/* A step that ended well lost no node, whatever a watcher heard as it ended. */
		if (s.status || !s.silent)
			phx_drv_step_report(dr, &s);
		free(s.idx);
		if (s.launch_failed && !s.new_bad && !dr->stop_sig && !dr->preempted) {
			if (retry_launch(dr, &retry_since, &retries))
				continue;
			/* No worker ran since the last step: nothing to save first. */
			if (dr->preempted)
				return phx_drv_requeue(
					dr, "preempted while the step waited to launch again");
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
		rc = phx_drv_finish(dr, &d);
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
	dr->drained = calloc(dr->alloc.count, sizeof(*dr->drained));
	dr->prev = calloc(dr->alloc.count, sizeof(*dr->prev));
	dr->last = calloc(dr->alloc.count, sizeof(*dr->last));
	dr->placed_as = calloc(dr->alloc.count, sizeof(*dr->placed_as));
	for (size_t i = 0; dr->placed_as && i < dr->alloc.count; i++)
		dr->placed_as[i] = i;
	if (!dr->trusted || !dr->slow || !dr->suspect || !dr->unconfirmed || !dr->drained ||
	    !dr->prev || !dr->last || !dr->placed_as)
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
	/* Roles each in a step of their own; otherwise one step for the job. */
	if (!rc)
		rc = o->explicit_roles ? phx_drv_steps_run(&dr) : run(&dr);
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
	free(dr.drained);
	free(dr.prev);
	free(dr.last);
	free(dr.placed_as);
	phx_hostnames_free(&dr.alloc);
	slurm_fini();
	return rc;
}
