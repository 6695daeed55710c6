/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Preflight decisions on results in phalanx-check's format: the files in
 * tests/data/check (a 4-node step where node2's GPUs are 30% slow and
 * node4's all-reduce hangs; an 8-node step where n5's network is 30%
 * slow; bad-link.json, where n5 and n6 are each fine with other nodes but
 * slow together) and results built here for the corner cases: a node without a
 * GPU, an odd node, too few fast nodes, wrong results, a bad link
 * between two good nodes. Also the strict reader and its round trip.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "common/conf.h"
#include "health/preflight.h"

static char err[512];

static struct phx_check_limits defaults(void)
{
	struct phx_conf conf;
	struct phx_check_limits lim;

	assert_int_equal(phx_conf_defaults(&conf), 0);
	phx_check_limits_from_conf(&conf, &lim);
	phx_conf_free(&conf);
	return lim;
}

static void load(const char *name, struct phx_check_results *res)
{
	const char *dir = getenv("PHX_TEST_DATA");
	char path[1024];

	snprintf(path, sizeof(path), "%s/check/%s", dir ? dir : "tests/data", name);
	if (phx_check_results_load(path, res, err, sizeof(err)) < 0)
		fail_msg("%s", err);
}

static int parse(const char *text, struct phx_check_results *res)
{
	err[0] = '\0';
	return phx_check_results_parse(text, strlen(text), res, err, sizeof(err));
}

static struct phx_check_verdict *judge(const struct phx_check_results *res,
				       const struct phx_check_limits *lim)
{
	struct phx_check_verdict *v = calloc(res->n, sizeof(*v));

	assert_non_null(v);
	phx_check_judge(res, lim, v);
	return v;
}

static void assert_contains(const char *s, const char *part)
{
	if (!strstr(s, part))
		fail_msg("'%s' does not contain '%s'", s, part);
}

static void test_lab_slow_and_hung(void **state)
{
	struct phx_check_limits lim = defaults();
	struct phx_check_results res;
	struct phx_check_verdict *v;
	struct phx_check_decision d;

	load("lab-slow-hung.json", &res);
	assert_int_equal(res.n, 4);
	v = judge(&res, &lim);
	assert_int_equal(v[0].state, PHX_CHECK_OK);
	/* 30% below the median GEMM rate of the step. */
	assert_int_equal(v[1].state, PHX_CHECK_SLOW);
	assert_contains(v[1].reason, "GEMM");
	assert_contains(v[1].reason, "below 80% of the median");
	/* Hung with node3 and again with node2: node4 is the one. */
	assert_int_equal(v[3].state, PHX_CHECK_FAILED);
	assert_contains(v[3].reason, "node3 timeout");
	assert_contains(v[3].reason, "node2 timeout");
	/* node3 was fine with node1 in round 2: cleared. */
	assert_int_equal(v[2].state, PHX_CHECK_OK);
	assert_contains(v[2].note, "node1");
	assert_int_equal(phx_check_worst(v, res.n), PHX_CHECK_FAILED);
	assert_true(phx_check_should_drain(&v[1], &lim));
	assert_true(phx_check_should_drain(&v[3], &lim));
	assert_false(phx_check_should_drain(&v[0], &lim));
	assert_int_equal(phx_check_decide(v, res.n, &d), 0);
	assert_int_equal(d.n_exclude, 1);
	assert_string_equal(d.exclude[0], "node4");
	assert_int_equal(d.n_slow, 1);
	assert_string_equal(d.slow[0], "node2");
	phx_check_decision_free(&d);
	lim.drain_slow = false;
	assert_false(phx_check_should_drain(&v[1], &lim));
	free(v);
	phx_check_results_free(&res);
}

static void test_lab_pairs(void **state)
{
	struct phx_check_limits lim = defaults();
	struct phx_check_results res;
	long p[4];

	load("lab-slow-hung.json", &res);
	assert_int_equal(phx_check_pairs(&res, 1, &lim, p), 2);
	assert_int_equal(p[0], 1);
	assert_int_equal(p[1], 0);
	assert_int_equal(p[2], 3);
	assert_int_equal(p[3], 2);
	/* The hung pair's nodes each meet a node of the fast pair. */
	assert_int_equal(phx_check_pairs(&res, 2, &lim, p), 2);
	assert_int_equal(p[2], 0);
	assert_int_equal(p[0], 2);
	assert_int_equal(p[3], 1);
	assert_int_equal(p[1], 3);
	assert_int_equal(phx_check_pairs(&res, 3, &lim, p), -1);
	phx_check_results_free(&res);
}

