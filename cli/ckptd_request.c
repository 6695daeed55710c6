/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Talking to phalanx-ckptd as an admin client: on its host over the Unix
 * socket, where the daemon takes the caller's uid from the socket's peer
 * credentials; from any other host over its TCP port, where the hello
 * carries a MUNGE credential that munged made for the caller's uid. The
 * daemon decides what the caller may see from that uid alone.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>
#include <munge.h>

#include "checkpoint/proto/ckpt_client.h"
#include "checkpoint/proto/ckpt_wire.h"
#include "cli/ckptd_request.h"
#include "common/conf.h"
#include "common/file.h"
#include "common/log.h"

/* A daemon that does not answer in this long is not waited for. */
#define REQUEST_TIMEOUT_S 30

int phx_ckptd_where_opt(struct phx_ckptd_where *w, int c, const char *arg)
{
	if (c == PHX_CKPTD_OPT_SOCKET)
		w->socket = arg;
	else if (c == PHX_CKPTD_OPT_SERVER)
		w->server = arg;
	else if (c == PHX_CKPTD_OPT_CONFIG)
		w->config = arg;
	else
		return 0;
	return 1;
}

int phx_ckptd_roundtrip(struct phx_ckptd_admin *a, struct json_object *obj, struct phx_wire_msg *m)
{
	const char *body;
	size_t len, flen;
	char err[512], *frame = phx_wire_frame(obj, &flen);
	int rc;

	if (!frame || phx_send_all(a->fd, frame, flen) < 0) {
		free(frame);
		phx_error("cannot send to phalanx-ckptd at %s: %s", a->name, strerror(errno));
		return -1;
	}
	free(frame);
	while ((rc = phx_wire_reader_next(&a->rd, &body, &len, err, sizeof(err))) == 0) {
		ssize_t n = phx_wire_reader_read(&a->rd, a->fd);

		if (n == -EAGAIN) {
			phx_error("phalanx-ckptd at %s did not answer in %d s; is it overloaded?",
				  a->name, REQUEST_TIMEOUT_S);
			return -1;
		}
		if (n <= 0) {
			phx_error("phalanx-ckptd at %s closed the connection%s%s", a->name,
				  n < 0 ? ": " : "", n < 0 ? strerror((int)-n) : "");
			return -1;
		}
	}
	if (rc < 0 || phx_wire_decode(body, len, PHX_SIDE_CLIENT, m, err, sizeof(err)) < 0) {
		phx_error("phalanx-ckptd sent a bad answer: %s", err);
		return -1;
	}
	if (m->type == PHX_MSG_ERROR) {
		phx_error("phalanx-ckptd: %s", m->reason);
		phx_wire_msg_free(m);
		return -1;
	}
	return 0;
}

static int connect_unix(struct phx_ckptd_admin *a, const char *path, int tcp_known)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	snprintf(a->name, sizeof(a->name), "%s", path);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	a->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (a->fd >= 0 && connect(a->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return 0;
	phx_error("cannot reach phalanx-ckptd at %s: %s; is it running (systemctl status "
		  "phalanx-ckptd), and is ckptd.socket right?%s",
		  path, strerror(errno),
		  tcp_known ? ""
			    : " From another host, give --server HOST:PORT or set ckptd.address");
	return -1;
}

/* Connects to HOST:PORT within the request timeout. */
static int connect_tcp(struct phx_ckptd_admin *a, const char *hostport)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL, *p;
	char host[256], *colon;
	int rc, e = 0;

	snprintf(a->name, sizeof(a->name), "%s", hostport);
	snprintf(host, sizeof(host), "%s", hostport);
	colon = strrchr(host, ':');
	if (!colon || colon == host || !colon[1]) {
		phx_error("--server '%s' is not HOST:PORT", hostport);
		return -1;
	}
	*colon = '\0';
	if (host[0] == '[' && colon[-1] == ']') {
		colon[-1] = '\0';
		memmove(host, host + 1, strlen(host));
	}
	rc = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rc) {
		phx_error("cannot resolve phalanx-ckptd's %s: %s", hostport, gai_strerror(rc));
		return -1;
	}
	for (p = ai; p && a->fd < 0; p = p->ai_next) {
		struct pollfd pfd = { .events = POLLOUT };
		socklen_t len = sizeof(e);

		pfd.fd = socket(p->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (pfd.fd < 0)
			continue;
		if (connect(pfd.fd, p->ai_addr, p->ai_addrlen) == 0 ||
		    (errno == EINPROGRESS && poll(&pfd, 1, REQUEST_TIMEOUT_S * 1000) == 1 &&
		     getsockopt(pfd.fd, SOL_SOCKET, SO_ERROR, &e, &len) == 0 && e == 0))
			a->fd = pfd.fd;
		else {
			e = e ? e : errno ? errno : ETIMEDOUT;
			close(pfd.fd);
		}
	}
	freeaddrinfo(ai);
	if (a->fd < 0) {
		phx_error("cannot reach phalanx-ckptd at %s: %s; is it running, and is its "
			  "ckptd.listen reachable from here?",
			  hostport, strerror(e));
		return -1;
	}
	return 0;
}

