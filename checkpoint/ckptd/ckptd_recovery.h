/* SPDX-License-Identifier: Apache-2.0 */
/* Recovery in phalanx-ckptd: heartbeats, faults, decisions, the goodput ledger. */
#ifndef PHX_CKPTD_RECOVERY_H
#define PHX_CKPTD_RECOVERY_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint/ckptd/ckptd.h"

struct json_object;

void ckptd_recovery_registered(struct ckptd *d, struct ckptd_conn *c);
void ckptd_recovery_heartbeat(struct ckptd *d, struct ckptd_conn *c, uint64_t step);
/* A recovery event (kind of protocol version 2, or save); 1 if it was one. */
int ckptd_recovery_event(struct ckptd *d, struct ckptd_conn *c, const struct phx_wire_msg *m);
/*
 * A driver's report ("restart" or "check", naming a node; "stop", "wait",
 * or "role" with a record and no node): 0, or -1 when not one.
 */
int ckptd_recovery_driver_event(struct ckptd *d, struct ckptd_conn *c,
				const struct phx_wire_msg *m);
/*
 * A role record (checkpoint/proto/role_ledger.h) of job j's driver into the
 * job's roles, journaled when it changes a run or a failure count or 30 s
 * after the roles' last journaling; 0, or -1 with why it is ignored in err.
 */
int ckptd_recovery_role(struct ckptd *d, struct ckptd_job *j, const char *record, char *err,
			size_t errlen);
void ckptd_recovery_commit(struct ckptd *d, struct ckptd_job *j);
/* Whether this daemon drained node for job: a passing check from that job may undo it. */
int ckptd_recovery_drained_for(const struct ckptd *d, const char *node, uint32_t job);
/* Four times a second: lost agents, Slurm polls, pending requeue fixes. */
/*
 * The loop spent late_s on one batch of events: heartbeats that came in
 * meanwhile wait unread in the sockets, so no node's silence grows by it.
 */
void ckptd_recovery_credit(struct ckptd *d, double late_s);
void ckptd_recovery_tick(struct ckptd *d);
struct json_object *ckptd_goodput_json(struct ckptd *d, struct ckptd_job *j);
struct json_object *ckptd_untrusted_json(struct ckptd *d);
/* Journal records of recovery: {"op":"recovery", ...}. */
char *ckptd_recovery_record(const struct ckptd_job *j);
int ckptd_recovery_replay(struct ckptd *d, struct json_object *o, char *err, size_t errlen);
void ckptd_recovery_free(struct ckptd *d);

#endif
