/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Agents' messages: authentication by HMAC challenge-response on the job
 * token, registration, prepares and aborts feeding the two-phase commit,
 * queries, events for metrics and the interval.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "checkpoint/ckptd/ckptd_agent.h"
#include "checkpoint/ckptd/ckptd_authz.h"
#include "checkpoint/ckptd/ckptd_catalog.h"
#include "checkpoint/ckptd/ckptd_clock.h"
#include "checkpoint/ckptd/ckptd_conn.h"
#include "checkpoint/ckptd/ckptd_job.h"
#include "checkpoint/ckptd/ckptd_recovery.h"
#include "common/log.h"

static void on_hello(struct ckptd *d, struct ckptd_conn *c, const struct phx_wire_msg *m)
{
	struct json_object *o;

	c->job_id = m->job;
	c->uid = m->uid;
	snprintf(c->node, sizeof(c->node), "%s", m->node);
	if (phx_wire_nonce(c->nonce) < 0) {
		ckptd_conn_fail(d, c, "the random generator failed");
		return;
	}
	o = phx_wire_new(PHX_MSG_CHALLENGE);
	json_object_object_add(o, "nonce", json_object_new_string(c->nonce));
	ckptd_send(d, c, o);
}

static int add_proof(struct ckptd *d, struct ckptd_conn *c, const char *nonce,
		     struct json_object *o)
{
	char proof[PHX_WIRE_MAC_HEX + 1];

	if (phx_wire_welcome_proof(&d->key, nonce, c->job_id, c->uid, c->node, proof) < 0)
		return -1;
	json_object_object_add(o, "proof", json_object_new_string(proof));
	return 0;
}

static void on_auth(struct ckptd *d, struct ckptd_conn *c, const struct phx_wire_msg *m)
{
	struct ckptd_job *j;
	struct json_object *o;
	char why[768];

	if (!phx_wire_auth_verify(&d->key, c->nonce, c->job_id, c->uid, c->node, m->mac)) {
		d->m.auth_failures++;
		ckptd_refuse(d, c,
			     "the answer does not prove the token of job %u for uid %u; the agent "
			     "needs PHALANX_JOB_TOKEN of this job, and the daemon the cluster key "
			     "the plugin used",
			     c->job_id, c->uid);
		return;
	}
	if (ckptd_authz(d, c->job_id, c->uid, c->node, c->order.role != PHX_ROLE_DRIVER, why,
			sizeof(why)) < 0) {
		ckptd_refuse(d, c, "job %u, node %.64s: %s", c->job_id, c->node, why);
		return;
	}
	j = ckptd_job_find(d, c->job_id);
	if (j && j->uid != c->uid) {
		ckptd_refuse(d, c,
			     "job %u belongs to uid %u in the catalog, not %u; remove the old "
			     "job's generations with 'phalanx ckpt rm %u'",
			     c->job_id, j->uid, c->uid, c->job_id);
		return;
	}
	ckptd_conn_authed(d, c);
	if (c->order.role == PHX_ROLE_DRIVER) {
		/* Not an agent: never in the job's agents, its broadcasts or shape. */
		j = ckptd_job_get(d, c->job_id, c->uid);
		if (!j) {
			ckptd_conn_fail(d, c, "out of memory");
			return;
		}
		c->job = j;
		j->drivers++;
		phx_info("job %u: its driver on %s connected", j->id, c->node);
	}
	o = phx_wire_new(PHX_MSG_WELCOME);
	json_object_object_add(o, "committed", json_object_new_uint64(j ? j->commit.committed : 0));
	json_object_object_add(o, "step", json_object_new_uint64(j ? j->commit.committed_step : 0));
	/* Asked (protocol 4), the daemon proves the key; older agents do not ask. */
	if (m->nonce && add_proof(d, c, m->nonce, o) < 0) {
		json_object_put(o);
		ckptd_conn_fail(d, c, "cannot compute the welcome's proof");
		return;
	}
	ckptd_send(d, c, o);
}

