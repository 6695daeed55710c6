/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/ckptd/ckpt_commit.h"
#include "common/log.h"

int phx_commit_job_init(struct phx_commit_job *j, uint32_t job, uint32_t world, const char *layout,
			char *err, size_t errlen)
{
	memset(j, 0, sizeof(*j));
	if (!job || !world || world > PHX_MANIFEST_MAX_WORLD)
		return phx_errf(err, errlen, "job %u: %u ranks is not 1 to %u", job, world,
				PHX_MANIFEST_MAX_WORLD);
	j->job = job;
	j->world = world;
	j->layout = strdup(layout ? layout : "");
	if (!j->layout)
		return phx_errf(err, errlen, "out of memory");
	return 0;
}

static void gen_free(struct phx_commit_gen *g)
{
	if (!g)
		return;
	phx_manifest_free(&g->m);
	free(g);
}

void phx_commit_job_free(struct phx_commit_job *j)
{
	for (int i = 0; i < PHX_COMMIT_MAX_OPEN; i++)
		gen_free(j->open[i]);
	free(j->layout);
	memset(j, 0, sizeof(*j));
}

int phx_commit_was_aborted(const struct phx_commit_job *j, uint64_t gen)
{
	size_t n =
		j->naborted < PHX_COMMIT_ABORTED_MEMORY ? j->naborted : PHX_COMMIT_ABORTED_MEMORY;

	for (size_t i = 0; i < n; i++)
		if (j->aborted[i] == gen)
			return 1;
	return 0;
}

static void remember_aborted(struct phx_commit_job *j, uint64_t gen)
{
	if (phx_commit_was_aborted(j, gen))
		return;
	j->aborted[j->naborted++ % PHX_COMMIT_ABORTED_MEMORY] = gen;
}

static int slot_of(const struct phx_commit_job *j, uint64_t gen)
{
	for (int i = 0; i < PHX_COMMIT_MAX_OPEN; i++)
		if (j->open[i] && j->open[i]->gen == gen)
			return i;
	return -1;
}

static void drop(struct phx_commit_job *j, int slot)
{
	remember_aborted(j, j->open[slot]->gen);
	gen_free(j->open[slot]);
	j->open[slot] = NULL;
}

/* A slot for a new generation; the oldest open one gives way when all are taken. */
static int new_slot(struct phx_commit_job *j, uint64_t gen, uint64_t *abort_gen)
{
	int oldest = -1;

	for (int i = 0; i < PHX_COMMIT_MAX_OPEN; i++) {
		if (!j->open[i])
			return i;
		if (oldest < 0 || j->open[i]->gen < j->open[oldest]->gen)
			oldest = i;
	}
	if (j->open[oldest]->gen > gen)
		return -1; /* the newcomer is the oldest: it gives way */
	*abort_gen = j->open[oldest]->gen;
	drop(j, oldest);
	return oldest;
}

static int same_shard(const struct phx_manifest_shard *a, const char *node,
		      const struct phx_manifest_shard *b)
{
	if (strcmp(a->node, node) || a->bytes != b->bytes || strcmp(a->digest.alg, b->digest.alg) ||
	    strcmp(a->digest.hex, b->digest.hex) || a->nlocations != b->nlocations)
		return 0;
	for (size_t i = 0; i < a->nlocations; i++)
		if (strcmp(a->locations[i].tier, b->locations[i].tier) ||
		    strcmp(a->locations[i].path, b->locations[i].path))
			return 0;
	return 1;
}

