/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Roles in steps of their own (driver mode with --role): each fixed role
 * runs in one srun step over its nodes, an elastic pool in one step per
 * node, so a node lost in one role ends only that role's step (or that
 * node's). What a role does then is driver_roles.c's rule; the roles find
 * each other through the cross-role rendezvous, whose document is
 * published here whenever a role's processes change.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checkpoint/proto/ckpt_wire.h"
#include "common/log.h"
#include "launcher/launch.h"
#include "launcher/options.h"
#include "launcher/restart.h"
#include "launcher/driver/driver_ckptd.h"
#include "launcher/driver/driver_int.h"
#include "launcher/driver/driver_ledger.h"
#include "launcher/driver/driver_lost.h"
#include "launcher/driver/driver_roles.h"
#include "launcher/driver/driver_xrdv.h"
#include "launcher/xrdv.h"

#define END_GRACE_MS 10000 /* the job is done: the other roles' time to see it and exit */
#define RETRY_FIRST_MS 1000 /* a role's step again after its workers failed: 1 s, 2 s, ... */
#define RETRY_MAX_MS 30000
#define LAUNCH_PAUSE_MS 2000 /* a launch that failed with no node lost: again after this, */
#define LAUNCH_TRIES 90 /* uncounted this many times (a step on the node may still end) */
#define XRDV_PORT_BASE 20000 /* cross-role ports: below Linux's ephemeral range */
#define XRDV_PORT_SPAN 12000
#define LEDGER_REPORT_MS 5000 /* the roles' goodput to phalanx-ckptd */

enum role_end { ROLE_ON = 0, ROLE_DONE, ROLE_FAILED };

struct role_run {
	enum role_end end;
	unsigned failures; /* worker failures relaunched (node losses are driver_roles.c's) */
	unsigned launch_tries; /* launches in a row that failed with no node lost */
	unsigned same; /* of them in a row with the same message */
	char last_msg[PHX_RESULT_MSG_MAX + 1];
};

/* A role's step to start again later: its whole step, or an elastic pool's node. */
struct later {
	size_t role;
	size_t node; /* PHX_DRV_NO_NODE: the role's nodes */
	uint64_t at;
};

struct steps_job {
	struct driver *dr;
	struct later *later;
	size_t nlater;
	struct phx_drv_roles j;
	struct role_run rr[PHX_ROLE_MAX];
	struct step **steps; /* running */
	size_t n;
	unsigned long epoch; /* the job's: up whenever a role's does */
	uint64_t end_at; /* finishing: the other roles are stopped then */
	bool finishing;
	int rc; /* the driver's exit once every step ended; -1: not decided */
	uint64_t report_at; /* the ledger's next report */
};

static bool is_elastic(const struct phx_drv_role *x)
{
	return x->max > x->min;
}

static unsigned role_nproc(const struct steps_job *sj, size_t r)
{
	const struct phx_launch_opts *o = sj->dr->o;

	return o->roles[r].nproc ? o->roles[r].nproc : sj->dr->st.nproc;
}

/* A port the role's first rank may listen on for cross-role groups, new in every job epoch. */
static unsigned role_port(const struct steps_job *sj, size_t r)
{
	uint64_t h = (uint64_t)sj->dr->job_id * 2654435761u + (uint64_t)r * 40503u +
		     (uint64_t)sj->epoch * 9973u;

	return XRDV_PORT_BASE + (unsigned)(h % XRDV_PORT_SPAN);
}

static const char *role_state(const struct steps_job *sj, size_t r)
{
	if (sj->rr[r].end == ROLE_DONE)
		return "done";
	if (sj->rr[r].end == ROLE_FAILED || sj->j.role[r].state == PHX_ROLE_GAVE_UP)
		return "failed";
	return sj->j.role[r].state == PHX_ROLE_WAITING ? "waiting" : "running";
}

