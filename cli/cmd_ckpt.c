/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phalanx ckpt ls|verify|rm and phalanx status: requests to phalanx-ckptd
 * over its Unix socket (cli/ckptd_request.c). The daemon decides what the
 * caller may see from the socket's peer credentials; verify reads the
 * shards from here.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "checkpoint/proto/ckpt_manifest.h"
#include "checkpoint/proto/ckpt_wire.h"
#include "checkpoint/proto/digest_file.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/runas.h"
#include "cli/ckptd_request.h"
#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/progress.h"

const char phx_ckpt_usage[] = "usage: phalanx ckpt ls [--job JOB] [--json] [WHERE]\n"
			      "       phalanx ckpt verify JOB [GEN] [--threads N] [WHERE]\n"
			      "       phalanx ckpt rm JOB GEN|all [WHERE]\n"
			      "WHERE: " PHX_CKPTD_USAGE "\n";
const char phx_status_usage[] = "usage: phalanx status [--json] " PHX_CKPTD_USAGE "\n";

static int parse_u64(const char *s, uint64_t min, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (*s < '0' || *s > '9' || *end || errno || v < min)
		return -1;
	*out = v;
	return 0;
}

/* ------------------------------------------------------------------ ls */

static void print_when(uint64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (gmtime_r(&tt, &tm))
		strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
	else
		snprintf(buf, len, "?");
}

static int do_ls(struct phx_ckptd_admin *a, uint64_t job, int json)
{
	struct json_object *o = phx_wire_new(PHX_MSG_LS);
	struct phx_wire_msg m;
	size_t n;

	if (job)
		json_object_object_add(o, "job", json_object_new_uint64(job));
	if (phx_ckptd_roundtrip(a, o, &m) < 0)
		return 1;
	if (m.type != PHX_MSG_LIST) {
		phx_error("phalanx-ckptd answered ls with %s", phx_msg_name(m.type));
		phx_wire_msg_free(&m);
		return 1;
	}
	if (json) {
		printf("%s\n", json_object_to_json_string_ext(m.payload, JSON_C_TO_STRING_PRETTY));
		phx_wire_msg_free(&m);
		return 0;
	}
	n = json_object_array_length(m.payload);
	printf("%-10s %-6s %-12s %-8s %-14s %s\n", "JOB", "GEN", "STEP", "RANKS", "BYTES",
	       "CREATED");
	for (size_t i = 0; i < n; i++) {
		struct json_object *g = json_object_array_get_idx(m.payload, i), *v;
		uint64_t f[6] = { 0 };
		static const char *const keys[] = { "job",   "gen",   "step",
						    "world", "bytes", "created" };
		char when[32];

		for (int k = 0; k < 6; k++)
			if (json_object_object_get_ex(g, keys[k], &v))
				f[k] = json_object_get_uint64(v);
		print_when(f[5], when, sizeof(when));
		printf("%-10llu %-6llu %-12llu %-8llu %-14llu %s\n", (unsigned long long)f[0],
		       (unsigned long long)f[1], (unsigned long long)f[2], (unsigned long long)f[3],
		       (unsigned long long)f[4], when);
	}
	phx_wire_msg_free(&m);
	return 0;
}

/* ------------------------------------------------------------------ verify */

static double mono_s(void)
{
	return (double)phx_now_ns(CLOCK_MONOTONIC) / 1e9;
}

struct verify {
	const struct phx_manifest *m;
	struct phx_progress progress;
	pthread_mutex_t lock;
	uint32_t next;
	uint32_t ok, corrupt, missing, unverifiable;
	uint32_t said; /* problem lines printed; a 16k-rank job is not listed whole */
};

#define VERIFY_SAY_MAX 20

/* 1 when this problem line may still be printed. */
static int may_say(struct verify *v)
{
	int ok;

	pthread_mutex_lock(&v->lock);
	ok = v->said++ < VERIFY_SAY_MAX;
	pthread_mutex_unlock(&v->lock);
	if (ok)
		phx_progress_clear(&v->progress);
	return ok;
}

