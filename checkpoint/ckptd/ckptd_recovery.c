/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Recovery in phalanx-ckptd: agents' heartbeats and reports, and Slurm's
 * view of the job and its nodes, become faults; the policy
 * (checkpoint/ckptd/recovery_policy.h) decides; the daemon drains, requeues without
 * the node with a begin time of now, or stops the job, and keeps the
 * job's goodput ledger (checkpoint/ckptd/goodput.h) across requeues in the journal.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>
#include <slurm/slurm.h>

#include "checkpoint/ckptd/ckptd_clock.h"
#include "checkpoint/ckptd/ckptd_job.h"
#include "checkpoint/ckptd/ckptd_journal.h"
#include "checkpoint/ckptd/ckptd_recovery.h"
#include "checkpoint/ckptd/ckptd_slurm.h"
#include "checkpoint/proto/ckpt_json.h"
#include "common/drain.h"
#include "common/hostlist.h"
#include "common/log.h"
#include "common/requeue.h"
#include "common/slurm_compat.h"

/* ------------------------------------------------------------------ members, nodes */

static struct ckptd_member *member(struct ckptd_recovery *r, const char *node, int add)
{
	for (size_t i = 0; i < r->nmembers; i++)
		if (!strcmp(r->members[i].node, node))
			return &r->members[i];
	if (!add)
		return NULL;
	if (r->nmembers == r->capmembers) {
		size_t cap = r->capmembers ? 2 * r->capmembers : 8;
		struct ckptd_member *v = realloc(r->members, cap * sizeof(*v));

		if (!v)
			return NULL;
		r->members = v;
		r->capmembers = cap;
	}
	memset(&r->members[r->nmembers], 0, sizeof(r->members[0]));
	snprintf(r->members[r->nmembers].node, sizeof(r->members[0].node), "%s", node);
	return &r->members[r->nmembers++];
}

static struct ckptd_node *node_rec(struct ckptd *d, const char *name)
{
	for (size_t i = 0; i < d->nnodes; i++)
		if (!strcmp(d->nodes[i].name, name))
			return &d->nodes[i];
	if (d->nnodes == d->capnodes) {
		size_t cap = d->capnodes ? 2 * d->capnodes : 16;
		struct ckptd_node *v = realloc(d->nodes, cap * sizeof(*v));

		if (!v)
			return NULL;
		d->nodes = v;
		d->capnodes = cap;
	}
	memset(&d->nodes[d->nnodes], 0, sizeof(d->nodes[0]));
	snprintf(d->nodes[d->nnodes].name, sizeof(d->nodes[0].name), "%s", name);
	return &d->nodes[d->nnodes++];
}

static void journal_job(struct ckptd *d, struct ckptd_job *j)
{
	char *text = ckptd_recovery_record(j), err[512];

	/* Every recovery record holds the roles: it counts as their journaling. */
	j->r.roles_journaled = ckptd_now();
	if (!text || ckptd_journal_append(&d->journal, text, strlen(text), err, sizeof(err)) < 0)
		phx_warn("job %u: the recovery record was not journaled (%s); the goodput of "
			 "this job may be incomplete after a restart of the daemon",
			 j->id, text ? err : "out of memory");
	free(text);
}

/* A new run of the job (start, in-job restart, requeue): members heard afresh. */
static void new_run(struct ckptd_recovery *r)
{
	r->nmembers = 0;
	r->phase_step = UINT64_MAX;
	r->run++;
}

static void start_ledger(struct ckptd_job *j)
{
	struct ckptd_recovery *r = &j->r;

	if (!r->on) {
		phx_gp_begin(&r->gp, ckptd_wall());
		r->on = 1;
		new_run(r);
	}
}

/* ------------------------------------------------------------------ actions */

static void exclude_add(struct ckptd_recovery *r, const char *node)
{
	size_t n = strlen(r->exclude), k = strlen(node);

	if (phx_requeue_listed(r->exclude, node))
		return;
	if (n + k + 2 > sizeof(r->exclude)) {
		phx_warn("the exclusion list is full; %s is not added to it", node);
		return;
	}
	snprintf(r->exclude + n, sizeof(r->exclude) - n, "%s%s", n ? "," : "", node);
}

static void drain(struct ckptd *d, const struct ckptd_job *j, const char *node, const char *reason,
		  int lost)
{
	struct ckptd_node *nr = node_rec(d, node);
	char why[PHX_DRAIN_REASON_MAX + 1], err[512];

	snprintf(why, sizeof(why), "%.150s; back after a passing check", reason);
	if (nr)
		snprintf(nr->reason, sizeof(nr->reason), "%s", why);
	if (!d->rc_act)
		return;
	/* A lost node is set DOWN first, so that Slurm ends the job's part on it now. */
	if (lost && ckptd_slurm_node_down(node, why, err, sizeof(err)) < 0) {
		d->rm.slurm_errors++;
		phx_warn("cannot set node %s DOWN: %s", node, err);
	}
	if (phx_slurm_drain(node, why, err, sizeof(err)) < 0) {
		d->rm.slurm_errors++;
		phx_error("cannot drain node %s: %s; drain it with 'scontrol update nodename=%s "
			  "state=drain reason=...'",
			  node, err, node);
		return;
	}
	d->rm.drains++;
	if (nr) {
		nr->drained_job = j->id;
		snprintf(nr->drained_as, sizeof(nr->drained_as), "%s", why);
	}
	phx_info("drained node %s: %s", node, why);
}

/* Slurm requeues a job itself when one of its nodes is set DOWN: that counts. */
static int requeued_already(uint32_t id)
{
	struct ckptd_sjob s;
	char err[256];

	return ckptd_slurm_job(id, &s, err, sizeof(err)) == 0 && s.state == JOB_PENDING;
}

static void stop_job(struct ckptd *d, struct ckptd_job *j, const char *reason);

/* r->exclude becomes the names of the host list (NULL: none), one by one. */
static void set_exclude(struct ckptd_recovery *r, const char *list)
{
	struct phx_hostnames h = { 0 };
	char err[256];

	if (list && phx_hostlist_expand(list, &h, err, sizeof(err)) < 0) {
		phx_warn("the exclusion list \"%s\" is not read (%s); it stays %s", list, err,
			 r->exclude);
		return;
	}
	r->exclude[0] = '\0';
	for (size_t i = 0; i < h.count; i++)
		exclude_add(r, h.names[i]);
	phx_hostnames_free(&h);
}

