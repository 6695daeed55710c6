/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's table of jobs, and which connections belong to each. */
#ifndef PHX_CKPTD_JOB_H
#define PHX_CKPTD_JOB_H

#include <stdint.h>

#include "checkpoint/ckptd/ckptd.h"

struct ckptd_job *ckptd_job_find(struct ckptd *d, uint32_t id);
/* The job, added to the table when it is not there; NULL when out of memory. */
struct ckptd_job *ckptd_job_get(struct ckptd *d, uint32_t id, uint32_t uid);
/* Takes the job out of the table and frees it with all it holds. */
void ckptd_job_forget(struct ckptd *d, struct ckptd_job *j);
/* Forgets a job that never registered and holds nothing (a refused registration). */
void ckptd_job_drop_if_empty(struct ckptd *d, struct ckptd_job *j);
/* Frees every job (shutdown). */
void ckptd_jobs_free(struct ckptd *d);
/*
 * Room for a run of job j with ranks ranks beside the user's other running
 * jobs (agents connected), under ckptd.max_ranks_per_user: 0, or -1 with
 * the reason. One user cannot fill the daemon's memory for everyone.
 */
int ckptd_job_user_room(const struct ckptd *d, const struct ckptd_job *j, uint32_t ranks, char *err,
			size_t errlen);
/* A registered agent joins the job's agents (its broadcasts); -1 when out of memory. */
int ckptd_job_attach(struct ckptd *d, struct ckptd_job *j, struct ckptd_conn *c);
/* A closing connection leaves its job (an agent's or a driver's). */
void ckptd_job_detach(struct ckptd *d, struct ckptd_conn *c);

#endif
