/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Megatron-Core mapping against Megatron-Core's own rule, written here
 * afresh from its documentation (parallel_state.RankGenerator and
 * generate_masked_orthogonal_rank_groups), not from placement/megatron.c:
 * every group of every rank, and every group placement keeps together.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "placement/layout.h"
#include "placement/megatron.h"

#define MAX_WORLD 256
#define REF_DIMS 5

static char err[1024];

/*
 * Megatron-Core's rank generator. The sizes sit in the order string's
 * order, first name fastest, and a rank's digits in that mixed radix are
 * its coordinates; a name the order leaves out goes last, and must be 1.
 * The groups of a mask of names ("dp-cp") are the sets of ranks whose
 * digits outside the mask agree. Inside a group a rank's place is its
 * digits inside the mask read in the same radix; the groups are numbered
 * by the digits outside it.
 */
struct ref_gen {
	unsigned long world;
	size_t n;
	char name[REF_DIMS][3];
	unsigned long size[REF_DIMS];
};

static bool in_list(const char *list, const char *name)
{
	size_t len = strlen(list);

	for (size_t i = 0; i + 2 <= len; i += 3) {
		if (!strncmp(list + i, name, 2))
			return true;
	}
	return false;
}

static void ref_init(struct ref_gen *g, const char *order, unsigned long tp, unsigned long ep,
		     unsigned long dp, unsigned long pp, unsigned long cp)
{
	static const char *const names[REF_DIMS] = { "tp", "pp", "dp", "ep", "cp" };
	const unsigned long sizes[REF_DIMS] = { tp, pp, dp, ep, cp };
	size_t len = strlen(order);

	/* Megatron: cp only in the dense generator, ep only in the expert one. */
	assert_true(ep == 1 || cp == 1);
	g->n = 0;
	for (size_t i = 0; i + 2 <= len; i += 3) {
		memcpy(g->name[g->n], order + i, 2);
		g->name[g->n++][2] = '\0';
	}
	for (int i = 0; i < REF_DIMS; i++) {
		if (in_list(order, names[i]))
			continue;
		assert_int_equal(sizes[i], 1);
		strcpy(g->name[g->n++], names[i]);
	}
	g->world = 1;
	for (size_t k = 0; k < g->n; k++) {
		for (int i = 0; i < REF_DIMS; i++) {
			if (!strcmp(g->name[k], names[i]))
				g->size[k] = sizes[i];
		}
		g->world *= g->size[k];
	}
}

/* groups[index * size + place] = rank; returns the size of a group. */
static unsigned long ref_groups(const struct ref_gen *g, const char *mask, unsigned long *groups)
{
	unsigned long size = 1;

	for (size_t k = 0; k < g->n; k++) {
		if (in_list(mask, g->name[k]))
			size *= g->size[k];
	}
	for (unsigned long r = 0; r < g->world; r++) {
		unsigned long q = r, place = 0, index = 0, in = 1, out = 1;

		for (size_t k = 0; k < g->n; k++) {
			unsigned long digit = q % g->size[k];

			q /= g->size[k];
			if (in_list(mask, g->name[k])) {
				place += digit * in;
				in *= g->size[k];
			} else {
				index += digit * out;
				out *= g->size[k];
			}
		}
		groups[index * size + place] = r;
	}
	return size;
}

/* Megatron-Core's arguments and what it derives. */
struct mg_want {
	unsigned long tp, cp, pp, ep, etp, dp, edp;
	bool pp_dp;
};

struct ref {
	struct ref_gen dense, expert;
};

static void ref_build(struct ref *ref, const struct mg_want *w)
{
	const char *order = w->pp_dp ? "tp-cp-ep-pp-dp" : "tp-cp-ep-dp-pp";

	ref_init(&ref->dense, order, w->tp, 1, w->dp, w->pp, w->cp);
	ref_init(&ref->expert, order, w->etp, w->ep, w->edp, w->pp, 1);
}

/*
 * What initialize_model_parallel asserts of the two grids: the same world,
 * the same pipeline groups, and with pp not last, the same dp size.
 */
static bool ref_accepts(const struct ref *ref, const struct mg_want *w)
{
	unsigned long a[MAX_WORLD], b[MAX_WORLD];

	if (ref->dense.world != ref->expert.world || ref->dense.world > MAX_WORLD)
		return false;
	if (w->pp_dp && w->pp > 1 && w->edp != w->dp)
		return false;
	ref_groups(&ref->dense, "pp", a);
	ref_groups(&ref->expert, "pp", b);
	return !memcmp(a, b, ref->dense.world * sizeof(a[0]));
}

