/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "placement/fabric.h"
#include "placement/layout.h"
#include "placement/placement.h"
#include "placement/placement_int.h"
#include "tests/rng.h"

/* The plan's group-cost lower bound, computed on demand. */
static uint64_t lower_bound_of(const struct phx_plan *plan)
{
	uint64_t bound = 0;

	assert_int_equal(phx_plan_lower_bound(plan, &bound), 0);
	return bound;
}

static char err[1024];
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	return phx_xorshift64s(&rng_state);
}

static unsigned pick(unsigned lo, unsigned hi)
{
	return lo + (unsigned)(rng() % (hi - lo + 1));
}

struct scenario {
	struct phx_fabric *fabric;
	char *names[512];
	size_t n_nodes;
	char *slow[16];
	size_t n_slow;
	unsigned gpn;
	struct phx_layout layout;
	struct phx_traffic traffic;
	unsigned leaf_nodes[64]; /* allocated nodes per leaf */
	unsigned n_leaves;
};

static void free_scenario(struct scenario *s)
{
	for (size_t i = 0; i < s->n_nodes; i++)
		free(s->names[i]);
	for (size_t i = 0; i < s->n_slow; i++)
		free(s->slow[i]);
	phx_fabric_free(s->fabric);
	memset(s, 0, sizeof(*s));
}

static struct phx_fabric *fabric_from(const char *conf)
{
	struct phx_fabric *f = NULL;

	if (phx_fabric_parse(NULL, NULL, 0, "test.conf", conf, strlen(conf), &f, err, sizeof(err)) <
	    0)
		fail_msg("fabric: %s", err);
	return f;
}

static struct phx_plan *place(const struct scenario *s)
{
	struct phx_plan *plan = NULL;

	if (phx_place(&(struct phx_place_input){ .fabric = s->fabric,
						 .nodes = s->names,
						 .n_nodes = s->n_nodes,
						 .gpus_per_node = s->gpn,
						 .slow = s->slow,
						 .n_slow = s->n_slow,
						 .layout = &s->layout,
						 .traffic = &s->traffic },
		      &plan, err, sizeof(err)) < 0)
		fail_msg("phx_place: %s", err);
	return plan;
}

static void set_layout(struct scenario *s, const char *spec, unsigned long world)
{
	if (phx_layout_parse(spec, &s->layout, err, sizeof(err)) < 0 ||
	    phx_layout_resolve(&s->layout, world, err, sizeof(err)) < 0)
		fail_msg("layout %s: %s", spec, err);
}

static void add_node(struct scenario *s, const char *name)
{
	s->names[s->n_nodes++] = strdup(name);
}

/* A random tree of 1-3 spines, 1-4 leaves each, 1-6 nodes per leaf, maybe NVLink blocks. */
static void random_fabric(struct scenario *s)
{
	char conf[16384];
	size_t off = 0;
	unsigned spines = pick(1, 3), node = 0, leaf = 0, block = 0;
	bool blocks = rng() % 3 == 0;

	s->n_leaves = 0;
	for (unsigned sp = 0; sp < spines; sp++) {
		unsigned leaves = pick(1, 4), first = leaf;

		for (unsigned l = 0; l < leaves; l++, leaf++) {
			unsigned nodes = pick(1, 6), bsize = pick(2, 3);

			off += (size_t)snprintf(conf + off, sizeof(conf) - off,
						"SwitchName=leaf%u Nodes=n[%03u-%03u]\n", leaf,
						node, node + nodes - 1);
			for (unsigned b = 0; blocks && b + bsize <= nodes; b += bsize)
				off += (size_t)snprintf(conf + off, sizeof(conf) - off,
							"BlockName=nvl%u Nodes=n[%03u-%03u]\n",
							block++, node + b, node + b + bsize - 1);
			/* Allocate a random part of the leaf. */
			s->leaf_nodes[s->n_leaves] = 0;
			for (unsigned k = 0; k < nodes; k++) {
				char name[16];

				if (rng() % 4 == 0)
					continue;
				snprintf(name, sizeof(name), "n%03u", node + k);
				add_node(s, name);
				s->leaf_nodes[s->n_leaves]++;
			}
			s->n_leaves++;
			node += nodes;
		}
		off += (size_t)snprintf(conf + off, sizeof(conf) - off,
					"SwitchName=spine%u Switches=leaf[%u-%u]\n", sp, first,
					leaf - 1);
	}
	if (!s->n_nodes)
		add_node(s, "n000");
	s->fabric = fabric_from(conf);
}

/* tp, cp, ep, pp each a random divisor of what is left; dp the rest. */
static void random_layout(struct scenario *s, unsigned long world)
{
	static const char *const orders[] = { "", ",order=tp-cp-ep-dp-pp", ",order=tp-pp-dp-cp-ep",
					      ",order=dp-tp-pp-cp-ep" };
	static const char *const keys[] = { "tp", "cp", "ep", "pp" };
	unsigned long left = world;
	char spec[160];
	size_t off = 0;

	for (int k = 0; k < 4; k++) {
		unsigned long div[64], n = 0;

		for (unsigned long d = 1; d <= left && n < 64; d++) {
			if (left % d == 0 && (k || d <= 16))
				div[n++] = d;
		}
		div[0] = div[rng() % n];
		left /= div[0];
		off += (size_t)snprintf(spec + off, sizeof(spec) - off, "%s%s=%lu", k ? "," : "",
					keys[k], div[0]);
	}
	snprintf(spec + off, sizeof(spec) - off, ",dp=*%s", orders[rng() % 4]);
	set_layout(s, spec, world);
}

/* Every rank on one allocated GPU, no GPU twice, spares empty. */
static void check_map(const struct scenario *s, const struct phx_plan *plan)
{
	unsigned char *used = calloc(plan->n_nodes * s->gpn, 1);
	unsigned *count = calloc(plan->n_nodes, sizeof(*count));

	assert_non_null(used);
	assert_non_null(count);
	assert_int_equal(plan->n_nodes, s->n_nodes);
	for (unsigned long r = 0; r < plan->world; r++) {
		uint32_t n = plan->rank_node[r];

		assert_true(n < plan->n_nodes);
		assert_true(plan->rank_gpu[r] < s->gpn);
		assert_false(plan->nodes[n].flags & PHX_PLAN_NODE_SPARE);
		assert_int_equal(used[n * s->gpn + plan->rank_gpu[r]], 0);
		used[n * s->gpn + plan->rank_gpu[r]] = 1;
		count[n]++;
	}
	for (size_t i = 0; i < plan->n_nodes; i++)
		assert_int_equal(count[i], plan->nodes[i].used_gpus);
	free(used);
	free(count);
}

static bool tp_in_nodes(const struct phx_plan *plan)
{
	unsigned long tp = plan->layout.size[PHX_DIM_TP];
	unsigned long st = phx_layout_stride(&plan->layout, PHX_DIM_TP);

	for (unsigned long r = 0; r < plan->world; r++) {
		unsigned long c[PHX_DIM_COUNT];

		phx_layout_coords(&plan->layout, r, c);
		if (c[PHX_DIM_TP] && plan->rank_node[r] != plan->rank_node[r - c[PHX_DIM_TP] * st])
			return false;
	}
	return tp <= plan->gpus_per_node;
}

static void test_small_map(void **state)
{
	struct scenario s = { .gpn = 4 };
	struct phx_plan *plan;

	s.fabric = fabric_from("SwitchName=s0 Nodes=node[01-04]\nSwitchName=s1 Nodes=node[05-08]\n"
			       "SwitchName=top Switches=s[0-1]\n");
	add_node(&s, "node05");
	add_node(&s, "node02");
	add_node(&s, "node06");
	add_node(&s, "node01");
	phx_traffic_defaults(&s.traffic);
	set_layout(&s, "tp=4,pp=2,dp=*", 16);
	plan = place(&s);
	check_map(&s, plan);
	assert_true(tp_in_nodes(plan));
	/* Host-name order in the result. */
	assert_string_equal(plan->nodes[0].name, "node01");
	assert_string_equal(plan->nodes[3].name, "node06");
	assert_string_equal(plan->nodes[0].leaf, "s0");
	assert_string_equal(plan->nodes[3].spine, "top");
	/* Data parallel sends more than pipeline parallel: its pairs share a leaf. */
	assert_int_equal(plan->cost.groups[PHX_DIM_DP][PHX_LEVEL_LEAF], 8);
	assert_int_equal(plan->cost.groups[PHX_DIM_PP][PHX_LEVEL_SPINE], 8);
	assert_true(plan->cost.total >= lower_bound_of(plan));
	assert_true(plan->cost.total <= plan->hostname.total);
	assert_int_equal(plan->n_warnings, 0);
	phx_plan_free(plan);
	/* Heavier pipeline traffic: each pipeline gets a leaf instead. */
	s.traffic.mib[PHX_DIM_PP] = 4 * s.traffic.mib[PHX_DIM_DP];
	plan = place(&s);
	check_map(&s, plan);
	assert_int_equal(plan->cost.groups[PHX_DIM_PP][PHX_LEVEL_LEAF], 8);
	assert_int_equal(plan->cost.groups[PHX_DIM_DP][PHX_LEVEL_SPINE], 8);
	assert_true(plan->cost.total >= lower_bound_of(plan));
	assert_true(plan->cost.total < plan->hostname.total);
	phx_plan_free(plan);
	free_scenario(&s);
}