static void test_slow_nic(void **state)
{
	struct phx_check_limits lim = defaults();
	struct phx_check_results res;
	struct phx_check_verdict *v;
	long p[8];

	load("slow-nic.json", &res);
	assert_int_equal(phx_check_pairs(&res, 2, &lim, p), 2);
	assert_int_equal(p[4], 0);
	assert_int_equal(p[5], 1);
	assert_int_equal(p[2], -1);
	v = judge(&res, &lim);
	for (size_t i = 0; i < res.n; i++) {
		if (i != 4)
			assert_int_equal(v[i].state, PHX_CHECK_OK);
	}
	assert_int_equal(v[4].state, PHX_CHECK_SLOW);
	assert_contains(v[4].reason, "NCCL all-reduce slow with n6");
	assert_contains(v[4].reason, "and with n1");
	assert_contains(v[5].note, "fine");
	free(v);
	/* A link a whole step finds slow has no median to be slow against. */
	lim.busbw_gbps_min = 170;
	v = judge(&res, &lim);
	assert_int_equal(v[4].state, PHX_CHECK_SLOW);
	assert_contains(v[4].reason, "below check.busbw_gbps_min 170");
	free(v);
	phx_check_results_free(&res);
}

/* As slow-nic.json, but n5 is fine with n1: the n5-n6 link itself is bad. */
static void test_bad_link_between_good_nodes(void **state)
{
	struct phx_check_limits lim = defaults();
	struct phx_check_results res;
	struct phx_check_verdict *v;

	load("bad-link.json", &res);
	v = judge(&res, &lim);
	assert_int_equal(phx_check_worst(v, res.n), PHX_CHECK_OK);
	assert_contains(v[4].note, "the link to n6 is bad");
	assert_contains(v[5].note, "the link to n5 is bad");
	assert_string_equal(v[4].bad_link, "n6");
	assert_string_equal(v[5].bad_link, "n5");
	assert_string_equal(v[0].bad_link, "");
	free(v);
	phx_check_results_free(&res);
}

/* "n" with g GPUs at tflops, and a round-1 link to peer at bw (bw < 0: timeout). */
static void make_node(struct phx_check_node *node, const char *name, size_t g, double tflops,
		      const char *peer, double bw)
{
	memset(node, 0, sizeof(*node));
	snprintf(node->name, sizeof(node->name), "%s", name);
	node->gpus = calloc(g + 1, sizeof(*node->gpus));
	assert_non_null(node->gpus);
	node->n_gpus = g;
	for (size_t i = 0; i < g; i++) {
		node->gpus[i].index = (int)i;
		node->gpus[i].gemm_ok = true;
		node->gpus[i].gemm_tflops = tflops;
		node->gpus[i].h2d_gbps = 50;
		node->gpus[i].d2h_gbps = 50;
		node->gpus[i].memtest_mib = 64;
	}
	if (!peer)
		return;
	node->n_links = 1;
	node->links[0].round = 1;
	snprintf(node->links[0].peer, sizeof(node->links[0].peer), "%s", peer);
	node->links[0].status = bw < 0 ? PHX_LINK_TIMEOUT : PHX_LINK_OK;
	node->links[0].busbw_gbps = bw < 0 ? 0 : bw;
}

static void add(struct phx_check_results *res, const char *name, size_t g, double tflops,
		const char *peer, double bw)
{
	struct phx_check_node node;

	make_node(&node, name, g, tflops, peer, bw);
	assert_int_equal(phx_check_results_add(res, &node), 0);
}

static void test_no_gpu_node(void **state)
{
	struct phx_check_limits lim = defaults();
	struct phx_check_results res = { 0 };
	struct phx_check_verdict *v;
	long p[3];

	add(&res, "a", 0, 0, NULL, 0);
	snprintf(res.nodes[0].error, sizeof(res.nodes[0].error),
		 "no usable GPU: CUDA reports 'no CUDA-capable device is detected'");
	add(&res, "b", 2, 500, NULL, 0);
	add(&res, "c", 2, 500, NULL, 0);
	assert_false(phx_check_node_usable(&res.nodes[0]));
	assert_int_equal(phx_check_pairs(&res, 1, &lim, p), 1);
	assert_int_equal(p[0], -1);
	assert_int_equal(p[1], 2);
	v = judge(&res, &lim);
	assert_int_equal(v[0].state, PHX_CHECK_FAILED);
	assert_string_equal(v[0].reason,
			    "no usable GPU: CUDA reports 'no CUDA-capable device is detected'");
	/* A node that tested no GPU and said nothing is no better. */
	res.nodes[0].error[0] = '\0';
	free(v);
	v = judge(&res, &lim);
	assert_int_equal(v[0].state, PHX_CHECK_FAILED);
	assert_string_equal(v[0].reason, "no GPU was tested");
	/* Without links at all, b and c are fine but say so. */
	assert_int_equal(v[1].state, PHX_CHECK_OK);
	assert_contains(v[1].note, "no NCCL partner");
	free(v);
	phx_check_results_free(&res);
}

