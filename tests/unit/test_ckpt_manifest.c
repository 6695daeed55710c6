/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "checkpoint/proto/ckpt_manifest.h"
#include "common/file.h"
#include "tests/unit/scratch.h"

#define SHA_A "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

static char dir[256];

static int setup(void **state)
{
	(void)state;
	return phx_scratch_make(dir, sizeof(dir), "test-manifest");
}

static int teardown(void **state)
{
	(void)state;
	return phx_scratch_remove(dir);
}

static void build(struct phx_manifest *m, uint32_t world)
{
	char err[256], node[32], path[64];

	assert_int_equal(phx_manifest_init(m, 4242, 7, 7000, "dp=2,tp=2", world, err, sizeof(err)),
			 0);
	for (uint32_t r = 0; r < world; r++) {
		snprintf(node, sizeof(node), "n%02u", r / 2);
		snprintf(path, sizeof(path), "/ckpt/4242/7/rank%u", r);
		assert_int_equal(phx_manifest_shard_set(m, r, node, 1000 + r, "sha256", SHA_A, err,
							sizeof(err)),
				 0);
		assert_int_equal(phx_manifest_shard_add_location(&m->shards[r], "local", path, err,
								 sizeof(err)),
				 0);
	}
}

static void test_round_trip(void **state)
{
	struct phx_manifest m, back;
	char err[256], *text, *again;

	(void)state;
	build(&m, 4);
	assert_int_equal(phx_manifest_shard_add_location(&m.shards[1], "shared", "nfs://srv/ckpt/1",
							 err, sizeof(err)),
			 0);
	text = phx_manifest_to_json(&m, err, sizeof(err));
	assert_non_null(text);
	assert_int_equal(phx_manifest_parse(text, strlen(text), &back, err, sizeof(err)), 0);
	assert_int_equal(back.job, 4242);
	assert_int_equal(back.generation, 7);
	assert_int_equal(back.step, 7000);
	assert_int_equal(back.world, 4);
	assert_string_equal(back.layout, "dp=2,tp=2");
	assert_int_equal(back.shards[3].bytes, 1003);
	assert_string_equal(back.shards[3].node, "n01");
	assert_string_equal(back.shards[0].digest.alg, "sha256");
	assert_string_equal(back.shards[0].digest.hex, SHA_A);
	assert_int_equal(back.shards[1].nlocations, 2);
	assert_string_equal(back.shards[1].locations[1].tier, "shared");
	assert_int_equal(phx_manifest_bytes(&back), 4006);
	again = phx_manifest_to_json(&back, err, sizeof(err));
	assert_string_equal(text, again);
	free(again);
	free(text);
	phx_manifest_free(&back);
	phx_manifest_free(&m);
}

static void test_incomplete_not_written(void **state)
{
	struct phx_manifest m;
	char err[256];

	(void)state;
	assert_int_equal(phx_manifest_init(&m, 1, 1, 0, "", 3, err, sizeof(err)), 0);
	assert_int_equal(phx_manifest_shard_set(&m, 0, "a", 1, "xxh3-128",
						"00112233445566778899aabbccddeeff", err,
						sizeof(err)),
			 0);
	assert_null(phx_manifest_to_json(&m, err, sizeof(err)));
	assert_non_null(strstr(err, "rank 0's shard is in no tier"));
	assert_int_equal(
		phx_manifest_shard_add_location(&m.shards[0], "local", "/x", err, sizeof(err)), 0);
	assert_null(phx_manifest_to_json(&m, err, sizeof(err)));
	assert_non_null(strstr(err, "lacks the shard of rank 1"));
	phx_manifest_free(&m);
}