/* Megatron's grid and mask for each of its groups. */
static const struct {
	bool expert;
	const char *mask;
} ref_of[PHX_MG_COUNT] = {
	[PHX_MG_TP] = { false, "tp" },	     [PHX_MG_CP] = { false, "cp" },
	[PHX_MG_PP] = { false, "pp" },	     [PHX_MG_DP] = { false, "dp" },
	[PHX_MG_DP_CP] = { false, "dp-cp" }, [PHX_MG_EP] = { true, "ep" },
	[PHX_MG_ETP] = { true, "tp" },	     [PHX_MG_EDP] = { true, "dp" },
};

/* Megatron's groups of one kind, and the group index of every rank. */
struct ref_kind {
	unsigned long groups[MAX_WORLD], where[MAX_WORLD], size;
};

static void ref_kind(const struct ref *ref, enum phx_mg_group g, struct ref_kind *k)
{
	const struct ref_gen *gen = ref_of[g].expert ? &ref->expert : &ref->dense;

	k->size = ref_groups(gen, ref_of[g].mask, k->groups);
	for (unsigned long i = 0; i < gen->world; i++)
		k->where[k->groups[i]] = i / k->size;
}

/* The group of rank in Megatron's order. */
static const unsigned long *ref_group_of(const struct ref_kind *k, unsigned long rank)
{
	return k->groups + k->where[rank] * k->size;
}

static struct phx_layout resolved(const char *spec, unsigned long world)
{
	struct phx_layout l;

	if (phx_layout_parse(spec, &l, err, sizeof(err)) < 0 ||
	    phx_layout_resolve(&l, world, err, sizeof(err)) < 0)
		fail_msg("'%s' on %lu ranks: %s", spec, world, err);
	return l;
}

static void map_ok(const char *spec, unsigned long world, struct phx_megatron *mg)
{
	struct phx_layout l = resolved(spec, world);

	err[0] = '\0';
	if (phx_megatron_map(&l, mg, err, sizeof(err)) < 0)
		fail_msg("'%s' on %lu ranks refused: %s", spec, world, err);
}

static void check_args(const struct phx_megatron *mg, const struct mg_want *w)
{
	assert_int_equal(mg->tp, w->tp);
	assert_int_equal(mg->cp, w->cp);
	assert_int_equal(mg->pp, w->pp);
	assert_int_equal(mg->ep, w->ep);
	assert_int_equal(mg->etp, w->etp);
	assert_int_equal(mg->dp, w->dp);
	assert_int_equal(mg->edp, w->edp);
	assert_int_equal(mg->tp_pp_dp, w->pp_dp);
}

/* Every group phx_megatron_group gives is Megatron's, member by member. */
static void check_every_group(const struct phx_megatron *mg, const struct ref *ref)
{
	unsigned long got[MAX_WORLD];
	struct ref_kind k;

	for (int g = 0; g < PHX_MG_COUNT; g++) {
		ref_kind(ref, (enum phx_mg_group)g, &k);
		for (unsigned long r = 0; r < mg->layout.world; r++) {
			unsigned long n =
				phx_megatron_group(mg, (enum phx_mg_group)g, r, got, MAX_WORLD);

			if (n != k.size || memcmp(got, ref_group_of(&k, r), n * sizeof(got[0])))
				fail_msg("%s group of rank %lu: %lu ranks from %lu, Megatron's "
					 "has %lu from %lu",
					 phx_mg_group_name((enum phx_mg_group)g), r, n, got[0],
					 k.size, ref_group_of(&k, r)[0]);
		}
	}
}

/*
 * The groups placement keeps together, enumerated as placement_cost.c
 * prices them: for each dimension, the ranks that differ only there, from
 * the layout's stride; for pp, neighbouring stages one stride apart. Each
 * must be a Megatron group, in Megatron's order (so pp neighbours are
 * neighbouring stages there too).
 */
