/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a job's token entitles its holder to say, from Slurm's own view of
 * the job: a token proves (job, uid), and the daemon then hears about a
 * node only when the job is running, belongs to that uid in Slurm and has
 * that node (a plain host name, never a host list) in its allocation.
 * Slurm's answers are cached per job for CKPTD_ALLOC_TTL_S. Without Slurm
 * on this host the daemon cannot drain, set down or requeue anything, and
 * only the names' form is checked.
 */
#ifndef PHX_CKPTD_AUTHZ_H
#define PHX_CKPTD_AUTHZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "checkpoint/ckptd/ckptd.h"

/*
 * 0 when uid's token for job may speak for node: a plain name, the job
 * running and uid's, and (with in_allocation) node one of its nodes, as
 * for an agent or a node an event names; a driver may run outside the
 * allocation (salloc on a login node). -1 with the reason in err.
 */
int ckptd_authz(struct ckptd *d, uint32_t job, uint32_t uid, const char *node, bool in_allocation,
		char *err, size_t errlen);

/* 1 for a plain host name: letters, digits, '.', '-', '_', starting with a letter or digit. */
int ckptd_node_name_plain(const char *name);

/*
 * 0 when a registration's shape fits the job's allocation in Slurm: no
 * more nodes than it has, and at most CKPTD_MAX_RANKS_PER_NODE ranks per
 * node, as the commit state grows with the ranks; -1 with the reason.
 */
int ckptd_authz_shape(struct ckptd *d, uint32_t job, uint32_t uid, uint32_t nodes, uint32_t ranks,
		      char *err, size_t errlen);

void ckptd_authz_free(struct ckptd *d);

#endif