/*
 * Never a requeue into a dead end (common/requeue.h): -1 when the job
 * was stopped instead; r->exclude becomes what Slurm is told to exclude.
 */
static int plan_requeue(struct ckptd *d, struct ckptd_job *j)
{
	struct ckptd_recovery *r = &j->r;
	struct phx_requeue_plan plan;
	char err[512], *exclude = NULL;

	if (phx_requeue_check(j->id, r->exclude, 0, (enum phx_too_few)d->rc_too_few, &plan,
			      &exclude, err, sizeof(err)) < 0) {
		d->rm.slurm_errors++;
		phx_warn("job %u: cannot ask Slurm whether it fits without %s (%s); requeueing it "
			 "as planned",
			 j->id, r->exclude[0] ? r->exclude : "its bad nodes", err);
		return 0;
	}
	if (plan.verdict == PHX_REQUEUE_DEAD_END) {
		r->rec.stopped = 1;
		snprintf(r->rec.stop_reason, sizeof(r->rec.stop_reason), "%s", plan.why);
		snprintf(r->reason, sizeof(r->reason), "%s", plan.why);
		stop_job(d, j, plan.why);
		free(exclude);
		return -1;
	}
	if (plan.verdict == PHX_REQUEUE_WAIT && strcmp(r->reason, plan.why)) {
		phx_warn("job %u: %s", j->id, plan.why);
		snprintf(r->reason, sizeof(r->reason), "%s", plan.why);
	}
	/* Waiting for nodes: exclude only what the plan keeps. */
	if (plan.verdict == PHX_REQUEUE_WAIT)
		set_exclude(r, exclude);
	free(exclude);
	return 0;
}

static void requeue(struct ckptd *d, struct ckptd_job *j)
{
	struct ckptd_recovery *r = &j->r;
	char err[512];

	if (!d->rc_act) {
		phx_info("job %u: would requeue without %s (recovery.act is false)", j->id,
			 r->exclude[0] ? r->exclude : "(none)");
		return;
	}
	if (plan_requeue(d, j) < 0)
		return;
	if (ckptd_slurm_requeue(j->id, err, sizeof(err)) < 0 && !requeued_already(j->id)) {
		d->rm.slurm_errors++;
		phx_error("job %u: cannot requeue: %s; the job is left as it is", j->id, err);
		return;
	}
	phx_recovery_requeued(&r->rec);
	phx_gp_requeue(&r->gp, ckptd_wall());
	r->requeued_at = ckptd_wall();
	r->fix_pending = 1;
	r->next_poll = 0;
	d->rm.requeues++;
	new_run(r);
	phx_info("job %u: requeued (%u of at most %d), without %s", j->id, r->rec.requeues,
		 d->rc.max_requeues, r->exclude[0] ? r->exclude : "(none)");
}

static void stop_job(struct ckptd *d, struct ckptd_job *j, const char *reason)
{
	char err[512];

	d->rm.stops++;
	phx_error("job %u: stopped: %s", j->id, reason);
	if (!d->rc_act) {
		phx_info("job %u: not cancelled (recovery.act is false)", j->id);
		return;
	}
	/* The user sees it in 'scontrol show job' (AdminComment), beside phalanx status. */
	if (ckptd_slurm_comment(j->id, reason, err, sizeof(err)) < 0)
		phx_debug("job %u: %s", j->id, err);
	if (ckptd_slurm_cancel(j->id, err, sizeof(err)) < 0) {
		d->rm.slurm_errors++;
		phx_warn("job %u: cannot cancel: %s", j->id, err);
	}
	phx_gp_end(&j->r.gp, ckptd_wall());
	j->r.ended = 1;
}

/* A fault of job j on node (NULL: job-wide), noticed detect_s after it happened. */
static void fault(struct ckptd *d, struct ckptd_job *j, const char *node, enum phx_fault f,
		  const char *sig, double detect_s)
{
	struct ckptd_recovery *r = &j->r;
	struct ckptd_node *nr = node ? node_rec(d, node) : NULL;
	struct phx_recovery_decision dec;

	start_ledger(j);
	if (r->rec.stopped) {
		/* Given up already: the time is accounted, nothing more is done. */
		if (r->gp.phase == PHX_GP_PH_RUN)
			phx_gp_fault(&r->gp, ckptd_wall(), detect_s);
		phx_debug("job %u: %s after the job was stopped", j->id, phx_fault_name(f));
		return;
	}
	phx_recovery_decide(&d->rc, &r->rec, nr ? &nr->r : NULL, node, f, sig, ckptd_wall(), &dec);
	if (f == PHX_FAULT_STRAGGLER)
		return;
	/* A driver relaunches the job on its spares, or requeues it itself. */
	if (dec.requeue && j->drivers) {
		dec.requeue = 0;
		phx_info("job %u: not requeued: its driver relaunches it%s%s", j->id,
			 node ? " without " : "", node ? node : "");
	}
	snprintf(r->reason, sizeof(r->reason), "%s", dec.reason);
	if (r->gp.phase == PHX_GP_PH_RUN) {
		phx_gp_fault(&r->gp, ckptd_wall(), detect_s);
		r->detect_last_s = detect_s;
	}
	phx_info("job %u: %s%s%s: %s", j->id, phx_fault_name(f), node ? " on " : "",
		 node ? node : "", dec.reason);
	if (dec.restart) {
		r->restarts++;
		d->rm.restarts++;
		r->phase_step = UINT64_MAX;
	}
	if ((dec.drain || dec.requeue) && node)
		exclude_add(r, node);
	if (dec.drain && node)
		drain(d, j, node, dec.reason, f == PHX_FAULT_LOST);
	if (dec.requeue)
		requeue(d, j);
	if (dec.stop)
		stop_job(d, j, dec.reason);
	journal_job(d, j);
}

/* ------------------------------------------------------------------ agents */

