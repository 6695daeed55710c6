/* SPDX-License-Identifier: Apache-2.0 */
/* The job requeued, or the driver's end, after a decision. */
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

	phx_drv_check_nodes(dr, NULL, 0);
	for (size_t i = 0; i < dr->alloc.count; i++)
		n += dr->unconfirmed[i];
	return n;
}

/*
 * The agents find a dead node seconds before Slurm calls it DOWN. A requeue
 * short of nodes must leave such a node to Slurm, which keeps the job off it
 * until it returns, not exclude it for good: the job would then wait for
 * other nodes only. So first wait for Slurm's verdict, at most
 * phx_drv_verdict_wait_ms(); a node Slurm still calls usable then is excluded.
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
	until = phx_drv_now_ms() + phx_drv_verdict_wait_ms();
	phx_warn("job %u has too few nodes for a requeue without %s; waiting up to %llu s for "
		 "Slurm to call the %zu node(s) its agents found lost DOWN, so that Slurm keeps "
		 "the job off them only until they return",
		 dr->job_id, bad, (unsigned long long)(until - phx_drv_now_ms()) / 1000, n);
	while (n && phx_drv_now_ms() < until) {
		usleep(250000);
		n = count_unconfirmed(dr);
	}
}

int phx_drv_requeue(struct driver *dr, const char *why)
{
	char *bad = phx_drv_flagged_list(dr, dr->st.bad, NULL, dr->alloc.count), *exclude = NULL;

	phx_error("requeueing job %u: %s", dr->job_id, why);
	if (bad)
		await_slurm_verdict(dr, bad);
	if (plan_requeue(dr, bad, &exclude) < 0) {
		free(bad);
		return PHX_EXIT_NO_NODES;
	}
	free(bad);
	if (slurm_requeue(dr->job_id, 0) != SLURM_SUCCESS) {
		phx_error(
			"Slurm refused to requeue job %u: %s; exiting with %d, which requeues it "
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

int phx_drv_finish(struct driver *dr, const struct phx_drv_decision *d)
{
	switch (d->action) {
	case PHX_DRV_DONE:
		phx_info("the job finished (%u relaunch(es))", dr->st.relaunches);
		return PHX_EXIT_OK;
	case PHX_DRV_REPEATED:
		phx_error("stopping: %s", d->why);
		return d->exit_code;
	case PHX_DRV_REQUEUE:
		return phx_drv_requeue(dr, d->why);
	case PHX_DRV_STOP:
		phx_error("stopping: %s", d->why);
		return d->exit_code ? d->exit_code : PHX_EXIT_WORKERS;
	case PHX_DRV_RELAUNCH:
		break;
	}
	return -1;
}