static void test_odd_node_meets_a_fast_one(void **state)
{
	struct phx_check_limits lim = defaults();
	struct phx_check_results res = { 0 };
	struct phx_check_verdict *v;
	long p[3];

	add(&res, "a", 1, 500, "b", 100);
	add(&res, "b", 1, 500, "a", 100);
	add(&res, "c", 1, 500, NULL, 0);
	assert_int_equal(phx_check_pairs(&res, 1, &lim, p), 1);
	assert_int_equal(p[2], -1);
	assert_int_equal(phx_check_pairs(&res, 2, &lim, p), 1);
	assert_int_equal(p[2], 0);
	assert_int_equal(p[0], 2);
	/* c hangs with a, which was fine with b: c is to blame. */
	res.nodes[2].n_links = 1;
	res.nodes[2].links[0] =
		(struct phx_check_link){ .round = 2, .peer = "a", .status = PHX_LINK_TIMEOUT };
	res.nodes[0].n_links = 2;
	res.nodes[0].links[1] =
		(struct phx_check_link){ .round = 2, .peer = "c", .status = PHX_LINK_TIMEOUT };
	v = judge(&res, &lim);
	assert_int_equal(v[0].state, PHX_CHECK_OK);
	assert_int_equal(v[1].state, PHX_CHECK_OK);
	assert_int_equal(v[2].state, PHX_CHECK_FAILED);
	assert_contains(v[2].reason, "failed with a timeout");
	free(v);
	phx_check_results_free(&res);
}

static void test_too_few_fast_nodes(void **state)
{
	struct phx_check_limits lim = defaults();
	struct phx_check_results res = { 0 };
	struct phx_check_verdict *v;
	struct phx_check_decision d;
	long p[2];

	add(&res, "a", 1, 500, "b", -1);
	add(&res, "b", 1, 500, "a", -1);
	assert_int_equal(phx_check_pairs(&res, 2, &lim, p), 0);
	v = judge(&res, &lim);
	assert_int_equal(v[0].state, PHX_CHECK_SUSPECT);
	assert_int_equal(v[1].state, PHX_CHECK_SUSPECT);
	assert_contains(v[0].reason, "no fast node was left");
	assert_false(phx_check_should_drain(&v[0], &lim));
	assert_int_equal(phx_check_decide(v, res.n, &d), 0);
	assert_int_equal(d.n_exclude, 0);
	assert_int_equal(d.n_slow, 2);
	phx_check_decision_free(&d);
	free(v);
	phx_check_results_free(&res);
}

static void test_wrong_results(void **state)
{
	struct phx_check_limits lim = defaults();
	struct phx_check_results res = { 0 };
	struct phx_check_verdict *v;

	add(&res, "a", 2, 500, NULL, 0);
	add(&res, "b", 2, 500, NULL, 0);
	add(&res, "c", 2, 500, NULL, 0);
	res.nodes[0].gpus[1].gemm_ok = false;
	res.nodes[1].gpus[0].memtest_errors = 3;
	snprintf(res.nodes[2].gpus[1].error, sizeof(res.nodes[2].gpus[1].error),
		 "cudaMalloc: out of memory");
	v = judge(&res, &lim);
	assert_int_equal(v[0].state, PHX_CHECK_FAILED);
	assert_contains(v[0].reason, "GPU 1: the matrix multiply gave a wrong result");
	assert_int_equal(v[1].state, PHX_CHECK_FAILED);
	assert_contains(v[1].reason, "GPU 0: 3 words of a 64 MiB memory test");
	assert_int_equal(v[2].state, PHX_CHECK_FAILED);
	assert_string_equal(v[2].reason, "GPU 1: cudaMalloc: out of memory");
	assert_false(phx_check_node_usable(&res.nodes[2]));
	free(v);
	phx_check_results_free(&res);
}

static void test_absolute_floor(void **state)
{
	struct phx_check_limits lim = defaults();
	struct phx_check_results res = { 0 };
	struct phx_check_verdict *v;

	add(&res, "a", 1, 500, NULL, 0);
	add(&res, "b", 1, 490, NULL, 0);
	v = judge(&res, &lim);
	assert_int_equal(phx_check_worst(v, res.n), PHX_CHECK_OK);
	free(v);
	lim.gemm_tflops_min = 800;
	v = judge(&res, &lim);
	assert_int_equal(v[0].state, PHX_CHECK_SLOW);
	assert_string_equal(v[0].reason,
			    "GPU 0: GEMM 500.0 TFLOP/s, below check.gemm_tflops_min 800");
	free(v);
	phx_check_results_free(&res);
}