/*
 * Nodes no link tells apart keep host-name order: a swap that only moves
 * rounding in the sum of the links' times squared would move rank 0 (and
 * a job's restored shards) to another node for nothing.
 */
static void test_alike_nodes_keep_order(void **state)
{
	static const char *const layouts[] = { "dp=*", "tp=2,dp=*", "tp=2,pp=2,dp=*" };

	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
		for (unsigned nodes = 2; nodes <= 8; nodes *= 2) {
			struct scenario s = { .gpn = 2 };
			struct phx_plan *plan;
			char name[16];

			s.fabric = fabric_from("SwitchName=s0 Nodes=node[1-8]\n");
			for (unsigned k = 1; k <= nodes; k++) {
				snprintf(name, sizeof(name), "node%u", k);
				add_node(&s, name);
			}
			phx_traffic_defaults(&s.traffic);
			set_layout(&s, layouts[i], 2ul * nodes);
			plan = place(&s);
			check_map(&s, plan);
			assert_null(strstr(plan->strategy, "+spread"));
			assert_string_equal(plan->nodes[plan->rank_node[0]].name, "node1");
			phx_plan_free(plan);
			free_scenario(&s);
		}
	}
	(void)state;
}

/* The same inputs in any order give the same map, name for name. */
static void test_determinism(void **state)
{
	for (int round = 0; round < 50; round++) {
		struct scenario s = { .gpn = 1u << pick(0, 3) };
		struct phx_plan *a, *b;

		random_fabric(&s);
		phx_traffic_defaults(&s.traffic);
		random_layout(&s, s.n_nodes * s.gpn);
		a = place(&s);
		for (size_t i = s.n_nodes; i > 1; i--) {
			size_t j = (size_t)(rng() % i);
			char *t = s.names[i - 1];

			s.names[i - 1] = s.names[j];
			s.names[j] = t;
		}
		b = place(&s);
		assert_int_equal(a->world, b->world);
		for (unsigned long r = 0; r < a->world; r++) {
			assert_string_equal(a->nodes[a->rank_node[r]].name,
					    b->nodes[b->rank_node[r]].name);
			assert_int_equal(a->rank_gpu[r], b->rank_gpu[r]);
		}
		assert_true(a->cost.total == b->cost.total &&
			    lower_bound_of(a) == lower_bound_of(b));
		assert_string_equal(a->strategy, b->strategy);
		phx_plan_free(a);
		phx_plan_free(b);
		free_scenario(&s);
	}
}

static void test_random_invariants(void **state)
{
	for (int round = 0; round < 3000; round++) {
		struct scenario s = { .gpn = 1u << pick(0, 3) };
		unsigned long world;
		struct phx_plan *plan;
		bool spares;

		random_fabric(&s);
		/* Sometimes fewer ranks than GPUs: spare nodes are left out. */
		spares = rng() % 4 == 0 && s.n_nodes > 1;
		world = (s.n_nodes - (spares ? pick(1, (unsigned)s.n_nodes - 1) : 0)) * s.gpn;
		if (rng() % 3)
			phx_traffic_defaults(&s.traffic);
		else
			for (int d = 0; d < PHX_DIM_COUNT; d++)
				s.traffic.mib[d] = rng() % 70000;
		for (size_t i = 0; i < s.n_nodes && rng() % 4 == 0 && s.n_slow < 16; i++)
			s.slow[s.n_slow++] = strdup(s.names[i]);
		random_layout(&s, world);
		plan = place(&s);
		check_map(&s, plan);
		if (plan->cost.total < lower_bound_of(plan))
			fail_msg("round %d: cost %llu below the bound %llu", round,
				 (unsigned long long)plan->cost.total,
				 (unsigned long long)lower_bound_of(plan));
		if (world == s.n_nodes * s.gpn && plan->cost.step_ns > plan->hostname.step_ns)
			fail_msg("round %d: step %llu ns above host-name order's %llu", round,
				 (unsigned long long)plan->cost.step_ns,
				 (unsigned long long)plan->hostname.step_ns);
		if (s.traffic.mib[PHX_DIM_TP] == 65536 &&
		    s.gpn % plan->layout.size[PHX_DIM_TP] == 0 && !tp_in_nodes(plan))
			fail_msg("round %d: a tensor-parallel group spans nodes", round);
		phx_plan_free(plan);
		free_scenario(&s);
	}
}

/* ---------------------------------------------------------------- exhaustive */

struct exact {
	const struct phx_plan *plan;
	const struct pl_alloc *alloc; /* for the link model */
	unsigned level[16][16]; /* widest level between two nodes */
	unsigned free_gpus[16];
	uint32_t rank_node[16];
	uint64_t best, best_step;
};

static unsigned node_level(const struct phx_plan_node *x, const struct phx_plan_node *y)
{
	if (x == y)
		return PHX_LEVEL_NODE;
	if (*x->domain && !strcmp(x->domain, y->domain))
		return PHX_LEVEL_NVLINK;
	if (!strcmp(x->leaf, y->leaf))
		return PHX_LEVEL_LEAF;
	return strcmp(x->spine, y->spine) ? PHX_LEVEL_CORE : PHX_LEVEL_SPINE;
}

/* The model of phalanx-plan(1), written out again for a whole map. */
static uint64_t exact_cost(const struct exact *e)
{
	const struct phx_plan *plan = e->plan;
	const struct phx_layout *l = &plan->layout;
	uint64_t total = 0;

	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		unsigned long st = phx_layout_stride(l, (enum phx_dim)d), size = l->size[d];

		if (size < 2)
			continue;
		for (unsigned long r = 0; r < plan->world; r++) {
			unsigned lev = 0;

			if ((r / st) % size)
				continue; /* r starts a group (pp: a chain) */
			for (unsigned long i = 1; i < size; i++) {
				uint32_t a = e->rank_node[d == PHX_DIM_PP ? r + (i - 1) * st : r];
				unsigned ab = e->level[a][e->rank_node[r + i * st]];

				if (d == PHX_DIM_PP)
					total += plan->traffic.mib[d] * plan->weight[ab];
				else if (ab > lev)
					lev = ab;
			}
			if (d != PHX_DIM_PP)
				total += plan->traffic.mib[d] * size * plan->weight[lev];
		}
	}
	return total;
}

static void exact_search(struct exact *e, unsigned long r)
{
	if (r == e->plan->world) {
		uint64_t c = exact_cost(e), ns;

		if (c < e->best)
			e->best = c;
		assert_int_equal(phx_pl_step_time(e->alloc, e->rank_node, &ns), 0);
		if (ns < e->best_step)
			e->best_step = ns;
		return;
	}
	for (size_t n = 0; n < e->plan->n_nodes; n++) {
		if (!e->free_gpus[n])
			continue;
		e->free_gpus[n]--;
		e->rank_node[r] = (uint32_t)n;
		exact_search(e, r + 1);
		e->free_gpus[n]++;
	}
}

static void alloc_of(const struct phx_plan *plan, struct pl_alloc *a, const char **names);
static void free_alloc(struct pl_alloc *a);

/*
 * Tiny worlds on small fragmented fabrics, every map tried: the cheapest
 * costs no less than the bound, and the plan no less than the cheapest;
 * the same for the link model's step and its bound.
 */