static void check_placement_groups(const struct phx_megatron *mg, const struct ref *ref)
{
	const struct phx_layout *l = &mg->layout;
	const enum phx_mg_group as[PHX_DIM_COUNT] = {
		[PHX_DIM_TP] = PHX_MG_TP,
		[PHX_DIM_CP] = PHX_MG_CP,
		[PHX_DIM_EP] = PHX_MG_EP,
		/* The expert-data-parallel group when experts are spread. */
		[PHX_DIM_DP] = l->size[PHX_DIM_EP] > 1 ? PHX_MG_EDP : PHX_MG_DP,
		[PHX_DIM_PP] = PHX_MG_PP,
	};
	struct ref_kind k;

	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		unsigned long stride = phx_layout_stride(l, (enum phx_dim)d), size = l->size[d];

		if (size < 2)
			continue;
		ref_kind(ref, as[d], &k);
		assert_int_equal(k.size, size);
		for (unsigned long hi = 0; hi < l->world; hi += stride * size) {
			for (unsigned long lo = 0; lo < stride; lo++) {
				const unsigned long *m = ref_group_of(&k, hi + lo);

				for (unsigned long i = 0; i < size; i++) {
					if (m[i] != hi + lo + i * stride)
						fail_msg(
							"%s group from rank %lu: member %lu is %lu "
							"for placement, %lu for Megatron",
							phx_dim_name((enum phx_dim)d), hi + lo, i,
							hi + lo + i * stride, m[i]);
				}
			}
		}
	}
}

static void check_case(const char *spec, unsigned long world, const struct mg_want *w)
{
	struct phx_megatron mg;
	struct ref ref;

	map_ok(spec, world, &mg);
	check_args(&mg, w);
	ref_build(&ref, w);
	assert_int_equal(ref.dense.world, world);
	if (!ref_accepts(&ref, w))
		fail_msg("'%s': Megatron-Core would refuse the arguments it maps to", spec);
	check_every_group(&mg, &ref);
	check_placement_groups(&mg, &ref);
}

static void test_dense(void **state)
{
	const struct mg_want w64 = {
		.tp = 8, .cp = 1, .pp = 4, .ep = 1, .etp = 8, .dp = 2, .edp = 2
	};
	const struct mg_want w128 = {
		.tp = 8, .cp = 1, .pp = 4, .ep = 1, .etp = 8, .dp = 4, .edp = 4
	};

	check_case("tp=8,pp=4", 64, &w64);
	check_case("tp=8,pp=4", 128, &w128);
	check_case("tp=8,cp=1,ep=1,pp=4,dp=*,order=tp-cp-ep-dp-pp", 128, &w128);
	/* Where dimensions of size 1 sit does not matter. */
	check_case("tp=8,pp=4,order=ep-tp-dp-cp-pp", 128, &w128);
}

static void test_dense_cp(void **state)
{
	/* The expert grid has no cp: with ep = 1 it is expert data parallel. */
	const struct mg_want w = {
		.tp = 4, .cp = 2, .pp = 2, .ep = 1, .etp = 4, .dp = 4, .edp = 8
	};

	check_case("tp=4,cp=2,pp=2", 64, &w);
}

static void test_moe(void **state)
{
	/* Experts are carved out of Megatron's dp = ep x dp. */
	const struct mg_want w = {
		.tp = 2, .cp = 1, .pp = 4, .ep = 8, .etp = 2, .dp = 16, .edp = 2
	};
	const struct mg_want w1 = {
		.tp = 2, .cp = 1, .pp = 4, .ep = 8, .etp = 2, .dp = 8, .edp = 1
	};

	check_case("tp=2,ep=8,pp=4", 128, &w);
	/* pp before dp is the same order when dp is 1. */
	check_case("tp=2,ep=8,pp=4,dp=*,order=tp-cp-ep-pp-dp", 64, &w1);
}

static void test_moe_cp(void **state)
{
	/* cp below ep: the experts' tensors span tp x cp. */
	const struct mg_want w = {
		.tp = 2, .cp = 2, .pp = 2, .ep = 4, .etp = 4, .dp = 8, .edp = 2
	};
	const struct mg_want w2 = {
		.tp = 1, .cp = 4, .pp = 2, .ep = 8, .etp = 4, .dp = 16, .edp = 2
	};

	check_case("tp=2,cp=2,ep=4,pp=2", 64, &w);
	check_case("tp=1,cp=4,ep=8,pp=2", 128, &w2);
}

