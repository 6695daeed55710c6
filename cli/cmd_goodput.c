/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phalanx goodput JOB: where a job's wall time went, from phalanx-ckptd's
 * ledger (and, for a job whose driver reports its roles, each role's GPU
 * time). phalanx goodput --model: the goodput a system with a given save
 * stall and recovery time keeps at 1k, 10k and 100k GPUs.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "checkpoint/ckptd/goodput.h"
#include "checkpoint/proto/role_ledger.h"
#include "common/log.h"
#include "cli/ckptd_request.h"
#include "cli/cli_args.h"
#include "cli/commands.h"

const char phx_goodput_usage[] =
	"usage: phalanx goodput JOB [--json] " PHX_CKPTD_USAGE "\n"
	"       phalanx goodput --model [--gpus N] [--stall S] [--mttr S]\n"
	"                       [--failure-rate FAILURES/DAYS/GPUS | PER_GPU_HOUR] [--json]\n";

struct opts {
	struct phx_ckptd_where where;
	int json, model;
	double gpus, stall, mttr, rate;
};

static int parse_pos(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end || errno || !(v > 0) || !isfinite(v))
		return -1;
	*out = v;
	return 0;
}

/* "419/54/16384" (failures in days on GPUs) or failures per GPU-hour. */
static int parse_rate(const char *s, double *rate)
{
	double f, days, gpus;
	char *end;

	if (!strchr(s, '/')) {
		if (parse_pos(s, &f) < 0)
			return -1;
		*rate = f / 3600.0;
		return 0;
	}
	errno = 0;
	f = strtod(s, &end);
	if (*end != '/' || !(f > 0))
		return -1;
	days = strtod(end + 1, &end);
	if (*end != '/' || !(days > 0))
		return -1;
	gpus = strtod(end + 1, &end);
	if (*end || !(gpus > 0) || errno)
		return -1;
	*rate = f / (days * 86400.0 * gpus);
	return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		PHX_CKPTD_LONGOPTS,
		{ "json", no_argument, NULL, 'j' },
		{ "model", no_argument, NULL, 'M' },
		{ "gpus", required_argument, NULL, 'g' },
		{ "stall", required_argument, NULL, 'S' },
		{ "mttr", required_argument, NULL, 'R' },
		{ "failure-rate", required_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
		if (phx_ckptd_where_opt(&o->where, c, optarg))
			continue;
		switch (c) {
		case 'j':
			o->json = 1;
			break;
		case 'M':
			o->model = 1;
			break;
		case 'g':
		case 'S':
		case 'R': {
			double *v = c == 'g' ? &o->gpus : c == 'S' ? &o->stall : &o->mttr;

			if (parse_pos(optarg, v) < 0) {
				phx_error("goodput: %s '%s' must be a number above 0\n%s",
					  argv[optind - 1], optarg, phx_goodput_usage);
				return 2;
			}
			break;
		}
		case 'f':
			if (parse_rate(optarg, &o->rate) < 0) {
				phx_error("goodput: --failure-rate '%s' is neither "
					  "FAILURES/DAYS/GPUS "
					  "(e.g. 419/54/16384) nor failures per GPU-hour\n%s",
					  optarg, phx_goodput_usage);
				return 2;
			}
			break;
		default:
			return phx_cli_option_error("goodput", c, argv, phx_goodput_usage);
		}
	}
	if (!o->model && (o->gpus || o->stall || o->mttr || o->rate)) {
		phx_error("goodput: --gpus, --stall, --mttr and --failure-rate go with --model\n%s",
			  phx_goodput_usage);
		return 2;
	}
	return 0;
}

static void model_row(struct json_object *arr, const struct phx_gp_model *m)
{
	struct json_object *o;

	if (!arr) {
		printf("%10.0f %12.0f %12.0f %9.2f%%\n", m->gpus, m->mtbf_s, m->interval_s,
		       100.0 * m->goodput);
		return;
	}
	o = json_object_new_object();
	json_object_object_add(o, "gpus", json_object_new_double(m->gpus));
	json_object_object_add(o, "mtbf_s", json_object_new_double(m->mtbf_s));
	json_object_object_add(o, "interval_s", json_object_new_double(m->interval_s));
	json_object_object_add(o, "goodput", json_object_new_double(m->goodput));
	json_object_array_add(arr, o);
}

