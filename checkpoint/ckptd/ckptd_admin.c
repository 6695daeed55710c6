/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Admin requests: phalanx ckpt ls|verify|rm, status and goodput. The
 * peer's uid comes from SO_PEERCRED on the admin socket, from a MUNGE
 * credential on the TCP port (other hosts): root and SlurmUser see and
 * change every job, anyone else only the jobs that run under their uid.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "checkpoint/ckptd/ckptd_admin.h"
#include "checkpoint/ckptd/ckptd_catalog.h"
#include "checkpoint/ckptd/ckptd_conn.h"
#include "checkpoint/ckptd/ckptd_job.h"
#include "checkpoint/ckptd/ckptd_munge.h"
#include "checkpoint/ckptd/ckptd_recovery.h"
#include "checkpoint/proto/ckpt_json.h"
#include "common/log.h"

static int is_admin(const struct ckptd *d, const struct ckptd_conn *c)
{
	return c->peer_uid == 0 || c->peer_uid == d->slurm_uid;
}

static int may_see(const struct ckptd *d, const struct ckptd_conn *c, const struct ckptd_job *j)
{
	return is_admin(d, c) || c->peer_uid == j->uid;
}

/* The job, when it exists and the peer may act on it; otherwise an error goes out. */
static struct ckptd_job *job_for(struct ckptd *d, struct ckptd_conn *c, uint32_t id)
{
	struct ckptd_job *j = ckptd_job_find(d, id);
	struct json_object *o;
	char why[256];

	if (j && may_see(d, c, j))
		return j;
	/* Unknown and not yours read the same: a job's existence is not told to others. */
	snprintf(why, sizeof(why), "no job %u of uid %u in the checkpoint catalog", id,
		 (unsigned)c->peer_uid);
	if (j)
		phx_info("refused %s access to job %u of uid %u", c->peer, id, j->uid);
	o = phx_wire_error(why);
	ckptd_send(d, c, o);
	return NULL;
}

static struct json_object *entry_json(const struct ckptd_job *j, const struct ckptd_entry *e)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "job", json_object_new_uint64(j->id));
	json_object_object_add(o, "gen", json_object_new_uint64(e->gen));
	json_object_object_add(o, "step", json_object_new_uint64(e->step));
	json_object_object_add(o, "created", json_object_new_uint64(e->created));
	json_object_object_add(o, "bytes", json_object_new_uint64(e->bytes));
	json_object_object_add(o, "world", json_object_new_uint64(e->world));
	return o;
}

static void on_ls(struct ckptd *d, struct ckptd_conn *c, const struct phx_wire_msg *m)
{
	struct json_object *o = phx_wire_new(PHX_MSG_LIST), *arr = json_object_new_array();

	if (m->has_job) {
		struct ckptd_job *j = job_for(d, c, m->job);

		if (!j) {
			json_object_put(o);
			json_object_put(arr);
			return;
		}
		for (size_t i = 0; i < j->ngens; i++)
			json_object_array_add(arr, entry_json(j, &j->gens[i]));
	} else {
		for (size_t b = 0; b < CKPTD_JOB_BUCKETS; b++)
			for (struct ckptd_job *j = d->jobs[b]; j; j = j->next)
				for (size_t i = 0; may_see(d, c, j) && i < j->ngens; i++)
					json_object_array_add(arr, entry_json(j, &j->gens[i]));
	}
	json_object_object_add(o, "generations", arr);
	ckptd_send(d, c, o);
}

