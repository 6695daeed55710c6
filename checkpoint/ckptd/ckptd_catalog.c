/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Jobs and their committed generations. Every change is journaled (and
 * synced) before it takes effect, so a restarted daemon replays exactly
 * what it had published:
 *   {"op":"job", "job", "uid", "nodes", "world", "layout", "interval"}
 *   {"op":"commit", "job", "manifest"}
 *   {"op":"rm", "job", "gen"}            gen 0: the job and all its generations
 *   {"op":"stats", "failures", "node_seconds"}
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "checkpoint/ckptd/ckptd_catalog.h"
#include "checkpoint/ckptd/ckptd_clock.h"
#include "checkpoint/ckptd/ckptd_conn.h"
#include "checkpoint/ckptd/ckptd_job.h"
#include "checkpoint/ckptd/ckptd_journal.h"
#include "checkpoint/ckptd/ckptd_recovery.h"
#include "checkpoint/proto/ckpt_json.h"
#include "common/log.h"

const double ckptd_commit_buckets[8] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0 };

static void entry_free(struct ckptd_entry *e)
{
	free(e->text);
}

const struct ckptd_entry *ckptd_entry_find(const struct ckptd_job *j, uint64_t gen)
{
	if (!j->ngens)
		return NULL;
	if (!gen)
		return &j->gens[j->ngens - 1];
	for (size_t i = 0; i < j->ngens; i++)
		if (j->gens[i].gen == gen)
			return &j->gens[i];
	return NULL;
}

/* ------------------------------------------------------------------ records */

static char *job_record(const struct ckptd_job *j)
{
	struct json_object *o = json_object_new_object();
	char *text;

	json_object_object_add(o, "op", json_object_new_string("job"));
	json_object_object_add(o, "job", json_object_new_uint64(j->id));
	json_object_object_add(o, "uid", json_object_new_uint64(j->uid));
	json_object_object_add(o, "nodes", json_object_new_uint64(j->nodes));
	json_object_object_add(o, "world", json_object_new_uint64(j->commit.world));
	json_object_object_add(o, "layout", json_object_new_string(j->commit.layout));
	json_object_object_add(o, "interval", json_object_new_string(j->interval));
	text = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return text;
}

static char *commit_record(uint32_t job, const char *manifest, size_t *len)
{
	static const char head[] = "{\"op\":\"commit\",\"job\":";
	size_t n = strlen(manifest) + 64;
	char *text = malloc(n);

	if (!text)
		return NULL;
	*len = (size_t)snprintf(text, n, "%s%u,\"manifest\":%s}", head, job, manifest);
	return text;
}

static char *simple_record(const char *op, const char *k1, uint64_t v1, const char *k2, uint64_t v2)
{
	char *text = malloc(128);

	if (text)
		snprintf(text, 128, "{\"op\":\"%s\",\"%s\":%llu,\"%s\":%llu}", op, k1,
			 (unsigned long long)v1, k2, (unsigned long long)v2);
	return text;
}

static int journal(struct ckptd *d, char *text, size_t len, char *err, size_t errlen)
{
	int rc;

	if (!text)
		return phx_errf(err, errlen, "out of memory");
	rc = ckptd_journal_append(&d->journal, text, len ? len : strlen(text), err, errlen);
	free(text);
	return rc;
}

/* ------------------------------------------------------------------ state changes */

static int job_setup(struct ckptd_job *j, uint32_t nodes, uint32_t world, const char *layout,
		     const char *interval, char *err, size_t errlen)
{
	if (phx_commit_job_init(&j->commit, j->id, world, layout, err, errlen) < 0)
		return -1;
	j->nodes = nodes;
	snprintf(j->interval, sizeof(j->interval), "%s", interval ? interval : "");
	j->registered = 1;
	return 0;
}

int ckptd_job_register(struct ckptd *d, struct ckptd_job *j, uint32_t nodes, uint32_t world,
		       const char *layout, const char *interval, char *err, size_t errlen)
{
	enum phx_ckpt_interval_mode mode;
	uint64_t v;

	if (interval && phx_interval_parse(interval, &mode, &v, err, errlen) < 0)
		return -1;
	if (j->registered) {
		if (j->commit.world != world || j->nodes != nodes ||
		    strcmp(j->commit.layout, layout))
			return phx_errf(err, errlen,
					"job %u is registered with %u nodes, %u ranks and layout "
					"\"%s\"; this agent says %u, %u and \"%s\"",
					j->id, j->nodes, j->commit.world, j->commit.layout, nodes,
					world, layout);
		return 0;
	}
	if (job_setup(j, nodes, world, layout, interval, err, errlen) < 0)
		return -1;
	if (journal(d, job_record(j), 0, err, errlen) < 0) {
		phx_commit_job_free(&j->commit);
		j->registered = 0;
		return -1;
	}
	return 0;
}