static int do_model(const struct opts *o)
{
	static const double scales[] = { 1000, 10000, 100000 };
	struct phx_gp_model m = { .stall_s = o->stall ? o->stall : 2.0,
				  .mttr_s = o->mttr ? o->mttr : 30.0,
				  .rate_per_gpu_s = o->rate ? o->rate : PHX_GP_LLAMA3_RATE };
	struct json_object *top = NULL, *arr = NULL;

	if (o->json) {
		top = json_object_new_object();
		arr = json_object_new_array();
		json_object_object_add(top, "stall_s", json_object_new_double(m.stall_s));
		json_object_object_add(top, "mttr_s", json_object_new_double(m.mttr_s));
		json_object_object_add(top, "failures_per_gpu_hour",
				       json_object_new_double(m.rate_per_gpu_s * 3600.0));
	} else {
		printf("save stall %.3g s, time to recover %.3g s, %.3g failures per GPU-hour\n",
		       m.stall_s, m.mttr_s, m.rate_per_gpu_s * 3600.0);
		printf("%10s %12s %12s %10s\n", "GPUS", "JOB_MTBF_S", "INTERVAL_S", "GOODPUT");
	}
	for (size_t i = 0; i < 3 + (o->gpus > 0); i++) {
		m.gpus = i < 3 ? scales[i] : o->gpus;
		phx_gp_model(&m);
		model_row(arr, &m);
	}
	if (top) {
		json_object_object_add(top, "scales", arr);
		printf("%s\n", json_object_to_json_string_ext(top, JSON_C_TO_STRING_PRETTY));
		json_object_put(top);
	}
	return 0;
}

static double num(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) ? json_object_get_double(v) : 0;
}

static const char *text(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : "";
}

/* Where each role's GPU time went, when the job's driver reports its roles. */
static void print_roles(struct json_object *r)
{
	struct json_object *roles;

	if (!json_object_object_get_ex(r, "roles", &roles) ||
	    !json_object_is_type(roles, json_type_array))
		return;
	for (size_t i = 0; i < json_object_array_length(roles); i++) {
		struct json_object *o = json_object_array_get_idx(roles, i), *parts = NULL;
		double total = num(o, "gpu_s");

		json_object_object_get_ex(o, "parts", &parts);
		printf("role %s: %.0f rank(s) now, %.2f GPU-seconds, goodput %.2f%%, %.0f "
		       "failure(s)\n",
		       text(o, "role"), num(o, "ranks"), total, 100.0 * num(o, "goodput"),
		       num(o, "failures"));
		for (int k = 0; k < PHX_RL_PARTS; k++) {
			double v = parts ? num(parts, phx_rl_part_name(k)) : 0;

			printf("  %-18s %12.2f GPU-s %6.2f%%\n", phx_rl_part_name(k), v,
			       total > 0 ? 100.0 * v / total : 0.0);
		}
	}
}

static void print_report(struct json_object *r)
{
	struct json_object *parts;
	double wall = num(r, "wall"), sum = 0;

	json_object_object_get_ex(r, "parts", &parts);
	printf("job %.0f: %s, wall %.2f s, goodput %.2f%%\n", num(r, "job"), text(r, "phase"), wall,
	       100.0 * num(r, "goodput"));
	for (int i = 0; i < PHX_GP_PARTS; i++) {
		double v = num(parts, phx_gp_part_name(i));

		sum += v;
		printf("  %-18s %12.2f s %6.2f%%\n", phx_gp_part_name(i), v,
		       wall > 0 ? 100.0 * v / wall : 0.0);
	}
	printf("  %-18s %12.2f s\n", "sum", sum);
	printf("failures %.0f, in-job restarts %.0f, lost agents %.0f, requeues %.0f of at most "
	       "%.0f\n",
	       num(r, "failures"), num(r, "restarts"), num(r, "lost_agents"), num(r, "requeues"),
	       num(r, "max_requeues"));
	if (num(r, "lost_agents") > 0)
		printf("last detection %.2f s\n", num(r, "detect_last"));
	if (num(r, "requeues") > 0 && strcmp(text(r, "phase"), "queue"))
		printf("last requeue to running %.2f s\n", num(r, "queue_last"));
	if (*text(r, "exclude"))
		printf("excluded nodes: %s\n", text(r, "exclude"));
	if (*text(r, "reason"))
		printf("%s: %s\n",
		       json_object_get_boolean(json_object_object_get(r, "stopped"))
			       ? "stopped"
			       : "last decision",
		       text(r, "reason"));
	print_roles(r);
}

int phx_cmd_goodput(int argc, char **argv)
{
	struct opts o = { 0 };
	struct phx_wire_msg m;
	struct json_object *req;
	char *end;
	unsigned long long job;
	int rc = parse(argc, argv, &o);

	if (rc)
		return rc;
	if (o.model)
		return optind == argc ? do_model(&o)
				      : phx_cli_no_arguments("goodput --model", argc, argv,
							     phx_goodput_usage);
	if (optind + 1 != argc) {
		phx_error("goodput: name one job id, or --model\n%s", phx_goodput_usage);
		return 2;
	}
	errno = 0;
	job = strtoull(argv[optind], &end, 10);
	if (*end || errno || !job || job > UINT32_MAX || argv[optind][0] < '0' ||
	    argv[optind][0] > '9') {
		phx_error("goodput: '%s' is not a job id\n%s", argv[optind], phx_goodput_usage);
		return 2;
	}
	req = phx_wire_new(PHX_MSG_GOODPUT);
	json_object_object_add(req, "job", json_object_new_uint64(job));
	if (phx_ckptd_request(&o.where, req, &m) < 0)
		return 1;
	if (o.json)
		printf("%s\n", json_object_to_json_string_ext(m.payload, JSON_C_TO_STRING_PRETTY));
	else
		print_report(m.payload);
	phx_wire_msg_free(&m);
	return 0;
}
