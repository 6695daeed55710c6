/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/hmac.h>

#include "checkpoint/node/partner_server.h"
#include "common/clock.h"
#include "common/file.h"
#include "common/hex.h"
#include "common/log.h"
#include "common/token.h"

#define COPY_PIECE (8u << 20)

int phx_partner_secret_from_token(const char *token_hex, uint8_t secret[PHX_PARTNER_SECRET_BYTES])
{
	static const char label[] = "phalanx-partner:v1";
	unsigned len = 0;

	if (!token_hex || strlen(token_hex) != PHX_TOKEN_HEX_LEN ||
	    strspn(token_hex, PHX_HEX_LOWER) != PHX_TOKEN_HEX_LEN)
		return -1;
	if (!HMAC(EVP_sha256(), token_hex, PHX_TOKEN_HEX_LEN, (const unsigned char *)label,
		  sizeof(label) - 1, secret, &len))
		return -1;
	return len == PHX_PARTNER_SECRET_BYTES ? 0 : -1;
}

static void set_timeout(int fd, int opt, int ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof(tv));
}

/* dir/rank-R/gen-G.copy: the signed header, then the shard; tmp + fsync + rename. */
static int persist(const struct phx_partner_server *s, const struct phx_partner_copy *c, char *path,
		   size_t pathlen)
{
	uint8_t hdr[PHX_PARTNER_HDR_BYTES];
	char tmp[4500];
	int fd, rc;

	snprintf(path, pathlen, "%s/rank-%u", s->dir, c->hdr.rank);
	rc = phx_mkdir_durable(path, 0700);
	if (rc)
		return rc;
	snprintf(path, pathlen, "%s/rank-%u/gen-%012llu.copy", s->dir, c->hdr.rank,
		 (unsigned long long)c->hdr.gen);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (phx_partner_hdr_encode(&c->hdr, s->secret, hdr) < 0)
		return -EINVAL;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	rc = phx_write_all(fd, hdr, sizeof(hdr));
	if (!rc)
		rc = phx_write_all(fd, c->data, c->hdr.bytes);
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	close(fd);
	if (!rc && rename(tmp, path) < 0)
		rc = -errno;
	if (!rc)
		rc = phx_file_sync_parent(path);
	if (rc)
		unlink(tmp);
	return rc;
}

