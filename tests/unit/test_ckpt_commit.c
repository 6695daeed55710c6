/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "checkpoint/ckptd/ckpt_commit.h"
#include "checkpoint/ckptd/ckpt_interval.h"

#define SHA_A "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
#define SHA_B "0000d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

static char path_buf[8][32];

static struct phx_manifest_shard shard(uint32_t rank, const char *hex)
{
	struct phx_manifest_shard s = {
		.rank = rank, .bytes = 10 + rank, .filled = 1, .nlocations = 1
	};

	snprintf(s.digest.alg, sizeof(s.digest.alg), "sha256");
	snprintf(s.digest.hex, sizeof(s.digest.hex), "%s", hex);
	snprintf(s.locations[0].tier, sizeof(s.locations[0].tier), "local");
	snprintf(path_buf[rank % 8], sizeof(path_buf[0]), "/c/%u", rank);
	s.locations[0].path = path_buf[rank % 8];
	return s;
}

/* Node k holds ranks 2k and 2k+1. */
static enum phx_commit_result prep(struct phx_commit_job *j, uint64_t gen, uint64_t step, int k,
				   const char *hex, uint64_t *abort_gen)
{
	struct phx_manifest_shard s[2] = { shard(2 * (uint32_t)k, hex),
					   shard(2 * (uint32_t)k + 1, hex) };
	enum phx_commit_result r;
	char node[16], reason[256];
	uint64_t ag;

	snprintf(node, sizeof(node), "n%d", k);
	assert_int_equal(phx_commit_prepare(j, gen, step, node, s, 2, &r,
					    abort_gen ? abort_gen : &ag, reason, sizeof(reason)),
			 0);
	return r;
}

static void job(struct phx_commit_job *j)
{
	char err[128];

	assert_int_equal(phx_commit_job_init(j, 42, 6, "dp=6", err, sizeof(err)), 0);
}

static void test_commit_in_any_order(void **state)
{
	struct phx_commit_job j;
	const struct phx_manifest *m;
	uint64_t sup[PHX_COMMIT_MAX_OPEN];

	(void)state;
	job(&j);
	assert_int_equal(prep(&j, 1, 100, 2, SHA_A, NULL), PHX_COMMIT_PENDING);
	assert_null(phx_commit_ready_manifest(&j, 1));
	assert_int_equal(prep(&j, 1, 100, 0, SHA_A, NULL), PHX_COMMIT_PENDING);
	/* A node's prepare again (after a reconnect) counts once. */
	assert_int_equal(prep(&j, 1, 100, 0, SHA_A, NULL), PHX_COMMIT_DUPLICATE);
	assert_int_equal(prep(&j, 1, 100, 1, SHA_A, NULL), PHX_COMMIT_READY);
	m = phx_commit_ready_manifest(&j, 1);
	assert_non_null(m);
	assert_int_equal(phx_manifest_check_complete(m, NULL, 0), 0);
	assert_string_equal(m->shards[3].node, "n1");
	assert_string_equal(m->layout, "dp=6");
	/* Not published until done. */
	assert_int_equal(j.committed, 0);
	assert_int_equal(phx_commit_done(&j, 1, sup), 0);
	assert_int_equal(j.committed, 1);
	assert_int_equal(j.committed_step, 100);
	/* Late prepares of a committed generation are stale. */
	assert_int_equal(prep(&j, 1, 100, 2, SHA_A, NULL), PHX_COMMIT_STALE);
	phx_commit_job_free(&j);
}

static void test_abort_never_publishes(void **state)
{
	struct phx_commit_job j;

	(void)state;
	job(&j);
	assert_int_equal(prep(&j, 1, 100, 0, SHA_A, NULL), PHX_COMMIT_PENDING);
	assert_int_equal(prep(&j, 1, 100, 1, SHA_A, NULL), PHX_COMMIT_PENDING);
	assert_int_equal(phx_commit_abort(&j, 1), PHX_COMMIT_ABORTED);
	/* The last node's prepare arrives after the abort: still aborted. */
	assert_int_equal(prep(&j, 1, 100, 2, SHA_A, NULL), PHX_COMMIT_WAS_ABORTED);
	assert_null(phx_commit_ready_manifest(&j, 1));
	assert_int_equal(j.committed, 0);
	/* An abort that arrives before any prepare also holds. */
	assert_int_equal(phx_commit_abort(&j, 2), PHX_COMMIT_ABORTED);
	assert_int_equal(prep(&j, 2, 200, 0, SHA_A, NULL), PHX_COMMIT_WAS_ABORTED);
	phx_commit_job_free(&j);
}

static void test_contradictions_abort(void **state)
{
	struct phx_commit_job j;
	struct phx_manifest_shard s = shard(9, SHA_A);
	enum phx_commit_result r;
	char reason[256];
	uint64_t ag;

	(void)state;
	job(&j);
	assert_int_equal(prep(&j, 1, 100, 0, SHA_A, NULL), PHX_COMMIT_PENDING);
	/* Same ranks, other digest. */
	assert_int_equal(prep(&j, 1, 100, 0, SHA_B, NULL), PHX_COMMIT_ABORTED);
	assert_int_equal(prep(&j, 2, 200, 0, SHA_A, NULL), PHX_COMMIT_PENDING);
	/* Another step for the same generation. */
	assert_int_equal(prep(&j, 2, 201, 1, SHA_A, NULL), PHX_COMMIT_ABORTED);
	/* A rank outside the job is an error, not an abort. */
	assert_int_equal(
		phx_commit_prepare(&j, 3, 300, "n9", &s, 1, &r, &ag, reason, sizeof(reason)), -1);
	assert_non_null(strstr(reason, "names rank 9"));
	phx_commit_job_free(&j);
}