static void verify_rank(struct verify *v, uint32_t r)
{
	const struct phx_manifest_shard *s = &v->m->shards[r];
	int good = 0, bad = 0, unknown = 0;

	for (size_t i = 0; i < s->nlocations; i++) {
		char err[512];
		/* Ranks are checked in parallel already: one hashing thread per file. */
		int rc = phx_digest_file_check(s->locations[i].path, s->bytes, s->digest.alg,
					       s->digest.hex, 1, err, sizeof(err));

		if (rc == PHX_DIGEST_FILE_OK)
			good++;
		else if (rc == PHX_DIGEST_FILE_BAD) {
			bad++;
			if (may_say(v))
				phx_warn("rank %u: %s copy is corrupt: %s", r, s->locations[i].tier,
					 err);
		} else if (rc == PHX_DIGEST_FILE_UNKNOWN) {
			unknown++;
			if (may_say(v))
				phx_error("rank %u: cannot verify: %s", r, err);
		} else if (may_say(v)) {
			phx_warn("rank %u: %s copy is not readable here: %s", r,
				 s->locations[i].tier, err);
		}
	}
	pthread_mutex_lock(&v->lock);
	if (good)
		v->ok++;
	else if (bad)
		v->corrupt++;
	else if (unknown)
		v->unverifiable++;
	else
		v->missing++;
	pthread_mutex_unlock(&v->lock);
	if (!good && !bad && !unknown && may_say(v))
		phx_warn("rank %u: no copy of its shard is readable from this host (%zu tiers)", r,
			 s->nlocations);
	phx_progress_add(&v->progress, 1, s->bytes, mono_s());
}

static void *verify_worker(void *arg)
{
	struct verify *v = arg;

	for (;;) {
		uint32_t r;

		pthread_mutex_lock(&v->lock);
		r = v->next++;
		pthread_mutex_unlock(&v->lock);
		if (r >= v->m->world)
			return NULL;
		verify_rank(v, r);
	}
}

/* Checks every rank's copies of man; prints the summary. 0 when all verify. */
static int verify_manifest(const struct phx_manifest *man, int threads)
{
	struct verify v = { .m = man, .lock = PTHREAD_MUTEX_INITIALIZER };
	pthread_t tid[64];
	uint64_t bytes = 0;
	int n = 0;

	for (uint32_t r = 0; r < man->world; r++)
		bytes += man->shards[r].bytes;
	phx_progress_init(&v.progress, "verify", "ranks", man->world, bytes, stderr,
			  isatty(STDERR_FILENO), mono_s());

	for (; n < threads && n < 64; n++)
		if (pthread_create(&tid[n], NULL, verify_worker, &v))
			break;
	if (!n)
		verify_worker(&v);
	while (n--)
		pthread_join(tid[n], NULL);
	phx_progress_end(&v.progress);
	if (v.said > VERIFY_SAY_MAX)
		phx_warn("%u more problems not shown", v.said - VERIFY_SAY_MAX);
	printf("job %u generation %llu (step %llu, %u ranks): %u verified, %u corrupt, %u not "
	       "readable here, %u with an unknown digest algorithm\n",
	       man->job, (unsigned long long)man->generation, (unsigned long long)man->step,
	       man->world, v.ok, v.corrupt, v.missing, v.unverifiable);
	return v.ok == man->world ? 0 : 1;
}

/* In a child that is the job's owner: paths in a manifest are the user's to name. */
struct verify_job {
	const struct phx_manifest *man;
	int threads;
};

static int verify_child(void *arg, int out_fd)
{
	const struct verify_job *v = arg;

	(void)out_fd;
	return verify_manifest(v->man, v->threads);
}

static int verify_as(uid_t uid, const struct phx_manifest *man, int threads)
{
	struct verify_job v = { man, threads };
	struct passwd *pw = getpwuid(uid);
	int rc;

	if (!pw) {
		phx_error("job %u belongs to uid %u, which has no passwd entry here; run verify on "
			  "a host that knows the user",
			  man->job, (unsigned)uid);
		return 1;
	}
	rc = phx_run_as(uid, pw->pw_gid, 0, verify_child, &v, NULL, 0);
	if (rc < 0) {
		phx_error("cannot become uid %u to verify its files; run verify as the job's owner",
			  (unsigned)uid);
		return 1;
	}
	return rc;
}

static int do_verify(struct phx_ckptd_admin *a, uint64_t job, uint64_t gen, int threads)
{
	struct json_object *o = phx_wire_new(PHX_MSG_QUERY);
	struct phx_manifest man;
	struct phx_wire_msg m;
	char err[512];
	int rc;

	json_object_object_add(o, "job", json_object_new_uint64(job));
	json_object_object_add(o, "gen", json_object_new_uint64(gen));
	if (phx_ckptd_roundtrip(a, o, &m) < 0)
		return 1;
	if (m.type != PHX_MSG_MANIFEST || !m.payload) {
		phx_error("job %llu has no committed generation %llu", (unsigned long long)job,
			  (unsigned long long)gen);
		phx_wire_msg_free(&m);
		return 1;
	}
	if (geteuid() == 0 && !m.has_uid) {
		phx_error("phalanx-ckptd did not say who owns job %llu (an older daemon?); run "
			  "verify as the job's owner, or update phalanx-ckptd",
			  (unsigned long long)job);
		phx_wire_msg_free(&m);
		return 1;
	}
	if (phx_manifest_from_json(m.payload, &man, err, sizeof(err)) < 0) {
		phx_error("the catalog's manifest of job %llu is bad: %s", (unsigned long long)job,
			  err);
		phx_wire_msg_free(&m);
		return 1;
	}
	/* root reads the shards as the job's owner: never what that user could not. */
	if (geteuid() == 0 && m.uid != 0)
		rc = verify_as((uid_t)m.uid, &man, threads);
	else
		rc = verify_manifest(&man, threads);
	phx_wire_msg_free(&m);
	phx_manifest_free(&man);
	return rc;
}

