/* SPDX-License-Identifier: Apache-2.0 */
/* The allocation's nodes as Slurm sees them, and the ones found bad. */
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

long phx_drv_alloc_index(const struct driver *dr, const char *name)
{
	for (size_t i = 0; i < dr->alloc.count; i++) {
		if (!strcmp(dr->alloc.names[i], name))
			return (long)i;
	}
	return -1;
}

static bool drain_node(const char *node, const char *reason)
{
	char why[512], err[256];

	snprintf(why, sizeof(why), "phalanx-launch: %s", reason);
	if (phx_slurm_drain_by(node, why, getuid(), err, sizeof(err)) < 0) {
		phx_warn("cannot drain node %s: %s; it is only excluded from this job (draining "
			 "needs Slurm operator rights)",
			 node, err);
		return false;
	}
	phx_info("drained node %s (%s)", node, reason);
	return true;
}

/*
 * The one place a node is found bad: it is excluded for the rest of the
 * job, drained when asked to, logged, and reported to phalanx-ckptd: a
 * failed check (failed_check: what it measured) as such, any other cause
 * as a restart without the node, told before the relaunch so the daemon
 * does not requeue the job for the node's silence.
 */
void phx_drv_node_bad(struct driver *dr, struct step *s, size_t i, const char *reason,
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
		dr->drained[i] = drain_node(dr->alloc.names[i], reason);
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

/* The step of steps[0..n) that runs on node i, or NULL. */
static struct step *step_on(struct step **steps, size_t n, size_t i)
{
	for (size_t k = 0; k < n; k++) {
		for (size_t j = 0; steps[k] && j < steps[k]->n; j++) {
			if (steps[k]->idx[j] == i)
				return steps[k];
		}
	}
	return NULL;
}

/*
 * Marks the allocation's nodes Slurm calls unusable; a step of steps[0..n)
 * with such a node that must stop it gets ->stop. True when one must.
 */
/* Slurm's node table in dr->nodes, fetched again only when it changed; -1: none. */
static int load_nodes(struct driver *dr)
{
	node_info_msg_t *msg = NULL;
	time_t since = dr->nodes ? dr->nodes->last_update : 0;

	if (slurm_load_node(since, &msg, SHOW_ALL) == SLURM_SUCCESS) {
		slurm_free_node_info_msg(dr->nodes);
		dr->nodes = msg;
	} else if (errno != SLURM_NO_CHANGE_IN_DATA) {
		phx_debug("slurm_load_node: %s", slurm_strerror(errno));
		return -1;
	}
	return 0;
}

bool phx_drv_check_nodes(struct driver *dr, struct step **steps, size_t nsteps)
{
	bool stop_step = false;

	if (load_nodes(dr) < 0)
		return false;
	for (uint32_t k = 0; dr->nodes && k < dr->nodes->record_count; k++) {
		node_info_t *n = &dr->nodes->node_array[k];
		struct step *s;
		const char *why;
		bool stop;
		long i;

		if (!n->name || (i = phx_drv_alloc_index(dr, n->name)) < 0)
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
		s = step_on(steps, nsteps, (size_t)i);
		phx_drv_node_bad(dr, s, (size_t)i, why, NULL);
		if (s && stop) {
			s->stop = true;
			stop_step = true;
		}
	}
	return stop_step;
}

/* The job's nodes now, as Slurm holds them: it takes a DOWN node out of a --no-kill job. */
static int job_nodes(const struct driver *dr, struct phx_hostnames *out)
{
	job_info_msg_t *jobs = NULL;
	char err[256];
	int rc = -1;

	if (slurm_load_job(&jobs, dr->job_id, SHOW_DETAIL) != SLURM_SUCCESS) {
		phx_debug("slurm_load_job %u: %s", dr->job_id, slurm_strerror(errno));
		return -1;
	}
	if (jobs->record_count == 1 && jobs->job_array[0].nodes &&
	    phx_hostlist_expand(jobs->job_array[0].nodes, out, err, sizeof(err)) == 0)
		rc = 0;
	slurm_free_job_info_msg(jobs);
	return rc;
}

static bool listed(const struct phx_hostnames *h, const char *name)
{
	for (size_t i = 0; i < h->count; i++)
		if (!strcmp(h->names[i], name))
			return true;
	return false;
}

size_t phx_drv_repaired(struct driver *dr, size_t *idx)
{
	struct phx_hostnames held = { 0 };
	bool any = false;
	size_t n = 0;

	for (size_t i = 0; i < dr->alloc.count; i++)
		any |= dr->st.bad[i] && dr->drained[i];
	if (!any || load_nodes(dr) < 0 || job_nodes(dr, &held) < 0)
		return 0;
	for (uint32_t k = 0; dr->nodes && k < dr->nodes->record_count; k++) {
		node_info_t *nd = &dr->nodes->node_array[k];
		bool stop;
		long i;

		if (!nd->name || (i = phx_drv_alloc_index(dr, nd->name)) < 0 || !dr->st.bad[i] ||
		    !dr->drained[i] || bad_state(nd->node_state, &stop) ||
		    (nd->node_state & NODE_STATE_NO_RESPOND) || !listed(&held, nd->name))
			continue;
		dr->st.bad[i] = dr->drained[i] = dr->unconfirmed[i] = dr->suspect[i] = false;
		dr->trusted[i] = false; /* checked again before it runs, when the check is on */
		idx[n++] = (size_t)i;
		phx_info("node %s is back: Slurm no longer drains it and job %u still holds it",
			 nd->name, dr->job_id);
	}
	phx_hostnames_free(&held);
	return n;
}

/* How long Slurm may take to call a silent node DOWN: SlurmdTimeout and a ping's round. */
uint64_t phx_drv_verdict_wait_ms(void)
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
 * answering again), at most phx_drv_verdict_wait_ms(); a node still silent then
 * is bad. With enough answering nodes the step just avoids the others.
 */