void ckptd_recovery_registered(struct ckptd *d, struct ckptd_conn *c)
{
	struct ckptd_job *j = c->job;
	struct ckptd_recovery *r = &j->r;

	(void)d;
	start_ledger(j);
	if (r->gp.phase == PHX_GP_PH_QUEUE) {
		/* Running again before the poll saw it: the queue ends here. */
		r->queue_last_s = ckptd_wall() - r->requeued_at;
		phx_gp_running(&r->gp, ckptd_wall());
		journal_job(d, j);
	}
	if (r->ended && !r->rec.stopped) {
		/* A finished job's id came back (scontrol requeue by hand): a new run. */
		r->ended = 0;
		r->gp.phase = PHX_GP_PH_RESTART;
		r->gp.since = ckptd_wall();
		r->gp.end = 0;
	}
	if (r->gp.phase == PHX_GP_PH_RESTART && r->run == 0)
		new_run(r);
	c->last_hb = 0;
	c->run = r->run;
}

void ckptd_recovery_heartbeat(struct ckptd *d, struct ckptd_conn *c, uint64_t step)
{
	struct ckptd_job *j = c->job;
	struct ckptd_recovery *r = &j->r;
	struct ckptd_member *mb;

	d->rm.heartbeats++;
	c->last_hb = ckptd_now();
	/* An agent of a run the job left (requeued) is going away: not a member. */
	if (c->run != r->run || r->gp.phase == PHX_GP_PH_QUEUE)
		return;
	mb = member(r, c->node, 1);
	if (mb) {
		mb->last_hb = c->last_hb;
		mb->lost = 0;
	}
	if (r->phase_step == UINT64_MAX) {
		r->phase_step = step;
		return;
	}
	if (step > r->phase_step && r->gp.phase == PHX_GP_PH_RESTART) {
		phx_gp_step(&r->gp, ckptd_wall());
		journal_job(d, j);
	}
}

static void save_stall(struct ckptd_job *j, const struct phx_wire_msg *m)
{
	struct ckptd_recovery *r = &j->r;
	double s = (double)m->value / 1e6;

	/* Ranks save in parallel: a generation stalls training as long as its slowest. */
	if (m->has_gen && m->gen == r->stall_gen) {
		if (s <= r->stall_gen_s)
			return;
		phx_gp_stall(&r->gp, ckptd_wall(), s - r->stall_gen_s);
		r->stall_gen_s = s;
		return;
	}
	r->stall_gen = m->has_gen ? m->gen : 0;
	r->stall_gen_s = s;
	phx_gp_stall(&r->gp, ckptd_wall(), s);
}

static void check_result(struct ckptd *d, struct ckptd_job *j, const struct phx_wire_msg *m)
{
	struct ckptd_node *nr = node_rec(d, m->node);
	char reason[256] = "", err[512];

	if (!m->value) {
		fault(d, j, m->node, PHX_FAULT_CHECK, m->reason, 0);
		return;
	}
	if (!nr || !phx_recovery_node_checked(&nr->r, 1))
		return;
	phx_info("node %s passed its check; it is trusted again", m->node);
	if (!d->rc_act)
		return;
	/*
	 * Only this daemon's drain for this job is undone, and only while Slurm
	 * still gives that reason: an administrator's, the health prolog's and
	 * another job's stay.
	 */
	if (ckptd_slurm_node_reason(m->node, reason, sizeof(reason), err, sizeof(err)) < 0 ||
	    nr->drained_job != j->id || strcmp(reason, nr->drained_as)) {
		phx_info(
			"node %s keeps its state in Slurm (reason \"%s\"): job %u did not drain it",
			m->node, reason, j->id);
		return;
	}
	if (ckptd_slurm_node_resume(m->node, err, sizeof(err)) < 0) {
		d->rm.slurm_errors++;
		phx_warn("cannot resume node %s: %s", m->node, err);
		return;
	}
	d->rm.resumes++;
	nr->reason[0] = '\0';
	nr->drained_job = 0;
	nr->drained_as[0] = '\0';
	phx_info("resumed node %s in Slurm", m->node);
}

int ckptd_recovery_event(struct ckptd *d, struct ckptd_conn *c, const struct phx_wire_msg *m)
{
	struct ckptd_job *j = c->job;
	const char *node = m->node ? m->node : c->node;
	double lag = (double)m->value / 1e6;
	int f = phx_fault_parse(m->kind);

	start_ledger(j);
	if (!strcmp(m->kind, "save")) {
		save_stall(j, m);
		return 0; /* the catalog's statistics take it too */
	}
	if (!strcmp(m->kind, "check")) {
		check_result(d, j, m);
		return 1;
	}
	if (!strcmp(m->kind, "straggler")) {
		phx_gp_straggler(&j->r.gp, ckptd_wall(), lag);
		return 1;
	}
	if (!strcmp(m->kind, "restart")) {
		struct ckptd_member *mb = m->node ? member(&j->r, m->node, 0) : NULL;

		/* After a crash or hang report the restart is counted already. */
		if (j->r.gp.phase == PHX_GP_PH_RUN) {
			phx_gp_fault(&j->r.gp, ckptd_wall(), lag);
			j->r.restarts++;
			d->rm.restarts++;
		}
		j->r.phase_step = UINT64_MAX;
		/* Relaunched in the allocation without node: not lost to this daemon. */
		if (mb && !mb->lost) {
			mb->lost = 1;
			phx_info("job %u: restarted in the allocation without node %s", j->id,
				 m->node);
		}
		journal_job(d, j);
		return 1;
	}
	if (!strcmp(m->kind, "done")) {
		phx_gp_end(&j->r.gp, ckptd_wall());
		j->r.ended = 1;
		journal_job(d, j);
		return 1;
	}
	if (f < 0)
		return 0;
	/* crash and hang: the node says where; the policy does not blame it. */
	fault(d, j, node, (enum phx_fault)f, m->reason, f == PHX_FAULT_XID ? 0 : lag);
	return 1;
}

/*
 * The job's driver relaunches it in its allocation without node: the
 * silence of the step's agents until the new step's register, and the
 * node's DOWN state in Slurm, are the driver's to handle, not a loss that
 * requeues the job.
 */
static void driver_restart(struct ckptd *d, struct ckptd_job *j, const struct phx_wire_msg *m)
{
	exclude_add(&j->r, m->node);
	/* A job with roles: each role's record has its own restart and lost work. */
	if (j->r.nroles)
		j->r.gp.failures++;
	else if (j->r.gp.phase == PHX_GP_PH_RUN)
		phx_gp_fault(&j->r.gp, ckptd_wall(), 0);
	j->r.restarts++;
	d->rm.restarts++;
	/* Every agent of the step goes with it: members are the next step's. */
	new_run(&j->r);
	phx_info("job %u: node %s dropped by the job's driver, which relaunches without it: %s",
		 j->id, m->node, m->reason ? m->reason : "no reason given");
	journal_job(d, j);
}