/* The rendezvous document: phalanx-launch(1), "Roles in steps of their own". */
static char *document(const struct steps_job *sj)
{
	const struct driver *dr = sj->dr;
	size_t cap = 256, len;
	char *doc;

	for (size_t i = 0; i < dr->alloc.count; i++)
		cap += strlen(dr->alloc.names[i]) + 4;
	cap += sj->j.n * (PHX_ROLE_NAME_MAX + 160);
	doc = malloc(cap);
	if (!doc)
		return NULL;
	len = (size_t)snprintf(doc, cap, "{\"job_id\": %u, \"epoch\": %lu, \"roles\": [",
			       dr->job_id, sj->epoch);
	for (size_t r = 0; r < sj->j.n; r++) {
		const struct phx_drv_role *x = &sj->j.role[r];
		bool first = true;

		len += (size_t)snprintf(doc + len, cap - len,
					"%s{\"name\": \"%s\", \"epoch\": %u, \"state\": \"%s\", "
					"\"nproc\": %u, \"port\": %u, \"nodes\": [",
					r ? ", " : "", x->name, x->epoch, role_state(sj, r),
					role_nproc(sj, r), role_port(sj, r));
		for (size_t i = 0; i < dr->alloc.count; i++) {
			if (sj->j.owner[i] != (int)r || sj->rr[r].end != ROLE_ON)
				continue;
			len += (size_t)snprintf(doc + len, cap - len, "%s\"%s\"", first ? "" : ", ",
						dr->alloc.names[i]);
			first = false;
		}
		len += (size_t)snprintf(doc + len, cap - len, "]}");
	}
	snprintf(doc + len, cap - len, "]}\n");
	return doc;
}

/* A role's processes changed: a new job epoch, told to every agent. */
static void publish(struct steps_job *sj)
{
	char *doc;

	sj->epoch++;
	doc = document(sj);
	if (doc)
		phx_drv_xrdv_publish(sj->dr->xrdv, sj->epoch, doc);
	free(doc);
}

/* A step of role r on nodes idx[0..n), among the running ones. */
static int unit_start(struct steps_job *sj, size_t r, const size_t *idx, size_t n)
{
	struct step *s = calloc(1, sizeof(*s)), **grown;

	if (!s || !(s->idx = calloc(n, sizeof(*s->idx))))
		goto fail;
	grown = realloc(sj->steps, (sj->n + 1) * sizeof(*grown));
	if (!grown)
		goto fail;
	sj->steps = grown;
	memcpy(s->idx, idx, n * sizeof(*idx));
	s->n = n;
	s->err_fd = -1;
	s->role = sj->j.role[r].name;
	s->epoch = sj->epoch;
	s->role_epoch = sj->j.role[r].epoch;
	if (phx_drv_step_start(sj->dr, s) < 0)
		goto fail;
	sj->steps[sj->n++] = s;
	for (size_t m = 0; m < n; m++)
		phx_drv_ledger_launch(sj->dr->ledger, idx[m], r, role_nproc(sj, r),
				      phx_drv_now_ms());
	return 0;
fail:
	if (s)
		free(s->idx);
	free(s);
	phx_error("cannot start a step of role %s; see the lines above", sj->j.role[r].name);
	return -1;
}

/* Role r on the nodes it owns: one step, or one per node for an elastic pool. */
static int role_start(struct steps_job *sj, size_t r)
{
	size_t *idx = calloc(sj->dr->alloc.count, sizeof(*idx)), n;
	int rc = 0;

	if (!idx)
		return -1;
	n = phx_drv_role_nodes(&sj->j, r, idx);
	if (is_elastic(&sj->j.role[r])) {
		for (size_t k = 0; k < n && !rc; k++)
			rc = unit_start(sj, r, &idx[k], 1);
	} else if (n) {
		rc = unit_start(sj, r, idx, n);
	}
	free(idx);
	return rc;
}