static void test_pp_before_dp(void **state)
{
	const struct mg_want w = {
		.tp = 8, .cp = 1, .pp = 4, .ep = 1, .etp = 8, .dp = 4, .edp = 4, .pp_dp = true
	};
	const struct mg_want w2 = {
		.tp = 8, .cp = 1, .pp = 4, .ep = 1, .etp = 8, .dp = 2, .edp = 2, .pp_dp = true
	};

	check_case("tp=8,pp=4,order=tp-cp-ep-pp-dp", 128, &w);
	check_case("tp=8,pp=4,order=tp-cp-ep-pp-dp", 64, &w2);
	check_case("tp=8,pp=4,order=tp-pp-dp", 128, &w);
}

/*
 * phalanx(7)'s rule, checked over every order of every layout with sizes
 * 1 and 2 (3 for cp and dp, so no two neighbours have the same): the dimensions larger than 1, in
 * the layout's order, must read as Megatron-LM's default order or its pp-before-dp one, and the
 * latter only where pp and dp are 1 or ep and cp are. What maps, maps exactly.
 */
static bool reads_as(const struct phx_layout *l, const char *order)
{
	char have[16] = "", want[16] = "";

	for (int i = 0; i < PHX_DIM_COUNT; i++) {
		if (l->size[l->order[i]] > 1)
			strcat(have, phx_dim_name(l->order[i]));
	}
	for (size_t i = 0; i + 2 <= strlen(order); i += 3) {
		int d = phx_dim_parse(order + i, 2);

		if (l->size[d] > 1)
			strncat(want, order + i, 2);
	}
	return !strcmp(have, want);
}

static void check_order(const unsigned long size[PHX_DIM_COUNT], const int perm[PHX_DIM_COUNT])
{
	const unsigned long *s = size;
	const char *n[PHX_DIM_COUNT];
	struct phx_megatron mg;
	struct phx_layout l;
	bool dp_pp, pp_dp;
	char spec[96];
	int rc;

	for (int i = 0; i < PHX_DIM_COUNT; i++)
		n[i] = phx_dim_name((enum phx_dim)perm[i]);
	snprintf(spec, sizeof(spec), "tp=%lu,cp=%lu,ep=%lu,dp=%lu,pp=%lu,order=%s-%s-%s-%s-%s",
		 s[PHX_DIM_TP], s[PHX_DIM_CP], s[PHX_DIM_EP], s[PHX_DIM_DP], s[PHX_DIM_PP], n[0],
		 n[1], n[2], n[3], n[4]);
	l = resolved(spec, s[0] * s[1] * s[2] * s[3] * s[4]);
	dp_pp = reads_as(&l, "tp-cp-ep-dp-pp");
	pp_dp = reads_as(&l, "tp-cp-ep-pp-dp") && (s[PHX_DIM_PP] == 1 || s[PHX_DIM_DP] == 1 ||
						   (s[PHX_DIM_EP] == 1 && s[PHX_DIM_CP] == 1));
	rc = phx_megatron_map(&l, &mg, err, sizeof(err));
	if ((rc == 0) != (dp_pp || pp_dp))
		fail_msg("'%s': %s", spec, rc ? err : "mapped, but phalanx(7) says it is refused");
	if (rc == 0) {
		const struct mg_want w = {
			.tp = s[PHX_DIM_TP],
			.cp = s[PHX_DIM_CP],
			.pp = s[PHX_DIM_PP],
			.ep = s[PHX_DIM_EP],
			.etp = s[PHX_DIM_EP] > 1 ? s[PHX_DIM_TP] * s[PHX_DIM_CP] : s[PHX_DIM_TP],
			.dp = s[PHX_DIM_EP] * s[PHX_DIM_DP],
			.edp = s[PHX_DIM_EP] > 1 ? s[PHX_DIM_DP] : s[PHX_DIM_CP] * s[PHX_DIM_DP],
			.pp_dp = !dp_pp,
		};
		check_case(spec, l.world, &w);
	}
}

/* Heap's algorithm over the orders. */
static void every_order(const unsigned long size[PHX_DIM_COUNT], int perm[PHX_DIM_COUNT], int k)
{
	if (k == 1) {
		check_order(size, perm);
		return;
	}
	for (int i = 0; i < k; i++) {
		int j = k % 2 ? 0 : i, t;

		every_order(size, perm, k - 1);
		t = perm[j];
		perm[j] = perm[k - 1];
		perm[k - 1] = t;
	}
}