static void on_query(struct ckptd *d, struct ckptd_conn *c, const struct phx_wire_msg *m)
{
	struct ckptd_job *j;
	const struct ckptd_entry *e;
	struct json_object *o, *man;
	char err[256];

	if (!m->has_job) {
		ckptd_send(d, c, phx_wire_error("query: name the job"));
		return;
	}
	j = job_for(d, c, m->job);
	if (!j)
		return;
	e = ckptd_entry_find(j, m->gen);
	o = phx_wire_new(PHX_MSG_MANIFEST);
	if (!e) {
		json_object_object_add(o, "gen", json_object_new_int(0));
		ckptd_send(d, c, o);
		return;
	}
	man = phx_json_parse_object(e->text, e->len, err, sizeof(err));
	json_object_object_add(o, "gen", json_object_new_uint64(e->gen));
	json_object_object_add(o, "manifest", man);
	json_object_object_add(o, "uid", json_object_new_uint64(j->uid));
	ckptd_send(d, c, o);
}

static void on_rm(struct ckptd *d, struct ckptd_conn *c, const struct phx_wire_msg *m)
{
	struct ckptd_job *j = job_for(d, c, m->job);
	struct json_object *o;
	char err[512];

	if (!j)
		return;
	if (ckptd_remove(d, j, m->gen, err, sizeof(err)) < 0) {
		ckptd_send(d, c, phx_wire_error(err));
		return;
	}
	phx_info("%s removed generation %llu of job %u", c->peer, (unsigned long long)m->gen,
		 m->job);
	o = phx_wire_new(PHX_MSG_REMOVED);
	json_object_object_add(o, "job", json_object_new_uint64(m->job));
	json_object_object_add(o, "gen", json_object_new_uint64(m->gen));
	ckptd_send(d, c, o);
}

static struct json_object *job_status(struct ckptd *d, struct ckptd_job *j)
{
	struct json_object *o = json_object_new_object(), *open = json_object_new_array();
	const char *mode;
	uint64_t steps, seconds = ckptd_interval_for(d, j, &mode, &steps);

	json_object_object_add(o, "job", json_object_new_uint64(j->id));
	json_object_object_add(o, "uid", json_object_new_uint64(j->uid));
	json_object_object_add(o, "nodes", json_object_new_uint64(j->nodes));
	json_object_object_add(o, "ranks", json_object_new_uint64(j->commit.world));
	json_object_object_add(o, "agents", json_object_new_uint64(j->nagents));
	json_object_object_add(o, "committed", json_object_new_uint64(j->commit.committed));
	json_object_object_add(o, "step", json_object_new_uint64(j->commit.committed_step));
	json_object_object_add(o, "kept", json_object_new_uint64(j->ngens));
	for (int i = 0; i < PHX_COMMIT_MAX_OPEN; i++)
		if (j->commit.open[i])
			json_object_array_add(open, json_object_new_uint64(j->commit.open[i]->gen));
	json_object_object_add(o, "open", open);
	json_object_object_add(o, "interval_mode", json_object_new_string(mode));
	json_object_object_add(o, "interval_steps", json_object_new_uint64(steps));
	json_object_object_add(o, "interval_seconds", json_object_new_uint64(seconds));
	json_object_object_add(o, "stall_s", json_object_new_double(j->stall_avg_s));
	json_object_object_add(o, "failures", json_object_new_uint64(j->failures));
	/* Recovery's newest word: a stop, or a requeue waiting for nodes. */
	json_object_object_add(o, "phase",
			       json_object_new_string(phx_gp_phase_name(j->r.gp.phase)));
	json_object_object_add(o, "stopped", json_object_new_boolean(j->r.rec.stopped));
	json_object_object_add(o, "reason", json_object_new_string(j->r.reason));
	return o;
}

static void on_status(struct ckptd *d, struct ckptd_conn *c)
{
	struct json_object *o = phx_wire_new(PHX_MSG_STATUS), *jobs = json_object_new_array();
	uint64_t gens = 0;

	for (size_t b = 0; b < CKPTD_JOB_BUCKETS; b++)
		for (struct ckptd_job *j = d->jobs[b]; j; j = j->next) {
			if (!j->registered || !may_see(d, c, j))
				continue;
			gens += j->ngens;
			json_object_array_add(jobs, job_status(d, j));
		}
	json_object_object_add(o, "jobs", jobs);
	json_object_object_add(o, "agents", json_object_new_uint64(d->agents));
	json_object_object_add(o, "generations", json_object_new_uint64(gens));
	/* Nodes drained by Phalanx that wait for a passing check: everyone may see them. */
	json_object_object_add(o, "untrusted", ckptd_untrusted_json(d));
	ckptd_send(d, c, o);
}

