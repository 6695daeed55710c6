/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node agent's connection to phalanx-ckptd, driven from the agent's
 * own poll loop: nothing here blocks, and training never waits for the
 * daemon. The client connects, answers the HMAC challenge with the job
 * token (the token itself never crosses the wire), registers the job and
 * then sends what it is given. While the daemon is away it reconnects with
 * backoff, keeps reports in a bounded queue and sends them on return;
 * prepares and aborts of generations not yet settled are sent again after
 * every reconnect (the daemon treats repeats as one).
 *
 *   struct pollfd p = { phx_ckpt_client_fd(c), phx_ckpt_client_events(c) };
 *   poll(&p, p.fd < 0 ? 0 : 1, phx_ckpt_client_timeout_ms(c));
 *   phx_ckpt_client_handle(c, p.revents);
 */
#ifndef PHX_CKPT_CLIENT_H
#define PHX_CKPT_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint/proto/ckpt_manifest.h"

struct phx_ckpt_client;
struct phx_conf;

/* Where launchers find phalanx-ckptd: ckptd.address, else ckptd.listen
 * unless it is the wildcard; "" when none is configured. */
const char *phx_ckptd_address(const struct phx_conf *conf);

struct phx_ckpt_client_conf {
	const char *address; /* HOST:PORT of phalanx-ckptd */
	uint32_t job, uid;
	const char *token; /* PHALANX_JOB_TOKEN: 64 hex characters */
	const char *node; /* this node's name */
	uint32_t nodes, ranks; /* of the whole job */
	const char *layout; /* "" when none */
	const char *interval; /* "auto", "steps:N", "seconds:N"; NULL = the daemon's default */
	size_t queue_max; /* reports kept while the daemon is away; 0 = 4096 */
	unsigned backoff_min_ms, backoff_max_ms; /* 0 = 100 and 5000 */
	int driver; /* the job's driver (version 3): no register, reports only;
		     * nodes, ranks, layout and interval unused */
};

/* Notices from the daemon; any may be NULL. Called from phx_ckpt_client_handle. */
struct phx_ckpt_client_ops {
	void (*connected)(void *arg, uint64_t committed, uint64_t step);
	void (*commit)(void *arg, uint64_t gen, uint64_t step, uint64_t keep_from);
	void (*aborted)(void *arg, uint64_t gen, const char *reason);
	/* gen 0 and m NULL: nothing committed yet. m is freed after the call. */
	void (*manifest)(void *arg, uint64_t gen, const struct phx_manifest *m);
	void (*interval)(void *arg, const char *mode, uint64_t steps, uint64_t seconds);
	/* The daemon refused something; the client reconnects by itself. */
	void (*refused)(void *arg, const char *reason);
};

struct phx_ckpt_client *phx_ckpt_client_new(const struct phx_ckpt_client_conf *conf,
					    const struct phx_ckpt_client_ops *ops, void *arg,
					    char *err, size_t errlen);
void phx_ckpt_client_free(struct phx_ckpt_client *c);

/* The socket to poll, or -1 while waiting to reconnect. */
int phx_ckpt_client_fd(const struct phx_ckpt_client *c);
/* POLLIN, plus POLLOUT while connecting or bytes wait to be sent. */
short phx_ckpt_client_events(const struct phx_ckpt_client *c);
/* Milliseconds until the next reconnect attempt; -1 when connected. */
int phx_ckpt_client_timeout_ms(const struct phx_ckpt_client *c);
/* Does the work poll reported (revents may be 0 after a timeout). */
void phx_ckpt_client_handle(struct phx_ckpt_client *c, short revents);
/* 1 when authenticated and registered. */
int phx_ckpt_client_ready(const struct phx_ckpt_client *c);
/* 1 when ready and every report is written to the socket. */
int phx_ckpt_client_idle(const struct phx_ckpt_client *c);
/* Reports dropped because the queue was full while the daemon was away. */
uint64_t phx_ckpt_client_dropped(const struct phx_ckpt_client *c);

/* Requests: 0 when queued or sent, -1 on a bad argument or no memory. */
int phx_ckpt_client_prepare(struct phx_ckpt_client *c, uint64_t gen, uint64_t step,
			    const struct phx_manifest_shard *shards, size_t n);
int phx_ckpt_client_abort(struct phx_ckpt_client *c, uint64_t gen, const char *reason);
int phx_ckpt_client_query(struct phx_ckpt_client *c, uint64_t gen);
int phx_ckpt_client_interval(struct phx_ckpt_client *c);
/* kind: "save", "persist", "failure", "node_bad"; node NULL = this node; 0 = absent. */
int phx_ckpt_client_event(struct phx_ckpt_client *c, const char *kind, const char *node,
			  uint64_t gen, uint64_t value, uint64_t bytes);
/*
 * Recovery reports (protocol version 2; phalanx-ckptd(8) says what the
 * daemon does with each): kind "crash" (reason = the failure's signature,
 * e.g. "ValueError@step 1200"), "hang", "straggler" (value = microseconds
 * lost), "check" (node, value 1 passed or 0 failed), "xid" (node, value =
 * XID), "restart", "done". step = the newest training step; node NULL =
 * this node. Queued like other reports while the daemon is away.
 */
int phx_ckpt_client_report(struct phx_ckpt_client *c, const char *kind, const char *node,
			   uint64_t step, uint64_t value, const char *reason);
/*
 * Says this node is alive at training step step. Sent only while
 * registered (never queued); call every phx_ckpt_client_heartbeat_ms().
 */
int phx_ckpt_client_heartbeat(struct phx_ckpt_client *c, uint64_t step);
/* The period the daemon asked for at registration; 500 before. */
unsigned phx_ckpt_client_heartbeat_ms(const struct phx_ckpt_client *c);

#endif
