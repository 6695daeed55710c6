/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phalanx-ckptd: one event loop (epoll) serves the agents' TCP
 * connections, the admin socket and the metrics endpoint; the state of
 * jobs and their committed generations lives in memory and in an
 * append-only journal that is replayed on start.
 */
#ifndef PHX_CKPTD_H
#define PHX_CKPTD_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "checkpoint/ckptd/ckpt_commit.h"
#include "checkpoint/ckptd/ckpt_interval.h"
#include "checkpoint/proto/ckpt_wire.h"
#include "checkpoint/ckptd/goodput.h"
#include "checkpoint/ckptd/recovery_policy.h"
#include "common/token.h"

#define CKPTD_JOB_BUCKETS 4096
#define CKPTD_MAX_PENDING_OUT (256u << 20) /* a peer this far behind is dropped */
#define CKPTD_HANDSHAKE_S 10.0 /* hello to registered, at most */

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

struct ckptd_journal {
	int fd;
	char path[4096];
	uint64_t bytes, records;
};

struct ckptd_metrics {
	uint64_t saves, saved_bytes, stall_us_sum;
	uint64_t persists, persist_bytes, persist_ms_sum;
	uint64_t commits, aborts, failures, node_bad;
	uint64_t auth_failures, protocol_errors, journal_compactions;
	double commit_s_sum;
	uint64_t commit_le[8]; /* cumulative histogram of commit latency */
};

extern const double ckptd_commit_buckets[8];

/* One node's fault history across jobs (recovery_policy.h). */
struct ckptd_node {
	char name[PHX_MANIFEST_NODE_MAX + 1];
	struct phx_recovery_node r;
	char reason[PHX_RECOVERY_REASON_MAX]; /* why it was drained */
};

struct ckptd_recovery_metrics {
	uint64_t heartbeats, lost, restarts, requeues, drains, resumes, stops, slurm_errors;
	double detect_s_sum, queue_s_sum;
	uint64_t queue_n;
};

struct ckptd_opts {
	const char *conf_path;
	const char *listen, *socket, *state_dir, *key_file, *metrics;
	const char *slurm_user;
	int keep; /* 0 = checkpoint.keep */
	int log_debug;
};

struct ckptd {
	struct ckptd_opts opts;
	struct phx_key key;
	int keep;
	uid_t slurm_uid;
	int epfd, tcp_fd, unix_fd;
	char listen[256], socket_path[128], state_dir[4096], metrics_addr[256];
	struct ckptd_journal journal;
	struct ckptd_job *jobs[CKPTD_JOB_BUCKETS];
	size_t njobs;
	unsigned agents, admins;
	struct ckptd_conn *dead; /* closed after the current batch of events */
	struct ckptd_conn *conns; /* every open connection */
	double accept_paused_until; /* out of descriptors: listeners rest until then */
	/* Failure statistics for the auto interval. */
	double node_seconds, last_tick;
	uint64_t failures;
	double node_mtbf_prior_s;
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
	double next_recovery;
	void *mhd;
	int mhd_fd;
	double started;
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
	char peer[64]; /* address or uid, for log lines */
	struct ckptd_job *job; /* after register; a driver's after auth, not attached */
	uid_t peer_uid; /* admin: SO_PEERCRED */
	int authed, out_armed, dead;
	double since; /* accepted at */
	double last_hb; /* monotonic time of the newest heartbeat; 0 = none */
	uint32_t run; /* the job's run it registered in */
	struct ckptd_conn *next_dead;
	struct ckptd_conn *prev, *next; /* every open connection */
};

double ckptd_now(void);

