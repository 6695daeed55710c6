/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Two-phase commit of a job's checkpoint generations, as a pure state
 * machine (no I/O): the daemon and the agents feed it prepares and aborts
 * and act on what it answers. A generation is ready to publish when every
 * rank's shard is prepared; until the caller has made the commit durable
 * and called phx_commit_done(), nothing is published. An abort, a
 * contradicting prepare or a newer generation committing first ends a
 * generation for good.
 */
#ifndef PHX_CKPT_COMMIT_H
#define PHX_CKPT_COMMIT_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint/proto/ckpt_manifest.h"

#define PHX_COMMIT_MAX_OPEN 4 /* generations in flight per job; the oldest gives way */
#define PHX_COMMIT_ABORTED_MEMORY 16

enum phx_commit_result {
	PHX_COMMIT_PENDING, /* accepted; ranks still missing */
	PHX_COMMIT_READY, /* every rank prepared: make it durable, then phx_commit_done */
	PHX_COMMIT_DUPLICATE, /* the same prepare again: nothing changed */
	PHX_COMMIT_ABORTED, /* this prepare aborted the generation: tell the agents */
	PHX_COMMIT_WAS_ABORTED, /* aborted before: tell the sender */
	PHX_COMMIT_STALE, /* at or below the newest committed generation: ignore */
};

struct phx_commit_gen {
	uint64_t gen, step;
	uint32_t prepared; /* ranks with a shard */
	int ready;
	struct phx_manifest m;
};

struct phx_commit_job {
	uint32_t job, world;
	char *layout;
	uint64_t committed, committed_step; /* newest committed generation, 0 = none */
	struct phx_commit_gen *open[PHX_COMMIT_MAX_OPEN];
	uint64_t aborted[PHX_COMMIT_ABORTED_MEMORY]; /* recent aborted generations */
	size_t naborted;
};

int phx_commit_job_init(struct phx_commit_job *j, uint32_t job, uint32_t world, const char *layout,
			char *err, size_t errlen);
void phx_commit_job_free(struct phx_commit_job *j);

/*
 * One node's prepare of generation gen. reason receives why, when the
 * answer is PHX_COMMIT_ABORTED or PHX_COMMIT_WAS_ABORTED. A rank outside
 * the job is refused with -1 and err (a broken agent, not a failed rank).
 * *abort_gen is set to a generation aborted to make room (0: none).
 */
int phx_commit_prepare(struct phx_commit_job *j, uint64_t gen, uint64_t step, const char *node,
		       const struct phx_manifest_shard *shards, size_t n,
		       enum phx_commit_result *result, uint64_t *abort_gen, char *reason,
		       size_t reasonlen);

/* Aborts gen (open, or not yet seen). PHX_COMMIT_ABORTED, or STALE when it committed. */
enum phx_commit_result phx_commit_abort(struct phx_commit_job *j, uint64_t gen);

/* The ready generation's manifest, to make durable before phx_commit_done. NULL if not ready. */
const struct phx_manifest *phx_commit_ready_manifest(const struct phx_commit_job *j, uint64_t gen);

/*
 * Publishes gen (it must be ready): it becomes the newest committed and
 * every older open generation is aborted; their numbers go to
 * superseded (up to PHX_COMMIT_MAX_OPEN), their count is returned.
 */
size_t phx_commit_done(struct phx_commit_job *j, uint64_t gen,
		       uint64_t superseded[PHX_COMMIT_MAX_OPEN]);

/* 1 when gen was aborted (and still remembered). */
int phx_commit_was_aborted(const struct phx_commit_job *j, uint64_t gen);
/* Restores the newest committed generation (journal replay). */
void phx_commit_set_committed(struct phx_commit_job *j, uint64_t gen, uint64_t step);

#endif
