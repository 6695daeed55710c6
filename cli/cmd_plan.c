/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phalanx plan --layout SPEC --nodes HOSTLIST --gpus-per-node N [--fabric FILE]
 *              [--topology-conf FILE] [--slow HOSTLIST] [--world-size N]
 *              [--traffic SPEC] [--megatron] [--json] [--explain]
 * Prints the rank map and what it costs next to Slurm's host-name order and
 * the lower bound; --megatron also the Megatron-LM arguments that form the
 * same groups. See phalanx-plan(1).
 */
#include "config.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "placement/fabric.h"
#include "common/hostlist.h"
#include "placement/layout.h"
#include "placement/megatron.h"
#include "common/log.h"
#include "placement/placement.h"
#include "cli/cli_args.h"
#include "cli/plan_sim.h"
#include "cli/commands.h"

#define USAGE                                                                                      \
	"usage: phalanx plan --layout SPEC --nodes HOSTLIST --gpus-per-node N\n"                   \
	"                    [--fabric FILE] [--topology-conf FILE] [--slow HOSTLIST]\n"           \
	"                    [--world-size N] [--traffic SPEC] [--megatron] [--json]\n"            \
	"                    [--explain]"

struct plan_args {
	const char *layout, *nodes, *fabric, *topology_conf, *slow, *traffic;
	unsigned long gpus_per_node, world;
	bool json, explain, megatron;
};

struct plan_inputs {
	struct phx_layout layout;
	struct phx_hostnames nodes, slow;
	struct phx_fabric *fabric;
	struct phx_traffic traffic;
	struct phx_megatron megatron;
};

/* ---------------------------------------------------------------- text */

static double per_rank_ms(const struct phx_plan *plan, uint64_t total)
{
	return (double)total / (double)plan->world / 1e6;
}

/* "1.23x", or "-" when there is nothing to compare with. */
static const char *ratio(uint64_t a, uint64_t b, char *buf, size_t len)
{
	if (!b)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.3fx", (double)a / (double)b);
	return buf;
}

static void print_header(const struct phx_plan *plan)
{
	char layout[160], r1[32], r2[32];
	uint64_t bound = 0;
	size_t spare = 0;

	phx_layout_format(&plan->layout, layout, sizeof(layout));
	for (size_t i = 0; i < plan->n_nodes; i++)
		spare += !!(plan->nodes[i].flags & PHX_PLAN_NODE_SPARE);
	printf("layout      %s (%lu ranks)\n", layout, plan->world);
	printf("nodes       %zu used of %zu, %u GPUs each\n", plan->n_nodes - spare, plan->n_nodes,
	       plan->gpus_per_node);
	printf("strategy    %s\n", plan->strategy);
	if (phx_plan_lower_bound(plan, &bound) < 0)
		phx_error("plan: out of memory computing the lower bound; it reads 0");
	printf("cost        %.3f ms/rank per step; host-name order %.3f (%s the plan); lower bound "
	       "%.3f (plan %s)\n",
	       per_rank_ms(plan, plan->cost.total), per_rank_ms(plan, plan->hostname.total),
	       ratio(plan->hostname.total, plan->cost.total, r1, sizeof(r1)),
	       per_rank_ms(plan, bound), ratio(plan->cost.total, bound, r2, sizeof(r2)));
	printf("step        %.1f ms of communication by the link model (busiest link); host-name "
	       "order %.1f ms (%s the plan); lower bound %.1f ms (plan %s)\n",
	       (double)plan->cost.step_ns / 1e6, (double)plan->hostname.step_ns / 1e6,
	       ratio(plan->hostname.step_ns, plan->cost.step_ns, r1, sizeof(r1)),
	       (double)plan->step_bound_ns / 1e6,
	       ratio(plan->cost.step_ns, plan->step_bound_ns, r2, sizeof(r2)));
	printf("cross-leaf  %.1f GiB per step; host-name order %.1f GiB (%s the plan)\n",
	       (double)plan->cost.cross_leaf_mib / 1024,
	       (double)plan->hostname.cross_leaf_mib / 1024,
	       ratio(plan->hostname.cross_leaf_mib, plan->cost.cross_leaf_mib, r1, sizeof(r1)));
}

/* "tp 3 dp 1" for the dimensions larger than 1. */
static void print_coords(const struct phx_plan *plan, unsigned long rank)
{
	unsigned long c[PHX_DIM_COUNT];

	phx_layout_coords(&plan->layout, rank, c);
	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		if (plan->layout.size[d] > 1)
			printf("  %s %-4lu", phx_dim_name(d), c[d]);
	}
}

