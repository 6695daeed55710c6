/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The daemon's jobs: a hash table by job id, and the connections that
 * belong to each (its registered agents, its drivers). What a job holds
 * is filled in by the catalog (shape, generations) and by recovery.
 */
#include "config.h"

#include <stdlib.h>

#include "checkpoint/ckptd/ckptd_job.h"
#include "common/log.h"

static size_t bucket(uint32_t id)
{
	return (id * 2654435761u) % CKPTD_JOB_BUCKETS;
}

struct ckptd_job *ckptd_job_find(struct ckptd *d, uint32_t id)
{
	for (struct ckptd_job *j = d->jobs[bucket(id)]; j; j = j->next)
		if (j->id == id)
			return j;
	return NULL;
}

struct ckptd_job *ckptd_job_get(struct ckptd *d, uint32_t id, uint32_t uid)
{
	struct ckptd_job *j = ckptd_job_find(d, id);

	if (j)
		return j;
	j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->id = id;
	j->uid = uid;
	j->next = d->jobs[bucket(id)];
	d->jobs[bucket(id)] = j;
	d->njobs++;
	return j;
}

int ckptd_job_user_room(const struct ckptd *d, const struct ckptd_job *j, uint32_t ranks, char *err,
			size_t errlen)
{
	uint64_t held = 0;
	size_t jobs = 0;

	if (!d->max_ranks_per_user)
		return 0;
	for (size_t b = 0; b < CKPTD_JOB_BUCKETS; b++) {
		for (const struct ckptd_job *o = d->jobs[b]; o; o = o->next) {
			if (o == j || o->uid != j->uid || !o->nagents)
				continue;
			held += o->commit.world;
			jobs++;
		}
	}
	if (held + ranks <= d->max_ranks_per_user)
		return 0;
	return phx_errf(err, errlen,
			"uid %u's %zu other running job(s) hold %llu ranks here; %u more would "
			"pass ckptd.max_ranks_per_user (%u): checkpoint fewer jobs at once, or "
			"ask the site to raise it",
			j->uid, jobs, (unsigned long long)held, ranks, d->max_ranks_per_user);
}

static void job_free(struct ckptd_job *j)
{
	for (size_t i = 0; i < j->ngens; i++)
		free(j->gens[i].text);
	free(j->gens);
	free(j->agents);
	free(j->r.members);
	free(j->r.roles);
	if (j->registered)
		phx_commit_job_free(&j->commit);
	free(j);
}

void ckptd_job_forget(struct ckptd *d, struct ckptd_job *gone)
{
	for (struct ckptd_job **p = &d->jobs[bucket(gone->id)]; *p; p = &(*p)->next)
		if (*p == gone) {
			*p = gone->next;
			d->njobs--;
			job_free(gone);
			return;
		}
}

void ckptd_job_drop_if_empty(struct ckptd *d, struct ckptd_job *j)
{
	/* A connected driver holds the job too (c->job): it stays while one does. */
	if (!j->registered && !j->ngens && !j->nagents && !j->drivers && !j->r.on)
		ckptd_job_forget(d, j);
}

void ckptd_jobs_free(struct ckptd *d)
{
	for (size_t b = 0; b < CKPTD_JOB_BUCKETS; b++)
		while (d->jobs[b]) {
			struct ckptd_job *j = d->jobs[b];

			d->jobs[b] = j->next;
			job_free(j);
		}
	d->njobs = 0;
}

int ckptd_job_attach(struct ckptd *d, struct ckptd_job *j, struct ckptd_conn *c)
{
	if (j->nagents == j->capagents) {
		size_t cap = j->capagents ? 2 * j->capagents : 8;
		struct ckptd_conn **v = realloc(j->agents, cap * sizeof(*v));

		if (!v)
			return -1;
		j->agents = v;
		j->capagents = cap;
	}
	j->agents[j->nagents++] = c;
	c->job = j;
	d->agents++;
	return 0;
}

void ckptd_job_detach(struct ckptd *d, struct ckptd_conn *c)
{
	struct ckptd_job *j = c->job;

	if (!j)
		return;
	if (c->order.role == PHX_ROLE_DRIVER) {
		j->drivers--;
		c->job = NULL;
		ckptd_job_drop_if_empty(d, j);
		return;
	}
	for (size_t i = 0; i < j->nagents; i++)
		if (j->agents[i] == c) {
			j->agents[i] = j->agents[--j->nagents];
			break;
		}
	d->agents--;
	c->job = NULL;
}