/*
 * The driver's preflight check of node: a failure makes the node
 * untrusted (back after a passing check); the driver has excluded it
 * already, so the job is not touched.
 */
static void driver_check(struct ckptd *d, struct ckptd_job *j, const struct phx_wire_msg *m)
{
	struct ckptd_node *nr;

	if (m->value) {
		check_result(d, j, m);
		return;
	}
	nr = node_rec(d, m->node);
	if (!nr)
		return;
	nr->r.untrusted = 1;
	nr->r.n++;
	snprintf(nr->reason, sizeof(nr->reason), "preflight check failed: %.150s",
		 m->reason ? m->reason : "no reason given");
	phx_warn("job %u: node %s failed the driver's preflight check (%s); untrusted until it "
		 "passes a check",
		 j->id, m->node, m->reason ? m->reason : "no reason given");
}

/*
 * The driver's word on the whole job: its requeue waits for nodes
 * ("wait"), or it stopped the job ("stop", e.g. a requeue that could
 * never run). Shown by phalanx status and goodput; nothing is done.
 */
static void driver_verdict(struct ckptd *d, struct ckptd_job *j, const struct phx_wire_msg *m)
{
	struct ckptd_recovery *r = &j->r;
	const char *why = m->reason ? m->reason : "no reason given";

	snprintf(r->reason, sizeof(r->reason), "%s", why);
	if (!strcmp(m->kind, "stop")) {
		r->rec.stopped = 1;
		snprintf(r->rec.stop_reason, sizeof(r->rec.stop_reason), "%s", why);
		d->rm.stops++;
		phx_error("job %u: stopped by its driver: %s", j->id, why);
	} else {
		phx_warn("job %u: requeued by its driver to wait for nodes: %s", j->id, why);
	}
	journal_job(d, j);
}

/* ------------------------------------------------------------------ roles */

/*
 * A driver reports every few seconds; its records are journaled when a run
 * or a failure count changes, and otherwise at most this often, so that a
 * restart of the daemon loses at most this much of a role's time.
 */
#define CKPTD_ROLE_JOURNAL_S 30.0
#define CKPTD_ROLE_WARN_S 60.0 /* a driver sending bad records is logged this often */

static struct ckptd_role *role_find(struct ckptd_recovery *r, const char *name)
{
	for (size_t i = 0; i < r->nroles; i++)
		if (!strcmp(r->roles[i].cur.name, name))
			return &r->roles[i];
	return NULL;
}

/* Sums of runs stay within what a record holds: real ones never come near it. */
static uint64_t add_ms(uint64_t a, uint64_t b)
{
	return a + b > PHX_RL_VALUE_MAX ? PHX_RL_VALUE_MAX : a + b;
}

/*
 * l becomes its role's newest record; a record of another driver run (the
 * job was requeued, and its new driver counts from zero) first adds the
 * stored run's totals to the role's base.
 */
static void role_store(struct ckptd_role *ro, const struct phx_role_ledger *l)
{
	if (ro->cur.run != l->run) {
		for (int i = 0; i < PHX_RL_PARTS; i++)
			ro->base_ms[i] = add_ms(ro->base_ms[i], ro->cur.part_ms[i]);
		ro->base_failures = ro->cur.failures > UINT32_MAX - ro->base_failures
					    ? UINT32_MAX
					    : ro->base_failures + ro->cur.failures;
	}
	ro->cur = *l;
}

int ckptd_recovery_role(struct ckptd *d, struct ckptd_job *j, const char *record, char *err,
			size_t errlen)
{
	struct ckptd_recovery *r = &j->r;
	struct phx_role_ledger l;
	struct ckptd_role *ro;
	uint64_t was = 0; /* the role's productive time in this run so far */
	int changed = 1;

	if (phx_rl_parse(record, &l, err, errlen) < 0)
		return -1;
	ro = role_find(r, l.name);
	if (!ro) {
		if (r->nroles == PHX_RL_ROLES_MAX)
			return phx_errf(err, errlen,
					"role %s would be one more than the %d roles a job's "
					"ledger holds",
					l.name, PHX_RL_ROLES_MAX);
		if (!r->roles && !(r->roles = calloc(PHX_RL_ROLES_MAX, sizeof(*r->roles))))
			return phx_errf(err, errlen, "out of memory");
		ro = &r->roles[r->nroles++];
		memset(ro, 0, sizeof(*ro));
		ro->cur = l; /* no earlier run to add */
	} else {
		changed = ro->cur.run != l.run || ro->cur.failures != l.failures;
		if (ro->cur.run == l.run)
			was = ro->cur.part_ms[PHX_RL_PRODUCTIVE];
	}
	role_store(ro, &l);
	/* Slurm's view of the job (requeue, queue time, end) follows it from now. */
	start_ledger(j);
	/* No commit reaches the daemon from role steps: the roles count their own lost work. */
	phx_gp_commit(&r->gp, ckptd_wall());
	/* A role made progress: the job has left its start-up (or restart). */
	if (l.part_ms[PHX_RL_PRODUCTIVE] > was && r->gp.phase == PHX_GP_PH_RESTART) {
		phx_gp_step(&r->gp, ckptd_wall());
		changed = 1;
	}
	if (changed || ckptd_now() - r->roles_journaled >= CKPTD_ROLE_JOURNAL_S)
		journal_job(d, j);
	return 0;
}

/* The driver's roles' ledger: a record that is refused is logged, and the job goes on. */
static void driver_role(struct ckptd *d, struct ckptd_job *j, const struct ckptd_conn *c,
			const char *record)
{
	char why[512];

	if (ckptd_recovery_role(d, j, record, why, sizeof(why)) == 0 ||
	    ckptd_now() - j->r.roles_warned < CKPTD_ROLE_WARN_S)
		return;
	j->r.roles_warned = ckptd_now();
	phx_warn("job %u: a role record from the driver on %s is ignored: %s", j->id, c->node, why);
}