static void print_map(const struct phx_plan *plan)
{
	unsigned long c[PHX_DIM_COUNT];

	printf("\n%-8s %-20s %4s %4s %6s %6s %6s %6s %6s\n", "rank", "node", "gpu", "nic", "tp",
	       "cp", "ep", "dp", "pp");
	for (unsigned long r = 0; r < plan->world; r++) {
		phx_layout_coords(&plan->layout, r, c);
		printf("%-8lu %-20s %4u %4s %6lu %6lu %6lu %6lu %6lu\n", r,
		       plan->nodes[plan->rank_node[r]].name, plan->rank_gpu[r], "-", c[0], c[1],
		       c[2], c[3], c[4]);
	}
}

static void print_levels(const char *what, const char *unit, const struct phx_plan_cost *c)
{
	printf("%s:\n", what);
	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		uint64_t n = 0;

		for (int l = 0; l < PHX_LEVEL_COUNT; l++)
			n += c->groups[d][l];
		if (!n)
			continue;
		printf("  %s %8llu %-6s", phx_dim_name(d), (unsigned long long)n,
		       d == PHX_DIM_PP ? "pairs" : unit);
		for (int l = 0; l < PHX_LEVEL_COUNT; l++) {
			if (c->groups[d][l])
				printf("  %s %llu", phx_level_name(l),
				       (unsigned long long)c->groups[d][l]);
		}
		printf("   (%.3f ms/rank)\n", (double)c->by_dim[d] / 1e6);
	}
}

static void print_explain(const struct phx_plan *plan)
{
	unsigned long *first = calloc(plan->n_nodes * plan->gpus_per_node, sizeof(*first));

	printf("\nwidest level each group spans (pp: neighbouring stages)\n");
	print_levels("plan", "groups", &plan->cost);
	print_levels("host-name order", "groups", &plan->hostname);
	if (!first) {
		phx_error("plan: out of memory");
		return;
	}
	/* Rank + 1 on each GPU, 0 when unused. */
	for (unsigned long r = 0; r < plan->world; r++)
		first[(size_t)plan->rank_node[r] * plan->gpus_per_node + plan->rank_gpu[r]] = r + 1;
	printf("\nper node\n");
	for (size_t i = 0; i < plan->n_nodes; i++) {
		const struct phx_plan_node *n = &plan->nodes[i];

		printf("%s  leaf %s  spine %s  nvlink %s%s%s\n", n->name,
		       n->leaf[0] ? n->leaf : "-", n->spine[0] ? n->spine : "-",
		       n->domain[0] ? n->domain : "-",
		       n->flags & PHX_PLAN_NODE_SLOW ? "  slow" : "",
		       n->flags & PHX_PLAN_NODE_SPARE ? "  spare, not used" : "");
		for (unsigned g = 0; g < plan->gpus_per_node; g++) {
			unsigned long r = first[i * plan->gpus_per_node + g];

			if (!r)
				continue;
			printf("  gpu %-3u rank %-8lu", g, r - 1);
			print_coords(plan, r - 1);
			putchar('\n');
		}
	}
	free(first);
}

/* Host-name order's map, kept from the candidates phx_place() prices. */
struct host_map {
	uint32_t *rank_node;
	unsigned long world;
};

static void keep_host_map(void *ctx, const char *name, const uint32_t *rank_node)
{
	struct host_map *h = ctx;

	if (strcmp(name, "host-name order") || h->rank_node)
		return;
	h->rank_node = malloc(h->world * sizeof(*h->rank_node));
	if (h->rank_node)
		memcpy(h->rank_node, rank_node, h->world * sizeof(*h->rank_node));
}

/* The shared-link model, then SimGrid's simulation, of the plan and host-name order. */
static void print_simulated(const struct phx_plan *plan, const struct host_map *h)
{
	struct phx_step_times mine, host;
	struct plan_sim_times t;
	char why[512], r[32];

	if (!h->rank_node) {
		printf("simulated   not run: host-name order's map was not kept (out of memory)\n");
		return;
	}
	if (phx_plan_step_times(plan, plan->rank_node, &mine) < 0 ||
	    phx_plan_step_times(plan, h->rank_node, &host) < 0) {
		printf("shared      not computed: out of memory\n");
	} else {
		printf("shared      %.1f ms of communication by the shared-link model (flows "
		       "sharing every link fairly); host-name order %.1f ms (%s the plan)\n",
		       (double)mine.shared_ns / 1e6, (double)host.shared_ns / 1e6,
		       ratio(host.shared_ns, mine.shared_ns, r, sizeof(r)));
	}
	if (phx_plan_sim_run(plan, h->rank_node, &t, why, sizeof(why)) < 0) {
		printf("simulated   not run: %s\n", why);
		return;
	}
	printf("simulated   %.1f ms of communication by SimGrid (flows sharing links); host-name "
	       "order %.1f ms (%.3fx the plan)\n",
	       t.plan_s * 1e3, t.hostname_s * 1e3, t.plan_s > 0 ? t.hostname_s / t.plan_s : 0);
}

