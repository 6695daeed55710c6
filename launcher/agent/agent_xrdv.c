/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's end of the cross-role rendezvous: see agent_xrdv.h. One
 * connection per request: connect (2 s), send the request with the epoch
 * written last, read the answer (15 s: the driver holds a request up to
 * 10 s), check it, write the file when the epoch grew, and ask again. Every
 * wait also watches an eventfd, so stopping is prompt.
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
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "common/clock.h"
#include "common/file.h"
#include "common/hex.h"
#include "common/log.h"
#include "launcher/xrdv.h"
#include "launcher/agent/agent_xrdv.h"

#define NS_PER_MS 1000000ull
#define CONNECT_NS (2000 * NS_PER_MS)
#define ANSWER_NS (15000 * NS_PER_MS)
#define RETRY_MS 1000

/* What one request came to. */
enum fetch { F_STOPPED = -2, F_FAILED = -1, F_SAME = 0, F_NEWER = 1 };

struct phx_agent_xrdv {
	char addr[INET_ADDRSTRLEN];
	unsigned port;
	unsigned char key[PHX_XRDV_KEY_BYTES];
	char *file;
	int stop_fd; /* eventfd: stop asks the thread to end */
	pthread_t thread;
	bool threaded;
	pthread_mutex_t lock;
	pthread_cond_t written; /* epoch grew */
	unsigned long epoch; /* under the lock */
	char why[256]; /* the thread's: why the last request failed */
};

static int fail(struct phx_agent_xrdv *x, const char *what, int err)
{
	if (err)
		snprintf(x->why, sizeof(x->why), "%s: %s", what, strerror(err));
	else
		snprintf(x->why, sizeof(x->why), "%s", what);
	return F_FAILED;
}

/* 1 when fd is ready for events, 0 at the deadline, F_STOPPED, or F_FAILED. */
static int wait_fd(struct phx_agent_xrdv *x, int fd, short events, uint64_t deadline_ns)
{
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = x->stop_fd, .events = POLLIN },
			{ .fd = fd, .events = events },
		};
		int rc = poll(p, fd >= 0 ? 2 : 1, phx_ms_until(deadline_ns));

		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return fail(x, "poll", errno);
		if (p[0].revents)
			return F_STOPPED;
		/* At most a millisecond early (poll's unit): no matter for these waits. */
		return rc > 0 ? 1 : 0;
	}
}

static int connect_driver(struct phx_agent_xrdv *x, int *fdp)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)x->port) };
	int fd, rc, err = 0;
	socklen_t len = sizeof(err);

	inet_pton(AF_INET, x->addr, &sa.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fail(x, "socket", errno);
	*fdp = fd;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return 0;
	if (errno != EINPROGRESS)
		return fail(x, "connect", errno);
	rc = wait_fd(x, fd, POLLOUT, phx_now_ns(CLOCK_MONOTONIC) + CONNECT_NS);
	if (rc == F_STOPPED)
		return rc;
	if (rc == 0)
		return fail(x, "connect: no answer within 2 s", 0);
	if (rc < 0)
		return rc;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		return fail(x, "connect", errno);
	return err ? fail(x, "connect", err) : 0;
}

