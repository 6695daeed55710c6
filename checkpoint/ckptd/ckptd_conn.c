/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sockets of phalanx-ckptd: listeners, accepted connections, framed I/O.
 * What a message means is the handlers' business: they register by the
 * role of the peer (agent, driver, admin), and dispatch() calls them.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "checkpoint/ckptd/ckptd_clock.h"
#include "checkpoint/ckptd/ckptd_conn.h"
#include "checkpoint/ckptd/ckptd_job.h"
#include "common/log.h"

void ckptd_conn_handle(struct ckptd *d, enum phx_wire_role role, ckptd_msg_fn fn)
{
	d->handlers[role] = fn;
}

static int split_hostport(const char *hp, char *host, size_t hlen, char *port, size_t plen)
{
	const char *colon = strrchr(hp, ':');
	size_t n;

	if (!colon)
		return -1;
	n = (size_t)(colon - hp);
	if (hp[0] == '[' && n >= 2 && hp[n - 1] == ']') {
		hp++;
		n -= 2;
	}
	if (n >= hlen || strlen(colon + 1) >= plen)
		return -1;
	memcpy(host, hp, n);
	host[n] = '\0';
	snprintf(port, plen, "%s", colon + 1);
	return 0;
}

int ckptd_listen_tcp(struct ckptd *d, const char *hostport, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *ai;
	struct epoll_event ev = { .events = EPOLLIN };
	char host[256], port[16];
	int fd, one = 1, rc;

	if (split_hostport(hostport, host, sizeof(host), port, sizeof(port)) < 0)
		return phx_errf(err, errlen, "ckptd.listen \"%s\" is not HOST:PORT", hostport);
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc)
		return phx_errf(err, errlen, "ckptd.listen \"%s\": %s", hostport, gai_strerror(rc));
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 4096) < 0)
		goto fail;
	freeaddrinfo(ai);
	d->tcp_fd = fd;
	ev.data.ptr = &d->tcp_fd;
	epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev);
	return 0;
fail:
	rc = errno;
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return phx_errf(err, errlen,
			"cannot listen on %s: %s; is another phalanx-ckptd running, or is "
			"ckptd.listen wrong?",
			hostport, strerror(rc));
}

/*
 * The socket's directory, made when missing: only root or this daemon's
 * user may make entries there, or another user could put a link where the
 * socket goes.
 */
static int socket_dir(const char *path, char *err, size_t errlen)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)], *slash;
	struct stat st;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash)
		return phx_errf(err, errlen, "ckptd.socket %s is not an absolute path", path);
	slash[slash == dir ? 1 : 0] = '\0';
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return phx_errf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
	if (lstat(dir, &st) < 0)
		return phx_errf(err, errlen, "cannot look at %s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode) || (st.st_uid != 0 && st.st_uid != geteuid()) ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)))
		return phx_errf(err, errlen,
				"ckptd.socket's directory %s is not a directory that only root (or "
				"the daemon's user) can write; use one such as /run/phalanx",
				dir);
	return 0;
}

int ckptd_listen_unix(struct ckptd *d, const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct epoll_event ev = { .events = EPOLLIN };
	mode_t mask;
	int fd, rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return phx_errf(err, errlen, "ckptd.socket %s is longer than %zu bytes", path,
				sizeof(sa.sun_path) - 1);
	if (socket_dir(path, err, errlen) < 0)
		return -1;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return phx_errf(err, errlen, "socket: %s", strerror(errno));
	/* A socket file left by a daemon that died; a live one would hold the TCP port. */
	unlink(path);
	/*
	 * Anyone may connect: what a peer may do is decided by its SO_PEERCRED
	 * uid. bind makes the file 0666 itself; nothing is changed by path.
	 */
	mask = umask(0111);
	rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(mask);
	if (rc < 0 || listen(fd, 64) < 0) {
		int e = errno;

		close(fd);
		return phx_errf(err, errlen, "cannot listen on %s: %s", path, strerror(e));
	}
	d->unix_fd = fd;
	snprintf(d->socket_path, sizeof(d->socket_path), "%s", path);
	ev.data.ptr = &d->unix_fd;
	epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev);
	return 0;
}

