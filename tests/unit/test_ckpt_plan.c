/* SPDX-License-Identifier: Apache-2.0 */
/* Checkpoint staging decisions: tiers per save, round state, commit, collection, manifests. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "checkpoint/proto/ckpt_manifest.h"
#include "checkpoint/proto/digest.h"
#include "checkpoint/node/ckpt.h"

static void test_tiers_due(void **state)
{
	const int every[PHX_TIER_COUNT] = { 1, 1, 10 };
	const int no_shared[PHX_TIER_COUNT] = { 1, 2, 0 };

	(void)state;
	assert_int_equal(phx_ckpt_tiers_due(1, every, false), 0x3);
	assert_int_equal(phx_ckpt_tiers_due(9, every, false), 0x3);
	assert_int_equal(phx_ckpt_tiers_due(10, every, false), 0x7);
	assert_int_equal(phx_ckpt_tiers_due(20, every, false), 0x7);
	/* A requested save (preemption) goes everywhere configured. */
	assert_int_equal(phx_ckpt_tiers_due(3, every, true), 0x7);
	assert_int_equal(phx_ckpt_tiers_due(1, no_shared, false), 0x1);
	assert_int_equal(phx_ckpt_tiers_due(2, no_shared, false), 0x3);
	assert_int_equal(phx_ckpt_tiers_due(3, no_shared, true), 0x3);
}

static void test_state_round_trip(void **state)
{
	struct phx_ckpt_state s = { .published = { -1, -1, -1 } }, back;
	char buf[256];

	(void)state;
	phx_ckpt_state_add(&s, PHX_TIER_MEMORY, 10);
	phx_ckpt_state_add(&s, PHX_TIER_MEMORY, 30);
	phx_ckpt_state_add(&s, PHX_TIER_MEMORY, 20);
	phx_ckpt_state_add(&s, PHX_TIER_MEMORY, 20);
	phx_ckpt_state_add(&s, PHX_TIER_LOCAL, 5);
	phx_ckpt_state_format(&s, buf, sizeof(buf));
	assert_string_equal(buf, "ck1 m=30,20,10 l=5 s=");
	assert_int_equal(phx_ckpt_state_parse(buf, &back), 0);
	assert_memory_equal(&s, &back, sizeof(s));
	/* Only the newest PHX_CKPT_STATE_MAX stay. */
	for (long step = 40; step <= 70; step += 10)
		phx_ckpt_state_add(&s, PHX_TIER_MEMORY, step);
	phx_ckpt_state_add(&s, PHX_TIER_MEMORY, 1);
	phx_ckpt_state_format(&s, buf, sizeof(buf));
	assert_string_equal(buf, "ck1 m=70,60,50,40 l=5 s=");
	/* What the node published, once it has. */
	s.published[PHX_TIER_LOCAL] = 0;
	phx_ckpt_state_format(&s, buf, sizeof(buf));
	assert_string_equal(buf, "ck1 m=70,60,50,40 l=5 s= p=0,-1");
	assert_int_equal(phx_ckpt_state_parse(buf, &back), 0);
	assert_memory_equal(&s, &back, sizeof(s));
	s.published[PHX_TIER_LOCAL] = 40;
	s.published[PHX_TIER_SHARED] = 20;
	phx_ckpt_state_format(&s, buf, sizeof(buf));
	assert_string_equal(buf, "ck1 m=70,60,50,40 l=5 s= p=40,20");
	assert_int_equal(phx_ckpt_state_parse(buf, &back), 0);
	assert_memory_equal(&s, &back, sizeof(s));
}