static void entry_fill(struct ckptd_entry *e, const struct phx_manifest *m, char *text)
{
	e->gen = m->generation;
	e->step = m->step;
	e->created = m->created;
	e->bytes = phx_manifest_bytes(m);
	e->world = m->world;
	e->text = text;
	e->len = strlen(text);
}

/* Adds a committed generation; the oldest beyond keep leave the catalog. */
static int entry_add(struct ckptd *d, struct ckptd_job *j, const struct phx_manifest *m, char *text)
{
	struct ckptd_entry *e = NULL;

	/* A generation journaled twice (a replay after a cut compaction): the later record wins. */
	for (size_t i = 0; i < j->ngens; i++)
		if (j->gens[i].gen == m->generation)
			e = &j->gens[i];
	if (e) {
		entry_free(e);
		entry_fill(e, m, text);
		return 0;
	}
	if (j->ngens == j->capgens) {
		size_t cap = j->capgens ? 2 * j->capgens : 4;
		struct ckptd_entry *v = realloc(j->gens, cap * sizeof(*v));

		if (!v)
			return -1;
		j->gens = v;
		j->capgens = cap;
	}
	e = &j->gens[j->ngens++];
	entry_fill(e, m, text);
	/* Kept in ascending order; a replayed older commit slides into place. */
	for (size_t i = j->ngens - 1; i > 0 && j->gens[i - 1].gen > j->gens[i].gen; i--) {
		struct ckptd_entry t = j->gens[i];

		j->gens[i] = j->gens[i - 1];
		j->gens[i - 1] = t;
	}
	while (j->ngens > (size_t)d->keep) {
		entry_free(&j->gens[0]);
		memmove(j->gens, j->gens + 1, (j->ngens - 1) * sizeof(*j->gens));
		j->ngens--;
	}
	return 0;
}

static void observe_commit_latency(struct ckptd *d, struct ckptd_job *j, uint64_t gen)
{
	for (int i = 0; i < PHX_COMMIT_MAX_OPEN; i++) {
		double s;

		if (j->first[i].gen != gen)
			continue;
		s = ckptd_now() - j->first[i].t0;
		d->m.commit_s_sum += s;
		for (int b = 0; b < 8; b++)
			if (s <= ckptd_commit_buckets[b])
				d->m.commit_le[b]++;
		j->first[i].gen = 0;
	}
}

static int maybe_compact(struct ckptd *d);

int ckptd_publish(struct ckptd *d, struct ckptd_job *j, uint64_t gen, char *err, size_t errlen)
{
	const struct phx_manifest *m = phx_commit_ready_manifest(&j->commit, gen);
	uint64_t superseded[PHX_COMMIT_MAX_OPEN], step;
	double t0 = ckptd_now(), t1, t2;
	struct json_object *o;
	char *text, *rec;
	size_t n, len;

	if (!m)
		return phx_errf(err, errlen, "generation %llu of job %u is not ready",
				(unsigned long long)gen, j->id);
	text = phx_manifest_to_json(m, err, errlen);
	if (!text)
		return -1;
	/* Committed, it could never be read back by the ranks that restore it. */
	len = strlen(text);
	if (len > PHX_WIRE_MAX_MANIFEST) {
		free(text);
		return phx_errf(err, errlen,
				"its manifest is %zu bytes and a reply carries at most %u: "
				"use shorter checkpoint paths or fewer copies of each shard",
				len, PHX_WIRE_MAX_MANIFEST);
	}
	rec = commit_record(j->id, text, &len);
	t1 = ckptd_now();
	/* The commit point: once this record is synced, the generation exists. */
	if (journal(d, rec, len, err, errlen) < 0 || entry_add(d, j, m, text) < 0) {
		free(text);
		return -1;
	}
	t2 = ckptd_now();
	step = m->step;
	n = phx_commit_done(&j->commit, gen, superseded);
	d->m.commits++;
	observe_commit_latency(d, j, gen);
	o = phx_wire_new(PHX_MSG_COMMIT);
	json_object_object_add(o, "gen", json_object_new_uint64(gen));
	json_object_object_add(o, "step", json_object_new_uint64(step));
	json_object_object_add(o, "keep_from", json_object_new_uint64(j->gens[0].gen));
	ckptd_broadcast(d, j, o);
	for (size_t i = 0; i < n; i++) {
		o = phx_wire_new(PHX_MSG_ABORTED);
		json_object_object_add(o, "gen", json_object_new_uint64(superseded[i]));
		json_object_object_add(o, "reason",
				       json_object_new_string("a newer generation committed"));
		ckptd_broadcast(d, j, o);
		d->m.aborts++;
		phx_info("job %u: generation %llu aborted: a newer generation committed", j->id,
			 (unsigned long long)superseded[i]);
	}
	phx_info("job %u: generation %llu (step %llu) committed", j->id, (unsigned long long)gen,
		 (unsigned long long)step);
	phx_debug("job %u: generation %llu: manifest %.1f ms, journal %.1f ms, %zu agents told "
		  "%.1f ms",
		  j->id, (unsigned long long)gen, 1e3 * (t1 - t0), 1e3 * (t2 - t1), j->nagents,
		  1e3 * (ckptd_now() - t2));
	maybe_compact(d);
	return 0;
}