static int newest_first(const void *a, const void *b)
{
	unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

unsigned phx_partner_server_disk_keep(const struct phx_partner_server *s)
{
	return s->disk_keep > 2 ? s->disk_keep : 2;
}

void phx_partner_server_hold(struct phx_partner_server *s, uint64_t gen)
{
	__atomic_store_n(&s->hold_gen, gen, __ATOMIC_RELAXED);
}

/*
 * Removes the copies of rank on disk beyond the newest disk_keep
 * generations, but for the newest one at or below the held generation:
 * the one a relaunch restores when the commits stopped.
 */
static void collect(struct phx_partner_server *s, uint32_t rank)
{
	unsigned keep = phx_partner_server_disk_keep(s);
	uint64_t hold = __atomic_load_n(&s->hold_gen, __ATOMIC_RELAXED);
	bool held = false;
	unsigned long long gens[256];
	char dir[4200], path[4500];
	struct dirent *e;
	size_t n = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/rank-%u", s->dir, rank);
	d = opendir(dir);
	while (d && (e = readdir(d)) && n < sizeof(gens) / sizeof(gens[0])) {
		unsigned long long gen;
		int end = 0;

		if (sscanf(e->d_name, "gen-%llu%n", &gen, &end) == 1 &&
		    !strcmp(e->d_name + end, ".copy"))
			gens[n++] = gen;
	}
	if (d)
		closedir(d);
	qsort(gens, n, sizeof(gens[0]), newest_first);
	for (size_t i = 0; i < n; i++) {
		bool restorable = hold && gens[i] <= hold && !held;

		held |= restorable;
		if (i < keep || restorable)
			continue;
		snprintf(path, sizeof(path), "%s/gen-%012llu.copy", dir, gens[i]);
		unlink(path);
	}
}

static void keep(struct phx_partner_server *s, struct phx_partner_copy *c)
{
	char path[4400] = "";
	uint32_t rank = c->hdr.rank;
	uint64_t gen = c->hdr.gen;
	int rc = s->dir[0] ? persist(s, c, path, sizeof(path)) : 0;

	if (rc < 0)
		phx_warn("partner copy of rank %u generation %llu kept in memory only: "
			 "cannot write %s: %s; check the node-local checkpoint directory",
			 rank, (unsigned long long)gen, path, strerror(-rc));
	pthread_mutex_lock(&s->mu);
	phx_partner_store_put(&s->store, c);
	s->received++;
	if (s->dir[0])
		collect(s, rank);
	pthread_mutex_unlock(&s->mu);
	phx_debug("partner copy of rank %u generation %llu received and verified", rank,
		  (unsigned long long)gen);
}

/* 1, 2, 4, ...: a flood of connections is not a flood of log lines. */
static int worth_a_line(unsigned long n)
{
	return !(n & (n - 1));
}

/*
 * A sender whose first header's MAC checked keeps its slot, and is told
 * so: it sends the shard only then (phx_partner_open()).
 */
static int prove(struct phx_partner_server *s, struct phx_partner_conn *conn, char *err,
		 size_t errlen)
{
	static const uint8_t welcome = PHX_PARTNER_WELCOME;

	if (conn->proven)
		return 0;
	pthread_mutex_lock(&s->mu);
	conn->proven = 1;
	pthread_mutex_unlock(&s->mu);
	if (send(conn->fd, &welcome, 1, MSG_NOSIGNAL) == 1)
		return 0;
	return phx_errf(err, errlen, "cannot welcome the sender: %s", strerror(errno));
}

/*
 * Waits, up to lim.header_ms from the connection, for a whole first
 * header without taking a byte of it, so that until this thread claims it
 * the accept thread can still check it in place (judge()) rather than push
 * out a partner whose header is already here. 0: claimed; 1: the sender
 * left or was pushed out; -1 with err.
 */
static int await_first_header(struct phx_partner_server *s, struct phx_partner_conn *conn,
			      char *err, size_t errlen)
{
	uint64_t deadline = conn->since_ns + (uint64_t)s->lim.header_ms * 1000000;
	struct pollfd p = { .fd = conn->fd, .events = POLLIN };
	int whole = PHX_PARTNER_HDR_BYTES, one = 1, n = 0, rc, claimed;

	/* poll() wakes on a whole header (or the end), not on each trickled byte. */
	setsockopt(conn->fd, SOL_SOCKET, SO_RCVLOWAT, &whole, sizeof(whole));
	do {
		int left = phx_ms_until(deadline);

		rc = left > 0 ? poll(&p, 1, left) : 0;
	} while (rc < 0 && errno == EINTR);
	setsockopt(conn->fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
	if (rc > 0 && ioctl(conn->fd, FIONREAD, &n) < 0)
		n = 0;
	pthread_mutex_lock(&s->mu);
	claimed = n >= whole && !conn->evicted;
	conn->reading = claimed;
	pthread_mutex_unlock(&s->mu);
	if (claimed)
		return 0;
	if (rc == 0)
		return phx_errf(err, errlen, "no whole header within %d ms of connecting",
				s->lim.header_ms);
	if (rc < 0)
		return phx_errf(err, errlen, "waiting for a partner header: %s", strerror(errno));
	if (n > 0)
		return phx_errf(err, errlen, "the connection ended after %d of a header's %d bytes",
				n, whole);
	return 1;
}

/* Why a connection ended, said once per sender that proved itself, sparingly for strangers. */
static void refused(struct phx_partner_server *s, struct phx_partner_conn *conn, const char *err)
{
	unsigned long n = 0;
	int proven, evicted;

	pthread_mutex_lock(&s->mu);
	proven = conn->proven;
	evicted = conn->evicted;
	s->refused += !evicted;
	if (!proven && !evicted)
		n = ++s->strangers;
	pthread_mutex_unlock(&s->mu);
	if (proven)
		phx_warn("partner copy refused: %s; the sender's copy does not count as held", err);
	else if (n && worth_a_line(n))
		phx_warn("partner copies: %lu connection(s) ended without a valid signed header "
			 "(the last: %s); a sender without the job's secret is not the partner",
			 n, err);
}

static void serve(struct phx_partner_server *s, struct phx_partner_conn *conn)
{
	struct phx_partner_copy c;
	char err[512];
	int rc;

	set_timeout(conn->fd, SO_RCVTIMEO, s->timeout_ms);
	rc = await_first_header(s, conn, err, sizeof(err));
	while (!rc) {
		rc = phx_partner_recv_header(conn->fd, s->secret, &s->lim, &c, err, sizeof(err));
		if (!rc)
			rc = prove(s, conn, err, sizeof(err));
		if (rc)
			break;
		rc = phx_partner_recv_shard(conn->fd, s->digest_threads, &c, err, sizeof(err));
		if (!rc)
			keep(s, &c);
	}
	if (rc < 0)
		refused(s, conn, err);
}

static void *conn_main(void *arg)
{
	struct phx_partner_conn *c = arg;
	struct phx_partner_server *s = c->s;

	serve(s, c);
	pthread_mutex_lock(&s->mu);
	close(c->fd);
	c->fd = -1;
	c->done = 1;
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* Joins the threads of senders that are gone; all: stops the others first. */
static void reap(struct phx_partner_server *s, int all)
{
	for (int i = 0; i < PHX_PARTNER_CONNS; i++) {
		struct phx_partner_conn *c = &s->conns[i];
		int join;

		if (!c->used)
			continue;
		pthread_mutex_lock(&s->mu);
		if (all && !c->done)
			shutdown(c->fd, SHUT_RDWR);
		join = c->done || all;
		pthread_mutex_unlock(&s->mu);
		if (!join)
			continue;
		pthread_join(c->thread, NULL);
		c->used = 0;
	}
}

/*
 * What the accept thread makes of a connection not yet proven, without
 * taking its bytes: 1, a whole header signed with the job's secret waits
 * (the partner, whose thread has not come to it yet); -1, a whole header
 * that is not; 0, not a whole header yet.
 */
static int judge(const struct phx_partner_server *s, const struct phx_partner_conn *c)
{
	uint8_t hdr[PHX_PARTNER_HDR_BYTES];
	struct phx_partner_hdr h;
	char err[8];
	ssize_t n = recv(c->fd, hdr, sizeof(hdr), MSG_PEEK | MSG_DONTWAIT);
	int rc;

	if (n != (ssize_t)sizeof(hdr))
		return 0;
	rc = phx_partner_hdr_decode(hdr, sizeof(hdr), s->secret, &s->lim, &h, err, sizeof(err));
	return rc < 0 ? -1 : 1;
}

/*
 * The connection to push out (from addr only, when same_addr): a forged
 * header first, else the oldest without a whole header; never one proven,
 * being read, or whose signed header waits. Under mu.
 */
static struct phx_partner_conn *victim(struct phx_partner_server *s, uint32_t addr, int same_addr)
{
	struct phx_partner_conn *old = NULL;

	for (int i = 0; i < PHX_PARTNER_CONNS; i++) {
		struct phx_partner_conn *c = &s->conns[i];
		int verdict;

		if (!c->used || c->done || c->proven || c->reading || c->evicted ||
		    (same_addr && c->addr != addr))
			continue;
		verdict = judge(s, c);
		if (verdict < 0)
			return c;
		if (!verdict && (!old || c->since_ns < old->since_ns))
			old = c;
	}
	return old;
}

/* Pushes out victim() and frees its slot; NULL when no connection may go. */
static struct phx_partner_conn *evict(struct phx_partner_server *s, uint32_t addr, int same_addr)
{
	struct phx_partner_conn *old;
	unsigned long n = 0;

	pthread_mutex_lock(&s->mu);
	old = victim(s, addr, same_addr);
	if (old) {
		old->evicted = 1;
		shutdown(old->fd, SHUT_RDWR);
		n = ++s->evictions;
	}
	pthread_mutex_unlock(&s->mu);
	if (!old)
		return NULL;
	/* Its thread was waiting for a header: it ends at once. */
	pthread_join(old->thread, NULL);
	old->used = 0;
	if (worth_a_line(n))
		phx_warn("partner copies: %lu connection(s) without a signed header pushed out for "
			 "newer ones: at most %d senders, %d from one address",
			 n, PHX_PARTNER_CONNS, PHX_PARTNER_CONNS_PER_ADDR);
	return old;
}

/* A free slot for a sender from addr, or NULL when it must be turned away. */
static struct phx_partner_conn *slot_for(struct phx_partner_server *s, uint32_t addr)
{
	struct phx_partner_conn *free_slot = NULL;
	unsigned same = 0;

	for (int i = 0; i < PHX_PARTNER_CONNS; i++) {
		if (!s->conns[i].used)
			free_slot = free_slot ? free_slot : &s->conns[i];
		else if (s->conns[i].addr == addr)
			same++;
	}
	if (same >= PHX_PARTNER_CONNS_PER_ADDR)
		return evict(s, addr, 1);
	return free_slot ? free_slot : evict(s, addr, 0);
}

static void admit(struct phx_partner_server *s, int fd, uint32_t addr)
{
	struct phx_partner_conn *c = slot_for(s, addr);
	unsigned long n;

	if (c) {
		*c = (struct phx_partner_conn){ .s = s,
						.fd = fd,
						.addr = addr,
						.since_ns = phx_now_ns(CLOCK_MONOTONIC),
						.used = 1 };
		if (!pthread_create(&c->thread, NULL, conn_main, c))
			return;
		c->used = 0;
	}
	pthread_mutex_lock(&s->mu);
	n = ++s->turned_away;
	pthread_mutex_unlock(&s->mu);
	close(fd);
	if (worth_a_line(n))
		phx_warn("partner copies: %lu connection(s) turned away: at most %d senders, %d "
			 "from one address, all of them proven; the node's partner is one sender",
			 n, PHX_PARTNER_CONNS, PHX_PARTNER_CONNS_PER_ADDR);
}

static void *server_main(void *arg)
{
	struct phx_partner_server *s = arg;
	struct pollfd p[2] = { { .fd = s->listen_fd, .events = POLLIN },
			       { .fd = s->stop_fd, .events = POLLIN } };

	for (;;) {
		struct sockaddr_in sa;
		socklen_t len = sizeof(sa);
		int fd;

		/* Wakes now and then to join the threads of senders that left. */
		if (poll(p, 2, 1000) < 0 && errno != EINTR)
			break;
		reap(s, 0);
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		fd = accept4(s->listen_fd, (struct sockaddr *)&sa, &len, SOCK_CLOEXEC);
		if (fd >= 0)
			admit(s, fd, sa.sin_addr.s_addr);
	}
	reap(s, 1);
	return NULL;
}

static int listen_on(struct phx_partner_server *s, const char *addr, uint16_t port, char *err,
		     size_t errlen)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	socklen_t len = sizeof(sa);
	int one = 1;

	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
		return phx_errf(err, errlen, "partner address '%s' is not an IPv4 address", addr);
	s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->listen_fd < 0)
		return phx_errf(err, errlen, "socket: %s", strerror(errno));
	setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(s->listen_fd, PHX_PARTNER_CONNS) < 0 ||
	    getsockname(s->listen_fd, (struct sockaddr *)&sa, &len) < 0)
		return phx_errf(err, errlen, "cannot listen on %s:%u for partner copies: %s", addr,
				port, strerror(errno));
	s->port = ntohs(sa.sin_port);
	return 0;
}

