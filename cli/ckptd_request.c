/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Talking to phalanx-ckptd over its admin Unix socket: a connection that
 * says hello as an admin client, then requests and their answers. The
 * daemon decides what the caller may see from the socket's peer
 * credentials.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "checkpoint/proto/ckpt_wire.h"
#include "common/conf.h"
#include "common/file.h"
#include "common/log.h"
#include "cli/ckptd_request.h"

int phx_ckptd_roundtrip(struct phx_ckptd_admin *a, struct json_object *obj, struct phx_wire_msg *m)
{
	const char *body;
	size_t len, flen;
	char err[512], *frame = phx_wire_frame(obj, &flen);
	int rc;

	if (!frame || phx_send_all(a->fd, frame, flen) < 0) {
		free(frame);
		phx_error("cannot send to phalanx-ckptd at %s: %s", a->path, strerror(errno));
		return -1;
	}
	free(frame);
	while ((rc = phx_wire_reader_next(&a->rd, &body, &len, err, sizeof(err))) == 0) {
		ssize_t n = phx_wire_reader_read(&a->rd, a->fd);

		if (n <= 0) {
			phx_error("phalanx-ckptd at %s closed the connection%s%s", a->path,
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

int phx_ckptd_open(struct phx_ckptd_admin *a, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct phx_wire_msg m;

	a->path = path;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	a->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (a->fd < 0 || connect(a->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		phx_error("cannot reach phalanx-ckptd at %s: %s; is it running (systemctl status "
			  "phalanx-ckptd), and is ckptd.socket right?",
			  path, strerror(errno));
		return -1;
	}
	phx_wire_reader_init(&a->rd, PHX_WIRE_MAX_FRAME);
	if (phx_ckptd_roundtrip(a, phx_wire_hello_admin(), &m) < 0)
		return -1;
	phx_wire_msg_free(&m);
	return 0;
}

void phx_ckptd_close(struct phx_ckptd_admin *a)
{
	if (a->fd >= 0)
		close(a->fd);
	phx_wire_reader_free(&a->rd);
}

const char *phx_ckptd_default_socket(struct phx_conf *conf)
{
	char err[512];

	if (access(PHX_CONF_DEFAULT_PATH, F_OK) == 0 &&
	    phx_conf_load_file(PHX_CONF_DEFAULT_PATH, conf, err, sizeof(err)) == 0)
		return conf->ckptd.socket;
	if (phx_conf_defaults(conf) < 0)
		return "/run/phalanx/ckptd.sock";
	return conf->ckptd.socket;
}

int phx_ckptd_request(const char *socket_path, struct json_object *req, struct phx_wire_msg *m)
{
	struct phx_ckptd_admin a = { .fd = -1 };
	struct phx_conf conf = { 0 };
	int rc = -1;

	if (phx_ckptd_open(&a, socket_path ? socket_path : phx_ckptd_default_socket(&conf)) == 0)
		rc = phx_ckptd_roundtrip(&a, req, m);
	else
		json_object_put(req);
	phx_ckptd_close(&a);
	phx_conf_free(&conf);
	return rc;
}