static size_t role_index(const struct steps_job *sj, const struct step *s)
{
	for (size_t r = 0; r < sj->j.n; r++) {
		if (s->role == sj->j.role[r].name)
			return r;
	}
	return 0;
}

/* The running step of role r on node i, or NULL. */
static struct step *unit_on(const struct steps_job *sj, size_t r, size_t i)
{
	for (size_t k = 0; k < sj->n; k++) {
		struct step *s = sj->steps[k];

		if (role_index(sj, s) != r)
			continue;
		for (size_t m = 0; m < s->n; m++) {
			if (s->idx[m] == i)
				return s;
		}
	}
	return NULL;
}

/* The nodes of role r's step s count for the role no more. */
static void release(struct steps_job *sj, size_t r, const struct step *s)
{
	for (size_t m = 0; m < s->n; m++)
		phx_drv_ledger_release(sj->dr->ledger, s->idx[m], r, phx_drv_now_ms());
}

/* Stops every running step (SIGTERM: the agents stop their workers); then the job ends with rc. */
static void end_job(struct steps_job *sj, int rc, const char *why)
{
	if (sj->rc < 0)
		sj->rc = rc;
	sj->finishing = true;
	sj->end_at = 0;
	phx_info("ending job %u: %s", sj->dr->job_id, why);
	for (size_t k = 0; k < sj->n; k++) {
		if (!sj->steps[k]->ended)
			kill(sj->steps[k]->pid, SIGTERM);
	}
}

/*
 * What role r does for a decision of driver_roles.c. A donor pool's step
 * on the node it gave up ends; the node's new step overlaps it until then.
 */
static void act(struct steps_job *sj, size_t r, const struct phx_drv_role_decision *d,
		bool *relaunch)
{
	struct step *donated;

	phx_warn("%s", d->why);
	if (d->donor >= 0 && (donated = unit_on(sj, (size_t)d->donor, d->node)))
		phx_drv_step_kill(sj->dr, donated, "to give its node to another role");
	switch (d->action) {
	case PHX_ROLE_RELAUNCH:
		*relaunch = true;
		break;
	case PHX_ROLE_GROW:
		publish(sj); /* the pool without the lost node first */
		sj->j.role[r].epoch++;
		unit_start(sj, r, &d->node, 1);
		break;
	case PHX_ROLE_SHRINK:
	case PHX_ROLE_WAIT:
		break;
	case PHX_ROLE_END_JOB:
		end_job(sj, -2, d->why);
		break;
	}
}

/*
 * Nodes an admin repaired come back (phx_drv_repaired): to a role waiting
 * for nodes first, then to a pool below its most; else they are spares.
 */
static void take_back(struct steps_job *sj)
{
	struct driver *dr = sj->dr;
	size_t *idx = calloc(dr->alloc.count, sizeof(*idx)), n;
	bool changed = false;

	n = idx && !sj->finishing ? phx_drv_repaired(dr, idx) : 0;
	for (size_t k = 0; k < n; k++) {
		struct phx_drv_role_decision d;
		bool relaunch = false;
		int r;

		/* Checked again first when the check is on; a failure makes it bad again. */
		if (dr->preflight &&
		    (phx_drv_preflight(dr, &idx[k], 1, false) < 0 || dr->st.bad[idx[k]]))
			continue;
		r = phx_drv_role_returned(&sj->j, idx[k], &d);
		if (r < 0) {
			phx_info("node %s is a spare again", dr->alloc.names[idx[k]]);
			continue;
		}
		act(sj, (size_t)r, &d, &relaunch);
		if (relaunch)
			role_start(sj, (size_t)r);
		changed = true;
	}
	if (changed)
		publish(sj);
	free(idx);
}