static void test_every_order(void **state)
{
	for (unsigned bits = 0; bits < 1u << PHX_DIM_COUNT; bits++) {
		unsigned long size[PHX_DIM_COUNT];
		int perm[PHX_DIM_COUNT] = { 0, 1, 2, 3, 4 };

		for (int d = 0; d < PHX_DIM_COUNT; d++)
			size[d] = bits & 1u << d ? 2 + (d == PHX_DIM_CP || d == PHX_DIM_DP) : 1;
		every_order(size, perm, PHX_DIM_COUNT);
	}
}

/* The worked examples of phalanx(7), MEGATRON-CORE. */
static void check_rank0(const struct phx_megatron *mg, enum phx_mg_group g,
			const unsigned long *want, unsigned long n)
{
	unsigned long got[MAX_WORLD];

	assert_int_equal(phx_megatron_group(mg, g, 0, got, MAX_WORLD), n);
	assert_memory_equal(got, want, n * sizeof(got[0]));
}

static void test_manual_examples(void **state)
{
	const unsigned long tp8[] = { 0, 1, 2, 3, 4, 5, 6, 7 }, pp[] = { 0, 32, 64, 96 };
	const unsigned long dp4[] = { 0, 8, 16, 24 }, tp2[] = { 0, 1 }, edp[] = { 0, 16 };
	const unsigned long ep8[] = { 0, 2, 4, 6, 8, 10, 12, 14 };
	const unsigned long dp16[] = { 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30 };
	struct phx_megatron mg;
	char args[256];

	map_ok("tp=8,pp=4", 128, &mg);
	phx_megatron_args(&mg, args, sizeof(args));
	assert_string_equal(args,
			    "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4");
	check_rank0(&mg, PHX_MG_TP, tp8, 8);
	check_rank0(&mg, PHX_MG_PP, pp, 4);
	check_rank0(&mg, PHX_MG_DP, dp4, 4);
	check_rank0(&mg, PHX_MG_EP, tp8, 1);
	check_rank0(&mg, PHX_MG_EDP, dp4, 4);

	map_ok("tp=2,ep=8,pp=4", 128, &mg);
	phx_megatron_args(&mg, args, sizeof(args));
	assert_string_equal(args, "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 "
				  "--expert-model-parallel-size 8");
	check_rank0(&mg, PHX_MG_TP, tp2, 2);
	check_rank0(&mg, PHX_MG_PP, pp, 4);
	check_rank0(&mg, PHX_MG_DP, dp16, 16);
	check_rank0(&mg, PHX_MG_EP, ep8, 8);
	check_rank0(&mg, PHX_MG_ETP, tp2, 2);
	check_rank0(&mg, PHX_MG_EDP, edp, 2);

	map_ok("tp=2,cp=2,ep=4,pp=2", 64, &mg);
	phx_megatron_args(&mg, args, sizeof(args));
	assert_string_equal(args, "--tensor-model-parallel-size 2 --context-parallel-size 2 "
				  "--pipeline-model-parallel-size 2 --expert-model-parallel-size 4 "
				  "--expert-tensor-parallel-size 4");
	map_ok("tp=8,pp=4,order=tp-cp-ep-pp-dp", 128, &mg);
	phx_megatron_args(&mg, args, sizeof(args));
	assert_string_equal(args, "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 "
				  "--use-tp-pp-dp-mapping");
}

/* Refused, naming the nearest layout, which maps. */
static void refused(const char *spec, unsigned long world, const char *why, const char *near)
{
	struct phx_layout l = resolved(spec, world), back;
	struct phx_megatron mg;
	const char *at;

	err[0] = '\0';
	assert_int_equal(phx_megatron_map(&l, &mg, err, sizeof(err)), -1);
	if (!strstr(err, why) || !strstr(err, near))
		fail_msg("'%s': message '%s' lacks '%s' or '%s'", spec, err, why, near);
	at = strstr(err, "express is ");
	assert_non_null(at);
	back = resolved(at + strlen("express is "), world);
	if (phx_megatron_map(&back, &mg, err, sizeof(err)) < 0)
		fail_msg("'%s': the nearest layout is refused too: %s", spec, err);
}