static void on_register(struct ckptd *d, struct ckptd_conn *c, const struct phx_wire_msg *m)
{
	struct ckptd_job *j = ckptd_job_get(d, c->job_id, c->uid);
	struct json_object *o;
	char err[512];

	if (!j ||
	    (!j->registered &&
	     ckptd_authz_shape(d, c->job_id, c->uid, m->nodes, m->ranks, err, sizeof(err)) < 0) ||
	    (!j->nagents && ckptd_job_user_room(d, j, m->ranks, err, sizeof(err)) < 0) ||
	    ckptd_job_register(d, j, m->nodes, m->ranks, m->layout, m->interval, err, sizeof(err)) <
		    0) {
		ckptd_refuse(d, c, "register: %s", j ? err : "out of memory");
		if (j)
			ckptd_job_drop_if_empty(d, j);
		return;
	}
	if (ckptd_job_attach(d, j, c) < 0) {
		ckptd_conn_fail(d, c, "out of memory");
		return;
	}
	o = phx_wire_new(PHX_MSG_REGISTERED);
	json_object_object_add(o, "committed", json_object_new_uint64(j->commit.committed));
	json_object_object_add(o, "step", json_object_new_uint64(j->commit.committed_step));
	json_object_object_add(o, "keep", json_object_new_int(d->keep));
	json_object_object_add(o, "heartbeat_ms", json_object_new_uint64(d->heartbeat_ms));
	ckptd_send(d, c, o);
	ckptd_recovery_registered(d, c);
	phx_debug("job %u: agent of node %s registered (%zu connected)", j->id, c->node,
		  j->nagents);
}

static void send_aborted(struct ckptd *d, struct ckptd_job *j, uint64_t gen, const char *why)
{
	struct json_object *o = phx_wire_new(PHX_MSG_ABORTED);

	json_object_object_add(o, "gen", json_object_new_uint64(gen));
	/* The agents refuse a longer reason, and the frame with it. */
	json_object_object_add(
		o, "reason",
		json_object_new_string_len(why, (int)strnlen(why, PHX_WIRE_REASON_MAX)));
	ckptd_broadcast(d, j, o);
	d->m.aborts++;
	phx_info("job %u: generation %llu aborted: %s", j->id, (unsigned long long)gen, why);
}

static void note_first(struct ckptd_job *j, uint64_t gen)
{
	int free_slot = -1, oldest = 0;

	for (int i = 0; i < PHX_COMMIT_MAX_OPEN; i++) {
		if (j->first[i].gen == gen)
			return;
		if (!j->first[i].gen && free_slot < 0)
			free_slot = i;
		if (j->first[i].gen < j->first[oldest].gen)
			oldest = i;
	}
	free_slot = free_slot < 0 ? oldest : free_slot;
	j->first[free_slot].gen = gen;
	j->first[free_slot].t0 = ckptd_now();
}

/* A late prepare of a settled generation: tell this agent what did commit. */
static void resend_commit(struct ckptd *d, struct ckptd_conn *c, struct ckptd_job *j)
{
	struct json_object *o = phx_wire_new(PHX_MSG_COMMIT);

	json_object_object_add(o, "gen", json_object_new_uint64(j->commit.committed));
	json_object_object_add(o, "step", json_object_new_uint64(j->commit.committed_step));
	json_object_object_add(
		o, "keep_from",
		json_object_new_uint64(j->ngens ? j->gens[0].gen : j->commit.committed));
	ckptd_send(d, c, o);
}

