// SPDX-License-Identifier: Apache-2.0
/*
 * Checkpoint generations to phalanx-ckptd. The agents commit a generation
 * among themselves (their PMIx round, agent_ckpt.c): that commit is the
 * one restores trust. Once a generation is committed in its first durable
 * tier, each agent prepares its own node's shards (digests and that tier's
 * paths) to the daemon, whose two-phase commit then catalogs it when every
 * rank is prepared; its commit notice tells the agent the catalog has it.
 * The daemon's catalog follows the agents' commits and never leads them: a
 * daemon that aborts or misses a generation leaves it committed in the
 * agents' tiers and manifests. Prepares are sent once per generation (a
 * second tier's paths would contradict the first), queued and re-sent by
 * the client while the daemon is away.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "checkpoint/proto/ckpt_client.h"
#include "checkpoint/proto/ckpt_manifest.h"
#include "checkpoint/proto/digest.h"
#include "common/log.h"
#include "checkpoint/node/ckpt_int.h"
#include "launcher/agent/agent.h"
#include "launcher/agent/agent_ckptd.h"
#include "launcher/agent/agent_ckptd_int.h"

/* This node's shards of g in tier t into m; their count, or -1. */
static long fill_mine(struct phx_agent *a, const struct ck_gen *g, enum phx_ckpt_tier t,
		      struct phx_manifest *m, struct phx_manifest_shard *out, uint64_t *bytes)
{
	const struct phx_ckpt *c = a->ckpt;
	unsigned me = a->pmix.me.rank;
	char hex[PHX_DIGEST_HEX_LEN], name[32], path[4400], err[256];
	long n = 0;

	phx_ckpt_gen_name(g->step, name, sizeof(name));
	for (unsigned long r = 0; r < c->world; r++) {
		const struct phx_ckpt_shard *s = &g->all[r];
		const char *dir = t == PHX_TIER_LOCAL ? c->node_dir[me] : c->dir[t];

		if (g->agent_of[r] != me)
			continue;
		phx_digest_hex(c->algo, s->digest, hex);
		snprintf(path, sizeof(path), "%s/%s/rank-%lu.shard", dir, name, r);
		if (phx_manifest_shard_set(m, (uint32_t)r, a->node, s->bytes,
					   phx_digest_name(c->algo), hex, err, sizeof(err)) < 0 ||
		    phx_manifest_shard_add_location(&m->shards[r], phx_ckpt_tier_name(t), path, err,
						    sizeof(err)) < 0) {
			phx_warn("phalanx-ckptd: generation %ld, rank %lu: %s; not prepared",
				 g->step, r, err);
			return -1;
		}
		out[n++] = m->shards[r];
		*bytes += s->bytes;
	}
	return n;
}

/*
 * The save's cost to this node, once per generation and tier: the stall of
 * its slowest worker (BEGIN to COMMIT) when the memory tier commits, the
 * persist lag (staged to written) when a directory tier does. The daemon
 * counts them in its metrics and the job's goodput ledger.
 */
static void report_costs(struct phx_agent *a, const struct ck_gen *g, enum phx_ckpt_tier t)
{
	struct phx_agent_ckptd *d = a->ckptd;
	uint64_t gen = ck_gen_of(g->step);

	if (t == PHX_TIER_MEMORY && g->nstaged)
		phx_ckpt_client_event(d->client, "save", NULL, gen, g->stall_ns / 1000, g->bytes);
	else if (t != PHX_TIER_MEMORY && g->persisted_ns > g->staged_ns && gen > d->persisted_gen) {
		d->persisted_gen = gen;
		phx_ckpt_client_event(d->client, "persist", NULL, gen,
				      (g->persisted_ns - g->staged_ns) / 1000000, g->bytes);
	}
}

void phx_agent_ckptd_ckpt_commit(struct phx_agent *a, const struct ck_gen *g, int tier)
{
	struct phx_agent_ckptd *d = a->ckptd;
	const struct phx_ckpt *c = a->ckpt;
	struct phx_manifest_shard *mine = NULL;
	struct phx_manifest m;
	enum phx_ckpt_tier t = (enum phx_ckpt_tier)tier;
	uint64_t gen, bytes = 0;
	char err[256];
	long n;

	if (d && g)
		report_costs(a, g, t);
	if (!d || t == PHX_TIER_MEMORY || !g || !(g->written & (1u << t)) || g->have < c->world)
		return;
	gen = ck_gen_of(g->step);
	if (gen <= d->prepared_gen)
		return;
	if (phx_manifest_init(&m, c->job_id, gen, (uint64_t)g->step, c->layout, (uint32_t)c->world,
			      err, sizeof(err)) < 0) {
		phx_warn("phalanx-ckptd: generation %ld: %s; not prepared", g->step, err);
		return;
	}
	mine = calloc(c->world, sizeof(*mine));
	n = mine ? fill_mine(a, g, t, &m, mine, &bytes) : -1;
	if (n > 0 &&
	    phx_ckpt_client_prepare(d->client, gen, (uint64_t)g->step, mine, (size_t)n) == 0) {
		d->prepared_gen = gen;
		phx_ckpt_client_event(d->client, "save", NULL, gen, 0, bytes);
		phx_debug("phalanx-ckptd: generation %lu (step %ld), %ld shard(s) of %s prepared "
			  "in the %s tier",
			  (unsigned long)gen, g->step, n, a->node, phx_ckpt_tier_name(t));
	}
	free(mine);
	phx_manifest_free(&m);
}
