/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Partner copies of checkpoint shards: each node agent sends the shards it
 * committed to memory to one partner node in another failure domain, so a
 * lost node's shards can be rebuilt from its partner's memory (or disk).
 *
 * Partner choice (phx_partner_assign) is pure and depends only on the
 * step's node list and the fabric, so every agent computes the same pairs
 * without a message. Nodes are grouped by leaf switch, the groups ordered
 * largest first (then by leaf name), nodes by name inside a group; node i
 * of that order sends to node (i + shift) mod n. shift is the size of the
 * largest group when it is at most half the nodes: every node then has a
 * partner on another leaf. Otherwise shift is n minus that size, which
 * sends every node outside the largest leaf across, and as many of the
 * largest leaf's nodes as there are nodes elsewhere (no assignment can do
 * better). One leaf, or no fabric, is a plain ring (shift 1). The mapping
 * is a permutation: every node holds exactly one other node's shards, so
 * the memory a partner copy needs is even across the nodes.
 *
 * The shard travels on TCP behind a fixed-size header (phx_partner_hdr):
 * job, rank, step, generation, size and digest of the shard, authenticated
 * by HMAC-SHA256 under the job's secret, so another job (or anyone who can
 * reach the port) cannot plant a shard. The receiver checks the shard's
 * digest against the authenticated one before it counts the copy as held.
 *
 * Surviving a relaunch: when a node dies, Slurm ends the whole step, and
 * the driver relaunches on a spare in a new step; the old step's agents,
 * and any memory they held, are gone by then (the step's cgroup is
 * killed; an agent cannot outlive its step to serve copies). A partner
 * copy therefore lives in two places on the partner node: in its agent's
 * memory (memfd, the newest two generations per rank, for the agreement
 * round's "partner" tier) and on its local disk, written by the writer
 * thread like any tier, under the partner's own local directory. The next
 * step's agent on that node finds the copies there, announces them (rank,
 * generation, digest) and its endpoint in the wire-up, and the agent now
 * running the lost node's ranks fetches them over the same authenticated
 * transfer before its workers start. Restore order for a rank: this
 * agent's memory (an in-job restart), the partner's copy, the local
 * directory, the shared one; each miss is logged with its reason.
 */
#ifndef PHX_CKPT_PARTNER_H
#define PHX_CKPT_PARTNER_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint/proto/digest.h"

struct phx_fabric;

/*
 * partner[i] receives the index in nodes[] of the node that keeps node i's
 * shards; -1 for every node when n < 2. Node names must be distinct.
 * Returns the number of pairs whose two nodes share a leaf switch (0 when
 * the fabric says every copy leaves its leaf), or -1 (out of memory, or a
 * name repeated).
 */
long phx_partner_assign(const char *const *nodes, size_t n, const struct phx_fabric *fabric,
			long *partner);

/*
 * Who keeps lost's shards: the index in nodes[] (the step's node list the
 * copies were made under) of lost's partner, or -1 when lost is not in the
 * list, has no partner, or the list is refused (see phx_partner_assign).
 */
long phx_partner_holder(const char *const *nodes, size_t n, const struct phx_fabric *fabric,
			const char *lost);

#define PHX_PARTNER_MAGIC 0x50584850u /* "PHXP" */
#define PHX_PARTNER_VERSION 1u
#define PHX_PARTNER_SECRET_BYTES 32
#define PHX_PARTNER_MAC_BYTES 32
#define PHX_PARTNER_HDR_BYTES 128
/* The server's one byte after a connection's first signed header: send the shard. */
#define PHX_PARTNER_WELCOME 0x06

/* One shard's header, as decoded and checked. */
struct phx_partner_hdr {
	uint32_t job_id;
	uint32_t rank;
	uint64_t step;
	uint64_t gen;
	uint64_t bytes; /* the shard that follows the header */
	enum phx_digest_algo algo;
	uint8_t digest[PHX_DIGEST_MAX];
};

/* Limits a receiver applies to a header before it reads the shard. */
struct phx_partner_limits {
	uint32_t job_id; /* the job this agent serves */
	uint32_t nranks; /* ranks are below this */
	uint64_t max_bytes; /* the largest shard it will hold */
	/* A header's bytes after its first (a server: a connection's first header after the
	 * connection), at most this long; 0: no limit. */
	int header_ms;
};

/*
 * Writes the header, MAC included, to out. 0, or -1 when the header is out
 * of range (bytes above PHX_CKPT_MAX_BYTES, step above INT64_MAX, unknown
 * digest) or the hash library failed.
 */
int phx_partner_hdr_encode(const struct phx_partner_hdr *h,
			   const uint8_t secret[PHX_PARTNER_SECRET_BYTES],
			   uint8_t out[PHX_PARTNER_HDR_BYTES]);

/*
 * Checks and reads len bytes received as a header: size, magic, version,
 * MAC (in constant time, first: nothing else is trusted before it), then
 * job, rank, size and digest against the limits. 0, or -1 with the reason
 * in err.
 */
int phx_partner_hdr_decode(const uint8_t *buf, size_t len,
			   const uint8_t secret[PHX_PARTNER_SECRET_BYTES],
			   const struct phx_partner_limits *lim, struct phx_partner_hdr *h,
			   char *err, size_t errlen);

#endif
