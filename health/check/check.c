/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phalanx-check: the node side of 'phalanx check', one task per node of a
 * step (srun --mpi=pmix --ntasks-per-node=1). Each node tests its GPUs;
 * then, in two rounds, pairs of nodes all-reduce over NCCL. Between the
 * phases one collecting PMIx fence hands every node everyone's results
 * (and a fresh NCCL id from each), from which each node works out the
 * same pairs (health/preflight.c). The first rank prints the results of
 * all nodes as one JSON document; the front end judges them.
 *
 * --local tests this node alone without PMIx, and --local-nccl adds an
 * all-reduce over this node's own GPUs (tests/gpu/run uses both).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>
#include <pmix.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/log.h"
#include "health/preflight.h"
#include "health/check/check.h"

#define USAGE "usage: phalanx-check [--config FILE] [--node NAME] [--local [--local-nccl]]"
#define KEY_FMT "phx.check.%d"

struct args {
	const char *config;
	const char *node;
	bool local, local_nccl;
};

struct step {
	pmix_proc_t me;
	uint32_t size;
	struct phx_conf conf;
	struct phx_check_limits lim;
	struct phx_check_node mine;
	struct phx_check_results all;
	char (*ids)[PHX_NCCL_ID_HEX]; /* each node's NCCL id of the last phase */
};

static int parse_args(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "node", required_argument, NULL, 'n' },
		{ "local", no_argument, NULL, 'l' },
		{ "local-nccl", no_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			a->config = optarg;
			break;
		case 'n':
			a->node = optarg;
			break;
		case 'l':
			a->local = true;
			break;
		case 'L':
			a->local = a->local_nccl = true;
			break;
		case 'h':
			printf("%s\nThe node side of 'phalanx check'; see phalanx-check(8).\n",
			       USAGE);
			return 1;
		default:
			fprintf(stderr, "phalanx: phalanx-check: bad option '%s'\n%s\n",
				argv[optind - 1], USAGE);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "phalanx: phalanx-check: unexpected argument '%s'\n%s\n",
			argv[optind], USAGE);
		return 2;
	}
	return 0;
}

static int load_conf(const char *path, struct phx_conf *conf)
{
	char err[512];

	if (!path && access(PHX_CONF_DEFAULT_PATH, F_OK) < 0 && errno == ENOENT)
		return phx_conf_defaults(conf);
	if (phx_conf_load_file(path ? path : PHX_CONF_DEFAULT_PATH, conf, err, sizeof(err)) < 0) {
		phx_error("%s", err);
		return -1;
	}
	phx_log_set_level(conf->log_level);
	return 0;
}

static void node_name(const char *given, char *out, size_t len)
{
	const char *env = getenv("SLURMD_NODENAME");

	if (given || (env && *env)) {
		snprintf(out, len, "%s", given ? given : env);
		return;
	}
	if (gethostname(out, len) < 0)
		snprintf(out, len, "localhost");
	out[len - 1] = '\0';
	out[strcspn(out, ".")] = '\0';
}

/*
 * The results go to the original stdout only. Everything else that writes
 * to stdout (NCCL_DEBUG=INFO does, by default) goes to stderr, so the
 * front end always reads one clean JSON document.
 */
static FILE *results_out;