static void test_state_refused(void **state)
{
	static const char *const bad[] = {
		"",
		"ck1",
		"ck2 m= l= s=",
		"ck1 m= l=",
		"ck1 m= l= s= ",
		"ck1 m=1,1 l= s=",
		"ck1 m=1,2 l= s=",
		"ck1 m=-1 l= s=",
		"ck1 m=1, l= s=",
		"ck1 m=5,4,3,2,1 l= s=",
		"ck1 l= m= s=",
		"ck1 m=99999999999999999999999 l= s=",
		"ck1 m=a l= s=",
		/* Both -1 is written without p=: one text per state. */
		"ck1 m= l= s= p=-1,-1",
		"ck1 m= l= s= p=",
		"ck1 m= l= s= p=5",
		"ck1 m= l= s= p=5,",
		"ck1 m= l= s= p=05,1",
		"ck1 m= l= s= p=5,1,2",
		"ck1 m= l= s= p=-2,1",
		"ck1 m= l= s= p=5,1 ",
		"ck1 m= l= s= q=5,1",
		"ck1 m= l= s= p=99999999999999999999999,1",
	};
	struct phx_ckpt_state s;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (phx_ckpt_state_parse(bad[i], &s) == 0)
			fail_msg("accepted '%s'", bad[i]);
	}
	assert_int_equal(phx_ckpt_state_parse("ck1 m= l= s=", &s), 0);
}

static void test_common_newest(void **state)
{
	struct phx_ckpt_state s[3];

	(void)state;
	assert_int_equal(phx_ckpt_state_parse("ck1 m=30,25 l=30,20 s=20", &s[0]), 0);
	assert_int_equal(phx_ckpt_state_parse("ck1 m=30,25 l=20,10 s=20", &s[1]), 0);
	assert_int_equal(phx_ckpt_state_parse("ck1 m=25 l=30,20 s=", &s[2]), 0);
	/* Memory: 30 is not on the third node; 25 is everywhere. */
	assert_int_equal(phx_ckpt_common_newest(s, 3, PHX_TIER_MEMORY), 25);
	/* Local: the newest every node holds, not the newest of the slowest. */
	assert_int_equal(phx_ckpt_common_newest(s, 3, PHX_TIER_LOCAL), 20);
	/* Shared: one node has nothing, so nothing commits (no partial generation). */
	assert_int_equal(phx_ckpt_common_newest(s, 3, PHX_TIER_SHARED), -1);
	assert_int_equal(phx_ckpt_common_newest(s, 2, PHX_TIER_SHARED), 20);
	assert_int_equal(phx_ckpt_common_newest(s, 0, PHX_TIER_SHARED), -1);
}

/*
 * The bound of collection: a fast node that published 40 and 50 keeps 30
 * while the slowest has published only that, so all can restore it.
 */
static void test_published_everywhere(void **state)
{
	const long steps[] = { 10, 20, 30, 40, 50 };
	const bool all[] = { true, true, true, true, true };
	struct phx_ckpt_state s[3];
	long bound, drop[5];
	size_t n;

	(void)state;
	assert_int_equal(phx_ckpt_state_parse("ck1 m= l=50 s= p=50,-1", &s[0]), 0);
	assert_int_equal(phx_ckpt_state_parse("ck1 m= l=50 s= p=30,-1", &s[1]), 0);
	assert_int_equal(phx_ckpt_state_parse("ck1 m= l=50 s= p=40,-1", &s[2]), 0);
	bound = phx_ckpt_published_everywhere(s, 3, PHX_TIER_LOCAL);
	assert_int_equal(bound, 30);
	/* The fast node, keep 2, collecting after it published 50. */
	n = phx_ckpt_gc_pick(steps, all, 5, bound < 50 ? bound : 50, 2, drop);
	assert_int_equal(n, 1);
	assert_int_equal(drop[0], 10);
	/* One node has published nothing in a tier: nothing is collected there. */
	assert_int_equal(phx_ckpt_published_everywhere(s, 3, PHX_TIER_SHARED), -1);
	assert_int_equal(phx_ckpt_gc_pick(steps, all, 5, -1, 2, drop), 0);
	assert_int_equal(phx_ckpt_published_everywhere(s, 0, PHX_TIER_LOCAL), -1);
}