static void peer_name(struct ckptd_conn *c)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";

	if (c->kind == CKPTD_ADMIN) {
		struct ucred cred;

		len = sizeof(cred);
		if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
			c->peer_uid = cred.uid;
			snprintf(c->peer, sizeof(c->peer), "uid %u (pid %d)", (unsigned)cred.uid,
				 (int)cred.pid);
		} else {
			c->peer_uid = (uid_t)-1; /* nobody: refused everything */
			snprintf(c->peer, sizeof(c->peer), "unknown local peer");
		}
		return;
	}
	/* Nobody until a MUNGE credential says otherwise (an admin on TCP). */
	c->peer_uid = (uid_t)-1;
	if (getpeername(c->fd, (struct sockaddr *)&ss, &len) == 0) {
		if (ss.ss_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host,
				  sizeof(host));
		else if (ss.ss_family == AF_INET6)
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host,
				  sizeof(host));
	}
	snprintf(c->peer, sizeof(c->peer), "%s", host);
}

static void listeners(struct ckptd *d, uint32_t events)
{
	struct epoll_event ev = { .events = events };

	ev.data.ptr = &d->tcp_fd;
	if (d->tcp_fd >= 0)
		epoll_ctl(d->epfd, EPOLL_CTL_MOD, d->tcp_fd, &ev);
	ev.data.ptr = &d->unix_fd;
	if (d->unix_fd >= 0)
		epoll_ctl(d->epfd, EPOLL_CTL_MOD, d->unix_fd, &ev);
}

/*
 * Out of descriptors: a level-triggered listener would wake the loop for
 * ever, so the listeners rest for a second while connections come and go.
 */
static void pause_accept(struct ckptd *d)
{
	if (d->accept_paused_until > 0)
		return;
	phx_warn("out of file descriptors with %u agents connected; not accepting for a second. "
		 "Raise the open-file limit (LimitNOFILE in the unit)",
		 d->agents);
	listeners(d, 0);
	d->accept_paused_until = ckptd_now() + 1.0;
}

/* Still to come: the hello; on TCP an admin's checked credential, an agent's register. */
static int handshaking(const struct ckptd_conn *c)
{
	if (c->kind == CKPTD_ADMIN)
		return c->order.stage == 0;
	if (c->order.stage && c->order.role == PHX_ROLE_ADMIN)
		return !c->authed;
	return !c->job;
}

void ckptd_conn_sweep(struct ckptd *d)
{
	double now = ckptd_now();

	if (d->accept_paused_until > 0 && now >= d->accept_paused_until) {
		listeners(d, EPOLLIN);
		d->accept_paused_until = 0;
	}
	for (struct ckptd_conn *c = d->conns; c; c = c->next) {
		int waiting = handshaking(c);

		if (c->dead)
			continue;
		if (c->kind == CKPTD_AGENT && !c->authed && now - c->since > CKPTD_AUTH_S)
			ckptd_conn_fail(d, c, "not authenticated within 5 seconds");
		else if (waiting && now - c->since > CKPTD_HANDSHAKE_S)
			ckptd_conn_fail(d, c, "no handshake within 10 seconds");
	}
}

/* Whether one more unauthenticated connection from c's address is too many. */
static int preauth_full(const struct ckptd *d, const struct ckptd_conn *c)
{
	unsigned same = 0;

	if (d->preauth >= CKPTD_PREAUTH_TOTAL)
		return 1;
	if (d->preauth < CKPTD_PREAUTH_PER_ADDR)
		return 0;
	for (const struct ckptd_conn *o = d->conns; o; o = o->next)
		if (o->kind == CKPTD_AGENT && !o->authed && !o->dead && !strcmp(o->peer, c->peer))
			same++;
	return same >= CKPTD_PREAUTH_PER_ADDR;
}