static void test_digest_checks(void **state)
{
	char err[256];

	(void)state;
	assert_int_equal(phx_manifest_digest_check("sha256", SHA_A, err, sizeof(err)), 0);
	assert_int_equal(phx_manifest_digest_check("sha256", "abcd", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "64 hex characters"));
	assert_int_equal(phx_manifest_digest_check(
				 "sha256",
				 "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08",
				 err, sizeof(err)),
			 -1);
	assert_int_equal(phx_manifest_digest_check("SHA", "abcdabcd", err, sizeof(err)), -1);
	/* Only the algorithms proto/digest.h computes: anything else cannot be verified. */
	assert_int_equal(phx_manifest_digest_check("custom", "abcdabcd", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "\"custom\" is unknown; use xxh3-128 or sha256"));
	assert_int_equal(phx_manifest_digest_check("xxh3", "00112233445566778899aabbccddeeff", err,
						   sizeof(err)),
			 -1);
	assert_int_equal(phx_manifest_digest_check("xxh3-128", "00112233445566778899aabbccddeeff",
						   err, sizeof(err)),
			 0);
	assert_int_equal(
		phx_manifest_digest_check("xxh3-128", "0011223344556677", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "32 hex characters"));
}

/* Each broken manifest is refused with a message naming what is wrong. */
static void test_strict_errors(void **state)
{
	static const struct {
		const char *text, *needle;
	} cases[] = {
		{ "", "ends early" },
		{ "[]", "expected a JSON object" },
		{ "{\"format\":\"x\"}", "\"format\" is \"x\"" },
		{ "{\"format\":\"phalanx-manifest\",\"version\":3}", "version 3 is not supported" },
		{ "{\"format\":\"phalanx-manifest\",\"version\":1,\"extra\":1}",
		  "unknown key \"extra\"" },
		{ "{\"format\":\"phalanx-manifest\",\"version\":1}", "missing \"job\"" },
		{ "{\"format\":\"phalanx-manifest\",\"version\":1,\"job\":-1}",
		  "\"job\" must be from 1" },
		{ "{\"format\":\"phalanx-manifest\",\"version\":1,\"job\":\"1\"}",
		  "must be an integer" },
		{ "{\"format\":\"phalanx-manifest\",\"version\":1,\"job\":1,\"generation\":1,"
		  "\"step\":0,\"created\":0,\"layout\":\"\",\"world\":2,\"shards\":[]}",
		  "0 shards for a world of 2" },
		{ "{\"format\":\"phalanx-manifest\",\"version\":1,\"job\":1,\"generation\":1,"
		  "\"step\":0,\"created\":0,\"layout\":\"\",\"world\":1,\"shards\":[{\"rank\":0,"
		  "\"node\":\"a\",\"bytes\":1,\"digest\":{\"alg\":\"sha256\",\"hex\":\"00\"},"
		  "\"locations\":[{\"tier\":\"local\",\"path\":\"/x\"}]}]}",
		  "shard 0: a sha256 digest has 64" },
		{ "{\"format\":\"phalanx-manifest\",\"version\":1,\"job\":1,\"generation\":1,"
		  "\"step\":0,\"created\":0,\"layout\":\"\",\"world\":1,\"shards\":[{\"rank\":0,"
		  "\"node\":\"a\",\"bytes\":1,\"digest\":{\"alg\":\"xxh3-128\",\"hex\":"
		  "\"00112233445566778899aabbccddeeff\"},\"locations\":[]}]}",
		  "\"locations\" is empty" },
		{ "{\"format\":\"phalanx-manifest\",\"version\":1,\"job\":1,\"generation\":1,"
		  "\"step\":0,\"created\":0,\"layout\":\"\",\"world\":2,\"shards\":[{\"rank\":1,"
		  "\"node\":\"a\",\"bytes\":1,\"digest\":{\"alg\":\"xxh3-128\",\"hex\":"
		  "\"00112233445566778899aabbccddeeff\"},\"locations\":[{\"tier\":\"local\","
		  "\"path\":\"/"
		  "x\"}]},{}]}",
		  "shards must be in rank order" },
		{ "{\"format\":\"phalanx-manifest\",\"version\":1,\"job\":1,\"generation\":1,"
		  "\"step\":0,\"created\":0,\"layout\":\"\",\"world\":1,\"shards\":[{\"rank\":0,"
		  "\"node\":\"a\",\"bytes\":1,\"digest\":{\"alg\":\"xxh3-128\",\"hex\":"
		  "\"00112233445566778899aabbccddeeff\"},\"locations\":[{\"tier\":\"local\","
		  "\"path\":\"/"
		  "x\"},{\"tier\":\"local\",\"path\":\"/y\"}]}]}",
		  "tier local is listed twice" },
		{ "{\"format\":\"phalanx-manifest\",\"version\":1} x", "near byte 42" },
	};
	struct phx_manifest m;
	char err[512];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = '\0';
		assert_int_equal(phx_manifest_parse(cases[i].text, strlen(cases[i].text), &m, err,
						    sizeof(err)),
				 -1);
		if (!strstr(err, cases[i].needle))
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err, cases[i].needle);
	}
}

