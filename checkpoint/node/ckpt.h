/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node's checkpoint engine, run by the agent. Workers save into memfd buffers the
 * agent owns (libphalanx, PHALANX_AGENT_SOCKET); once every local worker
 * committed a step, the node holds that generation in memory, and a
 * writer thread digests each shard and persists it to the due tiers
 * (node-local and shared directories). Agents agree in their rounds on
 * the newest generation every node holds in each tier; only then is it
 * published (manifest, then the `latest` pointer) and older ones
 * collected. The pure parts (tier choice, round state, collection,
 * restore order) are here, unit tested.
 */
#ifndef PHX_CHECKPOINT_NODE_CKPT_H
#define PHX_CHECKPOINT_NODE_CKPT_H

#include <stdbool.h>
#include <stddef.h>

/* ------------------------------------------------------------ pure parts */

/* Tiers, fastest first; restore tries them in this order. */
enum phx_ckpt_tier {
	PHX_TIER_MEMORY = 0,
	PHX_TIER_LOCAL,
	PHX_TIER_SHARED,
	PHX_TIER_COUNT,
};

/* Steps an agent holds per tier in a round, newest first. */
#define PHX_CKPT_STATE_MAX 4

struct phx_ckpt_state {
	long steps[PHX_TIER_COUNT][PHX_CKPT_STATE_MAX];
	unsigned n[PHX_TIER_COUNT];
	/* The newest step the node published per directory tier, -1 none (memory: -1). */
	long published[PHX_TIER_COUNT];
};

const char *phx_ckpt_tier_name(enum phx_ckpt_tier t);

/*
 * Tiers (bit per enum phx_ckpt_tier) a node's save number save_no (1, 2,
 * ...) goes to: memory always, a directory tier every `every[t]` saves
 * when configured (every[t] > 0), all of them for a requested save.
 */
unsigned phx_ckpt_tiers_due(unsigned long save_no, const int every[PHX_TIER_COUNT], bool requested);

/* Adds step to tier t of s, keeping the newest PHX_CKPT_STATE_MAX. */
void phx_ckpt_state_add(struct phx_ckpt_state *s, enum phx_ckpt_tier t, long step);
/*
 * "ck1 m=S,S l=S s=S p=P,P": the held steps, then the published ones of the
 * local and shared tiers (left out when both are -1); returns snprintf's
 * value.
 */
int phx_ckpt_state_format(const struct phx_ckpt_state *s, char *buf, size_t len);
/* 0, or -1 when s is not such a state. */
int phx_ckpt_state_parse(const char *s, struct phx_ckpt_state *out);
/* The newest step tier t of every state holds, -1 when none. */
long phx_ckpt_common_newest(const struct phx_ckpt_state *s, size_t n, enum phx_ckpt_tier t);
/*
 * The newest step every state's node has published in tier t (the oldest of
 * their newest), -1 when one has none. A node collects nothing at or above
 * it: a generation the slowest node has just published stays on every node
 * until all have published a newer one, so a restart finds it everywhere.
 */
long phx_ckpt_published_everywhere(const struct phx_ckpt_state *s, size_t n, enum phx_ckpt_tier t);

/*
 * Which generations of a tier to delete. Of steps[n] (published[i]: its
 * manifest is there), only published ones count toward keep: every
 * published one older than the `keep` newest published that are <=
 * committed goes, and so does an unpublished one (an aborted save) older
 * than the newest published. Newer ones than committed are in flight and
 * stay; so does an aborted save with no published generation after it, so
 * a run of aborted saves never deletes the only good fallback. Writes them
 * to drop; returns how many.
 */
size_t phx_ckpt_gc_pick(const long *steps, const bool *published, size_t n, long committed,
			unsigned keep, long *drop);

/* "gen-000000000042": a generation's directory name, and back (-1 when not one). */
void phx_ckpt_gen_name(long step, char *buf, size_t len);
long phx_ckpt_gen_parse(const char *name);

/* One rank's entry of a generation manifest. */
struct phx_ckpt_entry {
	long step;
	unsigned long rank;
	unsigned long long bytes;
	int algo; /* enum phx_digest_algo */
	unsigned char digest[32];
};

/*
 * Finds rank's shard in a generation manifest (checkpoint/proto/ckpt_manifest.h
 * JSON, from a file): 0, 1 when the manifest is good but has no such rank,
 * -1 when it is not a manifest or its digest cannot be checked (err says
 * why).
 */
/* One rank's shard as agents tell each other in their rounds. */
struct phx_ckpt_shard {
	unsigned long rank;
	unsigned long long bytes;
	unsigned char digest[32];
	bool sharded; /* this dp rank's part only (PHX_SAVE_SHARDED) */
};

/*
 * "d STEP RANK:BYTES:HEX:K,...": this node's shards of a generation (K: r
 * for replicated across dp, s for dp-sharded), so every
 * agent can write the complete manifest. Format returns snprintf's value;
 * parse 0 or -1 (at most max entries into out, *n of them).
 */
int phx_ckpt_digests_format(long step, const struct phx_ckpt_shard *s, size_t n, int algo,
			    char *buf, size_t len);
int phx_ckpt_digests_parse(const char *text, int algo, long *step, struct phx_ckpt_shard *out,
			   size_t max, size_t *n);

/*
 * One shard file: persist (digest on helper threads while the file is
 * written with tmp + fsync + rename + fsync of the directory) and load
 * (read while helper threads digest what arrived, then compare). 0 or
 * -errno / -1 with err.
 */
int phx_ckpt_persist_file(const char *path, const void *data, size_t len, int algo,
			  unsigned threads, unsigned char *digest);
int phx_ckpt_load_file(const char *path, const struct phx_ckpt_entry *e, unsigned threads,
		       void *dst, char *err, size_t errlen);

int phx_ckpt_manifest_find(const char *json, unsigned long rank, struct phx_ckpt_entry *out,
			   char *err, size_t errlen);
/* The same from a parsed manifest. */
struct phx_manifest;
int phx_ckpt_manifest_entry(const struct phx_manifest *m, unsigned long rank,
			    struct phx_ckpt_entry *out, char *err, size_t errlen);

/*
 * The saved rank whose shard rank (of world ranks in the layout now, or
 * world 0 in now when the job has no one layout) restores: the rank of
 * the same tp, cp, ep and pp coordinates and, when dp changed, of the
 * same dp index modulo the saved dp, when its state is replicated across
 * dp. A generation saved without coordinates goes by rank number onto
 * the same world only. 0 and *src, or -1 with why the restore is refused
 * in err: another tp, cp, ep or pp, dp-sharded state after dp changed,
 * coordinates that disagree with the saved layout.
 */
struct phx_layout;
int phx_ckpt_source_rank(const struct phx_manifest *m, const struct phx_layout *now,
			 unsigned long world, unsigned long rank, unsigned long *src, char *err,
			 size_t errlen);

#endif