/* ---------------------------------------------------------------- json */

static struct json_object *cost_json(const struct phx_plan_cost *c)
{
	struct json_object *o = json_object_new_object(), *groups = json_object_new_object();

	json_object_object_add(o, "step_ns", json_object_new_uint64(c->step_ns));
	json_object_object_add(o, "total_ns", json_object_new_uint64(c->total));
	json_object_object_add(o, "cross_leaf_mib", json_object_new_uint64(c->cross_leaf_mib));
	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		struct json_object *lv = json_object_new_object();

		json_object_object_add(lv, "cost_ns", json_object_new_uint64(c->by_dim[d]));
		for (int l = 0; l < PHX_LEVEL_COUNT; l++)
			json_object_object_add(lv, phx_level_name(l),
					       json_object_new_uint64(c->groups[d][l]));
		json_object_object_add(groups, phx_dim_name(d), lv);
	}
	json_object_object_add(o, "groups", groups);
	return o;
}

static struct json_object *model_json(const struct phx_plan *plan)
{
	struct json_object *o = json_object_new_object(), *w = json_object_new_object();
	struct json_object *t = json_object_new_object();

	for (int l = 0; l < PHX_LEVEL_COUNT; l++)
		json_object_object_add(w, phx_level_name(l),
				       json_object_new_uint64(plan->weight[l]));
	for (int d = 0; d < PHX_DIM_COUNT; d++)
		json_object_object_add(t, phx_dim_name(d),
				       json_object_new_uint64(plan->traffic.mib[d]));
	json_object_object_add(o, "ns_per_mib", w);
	json_object_object_add(o, "traffic_mib", t);
	return o;
}

static struct json_object *nodes_json(const struct phx_plan *plan)
{
	struct json_object *a = json_object_new_array();

	for (size_t i = 0; i < plan->n_nodes; i++) {
		const struct phx_plan_node *n = &plan->nodes[i];
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "name", json_object_new_string(n->name));
		json_object_object_add(o, "leaf", json_object_new_string(n->leaf));
		json_object_object_add(o, "spine", json_object_new_string(n->spine));
		json_object_object_add(o, "nvlink_domain", json_object_new_string(n->domain));
		json_object_object_add(o, "slow",
				       json_object_new_boolean(!!(n->flags & PHX_PLAN_NODE_SLOW)));
		json_object_object_add(o, "spare",
				       json_object_new_boolean(!!(n->flags & PHX_PLAN_NODE_SPARE)));
		json_object_object_add(o, "used_gpus", json_object_new_int((int)n->used_gpus));
		json_object_array_add(a, o);
	}
	return a;
}

static struct json_object *ranks_json(const struct phx_plan *plan)
{
	struct json_object *a = json_object_new_array_ext((int)plan->world);
	unsigned long c[PHX_DIM_COUNT];

	for (unsigned long r = 0; r < plan->world; r++) {
		struct json_object *o = json_object_new_object();

		phx_layout_coords(&plan->layout, r, c);
		json_object_object_add(o, "rank", json_object_new_uint64(r));
		json_object_object_add(
			o, "node", json_object_new_string(plan->nodes[plan->rank_node[r]].name));
		json_object_object_add(o, "local_gpu", json_object_new_int(plan->rank_gpu[r]));
		json_object_object_add(o, "nic", NULL);
		for (int d = 0; d < PHX_DIM_COUNT; d++)
			json_object_object_add(o, phx_dim_name(d), json_object_new_uint64(c[d]));
		json_object_array_add(a, o);
	}
	return a;
}

static struct json_object *megatron_json(const struct phx_megatron *mg)
{
	struct json_object *o = json_object_new_object();
	char args[512];