static int keep_stdout_for_results(void)
{
	int fd = dup(STDOUT_FILENO);

	if (fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
		return -1;
	results_out = fdopen(fd, "w");
	return results_out ? 0 : -1;
}

static int print_doc(struct json_object *doc)
{
	const char *text = json_object_to_json_string_ext(
		doc,
		JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);

	if (fprintf(results_out, "%s\n", text) < 0 || fflush(results_out) == EOF) {
		phx_error("check: writing the results failed: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ PMIx */

static int pmix_fail(const char *what, pmix_status_t rc)
{
	phx_error("check: %s failed: %s; run phalanx-check through 'phalanx check' or "
		  "'srun --mpi=pmix --ntasks-per-node=1'",
		  what, PMIx_Error_string(rc));
	return -1;
}

static int wire_init(struct step *s)
{
	pmix_proc_t job;
	pmix_value_t *val = NULL;
	pmix_status_t rc = PMIx_Init(&s->me, NULL, 0);

	if (rc != PMIX_SUCCESS)
		return pmix_fail("PMIx_Init", rc);
	PMIX_LOAD_PROCID(&job, s->me.nspace, PMIX_RANK_WILDCARD);
	rc = PMIx_Get(&job, PMIX_JOB_SIZE, NULL, 0, &val);
	if (rc != PMIX_SUCCESS)
		return pmix_fail("PMIx_Get(PMIX_JOB_SIZE)", rc);
	s->size = val->type == PMIX_UINT32 ? val->data.uint32 : 0;
	PMIX_VALUE_RELEASE(val);
	if (!s->size || s->size > PHX_CHECK_MAX_NODES) {
		phx_error("check: PMIx job size %u is not usable", s->size);
		return -1;
	}
	return 0;
}

static int put_and_fence(struct step *s, const char *key, const char *value)
{
	pmix_value_t val;
	pmix_proc_t all;
	pmix_info_t info;
	pmix_status_t rc;
	bool collect = true;

	PMIX_VALUE_CONSTRUCT(&val);
	val.type = PMIX_STRING;
	val.data.string = (char *)value;
	rc = PMIx_Put(PMIX_GLOBAL, key, &val);
	if (rc != PMIX_SUCCESS)
		return pmix_fail("PMIx_Put", rc);
	rc = PMIx_Commit();
	if (rc != PMIX_SUCCESS)
		return pmix_fail("PMIx_Commit", rc);
	PMIX_LOAD_PROCID(&all, s->me.nspace, PMIX_RANK_WILDCARD);
	PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
	rc = PMIx_Fence(&all, 1, &info, 1);
	PMIX_INFO_DESTRUCT(&info);
	if (rc != PMIX_SUCCESS)
		return pmix_fail("PMIx_Fence", rc);
	return 0;
}

/* Node r's value of key: its results and its NCCL id. */
static int take(struct step *s, uint32_t r, const char *key)
{
	struct phx_check_node node;
	struct json_object *obj, *v;
	pmix_value_t *val = NULL;
	pmix_proc_t proc;
	pmix_status_t rc;
	char err[256];
	int ret = -1;

	PMIX_LOAD_PROCID(&proc, s->me.nspace, r);
	rc = PMIx_Get(&proc, key, NULL, 0, &val);
	if (rc != PMIX_SUCCESS || !val || val->type != PMIX_STRING)
		return pmix_fail("PMIx_Get of a node's results", rc);
	obj = json_tokener_parse(val->data.string);
	PMIX_VALUE_RELEASE(val);
	if (!obj || !json_object_object_get_ex(obj, "results", &v) ||
	    phx_check_node_from_json(v, &node, err, sizeof(err)) < 0) {
		phx_error("check: the results of rank %u do not parse: %s", r,
			  obj ? err : "not JSON");
		goto out;
	}
	s->ids[r][0] = '\0';
	if (json_object_object_get_ex(obj, "nccl_id", &v))
		snprintf(s->ids[r], PHX_NCCL_ID_HEX, "%s", json_object_get_string(v));
	if (phx_check_results_add(&s->all, &node) < 0) {
		phx_check_node_free(&node);
		goto out;
	}
	ret = 0;
out:
	json_object_put(obj);
	return ret;
}

/* Publishes this node's results (and a fresh NCCL id), gathers everyone's. */
static int exchange(struct step *s, int phase)
{
	struct json_object *obj = json_object_new_object();
	char key[32], id[PHX_NCCL_ID_HEX] = "", err[256];
	int rc = -1;

	if (!obj)
		return -1;
	if (phase < PHX_CHECK_ROUNDS && phx_check_node_usable(&s->mine) &&
	    phx_nccl_id(id, sizeof(id), err, sizeof(err)) < 0)
		phx_error("check: %s; this node sits out the NCCL rounds", err);
	json_object_object_add(obj, "results", phx_check_node_to_json(&s->mine));
	json_object_object_add(obj, "nccl_id", json_object_new_string(id));
	snprintf(key, sizeof(key), KEY_FMT, phase);
	if (put_and_fence(s, key, json_object_to_json_string(obj)) < 0)
		goto out;
	phx_check_results_free(&s->all);
	for (uint32_t r = 0; r < s->size; r++) {
		if (take(s, r, key) < 0)
			goto out;
	}
	rc = 0;
out:
	json_object_put(obj);
	return rc;
}

static void nccl_round(struct step *s, int round)
{
	long *partner = calloc(s->all.n, sizeof(*partner));
	struct phx_check_link *link;
	struct phx_nccl_pair pair;
	long me = (long)s->me.rank, p, first;

	if (!partner)
		return;
	phx_check_pairs(&s->all, round, &s->lim, partner);
	p = partner[me];
	free(partner);
	if (p < 0)
		return;
	first = me < p ? me : p;
	link = &s->mine.links[s->mine.n_links++];
	memset(link, 0, sizeof(*link));
	link->round = round;
	snprintf(link->peer, sizeof(link->peer), "%s", s->all.nodes[p].name);
	pair.id_hex = s->ids[first];
	pair.ngpus = (int)s->mine.n_gpus;
	pair.nranks = (int)(s->mine.n_gpus + s->all.nodes[p].n_gpus);
	pair.first_rank = me < p ? 0 : (int)s->all.nodes[p].n_gpus;
	pair.bytes = (size_t)s->conf.check.nccl_mib << 20;
	pair.timeout_s = s->conf.check.nccl_timeout_s;
	/* Each node's pairing is for debugging; rank 0 sums the round up. */
	phx_debug("check: round %d: all-reduce with %s", round, link->peer);
	phx_nccl_run(&pair, link);
}

/* Rank 0 holds everyone's results after each exchange: one line per phase for the whole step. */
static void say_phase(const struct step *s, int phase, uint64_t t0_ns)
{
	double took = (double)(phx_now_ns(CLOCK_MONOTONIC) - t0_ns) / 1e9;
	size_t usable = 0, paired = 0, failed = 0;

	if (s->me.rank != 0)
		return;
	for (size_t i = 0; i < s->all.n; i++) {
		const struct phx_check_node *n = &s->all.nodes[i];

		usable += phx_check_node_usable(n);
		for (size_t l = 0; l < n->n_links; l++) {
			if (n->links[l].round != phase)
				continue;
			paired++;
			failed += n->links[l].status != PHX_LINK_OK;
		}
	}
	if (!phase)
		phx_info("check: GPUs of %zu nodes checked after %.1f s: %zu usable, %zu not; %d "
			 "NCCL rounds next",
			 s->all.n, took, usable, s->all.n - usable, PHX_CHECK_ROUNDS);
	else
		phx_info("check: NCCL round %d of %d done after %.1f s: %zu nodes paired, %zu "
			 "failed",
			 phase, PHX_CHECK_ROUNDS, took, paired, failed);
}

static int run_step(struct step *s)
{
	uint64_t t0_ns = phx_now_ns(CLOCK_MONOTONIC);
	int rc = 0;

	if (wire_init(s) < 0)
		return 1;
	s->ids = calloc(s->size, sizeof(*s->ids));
	if (!s->ids)
		return 1;
	for (int phase = 0; phase <= PHX_CHECK_ROUNDS; phase++) {
		if (phase)
			nccl_round(s, phase);
		if (exchange(s, phase) < 0)
			return 1;
		say_phase(s, phase, t0_ns);
	}
	if (s->me.rank == 0) {
		struct json_object *doc = phx_check_results_to_json(&s->all, NULL);

		if (!doc)
			return 1;
		rc = print_doc(doc);
		json_object_put(doc);
	}
	return rc < 0 ? 1 : 0;
}

/* This node alone: its GPUs, and an all-reduce over them with --local-nccl. */
static int run_local(struct step *s, bool nccl)
{
	struct json_object *doc;
	struct phx_nccl_pair pair;
	char id[PHX_NCCL_ID_HEX], err[256];
	int rc;

	if (nccl && phx_check_node_usable(&s->mine)) {
		struct phx_check_link *link = &s->mine.links[s->mine.n_links++];

		if (phx_nccl_id(id, sizeof(id), err, sizeof(err)) < 0) {
			phx_error("check: %s", err);
			return 1;
		}
		memset(link, 0, sizeof(*link));
		link->round = 1;
		snprintf(link->peer, sizeof(link->peer), "%s", s->mine.name);
		pair = (struct phx_nccl_pair){ .id_hex = id,
					       .nranks = (int)s->mine.n_gpus,
					       .ngpus = (int)s->mine.n_gpus,
					       .bytes = (size_t)s->conf.check.nccl_mib << 20,
					       .timeout_s = s->conf.check.nccl_timeout_s };
		phx_nccl_run(&pair, link);
	}
	doc = phx_check_node_to_json(&s->mine);
	if (!doc)
		return 1;
	rc = print_doc(doc);
	json_object_put(doc);
	return rc < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct args a = { 0 };
	struct step s;
	int rc;

	memset(&s, 0, sizeof(s));
	rc = parse_args(argc, argv, &a);
	if (rc)
		return rc == 1 ? 0 : 2;
	if (keep_stdout_for_results() < 0) {
		phx_error("check: cannot set up stdout: %s", strerror(errno));
		return 1;
	}
	if (load_conf(a.config, &s.conf) < 0)
		return 2;
	phx_check_limits_from_conf(&s.conf, &s.lim);
	node_name(a.node, s.mine.name, sizeof(s.mine.name));
	if (phx_gpu_check(&s.conf, &s.mine) < 0) {
		phx_error("check: out of memory");
		return 1;
	}
	if (s.mine.error[0])
		phx_error("check: %s: %s", s.mine.name, s.mine.error);
	rc = a.local ? run_local(&s, a.local_nccl) : run_step(&s);
	if (!a.local && s.size)
		PMIx_Finalize(NULL, 0);
	phx_check_node_free(&s.mine);
	phx_check_results_free(&s.all);
	free(s.ids);
	phx_conf_free(&s.conf);
	return rc;
}