static void on_goodput(struct ckptd *d, struct ckptd_conn *c, const struct phx_wire_msg *m)
{
	struct ckptd_job *j = job_for(d, c, m->job);
	struct json_object *o;

	if (!j)
		return;
	o = phx_wire_new(PHX_MSG_GOODPUT);
	json_object_object_add(o, "job", json_object_new_uint64(j->id));
	json_object_object_add(o, "report", ckptd_goodput_json(d, j));
	ckptd_send(d, c, o);
}

static void welcome(struct ckptd *d, struct ckptd_conn *c)
{
	struct json_object *o = phx_wire_new(PHX_MSG_WELCOME);

	json_object_object_add(o, "committed", json_object_new_int(0));
	json_object_object_add(o, "step", json_object_new_int(0));
	ckptd_send(d, c, o);
}

/* An admin on the TCP port: its uid is the one its MUNGE credential names. */
static void tcp_hello(struct ckptd *d, struct ckptd_conn *c, const struct phx_wire_msg *m)
{
	if (!m->cred)
		ckptd_refuse(d, c,
			     "an admin on the TCP port needs a MUNGE credential; use phalanx "
			     "status|goodput|ckpt with --server HOST:PORT, or the daemon's socket "
			     "on its host");
	else if (ckptd_munge_check(d, c->serial, m->cred) < 0)
		ckptd_refuse(d, c, "too many MUNGE credentials waiting to be checked; try again");
}

static void munge_verdict(struct ckptd *d, const struct ckptd_munge_verdict *v)
{
	struct ckptd_conn *c = ckptd_conn_find(d, v->serial);
	char addr[48]; /* an IPv6 address's text fits */

	if (!c)
		return;
	if (!v->ok) {
		d->m.munge_refused++;
		ckptd_refuse(d, c, "%s", v->why);
		return;
	}
	c->peer_uid = v->uid;
	snprintf(addr, sizeof(addr), "%.47s", c->peer);
	snprintf(c->peer, sizeof(c->peer), "uid %u at %s", (unsigned)v->uid, addr);
	ckptd_conn_authed(d, c);
	welcome(d, c);
}

static void admin_msg(struct ckptd *d, struct ckptd_conn *c, struct phx_wire_msg *m)
{
	if (c->kind != CKPTD_ADMIN && m->type != PHX_MSG_HELLO && !c->authed) {
		ckptd_refuse(d, c,
			     "%s before the MUNGE credential was checked; wait for the welcome",
			     phx_msg_name(m->type));
		return;
	}
	switch (m->type) {
	case PHX_MSG_HELLO:
		if (c->kind == CKPTD_ADMIN)
			welcome(d, c);
		else
			tcp_hello(d, c, m);
		break;
	case PHX_MSG_LS:
		on_ls(d, c, m);
		break;
	case PHX_MSG_QUERY:
		on_query(d, c, m);
		break;
	case PHX_MSG_RM:
		on_rm(d, c, m);
		break;
	case PHX_MSG_STATUS:
		on_status(d, c);
		break;
	case PHX_MSG_GOODPUT:
		on_goodput(d, c, m);
		break;
	default:
		ckptd_refuse(d, c, "%s: not an admin message", phx_msg_name(m->type));
	}
}

int ckptd_admin_init(struct ckptd *d, const char *munge_socket, char *err, size_t errlen)
{
	ckptd_conn_handle(d, PHX_ROLE_ADMIN, admin_msg);
	return ckptd_munge_start(d, munge_socket, munge_verdict, err, errlen);
}