static void test_gc_pick(void **state)
{
	const long steps[] = { 5, 40, 10, 30, 20, 50 };
	const bool all[] = { true, true, true, true, true, false };
	long drop[6];
	size_t n;

	(void)state;
	/* Committed 40, keep 2: 40 and 30 stay, 50 is in flight and stays too. */
	n = phx_ckpt_gc_pick(steps, all, 6, 40, 2, drop);
	assert_int_equal(n, 3);
	assert_int_equal(drop[0], 20);
	assert_int_equal(drop[1], 10);
	assert_int_equal(drop[2], 5);
	n = phx_ckpt_gc_pick(steps, all, 6, 50, 6, drop);
	assert_int_equal(n, 0);
	n = phx_ckpt_gc_pick(steps, all, 6, 4, 1, drop);
	assert_int_equal(n, 0);
}

/*
 * Saves 10 and 15 aborted after 5 was published (an agent killed mid-save):
 * the aborted directories never count toward keep, so 5, the only
 * generation a restart can use, stays.
 */
static void test_gc_pick_aborted(void **state)
{
	const long steps[] = { 5, 10, 15 };
	const bool published[] = { true, false, false };
	const long later[] = { 5, 10, 15, 20, 25 };
	const bool later_published[] = { true, false, false, true, true };
	long drop[5];
	size_t n;

	(void)state;
	n = phx_ckpt_gc_pick(steps, published, 3, 15, 2, drop);
	assert_int_equal(n, 0);
	n = phx_ckpt_gc_pick(steps, published, 3, 15, 1, drop);
	assert_int_equal(n, 0);
	/* Two published after them: 5 goes by keep, the aborted ones as garbage. */
	n = phx_ckpt_gc_pick(later, later_published, 5, 25, 2, drop);
	assert_int_equal(n, 3);
	assert_int_equal(drop[0], 15);
	assert_int_equal(drop[1], 10);
	assert_int_equal(drop[2], 5);
}

static void test_gen_names(void **state)
{
	char buf[32];

	(void)state;
	phx_ckpt_gen_name(42, buf, sizeof(buf));
	assert_string_equal(buf, "gen-000000000042");
	assert_int_equal(phx_ckpt_gen_parse(buf), 42);
	assert_int_equal(phx_ckpt_gen_parse("gen-00000000004"), -1);
	assert_int_equal(phx_ckpt_gen_parse("gen-0000000000x2"), -1);
	assert_int_equal(phx_ckpt_gen_parse("gen--00000000042"), -1);
	assert_int_equal(phx_ckpt_gen_parse("latest-node1"), -1);
	assert_int_equal(phx_ckpt_gen_parse("gen-000000000042.tmp"), -1);
}

/* A complete manifest of 4 ranks in the common format, its rank 3 digest with algorithm alg. */
static char *manifest(const char *alg, const char *hex3)
{
	static const char *const hex = "00112233445566778899aabbccddeeff";
	struct phx_manifest m;
	char err[256], *text;

	assert_int_equal(phx_manifest_init(&m, 42, 31, 30, "dp=4", 4, err, sizeof(err)), 0);
	for (uint32_t r = 0; r < 4; r++) {
		assert_int_equal(phx_manifest_shard_set(&m, r, "n1", 100 + r,
							r == 3 ? alg : "xxh3-128",
							r == 3 ? hex3 : hex, err, sizeof(err)),
				 0);
		assert_int_equal(phx_manifest_shard_add_location(&m.shards[r], "local", "/x", err,
								 sizeof(err)),
				 0);
	}
	text = phx_manifest_to_json(&m, err, sizeof(err));
	assert_non_null(text);
	phx_manifest_free(&m);
	return text;
}