static void entry_remove(struct ckptd_job *j, uint64_t gen)
{
	for (size_t i = 0; i < j->ngens; i++)
		if (j->gens[i].gen == gen) {
			entry_free(&j->gens[i]);
			memmove(&j->gens[i], &j->gens[i + 1],
				(j->ngens - i - 1) * sizeof(*j->gens));
			j->ngens--;
			return;
		}
}

int ckptd_remove(struct ckptd *d, struct ckptd_job *j, uint64_t gen, char *err, size_t errlen)
{
	if (gen && !ckptd_entry_find(j, gen))
		return phx_errf(err, errlen, "job %u has no committed generation %llu", j->id,
				(unsigned long long)gen);
	if (!gen && (j->nagents || j->drivers))
		return phx_errf(err, errlen,
				"job %u has %zu agents and %u drivers connected; remove its "
				"generations one by one, or wait for the job to end",
				j->id, j->nagents, j->drivers);
	if (journal(d, simple_record("rm", "job", j->id, "gen", gen), 0, err, errlen) < 0)
		return -1;
	if (gen)
		entry_remove(j, gen);
	else
		ckptd_job_forget(d, j);
	return 0;
}

static char *stats_record(struct ckptd *d)
{
	return simple_record("stats", "failures", d->failures, "node_seconds",
			     (uint64_t)d->node_seconds);
}

int ckptd_note_failure(struct ckptd *d, struct ckptd_job *j)
{
	char err[256];

	d->failures++;
	d->m.failures++;
	if (j)
		j->failures++;
	if (journal(d, stats_record(d), 0, err, sizeof(err)) < 0) {
		phx_warn("%s; the failure count lives on in memory only", err);
		return -1;
	}
	return 0;
}

void ckptd_tick(struct ckptd *d)
{
	double now = ckptd_now();

	if (d->last_tick > 0)
		d->node_seconds += (now - d->last_tick) * d->agents;
	d->last_tick = now;
	/*
	 * Not only commits grow the journal: recovery's records (a driver's
	 * roles, every 30 s) do too. Looked at once per growth, so a failing
	 * compaction is not retried (and logged) every second.
	 */
	if (d->journal.bytes != d->journal_seen) {
		maybe_compact(d);
		d->journal_seen = d->journal.bytes;
	}
}

uint64_t ckptd_interval_for(struct ckptd *d, struct ckptd_job *j, const char **mode,
			    uint64_t *steps)
{
	enum phx_ckpt_interval_mode m = d->interval_mode;
	uint64_t v = m == PHX_INTERVAL_STEPS ? d->interval_steps : d->interval_seconds;
	double mtbf;

	if (j->interval[0])
		phx_interval_parse(j->interval, &m, &v, NULL, 0);
	*steps = 0;
	if (m == PHX_INTERVAL_STEPS) {
		*mode = "steps";
		*steps = v;
		return 0;
	}
	if (m == PHX_INTERVAL_SECONDS) {
		*mode = "seconds";
		return v;
	}
	*mode = "auto";
	if (!j->saves) /* no stall measured yet */
		return d->interval_seconds;
	mtbf = phx_interval_node_mtbf(d->node_mtbf_prior_s, d->node_seconds, d->failures);
	return phx_interval_auto_seconds(j->stall_avg_s, mtbf, j->nodes ? j->nodes : 1);
}

/* ------------------------------------------------------------------ replay */

