/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phalanx check [--nodes HOSTLIST] [--results FILE] [--drain] [--json]
 *               [--config FILE] [--program PATH] [--timeout SECONDS]
 *
 * Runs the GPU and NCCL preflight check on the nodes of the allocation
 * (or replays recorded results), judges them against the thresholds of
 * phalanx.yaml, prints a table or JSON and, with --drain, drains the nodes
 * found bad with what was measured.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/hostlist.h"
#include "common/log.h"
#include "health/preflight.h"
#include "cli/cli_args.h"
#include "cli/commands.h"

#define USAGE                                                                                      \
	"usage: phalanx check [--nodes HOSTLIST] [--results FILE] [--drain] [--json]\n"            \
	"                     [--config FILE] [--program PATH] [--timeout SECONDS]"

/* Exit status: 0 all fine, 1 a node or a link is not, 2 usage, 3 no results. */
enum { EXIT_BAD_NODES = 1, EXIT_USAGE = 2, EXIT_RUN = 3 };

struct check_args {
	const char *nodes;
	const char *results;
	const char *config;
	const char *program;
	int timeout_s;
	bool drain, json;
};

static int parse_timeout(const char *s, int *out)
{
	long long v = phx_duration_parse(s);

	if (v < 1 || v > 86400)
		return -1;
	*out = (int)v;
	return 0;
}

/* 0 = run, 1 = --help done, 2 = usage error. */
static int parse_args(int argc, char **argv, struct check_args *a)
{
	static const struct option opts[] = {
		{ "nodes", required_argument, NULL, 'w' },
		{ "results", required_argument, NULL, 'r' },
		{ "config", required_argument, NULL, 'c' },
		{ "program", required_argument, NULL, 'p' },
		{ "timeout", required_argument, NULL, 't' },
		{ "drain", no_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'w':
			a->nodes = optarg;
			break;
		case 'r':
			a->results = optarg;
			break;
		case 'c':
			a->config = optarg;
			break;
		case 'p':
			a->program = optarg;
			break;
		case 't':
			if (parse_timeout(optarg, &a->timeout_s) < 0) {
				phx_error("check: --timeout '%s' is not a duration of 1 to 86400 "
					  "seconds (S, M:S, H:M:S or D-H:M:S)",
					  optarg);
				return 2;
			}
			break;
		case 'd':
			a->drain = true;
			break;
		case 'j':
			a->json = true;
			break;
		case 'h':
			printf("%s\nTests the GPUs and NCCL links of the allocation's nodes (or "
			       "replays --results) and reports the nodes below the thresholds of "
			       "phalanx.yaml.\nExit status: 0 all nodes fine, 1 some are not, "
			       "2 bad usage or configuration, 3 no results.\n"
			       "See phalanx-check(8).\n",
			       USAGE);
			return 1;
		default:
			return phx_cli_option_error("check", c, argv, USAGE);
		}
	}
	return phx_cli_no_arguments("check", argc, argv, USAGE);
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
	return 0;
}

static int expand_nodes(const char *expr, struct phx_hostnames *hosts)
{
	char err[256];

	if (!expr)
		expr = getenv("SLURM_JOB_NODELIST");
	if (!expr || !*expr) {
		phx_error("check: no nodes to check: run it inside an allocation (salloc, sbatch) "
			  "or give --nodes HOSTLIST");
		return -1;
	}
	if (phx_hostlist_expand(expr, hosts, err, sizeof(err)) < 0) {
		phx_error("check: --nodes '%s': %s", expr, err);
		return -1;
	}
	return 0;
}

/*
 * Marks the recorded nodes named in hosts; all must be there. The whole
 * recorded step is still judged: its medians and its pairs involve them all.
 */
static int select_nodes(const struct phx_check_results *res, const struct phx_hostnames *hosts,
			const char *file, bool *shown)
{
	for (size_t i = 0; i < res->n; i++)
		shown[i] = false;
	for (size_t h = 0; h < hosts->count; h++) {
		size_t i;

		for (i = 0; i < res->n && strcmp(res->nodes[i].name, hosts->names[h]); i++)
			;
		if (i == res->n) {
			phx_error("check: %s has no results for node %s; leave it out of --nodes",
				  file, hosts->names[h]);
			return -1;
		}
		shown[i] = true;
	}
	return 0;
}