static void on_prepare(struct ckptd *d, struct ckptd_conn *c, const struct phx_wire_msg *m)
{
	struct ckptd_job *j = c->job;
	enum phx_commit_result r;
	uint64_t gave_way;
	char reason[512], err[512];

	if (phx_commit_prepare(&j->commit, m->gen, m->step, c->node, m->shards, m->nshards, &r,
			       &gave_way, reason, sizeof(reason)) < 0) {
		ckptd_refuse(d, c, "prepare: %s", reason);
		return;
	}
	if (gave_way)
		send_aborted(d, j, gave_way, "too many generations in flight");
	switch (r) {
	case PHX_COMMIT_PENDING:
		note_first(j, m->gen);
		break;
	case PHX_COMMIT_READY:
		note_first(j, m->gen);
		if (ckptd_publish(d, j, m->gen, err, sizeof(err)) < 0) {
			/* Not journaled, so not published: the generation cannot commit. */
			phx_error("job %u: generation %llu not committed: %s", j->id,
				  (unsigned long long)m->gen, err);
			phx_commit_abort(&j->commit, m->gen);
			send_aborted(d, j, m->gen, err);
		} else {
			ckptd_recovery_commit(d, j);
		}
		break;
	case PHX_COMMIT_ABORTED:
		send_aborted(d, j, m->gen, reason);
		break;
	case PHX_COMMIT_WAS_ABORTED: {
		struct json_object *o = phx_wire_new(PHX_MSG_ABORTED);

		json_object_object_add(o, "gen", json_object_new_uint64(m->gen));
		json_object_object_add(o, "reason", json_object_new_string(reason));
		ckptd_send(d, c, o);
		break;
	}
	case PHX_COMMIT_STALE:
		if (j->commit.committed)
			resend_commit(d, c, j);
		break;
	case PHX_COMMIT_DUPLICATE:
		break;
	}
}

static void on_abort(struct ckptd *d, struct ckptd_conn *c, const struct phx_wire_msg *m)
{
	char why[PHX_WIRE_REASON_MAX + 300];

	if (phx_commit_abort(&c->job->commit, m->gen) != PHX_COMMIT_ABORTED)
		return; /* already committed: an abort cannot take it back */
	snprintf(why, sizeof(why), "node %s: %s", c->node, m->reason);
	send_aborted(d, c->job, m->gen, why);
}

static void on_query(struct ckptd *d, struct ckptd_conn *c, const struct phx_wire_msg *m)
{
	const struct ckptd_entry *e = ckptd_entry_find(c->job, m->gen);
	size_t cap, len;
	char *frame;
	struct json_object *o;

	if (!e) {
		o = phx_wire_new(PHX_MSG_MANIFEST);
		json_object_object_add(o, "gen", json_object_new_int(0));
		ckptd_send(d, c, o);
		return;
	}
	/* The stored text goes out as is, without a parse and a print. */
	cap = e->len + 96;
	frame = malloc(cap);
	if (!frame) {
		ckptd_conn_fail(d, c, "out of memory");
		return;
	}
	len = (size_t)snprintf(frame + 4, cap - 4,
			       "{\"type\":\"manifest\",\"v\":%d,\"gen\":%llu,\"manifest\":%s}",
			       PHX_WIRE_VERSION_SEND, (unsigned long long)e->gen, e->text);
	frame[0] = (char)(len >> 24);
	frame[1] = (char)(len >> 16);
	frame[2] = (char)(len >> 8);
	frame[3] = (char)len;
	ckptd_send_frame(d, c, frame, len + 4);
	free(frame);
}

/*
 * An event about another node is heard only for a node of the job, or a
 * passing check of a node this daemon drained for the job: a job's agents
 * and driver cannot drain, set down, mark or resume nodes outside it. The
 * event is dropped; the connection stays, as the job's own work goes on.
 */
static bool names_foreign_node(struct ckptd *d, struct ckptd_conn *c, const struct phx_wire_msg *m)
{
	char why[768];

	if (!m->node || (c->order.role == PHX_ROLE_AGENT && !strcmp(m->node, c->node)))
		return false;
	if (!strcmp(m->kind, "check") && m->value == 1 &&
	    ckptd_recovery_drained_for(d, m->node, c->job_id))
		return false;
	if (!ckptd_authz(d, c->job_id, c->uid, m->node, true, why, sizeof(why)))
		return false;
	phx_warn("job %u: event %s from %s %s ignored: %s", c->job_id, m->kind,
		 c->order.role == PHX_ROLE_DRIVER ? "the driver on" : "the agent of", c->node, why);
	return true;
}

