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

#include "common/ckpt_commit.h"
#include "common/ckpt_interval.h"
#include "common/ckpt_wire.h"
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

struct ckptd_job {
	uint32_t id, uid, nodes;
	int registered; /* shape known: commit state is set up */
	char interval[64]; /* the job's request; "" = the daemon's default */
	struct phx_commit_job commit;
	struct ckptd_entry *gens; /* ascending generation */
	size_t ngens, capgens;
	struct ckptd_conn **agents;
	size_t nagents, capagents;
	double stall_avg_s; /* moving average of save stalls */
	uint64_t saves, failures;
	struct {
		uint64_t gen;
		double t0;
	} first[PHX_COMMIT_MAX_OPEN]; /* when each open generation's first prepare came */
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
	struct ckptd_job *job; /* after register */
	uid_t peer_uid; /* admin: SO_PEERCRED */
	int authed, out_armed, dead;
	double since; /* accepted at */
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

/* ckptd_metrics.c */
int ckptd_metrics_start(struct ckptd *d, const char *hostport, char *err, size_t errlen);
void ckptd_metrics_run(struct ckptd *d);
void ckptd_metrics_stop(struct ckptd *d);
/* The Prometheus text, malloc'd. */
char *ckptd_metrics_text(struct ckptd *d);

#endif