int ckptd_recovery_driver_event(struct ckptd *d, struct ckptd_conn *c, const struct phx_wire_msg *m)
{
	struct ckptd_job *j = c->job;
	bool job_wide = !strcmp(m->kind, "stop") || !strcmp(m->kind, "wait");

	if (!strcmp(m->kind, "role")) {
		if (m->node || !m->reason)
			return -1;
		driver_role(d, j, c, m->reason);
		return 0;
	}
	if (!job_wide && (!m->node || (strcmp(m->kind, "restart") && strcmp(m->kind, "check"))))
		return -1;
	start_ledger(j);
	if (job_wide)
		driver_verdict(d, j, m);
	else if (!strcmp(m->kind, "restart"))
		driver_restart(d, j, m);
	else
		driver_check(d, j, m);
	return 0;
}

int ckptd_recovery_drained_for(const struct ckptd *d, const char *node, uint32_t job)
{
	for (size_t i = 0; i < d->nnodes; i++)
		if (!strcmp(d->nodes[i].name, node))
			return d->nodes[i].drained_job == job;
	return 0;
}

void ckptd_recovery_commit(struct ckptd *d, struct ckptd_job *j)
{
	(void)d;
	start_ledger(j);
	phx_gp_commit(&j->r.gp, ckptd_wall());
}

/* ------------------------------------------------------------------ the tick */

static int job_running_in_slurm(struct ckptd *d, struct ckptd_job *j)
{
	struct ckptd_sjob s;
	char err[512];

	if (!ckptd_slurm_here())
		return 1; /* nothing to ask: the heartbeats decide */
	if (ckptd_slurm_job(j->id, &s, err, sizeof(err)) < 0) {
		d->rm.slurm_errors++;
		phx_debug("job %u: %s", j->id, err);
		return 1;
	}
	return s.state == JOB_RUNNING && !s.completing;
}

static void check_heartbeats(struct ckptd *d, struct ckptd_job *j, double now)
{
	struct ckptd_recovery *r = &j->r;
	double limit = d->lost_after_ms / 1000.0;
	size_t silent = 0, heard = 0;

	for (size_t i = 0; i < r->nmembers; i++) {
		if (!r->members[i].last_hb || r->members[i].lost)
			continue;
		heard++;
		silent += now - r->members[i].last_hb > limit;
	}
	if (!silent)
		return;
	/* All at once is how a job ends, unless Slurm still runs it. */
	if (silent == heard && !job_running_in_slurm(d, j)) {
		r->next_poll = 0;
		return;
	}
	for (size_t i = 0; i < r->nmembers && !r->ended; i++) {
		struct ckptd_member *mb = &r->members[i];
		double quiet = now - mb->last_hb;
		char node[sizeof(mb->node)];

		if (!mb->last_hb || mb->lost || quiet <= limit)
			continue;
		mb->lost = 1;
		r->lost++;
		d->rm.lost++;
		d->rm.detect_s_sum += quiet;
		snprintf(node, sizeof(node), "%s", mb->node);
		phx_warn(
			"job %u: node %s lost: no heartbeat for %.2f s (recovery.lost_after %u ms)",
			j->id, node, quiet, d->lost_after_ms);
		/* fault() may start a new run, which forgets the members. */
		fault(d, j, node, PHX_FAULT_LOST, NULL, quiet);
		if (r->gp.phase == PHX_GP_PH_QUEUE || r->rec.stopped)
			return;
	}
}

struct bad_ctx {
	struct ckptd *d;
	struct ckptd_job *j;
};

static void on_bad_node(void *arg, const char *node)
{
	struct bad_ctx *b = arg;
	struct ckptd_recovery *r = &b->j->r;
	struct ckptd_member *mb = member(r, node, 0);

	/* A node the job's driver dropped is down as expected: the job goes on. */
	if (r->gp.phase == PHX_GP_PH_QUEUE || r->ended || (mb && mb->lost) ||
	    phx_requeue_listed(r->exclude, node))
		return;
	if (mb)
		mb->lost = 1;
	fault(b->d, b->j, node, PHX_FAULT_SLURM_DOWN, NULL, 0);
}

static void fix_requeued(struct ckptd *d, struct ckptd_job *j, const struct ckptd_sjob *s)
{
	char err[512];

	/* Not while completing: the requeue's end would set the hold again. */
	if (s->state != JOB_PENDING || s->completing)
		return;
	/* Slurm may have requeued it first (a DOWN node): plan what it excludes here too. */
	if (d->rc_act && plan_requeue(d, j) < 0)
		return;
	if (ckptd_slurm_fix(j->id, j->r.exclude, err, sizeof(err)) < 0) {
		d->rm.slurm_errors++;
		phx_debug("job %u: not yet: %s", j->id, err);
		return;
	}
	j->r.fix_pending = 0;
	phx_info("job %u: eligible now, excluding %s", j->id,
		 j->r.exclude[0] ? j->r.exclude : "(none)");
}

static void poll_job(struct ckptd *d, struct ckptd_job *j)
{
	struct ckptd_recovery *r = &j->r;
	struct bad_ctx b = { d, j };
	struct ckptd_sjob s;
	char err[512];

	if (ckptd_slurm_job(j->id, &s, err, sizeof(err)) < 0) {
		d->rm.slurm_errors++;
		phx_debug("job %u: %s", j->id, err);
		return;
	}
	if (s.state == JOB_PENDING && s.restarts > r->slurm_restarts &&
	    r->gp.phase != PHX_GP_PH_QUEUE) {
		/* Slurm requeued it first (its own node timeout): account, and cut the hold. */
		phx_info("job %u: requeued by Slurm (restart %u)", j->id, s.restarts);
		phx_recovery_requeued(&r->rec);
		d->rm.requeues++;
		phx_gp_requeue(&r->gp, ckptd_wall());
		r->requeued_at = ckptd_wall();
		r->fix_pending = d->rc_act;
		new_run(r);
		journal_job(d, j);
	}
	r->slurm_restarts = s.restarts;
	/* Held again (Slurm's requeue ended after the fix): fix again. */
	if (d->rc_act && r->gp.phase == PHX_GP_PH_QUEUE && s.state == JOB_PENDING &&
	    s.eligible > ckptd_wall() + 2)
		r->fix_pending = 1;
	if (r->fix_pending)
		fix_requeued(d, j, &s);
	if (s.state == JOB_RUNNING && r->gp.phase == PHX_GP_PH_QUEUE) {
		double start = s.start > r->gp.since ? s.start : ckptd_wall();

		r->queue_last_s = start - r->requeued_at;
		d->rm.queue_s_sum += r->queue_last_s;
		d->rm.queue_n++;
		phx_gp_running(&r->gp, start);
		phx_info("job %u: running again on %s, %.2f s after the requeue", j->id, s.nodes,
			 r->queue_last_s);
		journal_job(d, j);
	}
	if (s.state == JOB_RUNNING && !s.completing && r->gp.phase != PHX_GP_PH_QUEUE &&
	    ckptd_slurm_bad_nodes(s.nodes, on_bad_node, &b, err, sizeof(err)) < 0)
		phx_debug("job %u: %s", j->id, err);
	if (s.state > JOB_SUSPENDED && !r->ended) {
		phx_gp_end(&r->gp, ckptd_wall());
		r->ended = 1;
		phx_info("job %u: ended in Slurm; goodput %.3f", j->id,
			 r->gp.part[PHX_GP_PRODUCTIVE] /
				 (r->gp.end - r->gp.start > 0 ? r->gp.end - r->gp.start : 1));
		journal_job(d, j);
	}
}

