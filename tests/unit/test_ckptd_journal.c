/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phalanx-ckptd's journal and catalog: records survive a reopen, a torn or
 * corrupt tail is cut, and a restarted daemon replays exactly the committed
 * generations (never a partial one), removals, failure counts and the
 * compacted journal.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "checkpoint/ckptd/ckptd_catalog.h"
#include "checkpoint/ckptd/ckptd_job.h"
#include "checkpoint/ckptd/ckptd_journal.h"
#include "checkpoint/ckptd/ckptd_recovery.h"
#include "tests/unit/scratch.h"

#define SHA_A "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

static char dir[256];

static int setup(void **state)
{
	(void)state;
	return phx_scratch_make(dir, sizeof(dir), "test-ckptd-journal");
}

static int teardown(void **state)
{
	(void)state;
	return phx_scratch_remove(dir);
}

struct seen {
	int n;
	char bodies[8][32];
};

static int collect(void *arg, const char *body, size_t len, char *err, size_t errlen)
{
	struct seen *s = arg;

	(void)err;
	(void)errlen;
	if (s->n < 8)
		snprintf(s->bodies[s->n], sizeof(s->bodies[0]), "%.*s", (int)len, body);
	s->n++;
	return 0;
}

static off_t size_of(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return st.st_size;
}