void ckptd_conn_authed(struct ckptd *d, struct ckptd_conn *c)
{
	if (c->authed)
		return;
	c->authed = 1;
	d->preauth--;
	/* Proven: an agent's manifests and registers may now come in full-size frames. */
	c->rd.max = c->order.role == PHX_ROLE_ADMIN ? CKPTD_ADMIN_FRAME : PHX_WIRE_MAX_FRAME;
}

void ckptd_conn_close_all(struct ckptd *d)
{
	for (struct ckptd_conn *c = d->conns; c; c = c->next)
		ckptd_conn_fail(d, c, NULL);
	ckptd_reap(d);
}

void ckptd_accept(struct ckptd *d, int lfd, enum ckptd_conn_kind kind)
{
	for (;;) {
		struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
		struct ckptd_conn *c;
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE)
				pause_accept(d);
			else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				phx_warn("accept: %s", strerror(errno));
			return;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			return;
		}
		c->fd = fd;
		c->kind = kind;
		c->serial = ++d->conn_serial;
		if (kind == CKPTD_AGENT)
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		phx_wire_reader_init(&c->rd,
				     kind == CKPTD_ADMIN ? CKPTD_ADMIN_FRAME : CKPTD_PREAUTH_FRAME);
		phx_wire_order_init(&c->order, PHX_SIDE_DAEMON, 0);
		peer_name(c);
		if (kind == CKPTD_AGENT && preauth_full(d, c)) {
			/* Dropped unread: nothing it sends costs more than the accept. */
			d->m.preauth_refused++;
			phx_debug("refusing a connection from %s: too many unauthenticated ones",
				  c->peer);
			close(fd);
			free(c);
			continue;
		}
		ev.data.ptr = c;
		if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			close(fd);
			free(c);
			continue;
		}
		if (kind == CKPTD_ADMIN)
			d->admins++;
		else
			d->preauth++;
		c->since = ckptd_now();
		c->next = d->conns;
		if (d->conns)
			d->conns->prev = c;
		d->conns = c;
	}
}

static void arm_out(struct ckptd *d, struct ckptd_conn *c, int on)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | (on ? EPOLLOUT : 0),
				  .data.ptr = c };

	if (c->out_armed == on)
		return;
	epoll_ctl(d->epfd, EPOLL_CTL_MOD, c->fd, &ev);
	c->out_armed = on;
}

static void flush(struct ckptd *d, struct ckptd_conn *c)
{
	int rc = phx_wire_writer_flush(&c->wr, c->fd);

	if (rc < 0) {
		ckptd_conn_fail(d, c, strerror(-rc));
		return;
	}
	arm_out(d, c, rc == 0);
}

void ckptd_send_frame(struct ckptd *d, struct ckptd_conn *c, const char *frame, size_t len)
{
	if (c->dead)
		return;
	if (phx_wire_writer_pending(&c->wr) + len > CKPTD_MAX_PENDING_OUT) {
		ckptd_conn_fail(d, c, "it reads too slowly (too much output queued)");
		return;
	}
	if (phx_wire_writer_put_frame(&c->wr, frame, len) < 0) {
		ckptd_conn_fail(d, c, "out of memory");
		return;
	}
	flush(d, c);
}

void ckptd_send(struct ckptd *d, struct ckptd_conn *c, struct json_object *obj)
{
	size_t len;
	char *frame = phx_wire_frame(obj, &len);

	if (!frame) {
		ckptd_conn_fail(d, c, "cannot encode a message");
		return;
	}
	ckptd_send_frame(d, c, frame, len);
	free(frame);
}

void ckptd_broadcast(struct ckptd *d, struct ckptd_job *j, struct json_object *obj)
{
	size_t len;
	char *frame = phx_wire_frame(obj, &len);

	if (!frame)
		return;
	/* Backwards: a failed send takes the agent out only at the reap. */
	for (size_t i = j->nagents; i-- > 0;)
		ckptd_send_frame(d, j->agents[i], frame, len);
	free(frame);
}

