/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where a job's wall time went. The ledger is a pure state machine over
 * the events phalanx-ckptd sees; every second between the job's first
 * registration and now (or its end) is in exactly one part:
 *
 *   phase time: productive (training), restart (start-up and restart:
 *   from a start to the first training step), queue (requeued, until
 *   Slurm runs it again); and, moved out of productive time when known:
 *   stall (save stalls the agents report), straggler (time the agents
 *   report lost waiting on a slow rank), lost (productive time since the
 *   newest commit, at a failure), detect (from a failure to the daemon
 *   noticing it: the last heartbeat of a lost agent to its declaration).
 *
 * So the parts add up to the wall time by construction. Times are
 * seconds of the real-time clock, so that a ledger survives a restart of
 * the daemon through the journal.
 *
 * The model: from a save stall delta, a time to recover R, and a failure
 * rate per GPU-second, a job of G GPUs fails every M = 1/(rate G)
 * seconds; it saves every tau (Daly's interval for delta and M) and
 * keeps
 *   goodput = tau/(tau+delta) * max(0, 1 - (R + (tau+delta)/2) / M)
 * of its time: each failure costs R and, on average, half an interval.
 */
#ifndef PHX_GOODPUT_H
#define PHX_GOODPUT_H

#include <stdint.h>

enum phx_gp_part {
	PHX_GP_PRODUCTIVE,
	PHX_GP_STALL,
	PHX_GP_LOST,
	PHX_GP_DETECT,
	PHX_GP_RESTART,
	PHX_GP_QUEUE,
	PHX_GP_STRAGGLER,
	PHX_GP_PARTS
};

enum phx_gp_phase { PHX_GP_PH_RESTART, PHX_GP_PH_RUN, PHX_GP_PH_QUEUE, PHX_GP_PH_DONE };

struct phx_goodput {
	double start, end; /* end 0 while running */
	double since; /* start of the current phase */
	enum phx_gp_phase phase;
	double part[PHX_GP_PARTS];
	double since_commit; /* productive seconds since the newest commit */
	uint32_t failures, requeues;
};

const char *phx_gp_part_name(enum phx_gp_part p);
const char *phx_gp_phase_name(enum phx_gp_phase p);
int phx_gp_phase_parse(const char *s);

void phx_gp_begin(struct phx_goodput *g, double now);
/* Training made progress (a heartbeat with a higher step). */
void phx_gp_step(struct phx_goodput *g, double now);
/* A save stalled training for s seconds (already past). */
void phx_gp_stall(struct phx_goodput *g, double now, double s);
/* Ranks waited s seconds on a straggler. */
void phx_gp_straggler(struct phx_goodput *g, double now, double s);
/* A generation committed: work before now is safe. */
void phx_gp_commit(struct phx_goodput *g, double now);
/* A failure noticed at now that happened detect_s before; work since the commit is lost. */
void phx_gp_fault(struct phx_goodput *g, double now, double detect_s);
void phx_gp_requeue(struct phx_goodput *g, double now);
/* Slurm runs the job again (at start, from its start time). */
void phx_gp_running(struct phx_goodput *g, double start);
void phx_gp_end(struct phx_goodput *g, double now);

/* The parts as of now (the open phase counted), and their sum, the wall time. */
double phx_gp_snapshot(const struct phx_goodput *g, double now, double part[PHX_GP_PARTS]);

struct phx_gp_model {
	double gpus, stall_s, mttr_s, rate_per_gpu_s;
	double mtbf_s, interval_s, goodput; /* results */
};

/* Llama 3: 419 unexpected interruptions in 54 days on 16,384 GPUs. */
#define PHX_GP_LLAMA3_RATE (419.0 / (54.0 * 86400.0 * 16384.0))

void phx_gp_model(struct phx_gp_model *m);

#endif