static void test_bound_exhaustive(void **state)
{
	for (int round = 0; round < 300; round++) {
		struct scenario s = { .gpn = 1u << pick(0, 2) };
		struct exact e = { .best = UINT64_MAX, .best_step = UINT64_MAX };
		struct pl_alloc alloc;
		const char *names[48];
		unsigned long world;
		struct phx_plan *plan;
		char conf[1024];
		size_t off = 0;
		unsigned node = 0;

		for (unsigned sp = 0, leaf = 0; sp < 2; sp++) {
			unsigned first = leaf;

			for (unsigned k = pick(1, 2); k > 0; k--, leaf++) {
				unsigned nodes = pick(1, 3);

				off += (size_t)snprintf(conf + off, sizeof(conf) - off,
							"SwitchName=leaf%u Nodes=n[%03u-%03u]\n",
							leaf, node, node + nodes - 1);
				if (nodes > 1 && rng() % 2)
					off += (size_t)snprintf(
						conf + off, sizeof(conf) - off,
						"BlockName=nvl%u Nodes=n[%03u-%03u]\n", leaf, node,
						node + 1);
				node += nodes;
			}
			off += (size_t)snprintf(conf + off, sizeof(conf) - off,
						"SwitchName=spine%u Switches=leaf[%u-%u]\n", sp,
						first, leaf - 1);
		}
		/* Some nodes of each leaf, at most 8 GPUs in all. */
		for (unsigned n = 0; n < node && (s.n_nodes + 1) * s.gpn <= 8; n++) {
			char name[16];

			if (rng() % 3 == 0 && n + 1 < node)
				continue;
			snprintf(name, sizeof(name), "n%03u", n);
			add_node(&s, name);
		}
		s.fabric = fabric_from(conf);
		if (rng() % 2)
			s.fabric->bandwidth[PHX_LEVEL_NODE] =
				s.fabric->bandwidth[PHX_LEVEL_NVLINK] = 900000;
		for (int d = 0; d < PHX_DIM_COUNT; d++)
			s.traffic.mib[d] = rng() % 70000;
		world = s.n_nodes * s.gpn - (s.n_nodes > 1 && rng() % 4 == 0 ? pick(1, s.gpn) : 0);
		random_layout(&s, world);
		plan = place(&s);
		e.plan = plan;
		alloc_of(plan, &alloc, names);
		e.alloc = &alloc;
		for (size_t i = 0; i < plan->n_nodes; i++) {
			e.free_gpus[i] = s.gpn;
			for (size_t j = 0; j < plan->n_nodes; j++)
				e.level[i][j] = node_level(&plan->nodes[i], &plan->nodes[j]);
		}
		memcpy(e.rank_node, plan->rank_node, world * sizeof(*e.rank_node));
		assert_true(exact_cost(&e) == plan->cost.total);
		exact_search(&e, 0);
		if (e.best < lower_bound_of(plan) || plan->cost.total < e.best)
			fail_msg("round %d: cheapest map %llu, bound %llu, plan %llu", round,
				 (unsigned long long)e.best,
				 (unsigned long long)lower_bound_of(plan),
				 (unsigned long long)plan->cost.total);
		if (e.best_step < plan->step_bound_ns || plan->cost.step_ns < e.best_step)
			fail_msg("round %d: shortest step %llu ns, bound %llu, plan %llu", round,
				 (unsigned long long)e.best_step,
				 (unsigned long long)plan->step_bound_ns,
				 (unsigned long long)plan->cost.step_ns);
		free_alloc(&alloc);
		phx_plan_free(plan);
		free_scenario(&s);
	}
}

/* ---------------------------------------------------------------- bound, larger units */

/*
 * Fabrics with leaves of up to 24 nodes of 4 or 8 GPUs and spines of up to
 * 4 leaves, sometimes NVLink domains with NVLink as fast as a node: units
 * of thousands of ranks, where the bound cuts along collectives (bound D).
 */
static void big_fabric(struct scenario *s)
{
	char *conf = malloc(65536);
	size_t off = 0;
	unsigned spines = pick(1, 3), node = 0, leaf = 0;
	bool blocks = rng() % 2;

	assert_non_null(conf);
	for (unsigned sp = 0; sp < spines; sp++) {
		unsigned first = leaf;

		for (unsigned k = pick(1, 4); k > 0; k--, leaf++) {
			unsigned nodes = pick(4, 24), bsize = pick(3, 9);

			off += (size_t)snprintf(conf + off, 65536 - off,
						"SwitchName=leaf%u Nodes=n[%04u-%04u]\n", leaf,
						node, node + nodes - 1);
			for (unsigned b = 0; blocks && b + bsize <= nodes; b += bsize)
				off += (size_t)snprintf(conf + off, 65536 - off,
							"BlockName=nvl%u_%u Nodes=n[%04u-%04u]\n",
							leaf, b, node + b, node + b + bsize - 1);
			/* A fragment of the leaf: each node free with probability 2/3. */
			for (unsigned x = 0; x < nodes; x++) {
				char name[16];

				if (rng() % 3 == 0 || s->n_nodes == 512)
					continue;
				snprintf(name, sizeof(name), "n%04u", node + x);
				add_node(s, name);
			}
			node += nodes;
		}
		off += (size_t)snprintf(conf + off, 65536 - off,
					"SwitchName=spine%u Switches=leaf[%u-%u]\n", sp, first,
					leaf - 1);
	}
	if (!s->n_nodes)
		add_node(s, "n0000");
	s->fabric = fabric_from(conf);
	if (blocks)
		s->fabric->bandwidth[PHX_LEVEL_NODE] = s->fabric->bandwidth[PHX_LEVEL_NVLINK] =
			900000;
	free(conf);
}

/* A plan of a random layout with the default traffic on a big fabric. */
static struct phx_plan *big_plan(struct scenario *s)
{
	big_fabric(s);
	phx_traffic_defaults(&s->traffic);
	random_layout(s, s->n_nodes * s->gpn);
	return place(s);
}

/* The model of phalanx-plan(1) once more, for any map, from a level table. */
static uint64_t model_cost(const struct phx_plan *plan, const unsigned char *level,
			   const uint32_t *rank_node)
{
	const struct phx_layout *l = &plan->layout;
	size_t n = plan->n_nodes;
	uint64_t total = 0;

	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		unsigned long st = phx_layout_stride(l, (enum phx_dim)d), size = l->size[d];

		for (unsigned long r = 0; size > 1 && r < plan->world; r++) {
			unsigned lev = 0;

			if ((r / st) % size)
				continue;
			for (unsigned long i = 1; i < size; i++) {
				uint32_t a = rank_node[d == PHX_DIM_PP ? r + (i - 1) * st : r];
				unsigned ab = level[a * n + rank_node[r + i * st]];

				if (d == PHX_DIM_PP)
					total += plan->traffic.mib[d] * plan->weight[ab];
				else if (ab > lev)
					lev = ab;
			}
			if (d != PHX_DIM_PP)
				total += plan->traffic.mib[d] * size * plan->weight[lev];
		}
	}
	return total;
}

static void shuffle_map(uint32_t *map, unsigned long world)
{
	for (unsigned long i = world; i > 1; i--) {
		unsigned long j = rng() % i;
		uint32_t t = map[i - 1];

		map[i - 1] = map[j];
		map[j] = t;
	}
}

/*
 * No map costs less than the bound: not the plan, not random maps of the
 * ranks onto the allocation's GPUs, and not the plan with a few ranks
 * traded (maps close to the best one knows). The plan's cost is the model's.
 */
static void test_bound_against_maps(void **state)
{
	for (int round = 0; round < 40; round++) {
		struct scenario s = { .gpn = rng() % 2 ? 4 : 8 };
		struct phx_plan *plan;
		struct pl_alloc alloc;
		const char **names;
		unsigned char *level;
		uint32_t *map;
		size_t n;

		big_fabric(&s);
		if (rng() % 2)
			phx_traffic_defaults(&s.traffic);
		else
			for (int d = 0; d < PHX_DIM_COUNT; d++)
				s.traffic.mib[d] = rng() % 70000;
		random_layout(&s, s.n_nodes * s.gpn);
		plan = place(&s);
		check_map(&s, plan);
		n = plan->n_nodes;
		level = malloc(n * n);
		map = malloc(plan->world * sizeof(*map));
		names = calloc(3 * n, sizeof(*names));
		assert_non_null(level);
		assert_non_null(map);
		assert_non_null(names);
		alloc_of(plan, &alloc, names);
		for (size_t i = 0; i < n; i++) {
			for (size_t j = 0; j < n; j++)
				level[i * n + j] =
					(unsigned char)node_level(&plan->nodes[i], &plan->nodes[j]);
		}
		assert_true(model_cost(plan, level, plan->rank_node) == plan->cost.total);
		if (plan->cost.total < lower_bound_of(plan))
			fail_msg("round %d: plan %llu below the bound %llu", round,
				 (unsigned long long)plan->cost.total,
				 (unsigned long long)lower_bound_of(plan));
		for (int k = 0; k < 120; k++) {
			uint64_t c;

			memcpy(map, plan->rank_node, plan->world * sizeof(*map));
			if (k % 2) {
				shuffle_map(map, plan->world);
			} else {
				for (int t = 0; t < 1 + k % 5; t++) {
					unsigned long x = rng() % plan->world,
						      y = rng() % plan->world;
					uint32_t tmp = map[x];

					map[x] = map[y];
					map[y] = tmp;
				}
			}
			c = model_cost(plan, level, map);
			if (c < lower_bound_of(plan))
				fail_msg("round %d, map %d: cost %llu below the bound %llu (%s)",
					 round, k, (unsigned long long)c,
					 (unsigned long long)lower_bound_of(plan), plan->strategy);
			assert_int_equal(phx_pl_step_time(&alloc, map, &c), 0);
			if (c < plan->step_bound_ns)
				fail_msg("round %d, map %d: step %llu ns below the bound %llu",
					 round, k, (unsigned long long)c,
					 (unsigned long long)plan->step_bound_ns);
		}
		if (plan->cost.step_ns < plan->step_bound_ns)
			fail_msg("round %d: the plan's step %llu ns below the bound %llu", round,
				 (unsigned long long)plan->cost.step_ns,
				 (unsigned long long)plan->step_bound_ns);
		free_alloc(&alloc);
		free(names);
		free(level);
		free(map);
		phx_plan_free(plan);
		free_scenario(&s);
	}
}