static int get_results(const struct check_args *a, const struct phx_conf *conf,
		       struct phx_check_results *res, bool **shown)
{
	struct phx_check_run_opts opts = { a->program, a->config, a->timeout_s };
	struct phx_hostnames hosts = { 0 };
	char err[512];
	int rc = 0;

	if (a->results) {
		if (phx_check_results_load(a->results, res, err, sizeof(err)) < 0) {
			phx_error("check: --results %s", err);
			return -1;
		}
	} else if (expand_nodes(a->nodes, &hosts) < 0) {
		return -1;
	} else {
		phx_info("check: %zu nodes in one step, at most %d s; its first node reports each "
			 "phase",
			 hosts.count, opts.timeout_s ? opts.timeout_s : conf->check.timeout_s);
		if (phx_check_run(hosts.names, hosts.count, conf, &opts, res, err, sizeof(err)) <
		    0) {
			phx_error("check: %s", err);
			rc = -1;
		}
	}
	phx_hostnames_free(&hosts);
	if (rc < 0)
		return -1;
	*shown = calloc(res->n + 1, sizeof(**shown));
	if (!*shown)
		return -1;
	for (size_t i = 0; i < res->n; i++)
		(*shown)[i] = true;
	if (a->results && a->nodes &&
	    (expand_nodes(a->nodes, &hosts) < 0 ||
	     select_nodes(res, &hosts, a->results, *shown) < 0))
		rc = -1;
	phx_hostnames_free(&hosts);
	return rc;
}

static const struct phx_check_link *round1(const struct phx_check_node *node)
{
	for (size_t l = 0; l < node->n_links; l++) {
		if (node->links[l].round == 1)
			return &node->links[l];
	}
	return NULL;
}

/* A rate of the slowest GPU, or "-" when none was measured: never a made-up 0. */
static void rate(char *buf, size_t len, const struct phx_check_node *node, size_t offset)
{
	double low = 0;
	size_t n = 0;

	for (size_t g = 0; g < node->n_gpus; g++) {
		double v = *(const double *)(const void *)((const char *)&node->gpus[g] + offset);

		if (node->gpus[g].error[0])
			continue;
		low = !n++ || v < low ? v : low;
	}
	if (n)
		snprintf(buf, len, "%.1f", low);
	else
		snprintf(buf, len, "-");
}

static void print_row(const struct phx_check_node *node, const struct phx_check_verdict *v)
{
	const struct phx_check_link *l = round1(node);
	char gemm[32], h2d[32], d2h[32], nccl[32] = "-";

	rate(gemm, sizeof(gemm), node, offsetof(struct phx_check_gpu, gemm_tflops));
	rate(h2d, sizeof(h2d), node, offsetof(struct phx_check_gpu, h2d_gbps));
	rate(d2h, sizeof(d2h), node, offsetof(struct phx_check_gpu, d2h_gbps));
	if (l && l->status == PHX_LINK_OK)
		snprintf(nccl, sizeof(nccl), "%.1f", l->busbw_gbps);
	else if (l)
		snprintf(nccl, sizeof(nccl), "%s", phx_link_status_name(l->status));
	printf("%-16s %-7s %4zu %9s %8s %8s %9s  %s\n", node->name, phx_check_state_name(v->state),
	       node->n_gpus, gemm, h2d, d2h, nccl, v->reason[0] ? v->reason : v->note);
}

