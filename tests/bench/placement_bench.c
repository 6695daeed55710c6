/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Placement benchmark: synthetic clusters of 1k, 16k and 128k GPUs with
 * seeded, fragmented allocations (each leaf has a random number of free
 * nodes at random places; the job takes leaves in random order until it has
 * enough), on two fabrics:
 *   ib     8 GPUs per node, 32 nodes per leaf, 16 leaves per spine,
 *          spines 2:1 oversubscribed and 2:1 again above them
 *   nvl72  4 GPUs per node, NVLink domains of 18 nodes (72 GPUs), two
 *          domains per leaf, same spines
 *   block  nvl72's fabric with the domains as Slurm 24.11's topology/block
 *          blocks, allocated as --segment=8 would: whole segments of 8 nodes,
 *          each inside one block
 * and two namings of the nodes: "rack", node numbers follow the leaves (the
 * best case for host-name order), and "mixed", numbers run across the
 * leaves (cabling that does not follow the names, common after repairs
 * and extensions). For each case it prints the plan's step by the link
 * model over that model's lower bound (step/lb), the plan's group cost over
 * its lower bound and over Slurm's host-name order, how much longer host-name
 * order's step is by the link model (hn-step), how much more cross-leaf
 * traffic the host-name order sends, the most any placement keeping the
 * tp x cp x ep blocks whole could achieve on that (xl-max: host-name
 * order's cross-leaf traffic over cross_leaf_floor()), and the time
 * phx_place() took (the best of three runs: processor time of the calling
 * thread, which the targets are checked against, and wall-clock time,
 * which on a shared machine also counts waiting for a processor), then
 * which targets the case meets. Targets: a step within 1.05x of its bound
 * (lb), no longer than host-name order's (st) and 1.3x shorter on
 * mixed names (mx; "none" where host-name order's step is within 1.3x of
 * the bound, so no plan can be), under 50 ms at 16k GPUs and 1 s at 128k
 * (t).
 * A summary counts the cases meeting each target. Exits 1 when one is
 * missed. --dump DIR also writes each case (fabric, allocation, layout,
 * traffic) with the map of every candidate the planner priced and its
 * final plan to DIR/CASE.plan, each with its time by the link and the
 * shared-link model, for tests/bench/placement_sim to judge; --random K adds
 * K maps made from the plan by random node swaps on cases of up to
 * --random-gpus GPUs (1024).
 *
 *   placement_bench [--seed N] [--min-gpus N] [--max-gpus N] [--fabric ib|nvl72|block]
 *                   [--naming rack|mixed] [--dump DIR [--random K] [--random-gpus N]]
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "placement/fabric.h"
#include "placement/layout.h"
#include "placement/placement.h"
#include "placement/plan_case.h"
#include "tests/rng.h"

#define LEAVES_PER_SPINE 16
#define RUNS 3

struct fabric_kind {
	const char *name;
	unsigned gpn, leaf_nodes, domain_nodes; /* domain_nodes 0: none */
	unsigned long nvlink_mbs;
	/* Slurm 24.11's topology/block with --segment: whole segments of this many nodes per block.
	 */
	unsigned segment;
};

static const struct fabric_kind kinds[] = {
	{ "ib", 8, 32, 0, 0, 0 },
	{ "nvl72", 4, 36, 18, 900000, 0 },
	{ "block", 4, 36, 18, 900000, 8 },
};

struct bench_case {
	const char *fabric;
	unsigned long gpus;
	const char *layout;
};

static const struct bench_case cases[] = {
	{ "ib", 1024, "tp=8,pp=4,dp=*" },	    { "ib", 16384, "tp=8,pp=8,dp=*" },
	{ "ib", 131072, "tp=8,pp=8,dp=*" },	    { "ib", 16384, "tp=2,ep=4,pp=4,dp=*" },
	{ "nvl72", 1024, "tp=4,ep=8,pp=4,dp=*" },   { "nvl72", 16384, "tp=4,ep=8,pp=8,dp=*" },
	{ "nvl72", 131072, "tp=4,ep=8,pp=8,dp=*" }, { "block", 1024, "tp=4,ep=8,pp=4,dp=*" },
	{ "block", 16384, "tp=4,ep=8,pp=8,dp=*" },
};

static const char *const namings[] = { "rack", "mixed" };

static uint64_t rng_state;
static const char *dump_dir;

/* The candidates' maps, kept to be priced by both models once the plan is made. */
struct dump {
	FILE *f;
	unsigned long world;
	struct kept_map {
		char name[128];
		uint32_t *rank_node;
	} * maps;
	size_t n_maps;
	bool failed; /* out of memory */
};

static unsigned random_maps; /* --random K */
static unsigned long random_gpus = 1024; /* --random-gpus N */

static void dump_candidate(void *ctx, const char *name, const uint32_t *rank_node)
{
	struct dump *d = ctx;
	struct kept_map *grown = realloc(d->maps, (d->n_maps + 1) * sizeof(*d->maps));
	uint32_t *copy = malloc(d->world * sizeof(*copy));

	if (grown)
		d->maps = grown;
	if (!grown || !copy) {
		free(copy);
		d->failed = true;
		return;
	}
	snprintf(grown[d->n_maps].name, sizeof(grown[d->n_maps].name), "%s", name);
	memcpy(copy, rank_node, d->world * sizeof(*copy));
	grown[d->n_maps++].rank_node = copy;
}

static void dump_free(struct dump *d)
{
	for (size_t i = 0; i < d->n_maps; i++)
		free(d->maps[i].rank_node);
	free(d->maps);
	if (d->f)
		fclose(d->f);
}

/* A map with both models' times of it. */
static int dump_map(struct dump *d, const struct phx_plan *plan, const char *name,
		    const uint32_t *rank_node)
{
	struct phx_step_times times;

	if (phx_plan_step_times(plan, rank_node, &times) < 0) {
		fprintf(stderr, "phalanx: bench: pricing the map %s failed\n", name);
		return -1;
	}
	phx_plan_case_map(d->f, name, rank_node, d->world, &times);
	return 0;
}

static FILE *dump_open(const struct bench_case *c, bool mixed, size_t index)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s-%s-%lu-%zu.plan", dump_dir, c->fabric, namings[mixed],
		 c->gpus, index);
	f = fopen(path, "w");
	if (!f)
		fprintf(stderr,
			"phalanx: bench: cannot write %s; check that --dump names a "
			"writable folder\n",
			path);
	return f;
}

