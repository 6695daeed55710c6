/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Admin requests to phalanx-ckptd (cli/ckptd_request.c), for phalanx ckpt,
 * status and goodput: over its Unix socket on its own host, or over its
 * TCP port from any host with a MUNGE credential.
 */
#ifndef PHX_CKPTD_REQUEST_H
#define PHX_CKPTD_REQUEST_H

#include "checkpoint/proto/ckpt_wire.h"

/* Where the daemon is: from --socket, --server or --config (phalanx.yaml). */
struct phx_ckptd_where {
	const char *socket; /* its Unix socket */
	const char *server; /* HOST:PORT of its TCP port */
	const char *config; /* NULL: the site's phalanx.yaml, if there is one */
};

/* getopt_long entries of the three options and the values they return. */
enum { PHX_CKPTD_OPT_SOCKET = 0x100, PHX_CKPTD_OPT_SERVER, PHX_CKPTD_OPT_CONFIG };
#define PHX_CKPTD_LONGOPTS                                                                         \
	{ "socket", required_argument, NULL, PHX_CKPTD_OPT_SOCKET },                               \
		{ "server", required_argument, NULL, PHX_CKPTD_OPT_SERVER },                       \
	{                                                                                          \
		"config", required_argument, NULL, PHX_CKPTD_OPT_CONFIG                            \
	}
#define PHX_CKPTD_USAGE "[--socket PATH | --server HOST:PORT] [--config FILE]"
/* Takes getopt's c when it is one of the three: 1, else 0. */
int phx_ckptd_where_opt(struct phx_ckptd_where *w, int c, const char *arg);

/* A connection to the daemon, as an admin client; fd -1 before phx_ckptd_open(). */
struct phx_ckptd_admin {
	int fd;
	struct phx_wire_reader rd;
	char name[300]; /* the socket or HOST:PORT, for messages */
};

/*
 * Connects and says hello as an admin: with --server over TCP (MUNGE),
 * with --socket over that socket; else over ckptd.socket where it exists
 * on this host, over ckptd.address (or listen) where it does not. 0, or
 * -1 having said why.
 */
int phx_ckptd_open(struct phx_ckptd_admin *a, const struct phx_ckptd_where *w);
void phx_ckptd_close(struct phx_ckptd_admin *a);
/* Sends obj (taken) and reads the answer; 0 with *m, or -1 having said why. */
int phx_ckptd_roundtrip(struct phx_ckptd_admin *a, struct json_object *obj, struct phx_wire_msg *m);

/* Opens, sends req (taken) and reads the answer: 0 with *m (free with
 * phx_wire_msg_free), or -1 having said why. */
int phx_ckptd_request(const struct phx_ckptd_where *w, struct json_object *req,
		      struct phx_wire_msg *m);

#endif