void ckptd_recovery_credit(struct ckptd *d, double late_s)
{
	d->m.late_s_sum += late_s;
	/* Silence while the daemon was not reading is the daemon's, not the node's. */
	for (size_t b = 0; b < CKPTD_JOB_BUCKETS; b++)
		for (struct ckptd_job *j = d->jobs[b]; j; j = j->next)
			for (size_t i = 0; i < j->r.nmembers; i++)
				if (j->r.members[i].last_hb)
					j->r.members[i].last_hb += late_s;
}

void ckptd_recovery_tick(struct ckptd *d)
{
	double now = ckptd_now();
	int slurm = ckptd_slurm_here();

	for (size_t b = 0; b < CKPTD_JOB_BUCKETS; b++)
		for (struct ckptd_job *j = d->jobs[b]; j; j = j->next) {
			struct ckptd_recovery *r = &j->r;

			if (!r->on || r->ended)
				continue;
			if (r->gp.phase != PHX_GP_PH_QUEUE)
				check_heartbeats(d, j, now);
			if (!slurm || r->ended || (now < r->next_poll && !r->fix_pending))
				continue;
			r->next_poll = now + d->slurm_poll_s;
			/* While requeued, follow the job closely: the queue time is measured. */
			if (r->gp.phase == PHX_GP_PH_QUEUE)
				r->next_poll = now + 0.25;
			poll_job(d, j);
		}
}

/* ------------------------------------------------------------------ reports */

static void add_d(struct json_object *o, const char *k, double v)
{
	json_object_object_add(o, k, json_object_new_double(v));
}

/* Each role's time, its driver runs summed, in GPU-seconds (a rank is one GPU). */
static struct json_object *roles_json(const struct ckptd_recovery *r)
{
	struct json_object *a = json_object_new_array();

	for (size_t i = 0; i < r->nroles; i++) {
		const struct ckptd_role *ro = &r->roles[i];
		struct json_object *o = json_object_new_object(), *parts = json_object_new_object();
		double s[PHX_RL_PARTS], total = 0;

		for (int k = 0; k < PHX_RL_PARTS; k++) {
			s[k] = (double)(ro->base_ms[k] + ro->cur.part_ms[k]) / 1000.0;
			total += s[k];
			add_d(parts, phx_rl_part_name((enum phx_rl_part)k), s[k]);
		}
		json_object_object_add(o, "role", json_object_new_string(ro->cur.name));
		json_object_object_add(o, "ranks", json_object_new_uint64(ro->cur.ranks));
		json_object_object_add(
			o, "failures",
			json_object_new_uint64((uint64_t)ro->base_failures + ro->cur.failures));
		add_d(o, "gpu_s", total);
		add_d(o, "goodput", total > 0 ? s[PHX_RL_PRODUCTIVE] / total : 0);
		json_object_object_add(o, "parts", parts);
		json_object_array_add(a, o);
	}
	return a;
}

struct json_object *ckptd_goodput_json(struct ckptd *d, struct ckptd_job *j)
{
	struct ckptd_recovery *r = &j->r;
	struct json_object *o = json_object_new_object(), *parts = json_object_new_object();
	double p[PHX_GP_PARTS], wall, now = ckptd_wall();

	if (!r->on)
		phx_gp_begin(&r->gp, now);
	/* The wall time from the ledger's own ends; the parts are summed apart from it. */
	phx_gp_snapshot(&r->gp, now, p);
	wall = (r->gp.phase == PHX_GP_PH_DONE ? r->gp.end : now) - r->gp.start;
	for (int i = 0; i < PHX_GP_PARTS; i++)
		add_d(parts, phx_gp_part_name(i), p[i]);
	json_object_object_add(o, "job", json_object_new_uint64(j->id));
	add_d(o, "wall", wall);
	add_d(o, "goodput", wall > 0 ? p[PHX_GP_PRODUCTIVE] / wall : 0);
	json_object_object_add(o, "parts", parts);
	json_object_object_add(o, "phase", json_object_new_string(phx_gp_phase_name(r->gp.phase)));
	json_object_object_add(o, "failures", json_object_new_uint64(r->gp.failures));
	json_object_object_add(o, "requeues", json_object_new_uint64(r->rec.requeues));
	json_object_object_add(o, "max_requeues", json_object_new_int(d->rc.max_requeues));
	json_object_object_add(o, "restarts", json_object_new_uint64(r->restarts));
	json_object_object_add(o, "lost_agents", json_object_new_uint64(r->lost));
	add_d(o, "detect_last", r->detect_last_s);
	add_d(o, "queue_last", r->queue_last_s);
	json_object_object_add(o, "stopped", json_object_new_boolean(r->rec.stopped));
	json_object_object_add(o, "reason", json_object_new_string(r->reason));
	json_object_object_add(o, "exclude", json_object_new_string(r->exclude));
	json_object_object_add(o, "roles", roles_json(r));
	return o;
}

struct json_object *ckptd_untrusted_json(struct ckptd *d)
{
	struct json_object *a = json_object_new_array();

	for (size_t i = 0; i < d->nnodes; i++) {
		struct json_object *o;

		if (!d->nodes[i].r.untrusted)
			continue;
		o = json_object_new_object();
		json_object_object_add(o, "node", json_object_new_string(d->nodes[i].name));
		json_object_object_add(o, "faults", json_object_new_uint64(d->nodes[i].r.n));
		json_object_object_add(o, "reason", json_object_new_string(d->nodes[i].reason));
		json_object_array_add(a, o);
	}
	return a;
}