/* Index of name in names[0 .. *n), added when new. */
static uint32_t intern(const char **names, uint32_t *n, const char *name)
{
	for (uint32_t i = 0; i < *n; i++) {
		if (!strcmp(names[i], name))
			return i;
	}
	names[*n] = name;
	return (*n)++;
}

/* The allocation as placement_int.h describes it, from a plan's nodes. */
static void alloc_of(const struct phx_plan *plan, struct pl_alloc *a, const char **names)
{
	uint32_t n_dom = 0, n_leaf = 0, n_spine = 0;
	size_t n = plan->n_nodes;

	memset(a, 0, sizeof(*a));
	a->layout = &plan->layout;
	a->world = plan->world;
	a->gpn = plan->gpus_per_node;
	for (int d = 0; d < PHX_DIM_COUNT; d++)
		a->traffic[d] = plan->traffic.mib[d];
	for (int l = 0; l < PHX_LEVEL_COUNT; l++)
		a->weight[l] = plan->weight[l];
	a->n_nodes = n;
	a->unit = calloc(n, sizeof(*a->unit));
	a->slow = calloc(n, sizeof(*a->slow));
	a->spare = calloc(n, sizeof(*a->spare));
	assert_true(a->unit && a->slow && a->spare);
	for (size_t i = 0; i < n; i++) {
		if (*plan->nodes[i].domain)
			a->unit[i][1] = intern(names, &n_dom, plan->nodes[i].domain);
	}
	for (size_t i = 0; i < n; i++) {
		a->unit[i][0] = (uint32_t)i;
		if (!*plan->nodes[i].domain)
			a->unit[i][1] = n_dom + (uint32_t)i;
		a->unit[i][2] = intern(names + n, &n_leaf, plan->nodes[i].leaf);
		a->unit[i][3] = intern(names + 2 * n, &n_spine, plan->nodes[i].spine);
	}
	a->n_units[0] = (uint32_t)n;
	a->n_units[1] = n_dom + (uint32_t)n;
	a->n_units[2] = n_leaf;
	a->n_units[3] = n_spine;
}

static void free_alloc(struct pl_alloc *a)
{
	free(a->unit);
	free(a->slow);
	free(a->spare);
}

/*
 * Node swaps only ever lower the cost, and price it exactly as the model
 * does: from random maps and from the plan with ranks traded, the swaps
 * keep every node's number of ranks, never raise the cost, lower it
 * whenever they swap anything, and the cost they leave is the model's.
 */
static void test_swaps_lower_cost(void **state)
{
	for (int round = 0; round < 30; round++) {
		struct scenario s = { .gpn = rng() % 2 ? 4 : 8 };
		struct phx_plan *plan;
		struct pl_alloc a;
		const char **names;
		unsigned char *level;
		uint32_t *map;
		unsigned *before, *after;
		size_t n;

		plan = big_plan(&s);
		n = plan->n_nodes;
		names = calloc(3 * n, sizeof(*names));
		level = malloc(n * n);
		map = malloc(plan->world * sizeof(*map));
		before = calloc(n, sizeof(*before));
		after = calloc(n, sizeof(*after));
		assert_true(names && level && map && before && after);
		alloc_of(plan, &a, names);
		for (size_t i = 0; i < n; i++) {
			for (size_t j = 0; j < n; j++)
				level[i * n + j] =
					(unsigned char)node_level(&plan->nodes[i], &plan->nodes[j]);
		}
		for (int k = 0; k < 6; k++) {
			struct phx_plan_cost c0, c1;
			long swaps;

			memcpy(map, plan->rank_node, plan->world * sizeof(*map));
			if (k % 2)
				shuffle_map(map, plan->world);
			else
				for (int t = 0; t < 4; t++) {
					unsigned long x = rng() % plan->world,
						      y = rng() % plan->world;
					uint32_t tmp = map[x];

					map[x] = map[y];
					map[y] = tmp;
				}
			memset(before, 0, n * sizeof(*before));
			memset(after, 0, n * sizeof(*after));
			for (unsigned long r = 0; r < plan->world; r++)
				before[map[r]]++;
			assert_int_equal(phx_pl_cost(&a, map, &c0), 0);
			swaps = phx_pl_refine(&a, map);
			assert_true(swaps >= 0);
			assert_int_equal(phx_pl_cost(&a, map, &c1), 0);
			for (unsigned long r = 0; r < plan->world; r++)
				after[map[r]]++;
			assert_memory_equal(before, after, n * sizeof(*before));
			if (c1.total > c0.total || (swaps && c1.total >= c0.total))
				fail_msg("round %d: %ld swaps took the cost from %llu to %llu",
					 round, swaps, (unsigned long long)c0.total,
					 (unsigned long long)c1.total);
			assert_true(model_cost(plan, level, map) == c1.total);
			assert_true(c1.total >= lower_bound_of(plan));
		}
		free_alloc(&a);
		free(names);
		free(level);
		free(map);
		free(before);
		free(after);
		phx_plan_free(plan);
		free_scenario(&s);
	}
}

/*
 * Pipelines of whole nodes, data-parallel groups too large for any leaf,
 * every leaf a multiple of the pipeline, one spine (with two, keeping the
 * data-parallel groups inside a spine can be worth more): no pipeline hop
 * leaves its leaf.
 */
static void test_pipelines_stay_in_leaves(void **state)
{
	for (int round = 0; round < 200; round++) {
		struct scenario s = { .gpn = 4 };
		unsigned pp = pick(2, 4), leaves = pick(2, 6), total = 0;
		char conf[4096], spec[64];
		size_t off = 0;

		for (unsigned l = 0; l < leaves; l++) {
			unsigned nodes = pp * pick(1, 2);

			off += (size_t)snprintf(conf + off, sizeof(conf) - off,
						"SwitchName=leaf%u Nodes=x%u-[%u-%u]\n", l, l, 0,
						nodes - 1);
			for (unsigned k = 0; k < nodes; k++) {
				char name[32];

				snprintf(name, sizeof(name), "x%u-%u", l, k);
				add_node(&s, name);
			}
			total += nodes;
		}
		snprintf(conf + off, sizeof(conf) - off, "SwitchName=sp0 Switches=leaf[0-%u]\n",
			 leaves - 1);
		s.fabric = fabric_from(conf);
		/*
		 * Pipelines heavier than data parallelism: with the defaults a
		 * step can be shorter with the data-parallel rings in leaves.
		 */
		phx_traffic_defaults(&s.traffic);
		s.traffic.mib[PHX_DIM_PP] = 4 * s.traffic.mib[PHX_DIM_DP];
		if (total / pp <= 2 * pp) {
			/* Only data-parallel groups too large for any leaf. */
			free_scenario(&s);
			continue;
		}
		snprintf(spec, sizeof(spec), "tp=4,pp=%u,dp=*", pp);
		set_layout(&s, spec, total * 4);
		{
			struct phx_plan *plan = place(&s);

			check_map(&s, plan);
			if (plan->cost.groups[PHX_DIM_PP][PHX_LEVEL_SPINE] ||
			    plan->cost.groups[PHX_DIM_PP][PHX_LEVEL_CORE])
				fail_msg("%s: pipeline hops leave their leaf (%s) in\n%s", spec,
					 plan->strategy, conf);
			phx_plan_free(plan);
		}
		free_scenario(&s);
	}
}

static void test_slow_nodes_left_out(void **state)
{
	struct scenario s = { .gpn = 8 };
	struct phx_plan *plan;

	s.fabric = fabric_from("SwitchName=s0 Nodes=n[1-4]\nSwitchName=s1 Nodes=n[5-8]\n");
	for (int i = 1; i <= 6; i++) {
		char name[8];

		snprintf(name, sizeof(name), "n%d", i);
		add_node(&s, name);
	}
	s.slow[s.n_slow++] = strdup("n2");
	s.slow[s.n_slow++] = strdup("n9"); /* not allocated: ignored with a warning */
	phx_traffic_defaults(&s.traffic);
	set_layout(&s, "tp=8,pp=2,dp=2", 32);
	plan = place(&s);
	check_map(&s, plan);
	/* Four nodes needed of six: n2 (slow) stays out, then one of the small leaf. */
	assert_true(plan->nodes[1].flags & PHX_PLAN_NODE_SLOW);
	assert_true(plan->nodes[1].flags & PHX_PLAN_NODE_SPARE);
	assert_int_equal(plan->nodes[1].used_gpus, 0);
	assert_int_equal(plan->n_warnings, 1);
	assert_non_null(strstr(plan->warnings[0], "1 slow node is not in the allocation"));
	phx_plan_free(plan);
	free_scenario(&s);
}

