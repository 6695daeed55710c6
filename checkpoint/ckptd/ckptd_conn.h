/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sockets of phalanx-ckptd: listeners, accepted connections, framed I/O.
 * Decoded messages go to the handler registered for the peer's role.
 */
#ifndef PHX_CKPTD_CONN_H
#define PHX_CKPTD_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint/ckptd/ckptd.h"

struct json_object;

/* Sets the handler of the messages of role's connections (start-up). */
void ckptd_conn_handle(struct ckptd *d, enum phx_wire_role role, ckptd_msg_fn fn);
int ckptd_listen_tcp(struct ckptd *d, const char *hostport, char *err, size_t errlen);
int ckptd_listen_unix(struct ckptd *d, const char *path, char *err, size_t errlen);
void ckptd_accept(struct ckptd *d, int lfd, enum ckptd_conn_kind kind);
void ckptd_conn_io(struct ckptd *d, struct ckptd_conn *c, uint32_t events);
/* Queues a message (takes obj) or a ready frame; arms EPOLLOUT as needed. */
void ckptd_send(struct ckptd *d, struct ckptd_conn *c, struct json_object *obj);
void ckptd_send_frame(struct ckptd *d, struct ckptd_conn *c, const char *frame, size_t len);
/* Sends a message (takes obj) to every agent of the job. */
void ckptd_broadcast(struct ckptd *d, struct ckptd_job *j, struct json_object *obj);
/* Sends an error message, then closes once it is written (or at once). */
void ckptd_refuse(struct ckptd *d, struct ckptd_conn *c, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void ckptd_conn_fail(struct ckptd *d, struct ckptd_conn *c, const char *why);
void ckptd_reap(struct ckptd *d);
/* The open connection of that serial, or NULL once it is closed. */
struct ckptd_conn *ckptd_conn_find(struct ckptd *d, uint64_t serial);
/* Once a second: closes connections that did not finish the handshake in
 * time, and resumes accepting after a shortage of descriptors. */
void ckptd_conn_sweep(struct ckptd *d);
/* c proved its job's token: lifts the pre-authentication limits. */
void ckptd_conn_authed(struct ckptd *d, struct ckptd_conn *c);
/* Closes every connection (shutdown). */
void ckptd_conn_close_all(struct ckptd *d);

#endif
