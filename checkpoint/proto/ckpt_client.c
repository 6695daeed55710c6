/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "checkpoint/proto/ckpt_client.h"
#include "common/conf.h"
#include "checkpoint/proto/ckpt_wire.h"
#include "common/log.h"

enum state { ST_IDLE, ST_CONNECTING, ST_HANDSHAKE, ST_READY };

struct frame {
	char *data;
	size_t len;
	uint64_t gen; /* prepare/abort: resent until settled */
};

struct fqueue {
	struct frame *v;
	size_t head, n, cap;
};

struct phx_ckpt_client {
	struct phx_ckpt_client_conf conf;
	char *address, *token, *node, *layout, *interval;
	struct phx_ckpt_client_ops ops;
	void *arg;
	enum state st;
	int fd;
	struct phx_wire_reader rd;
	struct phx_wire_writer wr;
	struct phx_wire_order order;
	struct fqueue pending; /* prepares and aborts not yet settled */
	struct fqueue reports; /* sent once; kept while the daemon is away */
	uint64_t dropped;
	unsigned backoff_ms;
	int64_t next_try_ms;
	uint64_t rng;
	uint64_t heartbeat_ms; /* asked for by the daemon; 0 = not said */
	char nonce[PHX_WIRE_NONCE_HEX + 1]; /* this connection's, for the daemon's proof */
	const char *why; /* why on_msg ended the connection, when not a refusal */
};

const char *phx_ckptd_address(const struct phx_conf *conf)
{
	const char *l = conf->ckptd.listen;

	if (conf->ckptd.address && conf->ckptd.address[0])
		return conf->ckptd.address;
	if (!l || !l[0] || !strncmp(l, "0.0.0.0:", 8) || !strncmp(l, "[::]:", 5))
		return "";
	return l;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------ queues */

static void frame_free(struct frame *f)
{
	free(f->data);
	f->data = NULL;
}

static struct frame *fq_at(struct fqueue *q, size_t i)
{
	return &q->v[(q->head + i) % q->cap];
}

static void fq_pop(struct fqueue *q)
{
	frame_free(fq_at(q, 0));
	q->head = (q->head + 1) % q->cap;
	q->n--;
}

static int fq_push(struct fqueue *q, struct frame f)
{
	if (q->n == q->cap) {
		size_t cap = q->cap ? 2 * q->cap : 16;
		struct frame *v = malloc(cap * sizeof(*v));

		if (!v)
			return -1;
		for (size_t i = 0; i < q->n; i++)
			v[i] = *fq_at(q, i);
		free(q->v);
		q->v = v;
		q->cap = cap;
		q->head = 0;
	}
	*fq_at(q, q->n++) = f;
	return 0;
}

static void fq_free(struct fqueue *q)
{
	while (q->n)
		fq_pop(q);
	free(q->v);
	memset(q, 0, sizeof(*q));
}

/* Drops settled generations (gen <= upto, or exactly gen when exact). */
static void fq_settle(struct fqueue *q, uint64_t gen, int exact)
{
	size_t keep = 0, n = q->n;

	for (size_t i = 0; i < n; i++) {
		struct frame *f = fq_at(q, i);

		if (exact ? f->gen == gen : f->gen <= gen)
			frame_free(f);
		else
			*fq_at(q, keep++) = *f;
	}
	q->n = keep;
}

/* ------------------------------------------------------------------ connection */

static void disconnect(struct phx_ckpt_client *c, const char *why)
{
	unsigned jitter;

	if (c->fd >= 0) {
		close(c->fd);
		if (why)
			phx_warn("checkpoint daemon %s: %s; saves continue on the node and "
				 "are reported when it is back",
				 c->address, why);
	}
	c->fd = -1;
	c->st = ST_IDLE;
	phx_wire_reader_free(&c->rd);
	phx_wire_writer_free(&c->wr);
	/* Exponential backoff with jitter, so 2,048 agents do not return in one burst. */
	c->rng = c->rng * 6364136223846793005ULL + 1442695040888963407ULL;
	jitter = (unsigned)(c->rng >> 33) % (c->backoff_ms / 2 + 1);
	c->next_try_ms = now_ms() + c->backoff_ms / 2 + jitter;
	c->backoff_ms = c->backoff_ms * 2 > c->conf.backoff_max_ms ? c->conf.backoff_max_ms
								   : c->backoff_ms * 2;
}

static int split_address(const char *address, char *host, size_t hlen, char *port, size_t plen)
{
	const char *colon = strrchr(address, ':');

	if (!colon || colon == address || !colon[1] || (size_t)(colon - address) >= hlen ||
	    strlen(colon + 1) >= plen)
		return -1;
	memcpy(host, address, (size_t)(colon - address));
	host[colon - address] = '\0';
	snprintf(port, plen, "%s", colon + 1);
	return 0;
}

static void start_connect(struct phx_ckpt_client *c)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai;
	char host[256], port[16];
	int fd, one = 1;

	if (split_address(c->address, host, sizeof(host), port, sizeof(port)) < 0 ||
	    getaddrinfo(host, port, &hints, &ai) != 0) {
		phx_warn("cannot resolve checkpoint daemon address %s; check ckptd.address "
			 "in phalanx.yaml",
			 c->address);
		disconnect(c, NULL);
		return;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		freeaddrinfo(ai);
		disconnect(c, NULL);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->fd = fd;
	c->st = ST_CONNECTING;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
		freeaddrinfo(ai);
		disconnect(c, NULL);
		return;
	}
	freeaddrinfo(ai);
	phx_wire_reader_init(&c->rd, PHX_WIRE_MAX_FRAME);
	phx_wire_order_init(&c->order, PHX_SIDE_CLIENT,
			    c->conf.driver ? PHX_ROLE_DRIVER : PHX_ROLE_AGENT);
}