/* Nodes of s found bad: role r's rule for each, then its step again if it relaunches. */
static void after_loss(struct steps_job *sj, size_t r, const struct step *s)
{
	bool hung = s->have_result && s->result.kind == PHX_FAIL_HANG;
	struct phx_drv_role_decision d;
	bool relaunch = false;

	for (size_t m = 0; m < s->n && !sj->finishing; m++) {
		if (!sj->dr->st.bad[s->idx[m]])
			continue;
		phx_drv_ledger_fault(sj->dr->ledger, r, s->idx[m], hung, phx_drv_now_ms());
		phx_drv_ledger_release(sj->dr->ledger, s->idx[m], r, phx_drv_now_ms());
		phx_drv_role_lost(&sj->j, r, s->idx[m], &d);
		act(sj, r, &d, &relaunch);
	}
	/* A fixed role's healthy nodes are still its own: its whole step again. */
	if (relaunch && !sj->finishing)
		role_start(sj, r);
	publish(sj);
}

/* Role r's step s again in wait_ms: the same elastic pool node, or the role's nodes. */
static void start_later(struct steps_job *sj, size_t r, const struct step *s, uint64_t wait_ms)
{
	struct later *grown = realloc(sj->later, (sj->nlater + 1) * sizeof(*grown));

	if (!grown) {
		phx_error("out of memory: role %s is not relaunched", sj->j.role[r].name);
		return;
	}
	sj->later = grown;
	sj->later[sj->nlater++] = (struct later){
		.role = r,
		.node = is_elastic(&sj->j.role[r]) ? s->idx[0] : PHX_DRV_NO_NODE,
		.at = phx_drv_now_ms() + wait_ms,
	};
}

/* When the next step is due to start again; 0: none. */
static uint64_t next_later(const struct steps_job *sj)
{
	uint64_t at = 0;

	for (size_t k = 0; k < sj->nlater; k++) {
		if (!at || sj->later[k].at < at)
			at = sj->later[k].at;
	}
	return at;
}

/* Starts the steps that are due, where their role still has the nodes. */
static void run_later(struct steps_job *sj)
{
	uint64_t now = phx_drv_now_ms();
	bool started = false;

	for (size_t k = 0; k < sj->nlater;) {
		struct later l = sj->later[k];

		if (l.at > now) {
			k++;
			continue;
		}
		sj->later[k] = sj->later[--sj->nlater];
		if (sj->finishing || sj->dr->stop_sig || sj->dr->preempted ||
		    sj->rr[l.role].end != ROLE_ON || sj->j.role[l.role].state != PHX_ROLE_RUNNING)
			continue;
		sj->j.role[l.role].epoch++;
		if (l.node == PHX_DRV_NO_NODE)
			role_start(sj, l.role);
		else if (sj->j.owner[l.node] == (int)l.role && !sj->dr->st.bad[l.node])
			unit_start(sj, l.role, &l.node, 1);
		started = true;
	}
	if (started)
		publish(sj);
}

/*
 * srun said the launch failed and no node is lost: most likely a step of
 * the role that just ended still ends on a node (its PMIx server holds its
 * socket there). Tried again after a pause, uncounted, for a while.
 */
static bool launch_again(struct steps_job *sj, size_t r, const struct step *s)
{
	struct role_run *rr = &sj->rr[r];

	if (!s->launch_failed || ++rr->launch_tries > LAUNCH_TRIES)
		return false;
	phx_warn("role %s: the step's launch failed (srun's lines above) and no node is lost: "
		 "trying again in %d s (try %u of %d)",
		 sj->j.role[r].name, LAUNCH_PAUSE_MS / 1000, rr->launch_tries, LAUNCH_TRIES);
	start_later(sj, r, s, LAUNCH_PAUSE_MS);
	return true;
}