void phx_drv_settle_suspects(struct driver *dr)
{
	uint64_t until = 0;
	size_t suspects;

	while (count_sure(dr, &suspects) < dr->st.want && suspects) {
		if (!until) {
			until = phx_drv_now_ms() + phx_drv_verdict_wait_ms();
			phx_warn("%zu node(s) of job %u do not answer Slurm (NOT_RESPONDING); "
				 "waiting "
				 "up to %llu s for Slurm to hear from them or call them DOWN",
				 suspects, dr->job_id,
				 (unsigned long long)(until - phx_drv_now_ms()) / 1000);
		}
		if (phx_drv_now_ms() >= until) {
			for (size_t i = 0; i < dr->alloc.count; i++)
				if (dr->suspect[i] && !dr->st.bad[i])
					phx_drv_node_bad(
						dr, NULL, i,
						"its slurmd did not answer Slurm for SlurmdTimeout",
						NULL);
			return;
		}
		usleep(250000);
		phx_drv_check_nodes(dr, NULL, 0);
	}
}

/* The step's nodes: the first healthy ones, answering ones first. */
size_t phx_drv_pick_healthy(struct driver *dr, size_t *idx)
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

char *phx_drv_node_list(const struct driver *dr, const size_t *idx, size_t n)
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
char *phx_drv_flagged_list(const struct driver *dr, const bool *flag, const size_t *idx, size_t n)
{
	size_t *sel = calloc(n ? n : 1, sizeof(*sel)), k = 0;
	char *list = NULL;

	for (size_t i = 0; sel && i < n; i++) {
		size_t a = idx ? idx[i] : i;

		if (flag[a])
			sel[k++] = a;
	}
	if (k)
		list = phx_drv_node_list(dr, sel, k);
	free(sel);
	return list;
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
			phx_drv_node_bad(dr, NULL, i, why, v[k].reason);
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
int phx_drv_preflight(struct driver *dr, const size_t *next, size_t nnext, bool first)
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
