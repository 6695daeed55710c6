/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "checkpoint/ckptd/recovery_policy.h"

static const char *const fault_names[PHX_FAULT_COUNT] = {
	[PHX_FAULT_CRASH] = "crash",
	[PHX_FAULT_HANG] = "hang",
	[PHX_FAULT_STRAGGLER] = "straggler",
	[PHX_FAULT_CHECK] = "check",
	[PHX_FAULT_XID] = "xid",
	[PHX_FAULT_LOST] = "lost",
	[PHX_FAULT_SLURM_DOWN] = "slurm_down",
};

const char *phx_fault_name(enum phx_fault f)
{
	return f >= 0 && f < PHX_FAULT_COUNT ? fault_names[f] : "?";
}

int phx_fault_parse(const char *kind)
{
	for (int f = 0; f < PHX_FAULT_COUNT; f++)
		if (!strcmp(kind, fault_names[f]))
			return f;
	return -1;
}

void phx_recovery_conf_default(struct phx_recovery_conf *c)
{
	c->user_error_repeats = 2;
	c->drain_after = 2;
	c->fault_window_s = 86400;
	c->max_requeues = 3;
}

unsigned phx_recovery_recent(const struct phx_recovery_node *node, double window_s, double now)
{
	unsigned have = node->n < PHX_RECOVERY_FAULTS ? node->n : PHX_RECOVERY_FAULTS, k = 0;

	for (unsigned i = 0; i < have; i++)
		if (now - node->t[i] <= window_s)
			k++;
	return k;
}

static void note_node(struct phx_recovery_node *node, double now)
{
	node->t[node->n % PHX_RECOVERY_FAULTS] = now;
	node->n++;
}

/* Counts sig; returns how often it has been seen, the oldest forgotten when full. */
static int count_sig(struct phx_recovery_job *job, const char *sig)
{
	int i, slot = -1, least = 0;

	for (i = 0; i < PHX_RECOVERY_SIGS; i++) {
		if (job->sigs[i].count && !strcmp(job->sigs[i].sig, sig))
			return ++job->sigs[i].count;
		if (!job->sigs[i].count && slot < 0)
			slot = i;
		if (job->sigs[i].count < job->sigs[least].count)
			least = i;
	}
	slot = slot < 0 ? least : slot;
	snprintf(job->sigs[slot].sig, sizeof(job->sigs[slot].sig), "%s", sig);
	job->sigs[slot].count = 1;
	return 1;
}

static void stop(struct phx_recovery_job *job, struct phx_recovery_decision *out)
{
	out->stop = 1;
	out->requeue = 0;
	out->restart = 0;
	job->stopped = 1;
	snprintf(job->stop_reason, sizeof(job->stop_reason), "%s", out->reason);
}

static void crash(const struct phx_recovery_conf *c, struct phx_recovery_job *job, const char *sig,
		  struct phx_recovery_decision *out)
{
	int seen = count_sig(job, sig && *sig ? sig : "(no signature)");

	if (sig && *sig && seen >= c->user_error_repeats) {
		snprintf(out->reason, sizeof(out->reason),
			 "user error: the same failure (%s) %d times; fix the program and "
			 "resubmit",
			 sig, seen);
		stop(job, out);
		return;
	}
	out->restart = 1;
	snprintf(out->reason, sizeof(out->reason), "worker failure (%s), seen %d of %d times",
		 sig && *sig ? sig : "no signature", seen, c->user_error_repeats);
}

static void node_fault(const struct phx_recovery_conf *c, struct phx_recovery_job *job,
		       struct phx_recovery_node *node, const char *name, enum phx_fault f,
		       const char *sig, double now, struct phx_recovery_decision *out)
{
	int hard = f == PHX_FAULT_LOST || f == PHX_FAULT_SLURM_DOWN;
	unsigned recent = 0;

	if (node) {
		note_node(node, now);
		recent = phx_recovery_recent(node, c->fault_window_s, now);
	}
	out->requeue = 1;
	/* A vanished node comes back with nothing proven: it waits drained for a check. */
	out->drain = node && (hard || (int)recent >= c->drain_after);
	if (out->drain)
		node->untrusted = 1;
	if (hard)
		snprintf(out->reason, sizeof(out->reason), "phalanx: node %s %s%s%s", name,
			 f == PHX_FAULT_LOST ? "lost (no agent heartbeat)" : "down in Slurm",
			 sig && *sig ? ": " : "", sig && *sig ? sig : "");
	else
		snprintf(out->reason, sizeof(out->reason),
			 "phalanx: node %s %s failure%s%s (%u in %.0f s)", name ? name : "?",
			 phx_fault_name(f), sig && *sig ? ": " : "", sig && *sig ? sig : "", recent,
			 c->fault_window_s);
	if (job->requeues >= (uint32_t)c->max_requeues) {
		char why[PHX_RECOVERY_REASON_MAX];

		snprintf(why, sizeof(why), "%s", out->reason);
		snprintf(out->reason, sizeof(out->reason),
			 "gave up after %u requeues (recovery.max_requeues); last: %.180s",
			 job->requeues, why);
		stop(job, out);
	}
}

void phx_recovery_decide(const struct phx_recovery_conf *c, struct phx_recovery_job *job,
			 struct phx_recovery_node *node, const char *node_name, enum phx_fault f,
			 const char *sig, double now, struct phx_recovery_decision *out)
{
	memset(out, 0, sizeof(*out));
	if (job->stopped) {
		snprintf(out->reason, sizeof(out->reason), "%s", job->stop_reason);
		return;
	}
	switch (f) {
	case PHX_FAULT_CRASH:
		crash(c, job, sig, out);
		break;
	case PHX_FAULT_HANG:
		out->restart = 1;
		snprintf(out->reason, sizeof(out->reason), "workers hung%s%s",
			 node_name ? " on " : "", node_name ? node_name : "");
		break;
	case PHX_FAULT_STRAGGLER:
		snprintf(out->reason, sizeof(out->reason), "straggler%s%s", node_name ? " on " : "",
			 node_name ? node_name : "");
		break;
	default:
		node_fault(c, job, node, node_name, f, sig, now, out);
	}
}

void phx_recovery_requeued(struct phx_recovery_job *job)
{
	job->requeues++;
}

int phx_recovery_node_checked(struct phx_recovery_node *node, int passed)
{
	if (!passed || !node->untrusted)
		return 0;
	node->untrusted = 0;
	return 1;
}