/* ------------------------------------------------------------------ journal */

#define US(x) ((uint64_t)((x) > 0 ? (x)*1e6 + 0.5 : 0))

static struct json_object *ms_json(const uint64_t ms[PHX_RL_PARTS])
{
	struct json_object *a = json_object_new_array();

	for (int k = 0; k < PHX_RL_PARTS; k++)
		json_object_array_add(a, json_object_new_uint64(ms[k]));
	return a;
}

static struct json_object *roles_record(const struct ckptd_recovery *r)
{
	struct json_object *a = json_object_new_array();

	for (size_t i = 0; i < r->nroles; i++) {
		const struct ckptd_role *ro = &r->roles[i];
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "name", json_object_new_string(ro->cur.name));
		json_object_object_add(o, "run", json_object_new_uint64(ro->cur.run));
		json_object_object_add(o, "ranks", json_object_new_uint64(ro->cur.ranks));
		json_object_object_add(o, "failures", json_object_new_uint64(ro->cur.failures));
		json_object_object_add(o, "base_failures",
				       json_object_new_uint64(ro->base_failures));
		json_object_object_add(o, "base_ms", ms_json(ro->base_ms));
		json_object_object_add(o, "cur_ms", ms_json(ro->cur.part_ms));
		json_object_array_add(a, o);
	}
	return a;
}

char *ckptd_recovery_record(const struct ckptd_job *j)
{
	const struct ckptd_recovery *r = &j->r;
	struct json_object *o = json_object_new_object(), *parts = json_object_new_array();
	char *text;

	json_object_object_add(o, "op", json_object_new_string("recovery"));
	json_object_object_add(o, "job", json_object_new_uint64(j->id));
	json_object_object_add(o, "uid", json_object_new_uint64(j->uid));
	json_object_object_add(o, "requeues", json_object_new_uint64(r->rec.requeues));
	json_object_object_add(o, "stopped", json_object_new_uint64(r->rec.stopped));
	json_object_object_add(o, "ended", json_object_new_uint64(r->ended));
	json_object_object_add(o, "reason", json_object_new_string(r->reason));
	json_object_object_add(o, "exclude", json_object_new_string(r->exclude));
	json_object_object_add(o, "phase", json_object_new_string(phx_gp_phase_name(r->gp.phase)));
	json_object_object_add(o, "start_us", json_object_new_uint64(US(r->gp.start)));
	json_object_object_add(o, "since_us", json_object_new_uint64(US(r->gp.since)));
	json_object_object_add(o, "end_us", json_object_new_uint64(US(r->gp.end)));
	json_object_object_add(o, "failures", json_object_new_uint64(r->gp.failures));
	for (int i = 0; i < PHX_GP_PARTS; i++)
		json_object_array_add(parts, json_object_new_uint64(US(r->gp.part[i])));
	json_object_object_add(o, "parts_us", parts);
	/* Only a job with roles has the key: its other records stay as they were. */
	if (r->nroles)
		json_object_object_add(o, "roles", roles_record(r));
	text = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return text;
}

/* A role's five rank-millisecond counts, each a record's value. */
static int ms_replay(struct json_object *o, const char *what, const char *key,
		     uint64_t ms[PHX_RL_PARTS], char *err, size_t errlen)
{
	struct json_object *a;

	if (phx_json_array(o, what, key, PHX_RL_PARTS, &a, NULL, err, errlen) < 0)
		return -1;
	if (json_object_array_length(a) != PHX_RL_PARTS)
		return phx_errf(err, errlen, "%s: \"%s\" must hold %d numbers", what, key,
				PHX_RL_PARTS);
	for (int k = 0; k < PHX_RL_PARTS; k++) {
		struct json_object *e = json_object_array_get_idx(a, (size_t)k);

		if (!json_object_is_type(e, json_type_int) || json_object_get_int64(e) < 0 ||
		    (uint64_t)json_object_get_int64(e) > PHX_RL_VALUE_MAX)
			return phx_errf(err, errlen, "%s: \"%s\" holds a value outside 0..%llu",
					what, key, (unsigned long long)PHX_RL_VALUE_MAX);
		ms[k] = (uint64_t)json_object_get_int64(e);
	}
	return 0;
}

/*
 * The record's roles into ro (room for PHX_RL_ROLES_MAX), *n of them; a
 * record without the key (a job without roles, or a journal older than
 * them) has none.
 */
static int roles_replay(struct json_object *o, struct ckptd_role *ro, size_t *n, char *err,
			size_t errlen)
{
	static const char *const keys[] = { "name",	     "run",	"ranks",  "failures",
					    "base_failures", "base_ms", "cur_ms", NULL };
	const char *what = "recovery record role";
	struct json_object *arr;
	int present;

	*n = 0;
	if (phx_json_array(o, "recovery record", "roles", PHX_RL_ROLES_MAX, &arr, &present, err,
			   errlen) < 0)
		return -1;
	if (!present)
		return 0;
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *e = json_object_array_get_idx(arr, i);
		struct phx_role_ledger back;
		char text[PHX_WIRE_REASON_MAX + 1], why[256];
		uint64_t run, ranks, failures, base_failures;
		const char *name;

		if (!json_object_is_type(e, json_type_object))
			return phx_errf(err, errlen, "%s %zu is not an object", what, i);
		memset(&ro[i], 0, sizeof(ro[i]));
		if (phx_json_only_keys(e, what, keys, err, errlen) < 0 ||
		    phx_json_str(e, what, "name", PHX_RL_NAME_MAX, 0, &name, NULL, err, errlen) <
			    0 ||
		    phx_json_u64(e, what, "run", 0, UINT64_MAX, &run, NULL, err, errlen) < 0 ||
		    phx_json_u64(e, what, "ranks", 0, UINT32_MAX, &ranks, NULL, err, errlen) < 0 ||
		    phx_json_u64(e, what, "failures", 0, UINT32_MAX, &failures, NULL, err, errlen) <
			    0 ||
		    phx_json_u64(e, what, "base_failures", 0, UINT32_MAX, &base_failures, NULL, err,
				 errlen) < 0 ||
		    ms_replay(e, what, "base_ms", ro[i].base_ms, err, errlen) < 0 ||
		    ms_replay(e, what, "cur_ms", ro[i].cur.part_ms, err, errlen) < 0)
			return -1;
		snprintf(ro[i].cur.name, sizeof(ro[i].cur.name), "%s", name);
		ro[i].cur.run = run;
		ro[i].cur.ranks = (uint32_t)ranks;
		ro[i].cur.failures = (uint32_t)failures;
		ro[i].base_failures = (uint32_t)base_failures;
		/* The name as a driver's record must give it: the record's own parser says. */
		if (phx_rl_format(&ro[i].cur, text, sizeof(text)) < 0 ||
		    phx_rl_parse(text, &back, why, sizeof(why)) < 0)
			return phx_errf(err, errlen, "%s \"%s\": %s", what, name, why);
		for (size_t k = 0; k < i; k++)
			if (!strcmp(ro[k].cur.name, name))
				return phx_errf(err, errlen, "%s \"%s\" is there twice", what,
						name);
	}
	*n = json_object_array_length(arr);
	return 0;
}

