/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phalanx-ckptd: one event loop (epoll) serves the agents' TCP
 * connections, the admin socket and the metrics endpoint; the state of
 * jobs and their committed generations lives in memory and in an
 * append-only journal that is replayed on start.
 *
 * This header holds the daemon's data; each module's functions are in
 * its own header. A module calls only modules listed before it: clock,
 * journal, slurm, authz (what a job's token may speak for), munge (admin
 * credentials on the TCP port), job (the job table), conn (sockets and
 * sends), recovery, catalog (generations and their journal records),
 * agent and admin (message handlers, registered with conn), metrics,
 * ckptd.c's main.
 */
#ifndef PHX_CKPTD_H
#define PHX_CKPTD_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "checkpoint/ckptd/ckptd_notify.h"
#include "checkpoint/ckptd/ckpt_commit.h"
#include "checkpoint/ckptd/ckpt_interval.h"
#include "checkpoint/ckptd/ckptd_journal.h"
#include "checkpoint/proto/ckpt_wire.h"
#include "checkpoint/proto/role_ledger.h"
#include "checkpoint/ckptd/goodput.h"
#include "checkpoint/ckptd/recovery_policy.h"
#include "common/token.h"

#define CKPTD_JOB_BUCKETS 4096
/* A peer this far behind is dropped: two of the largest frames (manifests) and change. */
#define CKPTD_MAX_PENDING_OUT (80u << 20)
#define CKPTD_HANDSHAKE_S 10.0 /* hello to registered, at most */
/*
 * Before a peer proves a job's token it gets little: a hello and an auth
 * fit in a few hundred bytes, so a frame over 4 KiB ends the connection
 * before it is read, it has 5 seconds to authenticate, and no address may
 * hold more than 64 such connections (1024 in all). The admin socket's
 * requests are small too; only authenticated agents send manifests.
 */
#define CKPTD_PREAUTH_FRAME (4u << 10)
#define CKPTD_ADMIN_FRAME (64u << 10)
#define CKPTD_AUTH_S 5.0
#define CKPTD_PREAUTH_PER_ADDR 64
#define CKPTD_PREAUTH_TOTAL 1024
/* A batch of events handled slower than this counts as the daemon's own lateness. */
#define CKPTD_LATE_S 0.1

struct json_object;

/* A committed generation in the catalog. */
struct ckptd_entry {
	uint64_t gen, step, created, bytes;
	uint32_t world;
	char *text; /* the manifest, canonical JSON */
	size_t len;
};

struct ckptd_conn;

/* A node of a job's current run, as its heartbeats show it. */
struct ckptd_member {
	char node[PHX_MANIFEST_NODE_MAX + 1];
	double last_hb; /* monotonic; 0 = no heartbeat yet */
	int lost; /* declared lost (or Slurm showed it down) */
};

/*
 * A role's ledger, as the job's driver reports it (role events): the newest
 * record of the driver's run, and the totals of the earlier runs.
 */
struct ckptd_role {
	struct phx_role_ledger cur;
	uint64_t base_ms[PHX_RL_PARTS]; /* each at most PHX_RL_VALUE_MAX */
	uint32_t base_failures;
};

/* What recovery knows of a job; journaled, so it outlives requeues and restarts. */
struct ckptd_recovery {
	struct phx_recovery_job rec;
	struct phx_goodput gp;
	int on; /* ledger started */
	int ended;
	struct ckptd_member *members;
	size_t nmembers, capmembers;
	uint64_t phase_step; /* step when the current run began; UINT64_MAX = not heard */
	uint32_t run; /* this run of the job; agents of an older run are not heard */
	uint64_t stall_gen; /* newest save generation counted, and its stall */
	double stall_gen_s;
	int fix_pending; /* requeued by us: exclusion and begin time still to set */
	uint32_t slurm_restarts; /* Slurm's restart count last seen */
	double next_poll; /* monotonic */
	uint32_t restarts, lost; /* in-job restarts recorded, agents declared lost */
	double detect_last_s, queue_last_s, requeued_at;
	char exclude[1024]; /* nodes the job must not run on again */
	char reason[PHX_RECOVERY_REASON_MAX]; /* the newest decision */
	/* A driver's roles: NULL until its first record, then room for PHX_RL_ROLES_MAX. */
	struct ckptd_role *roles;
	size_t nroles;
	double roles_journaled; /* monotonic: the last record that held the roles */
	double roles_warned; /* monotonic: ignored role records are logged once a minute */
};

struct ckptd_job {
	uint32_t id, uid, nodes;
	int registered; /* shape known: commit state is set up */
	char interval[64]; /* the job's request; "" = the daemon's default */
	struct phx_commit_job commit;
	struct ckptd_entry *gens; /* ascending generation */
	size_t ngens, capgens;
	struct ckptd_conn **agents;
	size_t nagents, capagents;
	unsigned drivers; /* connected drivers: they relaunch the job, not a requeue */
	double stall_avg_s; /* moving average of save stalls */
	uint64_t saves, failures;
	struct {
		uint64_t gen;
		double t0;
	} first[PHX_COMMIT_MAX_OPEN]; /* when each open generation's first prepare came */
	struct ckptd_recovery r;
	struct ckptd_job *next;
};

struct ckptd_metrics {
	uint64_t saves, saved_bytes, stall_us_sum;
	uint64_t persists, persist_bytes, persist_ms_sum;
	uint64_t commits, aborts, failures, node_bad;
	uint64_t auth_failures, protocol_errors, journal_compactions;
	uint64_t preauth_refused; /* connections refused by the pre-auth caps */
	uint64_t munge_refused; /* TCP admins whose MUNGE credential failed */
	double late_s_sum; /* the loop's own lateness, credited to heartbeats */
	double commit_s_sum;
	uint64_t commit_le[8]; /* cumulative histogram of commit latency */
};