static void test_slow_nodes_get_last_ranks(void **state)
{
	struct scenario s = { .gpn = 4 };
	struct phx_plan *plan;
	unsigned long highest = 0;

	s.fabric = fabric_from("SwitchName=s0 Nodes=n[1-4]\n");
	for (int i = 1; i <= 4; i++) {
		char name[8];

		snprintf(name, sizeof(name), "n%d", i);
		add_node(&s, name);
	}
	s.slow[s.n_slow++] = strdup("n1");
	phx_traffic_defaults(&s.traffic);
	set_layout(&s, "tp=4,pp=2,dp=*", 16);
	plan = place(&s);
	check_map(&s, plan);
	/* No spare: the slow node holds the last ranks, at no cost. */
	for (unsigned long r = 0; r < plan->world; r++) {
		if (plan->rank_node[r] == 0 && r > highest)
			highest = r;
	}
	assert_int_equal(highest, plan->world - 1);
	assert_true(plan->cost.total <= plan->hostname.total);
	assert_int_equal(plan->n_warnings, 1);
	assert_non_null(strstr(plan->warnings[0], "1 slow node in use for lack of spares (n1)"));
	phx_plan_free(plan);
	free_scenario(&s);
}

/*
 * NVL72 racks allocated in segments (Slurm's topology/block with
 * --segment): leaves holding one segment, whose one cell (a tp x ep block,
 * one stage of one replica) sends a hop per rank more if it is a middle
 * stage, and leaves holding two. Fourteen single leaves and 32 cells of
 * which 16 are end stages: the step reaches the link model's bound only if
 * the single leaves all hold end stages and the double ones hold
 * neighbouring stages. Node names mix the two kinds, and the spines split
 * them unevenly, so no spine can keep its pipelines to itself.
 */
/*
 * Leaves of NVL72 segments of 8 nodes (segments[leaf] each), the leaves
 * under spines cut before each of cuts[]; planned with layout, whose
 * tp x ep cells are one segment each. The step must reach the link
 * model's bound and beat host-name order.
 */
static void plan_segments(const unsigned *segments, size_t n_leaves, const size_t *cuts,
			  size_t n_cuts, const char *layout)
{
	struct scenario s = { .gpn = 4 };
	struct phx_plan *plan;
	char conf[8192];
	size_t off = 0, from = 0;
	unsigned node = 0;

	for (size_t leaf = 0; leaf < n_leaves; leaf++) {
		unsigned first = node;

		for (unsigned b = 0; b < segments[leaf]; b++, node += 8)
			off += (size_t)snprintf(conf + off, sizeof(conf) - off,
						"BlockName=nvl%zu_%u Nodes=n[%03u-%03u]\n", leaf, b,
						node, node + 7);
		off += (size_t)snprintf(conf + off, sizeof(conf) - off,
					"SwitchName=leaf%zu Nodes=n[%03u-%03u]\n", leaf, first,
					node - 1);
	}
	for (size_t k = 0; k <= n_cuts; k++) {
		size_t to = k < n_cuts ? cuts[k] : n_leaves;

		off += (size_t)snprintf(conf + off, sizeof(conf) - off,
					"SwitchName=spine%zu Switches=leaf[%zu-%zu]\n", k, from,
					to - 1);
		from = to;
	}
	s.fabric = fabric_from(conf);
	s.fabric->bandwidth[PHX_LEVEL_NODE] = s.fabric->bandwidth[PHX_LEVEL_NVLINK] = 900000;
	for (unsigned n = 0; n < node; n++) {
		char name[16];

		snprintf(name, sizeof(name), "n%03u", n);
		add_node(&s, name);
	}
	phx_traffic_defaults(&s.traffic);
	set_layout(&s, layout, node * s.gpn);
	plan = place(&s);
	check_map(&s, plan);
	if (plan->cost.step_ns > plan->step_bound_ns + plan->step_bound_ns / 1000)
		fail_msg("step %llu ns, bound %llu ns (%s)", (unsigned long long)plan->cost.step_ns,
			 (unsigned long long)plan->step_bound_ns, plan->strategy);
	assert_true(plan->cost.step_ns < plan->hostname.step_ns);
	phx_plan_free(plan);
	free_scenario(&s);
}

static void test_segments_take_pipeline_ends(void **state)
{
	/* Segments per leaf, 8 nodes each; the first 14 leaves under one spine. */
	static const unsigned segments[] = { 1, 2, 2, 2, 2, 1, 1, 2, 1, 1, 1, 1,
					     1, 1, 2, 2, 1, 2, 1, 2, 1, 1, 1 };
	static const size_t cuts[] = { 14 };

	plan_segments(segments, sizeof(segments) / sizeof(segments[0]), cuts, 1,
		      "tp=4,ep=8,pp=4,dp=*");
	(void)state;
}

/*
 * Eight stages over spines whose leaves of one segment outnumber their
 * share of pipeline ends: laying whole pipelines one after the other
 * sends every stage's ring through every spine (1.2x the bound); tiles of
 * ends and bands of middle stages over consecutive replicas reach it.
 */
static void test_spine_tiles(void **state)
{
	static const unsigned segments[] = { 2, 2, 2, 1, 3, 1, 2, 2, 1, 2, 1, 1, 3, 1 };
	static const unsigned more[] = { 3, 1, 1, 1, 1, 2, 2, 1, 3, 2, 1, 2,
					 3, 2, 1, 1, 2, 2, 1, 1, 2, 3, 2 };
	static const size_t cuts[] = { 4 }, more_cuts[] = { 7, 19 };

	plan_segments(segments, sizeof(segments) / sizeof(segments[0]), cuts, 1,
		      "tp=4,ep=8,pp=8,dp=*");
	plan_segments(more, sizeof(more) / sizeof(more[0]), more_cuts, 2, "tp=4,ep=8,pp=8,dp=*");
	(void)state;
}

static void test_nvlink_domains(void **state)
{
	struct scenario s = { .gpn = 4 };
	struct phx_plan *plan;

	s.fabric = fabric_from("SwitchName=s0 Nodes=g[1-8]\nBlockName=r0 Nodes=g[1-4]\n"
			       "BlockName=r1 Nodes=g[5-8]\n");
	s.fabric->bandwidth[PHX_LEVEL_NODE] = s.fabric->bandwidth[PHX_LEVEL_NVLINK] = 900000;
	for (int i = 1; i <= 8; i++) {
		char name[8];

		snprintf(name, sizeof(name), "g%d", i);
		add_node(&s, name);
	}
	phx_traffic_defaults(&s.traffic);
	/* tp=8 spans two 4-GPU nodes, but inside one NVLink domain: no warning. */
	set_layout(&s, "tp=8,dp=*", 32);
	plan = place(&s);
	check_map(&s, plan);
	assert_int_equal(plan->cost.groups[PHX_DIM_TP][PHX_LEVEL_NVLINK], 4);
	assert_int_equal(plan->n_warnings, 0);
	assert_string_equal(plan->nodes[5].domain, "r1");
	phx_plan_free(plan);
	/* tp=32 fits no domain: warned. */
	set_layout(&s, "tp=32", 32);
	plan = place(&s);
	assert_int_equal(plan->n_warnings, 1);
	assert_non_null(strstr(plan->warnings[0],
			       "tp=32 is larger than a node (4 GPUs) and than any NVLink domain"));
	phx_plan_free(plan);
	free_scenario(&s);
}

/*
 * NVL72-like: 4-GPU nodes in 2-node NVLink domains, leaves with 2 domains
 * free and leaves with 1. Each tp*ep block (2 nodes) fits a domain, each
 * pipeline (3 blocks) a big leaf and a small one: a pipeline need leave its
 * leaf only once, which takes packing its stages in order, and every
 * expert-parallel group stays in a domain.
 */
static void test_stages_in_order(void **state)
{
	static const char *const names[] = { "a1", "a2", "a3", "a4", "b1", "b2",
					     "c1", "c2", "c3", "c4", "d1", "d2" };
	struct scenario s = { .gpn = 4 };
	struct phx_plan *plan;

	s.fabric = fabric_from("SwitchName=la Nodes=a[1-4]\nSwitchName=lb Nodes=b[1-2]\n"
			       "SwitchName=lc Nodes=c[1-4]\nSwitchName=ld Nodes=d[1-2]\n"
			       "SwitchName=sp Switches=la,lb,lc,ld\n"
			       "BlockName=da0 Nodes=a[1-2]\nBlockName=da1 Nodes=a[3-4]\n"
			       "BlockName=db Nodes=b[1-2]\nBlockName=dc0 Nodes=c[1-2]\n"
			       "BlockName=dc1 Nodes=c[3-4]\nBlockName=dd Nodes=d[1-2]\n");
	s.fabric->bandwidth[PHX_LEVEL_NODE] = s.fabric->bandwidth[PHX_LEVEL_NVLINK] = 900000;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		add_node(&s, names[i]);
	phx_traffic_defaults(&s.traffic);
	/* Light data parallelism: what matters is where the stages go. */
	s.traffic.mib[PHX_DIM_DP] = 512;
	set_layout(&s, "tp=4,ep=2,pp=3,dp=*", 48);
	plan = place(&s);
	check_map(&s, plan);
	assert_true(tp_in_nodes(plan));
	/* 24 expert-parallel groups, each in one domain. */
	assert_int_equal(plan->cost.groups[PHX_DIM_EP][PHX_LEVEL_NVLINK], 24);
	/* Two pipelines of 8 x 2 stage pairs: 8 pairs of each leave the leaf. */
	assert_int_equal(plan->cost.groups[PHX_DIM_PP][PHX_LEVEL_SPINE], 16);
	assert_int_equal(plan->cost.groups[PHX_DIM_PP][PHX_LEVEL_CORE], 0);
	assert_true(plan->cost.total <= plan->hostname.total);
	assert_true(plan->cost.total >= lower_bound_of(plan));
	phx_plan_free(plan);
	free_scenario(&s);
}