static int set_shard(struct phx_commit_gen *g, const char *node, const struct phx_manifest_shard *s,
		     char *err, size_t errlen)
{
	if (phx_manifest_shard_set(&g->m, s->rank, node, s->bytes, s->digest.alg, s->digest.hex,
				   err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < s->nlocations; i++)
		if (phx_manifest_shard_add_location(&g->m.shards[s->rank], s->locations[i].tier,
						    s->locations[i].path, err, errlen) < 0)
			return -1;
	return 0;
}

/* Applies the shards; -1 with reason when one contradicts an earlier prepare. */
static int apply(struct phx_commit_gen *g, const char *node,
		 const struct phx_manifest_shard *shards, size_t n, size_t *added, char *reason,
		 size_t reasonlen)
{
	*added = 0;
	for (size_t i = 0; i < n; i++) {
		const struct phx_manifest_shard *have = &g->m.shards[shards[i].rank];

		if (have->filled) {
			if (!same_shard(have, node, &shards[i]))
				return phx_errf(
					reason, reasonlen,
					"rank %u of generation %llu was prepared twice with "
					"different contents (by %s and %s)",
					shards[i].rank, (unsigned long long)g->gen, have->node,
					node);
			continue;
		}
		if (set_shard(g, node, &shards[i], reason, reasonlen) < 0)
			return -1;
		(*added)++;
	}
	return 0;
}

int phx_commit_prepare(struct phx_commit_job *j, uint64_t gen, uint64_t step, const char *node,
		       const struct phx_manifest_shard *shards, size_t n,
		       enum phx_commit_result *result, uint64_t *abort_gen, char *reason,
		       size_t reasonlen)
{
	struct phx_commit_gen *g;
	size_t added;
	int slot;

	*abort_gen = 0;
	for (size_t i = 0; i < n; i++)
		if (shards[i].rank >= j->world)
			return phx_errf(reason, reasonlen,
					"prepare of generation %llu names rank %u; job %u has %u "
					"ranks",
					(unsigned long long)gen, shards[i].rank, j->job, j->world);
	if (gen <= j->committed) {
		*result = PHX_COMMIT_STALE;
		return 0;
	}
	*result = PHX_COMMIT_WAS_ABORTED;
	if (phx_commit_was_aborted(j, gen)) {
		phx_errf(reason, reasonlen, "generation %llu was aborted", (unsigned long long)gen);
		return 0;
	}
	*result = PHX_COMMIT_ABORTED;
	slot = slot_of(j, gen);
	if (slot < 0) {
		slot = new_slot(j, gen, abort_gen);
		if (slot < 0) {
			remember_aborted(j, gen);
			phx_errf(reason, reasonlen,
				 "generation %llu is older than the %d newer ones in flight",
				 (unsigned long long)gen, PHX_COMMIT_MAX_OPEN);
			return 0;
		}
		g = calloc(1, sizeof(*g));
		if (!g || phx_manifest_init(&g->m, j->job, gen, step, j->layout, j->world, reason,
					    reasonlen) < 0) {
			free(g);
			return -1;
		}
		g->gen = gen;
		g->step = step;
		j->open[slot] = g;
	}
	g = j->open[slot];
	if (step != g->step) {
		phx_errf(reason, reasonlen,
			 "generation %llu: %s prepared step %llu, others step %llu",
			 (unsigned long long)gen, node, (unsigned long long)step,
			 (unsigned long long)g->step);
		drop(j, slot);
		return 0;
	}
	if (apply(g, node, shards, n, &added, reason, reasonlen) < 0) {
		drop(j, slot);
		return 0;
	}
	g->prepared += (uint32_t)added;
	if (!added) {
		*result = PHX_COMMIT_DUPLICATE;
		return 0;
	}
	g->ready = g->prepared == j->world;
	*result = g->ready ? PHX_COMMIT_READY : PHX_COMMIT_PENDING;
	return 0;
}

enum phx_commit_result phx_commit_abort(struct phx_commit_job *j, uint64_t gen)
{
	int slot;

	if (gen <= j->committed)
		return PHX_COMMIT_STALE;
	slot = slot_of(j, gen);
	if (slot >= 0)
		drop(j, slot);
	else
		remember_aborted(j, gen);
	return PHX_COMMIT_ABORTED;
}

const struct phx_manifest *phx_commit_ready_manifest(const struct phx_commit_job *j, uint64_t gen)
{
	int slot = slot_of(j, gen);

	return slot >= 0 && j->open[slot]->ready ? &j->open[slot]->m : NULL;
}

size_t phx_commit_done(struct phx_commit_job *j, uint64_t gen,
		       uint64_t superseded[PHX_COMMIT_MAX_OPEN])
{
	int slot = slot_of(j, gen);
	size_t n = 0;

	if (slot < 0 || !j->open[slot]->ready)
		return 0;
	j->committed = gen;
	j->committed_step = j->open[slot]->step;
	gen_free(j->open[slot]);
	j->open[slot] = NULL;
	for (int i = 0; i < PHX_COMMIT_MAX_OPEN; i++)
		if (j->open[i] && j->open[i]->gen < gen) {
			superseded[n++] = j->open[i]->gen;
			drop(j, i);
		}
	return n;
}

void phx_commit_set_committed(struct phx_commit_job *j, uint64_t gen, uint64_t step)
{
	if (gen > j->committed) {
		j->committed = gen;
		j->committed_step = step;
	}
}