static void dump_case(FILE *f, const struct bench_case *c, bool mixed, const struct phx_plan *plan)
{
	char title[256];

	snprintf(title, sizeof(title), "%s %s %lu %s", c->fabric, namings[mixed], c->gpus,
		 c->layout);
	phx_plan_case_write(f, title, plan);
}

static uint64_t rng(void)
{
	return phx_xorshift64s(&rng_state);
}

/*
 * Maps made from the plan by swapping whole nodes: from one swap to about
 * as many as nodes, a shuffle. They show how well the models rank maps
 * and predict the simulated step.
 */
static int dump_random(struct dump *d, const struct phx_plan *plan)
{
	uint32_t *perm = malloc(plan->n_nodes * sizeof(*perm)), *used = NULL;
	uint32_t *map = malloc(d->world * sizeof(*map));
	size_t n_used = 0;
	int rc = -1;

	used = malloc(plan->n_nodes * sizeof(*used));
	if (!perm || !map || !used)
		goto out;
	for (size_t i = 0; i < plan->n_nodes; i++) {
		if (plan->nodes[i].used_gpus)
			used[n_used++] = (uint32_t)i;
	}
	for (unsigned k = 0; k < random_maps; k++) {
		size_t swaps = (n_used * (k + 1) + random_maps / 2) / random_maps;
		char name[64];

		swaps = swaps ? swaps : 1;
		for (size_t i = 0; i < plan->n_nodes; i++)
			perm[i] = (uint32_t)i;
		for (size_t i = 0; i < swaps; i++) {
			uint32_t x = used[rng() % n_used], y = used[rng() % n_used], t = perm[x];

			perm[x] = perm[y];
			perm[y] = t;
		}
		for (unsigned long r = 0; r < d->world; r++)
			map[r] = perm[plan->rank_node[r]];
		snprintf(name, sizeof(name), "random/%zu", swaps);
		if (dump_map(d, plan, name, map) < 0)
			goto out;
	}
	rc = 0;
out:
	free(perm);
	free(used);
	free(map);
	return rc;
}

