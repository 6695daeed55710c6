/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver's end of the cross-role rendezvous: see driver_xrdv.h. One
 * thread polls the listener, an eventfd (publish, close) and the clients;
 * every socket is non-blocking, so no client can hold the others up. A
 * client goes READ (its request, 2 s) -> HOLD (waits for a newer epoch,
 * 10 s) -> WRITE (its answer, 5 s) -> closed; one request per connection.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "common/clock.h"
#include "common/log.h"
#include "launcher/xrdv.h"
#include "launcher/driver/driver_lost.h"
#include "launcher/driver/driver_xrdv.h"

#define MAX_CLIENTS 512
#define NS_PER_S 1000000000ull
#define READ_NS (2 * NS_PER_S)
#define HOLD_NS (10 * NS_PER_S)
#define WRITE_NS (5 * NS_PER_S)
/* A stranger's bad MACs are told at most this often. */
#define WARN_EVERY_NS (60 * NS_PER_S)
/* Accepted per turn of the loop, so a flood cannot starve the clients. */
#define ACCEPT_BATCH 64
/* A pause in accepting when out of descriptors. */
#define ACCEPT_REST_NS (NS_PER_S / 10)

/* Immutable once published; answers in flight keep the one they send. */
struct doc {
	unsigned refs; /* under the lock */
	unsigned long epoch;
	size_t len;
	char body[];
};

enum state { C_READ, C_HOLD, C_WRITE };

struct client {
	int fd;
	enum state state;
	bool done; /* to be closed at the end of this turn */
	uint64_t since_ns, deadline_ns;
	size_t in_len;
	char in[PHX_XRDV_REQ_MAX];
	struct phx_xrdv_req req;
	struct doc *doc; /* WRITE: a reference */
	char hdr[PHX_XRDV_HDR_MAX];
	size_t hdr_len, sent; /* sent: header, then body */
};

struct phx_drv_xrdv {
	int listen_fd, wake_fd;
	unsigned port;
	unsigned char key[PHX_XRDV_KEY_BYTES];
	char env[PHX_XRDV_ENV_MAX];
	pthread_t thread;
	bool threaded;
	pthread_mutex_t lock;
	struct doc *doc; /* under the lock */
	bool stop; /* under the lock */
	/* The thread's own. */
	struct client *clients[MAX_CLIENTS];
	unsigned n;
	unsigned long strangers, refused;
	uint64_t strangers_warned_ns, refused_warned_ns;
	uint64_t accept_paused_ns; /* until then, the listener is not polled; 0: never was */
};

static void doc_put(struct phx_drv_xrdv *x, struct doc *d)
{
	bool last;

	if (!d)
		return;
	pthread_mutex_lock(&x->lock);
	last = --d->refs == 0;
	pthread_mutex_unlock(&x->lock);
	if (last)
		free(d);
}

