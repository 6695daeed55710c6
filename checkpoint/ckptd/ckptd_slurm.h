/* SPDX-License-Identifier: Apache-2.0 */
/* The libslurm calls recovery makes (a node's drain is common/drain.h's). */
#ifndef PHX_CKPTD_SLURM_H
#define PHX_CKPTD_SLURM_H

#include <stddef.h>
#include <stdint.h>

struct ckptd_sjob {
	int state; /* JOB_* base state */
	int completing;
	uint32_t restarts;
	double start, eligible; /* realtime */
	char nodes[1024];
};
int ckptd_slurm_job(uint32_t id, struct ckptd_sjob *out, char *err, size_t errlen);
/* Whether this host can talk to Slurm; the first time it can, libslurm is set up. */
int ckptd_slurm_here(void);
/* Slurm's view of a job for authorization: owner, running, node count, the whole node list
 * (malloc'd). */
int ckptd_slurm_alloc(uint32_t id, uint32_t *uid, int *running, uint32_t *num_nodes, char **nodes,
		      char *err, size_t errlen);
/* 1 when node is one of the hosts of hostlist (a Slurm host-list expression). */
int ckptd_slurm_listed(const char *hostlist, const char *node);
/* Calls fn for each node of hostlist that Slurm shows DOWN or FAIL. */
int ckptd_slurm_bad_nodes(const char *hostlist, void (*fn)(void *arg, const char *node), void *arg,
			  char *err, size_t errlen);
int ckptd_slurm_node_down(const char *node, const char *reason, char *err, size_t errlen);
int ckptd_slurm_node_resume(const char *node, char *err, size_t errlen);
/* The node's reason in Slurm ("" when none), to resume only what Phalanx drained. */
int ckptd_slurm_node_reason(const char *node, char *out, size_t len, char *err, size_t errlen);
int ckptd_slurm_requeue(uint32_t id, char *err, size_t errlen);
/* Pending job: exclude nodes (comma list), eligible now. */
int ckptd_slurm_fix(uint32_t id, const char *exclude, char *err, size_t errlen);
/* Sets the job's AdminComment to "phalanx: reason" (seen in scontrol show job). */
int ckptd_slurm_comment(uint32_t id, const char *reason, char *err, size_t errlen);
int ckptd_slurm_cancel(uint32_t id, char *err, size_t errlen);

#endif