static int replay_job(struct ckptd *d, struct json_object *o, char *err, size_t errlen)
{
	static const char *const keys[] = { "op",    "job",    "uid",	   "nodes",
					    "world", "layout", "interval", NULL };
	uint64_t id, uid, nodes, world;
	const char *layout, *interval;
	struct ckptd_job *j;

	if (phx_json_only_keys(o, "job record", keys, err, errlen) < 0 ||
	    phx_json_u64(o, "job record", "job", 1, UINT32_MAX, &id, NULL, err, errlen) < 0 ||
	    phx_json_u64(o, "job record", "uid", 0, UINT32_MAX, &uid, NULL, err, errlen) < 0 ||
	    phx_json_u64(o, "job record", "nodes", 1, 1u << 20, &nodes, NULL, err, errlen) < 0 ||
	    phx_json_u64(o, "job record", "world", 1, PHX_MANIFEST_MAX_WORLD, &world, NULL, err,
			 errlen) < 0 ||
	    phx_json_str(o, "job record", "layout", PHX_MANIFEST_LAYOUT_MAX, 1, &layout, NULL, err,
			 errlen) < 0 ||
	    phx_json_str(o, "job record", "interval", 63, 1, &interval, NULL, err, errlen) < 0)
		return -1;
	j = ckptd_job_get(d, (uint32_t)id, (uint32_t)uid);
	if (!j)
		return phx_errf(err, errlen, "out of memory");
	if (j->registered) {
		/* A job record again (compaction copies it): the commits so far stay. */
		uint64_t gen = j->commit.committed, step = j->commit.committed_step;

		phx_commit_job_free(&j->commit);
		j->uid = (uint32_t)uid;
		if (job_setup(j, (uint32_t)nodes, (uint32_t)world, layout, interval, err, errlen) <
		    0)
			return -1;
		phx_commit_set_committed(&j->commit, gen, step);
		return 0;
	}
	j->uid = (uint32_t)uid;
	return job_setup(j, (uint32_t)nodes, (uint32_t)world, layout, interval, err, errlen);
}

static int replay_commit(struct ckptd *d, struct json_object *o, char *err, size_t errlen)
{
	static const char *const keys[] = { "op", "job", "manifest", NULL };
	struct json_object *mo;
	struct phx_manifest m;
	struct ckptd_job *j;
	uint64_t id;
	char *text;
	int rc = -1;

	if (phx_json_only_keys(o, "commit record", keys, err, errlen) < 0 ||
	    phx_json_u64(o, "commit record", "job", 1, UINT32_MAX, &id, NULL, err, errlen) < 0 ||
	    phx_json_object(o, "commit record", "manifest", &mo, err, errlen) < 0 ||
	    phx_manifest_from_json(mo, &m, err, errlen) < 0)
		return -1;
	j = ckptd_job_find(d, (uint32_t)id);
	if (!j || !j->registered || m.job != id) {
		phx_errf(err, errlen, "commit of job %llu before its job record",
			 (unsigned long long)id);
		goto out;
	}
	text = phx_manifest_to_json(&m, err, errlen);
	if (!text)
		goto out;
	if (entry_add(d, j, &m, text) < 0) {
		free(text);
		goto out;
	}
	phx_commit_set_committed(&j->commit, m.generation, m.step);
	rc = 0;
out:
	phx_manifest_free(&m);
	return rc;
}

static int replay_rm(struct ckptd *d, struct json_object *o, char *err, size_t errlen)
{
	static const char *const keys[] = { "op", "job", "gen", NULL };
	uint64_t id, gen;
	struct ckptd_job *j;

	if (phx_json_only_keys(o, "rm record", keys, err, errlen) < 0 ||
	    phx_json_u64(o, "rm record", "job", 1, UINT32_MAX, &id, NULL, err, errlen) < 0 ||
	    phx_json_u64(o, "rm record", "gen", 0, UINT64_MAX >> 1, &gen, NULL, err, errlen) < 0)
		return -1;
	j = ckptd_job_find(d, (uint32_t)id);
	if (j && gen)
		entry_remove(j, gen);
	else if (j)
		ckptd_job_forget(d, j);
	return 0;
}