static void on_event(struct ckptd *d, struct ckptd_conn *c, const struct phx_wire_msg *m)
{
	struct ckptd_job *j = c->job;

	if (names_foreign_node(d, c, m))
		return;
	if (ckptd_recovery_event(d, c, m))
		return;
	if (!strcmp(m->kind, "save")) {
		d->m.saves++;
		d->m.saved_bytes += m->bytes;
		d->m.stall_us_sum += m->value;
		/* Moving average over about the last ten saves. */
		j->stall_avg_s = j->saves ? 0.9 * j->stall_avg_s + 0.1 * ((double)m->value / 1e6)
					  : (double)m->value / 1e6;
		j->saves++;
	} else if (!strcmp(m->kind, "persist")) {
		d->m.persists++;
		d->m.persist_bytes += m->bytes;
		d->m.persist_ms_sum += m->value;
	} else if (!strcmp(m->kind, "failure")) {
		phx_info("job %u: node %s reports a failure", j->id, m->node ? m->node : c->node);
		ckptd_note_failure(d, j);
	} else if (!strcmp(m->kind, "node_bad")) {
		d->m.node_bad++;
		phx_warn("job %u: node %s reports node %s bad", j->id, c->node, m->node);
	}
}

static void on_interval(struct ckptd *d, struct ckptd_conn *c)
{
	struct json_object *o = phx_wire_new(PHX_MSG_INTERVAL);
	const char *mode;
	uint64_t steps, seconds = ckptd_interval_for(d, c->job, &mode, &steps);

	json_object_object_add(o, "mode", json_object_new_string(mode));
	json_object_object_add(o, "steps", json_object_new_uint64(steps));
	json_object_object_add(o, "seconds", json_object_new_uint64(seconds));
	ckptd_send(d, c, o);
}

static void on_driver_event(struct ckptd *d, struct ckptd_conn *c, const struct phx_wire_msg *m)
{
	/* The driver's own node may be outside the allocation; the nodes it names are not. */
	if (names_foreign_node(d, c, m))
		return;
	if (ckptd_recovery_driver_event(d, c, m) < 0)
		ckptd_refuse(d, c,
			     "event %s: a driver sends \"restart\" and \"check\" naming a node, "
			     "and \"stop\", \"wait\" and \"role\"",
			     m->kind);
}

static void agent_msg(struct ckptd *d, struct ckptd_conn *c, struct phx_wire_msg *m)
{
	switch (m->type) {
	case PHX_MSG_HELLO:
		on_hello(d, c, m);
		break;
	case PHX_MSG_AUTH:
		on_auth(d, c, m);
		break;
	case PHX_MSG_REGISTER:
		on_register(d, c, m);
		break;
	case PHX_MSG_PREPARE:
		on_prepare(d, c, m);
		break;
	case PHX_MSG_ABORT:
		on_abort(d, c, m);
		break;
	case PHX_MSG_QUERY:
		on_query(d, c, m);
		break;
	case PHX_MSG_EVENT:
		on_event(d, c, m);
		break;
	case PHX_MSG_INTERVAL:
		on_interval(d, c);
		break;
	case PHX_MSG_HEARTBEAT:
		ckptd_recovery_heartbeat(d, c, m->step);
		break;
	default:
		ckptd_refuse(d, c, "%s: not a message an agent sends", phx_msg_name(m->type));
	}
}

/* A driver authenticates as an agent does; its events are its own. */
static void driver_msg(struct ckptd *d, struct ckptd_conn *c, struct phx_wire_msg *m)
{
	if (m->type == PHX_MSG_EVENT)
		on_driver_event(d, c, m);
	else
		agent_msg(d, c, m);
}

void ckptd_agent_init(struct ckptd *d)
{
	ckptd_conn_handle(d, PHX_ROLE_AGENT, agent_msg);
	ckptd_conn_handle(d, PHX_ROLE_DRIVER, driver_msg);
}