static int send_request(struct phx_agent_xrdv *x, int fd, const char *req, size_t len,
			uint64_t deadline_ns)
{
	size_t off = 0;

	while (off < len) {
		ssize_t n = send(fd, req + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		int rc;

		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return fail(x, "send", errno);
		rc = wait_fd(x, fd, POLLOUT, deadline_ns);
		if (rc <= 0)
			return rc == 0 ? fail(x, "send: timed out", 0) : rc;
	}
	return 0;
}

/* Up to len bytes into buf: how many (0 at the end of the stream), F_STOPPED or F_FAILED. */
static ssize_t recv_some(struct phx_agent_xrdv *x, int fd, char *buf, size_t len,
			 uint64_t deadline_ns)
{
	for (;;) {
		ssize_t n = recv(fd, buf, len, MSG_DONTWAIT);
		int rc;

		if (n >= 0)
			return n;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return fail(x, "receive", errno);
		rc = wait_fd(x, fd, POLLIN, deadline_ns);
		if (rc <= 0)
			return rc == 0 ? fail(x, "no answer within 15 s", 0) : rc;
	}
}

/*
 * The answer to nonce: its header and body (malloc'd) once both are in and
 * the MAC checks. The header's line may arrive with the body's start.
 */
static int read_answer(struct phx_agent_xrdv *x, int fd, const char *nonce, uint64_t deadline_ns,
		       struct phx_xrdv_resp *h, char **bodyp)
{
	char hdr[PHX_XRDV_HDR_MAX], *nl = NULL, *body;
	size_t have = 0, line, extra;
	ssize_t n;

	while (!nl) {
		if (have == sizeof(hdr))
			return fail(x, "answer header too long", 0);
		n = recv_some(x, fd, hdr + have, sizeof(hdr) - have, deadline_ns);
		if (n < 0)
			return (int)n;
		if (n == 0)
			return fail(x,
				    "the driver closed the connection without an answer (it is "
				    "stopping, or the key is not its own)",
				    0);
		nl = memchr(hdr + have, '\n', (size_t)n);
		have += (size_t)n;
	}
	line = (size_t)(nl - hdr) + 1;
	if (phx_xrdv_resp_parse(hdr, line, h) < 0)
		return fail(x, "malformed answer", 0);
	extra = have - line;
	if (extra > h->body_len)
		return fail(x, "bytes after the answer", 0);
	body = malloc(h->body_len + 1);
	if (!body)
		return fail(x, "out of memory", ENOMEM);
	memcpy(body, hdr + line, extra);
	for (size_t got = extra; got < h->body_len; got += (size_t)n) {
		n = recv_some(x, fd, body + got, h->body_len - got, deadline_ns);
		if (n <= 0) {
			free(body);
			return n < 0 ? (int)n : fail(x, "the answer was cut short", 0);
		}
	}
	if (!phx_xrdv_resp_verify(x->key, nonce, h, body, h->body_len)) {
		free(body);
		return fail(x, "the answer failed authentication (not this job's driver?)", 0);
	}
	*bodyp = body;
	return 0;
}

static int fetch(struct phx_agent_xrdv *x)
{
	unsigned char raw[PHX_XRDV_NONCE_HEX / 2];
	char nonce[PHX_XRDV_NONCE_HEX + 1], req[PHX_XRDV_REQ_MAX], *body = NULL;
	struct phx_xrdv_resp h;
	unsigned long have;
	uint64_t deadline;
	int fd = -1, n, rc;

	pthread_mutex_lock(&x->lock);
	have = x->epoch;
	pthread_mutex_unlock(&x->lock);
	if (RAND_bytes(raw, sizeof(raw)) != 1) {
		rc = fail(x, "no random nonce from OpenSSL", 0);
		goto out;
	}
	phx_hex_encode(raw, sizeof(raw), nonce);
	n = phx_xrdv_req_format(x->key, nonce, have, req, sizeof(req));
	if (n < 0) {
		rc = fail(x, "cannot format the request", 0);
		goto out;
	}
	rc = connect_driver(x, &fd);
	if (rc < 0)
		goto out;
	deadline = phx_now_ns(CLOCK_MONOTONIC) + ANSWER_NS;
	rc = send_request(x, fd, req, (size_t)n, deadline);
	if (rc < 0)
		goto out;
	rc = read_answer(x, fd, nonce, deadline, &h, &body);
	if (rc < 0)
		goto out;
	rc = F_SAME;
	/* An unchanged answer only says the driver lives; the file moves forward only. */
	if (h.epoch > have) {
		int err = phx_file_write_atomic(x->file, body, h.body_len, 0600);

		if (err < 0) {
			snprintf(x->why, sizeof(x->why), "cannot write %s: %s", x->file,
				 strerror(-err));
			rc = F_FAILED;
			goto out;
		}
		pthread_mutex_lock(&x->lock);
		x->epoch = h.epoch;
		pthread_cond_broadcast(&x->written);
		pthread_mutex_unlock(&x->lock);
		phx_debug("rendezvous: %s now holds epoch %lu", x->file, h.epoch);
		rc = F_NEWER;
	}
out:
	if (fd >= 0)
		close(fd);
	free(body);
	return rc;
}

static void *poll_driver(void *arg)
{
	struct phx_agent_xrdv *x = arg;
	bool outage = false;

	for (;;) {
		uint64_t start = phx_now_ns(CLOCK_MONOTONIC);
		int rc = fetch(x);
		unsigned long epoch;

		if (rc == F_STOPPED)
			break;
		pthread_mutex_lock(&x->lock);
		epoch = x->epoch;
		pthread_mutex_unlock(&x->lock);
		if (rc == F_FAILED && !outage) {
			phx_warn("rendezvous: no document from the driver at %s:%u (%s); %s stays "
				 "at "
				 "epoch %lu, retrying each second. Check that the batch script's "
				 "phalanx-launch still runs and that this node reaches %s over TCP",
				 x->addr, x->port, x->why, x->file, epoch, x->addr);
			outage = true;
		} else if (rc >= 0 && outage) {
			phx_info(
				"rendezvous: the driver at %s:%u answers again; %s is at epoch %lu",
				x->addr, x->port, x->file, epoch);
			outage = false;
		}
		/* After a failure, or a quick answer that brought nothing new: no busy loop. */
		if (rc == F_NEWER)
			continue;
		if (rc == F_SAME && phx_now_ns(CLOCK_MONOTONIC) - start >= RETRY_MS * NS_PER_MS)
			continue;
		if (wait_fd(x, -1, 0, phx_now_ns(CLOCK_MONOTONIC) + RETRY_MS * NS_PER_MS) ==
		    F_STOPPED)
			break;
	}
	return NULL;
}

struct phx_agent_xrdv *phx_agent_xrdv_start(const char *env, const char *file)
{
	struct phx_agent_xrdv *x;
	pthread_condattr_t ca;
	sigset_t all, old;

	if (!env) {
		phx_debug("rendezvous: no " PHX_XRDV_ENV " from the driver; no role document");
		return NULL;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		phx_error("rendezvous: out of memory");
		return NULL;
	}
	x->stop_fd = -1;
	pthread_mutex_init(&x->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&x->written, &ca);
	pthread_condattr_destroy(&ca);
	if (phx_xrdv_env_parse(env, x->addr, sizeof(x->addr), &x->port, x->key) < 0) {
		phx_error("rendezvous: " PHX_XRDV_ENV " is not ADDR:PORT:KEY (64 hex digits); the "
			  "workers get no role document. Start the agents from the batch script's "
			  "phalanx-launch, which sets it");
		goto fail;
	}
	if (!file || !*file) {
		phx_error("rendezvous: no file for the role document; the workers get none");
		goto fail;
	}
	x->file = strdup(file);
	x->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!x->file || x->stop_fd < 0) {
		phx_error("rendezvous: cannot start (%s); the workers get no role document",
			  strerror(errno));
		goto fail;
	}
	/* Signals stay with the agent's signalfd, whatever the caller's mask is now. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	x->threaded = pthread_create(&x->thread, NULL, poll_driver, x) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!x->threaded) {
		phx_error("rendezvous: cannot start its thread; the workers get no role document. "
			  "Check the process limit ('ulimit -u')");
		goto fail;
	}
	return x;
fail:
	phx_agent_xrdv_stop(x);
	return NULL;
}

int phx_agent_xrdv_wait_first(struct phx_agent_xrdv *x, int timeout_ms)
{
	uint64_t deadline;
	struct timespec ts;
	int rc;

	if (!x)
		return -1;
	deadline = phx_now_ns(CLOCK_MONOTONIC) +
		   (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * NS_PER_MS;
	ts.tv_sec = (time_t)(deadline / 1000000000ull);
	ts.tv_nsec = (long)(deadline % 1000000000ull);
	pthread_mutex_lock(&x->lock);
	while (!x->epoch && pthread_cond_timedwait(&x->written, &x->lock, &ts) != ETIMEDOUT)
		;
	rc = x->epoch ? 0 : -1;
	pthread_mutex_unlock(&x->lock);
	return rc;
}

unsigned long phx_agent_xrdv_epoch(struct phx_agent_xrdv *x)
{
	unsigned long e;

	if (!x)
		return 0;
	pthread_mutex_lock(&x->lock);
	e = x->epoch;
	pthread_mutex_unlock(&x->lock);
	return e;
}

void phx_agent_xrdv_stop(struct phx_agent_xrdv *x)
{
	uint64_t one = 1;

	if (!x)
		return;
	if (x->threaded) {
		if (write(x->stop_fd, &one, sizeof(one)) < 0)
			phx_debug("rendezvous: cannot wake its thread: %s", strerror(errno));
		pthread_join(x->thread, NULL);
	}
	if (x->stop_fd >= 0)
		close(x->stop_fd);
	pthread_cond_destroy(&x->written);
	pthread_mutex_destroy(&x->lock);
	OPENSSL_cleanse(x->key, sizeof(x->key));
	free(x->file);
	free(x);
}