/*
 * The case, every candidate, the plan, and random maps. Above --random-gpus
 * only the plan and host-name order are priced: the shared-link model
 * takes seconds on a 16k-GPU NVL72 map.
 */
static int dump_maps(struct dump *d, const struct bench_case *c, bool mixed,
		     const struct phx_plan *plan)
{
	bool all = c->gpus <= random_gpus;

	if (d->failed) {
		fprintf(stderr, "phalanx: bench: out of memory keeping the candidates\n");
		return -1;
	}
	dump_case(d->f, c, mixed, plan);
	for (size_t i = 0; i < d->n_maps; i++) {
		const struct kept_map *m = &d->maps[i];

		if (all || !strcmp(m->name, "host-name order")) {
			if (dump_map(d, plan, m->name, m->rank_node) < 0)
				return -1;
		} else {
			phx_plan_case_map(d->f, m->name, m->rank_node, d->world, NULL);
		}
	}
	if (dump_map(d, plan, "phalanx", plan->rank_node) < 0)
		return -1;
	return all ? dump_random(d, plan) : 0;
}

static double now_ms(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Cases meeting each target, and cases the target applies to. */
struct tally {
	unsigned bound_ok, step_ok, mixed_ok, mixed_cases, mixed_beyond, time_ok, time_cases, cases;
};

static const char *verdict(bool ok)
{
	return ok ? "ok" : "MISS";
}

/* Node x of leaf l: its number, by rack or across the leaves. */
static unsigned node_id(const struct fabric_kind *k, unsigned leaves, bool mixed, unsigned l,
			unsigned x)
{
	return mixed ? x * leaves + l : l * k->leaf_nodes + x;
}

static size_t node_list(const struct fabric_kind *k, unsigned leaves, bool mixed, unsigned l,
			unsigned from, unsigned to, char *out, size_t len)
{
	size_t off = (size_t)snprintf(out, len, "n[");

	for (unsigned x = from; x <= to && off < len; x++)
		off += (size_t)snprintf(out + off, len - off, "%s%06u", x > from ? "," : "",
					node_id(k, leaves, mixed, l, x));
	off += (size_t)snprintf(out + off, len - off, "]");
	return off;
}

static char *topology_conf(const struct fabric_kind *k, unsigned leaves, bool mixed, size_t *len)
{
	size_t cap = (size_t)leaves * k->leaf_nodes * 24 + 4096, off = 0;
	unsigned spines = (leaves + LEAVES_PER_SPINE - 1) / LEAVES_PER_SPINE;
	char *t = malloc(cap);

	if (!t)
		return NULL;
	for (unsigned l = 0; l < leaves; l++) {
		off += (size_t)snprintf(t + off, cap - off, "SwitchName=leaf%u Nodes=", l);
		off += node_list(k, leaves, mixed, l, 0, k->leaf_nodes - 1, t + off, cap - off);
		off += (size_t)snprintf(t + off, cap - off, "\n");
		for (unsigned d = 0; k->domain_nodes && d < k->leaf_nodes / k->domain_nodes; d++) {
			off += (size_t)snprintf(t + off, cap - off, "BlockName=nvl%u_%u Nodes=", l,
						d);
			off += node_list(k, leaves, mixed, l, d * k->domain_nodes,
					 (d + 1) * k->domain_nodes - 1, t + off, cap - off);
			off += (size_t)snprintf(t + off, cap - off, "\n");
		}
	}
	for (unsigned s = 0; s < spines; s++) {
		unsigned last = (s + 1) * LEAVES_PER_SPINE - 1;

		off += (size_t)snprintf(t + off, cap - off,
					"SwitchName=spine%u Switches=leaf[%u-%u]\n", s,
					s * LEAVES_PER_SPINE, last < leaves ? last : leaves - 1);
	}
	*len = off;
	return t;
}

/*
 * Slurm's free nodes: leaves (with --segment, blocks) in random order, a
 * random count of free nodes in each, of which the job takes all (with
 * --segment, whole segments); when one round is not enough, another frees
 * more of them.
 */
static char **allocate(const struct fabric_kind *k, unsigned leaves, bool mixed, size_t need)
{
	unsigned width = k->segment ? k->domain_nodes : k->leaf_nodes;
	unsigned groups = leaves * (k->leaf_nodes / width);
	char **names = calloc(need, sizeof(*names));
	unsigned *order = calloc(groups, sizeof(*order));
	unsigned char *take = calloc(width, 1), *taken = calloc(groups, width);
	size_t n = 0;

	if (!names || !order || !take || !taken)
		goto out;
	for (unsigned g = 0; g < groups; g++)
		order[g] = g;
	for (unsigned g = groups; g > 1; g--) {
		unsigned j = (unsigned)(rng() % g), t = order[g - 1];

		order[g - 1] = order[j];
		order[j] = t;
	}
	for (unsigned i = 0; i < 4 * groups && n < need; i++) {
		unsigned free_nodes = 1 + (unsigned)(rng() % width), g = order[i % groups];
		unsigned char *was = taken + (size_t)g * width;
		unsigned l = g / (k->leaf_nodes / width),
			 first = g % (k->leaf_nodes / width) * width;
		unsigned usable = 0;

		memset(take, 0, width);
		for (unsigned f = 0; f < free_nodes; f++)
			take[rng() % width] = 1;
		for (unsigned x = 0; x < width; x++)
			usable += take[x] && !was[x];
		if (k->segment)
			usable -= usable % k->segment;
		for (unsigned x = 0; x < width && n < need && usable; x++) {
			char name[32];

			if (!take[x] || was[x])
				continue;
			was[x] = 1;
			usable--;
			snprintf(name, sizeof(name), "n%06u",
				 node_id(k, leaves, mixed, l, first + x));
			names[n++] = strdup(name);
		}
	}
	/* Shuffled: the result must not depend on the order of the names. */
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)(rng() % i);
		char *t = names[i - 1];

		names[i - 1] = names[j];
		names[j] = t;
	}