static void test_no_fabric(void **state)
{
	struct scenario s = { .gpn = 2 };
	struct phx_plan *plan;

	add_node(&s, "b");
	add_node(&s, "a");
	phx_traffic_defaults(&s.traffic);
	set_layout(&s, "tp=4", 4);
	plan = place(&s);
	check_map(&s, plan);
	assert_string_equal(plan->nodes[0].leaf, "");
	assert_int_equal(plan->n_warnings, 1);
	assert_non_null(strstr(plan->warnings[0], "tp=4 is larger than a node (2 GPUs):"));
	phx_plan_free(plan);
	free_scenario(&s);
}

static void place_bad(struct scenario *s, const char *expect)
{
	struct phx_plan *plan = NULL;

	assert_int_equal(phx_place(&(struct phx_place_input){ .fabric = s->fabric,
							      .nodes = s->names,
							      .n_nodes = s->n_nodes,
							      .gpus_per_node = s->gpn,
							      .layout = &s->layout },
				   &plan, err, sizeof(err)),
			 -1);
	assert_null(plan);
	if (!strstr(err, expect))
		fail_msg("message '%s' lacks '%s'", err, expect);
}

static void test_errors(void **state)
{
	struct scenario s = { .gpn = 4 };

	s.fabric = fabric_from("SwitchName=s0 Nodes=n[1-2]\n");
	add_node(&s, "n1");
	add_node(&s, "n3");
	set_layout(&s, "tp=4,dp=*", 8);
	place_bad(&s, "node 'n3' is not under any leaf switch of the fabric (test.conf)");
	free(s.names[1]);
	s.names[1] = strdup("n1");
	place_bad(&s, "node 'n1' is in the allocation twice");
	free(s.names[1]);
	s.names[1] = strdup("n2");
	set_layout(&s, "tp=4,dp=*", 12);
	place_bad(&s, "needs 12 GPUs but 2 nodes x 4 GPUs give 8");
	s.gpn = 0;
	set_layout(&s, "tp=4,dp=*", 8);
	place_bad(&s, "0 GPUs per node is out of range");
	s.gpn = 4;
	phx_layout_parse("tp=4", &s.layout, err, sizeof(err));
	place_bad(&s, "not resolved");
	free_scenario(&s);
}

