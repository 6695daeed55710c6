/* SPDX-License-Identifier: Apache-2.0 */
/* Checkpoint staging decisions: tiers per save, round state, commit, collection, manifests. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/digest.h"
#include "launcher/agent_ckpt.h"

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
	struct phx_ckpt_state s = { 0 }, back;
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

static void test_gc_pick(void **state)
{
	const long steps[] = { 5, 40, 10, 30, 20, 50 };
	long drop[6];
	size_t n;

	(void)state;
	/* Committed 40, keep 2: 40 and 30 stay, 50 is in flight and stays too. */
	n = phx_ckpt_gc_pick(steps, 6, 40, 2, drop);
	assert_int_equal(n, 3);
	assert_int_equal(drop[0], 20);
	assert_int_equal(drop[1], 10);
	assert_int_equal(drop[2], 5);
	n = phx_ckpt_gc_pick(steps, 6, 50, 6, drop);
	assert_int_equal(n, 0);
	n = phx_ckpt_gc_pick(steps, 6, 4, 1, drop);
	assert_int_equal(n, 0);
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

#define MANIFEST(digest, rank1_file)                                                               \
	"{\"format\":\"phalanx-checkpoint\",\"version\":1,\"job\":\"42\",\"generation\":30,"       \
	"\"step\":30,\"world\":4,\"digest\":\"" digest "\",\"shards\":["                           \
	"{\"rank\":2,\"node\":\"n1\",\"bytes\":100,\"digest\":"                                    \
	"\"00112233445566778899aabbccddeeff\","                                                    \
	"\"file\":\"rank-2.shard\"},"                                                              \
	"{\"rank\":3,\"node\":\"n1\",\"bytes\":7,\"digest\":\"ffeeddccbbaa99887766554433221100\"," \
	"\"file\":\"" rank1_file "\"}]}"

static void test_manifest(void **state)
{
	struct phx_ckpt_entry e;
	char err[256];

	(void)state;
	assert_int_equal(phx_ckpt_manifest_find(MANIFEST("xxh3-128", "rank-3.shard"), 3, &e, err,
						sizeof(err)),
			 0);
	assert_int_equal(e.step, 30);
	assert_int_equal(e.bytes, 7);
	assert_int_equal(e.algo, PHX_DIGEST_XXH3);
	assert_int_equal(e.digest[0], 0xff);
	assert_int_equal(e.digest[15], 0x00);
	/* A good manifest without the rank. */
	assert_int_equal(phx_ckpt_manifest_find(MANIFEST("xxh3-128", "rank-3.shard"), 1, &e, err,
						sizeof(err)),
			 1);
	/* A file name that is not the rank's own is refused, whatever rank is asked. */
	assert_int_equal(phx_ckpt_manifest_find(MANIFEST("xxh3-128", "../rank-3.shard"), 2, &e, err,
						sizeof(err)),
			 -1);
	assert_non_null(strstr(err, "is not 'rank-3.shard'"));
	/* A 16-byte digest where SHA-256 needs 32. */
	assert_int_equal(
		phx_ckpt_manifest_find(MANIFEST("sha256", "rank-3.shard"), 3, &e, err, sizeof(err)),
		-1);
	assert_int_equal(
		phx_ckpt_manifest_find(MANIFEST("md5", "rank-3.shard"), 3, &e, err, sizeof(err)),
		-1);
	assert_int_equal(phx_ckpt_manifest_find("[1]", 3, &e, err, sizeof(err)), -1);
	assert_int_equal(phx_ckpt_manifest_find("{\"format\":\"phalanx-checkpoint\",\"version\":2}",
						3, &e, err, sizeof(err)),
			 -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tiers_due),     cmocka_unit_test(test_state_round_trip),
		cmocka_unit_test(test_state_refused), cmocka_unit_test(test_common_newest),
		cmocka_unit_test(test_gc_pick),	      cmocka_unit_test(test_gen_names),
		cmocka_unit_test(test_manifest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
