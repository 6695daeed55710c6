/* SPDX-License-Identifier: Apache-2.0 */
/* Checkpoint staging: what the agent's main loop and its writer thread share. */
#ifndef PHX_LAUNCH_AGENT_CKPT_INT_H
#define PHX_LAUNCH_AGENT_CKPT_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "checkpoint/node/partner_server.h"
#include "checkpoint/proto/digest.h"
#include "checkpoint/node/ckpt.h"
#include "placement/layout.h"

/* Buffers per worker: the committed generation, a newer staged one, the one being filled. */
#define CK_BUFS 3
/* Generations a node tracks at once (staged, persisting, awaiting agreement). */
#define CK_GENS 8

enum ck_buf_state { B_FREE = 0, B_FILLING, B_STAGED };

struct ck_buf {
	int fd; /* memfd, -1 when none */
	void *map;
	size_t cap;
	uint64_t id;
	long step;
	size_t len;
	enum ck_buf_state state;
	unsigned refs; /* writer jobs reading it */
	bool digested;
	bool sharded; /* BEGIN said PHX_CKPT_SHARDED */
	uint8_t digest[PHX_DIGEST_MAX];
	uint64_t begin_ns; /* the worker's BEGIN (CLOCK_MONOTONIC): its stall ends at COMMIT */
};

/*
 * A saved step's generation number, as manifests, partner copies and the
 * daemon know it: step + 1, so that step 0 is generation 1 and 0 means none.
 */
static inline uint64_t ck_gen_of(long step)
{
	return (uint64_t)step + 1;
}

/* ck_slot.loaded when the shard came from a partner's copy, not a tier. */
#define CK_FROM_PARTNER PHX_TIER_COUNT

struct ck_slot {
	int conn; /* the worker's connection, -1 */
	unsigned long rank;
	struct ck_buf buf[CK_BUFS];
	int filling; /* index, -1 */
	int committed; /* index of the buffer of the committed generation, -1 */
	bool pinned; /* committed buffer handed out for a restore, until the next commit */
	int loaded; /* tier (or CK_FROM_PARTNER) the committed buffer came from at start, -1 */
	long busy_step; /* the step whose BEGIN last found no free buffer, -1 */
};

struct ck_gen {
	bool used;
	long step;
	unsigned nstaged; /* local workers that committed it */
	int *buf; /* [nproc]: index of each worker's buffer */
	unsigned due; /* tiers, bit per enum phx_ckpt_tier */
	unsigned jobs_left;
	unsigned written; /* tiers every local shard reached */
	bool failed[PHX_TIER_COUNT];
	unsigned ok[PHX_TIER_COUNT]; /* shards durable per tier */
	uint8_t (*digest)[PHX_DIGEST_MAX]; /* [nproc] */
	size_t *len; /* [nproc] */
	bool *sharded; /* [nproc]: the save's kind */
	/* Every rank's shard, as the agents announced them: [world]. */
	struct phx_ckpt_shard *all;
	unsigned *agent_of; /* [world], the agent that announced it */
	unsigned long have; /* ranks announced */
	/* For phalanx-ckptd: the slowest local worker's save, this node's bytes, persist lag. */
	uint64_t stall_ns, bytes, staged_ns, persisted_ns;
};

enum ck_job_kind { J_PERSIST, J_PUBLISH };
#define CK_LANES 2 /* a writer thread for each kind of job */

struct ck_job {
	struct ck_job *next;
	enum ck_job_kind kind;
	/* J_PERSIST: one shard to the tiers in `tiers` (digest always) */
	unsigned slot;
	unsigned long rank;
	long step;
	const void *data;
	size_t len;
	unsigned tiers;
	unsigned written; /* result: tiers it reached */
	int rc;
	uint8_t digest[PHX_DIGEST_MAX];
	/* J_PUBLISH: the manifest of a tier's generation, then latest, then collection */
	enum phx_ckpt_tier tier;
	char *manifest; /* NULL: another agent writes it; only collect */
	long gc_bound; /* collect nothing newer: the newest generation every agent published */
};

/* Partner copies (agent_ckpt_partner*.c); NULL in struct phx_ckpt when off. */
struct ck_partner {
	struct phx_partner_server srv; /* receives and keeps the peer's copies */
	bool serving;
	uint8_t secret[PHX_PARTNER_SECRET_BYTES];
	char dir[4096];
	/* The node that keeps this node's shards; fd and failing: writer thread only. */
	char peer_host[256], peer_addr[64];
	unsigned peer_port; /* 0: none */
	int fd;
	bool failing; /* the last send failed: log the next success */
};