static void test_traffic(void **state)
{
	struct phx_traffic t;

	phx_traffic_defaults(&t);
	assert_int_equal(t.mib[PHX_DIM_TP], 65536);
	assert_int_equal(phx_traffic_parse("tp=100,pp=0", &t, err, sizeof(err)), 0);
	assert_int_equal(t.mib[PHX_DIM_TP], 100);
	assert_int_equal(t.mib[PHX_DIM_PP], 0);
	assert_int_equal(t.mib[PHX_DIM_DP], 8192);
	assert_int_equal(phx_traffic_parse("xp=1", &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "DIM=MIB"));
	assert_int_equal(phx_traffic_parse("tp=1,tp=2", &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "given twice"));
	assert_int_equal(phx_traffic_parse("tp=-1", &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a whole number"));
	assert_int_equal(phx_traffic_parse("tp=", &t, err, sizeof(err)), -1);
	assert_int_equal(phx_traffic_parse("tp=99999999999", &t, err, sizeof(err)), -1);
	assert_int_equal(phx_traffic_parse("", &t, err, sizeof(err)), -1);
}

/* ns to move MIB at MBS MB/s, as the link model rounds its weights. */
static double move_ns(unsigned long mib, unsigned long mbs)
{
	return (double)mib * (double)((1048576000ul + mbs / 2) / mbs);
}

/*
 * The link model against arithmetic: one data-parallel ring of 1-GPU
 * nodes in host-name order over two leaves of two nodes. The ring crosses
 * each leaf's uplink once, whose share is 2 GPUs x 25 GB/s, as fast as a
 * NIC: the step is S over a NIC. Two rings (tp=2 in 2-GPU nodes) send
 * two edges through each node's two NICs and each uplink of twice the
 * share: the same. A slow node alone on its leaf is left out, but
 * host-name order uses it: its uplink share is one GPU's, half a NIC, and
 * the ring's two crossings of it take twice as long.
 */
#define TWO_LEAVES                                                                                 \
	"SwitchName=l0 Nodes=a[0-1]\nSwitchName=l1 Nodes=b[0-1]\nSwitchName=s Switches=l[0-1]\n"

static void test_link_model(void **state)
{
	static const struct {
		unsigned gpn;
		const char *conf, *nodes[6], *layout, *slow;
		unsigned long world;
		double nics; /* the step in NIC times */
	} cases[] = {
		{ 1, TWO_LEAVES, { "a0", "a1", "b0", "b1" }, "dp=4", NULL, 4, 1 },
		{ 2, TWO_LEAVES, { "a0", "a1", "b0", "b1" }, "tp=2,dp=4", NULL, 8, 1 },
		/* a0, alone on its leaf, is slow and left out; host-name order uses it. */
		{ 1,
		  "SwitchName=l0 Nodes=a0\nSwitchName=l1 Nodes=b[0-1]\nSwitchName=l2 Nodes=c[0-1]\n"
		  "SwitchName=s Switches=l[0-2]\n",
		  { "a0", "b0", "b1", "c0", "c1" },
		  "dp=4",
		  "a0",
		  4,
		  2 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct scenario s = { .gpn = cases[i].gpn };
		struct phx_plan *plan;
		double want = cases[i].nics * move_ns(1024, PHX_BW_LEAF_DEFAULT);

		s.fabric = fabric_from(cases[i].conf);
		for (size_t n = 0; n < 6 && cases[i].nodes[n]; n++)
			add_node(&s, cases[i].nodes[n]);
		if (cases[i].slow)
			s.slow[s.n_slow++] = strdup(cases[i].slow);
		memset(&s.traffic, 0, sizeof(s.traffic));
		s.traffic.mib[PHX_DIM_DP] = 1024;
		set_layout(&s, cases[i].layout, cases[i].world);
		plan = place(&s);
		if (fabs((double)plan->hostname.step_ns - want) > want * 1e-3 ||
		    plan->cost.step_ns > plan->hostname.step_ns)
			fail_msg("case %zu: host-name order %llu ns, plan %llu ns, by hand %.0f ns",
				 i, (unsigned long long)plan->hostname.step_ns,
				 (unsigned long long)plan->cost.step_ns, want);
		phx_plan_free(plan);
		free_scenario(&s);
	}
	(void)state;
}

/*
 * The least traffic any m ranks send to the others, against every set of
 * ranks of small layouts, counted from the flows of phalanx-plan(1): a ring
 * member sends its MiB to the next, an all-to-all member a part to each
 * other, a pipeline rank half its MiB to each neighbour. No set sends less
 * than the bound; with two dimensions or fewer, where the layers of a
 * down-set are initial segments of lines, the bound is the least exactly.
 */
static uint64_t set_out(const struct pl_alloc *a, unsigned mask)
{
	const struct phx_layout *l = a->layout;
	uint64_t out = 0;

	for (unsigned long r = 0; r < a->world; r++) {
		if (!(mask >> r & 1))
			continue;
		for (int d = 0; d < PHX_DIM_COUNT; d++) {
			unsigned long st = phx_layout_stride(l, (enum phx_dim)d), size = l->size[d];
			unsigned long i = r / st % size, base = r - i * st;
			uint64_t kib = a->traffic[d] * 1024;

			if (size < 2)
				continue;
			for (unsigned long j = 0; j < size; j++) {
				bool outside = !(mask >> (base + j * st) & 1);

				if (d == PHX_DIM_EP && j != i && outside)
					out += kib / (size - 1);
				else if (d == PHX_DIM_PP && (j + 1 == i || j == i + 1) && outside)
					out += kib / 2;
				else if (d != PHX_DIM_EP && d != PHX_DIM_PP &&
					 j == (i + 1) % size && outside)
					out += kib;
			}
		}
	}
	return out;
}

/*
 * A layout of at most 16 ranks with random traffic, pp of 2 to 4 stages if
 * with_pp; *inner counts its dimensions of 2 or more other than pp.
 */
static void small_layout(struct phx_layout *layout, struct pl_alloc *a, bool with_pp,
			 unsigned *inner, char *spec, size_t spec_len)
{
	static const char *const dims[] = { "tp", "cp", "ep", "dp", "pp" };
	unsigned long stages = with_pp ? 2 + rng() % 3 : 1, world = stages;
	char why[256];
	size_t off = 0;

	*inner = 0;
	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		unsigned long size = d == PHX_DIM_PP && with_pp ? stages : 1 + rng() % 4;

		if (d != PHX_DIM_PP || !with_pp) {
			if (world * size > 16 || rng() % 3 == 0)
				size = 1;
			world *= size;
			*inner += size > 1 && d != PHX_DIM_PP;
		}
		off += (size_t)snprintf(spec + off, spec_len - off, "%s%s=%lu", off ? "," : "",
					dims[d], size);
		a->traffic[d] = rng() % 5000;
	}
	if (rng() % 2)
		snprintf(spec + off, spec_len - off, ",order=pp-dp-ep-cp-tp");
	assert_int_equal(phx_layout_parse(spec, layout, why, sizeof(why)), 0);
	assert_int_equal(phx_layout_resolve(layout, world, why, sizeof(why)), 0);
	a->layout = layout;
	a->world = world;
}

static void test_least_out_exhaustive(void **state)
{
	for (int round = 0; round < 60; round++) {
		struct phx_layout layout;
		struct pl_alloc a = { 0 };
		uint64_t least[17], exact[17];
		unsigned inner;
		char spec[128];

		small_layout(&layout, &a, false, &inner, spec, sizeof(spec));
		assert_int_equal(phx_pl_least_out(&a, a.world, false, least), 0);
		for (unsigned long m = 0; m <= a.world; m++)
			exact[m] = UINT64_MAX;
		for (unsigned mask = 0; mask < 1u << a.world; mask++) {
			unsigned m = (unsigned)__builtin_popcount(mask);
			uint64_t out = set_out(&a, mask);

			exact[m] = out < exact[m] ? out : exact[m];
		}
		for (unsigned long m = 0; m <= a.world; m++) {
			if (least[m] > exact[m] ||
			    (inner + (layout.size[PHX_DIM_PP] > 1) <= 2 && least[m] != exact[m]))
				fail_msg(
					"%s: %lu ranks send at least %llu KiB, the bound says %llu",
					spec, m, (unsigned long long)exact[m],
					(unsigned long long)least[m]);
		}
	}
	(void)state;
}

/*
 * The least m ranks send when e of them are of the first or last stage,
 * against every set of ranks of small pipelined layouts: no set sends less;
 * with one other dimension or none, where each stage's best set can grow
 * into the next one's, the bound is the least exactly. A node holding one
 * middle stage of one replica is what makes this bound tighter than
 * sharing pipeline ends out: it sends two hops per rank, never one and a half.
 */
static void test_least_out_ends_exhaustive(void **state)
{
	for (int round = 0; round < 80; round++) {
		struct phx_layout layout;
		struct pl_alloc a = { 0 };
		uint64_t least[17 * 17], exact[17 * 17];
		unsigned long stride, stages;
		unsigned inner;
		char spec[128];

		small_layout(&layout, &a, true, &inner, spec, sizeof(spec));
		stride = phx_layout_stride(&layout, PHX_DIM_PP);
		stages = layout.size[PHX_DIM_PP];
		assert_int_equal(phx_pl_least_out_ends(&a, a.world, least), 0);
		for (size_t i = 0; i < 17 * 17; i++)
			exact[i] = UINT64_MAX;
		for (unsigned mask = 0; mask < 1u << a.world; mask++) {
			unsigned m = (unsigned)__builtin_popcount(mask), e = 0;
			uint64_t out = set_out(&a, mask);

			for (unsigned long r = 0; r < a.world; r++) {
				unsigned long st = r / stride % stages;

				e += (mask >> r & 1) && (st == 0 || st + 1 == stages);
			}
			if (out < exact[m * (a.world + 1) + e])
				exact[m * (a.world + 1) + e] = out;
		}
		for (unsigned long m = 0; m <= a.world; m++) {
			for (unsigned long e = 0; e <= m; e++) {
				uint64_t want = exact[m * (a.world + 1) + e];
				uint64_t got = least[m * (a.world + 1) + e];

				if (got > want || (inner <= 1 && got != want))
					fail_msg("%s: %lu ranks, %lu at pipeline ends, send at "
						 "least %llu KiB; the bound says %llu",
						 spec, m, e, (unsigned long long)want,
						 (unsigned long long)got);
			}
		}
	}
	(void)state;
}

/* A planned map of a random big fabric, its allocation as the model sees it, and a copy to change.
 */
struct big_map {
	struct scenario s;
	struct phx_plan *plan;
	struct pl_alloc alloc;
	const char **names;
	uint32_t *map;
};

static void big_map_open(struct big_map *m)
{
	m->s = (struct scenario){ .gpn = rng() % 2 ? 4 : 8 };
	m->plan = big_plan(&m->s);
	m->names = calloc(3 * m->plan->n_nodes, sizeof(*m->names));
	m->map = malloc(m->plan->world * sizeof(*m->map));
	assert_true(m->names && m->map);
	alloc_of(m->plan, &m->alloc, m->names);
	memcpy(m->map, m->plan->rank_node, m->plan->world * sizeof(*m->map));
}

static void big_map_close(struct big_map *m)
{
	free_alloc(&m->alloc);
	free(m->names);
	free(m->map);
	phx_plan_free(m->plan);
	free_scenario(&m->s);
}

/* Picks up to len pairs of distinct nodes of the plan holding as many ranks each. */
static size_t pick_pairs(const struct phx_plan *plan, const uint32_t *map, uint32_t *xs,
			 uint32_t *ys, size_t len)
{
	size_t n = plan->n_nodes, got = 0;

	for (int tries = 0; tries < 200 && got < len; tries++) {
		uint32_t x = (uint32_t)(rng() % n), y = (uint32_t)(rng() % n);
		unsigned cx = 0, cy = 0;
		bool seen = x == y;

		for (size_t i = 0; i < got; i++)
			seen = seen || xs[i] == x || xs[i] == y || ys[i] == x || ys[i] == y;
		for (unsigned long r = 0; r < plan->world; r++) {
			cx += map[r] == x;
			cy += map[r] == y;
		}
		if (seen || cx != cy)
			continue;
		xs[got] = x;
		ys[got] = y;
		got++;
	}
	return got;
}

/*
 * The link model's busiest link of map counted afresh is got; sums of
 * squares up to the rounding the spreading pass allows for. The step time
 * alone, found by its own scan, is the busiest link's.
 */
static void assert_fresh_worst(const struct pl_alloc *a, const uint32_t *map,
			       const struct pl_worst *got, int round, int k)
{
	struct pl_worst fresh;
	uint64_t ns;

	assert_int_equal(phx_pl_links(a, map, &fresh), 0);
	assert_int_equal(phx_pl_step_time(a, map, &ns), 0);
	if (ns != (uint64_t)fresh.t)
		fail_msg("round %d, trade %d: step time %llu ns, busiest link %.0f ns", round, k,
			 (unsigned long long)ns, fresh.t);
	if (got->t != fresh.t || got->tied != fresh.tied || got->kind != fresh.kind ||
	    got->where != fresh.where || got->up != fresh.up ||
	    fabs(got->sq - fresh.sq) > 1e-9 * fresh.sq)
		fail_msg("round %d, trade %d: kept %.0f ns (%u links, kind %d at %u, sq %.17g), "
			 "fresh %.0f ns (%u links, kind %d at %u, sq %.17g)",
			 round, k, got->t, got->tied, got->kind, got->where, got->sq, fresh.t,
			 fresh.tied, fresh.kind, fresh.where, fresh.sq);
}

static bool take_any(const struct pl_worst *now, const struct pl_worst *was)
{
	(void)now;
	(void)was;
	return true;
}

static bool take_none(const struct pl_worst *now, const struct pl_worst *was)
{
	(void)now;
	(void)was;
	return false;
}

/*
 * Trades of whole nodes update the link model's loads flow by flow: after
 * each, the busiest link, its time and how many links share it are what a
 * fresh count of the whole map gives, and the same trade undoes it. Trades
 * priced from the links they touched (phx_pl_links_trade_if(), kept or
 * undone at random, many in a row) give what a fresh count gives too.
 */
static void test_link_trades(void **state)
{
	for (int round = 0; round < 20; round++) {
		struct big_map m;
		const struct phx_plan *plan;
		struct pl_links *links;
		struct pl_worst last;
		uint32_t *map, *before;

		big_map_open(&m);
		plan = m.plan;
		map = m.map;
		before = malloc(plan->world * sizeof(*before));
		assert_non_null(before);
		if (round % 2)
			shuffle_map(map, plan->world);
		links = phx_pl_links_open(&m.alloc, map);
		assert_non_null(links);
		for (int k = 0; k < 120; k++) {
			uint32_t xs[3], ys[3];
			struct pl_worst kept = { 0 };
			size_t got = pick_pairs(plan, map, xs, ys, 1 + rng() % 3);
			bool take = rng() % 2;

			memcpy(before, map, plan->world * sizeof(*map));
			if (k >= 12) {
				assert_int_equal(phx_pl_links_trade_if(links, xs, ys, got,
								       take ? take_any : take_none,
								       &kept),
						 take);
				if (!take) {
					assert_memory_equal(map, before,
							    plan->world * sizeof(*map));
					continue;
				}
				assert_fresh_worst(&m.alloc, map, &kept, round, k);
				continue;
			}
			phx_pl_links_trade(links, xs, ys, got);
			for (unsigned long r = 0; r < plan->world; r++) {
				uint32_t want = before[r];

				for (size_t i = 0; i < got; i++)
					want = before[r] == xs[i]   ? ys[i]
					       : before[r] == ys[i] ? xs[i]
								    : want;
				assert_int_equal(map[r], want);
			}
			phx_pl_links_worst(links, &kept);
			assert_fresh_worst(&m.alloc, map, &kept, round, k);
			if (k % 3 == 2) {
				phx_pl_links_trade(links, xs, ys, got);
				assert_memory_equal(map, before, plan->world * sizeof(*map));
			}
		}
		/* After trades kept and undone, the loads are still the map's. */
		phx_pl_links_worst(links, &last);
		assert_fresh_worst(&m.alloc, map, &last, round, 120);
		phx_pl_links_close(links);
		free(before);
		big_map_close(&m);
	}
	(void)state;
}

/*
 * Spreading load off the links next in line never lengthens the step, nor
 * at the same step loads the busiest uplink more, nor at that gathers
 * load; it keeps each node's rank count, and plans the same each time.
 */
static void test_spread(void **state)
{
	unsigned spread = 0;

	for (int round = 0; round < 12; round++) {
		struct pl_worst before, after;
		const struct phx_plan *plan;
		struct big_map m;
		uint32_t *map, *again;
		unsigned *count;
		size_t n;
		long kept;

		big_map_open(&m);
		plan = m.plan;
		map = m.map;
		n = plan->n_nodes;
		again = malloc(plan->world * sizeof(*again));
		count = calloc(n, sizeof(*count));
		assert_true(again && count);
		shuffle_map(map, plan->world);
		memcpy(again, map, plan->world * sizeof(*map));
		for (unsigned long r = 0; r < plan->world; r++)
			count[map[r]]++;
		assert_int_equal(phx_pl_links(&m.alloc, map, &before), 0);
		kept = phx_pl_spread(&m.alloc, map);
		assert_true(kept >= 0);
		spread += kept > 0;
		assert_int_equal(phx_pl_links(&m.alloc, map, &after), 0);
		assert_true(after.t <= before.t);
		if (after.t == before.t) {
			assert_true(after.up <= before.up * (1 + 1e-9));
			if (after.up >= before.up * (1 - 1e-9))
				assert_true(after.sq <= before.sq * (1 + 1e-9));
		}
		for (unsigned long r = 0; r < plan->world; r++)
			count[map[r]]--;
		for (size_t i = 0; i < n; i++)
			assert_int_equal(count[i], 0);
		assert_int_equal(phx_pl_spread(&m.alloc, again), kept);
		assert_memory_equal(map, again, plan->world * sizeof(*map));
		free(again);
		free(count);
		big_map_close(&m);
	}
	assert_true(spread > 0);
	(void)state;
}

/* Flows of size each over the links hops[0..n), count of them. */
static struct pl_flow_class flows_over(const uint32_t *hops, unsigned n, uint32_t count,
				       double size)
{
	struct pl_flow_class c = { .n_hops = n, .count = count, .size = size };

	memcpy(c.hop, hops, n * sizeof(*hops));
	return c;
}

/*
 * The shared-link model's fluid sharing on cases worked by hand (links of
 * capacity 1, so a time is the bytes a link moves).
 */
static void test_fluid_by_hand(void **state)
{
	const double one[5] = { 1, 1, 1, 1, 1 };
	const double none[2] = { 1, 0 };
	static const uint32_t l0[] = { 0 }, l1[] = { 1 }, l2[] = { 2 }, l01[] = { 0, 1 },
			      l02[] = { 0, 2 }, l34[] = { 3, 4 };
	struct pl_flow_class c[5];

	/* Two flows on one link: half each, 2 units each, 4 in all. */
	c[0] = flows_over(l0, 1, 2, 2);
	assert_true(fabs(phx_pl_fluid_time(one, 1, c, 1) - 4) < 1e-9);
	/* A short flow ends at 2 and frees its half: the long one ends at 1 + 3 = 4. */
	c[0] = flows_over(l0, 1, 1, 1);
	c[1] = flows_over(l0, 1, 1, 3);
	assert_true(fabs(phx_pl_fluid_time(one, 1, c, 2) - 4) < 1e-9);
	/*
	 * Held back elsewhere: link 0 carries f0 and f1 (1 each); f0 also
	 * crosses link 1 with two flows of 0.5, f1 link 2 with two more. Every
	 * link moves 2, but all flows get 1/3 until the short ones end at 1.5,
	 * when f0 and f1 have 0.5 left at 1/2 each: 2.5.
	 */
	c[0] = flows_over(l01, 2, 1, 1);
	c[1] = flows_over(l02, 2, 1, 1);
	c[2] = flows_over(l1, 1, 2, 0.5);
	c[3] = flows_over(l2, 1, 2, 0.5);
	/* A part of its own, sharing no link with the rest: 1 on links 3 and 4. */
	c[4] = flows_over(l34, 2, 1, 1);
	assert_true(fabs(phx_pl_fluid_time(one, 5, c, 5) - 2.5) < 1e-9);
	/* The part alone, then longer than the rest. */
	c[0] = flows_over(l34, 2, 1, 3);
	assert_true(fabs(phx_pl_fluid_time(one, 5, c, 1) - 3) < 1e-9);
	/* A link with no bandwidth never carries its flow. */
	c[0] = flows_over(l01, 2, 1, 1);
	assert_true(isinf(phx_pl_fluid_time(none, 2, c, 1)));
	/* No flows, no time. */
	assert_true(phx_pl_fluid_time(one, 5, c, 0) == 0);
	(void)state;
}

/*
 * On random fabrics and maps: the shared-link model's time is never below
 * the link model's (no link moves faster than its bandwidth), both come
 * out the same every time, the plan's link time is the planner's, and a
 * map the plan cannot hold is refused.
 */
static void test_shared_model(void **state)
{
	unsigned longer = 0;

	for (int round = 0; round < 12; round++) {
		struct phx_step_times t, again;
		struct big_map m;
		uint32_t keep;

		big_map_open(&m);
		assert_int_equal(phx_plan_step_times(m.plan, m.plan->rank_node, &t), 0);
		assert_int_equal(t.link_ns, m.plan->cost.step_ns);
		if (round % 2)
			shuffle_map(m.map, m.plan->world);
		assert_int_equal(phx_plan_step_times(m.plan, m.map, &t), 0);
		assert_int_equal(phx_plan_step_times(m.plan, m.map, &again), 0);
		assert_int_equal(t.shared_ns, again.shared_ns);
		/* Rounding: the model sums doubles, the link model whole KiB x ns. */
		if (t.shared_ns + 1 + t.link_ns / 1000000 < t.link_ns)
			fail_msg("round %d: shared-link %llu ns below the busiest link's %llu ns",
				 round, (unsigned long long)t.shared_ns,
				 (unsigned long long)t.link_ns);
		longer += t.shared_ns > t.link_ns + t.link_ns / 100;
		keep = m.map[0];
		m.map[0] = (uint32_t)m.plan->n_nodes;
		errno = 0;
		assert_int_equal(phx_plan_step_times(m.plan, m.map, &t), -1);
		assert_int_equal(errno, EINVAL);
		/* Every rank on one node: more than its GPUs. */
		for (unsigned long r = 0; r < m.plan->world; r++)
			m.map[r] = keep;
		if (m.plan->world > m.plan->gpus_per_node) {
			errno = 0;
			assert_int_equal(phx_plan_step_times(m.plan, m.map, &t), -1);
			assert_int_equal(errno, EINVAL);
		}
		big_map_close(&m);
	}
	/* Shuffled maps cross busy links: some must take longer than their busiest link. */
	assert_true(longer > 0);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_small_map),
		cmocka_unit_test(test_alike_nodes_keep_order),
		cmocka_unit_test(test_determinism),
		cmocka_unit_test(test_random_invariants),
		cmocka_unit_test(test_bound_exhaustive),
		cmocka_unit_test(test_bound_against_maps),
		cmocka_unit_test(test_swaps_lower_cost),
		cmocka_unit_test(test_pipelines_stay_in_leaves),
		cmocka_unit_test(test_slow_nodes_left_out),
		cmocka_unit_test(test_slow_nodes_get_last_ranks),
		cmocka_unit_test(test_nvlink_domains),
		cmocka_unit_test(test_segments_take_pipeline_ends),
		cmocka_unit_test(test_spine_tiles),
		cmocka_unit_test(test_stages_in_order),
		cmocka_unit_test(test_no_fabric),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_traffic),
		cmocka_unit_test(test_link_model),
		cmocka_unit_test(test_least_out_exhaustive),
		cmocka_unit_test(test_least_out_ends_exhaustive),
		cmocka_unit_test(test_link_trades),
		cmocka_unit_test(test_spread),
		cmocka_unit_test(test_fluid_by_hand),
		cmocka_unit_test(test_shared_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