/* The workers of s gave up on a healthy node: the role's step again, or the role ends. */
static void after_failure(struct steps_job *sj, size_t r, const struct step *s)
{
	struct role_run *rr = &sj->rr[r];
	struct phx_drv_role *x = &sj->j.role[r];
	const char *msg = s->have_result ? s->result.msg : "";
	unsigned limit = sj->dr->st.same_limit;
	uint64_t wait_ms;

	phx_drv_ledger_fault(sj->dr->ledger, r, PHX_DRV_LEDGER_NO_NODE, false, phx_drv_now_ms());
	rr->same = msg[0] && !strcmp(msg, rr->last_msg) ? rr->same + 1 : 1;
	snprintf(rr->last_msg, sizeof(rr->last_msg), "%s", msg);
	if (++rr->failures > x->max_relaunches || (limit && msg[0] && rr->same >= limit)) {
		rr->end = ROLE_FAILED;
		release(sj, r, s);
		phx_error("role %s failed (exit %d%s%s) and is not relaunched again (%u "
			  "relaunch(es), max-relaunches=%u)%s",
			  x->name, s->status, msg[0] ? ": " : "", msg, rr->failures - 1,
			  x->max_relaunches,
			  x->fatal ? "; it is fatal (fatal=yes), so the job ends"
				   : "; the other roles go on");
		if (x->fatal)
			end_job(sj, s->status ? s->status : PHX_EXIT_WORKERS,
				"a fatal role failed");
		publish(sj);
		return;
	}
	wait_ms = RETRY_FIRST_MS << (rr->failures < 6 ? rr->failures - 1 : 5);
	wait_ms = wait_ms < RETRY_MAX_MS ? wait_ms : RETRY_MAX_MS;
	phx_warn("role %s: its workers failed (exit %d%s%s); relaunching it in %llu s (%u of %u)",
		 x->name, s->status, msg[0] ? ": " : "", msg, (unsigned long long)wait_ms / 1000,
		 rr->failures, x->max_relaunches);
	x->epoch++;
	start_later(sj, r, s, wait_ms);
	publish(sj);
}

/* Every unit of role r ended well: done; the job is when every fatal role is. */
static void after_done(struct steps_job *sj, size_t r, const struct step *s)
{
	bool all = true, any_fatal = false;

	release(sj, r, s);
	for (size_t k = 0; k < sj->n; k++)
		if (role_index(sj, sj->steps[k]) == r)
			return;
	sj->rr[r].end = ROLE_DONE;
	phx_info("role %s finished", sj->j.role[r].name);
	for (size_t q = 0; q < sj->j.n; q++)
		any_fatal |= sj->j.role[q].fatal;
	/* Without a fatal role, every role must be done. */
	for (size_t q = 0; q < sj->j.n; q++) {
		if (sj->j.role[q].fatal || !any_fatal)
			all &= sj->rr[q].end == ROLE_DONE;
	}
	publish(sj);
	if (all && !sj->finishing) {
		/* The others see "done" in the document and may end on their own first. */
		sj->finishing = true;
		sj->rc = PHX_EXIT_OK;
		sj->end_at = phx_drv_now_ms() + END_GRACE_MS;
	}
}

/*
 * A worker hang reported by the agents of a role's step ends it like a
 * lost node: the node's workers stopped, whatever stopped them.
 */
static void hang_is_loss(struct steps_job *sj, struct step *s)
{
	long i;

	if (!s->have_result || s->result.kind != PHX_FAIL_HANG ||
	    (i = phx_drv_alloc_index(sj->dr, s->result.node)) < 0)
		return;
	phx_drv_node_bad(sj->dr, s, (size_t)i,
			 "its workers stopped beating (hung, or stopped by a signal)", NULL);
}