static int send_obj(struct phx_ckpt_client *c, struct json_object *o)
{
	return phx_wire_writer_put(&c->wr, o);
}

static void connected(struct phx_ckpt_client *c)
{
	int e = 0;
	socklen_t len = sizeof(e);

	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0 || e) {
		disconnect(c, NULL);
		return;
	}
	c->st = ST_HANDSHAKE;
	send_obj(c, c->conf.driver ? phx_wire_hello_driver(c->conf.job, c->conf.uid, c->node)
				   : phx_wire_hello_agent(c->conf.job, c->conf.uid, c->node));
}

/* Registered: what waited is sent now, settled-or-not prepares first. */
static void ready(struct phx_ckpt_client *c)
{
	c->st = ST_READY;
	c->backoff_ms = c->conf.backoff_min_ms;
	for (size_t i = 0; i < c->pending.n; i++)
		phx_wire_writer_put_frame(&c->wr, fq_at(&c->pending, i)->data,
					  fq_at(&c->pending, i)->len);
	while (c->reports.n) {
		struct frame *f = fq_at(&c->reports, 0);

		phx_wire_writer_put_frame(&c->wr, f->data, f->len);
		fq_pop(&c->reports);
	}
}

static void on_manifest(struct phx_ckpt_client *c, const struct phx_wire_msg *m)
{
	struct phx_manifest man;
	char err[512];

	if (!c->ops.manifest)
		return;
	if (!m->payload) {
		c->ops.manifest(c->arg, 0, NULL);
		return;
	}
	if (phx_manifest_from_json(m->payload, &man, err, sizeof(err)) < 0) {
		phx_warn("checkpoint daemon %s sent a bad manifest of generation %llu: %s",
			 c->address, (unsigned long long)m->gen, err);
		return;
	}
	c->ops.manifest(c->arg, m->gen, &man);
	phx_manifest_free(&man);
}