/* One node's fault history across jobs (recovery_policy.h). */
struct ckptd_node {
	char name[PHX_MANIFEST_NODE_MAX + 1];
	struct phx_recovery_node r;
	char reason[PHX_RECOVERY_REASON_MAX]; /* why it was drained */
	/* Phalanx's own drain, which only a passing check from the same job undoes. */
	uint32_t drained_job;
	char drained_as[PHX_RECOVERY_REASON_MAX]; /* the reason given to Slurm */
};

/* Slurm's view of a job, as ckptd_authz.h uses it. */
struct ckptd_alloc {
	uint32_t job, uid;
	int running;
	uint32_t num_nodes;
	char *nodes; /* the job's node list, a Slurm host-list expression */
	double fetched; /* monotonic; 0 = empty slot */
};
#define CKPTD_ALLOCS 256 /* jobs whose allocation is cached */
#define CKPTD_ALLOC_TTL_S 30.0
#define CKPTD_ALLOC_RECHECK_S 1.0
/* Ranks a job may register per node of its allocation: its commit state grows with them. */
#define CKPTD_MAX_RANKS_PER_NODE 1024
struct ckptd_authz {
	struct ckptd_alloc cache[CKPTD_ALLOCS];
	uint64_t queries, refused;
};
struct ckptd_recovery_metrics {
	uint64_t heartbeats, lost, restarts, requeues, drains, resumes, stops, slurm_errors;
	double detect_s_sum, queue_s_sum;
	uint64_t queue_n;
};

struct ckptd;
struct ckptd_munge;

/*
 * A connection's messages go to the handler of the role its hello named
 * (an admin's, on the admin socket, to the admin handler from the start);
 * the handlers register at start-up (ckptd_conn_handle).
 */
typedef void (*ckptd_msg_fn)(struct ckptd *d, struct ckptd_conn *c, struct phx_wire_msg *m);
#define CKPTD_ROLES (PHX_ROLE_DRIVER + 1) /* indexed by enum phx_wire_role */

struct ckptd_opts {
	const char *conf_path;
	const char *listen, *socket, *state_dir, *key_file, *metrics;
	const char *slurm_user;
	int keep; /* 0 = checkpoint.keep */
	int log_debug;
};

struct ckptd {
	struct ckptd_opts opts;
	struct ckptd_notify notify;
	struct phx_key key;
	int keep;
	uid_t slurm_uid;
	int epfd, tcp_fd, unix_fd;
	char listen[256], socket_path[128], state_dir[4096], metrics_addr[256];
	struct ckptd_journal journal;
	struct ckptd_job *jobs[CKPTD_JOB_BUCKETS];
	size_t njobs;
	unsigned agents, admins;
	unsigned preauth; /* TCP connections not yet authenticated */
	struct ckptd_conn *dead; /* closed after the current batch of events */
	struct ckptd_conn *conns; /* every open connection */
	ckptd_msg_fn handlers[CKPTD_ROLES];
	double accept_paused_until; /* out of descriptors: listeners rest until then */
	/* Failure statistics for the auto interval. */
	double node_seconds, last_tick;
	uint64_t journal_seen; /* journal bytes the tick last looked at for compaction */
	uint64_t failures;
	double node_mtbf_prior_s;
	uint32_t max_ranks_per_user; /* ckptd.max_ranks_per_user */
	enum phx_ckpt_interval_mode interval_mode;
	uint64_t interval_steps, interval_seconds;
	struct ckptd_metrics m;
	/* Recovery (recovery.* in phalanx.yaml). */
	struct phx_recovery_conf rc;
	int rc_act; /* drain, requeue and stop through Slurm; 0 = detect and account only */
	int rc_too_few; /* enum phx_too_few: a requeue short of nodes waits or stops */
	unsigned heartbeat_ms, lost_after_ms, slurm_poll_s;
	struct ckptd_node *nodes;
	size_t nnodes, capnodes;
	struct ckptd_recovery_metrics rm;
	struct ckptd_authz authz;
	double next_recovery;
	void *mhd;
	int mhd_fd;
	struct ckptd_munge *munge; /* admin's */
	int munge_fd; /* readable when MUNGE verdicts wait (ckptd_munge.h) */
	uint64_t conn_serial; /* the newest connection's */
	double started, started_wall; /* monotonic; and seconds since the epoch */
	volatile sig_atomic_t stop;
};

enum ckptd_conn_kind { CKPTD_AGENT, CKPTD_ADMIN };

struct ckptd_conn {
	int fd;
	enum ckptd_conn_kind kind;
	struct phx_wire_reader rd;
	struct phx_wire_writer wr;
	struct phx_wire_order order;
	char nonce[PHX_WIRE_NONCE_HEX + 1];
	uint32_t job_id, uid;
	char node[PHX_MANIFEST_NODE_MAX + 1];
	char peer[80]; /* address or uid, for log lines */
	struct ckptd_job *job; /* after register; a driver's after auth, not attached */
	uint64_t serial; /* unique in the daemon's life: outlives the pointer */
	uid_t peer_uid; /* admin: SO_PEERCRED, or its MUNGE credential's on TCP */
	int authed, out_armed, dead;
	double since; /* accepted at */
	double last_hb; /* monotonic time of the newest heartbeat; 0 = none */
	uint32_t run; /* the job's run it registered in */
	struct ckptd_conn *next_dead;
	struct ckptd_conn *prev, *next; /* every open connection */
};

#endif