static void step_ended(struct steps_job *sj, struct step *s)
{
	size_t r = role_index(sj, s);
	struct driver *dr = sj->dr;
	bool lost = false;

	/* After srun: Slurm's view once more, then srun's own reports. */
	phx_drv_check_nodes(dr, &s, 1);
	if (s->status || !s->silent)
		phx_drv_step_report(dr, s);
	if (s->status)
		hang_is_loss(sj, s);
	for (size_t m = 0; m < s->n; m++)
		lost |= dr->st.bad[s->idx[m]];
	for (size_t k = 0; k < sj->n; k++) {
		if (sj->steps[k] == s)
			sj->steps[k] = sj->steps[--sj->n];
	}
	for (size_t m = 0; m < s->n; m++)
		phx_drv_ledger_idle(dr->ledger, s->idx[m], r, phx_drv_now_ms());
	if (sj->finishing || dr->stop_sig || dr->preempted)
		release(sj, r, s);
	else if (lost)
		after_loss(sj, r, s);
	else if (s->killed)
		release(sj, r, s); /* a donor's step: its node serves another role now */
	else if (s->status == 0)
		after_done(sj, r, s);
	else if (!launch_again(sj, r, s))
		after_failure(sj, r, s);
	if (!s->launch_failed)
		sj->rr[r].launch_tries = 0;
	free(s->idx);
	free(s);
}

/* The whole allocation is checked once, before the roles take their nodes. */
static int check_first(struct driver *dr)
{
	size_t *all = calloc(dr->alloc.count, sizeof(*all)), n = 0;
	int rc;

	if (!all)
		return -1;
	for (size_t i = 0; i < dr->alloc.count; i++) {
		if (!dr->st.bad[i])
			all[n++] = i;
	}
	rc = phx_drv_preflight(dr, all, n, true);
	free(all);
	return rc;
}

/*
 * The roles' goodput; phalanx-ckptd keeps it for phalanx goodput (the
 * agents of role steps do not report to it: its recovery takes a job's
 * agents for one step, see agent_ckptd.c).
 */