static int on_msg(struct phx_ckpt_client *c, const struct phx_wire_msg *m)
{
	char mac[PHX_WIRE_MAC_HEX + 1];
	struct json_object *o;

	switch (m->type) {
	case PHX_MSG_CHALLENGE:
		if (phx_wire_auth_mac(c->token, m->nonce, c->conf.job, c->conf.uid, c->node, mac) <
			    0 ||
		    phx_wire_nonce(c->nonce) < 0)
			return -1;
		o = phx_wire_new(PHX_MSG_AUTH);
		json_object_object_add(o, "mac", json_object_new_string(mac));
		json_object_object_add(o, "nonce", json_object_new_string(c->nonce));
		return send_obj(c, o);
	case PHX_MSG_WELCOME:
		/* Commits, manifests and intervals are taken only from the real daemon. */
		if (!phx_wire_welcome_check(c->token, c->nonce, c->conf.job, c->conf.uid, c->node,
					    m->proof)) {
			c->why = m->proof
					 ? "its welcome's proof is wrong: it does not hold the "
					   "cluster key; check ckptd.address"
					 : "its welcome carries no proof that it holds the cluster "
					   "key; check ckptd.address, or upgrade phalanx-ckptd";
			return -1;
		}
		if (c->conf.driver) {
			/* A driver does not register: welcomed, it is ready. */
			ready(c);
			if (c->ops.connected)
				c->ops.connected(c->arg, m->committed, m->step);
			return 0;
		}
		o = phx_wire_new(PHX_MSG_REGISTER);
		json_object_object_add(o, "nodes", json_object_new_uint64(c->conf.nodes));
		json_object_object_add(o, "ranks", json_object_new_uint64(c->conf.ranks));
		json_object_object_add(o, "layout", json_object_new_string(c->layout));
		if (c->interval)
			json_object_object_add(o, "interval", json_object_new_string(c->interval));
		return send_obj(c, o);
	case PHX_MSG_REGISTERED:
		c->heartbeat_ms = m->heartbeat_ms;
		ready(c);
		if (c->ops.connected)
			c->ops.connected(c->arg, m->committed, m->step);
		return 0;
	case PHX_MSG_COMMIT:
		fq_settle(&c->pending, m->gen, 0);
		if (c->ops.commit)
			c->ops.commit(c->arg, m->gen, m->step, m->keep_from);
		return 0;
	case PHX_MSG_ABORTED:
		fq_settle(&c->pending, m->gen, 1);
		if (c->ops.aborted)
			c->ops.aborted(c->arg, m->gen, m->reason);
		return 0;
	case PHX_MSG_MANIFEST:
		on_manifest(c, m);
		return 0;
	case PHX_MSG_INTERVAL:
		if (c->ops.interval)
			c->ops.interval(c->arg, m->mode, m->steps, m->seconds);
		return 0;
	case PHX_MSG_ERROR:
		phx_warn("checkpoint daemon %s refused job %u: %s%s", c->address, c->conf.job,
			 m->reason,
			 c->st == ST_HANDSHAKE && strstr(m->reason, "\"nonce\"")
				 ? " (a phalanx-ckptd older than this agent cannot prove it holds "
				   "the cluster key, which this agent requires; upgrade "
				   "phalanx-ckptd)"
				 : "");
		if (c->ops.refused)
			c->ops.refused(c->arg, m->reason);
		return -1;
	default:
		return -1;
	}
}

static void read_frames(struct phx_ckpt_client *c)
{
	const char *body;
	size_t len;
	char err[512];
	ssize_t n = phx_wire_reader_read(&c->rd, c->fd);
	int rc;

	if (n == -EAGAIN || n == -EINTR)
		return;
	if (n <= 0) {
		disconnect(c, n == 0 ? "connection closed" : strerror((int)-n));
		return;
	}
	while ((rc = phx_wire_reader_next(&c->rd, &body, &len, err, sizeof(err))) == 1) {
		struct phx_wire_msg m;

		if (phx_wire_decode(body, len, PHX_SIDE_CLIENT, &m, err, sizeof(err)) < 0 ||
		    phx_wire_order_accept(&c->order, &m, err, sizeof(err)) < 0) {
			phx_wire_msg_free(&m);
			disconnect(c, err);
			return;
		}
		c->why = NULL;
		rc = on_msg(c, &m);
		phx_wire_msg_free(&m);
		if (rc < 0) {
			disconnect(c, c->why ? c->why : "the daemon refused the connection");
			return;
		}
	}
	if (rc < 0)
		disconnect(c, err);
}

void phx_ckpt_client_handle(struct phx_ckpt_client *c, short revents)
{
	int rc;

	if (c->st == ST_IDLE) {
		if (now_ms() >= c->next_try_ms)
			start_connect(c);
		return;
	}
	if (c->st == ST_CONNECTING) {
		if (revents & (POLLOUT | POLLERR | POLLHUP))
			connected(c);
		if (c->st == ST_CONNECTING || c->fd < 0)
			return;
	}
	if (revents & (POLLIN | POLLHUP | POLLERR))
		read_frames(c);
	if (c->fd >= 0 && phx_wire_writer_pending(&c->wr)) {
		rc = phx_wire_writer_flush(&c->wr, c->fd);
		if (rc < 0)
			disconnect(c, strerror(-rc));
	}
}

