/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/ckptd/ckptd_authz.h"
#include "checkpoint/ckptd/ckptd_clock.h"
#include "checkpoint/ckptd/ckptd_slurm.h"
#include "common/log.h"

int ckptd_node_name_plain(const char *name)
{
	size_t n = 0;

	if (!name || !isalnum((unsigned char)name[0]))
		return 0;
	for (; name[n]; n++)
		if (!isalnum((unsigned char)name[n]) && !strchr("._-", name[n]))
			return 0;
	return n <= PHX_MANIFEST_NODE_MAX;
}

/* The cached entry of job, or the slot to fetch it into (the oldest when all are taken). */
static struct ckptd_alloc *slot_of(struct ckptd_authz *z, uint32_t job)
{
	struct ckptd_alloc *oldest = &z->cache[0];

	for (size_t i = 0; i < CKPTD_ALLOCS; i++) {
		struct ckptd_alloc *a = &z->cache[i];

		if (a->fetched && a->job == job)
			return a;
		if (a->fetched < oldest->fetched)
			oldest = a;
	}
	return oldest;
}

static int fetch(struct ckptd *d, struct ckptd_alloc *a, uint32_t job, char *err, size_t errlen)
{
	uint32_t uid = 0, num_nodes = 0;
	char *nodes = NULL;
	int running = 0;

	d->authz.queries++;
	if (ckptd_slurm_alloc(job, &uid, &running, &num_nodes, &nodes, err, errlen) < 0)
		return -1;
	free(a->nodes);
	a->job = job;
	a->uid = uid;
	a->running = running;
	a->num_nodes = num_nodes;
	a->nodes = nodes;
	a->fetched = ckptd_now();
	return 0;
}

/* Slurm's view of job, no older than max_age_s. */
static struct ckptd_alloc *alloc_of(struct ckptd *d, uint32_t job, double max_age_s, char *err,
				    size_t errlen)
{
	struct ckptd_alloc *a = slot_of(&d->authz, job);

	/* "Not running" may change any moment (a requeued job starts again). */
	if (a->fetched && a->job == job && !a->running && max_age_s > CKPTD_ALLOC_RECHECK_S)
		max_age_s = CKPTD_ALLOC_RECHECK_S;
	if (a->fetched && a->job == job && ckptd_now() - a->fetched <= max_age_s)
		return a;
	if (fetch(d, a, job, err, errlen) < 0) {
		/* A stale answer is never used for a job Slurm no longer answers for. */
		free(a->nodes);
		memset(a, 0, sizeof(*a));
		return NULL;
	}
	return a;
}

static int refuse(struct ckptd *d, char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int refuse(struct ckptd *d, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	d->authz.refused++;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

int ckptd_authz(struct ckptd *d, uint32_t job, uint32_t uid, const char *node, bool in_allocation,
		char *err, size_t errlen)
{
	struct ckptd_alloc *a;
	char why[512];

	if (!ckptd_node_name_plain(node))
		return refuse(d, err, errlen,
			      "\"%.64s\" is not a node name: an agent speaks for one node, named "
			      "as Slurm names it, never a host list",
			      node);
	if (!ckptd_slurm_here())
		return 0;
	a = alloc_of(d, job, CKPTD_ALLOC_TTL_S, why, sizeof(why));
	if (!a)
		return refuse(d, err, errlen,
			      "Slurm cannot say who runs job %u (%s); the agent tries again", job,
			      why);
	if (!a->running)
		return refuse(d, err, errlen,
			      "job %u is not running in Slurm; a token is good only while its "
			      "job runs",
			      job);
	if (a->uid != uid)
		return refuse(d, err, errlen, "job %u belongs to uid %u in Slurm, not to uid %u",
			      job, a->uid, uid);
	if (!in_allocation || ckptd_slurm_listed(a->nodes, node))
		return 0;
	/* A job's nodes do not change while it runs; an answer a second old is asked again once. */
	if (ckptd_now() - a->fetched > CKPTD_ALLOC_RECHECK_S) {
		a = alloc_of(d, job, 0, why, sizeof(why));
		if (a && a->running && a->uid == uid && ckptd_slurm_listed(a->nodes, node))
			return 0;
	}
	return refuse(d, err, errlen, "node %s is not in job %u's allocation%s%.200s%s", node, job,
		      a ? " (" : "", a ? a->nodes : "", a ? ")" : "");
}

int ckptd_authz_shape(struct ckptd *d, uint32_t job, uint32_t uid, uint32_t nodes, uint32_t ranks,
		      char *err, size_t errlen)
{
	struct ckptd_alloc *a;
	char why[512];

	if (!ckptd_slurm_here())
		return 0;
	a = alloc_of(d, job, CKPTD_ALLOC_TTL_S, why, sizeof(why));
	if (!a || a->uid != uid || !a->running)
		return refuse(d, err, errlen, "job %u is not running in Slurm%s%s", job,
			      a ? "" : ": ", a ? "" : why);
	if (nodes > a->num_nodes)
		return refuse(d, err, errlen, "%u nodes, but job %u has %u in Slurm", nodes, job,
			      a->num_nodes);
	if ((uint64_t)ranks > (uint64_t)a->num_nodes * CKPTD_MAX_RANKS_PER_NODE)
		return refuse(d, err, errlen,
			      "%u ranks, but job %u's %u node(s) run at most %u (%u per node)",
			      ranks, job, a->num_nodes, a->num_nodes * CKPTD_MAX_RANKS_PER_NODE,
			      CKPTD_MAX_RANKS_PER_NODE);
	return 0;
}

void ckptd_authz_free(struct ckptd *d)
{
	for (size_t i = 0; i < CKPTD_ALLOCS; i++)
		free(d->authz.cache[i].nodes);
	memset(&d->authz, 0, sizeof(d->authz));
}
