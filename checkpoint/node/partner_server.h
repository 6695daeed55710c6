/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The receiving end of partner copies, run by an agent on its own thread
 * so its main loop never waits on a peer: a TCP listener that gives each
 * sender a thread of its own (a partner has one peer, but a relaunched one
 * or a stranger may connect as well), receives and verifies each copy
 * (partner_io.h), keeps it in memory and, when a directory is given, also
 * writes it there as the signed header followed by the
 * shard ("rank-R/gen-G.copy", atomically), so that the next step's agent
 * on this node can serve it again byte for byte after the step that made
 * it ended. The disk keeps the newest disk_keep generations per rank (at
 * least the two in memory): copies run ahead of the generations the
 * agents have committed, and the one a relaunch restores may be older
 * than the newest two. A slow or hostile peer holds only its own
 * connection: at most PHX_PARTNER_CONNS at once, PHX_PARTNER_CONNS_PER_ADDR
 * from one address, the first header whole within lim.header_ms of the
 * connection and a later one within lim.header_ms of its first byte
 * (before its MAC can be checked), a sender silent for timeout_ms dropped.
 * A sender whose header's MAC checked keeps its slot; when none is free a
 * newcomer pushes out a connection with a forged header, else the oldest
 * without a whole header, never one whose signed header has arrived, so
 * strangers reconnecting as fast as they can cannot keep the partner out.
 */
#ifndef PHX_CKPT_PARTNER_SERVER_H
#define PHX_CKPT_PARTNER_SERVER_H

#include <pthread.h>
#include <stdint.h>

#include "checkpoint/node/partner_io.h"

#define PHX_PARTNER_CONNS 16
#define PHX_PARTNER_CONNS_PER_ADDR 4
/* lim.header_ms when it is 0. */
#define PHX_PARTNER_HEADER_MS 2000

struct phx_partner_server;

/* One sender being served, on its own thread. */
struct phx_partner_conn {
	struct phx_partner_server *s;
	int fd; /* -1 once closed; under mu */
	uint32_t addr; /* the sender's IPv4 address */
	uint64_t since_ns; /* accepted (CLOCK_MONOTONIC) */
	int used, done; /* done: under mu */
	int proven; /* a header's MAC checked; under mu */
	int reading; /* its thread took its first header to check; under mu */
	int evicted; /* pushed out for a newer connection; under mu */
	pthread_t thread;
};

struct phx_partner_server {
	int listen_fd, stop_fd;
	struct phx_partner_conn conns[PHX_PARTNER_CONNS];
	uint16_t port;
	uint8_t secret[PHX_PARTNER_SECRET_BYTES];
	struct phx_partner_limits lim;
	unsigned digest_threads;
	int timeout_ms; /* a sender silent this long is dropped */
	char dir[4096]; /* "" = memory only */
	unsigned disk_keep; /* generations per rank kept in dir; 2 when less */
	/*
	 * The newest generation committed in the local tier (0: none), set by
	 * phx_partner_server_hold(): its copy stays on disk however many newer
	 * copies arrive, since a lost node stops the commits, not the copies.
	 */
	uint64_t hold_gen;
	pthread_t thread;
	pthread_mutex_t mu; /* guards store and the counters */
	struct phx_partner_store store;
	unsigned long received, refused, turned_away;
	unsigned long strangers; /* connections gone without a good header */
	unsigned long evictions; /* connections pushed out for newer ones */
};

/* The generations per rank kept on disk besides the held one: disk_keep, at least 2. */
unsigned phx_partner_server_disk_keep(const struct phx_partner_server *s);
/* Keeps gen's copies on disk past disk_keep newer ones; any thread. */
void phx_partner_server_hold(struct phx_partner_server *s, uint64_t gen);

/*
 * The partner secret: HMAC-SHA256(job token, "phalanx-partner:v1"), the
 * same in every step of the job and known only to its processes. 0 or -1
 * (not a job token).
 */
int phx_partner_secret_from_token(const char *token_hex, uint8_t secret[PHX_PARTNER_SECRET_BYTES]);

/*
 * Listens on addr (IPv4 text; port 0: any free one, then s->port says
 * which) and starts the thread. s->secret, lim, digest_threads, timeout_ms
 * and dir must be set. 0 or -1 with err.
 */
int phx_partner_server_start(struct phx_partner_server *s, const char *addr, uint16_t port,
			     char *err, size_t errlen);
void phx_partner_server_stop(struct phx_partner_server *s);

/* 1 with *gen the newest verified generation held for rank, else 0. */
int phx_partner_server_newest(struct phx_partner_server *s, uint32_t rank, uint64_t *gen);

/* Connects to a partner (IPv4 text) with a send timeout: a socket, or -1 with err. */
int phx_partner_connect(const char *addr, uint16_t port, int timeout_ms, char *err, size_t errlen);

/* Connections phx_partner_open() makes when the server closes them before its welcome. */
#define PHX_PARTNER_OPEN_TRIES 8

/*
 * Connects to a partner and sends a copy's signed header (hdr), then waits
 * for the server's welcome: once it has come the server checked the
 * header and holds the connection, so the shard that follows is not lost
 * to a stranger's connection pushing this one out first; a connection
 * closed before it (pushed out while strangers flood the partner's
 * address) is made again, up to PHX_PARTNER_OPEN_TRIES times. The socket,
 * ready for the shard, or -1 with err.
 */
int phx_partner_open(const char *addr, uint16_t port, int timeout_ms,
		     const uint8_t hdr[PHX_PARTNER_HDR_BYTES], char *err, size_t errlen);

/*
 * Sends a stored copy file (signed header then shard, as the server wrote
 * it) as it is, on *fd or, when *fd < 0, on a connection to addr:port that
 * it opens with the file's header (phx_partner_open()). 0 or -1 with err.
 */
int phx_partner_send_file(int *fd, const char *addr, uint16_t port, int timeout_ms,
			  const char *path, char *err, size_t errlen);

#endif
