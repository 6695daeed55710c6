/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Requeueing a job without its bad nodes, never into a dead end. Slurm
 * keeps a pending job forever, without a word, when its excluded nodes
 * leave its partition too few to hold it. So before a requeue the driver
 * and phalanx-ckptd ask: with these nodes excluded, can the job still run?
 *
 *   enough usable nodes outside the bad ones  -> requeue, all bad excluded
 *   too few (recovery.too_few_nodes: wait)    -> requeue excluding only the
 *        bad nodes Slurm would still schedule on; a DOWN or drained node is
 *        left to Slurm, which keeps the job off it until it returns: the
 *        job waits for nodes, and says so
 *   too few even then, or policy stop         -> no requeue: the job stops
 *        with the reason
 *
 * phx_requeue_plan() is pure (tested without Slurm); phx_requeue_check()
 * fills it in from Slurm's view of the job's partitions.
 */
#ifndef PHX_REQUEUE_H
#define PHX_REQUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

enum phx_too_few { PHX_TOO_FEW_WAIT, PHX_TOO_FEW_STOP };

/* A reason fits phalanx-ckptd's reports (and sinfo-sized lines) whole. */
#define PHX_REQUEUE_WHY_MAX 256

enum phx_requeue_verdict {
	PHX_REQUEUE_OK, /* requeue: enough usable nodes without the bad ones */
	PHX_REQUEUE_WAIT, /* requeue: the job waits for Slurm's DOWN/drained nodes */
	PHX_REQUEUE_DEAD_END, /* do not requeue: it could never run */
};

/* One node of the job's partitions, as Slurm and the caller see it. */
struct phx_requeue_node {
	const char *name;
	bool usable; /* Slurm may schedule it (not DOWN, drained, FAIL or FUTURE) */
	bool bad; /* to be excluded: found bad by Phalanx, or excluded before */
};

struct phx_requeue_plan {
	enum phx_requeue_verdict verdict;
	size_t need; /* nodes the job asks for */
	size_t usable; /* usable nodes outside the excluded ones */
	size_t capacity; /* nodes outside the excluded ones, usable or not */
	char why[PHX_REQUEUE_WHY_MAX]; /* what was decided and why, for the job's output */
};

/* name is one whole item of the comma-separated list ("a,b"); never for "". */
bool phx_requeue_listed(const char *list, const char *name);

/*
 * Decides for a job of need nodes over the n nodes of its partitions.
 * exclude[i] is set for the nodes to exclude (a subset of the bad ones).
 */
void phx_requeue_plan(const struct phx_requeue_node *nodes, size_t n, size_t need,
		      enum phx_too_few policy, bool *exclude, struct phx_requeue_plan *plan);

/*
 * Plans the requeue of job_id, which needs need nodes (0: as many as it
 * asked Slurm for), without the nodes of the host list bad (may be NULL
 * or ""), keeping the job's current exclusions: reads the job, its
 * partitions and their nodes from Slurm. On success *exclude is the host
 * list to set as the job's excluded nodes (malloc'd; NULL when none).
 * Returns 0, or -1 with err set when Slurm cannot be asked.
 */
int phx_requeue_check(uint32_t job_id, const char *bad, size_t need, enum phx_too_few policy,
		      struct phx_requeue_plan *plan, char **exclude, char *err, size_t errlen);

/*
 * The begin time that makes a requeued job eligible at once, for a job
 * that is pending and done completing. Not now: a slurmd refuses to launch
 * a job whose credential is no newer than the one it revoked when the last
 * run was killed ("Job N already killed, do not launch batch job"), and
 * both are whole seconds; a run scheduled in the second of the kill fails.
 */
time_t phx_requeue_begin_time(void);

#endif