static void wake(struct phx_drv_xrdv *x)
{
	uint64_t one = 1;

	if (write(x->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		phx_debug("rendezvous: cannot wake the service thread: %s", strerror(errno));
}

static void drop(struct client *c, const char *why)
{
	if (why)
		phx_debug("rendezvous: closed a connection: %s", why);
	c->done = true;
}

/* A rate-limited word on a stranger that knocked without the key. */
static void note_stranger(struct phx_drv_xrdv *x, uint64_t now)
{
	x->strangers++;
	if (x->strangers_warned_ns && now - x->strangers_warned_ns < WARN_EVERY_NS)
		return;
	phx_warn(
		"rendezvous: %lu request(s) with a wrong key refused on port %u, nothing revealed; "
		"an agent of an earlier job or another user may be connecting to this port "
		"(check for leftover phalanx-launch processes)",
		x->strangers, x->port);
	x->strangers = 0;
	x->strangers_warned_ns = now;
}

/* 1: all sent, 0: more to send later, -1: the client is gone. */
static int flush(struct client *c)
{
	size_t total = c->hdr_len + c->doc->len;

	while (c->sent < total) {
		struct iovec iov[2];
		struct msghdr m = { .msg_iov = iov };
		ssize_t n;

		if (c->sent < c->hdr_len) {
			iov[0] = (struct iovec){ c->hdr + c->sent, c->hdr_len - c->sent };
			iov[1] = (struct iovec){ c->doc->body, c->doc->len };
			m.msg_iovlen = c->doc->len ? 2 : 1;
		} else {
			size_t off = c->sent - c->hdr_len;

			iov[0] = (struct iovec){ c->doc->body + off, c->doc->len - off };
			m.msg_iovlen = 1;
		}
		n = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n <= 0)
			return -1;
		c->sent += (size_t)n;
	}
	return 1;
}

/* Answers c with the current document; false when there is none. */
static bool answer(struct phx_drv_xrdv *x, struct client *c, uint64_t now)
{
	struct doc *d;
	int n;

	pthread_mutex_lock(&x->lock);
	d = x->doc;
	if (d)
		d->refs++;
	pthread_mutex_unlock(&x->lock);
	if (!d)
		return false;
	n = phx_xrdv_resp_format(x->key, c->req.nonce, d->epoch, d->body, d->len, c->hdr,
				 sizeof(c->hdr));
	if (n < 0) {
		doc_put(x, d);
		drop(c, "cannot format the answer");
		return true;
	}
	c->doc = d;
	c->hdr_len = (size_t)n;
	c->sent = 0;
	c->state = C_WRITE;
	c->deadline_ns = now + WRITE_NS;
	switch (flush(c)) {
	case 1:
		drop(c, NULL);
		break;
	case -1:
		drop(c, "the agent went away before its answer was sent");
		break;
	}
	return true;
}

/* The epoch of the current document, 0 when none. */
static unsigned long current_epoch(struct phx_drv_xrdv *x)
{
	unsigned long e;

	pthread_mutex_lock(&x->lock);
	e = x->doc ? x->doc->epoch : 0;
	pthread_mutex_unlock(&x->lock);
	return e;
}

static void got_request(struct phx_drv_xrdv *x, struct client *c, size_t line_len, uint64_t now)
{
	if (line_len != c->in_len) {
		drop(c, "bytes after the request");
		return;
	}
	if (phx_xrdv_req_parse(c->in, line_len, &c->req) < 0) {
		drop(c, "malformed request");
		return;
	}
	if (!phx_xrdv_req_verify(x->key, &c->req)) {
		note_stranger(x, now);
		drop(c, "request with a wrong MAC");
		return;
	}
	/* A newer document goes out at once; else the agent waits for one (long poll). */
	if (current_epoch(x) > c->req.after) {
		answer(x, c, now);
		return;
	}
	c->state = C_HOLD;
	c->deadline_ns = now + HOLD_NS;
}

static void on_read(struct phx_drv_xrdv *x, struct client *c, uint64_t now)
{
	ssize_t n;
	char *nl;

	n = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		drop(c, n ? strerror(errno) : "closed before its request");
		return;
	}
	c->in_len += (size_t)n;
	nl = memchr(c->in, '\n', c->in_len);
	if (nl)
		got_request(x, c, (size_t)(nl - c->in) + 1, now);
	else if (c->in_len == sizeof(c->in))
		drop(c, "request longer than PHX_XRDV_REQ_MAX bytes");
}

/* While held, the client must stay silent: anything from it ends it. */
static void on_held(struct client *c)
{
	char b;
	ssize_t n = recv(c->fd, &b, 1, MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	drop(c, n > 0 ? "bytes while held" : "the agent went away while held");
}

static void on_deadline(struct phx_drv_xrdv *x, struct client *c, uint64_t now)
{
	switch (c->state) {
	case C_READ:
		drop(c, "no complete request within 2 s");
		break;
	case C_HOLD:
		/* The current document even when unchanged: the agent learns the driver lives. */
		if (!answer(x, c, now))
			drop(c, "nothing published within 10 s");
		break;
	case C_WRITE:
		drop(c, "answer not read within 5 s");
		break;
	}
}

static void close_client(struct phx_drv_xrdv *x, struct client *c)
{
	close(c->fd);
	doc_put(x, c->doc);
	free(c);
}

/* Closes the clients marked done; the others keep their order. */
static void sweep(struct phx_drv_xrdv *x)
{
	unsigned k = 0;

	for (unsigned i = 0; i < x->n; i++) {
		if (x->clients[i]->done)
			close_client(x, x->clients[i]);
		else
			x->clients[k++] = x->clients[i];
	}
	x->n = k;
}

/*
 * Room for one more: when full, the oldest client that has not sent its
 * request yet makes way (a stranger holding slots with idle connections
 * cannot lock the agents out); when every slot holds an agent, none.
 */
static bool make_room(struct phx_drv_xrdv *x, uint64_t now)
{
	struct client *oldest = NULL;

	if (x->n < MAX_CLIENTS)
		return true;
	for (unsigned i = 0; i < x->n; i++) {
		struct client *c = x->clients[i];

		if (c->state == C_READ && (!oldest || c->since_ns < oldest->since_ns))
			oldest = c;
	}
	if (oldest) {
		drop(oldest, "made way for a newer connection");
		sweep(x);
		return true;
	}
	x->refused++;
	if (!x->refused_warned_ns || now - x->refused_warned_ns >= WARN_EVERY_NS) {
		phx_warn("rendezvous: %lu connection(s) refused: %d agents are already waiting on "
			 "the driver; they retry each second. Jobs of more than %d nodes per role "
			 "see the document later",
			 x->refused, MAX_CLIENTS, MAX_CLIENTS);
		x->refused = 0;
		x->refused_warned_ns = now;
	}
	return false;
}

static void on_accept(struct phx_drv_xrdv *x, uint64_t now)
{
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		int fd = accept4(x->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct client *c;

		if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
			/* The listener stays readable: rest it, or the loop spins. */
			if (!x->accept_paused_ns)
				phx_warn("rendezvous: out of file descriptors (%s); the agents "
					 "retry, but raise the driver's limit ('ulimit -n')",
					 strerror(errno));
			x->accept_paused_ns = now + ACCEPT_REST_NS;
			return;
		}
		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
			    errno != ECONNABORTED)
				phx_debug("rendezvous: accept: %s", strerror(errno));
			return;
		}
		c = make_room(x, now) ? calloc(1, sizeof(*c)) : NULL;
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->state = C_READ;
		c->since_ns = now;
		c->deadline_ns = now + READ_NS;
		x->clients[x->n++] = c;
	}
}