int phx_partner_server_start(struct phx_partner_server *s, const char *addr, uint16_t port,
			     char *err, size_t errlen)
{
	s->listen_fd = s->stop_fd = -1;
	memset(s->conns, 0, sizeof(s->conns));
	if (!s->lim.header_ms)
		s->lim.header_ms = PHX_PARTNER_HEADER_MS;
	if (phx_partner_store_init(&s->store, s->lim.nranks) < 0)
		return phx_errf(err, errlen, "no memory for %u ranks", s->lim.nranks);
	pthread_mutex_init(&s->mu, NULL);
	if (listen_on(s, addr, port, err, errlen) < 0)
		goto fail;
	s->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (s->stop_fd < 0) {
		phx_errf(err, errlen, "eventfd: %s", strerror(errno));
		goto fail;
	}
	if (pthread_create(&s->thread, NULL, server_main, s)) {
		phx_errf(err, errlen, "cannot start the partner thread");
		goto fail;
	}
	return 0;
fail:
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	if (s->stop_fd >= 0)
		close(s->stop_fd);
	phx_partner_store_free(&s->store);
	pthread_mutex_destroy(&s->mu);
	return -1;
}

void phx_partner_server_stop(struct phx_partner_server *s)
{
	uint64_t one = 1;

	/* Its thread shuts every sender's connection down and joins them. */
	if (write(s->stop_fd, &one, sizeof(one)) < 0)
		phx_warn("cannot wake the partner thread: %s", strerror(errno));
	pthread_join(s->thread, NULL);
	close(s->listen_fd);
	close(s->stop_fd);
	phx_partner_store_free(&s->store);
	pthread_mutex_destroy(&s->mu);
}