	phx_megatron_args(mg, args, sizeof(args));
	json_object_object_add(o, "args", json_object_new_string(args));
	json_object_object_add(o, "tp", json_object_new_uint64(mg->tp));
	json_object_object_add(o, "cp", json_object_new_uint64(mg->cp));
	json_object_object_add(o, "pp", json_object_new_uint64(mg->pp));
	json_object_object_add(o, "ep", json_object_new_uint64(mg->ep));
	json_object_object_add(o, "etp", json_object_new_uint64(mg->etp));
	json_object_object_add(o, "dp", json_object_new_uint64(mg->dp));
	json_object_object_add(o, "edp", json_object_new_uint64(mg->edp));
	return o;
}

static int print_json(const struct phx_plan *plan, const struct phx_megatron *mg)
{
	struct json_object *o = json_object_new_object(), *cost = json_object_new_object();
	struct json_object *warnings = json_object_new_array();
	uint64_t bound = 0;
	char layout[160];

	if (!o || !cost || !warnings || phx_plan_lower_bound(plan, &bound) < 0) {
		phx_error("plan: out of memory writing JSON");
		json_object_put(o);
		json_object_put(cost);
		json_object_put(warnings);
		return 1;
	}
	phx_layout_format(&plan->layout, layout, sizeof(layout));
	json_object_object_add(o, "layout", json_object_new_string(layout));
	json_object_object_add(o, "world", json_object_new_uint64(plan->world));
	json_object_object_add(o, "gpus_per_node", json_object_new_int((int)plan->gpus_per_node));
	json_object_object_add(o, "strategy", json_object_new_string(plan->strategy));
	json_object_object_add(o, "model", model_json(plan));
	json_object_object_add(cost, "plan", cost_json(&plan->cost));
	json_object_object_add(cost, "hostname_order", cost_json(&plan->hostname));
	json_object_object_add(cost, "lower_bound_ns", json_object_new_uint64(bound));
	json_object_object_add(cost, "step_lower_bound_ns",
			       json_object_new_uint64(plan->step_bound_ns));
	json_object_object_add(o, "cost", cost);
	for (size_t i = 0; i < plan->n_warnings; i++)
		json_object_array_add(warnings, json_object_new_string(plan->warnings[i]));
	json_object_object_add(o, "warnings", warnings);
	if (mg)
		json_object_object_add(o, "megatron", megatron_json(mg));
	json_object_object_add(o, "nodes", nodes_json(plan));
	json_object_object_add(o, "ranks", ranks_json(plan));
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
						       JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	return 0;
}

/* ---------------------------------------------------------------- arguments */

static int number(const char *opt, const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	if (!s[0] || s[0] == '-' || s[0] == '+') {
		phx_error("plan: %s needs a positive whole number, got '%.60s'", opt, s);
		return -1;
	}
	v = strtoul(s, &end, 10);
	if (*end || v < 1 || v > max) {
		phx_error("plan: %s needs a whole number from 1 to %lu, got '%.60s'", opt, max, s);
		return -1;
	}
	*out = v;
	return 0;
}

static int parse_args(int argc, char **argv, struct plan_args *a)
{
	static const struct option opts[] = {
		{ "layout", required_argument, NULL, 'l' },
		{ "nodes", required_argument, NULL, 'n' },
		{ "gpus-per-node", required_argument, NULL, 'g' },
		{ "fabric", required_argument, NULL, 'f' },
		{ "topology-conf", required_argument, NULL, 't' },
		{ "slow", required_argument, NULL, 's' },
		{ "world-size", required_argument, NULL, 'w' },
		{ "traffic", required_argument, NULL, 'T' },
		{ "json", no_argument, NULL, 'j' },
		{ "explain", no_argument, NULL, 'e' },
		{ "megatron", no_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			a->layout = optarg;
			break;
		case 'n':
			a->nodes = optarg;
			break;
		case 'f':
			a->fabric = optarg;
			break;
		case 't':
			a->topology_conf = optarg;
			break;
		case 's':
			a->slow = optarg;
			break;
		case 'T':
			a->traffic = optarg;
			break;
		case 'j':
			a->json = true;
			break;
		case 'e':
			a->explain = true;
			break;
		case 'm':
			a->megatron = true;
			break;
		case 'g':
			if (number("--gpus-per-node", optarg, 1024, &a->gpus_per_node) < 0)
				return 2;
			break;
		case 'w':
			if (number("--world-size", optarg, PHX_LAYOUT_MAX_WORLD, &a->world) < 0)
				return 2;
			break;
		case 'h':
			printf("%s\nPlaces the ranks of a parallelism layout on an allocation and "
			       "compares\n"
			       "the cost with Slurm's host-name order. See phalanx-plan(1).\n",
			       USAGE);
			return 0;
		default:
			return phx_cli_option_error("plan", c, argv, USAGE);
		}
	}
	if (phx_cli_no_arguments("plan", argc, argv, USAGE))
		return 2;
	if (!a->layout || !a->nodes || !a->gpus_per_node) {
		phx_error("plan: --layout, --nodes and --gpus-per-node are required\n%s", USAGE);
		return 2;
	}
	return -1;
}

