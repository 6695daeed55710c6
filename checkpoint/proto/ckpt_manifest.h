/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The per-generation checkpoint manifest: which ranks' shards make up one
 * committed generation of a job, their sizes and digests, and the storage
 * tiers that hold each one. Written by the node side (last, after every
 * shard is durable) and kept in phalanx-ckptd's catalog; the format is
 * described in phalanx-ckptd(8). A manifest is outside input when read
 * back: the parser checks every field and refuses anything else.
 *
 * Format (version 2), one JSON object:
 *   { "format": "phalanx-manifest", "version": 2,
 *     "job": 4242, "generation": 7, "step": 7000, "created": 1764460800,
 *     "layout": "tp=2,cp=1,ep=1,dp=4,pp=1,order=tp-cp-ep-dp-pp", "world": 8,
 *     "shards": [ { "rank": 0, "node": "n01", "bytes": 1048576,
 *                   "digest": { "alg": "sha256", "hex": "9f86...0f00" },
 *                   "locations": [ { "tier": "local", "path": "/scratch/..." } ],
 *                   "coords": [0, 0, 0, 0, 0], "state": "replicated" },
 *                 ... one per rank, in rank order ... ] }
 * "coords" (tp, cp, ep, dp, pp) and "state" (the shard's kind: "replicated"
 * across dp, or "sharded" across dp) come together or not at all; a shard
 * without them (version 1, or a layout the writer could not resolve) is
 * restored by rank number only, onto the same world.
 */
#ifndef PHX_CKPT_MANIFEST_H
#define PHX_CKPT_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#define PHX_MANIFEST_FORMAT "phalanx-manifest"
#define PHX_MANIFEST_VERSION 2
#define PHX_MANIFEST_DIMS 5 /* tp, cp, ep, dp, pp: enum phx_dim's order */
#define PHX_MANIFEST_MAX_BYTES (256u << 20) /* refused beyond; ~1 KiB a rank */
#define PHX_MANIFEST_MAX_WORLD (1u << 20)
#define PHX_MANIFEST_MAX_LOCATIONS 4
#define PHX_MANIFEST_NAME_MAX 31 /* tier names, digest algorithm */
#define PHX_MANIFEST_NODE_MAX 255
#define PHX_MANIFEST_PATH_MAX 4095
#define PHX_MANIFEST_LAYOUT_MAX 255
#define PHX_DIGEST_HEX_MAX 128 /* hex characters: up to a 512-bit digest */

struct phx_manifest_location {
	char tier[PHX_MANIFEST_NAME_MAX + 1]; /* "memory", "partner", "local", "shared", ... */
	char *path; /* a path or URI in that tier */
};

struct phx_manifest_digest {
	char alg[PHX_MANIFEST_NAME_MAX + 1]; /* "sha256" or "xxh3-128", as digest.h names them */
	char hex[PHX_DIGEST_HEX_MAX + 1]; /* lower-case hex */
};

/* What a shard holds, as its rank declared at save. */
enum phx_manifest_state {
	PHX_STATE_NONE = 0, /* not recorded (version 1) */
	PHX_STATE_REPLICATED, /* the same for every dp index of its (tp, cp, ep, pp) */
	PHX_STATE_SHARDED, /* this dp index's part only */
};

struct phx_manifest_shard {
	uint32_t rank;
	int filled; /* set by phx_manifest_shard_set */
	char *node;
	uint64_t bytes;
	struct phx_manifest_digest digest;
	size_t nlocations;
	struct phx_manifest_location locations[PHX_MANIFEST_MAX_LOCATIONS];
	enum phx_manifest_state state; /* PHX_STATE_NONE: no coords either */
	uint32_t coord[PHX_MANIFEST_DIMS];
};

struct phx_manifest {
	int version;
	uint32_t job;
	uint64_t generation; /* 1, 2, ... per job */
	uint64_t step; /* training step the generation holds */
	uint64_t created; /* seconds since the epoch */
	char *layout; /* the job's layout spec, "" when none */
	uint32_t world; /* ranks; shards[r] is rank r */
	struct phx_manifest_shard *shards;
};

/* An empty manifest for world ranks (shards not yet filled); 0 or -1 with err. */
int phx_manifest_init(struct phx_manifest *m, uint32_t job, uint64_t generation, uint64_t step,
		      const char *layout, uint32_t world, char *err, size_t errlen);
/* Fills rank's shard; checks names and digest. 0 or -1 with err. */
int phx_manifest_shard_set(struct phx_manifest *m, uint32_t rank, const char *node, uint64_t bytes,
			   const char *alg, const char *hex, char *err, size_t errlen);
/* Adds a tier location to a filled shard. 0 or -1 with err. */
int phx_manifest_shard_add_location(struct phx_manifest_shard *s, const char *tier,
				    const char *path, char *err, size_t errlen);
/* Records a filled shard's coordinates and kind. 0 or -1 with err. */
int phx_manifest_shard_place(struct phx_manifest_shard *s, const uint32_t coord[PHX_MANIFEST_DIMS],
			     enum phx_manifest_state state, char *err, size_t errlen);
/* "replicated", "sharded", "" */
const char *phx_manifest_state_name(enum phx_manifest_state state);
/* Checks that every rank is filled; 0 or -1 naming the first missing rank. */
int phx_manifest_check_complete(const struct phx_manifest *m, char *err, size_t errlen);

/* Checks a digest's algorithm name and hex text (length fixed for known algorithms). */
int phx_manifest_digest_check(const char *alg, const char *hex, char *err, size_t errlen);

/* Canonical JSON text (malloc'd, NUL-terminated) of a complete manifest; NULL when incomplete. */
char *phx_manifest_to_json(const struct phx_manifest *m, char *err, size_t errlen);
/*
 * Parses text strictly: the format name and version, every field present,
 * typed and in range, no unknown keys, exactly one shard per rank in rank
 * order. 0, or -1 with err naming the field; m is untouched on failure.
 */
int phx_manifest_parse(const char *text, size_t len, struct phx_manifest *m, char *err,
		       size_t errlen);
/* Builds m from an already parsed JSON object (same checks as phx_manifest_parse). */
struct json_object;
int phx_manifest_from_json(struct json_object *obj, struct phx_manifest *m, char *err,
			   size_t errlen);
/* Writes the manifest atomically (tmp + fsync + rename + fsync dir), mode 0644. */
int phx_manifest_write_file(const struct phx_manifest *m, const char *path, char *err,
			    size_t errlen);
int phx_manifest_read_file(const char *path, struct phx_manifest *m, char *err, size_t errlen);
void phx_manifest_free(struct phx_manifest *m);

/* Total bytes over all shards. */
uint64_t phx_manifest_bytes(const struct phx_manifest *m);

#endif