int phx_partner_server_newest(struct phx_partner_server *s, uint32_t rank, uint64_t *gen)
{
	int rc;

	pthread_mutex_lock(&s->mu);
	rc = phx_partner_store_newest(&s->store, rank, gen);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int phx_partner_connect(const char *addr, uint16_t port, int timeout_ms, char *err, size_t errlen)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd;

	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
		return phx_errf(err, errlen, "partner address '%s' is not an IPv4 address", addr);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return phx_errf(err, errlen, "socket: %s", strerror(errno));
	set_timeout(fd, SO_SNDTIMEO, timeout_ms);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		phx_errf(err, errlen, "cannot reach the partner at %s:%u: %s", addr, port,
			 strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* One try of phx_partner_open(): 1 when the server closed before its welcome. */
static int open_once(const char *addr, uint16_t port, int timeout_ms,
		     const uint8_t hdr[PHX_PARTNER_HDR_BYTES], int *fd, char *err, size_t errlen)
{
	struct pollfd p = { .events = POLLIN };
	uint8_t b = 0;
	int rc, n = 0;

	*fd = phx_partner_connect(addr, port, timeout_ms, err, errlen);
	if (*fd < 0)
		return -1;
	p.fd = *fd;
	rc = phx_send_all(*fd, hdr, PHX_PARTNER_HDR_BYTES);
	if (!rc) {
		do
			n = poll(&p, 1, timeout_ms);
		while (n < 0 && errno == EINTR);
	}
	if (n == 1 && recv(*fd, &b, 1, 0) == 1 && b == PHX_PARTNER_WELCOME)
		return 0;
	close(*fd);
	*fd = -1;
	if (!rc && n == 0)
		return phx_errf(err, errlen,
				"the partner at %s:%u did not take a copy's header within %d ms",
				addr, port, timeout_ms);
	phx_errf(err, errlen,
		 "the partner at %s:%u closed the connection before taking a copy's header%s%s",
		 addr, port, rc ? ": " : "", rc ? strerror(-rc) : "");
	return 1;
}

int phx_partner_open(const char *addr, uint16_t port, int timeout_ms,
		     const uint8_t hdr[PHX_PARTNER_HDR_BYTES], char *err, size_t errlen)
{
	int fd = -1;

	for (int i = 0; i < PHX_PARTNER_OPEN_TRIES; i++)
		if (open_once(addr, port, timeout_ms, hdr, &fd, err, errlen) <= 0)
			break;
	return fd;
}

int phx_partner_send_file(int *fd, const char *addr, uint16_t port, int timeout_ms,
			  const char *path, char *err, size_t errlen)
{
	uint8_t hdr[PHX_PARTNER_HDR_BYTES];
	char *buf = malloc(COPY_PIECE);
	int in = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
	ssize_t n;

	if (in < 0 || !buf) {
		rc = phx_errf(err, errlen, "cannot read %s: %s", path,
			      strerror(in < 0 ? errno : ENOMEM));
		goto out;
	}
	if (*fd < 0) {
		/* A regular file: short only at its end. */
		if (read(in, hdr, sizeof(hdr)) != (ssize_t)sizeof(hdr)) {
			rc = phx_errf(err, errlen, "%s is shorter than a copy's header", path);
			goto out;
		}
		*fd = phx_partner_open(addr, port, timeout_ms, hdr, err, errlen);
		if (*fd < 0) {
			rc = -1;
			goto out;
		}
	}
	while ((n = read(in, buf, COPY_PIECE)) != 0) {
		int sent;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = phx_errf(err, errlen, "reading %s: %s", path, strerror(errno));
			break;
		}
		sent = phx_send_all(*fd, buf, (size_t)n);
		if (sent) {
			rc = phx_errf(err, errlen, "sending %s: %s", path, strerror(-sent));
			break;
		}
	}
out:
	if (in >= 0)
		close(in);
	free(buf);
	return rc;
}
