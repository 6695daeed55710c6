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

#include "checkpoint/proto/ckpt_msg.h"
#include "checkpoint/node/partner.h"
#include "placement/fabric.h"

static struct phx_fabric *tconf(const char *text)
{
	struct phx_fabric *f = NULL;
	char err[512];

	if (phx_fabric_parse(NULL, NULL, 0, "t.conf", text, strlen(text), &f, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	return f;
}

static const char *leaf_of(const struct phx_fabric *f, const char *name)
{
	long k = phx_fabric_find(f, name);

	return k < 0 ? NULL : f->leaves[f->nodes[k].leaf];
}

/* Every node has one partner, not itself, and holds exactly one node's shards. */
static void assert_permutation(const long *p, size_t n)
{
	int held[64] = { 0 };

	assert_true(n <= 64);
	for (size_t i = 0; i < n; i++) {
		assert_true(p[i] >= 0 && (size_t)p[i] < n);
		assert_int_not_equal(p[i], (long)i);
		held[p[i]]++;
	}
	for (size_t i = 0; i < n; i++)
		assert_int_equal(held[i], 1);
}

static void test_ring_without_fabric(void **state)
{
	const char *nodes[] = { "n3", "n1", "n10", "n2" };
	long p[4];

	(void)state;
	assert_int_equal(phx_partner_assign(nodes, 4, NULL, p), 4);
	/* Sorted as Slurm sorts: n1 n2 n3 n10, each to the next. */
	assert_string_equal(nodes[p[1]], "n2");
	assert_string_equal(nodes[p[3]], "n3");
	assert_string_equal(nodes[p[0]], "n10");
	assert_string_equal(nodes[p[2]], "n1");
}

static void test_single_node_has_none(void **state)
{
	const char *nodes[] = { "n1" };
	long p[1] = { 7 };

	(void)state;
	assert_int_equal(phx_partner_assign(nodes, 1, NULL, p), 0);
	assert_int_equal(p[0], -1);
	assert_int_equal(phx_partner_assign(nodes, 0, NULL, p), 0);
}

static void test_two_leaves_cross(void **state)
{
	struct phx_fabric *f = tconf("SwitchName=s0 Nodes=n[1-3]\nSwitchName=s1 Nodes=n[4-6]\n"
				     "SwitchName=top Switches=s[0-1]\n");
	const char *nodes[] = { "n1", "n2", "n3", "n4", "n5", "n6" };
	long p[6];

	(void)state;
	assert_int_equal(phx_partner_assign(nodes, 6, f, p), 0);
	assert_permutation(p, 6);
	for (size_t i = 0; i < 6; i++)
		assert_string_not_equal(leaf_of(f, nodes[i]), leaf_of(f, nodes[p[i]]));
	phx_fabric_free(f);
}

/* 3 + 1 + 1: only two of the big leaf's nodes can leave it; one pair must share. */
static void test_uneven_leaves_best_possible(void **state)
{
	struct phx_fabric *f = tconf("SwitchName=a Nodes=n[1-3]\nSwitchName=b Nodes=n4\n"
				     "SwitchName=c Nodes=n5\n");
	const char *nodes[] = { "n5", "n4", "n3", "n2", "n1" };
	long p[5];
	int crossing = 0;

	(void)state;
	assert_int_equal(phx_partner_assign(nodes, 5, f, p), 1);
	assert_permutation(p, 5);
	for (size_t i = 0; i < 5; i++)
		crossing += strcmp(leaf_of(f, nodes[i]), leaf_of(f, nodes[p[i]])) != 0;
	assert_int_equal(crossing, 4);
	phx_fabric_free(f);
}

/* Every agent gets the step's nodes in its own order: the pairs are the same. */
static void test_order_independent(void **state)
{
	struct phx_fabric *f = tconf("SwitchName=a Nodes=n[1-4]\nSwitchName=b Nodes=n[5-6]\n");
	const char *x[] = { "n1", "n2", "n3", "n4", "n5", "n6", "m9" };
	const char *y[] = { "m9", "n6", "n4", "n2", "n5", "n3", "n1" };
	long px[7], py[7];

	(void)state;
	assert_true(phx_partner_assign(x, 7, f, px) >= 0);
	assert_true(phx_partner_assign(y, 7, f, py) >= 0);
	assert_permutation(px, 7);
	for (size_t i = 0; i < 7; i++)
		for (size_t j = 0; j < 7; j++)
			if (!strcmp(x[i], y[j]))
				assert_string_equal(x[px[i]], y[py[j]]);
	phx_fabric_free(f);
}

/* One leaf in the fabric, or nodes it does not know: a ring all the same. */
static void test_one_leaf_is_ring(void **state)
{
	struct phx_fabric *f = tconf("SwitchName=a Nodes=n[1-3]\n");
	const char *nodes[] = { "n1", "n2", "n3" };
	long p[3];

	(void)state;
	assert_int_equal(phx_partner_assign(nodes, 3, f, p), 3);
	assert_string_equal(nodes[p[0]], "n2");
	assert_string_equal(nodes[p[2]], "n1");
	phx_fabric_free(f);
}

static void test_repeated_name_refused(void **state)
{
	const char *nodes[] = { "n1", "n2", "n1" };
	long p[3];

	(void)state;
	assert_int_equal(phx_partner_assign(nodes, 3, NULL, p), -1);
}

/* After a node is lost, every agent finds the same holder of its shards. */
static void test_holder_of_lost_node(void **state)
{
	struct phx_fabric *f = tconf("SwitchName=s0 Nodes=n[1-2]\nSwitchName=s1 Nodes=n[3-4]\n");
	const char *nodes[] = { "n1", "n2", "n3", "n4" };
	long p[4];

	(void)state;
	assert_int_equal(phx_partner_assign(nodes, 4, f, p), 0);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(phx_partner_holder(nodes, 4, f, nodes[i]), p[i]);
	assert_string_equal(leaf_of(f, nodes[phx_partner_holder(nodes, 4, f, "n2")]), "s1");
	assert_int_equal(phx_partner_holder(nodes, 4, f, "n9"), -1);
	assert_int_equal(phx_partner_holder(nodes, 1, f, "n1"), -1);
	phx_fabric_free(f);
}

/* ------------------------------------------------------------ header */

static const uint8_t secret[PHX_PARTNER_SECRET_BYTES] = "0123456789abcdef0123456789abcde";
static const struct phx_partner_limits lim = { .job_id = 42, .nranks = 8, .max_bytes = 1 << 20 };

static struct phx_partner_hdr sample(void)
{
	struct phx_partner_hdr h = { .job_id = 42,
				     .rank = 5,
				     .step = 1000,
				     .gen = 3,
				     .bytes = 4096,
				     .algo = PHX_DIGEST_SHA256 };

	for (int i = 0; i < 32; i++)
		h.digest[i] = (uint8_t)(i * 7 + 1);
	return h;
}

static void test_hdr_round_trip(void **state)
{
	struct phx_partner_hdr h = sample(), g;
	uint8_t buf[PHX_PARTNER_HDR_BYTES];
	char err[256];

	(void)state;
	assert_int_equal(phx_partner_hdr_encode(&h, secret, buf), 0);
	assert_int_equal(
		phx_partner_hdr_decode(buf, sizeof(buf), secret, &lim, &g, err, sizeof(err)), 0);
	assert_memory_equal(&h, &g, sizeof(h));
	h.algo = PHX_DIGEST_XXH3;
	memset(h.digest + 16, 0, 16);
	assert_int_equal(phx_partner_hdr_encode(&h, secret, buf), 0);
	assert_int_equal(
		phx_partner_hdr_decode(buf, sizeof(buf), secret, &lim, &g, err, sizeof(err)), 0);
	assert_memory_equal(&h, &g, sizeof(h));
}

static void expect_refused(const uint8_t *buf, size_t len, const uint8_t *key, const char *why)
{
	struct phx_partner_hdr g;
	char err[256];

	assert_int_equal(phx_partner_hdr_decode(buf, len, key, &lim, &g, err, sizeof(err)), -1);
	if (!strstr(err, why))
		fail_msg("error '%s' does not say '%s'", err, why);
}

/* Any flipped bit, in any byte, is refused: the MAC covers it all. */
static void test_hdr_tamper(void **state)
{
	struct phx_partner_hdr h = sample();
	uint8_t buf[PHX_PARTNER_HDR_BYTES], bad[PHX_PARTNER_HDR_BYTES];
	uint8_t other[PHX_PARTNER_SECRET_BYTES] = { 1 };

	(void)state;
	assert_int_equal(phx_partner_hdr_encode(&h, secret, buf), 0);
	for (size_t i = 8; i < sizeof(buf); i++) {
		memcpy(bad, buf, sizeof(buf));
		bad[i] ^= 0x10;
		expect_refused(bad, sizeof(bad), secret, "authentication failed");
	}
	expect_refused(buf, sizeof(buf), other, "authentication failed");
	expect_refused(buf, sizeof(buf) - 1, secret, "header of 127 bytes");
	memcpy(bad, buf, sizeof(buf));
	bad[0] ^= 1;
	expect_refused(bad, sizeof(bad), secret, "bad magic");
	memcpy(bad, buf, sizeof(buf));
	bad[4] = 9;
	expect_refused(bad, sizeof(bad), secret, "version 9");
}

/* Signed with the job's secret but outside what this agent holds. */
static void test_hdr_limits(void **state)
{
	struct phx_partner_hdr h = sample();
	uint8_t buf[PHX_PARTNER_HDR_BYTES];

	(void)state;
	h.job_id = 43;
	assert_int_equal(phx_partner_hdr_encode(&h, secret, buf), 0);
	expect_refused(buf, sizeof(buf), secret, "job 43");
	h = sample();
	h.rank = 8;
	assert_int_equal(phx_partner_hdr_encode(&h, secret, buf), 0);
	expect_refused(buf, sizeof(buf), secret, "rank 8");
	h = sample();
	h.bytes = (1 << 20) + 1;
	assert_int_equal(phx_partner_hdr_encode(&h, secret, buf), 0);
	expect_refused(buf, sizeof(buf), secret, "the limit is");
	h = sample();
	h.bytes = PHX_CKPT_MAX_BYTES + 1;
	assert_int_equal(phx_partner_hdr_encode(&h, secret, buf), -1);
	h = sample();
	h.algo = (enum phx_digest_algo)7;
	assert_int_equal(phx_partner_hdr_encode(&h, secret, buf), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_without_fabric),
		cmocka_unit_test(test_single_node_has_none),
		cmocka_unit_test(test_two_leaves_cross),
		cmocka_unit_test(test_uneven_leaves_best_possible),
		cmocka_unit_test(test_order_independent),
		cmocka_unit_test(test_one_leaf_is_ring),
		cmocka_unit_test(test_repeated_name_refused),
		cmocka_unit_test(test_holder_of_lost_node),
		cmocka_unit_test(test_hdr_round_trip),
		cmocka_unit_test(test_hdr_tamper),
		cmocka_unit_test(test_hdr_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
