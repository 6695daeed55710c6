/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which saved shard a rank restores (phx_ckpt_source_rank): by its
 * (tp, cp, ep, pp) coordinates in Megatron's rank order, never another
 * pipeline stage's or tensor slice's, and a dp-sharded state never onto
 * another dp.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "checkpoint/node/ckpt.h"
#include "checkpoint/proto/ckpt_manifest.h"
#include "placement/layout.h"

#define SHA_A "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

/* A manifest of a job saved with spec on world ranks, every shard of kind state. */
static void saved(struct phx_manifest *m, const char *spec, uint32_t world,
		  enum phx_manifest_state state)
{
	struct phx_layout l;
	char err[256], text[256];

	assert_int_equal(phx_layout_parse(spec, &l, err, sizeof(err)), 0);
	assert_int_equal(phx_layout_resolve(&l, world, err, sizeof(err)), 0);
	phx_layout_format(&l, text, sizeof(text));
	assert_int_equal(phx_manifest_init(m, 7, 21, 20, text, world, err, sizeof(err)), 0);
	for (uint32_t r = 0; r < world; r++) {
		unsigned long c[PHX_DIM_COUNT];
		uint32_t c32[PHX_MANIFEST_DIMS];

		phx_layout_coords(&l, r, c);
		for (int d = 0; d < PHX_DIM_COUNT; d++)
			c32[d] = (uint32_t)c[d];
		assert_int_equal(phx_manifest_shard_set(m, r, "node1", 64, "sha256", SHA_A, err,
							sizeof(err)),
				 0);
		if (state)
			assert_int_equal(phx_manifest_shard_place(&m->shards[r], c32, state, err,
								  sizeof(err)),
					 0);
	}
}

static void now_layout(struct phx_layout *l, const char *spec, unsigned long world)
{
	char err[256];

	assert_int_equal(phx_layout_parse(spec, l, err, sizeof(err)), 0);
	assert_int_equal(phx_layout_resolve(l, world, err, sizeof(err)), 0);
}

/* src of rank, or -1 with err when refused. */
static long source(const struct phx_manifest *m, const struct phx_layout *now, unsigned long world,
		   unsigned long rank, char *err, size_t errlen)
{
	unsigned long src = 999999;

	if (phx_ckpt_source_rank(m, now, world, rank, &src, err, errlen) < 0)
		return -1;
	return (long)src;
}

/*
 * pp=2 on 4 nodes x 2 (dp=4) shrinks to 3 nodes (dp=3). In Megatron's order
 * (tp fastest, pp slowest) stage 0 is ranks 0-3 before and 0-2 after; new
 * rank 3 is stage 1's first rank and must read old rank 4 (stage 1, dp 0),
 * not old rank 3 (stage 0) as restoring by number did.
 */
static void test_pipeline_stage_kept_when_dp_shrinks(void **state)
{
	static const long want[6] = { 0, 1, 2, 4, 5, 6 };
	struct phx_manifest m;
	struct phx_layout now;
	char err[512];

	(void)state;
	saved(&m, "pp=2,dp=*", 8, PHX_STATE_REPLICATED);
	now_layout(&now, "pp=2,dp=*", 6);
	for (unsigned long r = 0; r < 6; r++) {
		long src = source(&m, &now, 6, r, err, sizeof(err));

		assert_int_equal(src, want[r]);
		/* The same stage: old rank src's pp coordinate is r's. */
		assert_int_equal(m.shards[src].coord[PHX_DIM_PP], r / 3);
	}
	phx_manifest_free(&m);
}