static bool stopping(struct phx_drv_xrdv *x)
{
	bool stop;

	pthread_mutex_lock(&x->lock);
	stop = x->stop;
	pthread_mutex_unlock(&x->lock);
	return stop;
}

static void *serve(void *arg)
{
	struct phx_drv_xrdv *x = arg;
	struct pollfd pfd[2 + MAX_CLIENTS];
	struct client *polled[MAX_CLIENTS];

	while (!stopping(x)) {
		uint64_t now = phx_now_ns(CLOCK_MONOTONIC), next = UINT64_MAX;
		unsigned np = 0;
		int timeout, rc;

		for (unsigned i = 0; i < x->n; i++)
			if (now >= x->clients[i]->deadline_ns)
				on_deadline(x, x->clients[i], now);
		sweep(x);

		pfd[0] = (struct pollfd){ .fd = x->listen_fd, .events = POLLIN };
		if (now < x->accept_paused_ns) {
			pfd[0].fd = -1;
			next = x->accept_paused_ns;
		}
		pfd[1] = (struct pollfd){ .fd = x->wake_fd, .events = POLLIN };
		for (unsigned i = 0; i < x->n; i++) {
			struct client *c = x->clients[i];

			pfd[2 + np] = (struct pollfd){
				.fd = c->fd,
				.events = c->state == C_WRITE ? POLLOUT : POLLIN,
			};
			polled[np++] = c;
			if (c->deadline_ns < next)
				next = c->deadline_ns;
		}
		/* +1 ms: poll's milliseconds round down, a deadline must have passed on waking. */
		timeout = next == UINT64_MAX ? -1 : phx_ms_until(next) + 1;
		rc = poll(pfd, 2 + np, timeout);
		if (rc < 0 && errno != EINTR) {
			phx_error("rendezvous: poll failed (%s); the agents keep the document they "
				  "have",
				  strerror(errno));
			break;
		}
		if (rc <= 0)
			continue;
		now = phx_now_ns(CLOCK_MONOTONIC);

		if (pfd[1].revents) {
			uint64_t v;
			unsigned long epoch;

			if (read(x->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				phx_debug("rendezvous: wake read: %s", strerror(errno));
			epoch = current_epoch(x);
			for (unsigned i = 0; i < np; i++)
				if (polled[i]->state == C_HOLD && epoch > polled[i]->req.after)
					answer(x, polled[i], now);
		}
		for (unsigned i = 0; i < np; i++) {
			struct client *c = polled[i];
			short ev = pfd[2 + i].revents;

			if (!ev || c->done)
				continue;
			/* It may have been answered above: its events are for the state it had. */
			if (c->state == C_WRITE) {
				if (ev & (POLLERR | POLLNVAL)) {
					drop(c, "socket error");
				} else if (ev & (POLLOUT | POLLHUP)) {
					rc = flush(c);
					if (rc < 0)
						drop(c, "the agent went away during its answer");
					else if (rc > 0)
						drop(c, NULL);
				}
			} else if (c->state == C_READ) {
				on_read(x, c, now);
			} else {
				on_held(c);
			}
		}
		sweep(x);
		if (pfd[0].revents & POLLIN)
			on_accept(x, now);
	}
	for (unsigned i = 0; i < x->n; i++)
		close_client(x, x->clients[i]);
	x->n = 0;
	return NULL;
}

struct phx_drv_xrdv *phx_drv_xrdv_open(void)
{
	struct phx_drv_xrdv *x = calloc(1, sizeof(*x));
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	char addr[INET_ADDRSTRLEN];
	sigset_t all, old;
	const char *why = NULL;

	if (!x) {
		phx_error("rendezvous: out of memory");
		return NULL;
	}
	x->listen_fd = x->wake_fd = -1;
	pthread_mutex_init(&x->lock, NULL);
	errno = 0;
	if (phx_drv_own_address(addr, sizeof(addr)) < 0 ||
	    inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
		why = "no IPv4 address that is up and not loopback";
	else if ((x->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) <
			 0 ||
		 bind(x->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
		 listen(x->listen_fd, SOMAXCONN) < 0 ||
		 getsockname(x->listen_fd, (struct sockaddr *)&sa, &len) < 0)
		why = strerror(errno);
	else if ((x->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
		why = strerror(errno);
	else if (RAND_priv_bytes(x->key, sizeof(x->key)) != 1)
		why = "no random key from OpenSSL";
	if (!why) {
		x->port = ntohs(sa.sin_port);
		if (phx_xrdv_env_format(addr, x->port, x->key, x->env, sizeof(x->env)) < 0)
			why = "address too long";
	}
	if (!why) {
		/* Signals stay with the driver's signalfd, whatever the caller's mask is now. */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		x->threaded = pthread_create(&x->thread, NULL, serve, x) == 0;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (!x->threaded)
			why = "cannot start its thread";
	}
	if (why) {
		phx_error(
			"rendezvous: cannot open the cross-role rendezvous service (%s); the roles "
			"cannot learn where the others run. Check the node's network interfaces "
			"('ip -4 addr') and the process limits ('ulimit -n', 'ulimit -u')",
			why);
		phx_drv_xrdv_close(x);
		return NULL;
	}
	phx_debug("rendezvous: serving on %s:%u", addr, x->port);
	return x;
}

const char *phx_drv_xrdv_env(const struct phx_drv_xrdv *x)
{
	return x ? x->env : NULL;
}

void phx_drv_xrdv_publish(struct phx_drv_xrdv *x, unsigned long epoch, const char *body)
{
	size_t len = body ? strlen(body) : 0;
	struct doc *d, *old = NULL;
	unsigned long cur;

	if (!x)
		return;
	if (len > PHX_XRDV_BODY_MAX) {
		phx_error(
			"rendezvous: document of epoch %lu is %zu bytes, over the %u allowed; the "
			"agents keep the previous one. Fewer or shorter role entries fit",
			epoch, len, PHX_XRDV_BODY_MAX);
		return;
	}
	d = malloc(sizeof(*d) + len + 1);
	if (!d) {
		phx_error("rendezvous: out of memory for the document of epoch %lu", epoch);
		return;
	}
	d->refs = 1;
	d->epoch = epoch;
	d->len = len;
	memcpy(d->body, body ? body : "", len + 1);
	pthread_mutex_lock(&x->lock);
	cur = x->doc ? x->doc->epoch : 0;
	if (epoch > cur) {
		old = x->doc;
		x->doc = d;
		d = NULL;
	}
	pthread_mutex_unlock(&x->lock);
	if (d) {
		/* The agents only take a newer epoch: an older one would never reach them. */
		phx_warn(
			"rendezvous: document of epoch %lu not published: epoch %lu is out already "
			"(a bug in the driver; please report it)",
			epoch, cur);
		free(d);
		return;
	}
	doc_put(x, old);
	wake(x);
}

void phx_drv_xrdv_close(struct phx_drv_xrdv *x)
{
	if (!x)
		return;
	if (x->threaded) {
		pthread_mutex_lock(&x->lock);
		x->stop = true;
		pthread_mutex_unlock(&x->lock);
		wake(x);
		pthread_join(x->thread, NULL);
	}
	if (x->listen_fd >= 0)
		close(x->listen_fd);
	if (x->wake_fd >= 0)
		close(x->wake_fd);
	doc_put(x, x->doc);
	pthread_mutex_destroy(&x->lock);
	OPENSSL_cleanse(x->key, sizeof(x->key));
	OPENSSL_cleanse(x->env, sizeof(x->env));
	free(x);
}