static int replay_stats(struct ckptd *d, struct json_object *o, char *err, size_t errlen)
{
	static const char *const keys[] = { "op", "failures", "node_seconds", NULL };
	uint64_t f, s;

	if (phx_json_only_keys(o, "stats record", keys, err, errlen) < 0 ||
	    phx_json_u64(o, "stats record", "failures", 0, UINT64_MAX >> 1, &f, NULL, err, errlen) <
		    0 ||
	    phx_json_u64(o, "stats record", "node_seconds", 0, UINT64_MAX >> 1, &s, NULL, err,
			 errlen) < 0)
		return -1;
	d->failures = f;
	d->node_seconds = (double)s;
	return 0;
}

int ckptd_catalog_replay(void *arg, const char *body, size_t len, char *err, size_t errlen)
{
	struct ckptd *d = arg;
	struct json_object *o = phx_json_parse_object(body, len, err, errlen);
	const char *op;
	int rc = -1;

	if (!o)
		return -1;
	if (phx_json_str(o, "record", "op", 16, 0, &op, NULL, err, errlen) < 0)
		goto out;
	if (!strcmp(op, "job"))
		rc = replay_job(d, o, err, errlen);
	else if (!strcmp(op, "commit"))
		rc = replay_commit(d, o, err, errlen);
	else if (!strcmp(op, "rm"))
		rc = replay_rm(d, o, err, errlen);
	else if (!strcmp(op, "stats"))
		rc = replay_stats(d, o, err, errlen);
	else if (!strcmp(op, "recovery"))
		rc = ckptd_recovery_replay(d, o, err, errlen);
	else
		phx_errf(err, errlen, "unknown record \"%s\"", op);
out:
	json_object_put(o);
	return rc;
}

int ckptd_catalog_load(struct ckptd *d, char *err, size_t errlen)
{
	char path[4200];
	size_t gens = 0;

	snprintf(path, sizeof(path), "%s/ckptd.journal", d->state_dir);
	if (ckptd_journal_open(&d->journal, path, ckptd_catalog_replay, d, err, errlen) < 0)
		return -1;
	for (size_t b = 0; b < CKPTD_JOB_BUCKETS; b++)
		for (struct ckptd_job *j = d->jobs[b]; j; j = j->next)
			gens += j->ngens;
	phx_info("journal %s: %llu records, %zu jobs, %zu committed generations", path,
		 (unsigned long long)d->journal.records, d->njobs, gens);
	if (d->journal.refused)
		phx_warn("journal %s: %llu record(s) could not be replayed and are kept in "
			 "%s.refused; the others are in effect",
			 path, (unsigned long long)d->journal.refused, path);
	return maybe_compact(d);
}

/* ------------------------------------------------------------------ compaction */

static int emit(void *arg, struct ckptd_journal *out, char *err, size_t errlen)
{
	struct ckptd *d = arg;
	char *text = stats_record(d);
	int rc;

	if (!text)
		return phx_errf(err, errlen, "out of memory");
	rc = ckptd_journal_put(out, text, strlen(text), err, errlen);
	free(text);
	for (size_t b = 0; !rc && b < CKPTD_JOB_BUCKETS; b++)
		for (struct ckptd_job *j = d->jobs[b]; !rc && j; j = j->next) {
			if (j->r.on) {
				text = ckptd_recovery_record(j);
				rc = text ? ckptd_journal_put(out, text, strlen(text), err, errlen)
					  : -1;
				free(text);
			}
			if (rc || !j->registered)
				continue;
			text = job_record(j);
			rc = text ? ckptd_journal_put(out, text, strlen(text), err, errlen) : -1;
			free(text);
			for (size_t i = 0; !rc && i < j->ngens; i++) {
				size_t len;

				text = commit_record(j->id, j->gens[i].text, &len);
				rc = text ? ckptd_journal_put(out, text, len, err, errlen) : -1;
				free(text);
			}
		}
	return rc;
}

/* Rewrites the journal when most of it describes state that is gone. */
static int maybe_compact(struct ckptd *d)
{
	uint64_t live = 4096;
	char err[512];

	for (size_t b = 0; b < CKPTD_JOB_BUCKETS; b++)
		for (struct ckptd_job *j = d->jobs[b]; j; j = j->next) {
			live += 256 + 256 * j->r.nroles;
			for (size_t i = 0; i < j->ngens; i++)
				live += j->gens[i].len + 64;
		}
	if (d->journal.bytes < 2 * live + (1u << 20))
		return 0;
	if (ckptd_journal_compact(&d->journal, emit, d, err, sizeof(err)) < 0) {
		phx_warn("%s; the journal keeps growing until this is fixed", err);
		return 0;
	}
	d->m.journal_compactions++;
	phx_debug("journal compacted to %llu bytes", (unsigned long long)d->journal.bytes);
	return 0;
}