/* ckptd_conn.c */
int ckptd_listen_tcp(struct ckptd *d, const char *hostport, char *err, size_t errlen);
int ckptd_listen_unix(struct ckptd *d, const char *path, char *err, size_t errlen);
void ckptd_accept(struct ckptd *d, int lfd, enum ckptd_conn_kind kind);
void ckptd_conn_io(struct ckptd *d, struct ckptd_conn *c, uint32_t events);
/* Queues a message (takes obj) or a ready frame; arms EPOLLOUT as needed. */
void ckptd_send(struct ckptd *d, struct ckptd_conn *c, struct json_object *obj);
void ckptd_send_frame(struct ckptd *d, struct ckptd_conn *c, const char *frame, size_t len);
/* Sends an error message, then closes once it is written (or at once). */
void ckptd_refuse(struct ckptd *d, struct ckptd_conn *c, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void ckptd_conn_fail(struct ckptd *d, struct ckptd_conn *c, const char *why);
void ckptd_reap(struct ckptd *d);
/* Once a second: closes connections that did not finish the handshake in
 * time, and resumes accepting after a shortage of descriptors. */
void ckptd_conn_sweep(struct ckptd *d);
/* Closes every connection (shutdown). */
void ckptd_conn_close_all(struct ckptd *d);

/* ckptd_agent.c */
void ckptd_agent_msg(struct ckptd *d, struct ckptd_conn *c, struct phx_wire_msg *m);
void ckptd_broadcast(struct ckptd *d, struct ckptd_job *j, struct json_object *obj);
void ckptd_tick(struct ckptd *d);

/* ckptd_admin.c */
void ckptd_admin_msg(struct ckptd *d, struct ckptd_conn *c, struct phx_wire_msg *m);

/* ckptd_catalog.c: jobs and committed generations, through the journal. */
struct ckptd_job *ckptd_job_find(struct ckptd *d, uint32_t id);
struct ckptd_job *ckptd_job_get(struct ckptd *d, uint32_t id, uint32_t uid);
/* Forgets a job that never registered and holds nothing (a refused registration). */
void ckptd_job_drop_if_empty(struct ckptd *d, struct ckptd_job *j);
int ckptd_job_register(struct ckptd *d, struct ckptd_job *j, uint32_t nodes, uint32_t world,
		       const char *layout, const char *interval, char *err, size_t errlen);
/* Journals the ready generation, then publishes it; 0 or -1 (journal failed: not published). */
int ckptd_publish(struct ckptd *d, struct ckptd_job *j, uint64_t gen, char *err, size_t errlen);
const struct ckptd_entry *ckptd_entry_find(const struct ckptd_job *j, uint64_t gen);
int ckptd_remove(struct ckptd *d, struct ckptd_job *j, uint64_t gen, char *err, size_t errlen);
int ckptd_note_failure(struct ckptd *d, struct ckptd_job *j);
int ckptd_catalog_load(struct ckptd *d, char *err, size_t errlen);
/* Applies one journal record (a ckptd_replay_fn; arg is the daemon). */
int ckptd_catalog_replay(void *arg, const char *body, size_t len, char *err, size_t errlen);
void ckptd_catalog_free(struct ckptd *d);
uint64_t ckptd_interval_for(struct ckptd *d, struct ckptd_job *j, const char **mode,
			    uint64_t *steps);

/* ckptd_journal.c */
typedef int (*ckptd_replay_fn)(void *arg, const char *body, size_t len, char *err, size_t errlen);
/* Replays the records of a journal's bytes; returns the length of the good prefix. */
size_t ckptd_journal_replay(const unsigned char *data, size_t len, ckptd_replay_fn fn, void *arg,
			    uint64_t *records, const char *path);
int ckptd_journal_open(struct ckptd_journal *jr, const char *path, ckptd_replay_fn fn, void *arg,
		       char *err, size_t errlen);
int ckptd_journal_append(struct ckptd_journal *jr, const char *body, size_t len, char *err,
			 size_t errlen);
/* Writes a fresh journal from the records emit() appends, and swaps it in atomically. */
typedef int (*ckptd_emit_fn)(void *arg, struct ckptd_journal *out, char *err, size_t errlen);
int ckptd_journal_compact(struct ckptd_journal *jr, ckptd_emit_fn emit, void *arg, char *err,
			  size_t errlen);
/* An append without a sync, for compaction's emit(). */
int ckptd_journal_put(struct ckptd_journal *jr, const char *body, size_t len, char *err,
		      size_t errlen);
void ckptd_journal_close(struct ckptd_journal *jr);
uint32_t ckptd_crc32(const void *data, size_t len);

/* ckptd_recovery.c: heartbeats, faults, decisions, the goodput ledger. */
double ckptd_wall(void);
void ckptd_recovery_registered(struct ckptd *d, struct ckptd_conn *c);
void ckptd_recovery_heartbeat(struct ckptd *d, struct ckptd_conn *c, uint64_t step);
/* A recovery event (kind of protocol version 2, or save); 1 if it was one. */
int ckptd_recovery_event(struct ckptd *d, struct ckptd_conn *c, const struct phx_wire_msg *m);
/* A driver's report ("restart" or "check", naming a node): 0, or -1 when not one. */
int ckptd_recovery_driver_event(struct ckptd *d, struct ckptd_conn *c,
				const struct phx_wire_msg *m);
void ckptd_recovery_commit(struct ckptd *d, struct ckptd_job *j);
/* Four times a second: lost agents, Slurm polls, pending requeue fixes. */
void ckptd_recovery_tick(struct ckptd *d);
struct json_object *ckptd_goodput_json(struct ckptd *d, struct ckptd_job *j);
struct json_object *ckptd_untrusted_json(struct ckptd *d);
/* Journal records of recovery: {"op":"recovery", ...}. */
char *ckptd_recovery_record(const struct ckptd_job *j);
int ckptd_recovery_replay(struct ckptd *d, struct json_object *o, char *err, size_t errlen);
void ckptd_recovery_free(struct ckptd *d);

/* ckptd_slurm.c: libslurm calls recovery makes. */
struct ckptd_sjob {
	int state; /* JOB_* base state */
	int completing;
	uint32_t restarts;
	double start, eligible; /* realtime */
	char nodes[1024];
};
int ckptd_slurm_job(uint32_t id, struct ckptd_sjob *out, char *err, size_t errlen);
/* Calls fn for each node of hostlist that Slurm shows DOWN or FAIL. */
int ckptd_slurm_bad_nodes(const char *hostlist, void (*fn)(void *arg, const char *node), void *arg,
			  char *err, size_t errlen);
int ckptd_slurm_node_down(const char *node, const char *reason, char *err, size_t errlen);
int ckptd_slurm_node_resume(const char *node, char *err, size_t errlen);
/* The node's reason in Slurm ("" when none), to resume only what Phalanx drained. */
int ckptd_slurm_node_reason(const char *node, char *out, size_t len, char *err, size_t errlen);
int ckptd_slurm_requeue(uint32_t id, char *err, size_t errlen);
/* Pending job: exclude nodes (comma list), eligible now. */
int ckptd_slurm_fix(uint32_t id, const char *exclude, char *err, size_t errlen);
/* Sets the job's AdminComment to "phalanx: reason" (seen in scontrol show job). */
int ckptd_slurm_comment(uint32_t id, const char *reason, char *err, size_t errlen);
int ckptd_slurm_cancel(uint32_t id, char *err, size_t errlen);

/* ckptd_metrics.c */
int ckptd_metrics_start(struct ckptd *d, const char *hostport, char *err, size_t errlen);
void ckptd_metrics_run(struct ckptd *d);
void ckptd_metrics_stop(struct ckptd *d);
/* The Prometheus text, malloc'd. */
char *ckptd_metrics_text(struct ckptd *d);

#endif