out:
	free(order);
	free(take);
	free(taken);
	if (n < need) {
		for (size_t i = 0; i < n; i++)
			free(names[i]);
		free(names);
		return NULL;
	}
	return names;
}

static int by_name(const void *x, const void *y)
{
	return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Nodes in use per leaf, in leaf-name order; NULL when out of memory. */
static unsigned long *leaf_sizes(const struct phx_plan *plan, size_t *n_leaves)
{
	const char **leaf = calloc(plan->n_nodes + 1, sizeof(*leaf));
	unsigned long *size = calloc(plan->n_nodes + 1, sizeof(*size));
	size_t n = 0;

	*n_leaves = 0;
	if (!leaf || !size) {
		free(leaf);
		free(size);
		return NULL;
	}
	for (size_t i = 0; i < plan->n_nodes; i++) {
		if (!(plan->nodes[i].flags & PHX_PLAN_NODE_SPARE))
			leaf[n++] = plan->nodes[i].leaf;
	}
	qsort(leaf, n, sizeof(*leaf), by_name);
	for (size_t i = 0; i < n; i++) {
		if (!i || strcmp(leaf[i - 1], leaf[i]))
			(*n_leaves)++;
		size[*n_leaves - 1]++;
	}
	free(leaf);
	return size;
}

/*
 * The least cross-leaf traffic (MiB per step, as the planner counts it) of
 * any placement that keeps each tp x cp x ep block on whole nodes of one
 * leaf, except for what the leaves' leftover nodes force apart. Such a
 * block is a cell: the layout is then a grid of D data-parallel replicas x
 * P pipeline stages of cells, every lane (a rank's place inside its cell)
 * with its own data-parallel groups and pipeline chains. A leaf holding
 * cells of g distinct stages adds g leaves to those stages' data-parallel
 * groups, and its w cells form at least ceil(w / g) chain segments, so at
 * most w - ceil(w / g) pipeline hops stay in it; each leaf's best g bounds
 * what it can save. A block split over leaves sends each of its groups
 * that spans nodes over two leaves at least. 0 when the layout is not made
 * of whole-node cells. count[] holds the nodes in use per leaf.
 */
static uint64_t cross_leaf_floor(const struct phx_plan *plan, const unsigned long *count,
				 size_t n_leaves)
{
	const struct phx_layout *l = &plan->layout;
	const unsigned long *mib = plan->traffic.mib;
	unsigned long lanes = l->size[PHX_DIM_TP] * l->size[PHX_DIM_CP] * l->size[PHX_DIM_EP];
	unsigned long D = l->size[PHX_DIM_DP], P = l->size[PHX_DIM_PP], cell, split = 0;
	unsigned long biggest = 0;
	uint64_t floor_mib = P > 1 ? mib[PHX_DIM_PP] * lanes * (P - 1) * D : 0, split_mib = 0;
	int64_t saved = 0;

	if (lanes % plan->gpus_per_node)
		return 0;
	cell = lanes / plan->gpus_per_node;
	for (size_t i = 0; i < n_leaves; i++) {
		split += count[i] % cell;
		biggest = count[i] / cell > biggest ? count[i] / cell : biggest;
	}
	for (size_t i = 0; i < n_leaves; i++) {
		unsigned long w = count[i] / cell;
		int64_t best = INT64_MAX;

		for (unsigned long g = 1; w && g <= P; g++) {
			/* A stage whole in one leaf would send nothing up. */
			uint64_t stages = D > 1 && biggest < D ? (g < w ? g : w) : 0;
			int64_t v = (int64_t)(mib[PHX_DIM_DP] * stages) -
				    (int64_t)(mib[PHX_DIM_PP] * (w - (w + g - 1) / g));

			best = v < best ? v : best;
		}
		if (w)
			saved += best * (int64_t)lanes;
	}
	for (int d = PHX_DIM_TP; d <= PHX_DIM_EP; d++) {
		if (l->size[d] > 1 &&
		    phx_layout_stride(l, (enum phx_dim)d) * l->size[d] > plan->gpus_per_node)
			split_mib += lanes / l->size[d] * mib[d] * 2;
	}
	floor_mib += (split + cell - 1) / cell * split_mib;
	return saved < 0 && (uint64_t)-saved > floor_mib ? 0 : floor_mib + (uint64_t)saved;
}

static const struct fabric_kind *kind(const char *name)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if (!strcmp(kinds[i].name, name))
			return &kinds[i];
	}
	return &kinds[0];
}