/* A credential for this uid, good for one decode at the daemon. */
static char *munge_cred(const char *munge_socket)
{
	munge_ctx_t ctx = munge_ctx_create();
	char *cred = NULL;
	munge_err_t e = EMUNGE_NO_MEMORY;

	if (ctx && (!munge_socket || !munge_socket[0] ||
		    (e = munge_ctx_set(ctx, MUNGE_OPT_SOCKET, munge_socket)) == EMUNGE_SUCCESS))
		e = munge_encode(&cred, ctx, PHX_WIRE_MUNGE_PAYLOAD,
				 (int)sizeof(PHX_WIRE_MUNGE_PAYLOAD) - 1);
	if (e != EMUNGE_SUCCESS)
		phx_error("cannot get a MUNGE credential: %s; is munged running here (systemctl "
			  "status munge), and is ckptd.munge_socket right?",
			  ctx && munge_ctx_strerror(ctx) ? munge_ctx_strerror(ctx)
							 : munge_strerror(e));
	if (ctx)
		munge_ctx_destroy(ctx);
	return e == EMUNGE_SUCCESS ? cred : NULL;
}

/* The daemon's answer to a hello: a welcome, or -1 having said why. */
static int hello(struct phx_ckptd_admin *a, const char *cred)
{
	struct timeval tv = { .tv_sec = REQUEST_TIMEOUT_S };
	int flags = 0;
	struct phx_wire_msg m;

	/* Blocking from here, each read and write bounded by the timeout. */
	if (a->fd >= 0 && (flags = fcntl(a->fd, F_GETFL)) >= 0)
		fcntl(a->fd, F_SETFL, flags & ~O_NONBLOCK);
	setsockopt(a->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(a->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	phx_wire_reader_init(&a->rd, PHX_WIRE_MAX_FRAME);
	if (phx_ckptd_roundtrip(a, phx_wire_hello_admin(cred), &m) < 0)
		return -1;
	phx_wire_msg_free(&m);
	return 0;
}

static int open_tcp(struct phx_ckptd_admin *a, const char *hostport, const char *munge_socket)
{
	char *cred = munge_cred(munge_socket);
	int rc;

	if (!cred)
		return -1;
	rc = connect_tcp(a, hostport) < 0 ? -1 : hello(a, cred);
	free(cred);
	return rc;
}

/* The site's phalanx.yaml (or the one named), else the built-in defaults. */
static int load_conf(const char *path, struct phx_conf *conf)
{
	char err[512];

	if (!path && access(PHX_CONF_DEFAULT_PATH, F_OK) == 0)
		path = PHX_CONF_DEFAULT_PATH;
	if (path ? phx_conf_load_file(path, conf, err, sizeof(err)) : phx_conf_defaults(conf)) {
		phx_error("%s", path ? err : "out of memory");
		return -1;
	}
	return 0;
}

static int is_socket(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

int phx_ckptd_open(struct phx_ckptd_admin *a, const struct phx_ckptd_where *w)
{
	struct phx_conf conf = { 0 };
	const char *addr;
	int rc;

	a->fd = -1;
	if (load_conf(w->config, &conf) < 0)
		return -1;
	addr = phx_ckptd_address(&conf);
	if (w->server)
		rc = open_tcp(a, w->server, conf.ckptd.munge_socket);
	else if (w->socket)
		rc = connect_unix(a, w->socket, 1) < 0 ? -1 : hello(a, NULL);
	else if (!addr[0] || is_socket(conf.ckptd.socket))
		rc = connect_unix(a, conf.ckptd.socket, addr[0]) < 0 ? -1 : hello(a, NULL);
	else
		rc = open_tcp(a, addr, conf.ckptd.munge_socket);
	phx_conf_free(&conf);
	return rc;
}

void phx_ckptd_close(struct phx_ckptd_admin *a)
{
	if (a->fd >= 0)
		close(a->fd);
	a->fd = -1;
	phx_wire_reader_free(&a->rd);
}

int phx_ckptd_request(const struct phx_ckptd_where *w, struct json_object *req,
		      struct phx_wire_msg *m)
{
	struct phx_ckptd_admin a = { .fd = -1 };
	int rc = -1;

	if (phx_ckptd_open(&a, w) == 0)
		rc = phx_ckptd_roundtrip(&a, req, m);
	else
		json_object_put(req);
	phx_ckptd_close(&a);
	return rc;
}
