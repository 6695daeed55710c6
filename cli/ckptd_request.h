/* SPDX-License-Identifier: Apache-2.0 */
/* One admin request to phalanx-ckptd over its Unix socket (cli/cmd_ckpt.c). */
#ifndef PHX_CKPTD_REQUEST_H
#define PHX_CKPTD_REQUEST_H

#include "checkpoint/proto/ckpt_wire.h"

/*
 * Connects (socket_path NULL: ckptd.socket of phalanx.yaml), sends req
 * (taken) and reads the answer: 0 with *m (free with phx_wire_msg_free),
 * or -1 having said why.
 */
int phx_ckptd_request(const char *socket_path, struct json_object *req, struct phx_wire_msg *m);

#endif
