/* SPDX-License-Identifier: Apache-2.0 */
/* phalanx health [--node NAME] [--job-gpus LIST] [--json] [--config FILE] */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "common/conf.h"
#include "common/gpulist.h"
#include "health/health.h"
#include "common/log.h"
#include "cli/cli_args.h"
#include "cli/commands.h"

#define USAGE "usage: phalanx health [--node NAME] [--job-gpus LIST] [--json] [--config FILE]"

struct health_args {
	const char *node;
	const char *job_gpus;
	const char *config;
	bool json;
};

/* 0 = run, 1 = --help done, 2 = usage error. */
static int parse_args(int argc, char **argv, struct health_args *a)
{
	static const struct option opts[] = {
		{ "node", required_argument, NULL, 'n' },
		{ "job-gpus", required_argument, NULL, 'g' },
		{ "config", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			a->node = optarg;
			break;
		case 'g':
			a->job_gpus = optarg;
			break;
		case 'c':
			a->config = optarg;
			break;
		case 'j':
			a->json = true;
			break;
		case 'h':
			printf("%s\nRuns the node health checks of the job prolog on this node "
			       "and prints each result.\nExit status: 0 all passed, 1 a check "
			       "failed, 2 bad usage or configuration.\n"
			       "See phalanx(1), spank_phalanx(8).\n",
			       USAGE);
			return 1;
		default:
			return phx_cli_option_error("health", c, argv, USAGE);
		}
	}
	if (phx_cli_no_arguments("health", argc, argv, USAGE))
		return 2;
	return 0;
}

/* The given file must load; the default one may be absent (defaults). */
static int load_conf(const char *path, struct phx_conf *conf)
{
	char err[512];

	if (!path && access(PHX_CONF_DEFAULT_PATH, F_OK) < 0 && errno == ENOENT) {
		phx_info("%s does not exist; using the built-in defaults", PHX_CONF_DEFAULT_PATH);
		return phx_conf_defaults(conf);
	}
	if (phx_conf_load_file(path ? path : PHX_CONF_DEFAULT_PATH, conf, err, sizeof(err)) < 0) {
		phx_error("%s", err);
		phx_conf_free(conf);
		return -1;
	}
	return 0;
}

static void print_text(const struct phx_conf *conf, const char *node,
		       const struct phx_health_report *rep)
{
	printf("node %s: ", node ? node : "(unnamed)");
	if (rep->failed)
		printf("%zu of %zu checks failed\n", rep->failed, rep->n);
	else
		printf("no check failed\n");
	for (size_t i = 0; i < rep->n; i++) {
		const struct phx_health_result *r = &rep->results[i];

		printf("  %-8s %-4s  %s\n", r->name,
		       r->status == PHX_HEALTH_FAIL ? "FAIL" : phx_health_status_name(r->status),
		       r->reason);
		if (r->hint[0])
			printf("  %-8s %-4s  hint: %s\n", "", "", r->hint);
	}
	if (!conf->health.enabled)
		printf("note: health.enabled is false: the job prolog does not run these checks\n");
}

static int print_json(const struct phx_conf *conf, const char *node,
		      const struct phx_health_report *rep)
{
	struct json_object *obj = json_object_new_object(), *list = json_object_new_array();

	if (!obj || !list)
		goto nomem;
	json_object_object_add(obj, "node", node ? json_object_new_string(node) : NULL);
	json_object_object_add(obj, "enabled", json_object_new_boolean(conf->health.enabled));
	json_object_object_add(obj, "failed", json_object_new_int((int)rep->failed));
	for (size_t i = 0; i < rep->n; i++) {
		const struct phx_health_result *r = &rep->results[i];
		struct json_object *o = json_object_new_object();

		if (!o)
			goto nomem;
		json_object_object_add(o, "name", json_object_new_string(r->name));
		json_object_object_add(o, "status",
				       json_object_new_string(phx_health_status_name(r->status)));
		json_object_object_add(o, "reason", json_object_new_string(r->reason));
		json_object_object_add(o, "hint", json_object_new_string(r->hint));
		json_object_array_add(list, o);
	}
	json_object_object_add(obj, "checks", list);
	puts(json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
							 JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(obj);
	return 0;
nomem:
	json_object_put(list);
	json_object_put(obj);
	phx_error("health: out of memory writing JSON");
	return -1;
}

/* SLURMD_NODENAME as in a prolog, else the short host name. */
static const char *default_node(char *buf, size_t len)
{
	const char *env = getenv("SLURMD_NODENAME");

	if (env && *env)
		return env;
	if (gethostname(buf, len) < 0)
		return NULL;
	buf[len - 1] = '\0';
	buf[strcspn(buf, ".")] = '\0';
	return buf;
}

int phx_cmd_health(int argc, char **argv)
{
	struct health_args a = { .node = NULL };
	struct phx_health_ctx ctx = { .node = NULL };
	struct phx_health_report rep;
	struct phx_conf conf;
	struct phx_gpus gpus;
	char host[256];
	int rc = parse_args(argc, argv, &a);

	if (rc)
		return rc == 1 ? 0 : 2;
	if (a.job_gpus && phx_gpus_parse(a.job_gpus, &gpus, NULL, 0) < 0) {
		phx_error("health: --job-gpus '%s' is not a GPU index list like 0,2-3", a.job_gpus);
		return 2;
	}
	if (load_conf(a.config, &conf) < 0)
		return 2;
	ctx.node = a.node ? a.node : default_node(host, sizeof(host));
	ctx.job_gpus = a.job_gpus;
	/* By hand, without a job: NVML looks at every GPU it sees. */
	ctx.all_gpus = !a.job_gpus;
	phx_health_run(&conf, &ctx, &rep);
	if (a.json)
		rc = print_json(&conf, ctx.node, &rep) < 0 ? 2 : 0;
	else
		print_text(&conf, ctx.node, &rep);
	phx_conf_free(&conf);
	return rc ? rc : rep.failed ? 1 : 0;
}