static int open_ledger(struct steps_job *sj)
{
	const char *names[PHX_ROLE_MAX];
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	for (size_t r = 0; r < sj->j.n; r++)
		names[r] = sj->j.role[r].name;
	sj->dr->ledger =
		phx_drv_ledger_new(names, sj->j.n, sj->dr->alloc.count,
				   (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u);
	/* The first report at once: the daemon knows the job has roles before any failure. */
	sj->report_at = phx_drv_now_ms();
	return sj->dr->ledger ? 0 : -1;
}

/* Each role's ledger to phalanx-ckptd; at the end, to the log as well. */
static void report_ledger(struct steps_job *sj, bool last)
{
	uint64_t now = phx_drv_now_ms();

	sj->report_at = now + LEDGER_REPORT_MS;
	for (size_t r = 0; sj->dr->ledger && r < sj->j.n; r++) {
		struct phx_role_ledger led;
		char rec[PHX_WIRE_REASON_MAX + 1];
		double total = 0;

		phx_drv_ledger_get(sj->dr->ledger, r, now, &led);
		if (phx_rl_format(&led, rec, sizeof(rec)) > 0)
			phx_drv_ckptd_report(sj->dr->ckptd, "role", NULL, 0, rec);
		for (int k = 0; k < PHX_RL_PARTS; k++)
			total += (double)led.part_ms[k];
		if (!last || total <= 0)
			continue;
		phx_info(
			"role %s: %.1f GPU-seconds: productive %.1f%%, waiting on other roles "
			"%.1f%%, restart %.1f%%, lost work %.1f%%, detection %.1f%%; %u failure(s) "
			"(phalanx goodput %u has it by role)",
			led.name, total / 1000.0,
			100.0 * (double)led.part_ms[PHX_RL_PRODUCTIVE] / total,
			100.0 * (double)led.part_ms[PHX_RL_WAITING] / total,
			100.0 * (double)led.part_ms[PHX_RL_RESTART] / total,
			100.0 * (double)led.part_ms[PHX_RL_LOST] / total,
			100.0 * (double)led.part_ms[PHX_RL_DETECT] / total, led.failures,
			sj->dr->job_id);
	}
}

static int setup_roles(struct steps_job *sj)
{
	struct driver *dr = sj->dr;
	char err[1024];

	phx_drv_check_nodes(dr, NULL, 0);
	if (dr->preflight && check_first(dr) < 0)
		return PHX_EXIT_SETUP;
	if (phx_drv_roles_init(&sj->j, dr->o->roles, dr->o->nroles, dr->alloc.count, dr->st.bad,
			       dr->st.max_relaunches, err, sizeof(err)) < 0) {
		phx_error("%s", err);
		return PHX_EXIT_USAGE;
	}
	if (open_ledger(sj) < 0)
		return PHX_EXIT_SETUP;
	dr->xrdv = phx_drv_xrdv_open();
	if (!dr->xrdv) {
		phx_error("roles in steps of their own need the cross-role rendezvous, which did "
			  "not start (see above); is this node's IPv4 address up?");
		return PHX_EXIT_SETUP;
	}
	dr->alive_ms = calloc(dr->alloc.count, sizeof(*dr->alive_ms));
	dr->alive_state = calloc(dr->alloc.count, sizeof(*dr->alive_state));
	if (!dr->alive_ms || !dr->alive_state)
		return PHX_EXIT_SETUP;
	/* srun passes the environment on to every step's agents. */
	setenv(PHX_XRDV_ENV, phx_drv_xrdv_env(dr->xrdv), 1);
	dr->lost_env = phx_drv_lost_rekey(dr->lost);
	return 0;
}

/* Every step ended: the job's exit. */
static int outcome(struct steps_job *sj)
{
	struct driver *dr = sj->dr;

	if (dr->preempted)
		return phx_drv_requeue(dr, "the roles' agents were preempted");
	if (dr->stop_sig)
		return 128 + dr->stop_sig;
	if (sj->rc == -2)
		return phx_drv_requeue(dr, "a fatal role has too few nodes left");
	if (sj->rc >= 0)
		return sj->rc;
	/* Only non-fatal roles were left, and each gave up or waits for nodes. */
	phx_error("no role of job %u runs any more; see the lines above", dr->job_id);
	return PHX_EXIT_WORKERS;
}

int phx_drv_steps_run(struct driver *dr)
{
	struct steps_job sj = { .dr = dr, .rc = -1 };
	int rc = setup_roles(&sj);

	if (rc)
		goto out;
	for (size_t r = 0; r < sj.j.n; r++) {
		if (role_start(&sj, r) < 0) {
			end_job(&sj, PHX_EXIT_SETUP, "a role's step did not start");
			break;
		}
	}
	publish(&sj);
	while (sj.n || (sj.nlater && !sj.finishing && !dr->stop_sig && !dr->preempted)) {
		uint64_t until = next_later(&sj);
		struct step *s;

		if (sj.end_at && (!until || sj.end_at < until))
			until = sj.end_at;
		if (!until || sj.report_at < until)
			until = sj.report_at;
		s = phx_drv_steps_watch(dr, sj.steps, sj.n, until);
		if (s)
			step_ended(&sj, s);
		else if (sj.end_at && phx_drv_now_ms() >= sj.end_at)
			end_job(&sj, sj.rc, "its fatal roles finished; stopping the others");
		else if (phx_drv_now_ms() < until)
			break; /* out of memory in the watch */
		run_later(&sj);
		if (phx_drv_now_ms() >= sj.report_at) {
			report_ledger(&sj, false);
			take_back(&sj);
		}
	}
	report_ledger(&sj, true);
	rc = outcome(&sj);
out:
	for (size_t k = 0; k < sj.n; k++) {
		free(sj.steps[k]->idx);
		free(sj.steps[k]);
	}
	free(sj.steps);
	free(sj.later);
	phx_drv_roles_free(&sj.j);
	phx_drv_ledger_free(dr->ledger);
	dr->ledger = NULL;
	phx_drv_xrdv_close(dr->xrdv);
	dr->xrdv = NULL;
	free(dr->alive_ms);
	free(dr->alive_state);
	dr->alive_ms = NULL;
	dr->alive_state = NULL;
	return rc;
}