/* ------------------------------------------------------------------ rm, status */

static int do_rm(struct phx_ckptd_admin *a, uint64_t job, uint64_t gen)
{
	struct json_object *o = phx_wire_new(PHX_MSG_RM);
	struct phx_wire_msg m;

	json_object_object_add(o, "job", json_object_new_uint64(job));
	json_object_object_add(o, "gen", json_object_new_uint64(gen));
	if (phx_ckptd_roundtrip(a, o, &m) < 0)
		return 1;
	phx_wire_msg_free(&m);
	if (gen)
		printf("removed generation %llu of job %llu from the catalog\n",
		       (unsigned long long)gen, (unsigned long long)job);
	else
		printf("removed job %llu and its generations from the catalog\n",
		       (unsigned long long)job);
	return 0;
}

static uint64_t field(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) ? json_object_get_uint64(v) : 0;
}

/* Nodes Phalanx drained that return to service only after a passing check. */
static void print_untrusted(struct json_object *status)
{
	struct json_object *a, *e, *v;
	size_t n;

	if (!json_object_object_get_ex(status, "untrusted", &a) ||
	    !json_object_is_type(a, json_type_array) || !(n = json_object_array_length(a)))
		return;
	printf("untrusted nodes (drained; resumed after a passing check):\n");
	for (size_t i = 0; i < n; i++) {
		e = json_object_array_get_idx(a, i);
		json_object_object_get_ex(e, "node", &v);
		printf("  %-16s %llu faults  ", json_object_get_string(v),
		       (unsigned long long)field(e, "faults"));
		json_object_object_get_ex(e, "reason", &v);
		printf("%s\n", json_object_get_string(v));
	}
}

/* A job's stop, or its requeue's wait for nodes, under the table. */
static void print_recovery(struct json_object *j)
{
	struct json_object *reason, *stopped, *phase;

	if (!json_object_object_get_ex(j, "reason", &reason) || !*json_object_get_string(reason))
		return;
	json_object_object_get_ex(j, "stopped", &stopped);
	json_object_object_get_ex(j, "phase", &phase);
	printf("job %llu: %s: %s\n", (unsigned long long)field(j, "job"),
	       json_object_get_boolean(stopped)				  ? "stopped"
	       : phase && !strcmp(json_object_get_string(phase), "queue") ? "requeued"
									  : "last decision",
	       json_object_get_string(reason));
}

static int do_status(struct phx_ckptd_admin *a, int json)
{
	struct phx_wire_msg m;
	struct json_object *jobs;
	size_t n;

	if (phx_ckptd_roundtrip(a, phx_wire_new(PHX_MSG_STATUS), &m) < 0)
		return 1;
	if (json) {
		printf("%s\n", json_object_to_json_string_ext(m.payload, JSON_C_TO_STRING_PRETTY));
		phx_wire_msg_free(&m);
		return 0;
	}
	json_object_object_get_ex(m.payload, "jobs", &jobs);
	n = json_object_array_length(jobs);
	printf("phalanx-ckptd: %llu agents connected, %zu jobs, %llu committed generations\n",
	       (unsigned long long)field(m.payload, "agents"), n,
	       (unsigned long long)field(m.payload, "generations"));
	if (n)
		printf("%-10s %-8s %-6s %-7s %-7s %-10s %-12s %s\n", "JOB", "UID", "NODES", "RANKS",
		       "AGENTS", "COMMITTED", "STEP", "INTERVAL");
	for (size_t i = 0; i < n; i++) {
		struct json_object *j = json_object_array_get_idx(jobs, i), *mode;
		char iv[64];

		json_object_object_get_ex(j, "interval_mode", &mode);
		if (field(j, "interval_steps"))
			snprintf(iv, sizeof(iv), "%llu steps",
				 (unsigned long long)field(j, "interval_steps"));
		else
			snprintf(iv, sizeof(iv), "%llu s (%s)",
				 (unsigned long long)field(j, "interval_seconds"),
				 json_object_get_string(mode));
		printf("%-10llu %-8llu %-6llu %-7llu %-7llu %-10llu %-12llu %s\n",
		       (unsigned long long)field(j, "job"), (unsigned long long)field(j, "uid"),
		       (unsigned long long)field(j, "nodes"), (unsigned long long)field(j, "ranks"),
		       (unsigned long long)field(j, "agents"),
		       (unsigned long long)field(j, "committed"),
		       (unsigned long long)field(j, "step"), iv);
	}
	for (size_t i = 0; i < n; i++)
		print_recovery(json_object_array_get_idx(jobs, i));
	print_untrusted(m.payload);
	phx_wire_msg_free(&m);
	return 0;
}