static void print_table(const struct phx_check_results *res, const struct phx_check_verdict *v)
{
	size_t bad = 0;

	printf("%-16s %-7s %4s %9s %8s %8s %9s  %s\n", "NODE", "STATE", "GPUS", "TFLOP/s",
	       "H2D GB/s", "D2H GB/s", "NCCL GB/s", "REASON");
	for (size_t i = 0; i < res->n; i++) {
		print_row(&res->nodes[i], &v[i]);
		bad += v[i].state != PHX_CHECK_OK;
	}
	printf("%zu of %zu nodes below threshold", bad, res->n);
	for (size_t i = 0, k = 0; i < res->n; i++) {
		if (v[i].state != PHX_CHECK_OK)
			printf("%s %s (%s)", k++ ? "," : ":", v[i].node,
			       phx_check_state_name(v[i].state));
	}
	printf("\n");
	for (size_t i = 0, k = 0; i < res->n; i++) {
		/* Each bad link once, from its end with the smaller name. */
		if (v[i].bad_link[0] && strcmp(v[i].node, v[i].bad_link) < 0)
			printf("%s %s-%s",
			       k++ ? "," : "bad links (both ends fine with other partners):",
			       v[i].node, v[i].bad_link);
		if (i + 1 == res->n && k)
			printf("\n");
	}
	printf("(columns: the slowest GPU of the node; NCCL: round 1)\n");
}

static int print_json(const struct phx_check_results *res, const struct phx_check_verdict *v)
{
	struct json_object *doc = phx_check_results_to_json(res, v);

	if (!doc) {
		phx_error("check: out of memory writing JSON");
		return -1;
	}
	puts(json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
							 JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(doc);
	return 0;
}

static bool any_bad_link(const struct phx_check_verdict *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (v[i].bad_link[0])
			return true;
	}
	return false;
}

/* The shown nodes and their verdicts, moved to the front of both arrays. */
static size_t compact(struct phx_check_results *view, struct phx_check_verdict *v,
		      const bool *shown)
{
	size_t k = 0;

	for (size_t i = 0; i < view->n; i++) {
		if (!shown[i])
			continue;
		view->nodes[k] = view->nodes[i];
		v[k++] = v[i];
	}
	return k;
}

static int report(const struct check_args *a, const struct phx_conf *conf,
		  const struct phx_check_results *res, const bool *shown)
{
	struct phx_check_verdict *v = calloc(res->n + 1, sizeof(*v));
	struct phx_check_results view = { calloc(res->n + 1, sizeof(*view.nodes)), res->n };
	struct phx_check_limits lim;
	size_t drained = 0;
	int rc = 0;

	if (!v || !view.nodes) {
		phx_error("check: out of memory");
		free(v);
		free(view.nodes);
		return EXIT_RUN;
	}
	phx_check_limits_from_conf(conf, &lim);
	phx_check_judge(res, &lim, v);
	/* A shallow copy: the view's nodes belong to res. */
	memcpy(view.nodes, res->nodes, res->n * sizeof(*view.nodes));
	view.n = compact(&view, v, shown);
	if (a->json)
		rc = print_json(&view, v) < 0 ? EXIT_RUN : 0;
	else
		print_table(&view, v);
	if (!rc && a->drain && phx_check_drain(v, view.n, &lim, &drained) > 0)
		rc = EXIT_RUN;
	if (a->drain)
		phx_info("check: drained %zu node%s", drained, drained == 1 ? "" : "s");
	if (!rc && (phx_check_worst(v, view.n) != PHX_CHECK_OK || any_bad_link(v, view.n)))
		rc = EXIT_BAD_NODES;
	free(view.nodes);
	free(v);
	return rc;
}

int phx_cmd_check(int argc, char **argv)
{
	struct check_args a = { 0 };
	struct phx_check_results res = { 0 };
	struct phx_conf conf;
	bool *shown = NULL;
	int rc = parse_args(argc, argv, &a);

	if (rc)
		return rc == 1 ? 0 : EXIT_USAGE;
	if (load_conf(a.config, &conf) < 0)
		return EXIT_USAGE;
	phx_log_set_level(conf.log_level);
	if (get_results(&a, &conf, &res, &shown) < 0)
		rc = EXIT_RUN;
	else
		rc = report(&a, &conf, &res, shown);
	free(shown);
	phx_check_results_free(&res);
	phx_conf_free(&conf);
	return rc;
}