void ckptd_conn_fail(struct ckptd *d, struct ckptd_conn *c, const char *why)
{
	if (c->dead)
		return;
	if (why)
		phx_info("closing %s connection from %s%s%s: %s",
			 c->kind == CKPTD_ADMIN || c->order.role == PHX_ROLE_ADMIN ? "admin"
										   : "agent",
			 c->peer, c->node[0] ? " node " : "", c->node, why);
	c->dead = 1;
	c->next_dead = d->dead;
	d->dead = c;
}

void ckptd_refuse(struct ckptd *d, struct ckptd_conn *c, const char *fmt, ...)
{
	char reason[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	d->m.protocol_errors++;
	/* Best effort: the reason goes out if the socket takes it now. */
	if (phx_wire_writer_put(&c->wr, phx_wire_error(reason)) == 0)
		phx_wire_writer_flush(&c->wr, c->fd);
	ckptd_conn_fail(d, c, reason);
}

void ckptd_reap(struct ckptd *d)
{
	while (d->dead) {
		struct ckptd_conn *c = d->dead;

		d->dead = c->next_dead;
		ckptd_job_detach(d, c);
		if (c->kind == CKPTD_ADMIN)
			d->admins--;
		else if (!c->authed)
			d->preauth--;
		if (c->prev)
			c->prev->next = c->next;
		else
			d->conns = c->next;
		if (c->next)
			c->next->prev = c->prev;
		epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		phx_wire_reader_free(&c->rd);
		phx_wire_writer_free(&c->wr);
		free(c);
	}
}

struct ckptd_conn *ckptd_conn_find(struct ckptd *d, uint64_t serial)
{
	for (struct ckptd_conn *c = d->conns; c; c = c->next)
		if (c->serial == serial)
			return c->dead ? NULL : c;
	return NULL;
}

/* The admin socket's peers are admins from the start; a TCP peer is what its hello said. */
static ckptd_msg_fn handler_of(const struct ckptd *d, const struct ckptd_conn *c)
{
	if (c->kind == CKPTD_ADMIN)
		return d->handlers[PHX_ROLE_ADMIN];
	return d->handlers[c->order.role];
}

static void dispatch(struct ckptd *d, struct ckptd_conn *c, const char *body, size_t len)
{
	struct phx_wire_msg m;
	ckptd_msg_fn handler;
	char err[512];

	if (phx_wire_decode(body, len, PHX_SIDE_DAEMON, &m, err, sizeof(err)) < 0 ||
	    phx_wire_order_accept(&c->order, &m, err, sizeof(err)) < 0) {
		ckptd_refuse(d, c, "%s", err);
		return;
	}
	handler = handler_of(d, c);
	/* An admin may come over TCP too (with a MUNGE credential); an agent only so. */
	if (m.type == PHX_MSG_HELLO && m.role != PHX_ROLE_ADMIN && c->kind == CKPTD_ADMIN)
		ckptd_refuse(d, c, "hello: role agent on the admin socket");
	else if (!handler)
		ckptd_refuse(d, c, "%s: no handler for %s connections", phx_msg_name(m.type),
			     c->kind == CKPTD_ADMIN ? "admin" : "agent");
	else
		handler(d, c, &m);
	phx_wire_msg_free(&m);
}

void ckptd_conn_io(struct ckptd *d, struct ckptd_conn *c, uint32_t events)
{
	const char *body;
	size_t len;
	char err[256];
	int rc = 0;

	if (events & EPOLLOUT)
		flush(d, c);
	if (c->dead || !(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
		return;
	/* Bounded work per wakeup, so one busy peer cannot starve the rest. */
	for (int round = 0; round < 16 && !c->dead; round++) {
		ssize_t n = phx_wire_reader_read(&c->rd, c->fd);

		if (n == -EAGAIN || n == -EINTR)
			break;
		if (n <= 0) {
			ckptd_conn_fail(d, c, n == 0 ? "closed by the peer" : strerror((int)-n));
			return;
		}
		while (!c->dead &&
		       (rc = phx_wire_reader_next(&c->rd, &body, &len, err, sizeof(err))) == 1)
			dispatch(d, c, body, len);
		if (!c->dead && rc < 0) {
			ckptd_refuse(d, c, "%s", err);
			return;
		}
	}
}