static void test_round_trip(void **state)
{
	struct phx_check_limits lim = defaults();
	struct phx_check_results res, back;
	struct phx_check_verdict *v, *w;
	struct json_object *doc;
	const char *text;

	load("lab-slow-hung.json", &res);
	v = judge(&res, &lim);
	/* What --json prints replays as --results. */
	doc = phx_check_results_to_json(&res, v);
	assert_non_null(doc);
	text = json_object_to_json_string(doc);
	if (parse(text, &back) < 0)
		fail_msg("%s", err);
	assert_int_equal(back.n, res.n);
	w = judge(&back, &lim);
	for (size_t i = 0; i < res.n; i++) {
		assert_int_equal(w[i].state, v[i].state);
		assert_string_equal(w[i].reason, v[i].reason);
		assert_int_equal(back.nodes[i].n_gpus, res.nodes[i].n_gpus);
		assert_int_equal(back.nodes[i].n_links, res.nodes[i].n_links);
	}
	json_object_put(doc);
	free(v);
	free(w);
	phx_check_results_free(&back);
	phx_check_results_free(&res);
}

static void test_single_node_object(void **state)
{
	struct phx_check_results res;

	assert_int_equal(parse("{\"node\": \"x\", \"error\": \"no usable GPU: none\"}", &res), 0);
	assert_int_equal(res.n, 1);
	assert_string_equal(res.nodes[0].error, "no usable GPU: none");
	phx_check_results_free(&res);
}

static void refused(const char *text, const char *why)
{
	struct phx_check_results res;

	if (parse(text, &res) == 0)
		fail_msg("accepted: %s", text);
	assert_contains(err, why);
	assert_null(res.nodes);
	assert_int_equal(res.n, 0);
}

static void test_refused(void **state)
{
	refused("", "not JSON");
	refused("{\"phalanx_check\": 1, \"nodes\": []} x", "text after the JSON value");
	refused("{\"phalanx_check\": 2, \"nodes\": []}", "version 2");
	refused("{\"phalanx_check\": 1}", "'nodes' is missing");
	refused("{\"phalanx_check\": 1, \"nodes\": [], \"extra\": 1}", "'extra': unknown key");
	refused("{\"phalanx_check\": 1, \"nodes\": [{\"node\": \"a\"}, {\"node\": \"a\"}]}",
		"nodes[1].node: 'a' appears twice");
	refused("{\"node\": \"\"}", "node.node: empty");
	refused("{\"node\": \"a\", \"gpus\": [{\"index\": 0, \"h2d_gbps\": -1}]}",
		"node(a).gpus[0].h2d_gbps: -1 is not between");
	refused("{\"node\": \"a\", \"gpus\": [{\"index\": 0, \"gemm_ok\": 1}]}",
		"gemm_ok: expected a boolean, found a int");
	refused("{\"node\": \"a\", \"gpus\": [{\"index\": 0}, {\"index\": 0}]}", "appears twice");
	refused("{\"node\": \"a\", \"gpus\": [{\"index\": 9999}]}", "index: not between");
	refused("{\"node\": \"a\", \"links\": [{\"round\": 3, \"peer\": \"b\", \"status\": "
		"\"ok\"}]}",
		"round: missing or not 1 or 2");
	refused("{\"node\": \"a\", \"links\": [{\"round\": 1, \"peer\": \"b\", \"status\": "
		"\"slow\"}]}",
		"'slow' is not ok, timeout or error");
	refused("{\"node\": \"a\", \"links\": [{\"round\": 1, \"peer\": \"b\", \"status\": "
		"\"ok\"}, "
		"{\"round\": 1, \"peer\": \"c\", \"status\": \"ok\"}]}",
		"round 1 appears twice");
	refused("{\"node\": "
		"\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
		"longer than 63 bytes");
	refused("[1, 2]", "expected a JSON object");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lab_slow_and_hung),
		cmocka_unit_test(test_lab_pairs),
		cmocka_unit_test(test_slow_nic),
		cmocka_unit_test(test_bad_link_between_good_nodes),
		cmocka_unit_test(test_no_gpu_node),
		cmocka_unit_test(test_odd_node_meets_a_fast_one),
		cmocka_unit_test(test_too_few_fast_nodes),
		cmocka_unit_test(test_wrong_results),
		cmocka_unit_test(test_absolute_floor),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_single_node_object),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