static void test_records_and_torn_tail(void **state)
{
	struct ckptd_journal jr;
	struct seen s = { 0 };
	char path[512], err[256];
	off_t whole;
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "%s/j1", dir);
	assert_int_equal(ckptd_journal_open(&jr, path, collect, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 0);
	assert_int_equal(ckptd_journal_append(&jr, "{\"a\":1}", 7, err, sizeof(err)), 0);
	assert_int_equal(ckptd_journal_append(&jr, "{\"b\":2}", 7, err, sizeof(err)), 0);
	assert_int_equal(ckptd_journal_append(&jr, "{\"c\":3}", 7, err, sizeof(err)), 0);
	ckptd_journal_close(&jr);
	whole = size_of(path);
	/* A crash in the middle of a fourth record: a header and half a body. */
	fd = open(path, O_WRONLY | O_APPEND);
	assert_true(write(fd, "\0\0\0\x10\1\2\3\4{\"d\"", 12) == 12);
	close(fd);
	assert_int_equal(ckptd_journal_open(&jr, path, collect, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.bodies[2], "{\"c\":3}");
	assert_int_equal(size_of(path), whole);
	/* Appends continue after the cut. */
	assert_int_equal(ckptd_journal_append(&jr, "{\"d\":4}", 7, err, sizeof(err)), 0);
	ckptd_journal_close(&jr);
	/* A flipped byte in the second record ends the journal before it. */
	fd = open(path, O_WRONLY);
	assert_true(pwrite(fd, "X", 1, 15 + 8 + 3) == 1);
	close(fd);
	s.n = 0;
	assert_int_equal(ckptd_journal_open(&jr, path, collect, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.bodies[0], "{\"a\":1}");
	ckptd_journal_close(&jr);
}

/* Refuses the record {"b":...}: what a replay cannot apply (a clock stepped back, ...). */
static int collect_but_b(void *arg, const char *body, size_t len, char *err, size_t errlen)
{
	if (len > 4 && !strncmp(body, "{\"b\"", 4))
		return snprintf(err, errlen, "refused b"), -1;
	return collect(arg, body, len, err, errlen);
}

static void test_refused_record_keeps_the_rest(void **state)
{
	struct ckptd_journal jr;
	struct seen s = { 0 };
	char path[512], qpath[600], err[256];
	off_t whole;

	(void)state;
	snprintf(path, sizeof(path), "%s/j-refused", dir);
	snprintf(qpath, sizeof(qpath), "%s.refused", path);
	assert_int_equal(ckptd_journal_open(&jr, path, collect, &s, err, sizeof(err)), 0);
	assert_int_equal(ckptd_journal_append(&jr, "{\"a\":1}", 7, err, sizeof(err)), 0);
	assert_int_equal(ckptd_journal_append(&jr, "{\"b\":2}", 7, err, sizeof(err)), 0);
	assert_int_equal(ckptd_journal_append(&jr, "{\"c\":3}", 7, err, sizeof(err)), 0);
	ckptd_journal_close(&jr);
	whole = size_of(path);
	/* Before: replay cut the journal at b, and c (every later commit) was gone. */
	assert_int_equal(ckptd_journal_open(&jr, path, collect_but_b, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.bodies[1], "{\"c\":3}");
	assert_int_equal(jr.refused, 1);
	assert_int_equal(size_of(path), whole);
	/* The refused record is kept, framed as in the journal, for a look. */
	assert_int_equal(size_of(qpath), 8 + 7);
	ckptd_journal_close(&jr);
	/* A clean replay leaves no quarantine file behind. */
	unlink(qpath);
	s.n = 0;
	assert_int_equal(ckptd_journal_open(&jr, path, collect, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 3);
	assert_int_equal(access(qpath, F_OK), -1);
	ckptd_journal_close(&jr);
}

static int failing_sync(int fd)
{
	(void)fd;
	errno = EIO;
	return -1;
}

static int sync_calls;

/* Fails the first sync only: the cut after it succeeds. */
static int failing_once(int fd)
{
	if (sync_calls++ == 0) {
		errno = EIO;
		return -1;
	}
	return fdatasync(fd);
}

static void test_failed_sync_never_replays(void **state)
{
	struct ckptd_journal jr;
	struct seen s = { 0 };
	char path[512], err[256];

	(void)state;
	snprintf(path, sizeof(path), "%s/j-sync", dir);
	assert_int_equal(ckptd_journal_open(&jr, path, collect, &s, err, sizeof(err)), 0);
	assert_int_equal(ckptd_journal_append(&jr, "{\"a\":1}", 7, err, sizeof(err)), 0);
	/* The commit of an aborted generation: its sync fails, so it must not come back. */
	sync_calls = 0;
	jr.sync = failing_once;
	assert_int_equal(ckptd_journal_append(&jr, "{\"g\":2}", 7, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cut off"));
	assert_int_equal(size_of(path), 8 + 7);
	/* The journal goes on. */
	assert_int_equal(ckptd_journal_append(&jr, "{\"c\":3}", 7, err, sizeof(err)), 0);
	/* Neither sync nor the cut's sync works: nothing more is written. */
	jr.sync = failing_sync;
	assert_int_equal(ckptd_journal_append(&jr, "{\"h\":4}", 7, err, sizeof(err)), -1);
	assert_int_equal(jr.broken, 1);
	jr.sync = fdatasync;
	assert_int_equal(ckptd_journal_append(&jr, "{\"i\":5}", 7, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "restart phalanx-ckptd"));
	ckptd_journal_close(&jr);
	assert_int_equal(ckptd_journal_open(&jr, path, collect, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.bodies[0], "{\"a\":1}");
	assert_string_equal(s.bodies[1], "{\"c\":3}");
	ckptd_journal_close(&jr);
}

static void test_crc32(void **state)
{
	static const char text[] = "123456789abcdefghijklmnopqrstuvwxyz";

	(void)state;
	/* The standard check value, and a length that is not a multiple of 8. */
	assert_int_equal(ckptd_crc32("123456789", 9), 0xcbf43926u);
	assert_int_equal(ckptd_crc32(text, sizeof(text) - 1), 0x6649163au);
	assert_int_equal(ckptd_crc32("", 0), 0);
}

static struct ckptd *daemon_at(const char *sub, int keep)
{
	struct ckptd *d = calloc(1, sizeof(*d));
	char err[512];

	d->keep = keep;
	d->epfd = -1;
	d->node_mtbf_prior_s = 3600.0 * 5000;
	d->interval_seconds = 1800;
	snprintf(d->state_dir, sizeof(d->state_dir), "%s/%s", dir, sub);
	mkdir(d->state_dir, 0700);
	if (ckptd_catalog_load(d, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	return d;
}

static void daemon_free(struct ckptd *d)
{
	ckptd_journal_close(&d->journal);
	ckptd_jobs_free(d);
	free(d);
}

/* Node k prepares its ranks of gen, each in nloc tiers at path; returns the 2PC answer. */
static enum phx_commit_result prepare_at(struct ckptd_job *j, uint64_t gen, uint32_t k,
					 uint32_t per_node, char *path, size_t nloc)
{
	static const char *const tiers[] = { "local", "shared", "partner", "memory" };
	struct phx_manifest_shard *s = calloc(per_node, sizeof(*s));
	enum phx_commit_result r;
	char node[16], reason[256];
	uint64_t gave_way;

	snprintf(node, sizeof(node), "n%u", k);
	for (uint32_t i = 0; i < per_node; i++) {
		s[i].rank = k * per_node + i;
		s[i].bytes = 100 + s[i].rank;
		snprintf(s[i].digest.alg, sizeof(s[i].digest.alg), "sha256");
		snprintf(s[i].digest.hex, sizeof(s[i].digest.hex), SHA_A);
		for (size_t l = 0; l < nloc; l++) {
			snprintf(s[i].locations[l].tier, sizeof(s[i].locations[l].tier), "%s",
				 tiers[l]);
			s[i].locations[l].path = path;
		}
		s[i].nlocations = nloc;
	}
	assert_int_equal(phx_commit_prepare(&j->commit, gen, gen * 10, node, s, per_node, &r,
					    &gave_way, reason, sizeof(reason)),
			 0);
	free(s);
	return r;
}

static enum phx_commit_result prepare(struct ckptd_job *j, uint64_t gen, uint32_t k,
				      uint32_t per_node)
{
	return prepare_at(j, gen, k, per_node, "/ckpt/x", 1);
}

static void commit(struct ckptd *d, struct ckptd_job *j, uint64_t gen, uint32_t nodes,
		   uint32_t per_node)
{
	char err[512];

	for (uint32_t k = 0; k < nodes; k++)
		prepare(j, gen, k, per_node);
	if (ckptd_publish(d, j, gen, err, sizeof(err)) < 0)
		fail_msg("%s", err);
}

static void test_restart_replays_catalog(void **state)
{
	struct ckptd *d = daemon_at("s1", 3);
	struct ckptd_job *j = ckptd_job_get(d, 7, 1000);
	const struct ckptd_entry *e;
	char err[512], *text4;

	(void)state;
	assert_int_equal(ckptd_job_register(d, j, 2, 4, "dp=4", "steps:50", err, sizeof(err)), 0);
	for (uint64_t g = 1; g <= 4; g++)
		commit(d, j, g, 2, 2);
	assert_int_equal(j->ngens, 3);
	assert_int_equal(ckptd_remove(d, j, 3, err, sizeof(err)), 0);
	assert_int_equal(ckptd_note_failure(d, j), 0);
	/* Generation 5: one node of two prepared when the daemon dies. */
	assert_int_equal(prepare(j, 5, 0, 2), PHX_COMMIT_PENDING);
	text4 = strdup(ckptd_entry_find(j, 4)->text);
	daemon_free(d);

	d = daemon_at("s1", 3);
	j = ckptd_job_find(d, 7);
	assert_non_null(j);
	assert_int_equal(j->uid, 1000);
	assert_int_equal(j->nodes, 2);
	assert_int_equal(j->commit.world, 4);
	assert_string_equal(j->commit.layout, "dp=4");
	assert_string_equal(j->interval, "steps:50");
	assert_int_equal(j->ngens, 2);
	assert_int_equal(j->gens[0].gen, 2);
	assert_int_equal(j->gens[1].gen, 4);
	assert_int_equal(j->commit.committed, 4);
	assert_int_equal(j->commit.committed_step, 40);
	assert_null(ckptd_entry_find(j, 5));
	assert_null(ckptd_entry_find(j, 3));
	e = ckptd_entry_find(j, 0);
	assert_int_equal(e->gen, 4);
	assert_string_equal(e->text, text4);
	assert_int_equal(d->failures, 1);
	/* The agents send generation 5 again after reconnecting: it commits whole. */
	assert_int_equal(prepare(j, 5, 0, 2), PHX_COMMIT_PENDING);
	assert_int_equal(prepare(j, 5, 1, 2), PHX_COMMIT_READY);
	assert_int_equal(ckptd_publish(d, j, 5, err, sizeof(err)), 0);
	/* Removing the whole job is journaled too. */
	assert_int_equal(ckptd_remove(d, j, 0, err, sizeof(err)), 0);
	assert_null(ckptd_job_find(d, 7));
	daemon_free(d);
	d = daemon_at("s1", 3);
	assert_null(ckptd_job_find(d, 7));
	daemon_free(d);
	free(text4);
}

static void test_compaction(void **state)
{
	struct ckptd *d = daemon_at("s2", 2);
	struct ckptd_job *j = ckptd_job_get(d, 9, 0), *k;
	char err[512], path[512];

	(void)state;
	assert_int_equal(ckptd_job_register(d, j, 8, 256, "", NULL, err, sizeof(err)), 0);
	for (uint64_t g = 1; g <= 60; g++)
		commit(d, j, g, 8, 32);
	assert_true(d->m.journal_compactions > 0);
	snprintf(path, sizeof(path), "%s/s2/ckptd.journal", dir);
	/* Bounded by the live state plus the 1 MiB of slack, not sixty generations. */
	assert_true(size_of(path) < (off_t)(30 * ckptd_entry_find(j, 0)->len));
	daemon_free(d);
	d = daemon_at("s2", 2);
	k = ckptd_job_find(d, 9);
	assert_non_null(k);
	assert_int_equal(k->ngens, 2);
	assert_int_equal(k->gens[0].gen, 59);
	assert_int_equal(k->gens[1].gen, 60);
	assert_int_equal(k->commit.committed, 60);
	daemon_free(d);
}

/* The goodput ledger and the requeue count outlive the daemon, through the journal. */
static void test_recovery_ledger_replays(void **state)
{
	struct ckptd *d = daemon_at("s4", 2);
	struct ckptd_job *j = ckptd_job_get(d, 13, 1000);
	double p[PHX_GP_PARTS], q[PHX_GP_PARTS];
	char err[512], *text;

	(void)state;
	j->r.on = 1;
	phx_gp_begin(&j->r.gp, 1000);
	phx_gp_step(&j->r.gp, 1010);
	phx_gp_stall(&j->r.gp, 1030, 1.5);
	phx_gp_fault(&j->r.gp, 1050, 2.25);
	phx_gp_requeue(&j->r.gp, 1051);
	j->r.rec.requeues = 1;
	snprintf(j->r.exclude, sizeof(j->r.exclude), "n2");
	snprintf(j->r.reason, sizeof(j->r.reason), "phalanx: node n2 lost");
	text = ckptd_recovery_record(j);
	assert_int_equal(ckptd_journal_append(&d->journal, text, strlen(text), err, sizeof(err)),
			 0);
	free(text);
	phx_gp_snapshot(&j->r.gp, 1060, p);
	daemon_free(d);

	d = daemon_at("s4", 2);
	j = ckptd_job_find(d, 13);
	assert_non_null(j);
	assert_true(j->r.on);
	assert_int_equal(j->r.rec.requeues, 1);
	assert_int_equal(j->r.gp.phase, PHX_GP_PH_QUEUE);
	assert_string_equal(j->r.exclude, "n2");
	assert_string_equal(j->r.reason, "phalanx: node n2 lost");
	assert_true(phx_gp_snapshot(&j->r.gp, 1060, q) > 59.999 &&
		    phx_gp_snapshot(&j->r.gp, 1060, q) < 60.001);
	for (int i = 0; i < PHX_GP_PARTS; i++)
		assert_true(p[i] - q[i] < 1e-5 && q[i] - p[i] < 1e-5);
	daemon_free(d);
}

#define RL(name, run, prod, fail)                                                                  \
	name " run=" #run " ranks=8 productive=" #prod " waiting=20 restart=30 lost=4 detect=5 "   \
	     "failures=" #fail

static struct json_object *role_report(struct ckptd *d, struct ckptd_job *j, size_t i)
{
	struct json_object *o = ckptd_goodput_json(d, j), *roles, *r;

	assert_true(json_object_object_get_ex(o, "roles", &roles));
	r = json_object_get(json_object_array_get_idx(roles, i));
	json_object_put(o);
	return r;
}

static double num(struct json_object *o, const char *k)
{
	struct json_object *v;

	assert_true(json_object_object_get_ex(o, k, &v));
	return json_object_get_double(v);
}

/*
 * A driver's role records: a new driver run adds the old run's totals to
 * the role's base, a record of the same run replaces the newest, at most
 * PHX_RL_ROLES_MAX roles are kept, and the roles outlive the daemon
 * through the journal and its compaction.
 */
static void test_roles(void **state)
{
	struct ckptd *d = daemon_at("s8", 2);
	struct ckptd_job *j = ckptd_job_get(d, 31, 1000), *k;
	struct json_object *r, *parts;
	char err[512], name[16], rec[256];

	(void)state;
	assert_int_equal(ckptd_recovery_role(d, j, RL("trainer", 1, 0, 0), err, sizeof(err)), 0);
	assert_true(j->r.on);
	assert_int_equal(j->r.gp.phase, PHX_GP_PH_RESTART);
	/* Productive time: the job has left its start-up. */
	assert_int_equal(ckptd_recovery_role(d, j, RL("trainer", 1, 1000, 0), err, sizeof(err)), 0);
	assert_int_equal(j->r.gp.phase, PHX_GP_PH_RUN);
	assert_int_equal(ckptd_recovery_role(d, j, RL("rollout", 1, 700, 0), err, sizeof(err)), 0);
	assert_int_equal(ckptd_recovery_role(d, j, RL("trainer", 1, 2000, 1), err, sizeof(err)), 0);
	assert_int_equal(j->r.nroles, 2);
	assert_int_equal(j->r.roles[0].cur.part_ms[PHX_RL_PRODUCTIVE], 2000);
	assert_int_equal(j->r.roles[0].base_ms[PHX_RL_PRODUCTIVE], 0);
	/* The job's next driver: the first run's totals go to the base. */
	assert_int_equal(ckptd_recovery_role(d, j, RL("trainer", 2, 500, 0), err, sizeof(err)), 0);
	assert_int_equal(j->r.roles[0].base_ms[PHX_RL_PRODUCTIVE], 2000);
	assert_int_equal(j->r.roles[0].base_ms[PHX_RL_WAITING], 20);
	assert_int_equal(j->r.roles[0].base_failures, 1);
	assert_int_equal(j->r.roles[0].cur.run, 2);
	assert_int_equal(j->r.roles[0].cur.part_ms[PHX_RL_PRODUCTIVE], 500);
	/* Refused records change nothing. */
	assert_int_equal(ckptd_recovery_role(d, j, "trainer run=3", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "role record"));
	assert_int_equal(j->r.roles[0].cur.run, 2);
	for (int i = 2; i < PHX_RL_ROLES_MAX; i++) {
		snprintf(name, sizeof(name), "pool%d", i);
		snprintf(rec, sizeof(rec),
			 "%s run=1 ranks=1 productive=%d waiting=0 restart=0 "
			 "lost=0 detect=0 failures=0",
			 name, i);
		assert_int_equal(ckptd_recovery_role(d, j, rec, err, sizeof(err)), 0);
	}
	assert_int_equal(ckptd_recovery_role(d, j, RL("one_more", 1, 1, 0), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "16 roles"));
	assert_int_equal(j->r.nroles, PHX_RL_ROLES_MAX);
	/* The report sums the runs, in GPU-seconds. */
	r = role_report(d, j, 0);
	assert_string_equal(json_object_get_string(json_object_object_get(r, "role")), "trainer");
	assert_true(num(r, "ranks") == 8 && num(r, "failures") == 1);
	parts = json_object_object_get(r, "parts");
	assert_true(num(parts, "productive") == 2.5 && num(parts, "waiting") == 0.04 &&
		    num(parts, "restart") == 0.06 && num(parts, "lost_work") == 0.008 &&
		    num(parts, "detection") == 0.01);
	assert_true(fabs(num(r, "gpu_s") - 2.618) < 1e-9);
	assert_true(fabs(num(r, "goodput") - 2.5 / 2.618) < 1e-9);
	json_object_put(r);
	/* Within 30 s, a record of the same run and failures is not journaled... */
	assert_int_equal(ckptd_recovery_role(d, j, RL("trainer", 2, 600, 0), err, sizeof(err)), 0);
	assert_int_equal(ckptd_recovery_role(d, j, RL("rollout", 1, 800, 0), err, sizeof(err)), 0);
	daemon_free(d);
	d = daemon_at("s8", 2);
	j = ckptd_job_find(d, 31);
	assert_non_null(j);
	assert_int_equal(j->r.nroles, PHX_RL_ROLES_MAX);
	assert_string_equal(j->r.roles[0].cur.name, "trainer");
	assert_int_equal(j->r.roles[0].cur.part_ms[PHX_RL_PRODUCTIVE], 500);
	assert_int_equal(j->r.roles[0].base_ms[PHX_RL_PRODUCTIVE], 2000);
	assert_int_equal(j->r.roles[0].base_failures, 1);
	assert_int_equal(j->r.roles[1].cur.part_ms[PHX_RL_PRODUCTIVE], 700);
	assert_string_equal(j->r.roles[15].cur.name, "pool15");
	/* ... and after 30 s it is. */
	j->r.roles_journaled -= 31;
	assert_int_equal(ckptd_recovery_role(d, j, RL("trainer", 2, 900, 0), err, sizeof(err)), 0);
	/* Compaction keeps them: another job's commits grow the journal past its bound. */
	k = ckptd_job_get(d, 32, 1000);
	assert_int_equal(ckptd_job_register(d, k, 8, 256, "", NULL, err, sizeof(err)), 0);
	for (uint64_t g = 1; !d->m.journal_compactions; g++)
		commit(d, k, g, 8, 32);
	daemon_free(d);
	d = daemon_at("s8", 2);
	j = ckptd_job_find(d, 31);
	assert_non_null(j);
	assert_int_equal(j->r.nroles, PHX_RL_ROLES_MAX);
	assert_int_equal(j->r.roles[0].cur.part_ms[PHX_RL_PRODUCTIVE], 900);
	assert_int_equal(j->r.roles[0].base_ms[PHX_RL_PRODUCTIVE], 2000);
	daemon_free(d);
}

/* Journals of before roles replay; a record's roles are checked as strictly as the rest. */
static void test_roles_replay(void **state)
{
	struct ckptd *d = daemon_at("s9", 2);
	struct ckptd_job *j = ckptd_job_get(d, 41, 1000);
	char err[512], *text, bad[2048];
	const char *old = "{\"op\":\"recovery\",\"job\":42,\"uid\":7,\"requeues\":0,"
			  "\"stopped\":0,\"ended\":0,\"reason\":\"\",\"exclude\":\"\","
			  "\"phase\":\"run\",\"start_us\":1,\"since_us\":2,\"end_us\":0,"
			  "\"failures\":0,\"parts_us\":[1,0,0,0,0,0,0]}";
	static const char *const refused[][2] = {
		{ "[{\"name\":\"1x\",\"run\":1,\"ranks\":1,\"failures\":0,\"base_failures\":0,"
		  "\"base_ms\":[0,0,0,0,0],\"cur_ms\":[0,0,0,0,0]}]",
		  "start with a letter" },
		{ "[{\"name\":\"t\",\"run\":1,\"ranks\":1,\"failures\":0,\"base_failures\":0,"
		  "\"base_ms\":[0,0,0,0],\"cur_ms\":[0,0,0,0,0]}]",
		  "must hold 5 numbers" },
		{ "[{\"name\":\"t\",\"run\":1,\"ranks\":1,\"failures\":0,\"base_failures\":0,"
		  "\"base_ms\":[0,0,0,0,0],\"cur_ms\":[0,0,0,0,4503599627370497]}]",
		  "outside 0..4503599627370496" },
		{ "[{\"name\":\"t\",\"run\":1,\"ranks\":4294967296,\"failures\":0,"
		  "\"base_failures\":0,\"base_ms\":[0,0,0,0,0],\"cur_ms\":[0,0,0,0,0]}]",
		  "\"ranks\" must be from" },
		{ "[{\"name\":\"t\",\"run\":1,\"ranks\":1,\"failures\":0,\"base_failures\":0,"
		  "\"base_ms\":[0,0,0,0,0],\"cur_ms\":[0,0,0,0,0],\"x\":1}]",
		  "unknown key \"x\"" },
		{ "[{\"name\":\"t\",\"run\":1,\"ranks\":1,\"failures\":0,\"base_failures\":0,"
		  "\"base_ms\":[0,0,0,0,0],\"cur_ms\":[0,0,0,0,0]},"
		  "{\"name\":\"t\",\"run\":1,\"ranks\":1,\"failures\":0,\"base_failures\":0,"
		  "\"base_ms\":[0,0,0,0,0],\"cur_ms\":[0,0,0,0,0]}]",
		  "there twice" },
		{ "[1]", "not an object" },
		{ "{}", "must be an array" },
	};

	(void)state;
	/* A job without roles journals the record it always did. */
	j->r.on = 1;
	phx_gp_begin(&j->r.gp, 1000);
	text = ckptd_recovery_record(j);
	assert_null(strstr(text, "roles"));
	free(text);
	/* A record of before roles. */
	assert_int_equal(ckptd_catalog_replay(d, old, strlen(old), err, sizeof(err)), 0);
	j = ckptd_job_find(d, 42);
	assert_non_null(j);
	assert_int_equal(j->r.nroles, 0);
	assert_int_equal(j->r.gp.phase, PHX_GP_PH_RUN);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		snprintf(bad, sizeof(bad), "%.*s,\"roles\":%s}", (int)strlen(old) - 1, old,
			 refused[i][0]);
		err[0] = '\0';
		assert_int_equal(ckptd_catalog_replay(d, bad, strlen(bad), err, sizeof(err)), -1);
		if (!strstr(err, refused[i][1]))
			fail_msg("%s: '%s' lacks '%s'", bad, err, refused[i][1]);
	}
	/* A good one, then one without roles: the newest record is the whole state. */
	snprintf(bad, sizeof(bad), "%.*s,\"roles\":%s}", (int)strlen(old) - 1, old,
		 "[{\"name\":\"t\",\"run\":18446744073709551615,\"ranks\":1,\"failures\":2,"
		 "\"base_failures\":3,\"base_ms\":[1,2,3,4,5],\"cur_ms\":[6,7,8,9,10]}]");
	assert_int_equal(ckptd_catalog_replay(d, bad, strlen(bad), err, sizeof(err)), 0);
	assert_int_equal(j->r.nroles, 1);
	assert_true(j->r.roles[0].cur.run == UINT64_MAX);
	assert_int_equal(j->r.roles[0].base_ms[4], 5);
	assert_int_equal(j->r.roles[0].cur.part_ms[0], 6);
	assert_int_equal(j->r.roles[0].base_failures, 3);
	/* Written back as read. */
	text = ckptd_recovery_record(j);
	assert_non_null(strstr(text, "\"roles\":[{\"name\":\"t\",\"run\":18446744073709551615,"
				     "\"ranks\":1,\"failures\":2,\"base_failures\":3,"
				     "\"base_ms\":[1,2,3,4,5],\"cur_ms\":[6,7,8,9,10]}]"));
	free(text);
	assert_int_equal(ckptd_catalog_replay(d, old, strlen(old), err, sizeof(err)), 0);
	assert_int_equal(j->r.nroles, 0);
	daemon_free(d);
}

static void test_bad_register(void **state)
{
	struct ckptd *d = daemon_at("s3", 2);
	struct ckptd_job *j = ckptd_job_get(d, 11, 0);
	char err[512];

	(void)state;
	assert_int_equal(ckptd_job_register(d, j, 2, 4, "", "hourly", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not auto"));
	assert_int_equal(ckptd_job_register(d, j, 2, 4, "", NULL, err, sizeof(err)), 0);
	assert_int_equal(ckptd_job_register(d, j, 2, 8, "", NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "registered with 2 nodes, 4 ranks"));
	daemon_free(d);
}

/* A driver holds its job: a refused register or a removal must not free it under the driver. */
static void test_driver_holds_its_job(void **state)
{
	struct ckptd *d = daemon_at("s5", 2);
	struct ckptd_job *j = ckptd_job_get(d, 13, 0);
	char err[512];

	(void)state;
	j->drivers = 1; /* what on_auth does for a driver's connection */
	assert_int_equal(ckptd_job_register(d, j, 2, 4, "", "hourly", err, sizeof(err)), -1);
	ckptd_job_drop_if_empty(d, j);
	assert_ptr_equal(ckptd_job_find(d, 13), j);
	assert_int_equal(ckptd_remove(d, j, 0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "1 drivers connected"));
	assert_ptr_equal(ckptd_job_find(d, 13), j);
	/* The driver gone, the empty job goes too. */
	j->drivers = 0;
	ckptd_job_drop_if_empty(d, j);
	assert_null(ckptd_job_find(d, 13));
	daemon_free(d);
}

/*
 * A manifest larger than a reply (2,400 ranks, four copies each under a
 * 4,000-byte path: 38 MB) would commit and never be read back: it is
 * refused with the reason, nothing is journaled, and the job's next
 * generation commits.
 */
static void test_manifest_over_a_reply(void **state)
{
	struct ckptd *d = daemon_at("s6", 3);
	struct ckptd_job *j = ckptd_job_get(d, 11, 1000);
	const uint32_t nodes = 3, per_node = 800;
	static char long_path[4001];
	char err[512];

	(void)state;
	memset(long_path, 'p', sizeof(long_path) - 1);
	long_path[0] = '/';
	assert_int_equal(ckptd_job_register(d, j, nodes, nodes * per_node, "dp=*", "steps:50", err,
					    sizeof(err)),
			 0);
	for (uint32_t k = 0; k < nodes; k++)
		prepare_at(j, 1, k, per_node, long_path, 4);
	assert_int_equal(ckptd_publish(d, j, 1, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "a reply carries at most"));
	assert_int_equal(phx_commit_abort(&j->commit, 1), PHX_COMMIT_ABORTED);
	assert_null(ckptd_entry_find(j, 1));
	commit(d, j, 2, nodes, per_node);
	daemon_free(d);

	d = daemon_at("s6", 3);
	j = ckptd_job_find(d, 11);
	assert_non_null(j);
	assert_null(ckptd_entry_find(j, 1));
	assert_int_equal(ckptd_entry_find(j, 0)->gen, 2);
	daemon_free(d);
}

/*
 * One user's running jobs share ckptd.max_ranks_per_user; another user's
 * job, and a job whose agents have left, do not count, nor does a job's
 * own earlier run when it registers again.
 */
static void test_ranks_per_user(void **state)
{
	struct ckptd *d = daemon_at("s7", 2);
	struct ckptd_conn conn_a = { .order.role = PHX_ROLE_AGENT },
			  conn_b = { .order.role = PHX_ROLE_AGENT };
	struct ckptd_job *a = ckptd_job_get(d, 21, 1000), *b = ckptd_job_get(d, 22, 2000), *c;
	char err[512];

	(void)state;
	d->max_ranks_per_user = 100;
	assert_int_equal(ckptd_job_register(d, a, 2, 64, "", NULL, err, sizeof(err)), 0);
	assert_int_equal(ckptd_job_attach(d, a, &conn_a), 0);
	assert_int_equal(ckptd_job_register(d, b, 2, 90, "", NULL, err, sizeof(err)), 0);
	assert_int_equal(ckptd_job_attach(d, b, &conn_b), 0);
	c = ckptd_job_get(d, 23, 1000);
	assert_int_equal(ckptd_job_user_room(d, c, 36, err, sizeof(err)), 0);
	assert_int_equal(ckptd_job_user_room(d, c, 37, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "uid 1000's 1 other running job(s) hold 64 ranks"));
	assert_non_null(strstr(err, "ckptd.max_ranks_per_user (100)"));
	assert_int_equal(ckptd_job_user_room(d, a, 100, err, sizeof(err)), 0);
	ckptd_job_detach(d, &conn_a);
	assert_int_equal(ckptd_job_user_room(d, c, 100, err, sizeof(err)), 0);
	ckptd_job_detach(d, &conn_b);
	daemon_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32),
		cmocka_unit_test(test_records_and_torn_tail),
		cmocka_unit_test(test_refused_record_keeps_the_rest),
		cmocka_unit_test(test_failed_sync_never_replays),
		cmocka_unit_test(test_restart_replays_catalog),
		cmocka_unit_test(test_compaction),
		cmocka_unit_test(test_recovery_ledger_replays),
		cmocka_unit_test(test_roles),
		cmocka_unit_test(test_roles_replay),
		cmocka_unit_test(test_bad_register),
		cmocka_unit_test(test_driver_holds_its_job),
		cmocka_unit_test(test_manifest_over_a_reply),
		cmocka_unit_test(test_ranks_per_user),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