int ckptd_recovery_replay(struct ckptd *d, struct json_object *o, char *err, size_t errlen)
{
	static const char *const keys[] = { "op",	"job",	    "uid",	"requeues",
					    "stopped",	"ended",    "reason",	"exclude",
					    "phase",	"start_us", "since_us", "end_us",
					    "failures", "parts_us", "roles",	NULL };
	const char *what = "recovery record", *reason, *exclude, *phase;
	uint64_t job, uid, req, stopped, ended, start, since, end, failures, v;
	struct json_object *parts;
	struct ckptd_job *j;
	double part[PHX_GP_PARTS];
	struct ckptd_role roles[PHX_RL_ROLES_MAX];
	size_t nroles;
	int ph;

	if (phx_json_only_keys(o, what, keys, err, errlen) < 0 ||
	    phx_json_u64(o, what, "job", 1, UINT32_MAX, &job, NULL, err, errlen) < 0 ||
	    phx_json_u64(o, what, "uid", 0, UINT32_MAX - 1, &uid, NULL, err, errlen) < 0 ||
	    phx_json_u64(o, what, "requeues", 0, UINT32_MAX, &req, NULL, err, errlen) < 0 ||
	    phx_json_u64(o, what, "stopped", 0, 1, &stopped, NULL, err, errlen) < 0 ||
	    phx_json_u64(o, what, "ended", 0, 1, &ended, NULL, err, errlen) < 0 ||
	    phx_json_str(o, what, "reason", PHX_RECOVERY_REASON_MAX - 1, 1, &reason, NULL, err,
			 errlen) < 0 ||
	    phx_json_str(o, what, "exclude", 1023, 1, &exclude, NULL, err, errlen) < 0 ||
	    phx_json_str(o, what, "phase", 16, 0, &phase, NULL, err, errlen) < 0 ||
	    phx_json_u64(o, what, "start_us", 0, UINT64_MAX >> 1, &start, NULL, err, errlen) < 0 ||
	    phx_json_u64(o, what, "since_us", 0, UINT64_MAX >> 1, &since, NULL, err, errlen) < 0 ||
	    phx_json_u64(o, what, "end_us", 0, UINT64_MAX >> 1, &end, NULL, err, errlen) < 0 ||
	    phx_json_u64(o, what, "failures", 0, UINT32_MAX, &failures, NULL, err, errlen) < 0 ||
	    phx_json_array(o, what, "parts_us", PHX_GP_PARTS, &parts, NULL, err, errlen) < 0)
		return -1;
	ph = phx_gp_phase_parse(phase);
	if (ph < 0)
		return phx_errf(err, errlen, "%s: phase \"%s\" is not known", what, phase);
	if (json_object_array_length(parts) != PHX_GP_PARTS)
		return phx_errf(err, errlen, "%s: parts_us must hold %d numbers", what,
				PHX_GP_PARTS);
	for (int i = 0; i < PHX_GP_PARTS; i++) {
		struct json_object *e = json_object_array_get_idx(parts, (size_t)i);

		if (!json_object_is_type(e, json_type_int) || json_object_get_int64(e) < 0)
			return phx_errf(err, errlen, "%s: parts_us holds a non-count", what);
		v = (uint64_t)json_object_get_int64(e);
		part[i] = (double)v / 1e6;
	}
	if (since < start || (end && end < start))
		return phx_errf(err, errlen, "%s: times out of order", what);
	if (roles_replay(o, roles, &nroles, err, errlen) < 0)
		return -1;
	j = ckptd_job_get(d, (uint32_t)job, (uint32_t)uid);
	if (!j)
		return phx_errf(err, errlen, "out of memory");
	if (j->uid != uid)
		return phx_errf(err, errlen, "%s: job %llu has uid %u, not %llu", what,
				(unsigned long long)job, j->uid, (unsigned long long)uid);
	/* The record is the whole state: a record without roles leaves none. */
	if (nroles && !j->r.roles && !(j->r.roles = calloc(PHX_RL_ROLES_MAX, sizeof(*j->r.roles))))
		return phx_errf(err, errlen, "out of memory");
	if (nroles)
		memcpy(j->r.roles, roles, nroles * sizeof(roles[0]));
	j->r.nroles = nroles;
	j->r.on = 1;
	j->r.rec.requeues = (uint32_t)req;
	j->r.rec.stopped = (int)stopped;
	snprintf(j->r.rec.stop_reason, sizeof(j->r.rec.stop_reason), "%s", stopped ? reason : "");
	j->r.ended = (int)ended;
	snprintf(j->r.reason, sizeof(j->r.reason), "%s", reason);
	snprintf(j->r.exclude, sizeof(j->r.exclude), "%s", exclude);
	j->r.gp.phase = (enum phx_gp_phase)ph;
	j->r.gp.start = (double)start / 1e6;
	j->r.gp.since = (double)since / 1e6;
	j->r.gp.end = (double)end / 1e6;
	j->r.gp.failures = (uint32_t)failures;
	j->r.gp.requeues = (uint32_t)req;
	memcpy(j->r.gp.part, part, sizeof(part));
	j->r.phase_step = UINT64_MAX;
	if (j->r.gp.phase == PHX_GP_PH_QUEUE)
		j->r.requeued_at = j->r.gp.since;
	return 0;
}

void ckptd_recovery_free(struct ckptd *d)
{
	free(d->nodes);
	d->nodes = NULL;
	d->nnodes = d->capnodes = 0;
}