/* ------------------------------------------------------------------ API */

static char *dup_or(const char *s, const char *dflt)
{
	return strdup(s ? s : dflt);
}

struct phx_ckpt_client *phx_ckpt_client_new(const struct phx_ckpt_client_conf *conf,
					    const struct phx_ckpt_client_ops *ops, void *arg,
					    char *err, size_t errlen)
{
	struct phx_ckpt_client *c;
	char host[256], port[16];

	if (!conf->address ||
	    split_address(conf->address, host, sizeof(host), port, sizeof(port)) < 0) {
		phx_errf(err, errlen, "checkpoint daemon address \"%s\" is not HOST:PORT",
			 conf->address ? conf->address : "");
		return NULL;
	}
	if (!conf->token || strlen(conf->token) != PHX_TOKEN_HEX_LEN) {
		phx_errf(err, errlen,
			 "the job token (PHALANX_JOB_TOKEN) is missing or not %d hex characters; "
			 "is the job run with the phalanx SPANK plugin?",
			 PHX_TOKEN_HEX_LEN);
		return NULL;
	}
	if (!conf->job || !conf->node || !*conf->node ||
	    (!conf->driver && (!conf->ranks || !conf->nodes))) {
		phx_errf(err, errlen, "checkpoint client needs a job id, a node name and counts");
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		phx_errf(err, errlen, "out of memory");
		return NULL;
	}
	c->conf = *conf;
	if (!c->conf.queue_max)
		c->conf.queue_max = 4096;
	if (!c->conf.backoff_min_ms)
		c->conf.backoff_min_ms = 100;
	if (!c->conf.backoff_max_ms)
		c->conf.backoff_max_ms = 5000;
	c->address = strdup(conf->address);
	c->token = strdup(conf->token);
	c->node = strdup(conf->node);
	c->layout = dup_or(conf->layout, "");
	c->interval = conf->interval ? strdup(conf->interval) : NULL;
	if (ops)
		c->ops = *ops;
	c->arg = arg;
	c->fd = -1;
	c->backoff_ms = c->conf.backoff_min_ms;
	c->rng = (uint64_t)now_ms() ^ ((uint64_t)getpid() << 32) ^ conf->job;
	if (!c->address || !c->token || !c->node || !c->layout ||
	    (conf->interval && !c->interval)) {
		phx_ckpt_client_free(c);
		phx_errf(err, errlen, "out of memory");
		return NULL;
	}
	start_connect(c);
	return c;
}

void phx_ckpt_client_free(struct phx_ckpt_client *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	phx_wire_reader_free(&c->rd);
	phx_wire_writer_free(&c->wr);
	fq_free(&c->pending);
	fq_free(&c->reports);
	if (c->token)
		memset(c->token, 0, strlen(c->token));
	free(c->address);
	free(c->token);
	free(c->node);
	free(c->layout);
	free(c->interval);
	free(c);
}

int phx_ckpt_client_fd(const struct phx_ckpt_client *c)
{
	return c->fd;
}

short phx_ckpt_client_events(const struct phx_ckpt_client *c)
{
	if (c->fd < 0)
		return 0;
	if (c->st == ST_CONNECTING || phx_wire_writer_pending(&c->wr))
		return POLLIN | POLLOUT;
	return POLLIN;
}

int phx_ckpt_client_timeout_ms(const struct phx_ckpt_client *c)
{
	int64_t left;

	if (c->st != ST_IDLE)
		return -1;
	left = c->next_try_ms - now_ms();
	return left < 0 ? 0 : (int)left;
}

int phx_ckpt_client_idle(const struct phx_ckpt_client *c)
{
	return c->st == ST_READY && !c->reports.n && !phx_wire_writer_pending(&c->wr);
}

int phx_ckpt_client_ready(const struct phx_ckpt_client *c)
{
	return c->st == ST_READY;
}

uint64_t phx_ckpt_client_dropped(const struct phx_ckpt_client *c)
{
	return c->dropped;
}