struct phx_ckpt {
	/* configuration */
	unsigned nproc;
	unsigned long world;
	char node[256];
	char job[256];
	/* The job's layout resolved over world ("" and lay.world 0 when it cannot be). */
	char layout[256];
	struct phx_layout lay;
	char dir[PHX_TIER_COUNT][4096]; /* "" = tier off (memory: unused) */
	bool writer[PHX_TIER_COUNT]; /* this agent writes the tier's manifests */
	char **node_dir; /* [agents]: each node's local directory */
	unsigned nagents;
	uint32_t job_id;
	int every[PHX_TIER_COUNT];
	unsigned keep;
	enum phx_digest_algo algo;
	unsigned threads;
	unsigned long interval;
	/* the socket */
	char sock_path[4200];
	char sock_dir[4096];
	int sock_lock; /* see common/rundir.h */
	int listen_fd, ep_fd, ev_fd;
	int pending[64]; /* connections before their HELLO */
	struct ck_slot *slot;
	uint64_t next_id;
	/* generations */
	struct ck_gen gen[CK_GENS];
	unsigned long save_no;
	void *hb; /* the heartbeat page: its save request */
	uint64_t seen_request;
	long committed[PHX_TIER_COUNT]; /* agreed by every agent, -1 */
	long published[PHX_TIER_COUNT]; /* the newest this node published, -1 */
	long published_all[PHX_TIER_COUNT]; /* ... that every agent has: collection's bound */
	unsigned publishing; /* publish jobs not yet done */
	long restored; /* the generation restored at start, -1 */
	bool refused; /* ... none: the newest cannot go onto this layout */
	struct phx_ckpt_state held;
	/*
	 * The writer threads, one per job kind: a committed generation's
	 * manifest is written at once, not after the next generation's shards
	 * (and their partner copies), so an agent killed meanwhile leaves it
	 * restorable.
	 */
	struct ck_lane {
		struct phx_ckpt *ckpt;
		struct ck_job *todo, **tail;
		pthread_t thread;
		bool started;
	} lane[CK_LANES];
	bool io_stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct ck_job *done;
	struct ck_partner *partner;
};

/* ckpt_buf.c: a memfd buffer of at least len bytes, mapped. 0 or -1. */
int ck_buf_alloc(struct phx_ckpt *c, struct ck_buf *b, size_t len);
void ck_buf_free(struct ck_buf *b);

/* ckpt_dir.c: the directory of a generation in a tier. */
void ck_gen_dir(const struct phx_ckpt *c, enum phx_ckpt_tier t, long step, char *buf, size_t len);
/*
 * Generation step of tier t is published (its manifest is there) and,
 * file not NULL, holds that file.
 */
bool ck_published(const struct phx_ckpt *c, enum phx_ckpt_tier t, long step, const char *file);

/* ckpt_io.c */
int ck_io_start(struct phx_ckpt *c);
void ck_io_stop(struct phx_ckpt *c);
void ck_io_submit(struct phx_ckpt *c, struct ck_job *j);
struct ck_job *ck_io_take_done(struct phx_ckpt *c);
/* The JSON manifest of generation g in tier t (malloc'd), or NULL (logged). */
char *ck_manifest_build(const struct phx_ckpt *c, const struct ck_gen *g, enum phx_ckpt_tier t,
			char *const *hosts);

/* partner_copy.c */
void ck_partner_fini(struct phx_ckpt *c);
/* Writer thread: the shard of a persist job, digested, to this node's partner. */
void ck_partner_send(struct phx_ckpt *c, const struct ck_job *j);
/* Adds to steps[n..cap) the steps <= max of copies this node received for its ranks. */
size_t ck_partner_steps(const struct phx_ckpt *c, long max, long *steps, size_t n, size_t cap);
/* rank's shard of step from a received copy into b: 0, or -1 when none. */
int ck_partner_load(struct phx_ckpt *c, unsigned long rank, long step, struct ck_buf *b);

/*
 * ckpt_restore.c: the newest generation <= max whose local shards verify;
 * -1 when none, CK_REFUSED when the newest cannot go onto this job's layout.
 */
#define CK_REFUSED (-2L)
long ck_restore_find(struct phx_ckpt *c, long max);

#endif