static int run_case(const struct bench_case *c, bool mixed, size_t index, struct tally *t)
{
	const struct fabric_kind *k = kind(c->fabric);
	size_t nodes = c->gpus / k->gpn, len;
	unsigned leaves = (unsigned)(nodes * 3 / k->leaf_nodes) + 4;
	char *conf = topology_conf(k, leaves, mixed, &len), err[512], **names = NULL;
	struct phx_fabric *fab = NULL;
	struct phx_plan *plan = NULL;
	struct phx_layout layout;
	double ms = 0, cpu = 0, vs_lb, step_lb, vs_host, cross, ceiling, step;
	uint64_t xl_floor, group_lb;
	unsigned long *sizes = NULL;
	size_t n_leaves;
	bool lb_ok, step_ok, mixed_ok, beyond, time_ok, timed;
	struct dump dump = { .world = c->gpus };
	int rc = -1;

	if (!conf ||
	    phx_fabric_parse(NULL, NULL, 0, "bench-topology.conf", conf, len, &fab, err,
			     sizeof(err)) < 0 ||
	    phx_layout_parse(c->layout, &layout, err, sizeof(err)) < 0 ||
	    phx_layout_resolve(&layout, c->gpus, err, sizeof(err)) < 0) {
		fprintf(stderr, "phalanx: bench: %s\n", conf ? err : "out of memory");
		goto out;
	}
	if (k->nvlink_mbs)
		fab->bandwidth[PHX_LEVEL_NODE] = fab->bandwidth[PHX_LEVEL_NVLINK] = k->nvlink_mbs;
	names = allocate(k, leaves, mixed, nodes);
	if (!names) {
		fprintf(stderr, "phalanx: bench: cannot allocate %zu nodes\n", nodes);
		goto out;
	}
	if (dump_dir && !(dump.f = dump_open(c, mixed, index)))
		goto out;
	/* The best of three: the machine is shared. Every run must agree. */
	for (int run = 0; run < RUNS; run++) {
		struct phx_plan *again = NULL;
		double w0 = now_ms(CLOCK_MONOTONIC), c0 = now_ms(CLOCK_THREAD_CPUTIME_ID), took,
		       used;

		if (phx_place(&(struct phx_place_input){ .fabric = fab,
							 .nodes = names,
							 .n_nodes = nodes,
							 .gpus_per_node = k->gpn,
							 .layout = &layout,
							 /* Only the first run is written. */
							 .on_candidate = dump.f && !run
										 ? dump_candidate
										 : NULL,
							 .candidate_ctx = &dump },
			      plan ? &again : &plan, err, sizeof(err)) < 0) {
			fprintf(stderr, "phalanx: bench: %s\n", err);
			goto out;
		}
		used = now_ms(CLOCK_THREAD_CPUTIME_ID) - c0;
		took = now_ms(CLOCK_MONOTONIC) - w0;
		ms = run ? (took < ms ? took : ms) : took;
		cpu = run ? (used < cpu ? used : cpu) : used;
		if (again && (memcmp(again->rank_node, plan->rank_node,
				     plan->world * sizeof(*plan->rank_node)) ||
			      memcmp(again->rank_gpu, plan->rank_gpu,
				     plan->world * sizeof(*plan->rank_gpu)))) {
			fprintf(stderr, "phalanx: bench: two runs gave different maps\n");
			phx_plan_free(again);
			goto out;
		}
		phx_plan_free(again);
	}
	if (dump.f) {
		if (dump_maps(&dump, c, mixed, plan) < 0)
			goto out;
		if (fclose(dump.f)) {
			dump.f = NULL;
			fprintf(stderr,
				"phalanx: bench: writing --dump failed; check free space\n");
			goto out;
		}
		dump.f = NULL;
	}
	/* Computed on demand, outside the planning time: placing does not need it. */
	if (phx_plan_lower_bound(plan, &group_lb) < 0) {
		fprintf(stderr, "phalanx: bench: out of memory\n");
		goto out;
	}
	vs_lb = (double)plan->cost.total / (double)group_lb;
	vs_host = (double)plan->cost.total / (double)plan->hostname.total;
	cross = plan->cost.cross_leaf_mib
			? (double)plan->hostname.cross_leaf_mib / (double)plan->cost.cross_leaf_mib
			: 0;
	sizes = leaf_sizes(plan, &n_leaves);
	if (!sizes) {
		fprintf(stderr, "phalanx: bench: out of memory\n");
		goto out;
	}
	xl_floor = cross_leaf_floor(plan, sizes, n_leaves);
	/* A map below the floor would prove the floor wrong. */
	if (plan->cost.cross_leaf_mib < xl_floor || plan->hostname.cross_leaf_mib < xl_floor) {
		fprintf(stderr,
			"phalanx: bench: a map sends %llu MiB across leaves, below the floor of "
			"%llu MiB: cross_leaf_floor() is wrong for %s\n",
			(unsigned long long)(plan->cost.cross_leaf_mib < xl_floor
						     ? plan->cost.cross_leaf_mib
						     : plan->hostname.cross_leaf_mib),
			(unsigned long long)xl_floor, c->layout);
		goto out;
	}
	ceiling = xl_floor ? (double)plan->hostname.cross_leaf_mib / (double)xl_floor : 0;
	step_lb = plan->step_bound_ns ? (double)plan->cost.step_ns / (double)plan->step_bound_ns
				      : 1e9;
	/* Below the bound would prove the bound wrong. */
	if (plan->cost.step_ns < plan->step_bound_ns ||
	    plan->hostname.step_ns < plan->step_bound_ns) {
		fprintf(stderr, "phalanx: bench: a step is shorter than the link model's bound\n");
		goto out;
	}
	lb_ok = step_lb <= 1.05;
	step = (double)plan->hostname.step_ns / (double)plan->cost.step_ns;
	step_ok = plan->cost.step_ns <= plan->hostname.step_ns;
	mixed_ok = !mixed || step >= 1.3;
	/* Host-name order within 1.3x of the bound: no plan can be 1.3x shorter. */
	beyond = mixed && !mixed_ok && plan->hostname.step_ns < 1.3 * (double)plan->step_bound_ns;
	timed = c->gpus >= 16384;
	time_ok = c->gpus >= 131072 ? cpu < 1000 : !timed || cpu < 50;
	printf("%-6s %-6s %7lu %-22s %6u %8.4f %8.4f %8.4f %7.3fx %8.2fx %7.2fx %8.1f %8.1f  %-4s "
	       "%-4s %-4s %-4s  %s\n",
	       c->fabric, namings[mixed], c->gpus, c->layout, (unsigned)n_leaves, step_lb, vs_lb,
	       vs_host, step, cross, ceiling, cpu, ms, verdict(lb_ok), verdict(step_ok),
	       mixed ? beyond ? "none" : verdict(mixed_ok) : "-", timed ? verdict(time_ok) : "-",
	       plan->strategy);
	t->cases++;
	t->bound_ok += lb_ok;
	t->step_ok += step_ok;
	t->mixed_cases += mixed;
	t->mixed_ok += mixed && mixed_ok;
	t->mixed_beyond += beyond;
	t->time_cases += timed;
	t->time_ok += timed && time_ok;
	rc = 0;
out:
	dump_free(&dump);
	free(sizes);
	for (size_t i = 0; names && i < nodes; i++)
		free(names[i]);
	free(names);
	free(conf);
	phx_plan_free(plan);
	phx_fabric_free(fab);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned long min_gpus = 0, max_gpus = 131072, seed = 42;
	const char *only = NULL, *naming = NULL;
	struct tally t = { 0 };
	unsigned missed;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--seed"))
			seed = strtoul(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--min-gpus"))
			min_gpus = strtoul(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--max-gpus"))
			max_gpus = strtoul(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--fabric"))
			only = argv[i + 1];
		else if (!strcmp(argv[i], "--naming"))
			naming = argv[i + 1];
		else if (!strcmp(argv[i], "--dump"))
			dump_dir = argv[i + 1];
		else if (!strcmp(argv[i], "--random"))
			random_maps = (unsigned)strtoul(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--random-gpus"))
			random_gpus = strtoul(argv[i + 1], NULL, 0);
	}
	printf("phalanx: placement benchmark, seed %lu; targets: link-model step within 1.05x of "
	       "its lower bound (lb), no longer than host-name order's (st), >= 1.3x shorter on "
	       "mixed names (mx), "
	       "processor time < 50 ms at 16k GPUs and < 1 s at 128k (t)\n",
	       seed);
	printf("%-6s %-6s %7s %-22s %6s %8s %8s %8s %8s %9s %8s %8s %8s  %-4s %-4s %-4s %-4s  %s\n",
	       "fabric", "naming", "gpus", "layout", "leaves", "step/lb", "cost/lb", "cost/hn",
	       "hn-step", "hn-xleaf", "xl-max", "cpu-ms", "wall-ms", "lb", "st", "mx", "t",
	       "strategy");
	for (int m = 0; m < 2; m++) {
		if (naming && strcmp(naming, namings[m]))
			continue;
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			if (cases[i].gpus < min_gpus || cases[i].gpus > max_gpus ||
			    (only && strcmp(only, cases[i].fabric)))
				continue;
			/* Each case its own stream: filters do not change the others. */
			rng_state = (seed ? seed : 1) * 0x9e3779b97f4a7c15ull + i * 1000003ull;
			if (run_case(&cases[i], m == 1, i, &t) < 0)
				return 2;
		}
	}
	missed = (t.cases - t.bound_ok) + (t.cases - t.step_ok) +
		 (t.mixed_cases - t.mixed_ok - t.mixed_beyond) + (t.time_cases - t.time_ok);
	printf("phalanx: step/bound <= 1.05 in %u of %u cases; step no longer than host-name "
	       "order's in %u of %u; >= 1.3x shorter in %u of %u mixed-named (in %u more no plan "
	       "can be: host-name order is within 1.3x of the bound, 'none'); time in %u of %u "
	       "timed cases\n",
	       t.bound_ok, t.cases, t.step_ok, t.cases, t.mixed_ok, t.mixed_cases, t.mixed_beyond,
	       t.time_ok, t.time_cases);
	printf("phalanx: %s\n", missed ? "targets missed" : "all targets met");
	return missed ? 1 : 0;
}
