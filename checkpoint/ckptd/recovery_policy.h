/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What phalanx-ckptd does about a fault: a pure decision from the fault,
 * the job's history and the node's history, so that the policy can be
 * tested without Slurm. The daemon carries the decision out (drain,
 * requeue, stop) and records it; agents do in-job restarts themselves.
 *
 *   crash (same signature K times) -> stop: a user error, no retry
 *   crash (fewer), hang            -> restart in the job (agents)
 *   straggler                      -> nothing; time is accounted
 *   check failure, xid             -> requeue without the node; the
 *                                     drain_after-th within fault_window
 *                                     drains it
 *   lost agent, node DOWN in Slurm -> drain the node and requeue without it
 *   any requeue past max_requeues  -> stop, saying why
 */
#ifndef PHX_RECOVERY_POLICY_H
#define PHX_RECOVERY_POLICY_H

#include <stddef.h>
#include <stdint.h>

#define PHX_RECOVERY_SIG_MAX 160 /* a crash signature: exception and step */
#define PHX_RECOVERY_SIGS 8 /* distinct signatures remembered per job */
#define PHX_RECOVERY_FAULTS 32 /* fault times remembered per node */
#define PHX_RECOVERY_REASON_MAX 256

enum phx_fault {
	PHX_FAULT_CRASH, /* a worker failed; sig says how (exception and step) */
	PHX_FAULT_HANG, /* workers stopped making progress */
	PHX_FAULT_STRAGGLER, /* slow, not failed */
	PHX_FAULT_CHECK, /* a health check or phalanx check failed on the node */
	PHX_FAULT_XID, /* a GPU error in the node's kernel log */
	PHX_FAULT_LOST, /* the node's agent stopped sending heartbeats */
	PHX_FAULT_SLURM_DOWN, /* Slurm shows the node DOWN or FAIL */
	PHX_FAULT_COUNT
};

struct phx_recovery_conf {
	int user_error_repeats; /* K: same crash signature this often = user error */
	int drain_after; /* N node faults within fault_window_s drain the node */
	double fault_window_s;
	int max_requeues;
};

struct phx_recovery_job {
	uint32_t requeues;
	int stopped;
	char stop_reason[PHX_RECOVERY_REASON_MAX];
	struct {
		char sig[PHX_RECOVERY_SIG_MAX];
		int count;
	} sigs[PHX_RECOVERY_SIGS];
};

/* One node's history, across jobs. */
struct phx_recovery_node {
	double t[PHX_RECOVERY_FAULTS]; /* ring of fault times */
	unsigned n; /* faults recorded, all time */
	int untrusted; /* drained by Phalanx: back in service only after a passing check */
};

struct phx_recovery_decision {
	int restart; /* agents restart in the job; the daemon records it */
	int drain; /* drain the node with reason */
	int requeue; /* requeue the job without the node, start time now */
	int stop; /* give up on the job: reason */
	char reason[PHX_RECOVERY_REASON_MAX];
};

const char *phx_fault_name(enum phx_fault f);
/* The fault of an event kind ("crash", "hang", ...); -1 if none. */
int phx_fault_parse(const char *kind);

void phx_recovery_conf_default(struct phx_recovery_conf *c);

/*
 * Decides about fault f of the job, on node (may be NULL for a job-wide
 * fault), at time now (seconds). sig identifies a crash (may be NULL for
 * other faults); detail goes into reasons. Updates the job's and the
 * node's history; the caller counts a requeue it carried out with
 * phx_recovery_requeued().
 */
void phx_recovery_decide(const struct phx_recovery_conf *c, struct phx_recovery_job *job,
			 struct phx_recovery_node *node, const char *node_name, enum phx_fault f,
			 const char *sig, double now, struct phx_recovery_decision *out);

void phx_recovery_requeued(struct phx_recovery_job *job);

/* Faults of node within window before now. */
unsigned phx_recovery_recent(const struct phx_recovery_node *node, double window_s, double now);

/* A check result for a node: 1 when it was untrusted and may now be resumed. */
int phx_recovery_node_checked(struct phx_recovery_node *node, int passed);

#endif