static void test_newer_commit_supersedes(void **state)
{
	struct phx_commit_job j;
	uint64_t sup[PHX_COMMIT_MAX_OPEN];

	(void)state;
	job(&j);
	assert_int_equal(prep(&j, 1, 100, 0, SHA_A, NULL), PHX_COMMIT_PENDING);
	assert_int_equal(prep(&j, 3, 300, 0, SHA_A, NULL), PHX_COMMIT_PENDING);
	for (int k = 0; k < 3; k++)
		prep(&j, 2, 200, k, SHA_A, NULL);
	assert_non_null(phx_commit_ready_manifest(&j, 2));
	assert_int_equal(phx_commit_done(&j, 2, sup), 1);
	assert_int_equal(sup[0], 1);
	assert_int_equal(prep(&j, 1, 100, 1, SHA_A, NULL), PHX_COMMIT_STALE);
	/* Generation 3 is still open and can commit. */
	assert_int_equal(prep(&j, 3, 300, 1, SHA_A, NULL), PHX_COMMIT_PENDING);
	assert_int_equal(prep(&j, 3, 300, 2, SHA_A, NULL), PHX_COMMIT_READY);
	phx_commit_job_free(&j);
}

static void test_open_limit(void **state)
{
	struct phx_commit_job j;
	uint64_t ag = 0;

	(void)state;
	job(&j);
	for (uint64_t g = 1; g <= PHX_COMMIT_MAX_OPEN; g++)
		assert_int_equal(prep(&j, g, g * 10, 0, SHA_A, &ag), PHX_COMMIT_PENDING);
	assert_int_equal(prep(&j, 10, 100, 0, SHA_A, &ag), PHX_COMMIT_PENDING);
	assert_int_equal(ag, 1);
	assert_int_equal(prep(&j, 1, 10, 1, SHA_A, &ag), PHX_COMMIT_WAS_ABORTED);
	phx_commit_job_free(&j);
}

/* Every order of three nodes' prepares commits exactly once, on the last. */
static void test_all_orders(void **state)
{
	static const int orders[6][3] = { { 0, 1, 2 }, { 0, 2, 1 }, { 1, 0, 2 },
					  { 1, 2, 0 }, { 2, 0, 1 }, { 2, 1, 0 } };

	(void)state;
	for (int o = 0; o < 6; o++) {
		struct phx_commit_job j;

		job(&j);
		assert_int_equal(prep(&j, 5, 50, orders[o][0], SHA_A, NULL), PHX_COMMIT_PENDING);
		assert_int_equal(prep(&j, 5, 50, orders[o][1], SHA_A, NULL), PHX_COMMIT_PENDING);
		assert_int_equal(prep(&j, 5, 50, orders[o][0], SHA_A, NULL), PHX_COMMIT_DUPLICATE);
		assert_int_equal(prep(&j, 5, 50, orders[o][2], SHA_A, NULL), PHX_COMMIT_READY);
		phx_commit_job_free(&j);
	}
}

static void test_interval(void **state)
{
	(void)state;
	/* 10 s stall, 2 h job MTBF: Young sqrt(2*10*7200) = 379.5 s. */
	assert_true(phx_interval_young(10, 7200) > 379.4 && phx_interval_young(10, 7200) < 379.5);
	/* Daly: 379.47 * (1 + sqrt(1/1440)/3 + 1/12960) - 10 = 372.8. */
	assert_true(phx_interval_daly(10, 7200) > 372.7 && phx_interval_daly(10, 7200) < 372.9);
	assert_true(phx_interval_daly(100, 10) == 10);
	/* 64 nodes of 5000 h each: the job fails every 78 h. */
	assert_int_equal(phx_interval_auto_seconds(2.0, 5000.0 * 3600, 64),
			 (uint64_t)phx_interval_daly(2.0, 5000.0 * 3600 / 64));
	assert_true(phx_interval_node_mtbf(1000, 9000, 4) == 2000);
}

static void test_interval_parse(void **state)
{
	enum phx_ckpt_interval_mode mode;
	uint64_t v;
	char err[256];

	(void)state;
	assert_int_equal(phx_interval_parse("auto", &mode, &v, err, sizeof(err)), 0);
	assert_int_equal(mode, PHX_INTERVAL_AUTO);
	assert_int_equal(phx_interval_parse("steps:500", &mode, &v, err, sizeof(err)), 0);
	assert_int_equal(mode, PHX_INTERVAL_STEPS);
	assert_int_equal(v, 500);
	assert_int_equal(phx_interval_parse("seconds:60", &mode, &v, err, sizeof(err)), 0);
	assert_int_equal(mode, PHX_INTERVAL_SECONDS);
	assert_int_equal(phx_interval_parse("seconds:0", &mode, &v, err, sizeof(err)), -1);
	assert_int_equal(phx_interval_parse("steps:-1", &mode, &v, err, sizeof(err)), -1);
	assert_int_equal(phx_interval_parse("hourly", &mode, &v, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not auto, steps:N or seconds:N"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_commit_in_any_order),
		cmocka_unit_test(test_abort_never_publishes),
		cmocka_unit_test(test_contradictions_abort),
		cmocka_unit_test(test_newer_commit_supersedes),
		cmocka_unit_test(test_open_limit),
		cmocka_unit_test(test_all_orders),
		cmocka_unit_test(test_interval),
		cmocka_unit_test(test_interval_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