static int load_inputs(const struct plan_args *a, struct plan_inputs *in)
{
	unsigned long world = a->world;
	char err[1024];

	if (phx_layout_parse(a->layout, &in->layout, err, sizeof(err)) < 0) {
		phx_error("plan: --layout: %s", err);
		return 2;
	}
	if (a->traffic && phx_traffic_parse(a->traffic, &in->traffic, err, sizeof(err)) < 0) {
		phx_error("plan: --traffic: %s", err);
		return 2;
	}
	if (phx_hostlist_expand(a->nodes, &in->nodes, err, sizeof(err)) < 0) {
		phx_error("plan: --nodes: %s", err);
		return 2;
	}
	if (a->slow && phx_hostlist_expand(a->slow, &in->slow, err, sizeof(err)) < 0) {
		phx_error("plan: --slow: %s", err);
		return 2;
	}
	if (!world)
		world = in->layout.star >= 0 ? in->nodes.count * a->gpus_per_node : 0;
	if (!world) {
		/* The product, or one past the limit for resolve to refuse. */
		const unsigned long over = PHX_LAYOUT_MAX_WORLD + 1;

		world = 1;
		for (int d = 0; d < PHX_DIM_COUNT && world < over; d++)
			world *= in->layout.size[d];
		if (world > over)
			world = over;
	}
	if (phx_layout_resolve(&in->layout, world, err, sizeof(err)) < 0) {
		phx_error("plan: --layout: %s", err);
		return 2;
	}
	/* Megatron-LM forms its groups in two orders only: refused before placing. */
	if (a->megatron && phx_megatron_map(&in->layout, &in->megatron, err, sizeof(err)) < 0) {
		phx_error("plan: --megatron: %s", err);
		return 2;
	}
	if ((a->fabric || a->topology_conf) &&
	    phx_fabric_load(a->fabric, a->topology_conf, &in->fabric, err, sizeof(err)) < 0) {
		phx_error("plan: %s", err);
		return 1;
	}
	return 0;
}

int phx_cmd_plan(int argc, char **argv)
{
	struct plan_args a = { 0 };
	struct plan_inputs in = { 0 };
	struct phx_plan *plan = NULL;
	struct host_map host = { 0 };
	char err[1024];
	int ret = parse_args(argc, argv, &a);

	if (ret >= 0)
		return ret;
	phx_traffic_defaults(&in.traffic);
	ret = load_inputs(&a, &in);
	if (ret)
		goto out;
	host.world = in.layout.world;
	if (phx_place(&(struct phx_place_input){ .fabric = in.fabric,
						 .nodes = in.nodes.names,
						 .n_nodes = in.nodes.count,
						 .gpus_per_node = (unsigned)a.gpus_per_node,
						 .slow = in.slow.names,
						 .n_slow = in.slow.count,
						 .layout = &in.layout,
						 .traffic = &in.traffic,
						 .on_candidate = a.explain && !a.json
									 ? keep_host_map
									 : NULL,
						 .candidate_ctx = &host },
		      &plan, err, sizeof(err)) < 0) {
		phx_error("plan: %s", err);
		ret = 1;
		goto out;
	}
	for (size_t i = 0; i < plan->n_warnings; i++)
		phx_warn("plan: %s", plan->warnings[i]);
	if (a.json) {
		ret = print_json(plan, a.megatron ? &in.megatron : NULL);
		goto out;
	}
	print_header(plan);
	if (a.megatron) {
		char args[512];

		phx_megatron_args(&in.megatron, args, sizeof(args));
		printf("megatron-lm: %s\n", args);
	}
	if (a.explain) {
		print_simulated(plan, &host);
		print_explain(plan);
	} else
		print_map(plan);
out:
	free(host.rank_node);
	phx_plan_free(plan);
	phx_fabric_free(in.fabric);
	phx_hostnames_free(&in.nodes);
	phx_hostnames_free(&in.slow);
	return ret;
}