/* Sends now when ready; otherwise keeps the frame (pending or report). */
static int submit(struct phx_ckpt_client *c, struct json_object *o, uint64_t settle_gen)
{
	struct frame f = { NULL, 0, settle_gen };

	f.data = phx_wire_frame(o, &f.len);
	if (!f.data)
		return -1;
	if (c->st == ST_READY && phx_wire_writer_put_frame(&c->wr, f.data, f.len) < 0) {
		free(f.data);
		return -1;
	}
	if (settle_gen) {
		if (fq_push(&c->pending, f) < 0) {
			free(f.data);
			return -1;
		}
	} else if (c->st == ST_READY) {
		free(f.data);
	} else {
		if (c->reports.n >= c->conf.queue_max) {
			fq_pop(&c->reports);
			c->dropped++;
		}
		if (fq_push(&c->reports, f) < 0) {
			free(f.data);
			return -1;
		}
	}
	if (c->st == ST_READY && phx_wire_writer_flush(&c->wr, c->fd) < 0)
		disconnect(c, "send failed");
	return 0;
}

int phx_ckpt_client_prepare(struct phx_ckpt_client *c, uint64_t gen, uint64_t step,
			    const struct phx_manifest_shard *shards, size_t n)
{
	if (!gen || !n || n > PHX_WIRE_MAX_SHARDS)
		return -1;
	return submit(c, phx_wire_prepare(gen, step, shards, n), gen);
}

int phx_ckpt_client_abort(struct phx_ckpt_client *c, uint64_t gen, const char *reason)
{
	struct json_object *o;

	if (!gen || !reason || !*reason)
		return -1;
	/* A prepare of an aborted generation must not be sent again. */
	fq_settle(&c->pending, gen, 1);
	o = phx_wire_new(PHX_MSG_ABORT);
	json_object_object_add(o, "gen", json_object_new_uint64(gen));
	json_object_object_add(
		o, "reason",
		json_object_new_string_len(reason, (int)strnlen(reason, PHX_WIRE_REASON_MAX)));
	return submit(c, o, gen);
}

int phx_ckpt_client_query(struct phx_ckpt_client *c, uint64_t gen)
{
	struct json_object *o = phx_wire_new(PHX_MSG_QUERY);

	json_object_object_add(o, "gen", json_object_new_uint64(gen));
	return submit(c, o, 0);
}

int phx_ckpt_client_interval(struct phx_ckpt_client *c)
{
	return submit(c, phx_wire_new(PHX_MSG_INTERVAL), 0);
}

int phx_ckpt_client_event(struct phx_ckpt_client *c, const char *kind, const char *node,
			  uint64_t gen, uint64_t value, uint64_t bytes)
{
	struct json_object *o = phx_wire_new(PHX_MSG_EVENT);

	json_object_object_add(o, "kind", json_object_new_string(kind));
	if (node || !strcmp(kind, "node_bad"))
		json_object_object_add(o, "node", json_object_new_string(node ? node : c->node));
	if (gen)
		json_object_object_add(o, "gen", json_object_new_uint64(gen));
	if (value)
		json_object_object_add(o, "value", json_object_new_uint64(value));
	if (bytes)
		json_object_object_add(o, "bytes", json_object_new_uint64(bytes));
	return submit(c, o, 0);
}

int phx_ckpt_client_report(struct phx_ckpt_client *c, const char *kind, const char *node,
			   uint64_t step, uint64_t value, const char *reason)
{
	struct json_object *o = phx_wire_new(PHX_MSG_EVENT);

	json_object_object_add(o, "kind", json_object_new_string(kind));
	if (node)
		json_object_object_add(o, "node", json_object_new_string(node));
	json_object_object_add(o, "step", json_object_new_uint64(step));
	json_object_object_add(o, "value", json_object_new_uint64(value));
	if (reason && *reason)
		json_object_object_add(o, "reason", json_object_new_string(reason));
	return submit(c, o, 0);
}

int phx_ckpt_client_heartbeat(struct phx_ckpt_client *c, uint64_t step)
{
	struct json_object *o;

	/* A heartbeat says "alive now": one kept for later would lie. */
	if (c->st != ST_READY)
		return 0;
	o = phx_wire_new(PHX_MSG_HEARTBEAT);
	json_object_object_add(o, "step", json_object_new_uint64(step));
	return send_obj(c, o);
}

unsigned phx_ckpt_client_heartbeat_ms(const struct phx_ckpt_client *c)
{
	return c->heartbeat_ms ? (unsigned)c->heartbeat_ms : 500;
}
