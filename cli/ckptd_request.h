/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Admin requests to phalanx-ckptd over its Unix socket (cli/ckptd_request.c),
 * for phalanx ckpt, status and goodput.
 */
#ifndef PHX_CKPTD_REQUEST_H
#define PHX_CKPTD_REQUEST_H

#include "checkpoint/proto/ckpt_wire.h"

struct phx_conf;

/* A connection to the daemon's admin socket; fd -1 before phx_ckptd_open(). */
struct phx_ckptd_admin {
	int fd;
	struct phx_wire_reader rd;
	const char *path;
};

/* ckptd.socket of phalanx.yaml, else its default; conf holds it (free with phx_conf_free). */
const char *phx_ckptd_default_socket(struct phx_conf *conf);
/* Connects to path and says hello as an admin: 0, or -1 having said why. */
int phx_ckptd_open(struct phx_ckptd_admin *a, const char *path);
void phx_ckptd_close(struct phx_ckptd_admin *a);
/* Sends obj and reads the answer; 0 with *m, or -1 having said why. */
int phx_ckptd_roundtrip(struct phx_ckptd_admin *a, struct json_object *obj, struct phx_wire_msg *m);

/*
 * Connects (socket_path NULL: ckptd.socket of phalanx.yaml), sends req
 * (taken) and reads the answer: 0 with *m (free with phx_wire_msg_free),
 * or -1 having said why.
 */
int phx_ckptd_request(const char *socket_path, struct json_object *req, struct phx_wire_msg *m);

#endif