/* Growing dp takes replicas modulo the saved dp; tp slices stay their own. */
static void test_dp_grows_tensor_slices_kept(void **state)
{
	struct phx_manifest m;
	struct phx_layout now;
	char err[512];

	(void)state;
	saved(&m, "tp=2,pp=2,dp=*", 8, PHX_STATE_REPLICATED); /* dp=2 */
	now_layout(&now, "tp=2,pp=2,dp=*", 12); /* dp=3 */
	for (unsigned long r = 0; r < 12; r++) {
		unsigned long c[PHX_DIM_COUNT];
		long src = source(&m, &now, 12, r, err, sizeof(err));

		phx_layout_coords(&now, r, c);
		assert_true(src >= 0);
		assert_int_equal(m.shards[src].coord[PHX_DIM_TP], c[PHX_DIM_TP]);
		assert_int_equal(m.shards[src].coord[PHX_DIM_PP], c[PHX_DIM_PP]);
		assert_int_equal(m.shards[src].coord[PHX_DIM_DP], c[PHX_DIM_DP] % 2);
	}
	phx_manifest_free(&m);
}

/* Sharded state onto the same dp maps by coordinates (even in another order). */
static void test_sharded_same_dp_other_order(void **state)
{
	struct phx_manifest m;
	struct phx_layout now;
	char err[512];

	(void)state;
	saved(&m, "tp=2,dp=*", 8, PHX_STATE_SHARDED);
	now_layout(&now, "tp=2,dp=*,order=dp-tp-cp-ep-pp", 8);
	/* Now rank 1 is dp 1, tp 0: saved as rank 2 in tp-first order. */
	assert_int_equal(source(&m, &now, 8, 1, err, sizeof(err)), 2);
	assert_int_equal(source(&m, &now, 8, 4, err, sizeof(err)), 1);
	phx_manifest_free(&m);
}

static void test_refusals(void **state)
{
	struct phx_manifest m;
	struct phx_layout now;
	char err[512];

	(void)state;
	/* dp-sharded state after dp changed. */
	saved(&m, "pp=2,dp=*", 8, PHX_STATE_SHARDED);
	now_layout(&now, "pp=2,dp=*", 6);
	assert_int_equal(source(&m, &now, 6, 3, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "sharded across dp (saved with dp=4, this job has dp=3)"));
	/* Another pipeline depth, whatever the kind. */
	now_layout(&now, "pp=4,dp=*", 8);
	assert_int_equal(source(&m, &now, 8, 0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "saved with pp=2 and this job has pp=4"));
	phx_manifest_free(&m);
	saved(&m, "tp=2,dp=*", 8, PHX_STATE_REPLICATED);
	now_layout(&now, "dp=*", 8);
	assert_int_equal(source(&m, &now, 8, 0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "tp=2 and this job has tp=1"));
	/* Coordinates that are not the rank's place in the layout. */
	m.shards[0].coord[PHX_DIM_TP] = 1;
	now_layout(&now, "tp=2,dp=*", 8);
	assert_int_equal(source(&m, &now, 8, 0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "corrupt manifest"));
	phx_manifest_free(&m);
}

/* Saved without coordinates (version 1): by rank number, onto the same world only. */
static void test_unplaced_by_number(void **state)
{
	struct phx_manifest m;
	struct phx_layout now, none = { 0 };
	char err[512];

	(void)state;
	saved(&m, "pp=2,dp=*", 8, PHX_STATE_NONE);
	now_layout(&now, "pp=2,dp=*", 8);
	assert_int_equal(source(&m, &now, 8, 5, err, sizeof(err)), 5);
	now_layout(&now, "pp=2,dp=*", 6);
	assert_int_equal(source(&m, &now, 6, 5, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "without a recorded layout"));
	phx_manifest_free(&m);
	/* A job of several roles has no one layout: by number too. */
	saved(&m, "pp=2,dp=*", 8, PHX_STATE_REPLICATED);
	assert_int_equal(source(&m, &none, 8, 3, err, sizeof(err)), 3);
	assert_int_equal(source(&m, &none, 6, 3, err, sizeof(err)), -1);
	phx_manifest_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pipeline_stage_kept_when_dp_shrinks),
		cmocka_unit_test(test_dp_grows_tensor_slices_kept),
		cmocka_unit_test(test_sharded_same_dp_other_order),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_unplaced_by_number),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