static void test_manifest(void **state)
{
	struct phx_ckpt_entry e;
	char err[256], *text;

	(void)state;
	text = manifest("xxh3-128", "ffeeddccbbaa99887766554433221100");
	assert_int_equal(phx_ckpt_manifest_find(text, 3, &e, err, sizeof(err)), 0);
	assert_int_equal(e.step, 30);
	assert_int_equal(e.bytes, 103);
	assert_int_equal(e.algo, PHX_DIGEST_XXH3);
	assert_int_equal(e.digest[0], 0xff);
	assert_int_equal(e.digest[15], 0x00);
	/* A good manifest without the rank. */
	assert_int_equal(phx_ckpt_manifest_find(text, 4, &e, err, sizeof(err)), 1);
	/* Not a manifest: refused with a reason. */
	text[10] = '!';
	assert_int_equal(phx_ckpt_manifest_find(text, 3, &e, err, sizeof(err)), -1);
	assert_true(err[0] != '\0');
	free(text);
	/* A digest algorithm checkpoint/proto/digest.h does not compute: the manifest is refused
	 * whole. */
	text = manifest("sha256",
			"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
	memcpy(strstr(text, "\"sha256\""), "\"crc32c\"", 8);
	assert_int_equal(phx_ckpt_manifest_find(text, 3, &e, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "\"crc32c\" is unknown"));
	assert_int_equal(phx_ckpt_manifest_find(text, 2, &e, err, sizeof(err)), -1);
	free(text);
}

static void test_digests(void **state)
{
	struct phx_ckpt_shard s[2] = { { .rank = 6, .bytes = 9536 }, { .rank = 7, .bytes = 0 } },
			      back[4];
	char buf[256];
	size_t n;
	long step;

	(void)state;
	s[0].digest[0] = 0xab;
	s[1].digest[15] = 0x01;
	s[1].sharded = true;
	phx_ckpt_digests_format(30, s, 2, PHX_DIGEST_XXH3, buf, sizeof(buf));
	assert_string_equal(buf, "d 30 6:9536:ab000000000000000000000000000000:r,"
				 "7:0:00000000000000000000000000000001:s");
	assert_int_equal(phx_ckpt_digests_parse(buf, PHX_DIGEST_XXH3, &step, back, 4, &n), 0);
	assert_int_equal(step, 30);
	assert_int_equal(n, 2);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(back[i].rank, s[i].rank);
		assert_int_equal(back[i].bytes, s[i].bytes);
		assert_int_equal(back[i].sharded, s[i].sharded);
		assert_memory_equal(back[i].digest, s[i].digest, sizeof(s[i].digest));
	}
	/* Too many for the room, the wrong digest length, trailing junk, nothing. */
	assert_int_equal(phx_ckpt_digests_parse(buf, PHX_DIGEST_XXH3, &step, back, 1, &n), -1);
	assert_int_equal(phx_ckpt_digests_parse(buf, PHX_DIGEST_SHA256, &step, back, 4, &n), -1);
	strcat(buf, "x");
	assert_int_equal(phx_ckpt_digests_parse(buf, PHX_DIGEST_XXH3, &step, back, 4, &n), -1);
	assert_int_equal(phx_ckpt_digests_parse("d 30", PHX_DIGEST_XXH3, &step, back, 4, &n), -1);
	assert_int_equal(phx_ckpt_digests_parse("d 30 ", PHX_DIGEST_XXH3, &step, back, 4, &n), -1);
	/* A shard without its kind, or of another kind. */
	assert_int_equal(phx_ckpt_digests_parse("d 30 7:0:00000000000000000000000000000001",
						PHX_DIGEST_XXH3, &step, back, 4, &n),
			 -1);
	assert_int_equal(phx_ckpt_digests_parse("d 30 7:0:00000000000000000000000000000001:x",
						PHX_DIGEST_XXH3, &step, back, 4, &n),
			 -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tiers_due),
		cmocka_unit_test(test_state_round_trip),
		cmocka_unit_test(test_state_refused),
		cmocka_unit_test(test_common_newest),
		cmocka_unit_test(test_published_everywhere),
		cmocka_unit_test(test_gc_pick),
		cmocka_unit_test(test_gc_pick_aborted),
		cmocka_unit_test(test_gen_names),
		cmocka_unit_test(test_manifest),
		cmocka_unit_test(test_digests),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