/* Version 2: every shard's coordinates and kind survive the text; a broken one is refused. */
static void test_coords(void **state)
{
	static const struct {
		const char *from, *to, *needle;
	} bad[] = {
		{ ",\"state\":\"replicated\"", "", "come together" },
		{ "\"replicated\"", "\"mirrored\"", "not \"replicated\" or \"sharded\"" },
		{ "[0,0,0,1,0]", "[0,0,0,1]", "must list tp, cp, ep, dp and pp" },
		{ "[0,0,0,1,0]", "[0,0,0,1,-1]", "not an integer" },
		{ "[0,0,0,1,0]", "[0,0,0,1,\"0\"]", "not an integer" },
		{ "\"version\":2", "\"version\":1", "need manifest version 2" },
	};
	const uint32_t c1[PHX_MANIFEST_DIMS] = { 0, 0, 0, 1, 0 };
	struct phx_manifest m, back;
	char err[256], *text, edit[4096];

	(void)state;
	build(&m, 2);
	assert_int_equal(phx_manifest_shard_place(&m.shards[0], (uint32_t[5]){ 0 },
						  PHX_STATE_SHARDED, err, sizeof(err)),
			 0);
	/* Coordinates for some ranks only are not a manifest a restore can map. */
	assert_null(phx_manifest_to_json(&m, err, sizeof(err)));
	assert_non_null(strstr(err, "rank 1 lacks coordinates"));
	assert_int_equal(
		phx_manifest_shard_place(&m.shards[1], c1, PHX_STATE_REPLICATED, err, sizeof(err)),
		0);
	text = phx_manifest_to_json(&m, err, sizeof(err));
	assert_non_null(text);
	assert_int_equal(phx_manifest_parse(text, strlen(text), &back, err, sizeof(err)), 0);
	assert_int_equal(back.version, 2);
	assert_int_equal(back.shards[0].state, PHX_STATE_SHARDED);
	assert_int_equal(back.shards[1].state, PHX_STATE_REPLICATED);
	assert_memory_equal(back.shards[1].coord, c1, sizeof(c1));
	phx_manifest_free(&back);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *at = strstr(text, bad[i].from);

		assert_non_null(at);
		snprintf(edit, sizeof(edit), "%.*s%s%s", (int)(at - text), text, bad[i].to,
			 at + strlen(bad[i].from));
		err[0] = '\0';
		assert_int_equal(phx_manifest_parse(edit, strlen(edit), &back, err, sizeof(err)),
				 -1);
		if (!strstr(err, bad[i].needle))
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err, bad[i].needle);
	}
	free(text);
	phx_manifest_free(&m);
}

static void test_file_round_trip(void **state)
{
	struct phx_manifest m, back;
	char path[512], err[256];
	struct stat st;

	(void)state;
	build(&m, 2);
	snprintf(path, sizeof(path), "%s/manifest.json", dir);
	assert_int_equal(phx_manifest_write_file(&m, path, err, sizeof(err)), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	assert_int_equal(phx_manifest_read_file(path, &back, err, sizeof(err)), 0);
	assert_int_equal(back.shards[1].bytes, 1001);
	phx_manifest_free(&back);
	phx_manifest_free(&m);
	snprintf(path, sizeof(path), "%s/missing.json", dir);
	assert_int_equal(phx_manifest_read_file(path, &back, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cannot read manifest"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),    cmocka_unit_test(test_incomplete_not_written),
		cmocka_unit_test(test_digest_checks), cmocka_unit_test(test_strict_errors),
		cmocka_unit_test(test_coords),	      cmocka_unit_test(test_file_round_trip),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