static void test_refusals(void **state)
{
	const struct mg_want ep_pp = {
		.tp = 2, .cp = 1, .pp = 4, .ep = 8, .etp = 2, .dp = 16, .edp = 2, .pp_dp = true
	};
	const struct mg_want cp_pp = {
		.tp = 2, .cp = 2, .pp = 2, .ep = 1, .etp = 2, .dp = 4, .edp = 8, .pp_dp = true
	};
	struct phx_layout l;
	struct phx_megatron mg;
	struct ref ref;

	/* tp must vary fastest; pp before dp stays where Megatron has that order. */
	refused("tp=8,pp=4,order=pp-tp-cp-ep-dp", 128,
		"order tp-cp-ep-pp-dp, tp neighbours differ by 1 in rank, here by 4",
		"tp=8,cp=1,ep=1,dp=4,pp=4,order=tp-cp-ep-pp-dp");
	refused("tp=8,pp=4,order=pp-dp-tp", 128, "tp neighbours differ by 1 in rank, here by 16",
		"tp=8,cp=1,ep=1,dp=4,pp=4,order=tp-cp-ep-pp-dp");
	refused("tp=8,pp=4,dp=*,order=dp-tp-cp-ep-pp", 128,
		"order tp-cp-ep-dp-pp, tp neighbours differ by 1 in rank, here by 4",
		"tp=8,cp=1,ep=1,dp=4,pp=4,order=tp-cp-ep-dp-pp");
	/* Megatron's dp is ep x dp: ep right below dp, and cp below ep. */
	refused("tp=2,ep=4,order=tp-dp-ep", 32, "ep neighbours differ by 2 in rank, here by 8",
		"tp=2,cp=1,ep=4,dp=4,pp=1,order=tp-cp-ep-dp-pp");
	refused("tp=2,cp=2,ep=4,order=tp-ep-cp-dp", 64,
		"cp neighbours differ by 2 in rank, here by 8",
		"tp=2,cp=2,ep=4,dp=4,pp=1,order=tp-cp-ep-dp-pp");
	/* Experts with pp before dp: Megatron's two grids would part. */
	refused("tp=2,ep=8,pp=4,order=tp-cp-ep-pp-dp", 128,
		"order tp-cp-ep-pp-dp, ep neighbours differ by 8 in rank, here by 2",
		"tp=2,cp=1,ep=8,dp=2,pp=4,order=tp-cp-ep-dp-pp");
	refused("tp=2,cp=2,pp=2,order=tp-cp-ep-pp-dp", 32,
		"expert groups Megatron-Core forms in order tp-cp-ep-pp-dp, cp neighbours differ "
		"by 4",
		"tp=2,cp=2,ep=1,dp=4,pp=2,order=tp-cp-ep-dp-pp");
	/* ... which Megatron-Core itself refuses: dp sizes or pipeline groups differ. */
	ref_build(&ref, &ep_pp);
	assert_false(ref_accepts(&ref, &ep_pp));
	ref_build(&ref, &cp_pp);
	assert_false(ref_accepts(&ref, &cp_pp));

	/* A '*' left. */
	assert_int_equal(phx_layout_parse("tp=8,pp=4", &l, err, sizeof(err)), 0);
	assert_int_equal(phx_megatron_map(&l, &mg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "resolve"));
}

static void test_names(void **state)
{
	struct phx_megatron mg;
	unsigned long r;

	assert_string_equal(phx_mg_group_name(PHX_MG_DP_CP), "dp-cp");
	assert_string_equal(phx_mg_group_name(PHX_MG_EDP), "edp");
	assert_string_equal(phx_mg_group_name(PHX_MG_COUNT), "?");
	map_ok("tp=2,pp=2", 8, &mg);
	assert_int_equal(phx_megatron_group(&mg, PHX_MG_COUNT, 0, &r, 1), 0);
	assert_int_equal(phx_megatron_group(&mg, PHX_MG_TP, 8, &r, 1), 0);
	/* n bounds what is written, not the size. */
	assert_int_equal(phx_megatron_group(&mg, PHX_MG_TP, 3, &r, 1), 2);
	assert_int_equal(r, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dense),	     cmocka_unit_test(test_dense_cp),
		cmocka_unit_test(test_moe),	     cmocka_unit_test(test_moe_cp),
		cmocka_unit_test(test_pp_before_dp), cmocka_unit_test(test_manual_examples),
		cmocka_unit_test(test_refusals),     cmocka_unit_test(test_every_order),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