/* ------------------------------------------------------------------ commands */

struct common_opts {
	struct phx_ckptd_where where;
	int json, threads;
	uint64_t job;
};

static int parse_common(const char *cmd, const char *usage, int argc, char **argv,
			struct common_opts *o)
{
	static const struct option longopts[] = {
		PHX_CKPTD_LONGOPTS,
		{ "json", no_argument, NULL, 'j' },
		{ "job", required_argument, NULL, 'J' },
		{ "threads", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
		if (phx_ckptd_where_opt(&o->where, c, optarg))
			continue;
		switch (c) {
		case 'j':
			o->json = 1;
			break;
		case 'J':
			if (parse_u64(optarg, 1, &o->job) < 0 || o->job > UINT32_MAX) {
				phx_error("%s: --job '%s' is not a job id\n%s", cmd, optarg, usage);
				return 2;
			}
			break;
		case 't':
			if (parse_u64(optarg, 1, &v) < 0 || v > 64) {
				phx_error("%s: --threads '%s' must be 1 to 64\n%s", cmd, optarg,
					  usage);
				return 2;
			}
			o->threads = (int)v;
			break;
		default:
			return phx_cli_option_error(cmd, c, argv, usage);
		}
	}
	return 0;
}

int phx_cmd_ckpt(int argc, char **argv)
{
	struct common_opts o = { .threads = 8 };
	struct phx_ckptd_admin a = { .fd = -1 };
	const char *sub = argc > 1 ? argv[1] : "";
	uint64_t job = 0, gen = 0;
	int rc;

	if (strcmp(sub, "ls") && strcmp(sub, "verify") && strcmp(sub, "rm")) {
		phx_error("ckpt: expected ls, verify or rm\n%s", phx_ckpt_usage);
		return 2;
	}
	rc = parse_common("ckpt", phx_ckpt_usage, argc - 1, argv + 1, &o);
	if (rc)
		return rc;
	argc--, argv++;
	if (!strcmp(sub, "ls")) {
		rc = phx_cli_no_arguments("ckpt ls", argc, argv, phx_ckpt_usage);
	} else if (optind >= argc || parse_u64(argv[optind], 1, &job) < 0 || job > UINT32_MAX) {
		phx_error("ckpt %s: name a job id\n%s", sub, phx_ckpt_usage);
		rc = 2;
	} else if (!strcmp(sub, "rm") &&
		   (optind + 2 != argc || (strcmp(argv[optind + 1], "all") &&
					   parse_u64(argv[optind + 1], 1, &gen) < 0))) {
		phx_error("ckpt rm: name a job and a generation (or 'all')\n%s", phx_ckpt_usage);
		rc = 2;
	} else if (!strcmp(sub, "verify") &&
		   (optind + 2 < argc ||
		    (optind + 1 < argc && parse_u64(argv[optind + 1], 1, &gen) < 0))) {
		phx_error("ckpt verify: name a job and at most one generation\n%s", phx_ckpt_usage);
		rc = 2;
	}
	if (rc)
		return rc;
	rc = 1;
	if (phx_ckptd_open(&a, &o.where) == 0) {
		if (!strcmp(sub, "ls"))
			rc = do_ls(&a, o.job, o.json);
		else if (!strcmp(sub, "verify"))
			rc = do_verify(&a, job, gen, o.threads);
		else
			rc = do_rm(&a, job, gen);
	}
	phx_ckptd_close(&a);
	return rc;
}

int phx_cmd_status(int argc, char **argv)
{
	struct common_opts o = { 0 };
	struct phx_ckptd_admin a = { .fd = -1 };
	int rc = parse_common("status", phx_status_usage, argc, argv, &o);

	if (rc || (rc = phx_cli_no_arguments("status", argc, argv, phx_status_usage)))
		return rc;
	rc = 1;
	if (phx_ckptd_open(&a, &o.where) == 0)
		rc = do_status(&a, o.json);
	phx_ckptd_close(&a);
	return rc;
}
