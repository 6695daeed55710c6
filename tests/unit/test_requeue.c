/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The requeue planner: a requeue never leaves a job fewer nodes than it
 * asks for without saying so. The cases are the lab's: 7 nodes, a job of
 * 5, nodes killed (DOWN in Slurm) and nodes found bad while Slurm still
 * schedules them.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/requeue.h"

#define N 7

/* usable/bad as strings over node1..node7: 'u' usable, '-' DOWN or drained; 'b' bad. */
static void nodes_of(const char *usable, const char *bad, struct phx_requeue_node *v)
{
	static const char *const names[N] = { "node1", "node2", "node3", "node4",
					      "node5", "node6", "node7" };

	for (int i = 0; i < N; i++) {
		v[i].name = names[i];
		v[i].usable = usable[i] == 'u';
		v[i].bad = bad[i] == 'b';
	}
}

static void excluded_are(const bool *ex, const char *want)
{
	for (int i = 0; i < N; i++)
		assert_int_equal(ex[i], want[i] == 'x');
}

static void test_room_left(void **state)
{
	struct phx_requeue_node v[N];
	struct phx_requeue_plan p;
	bool ex[N];

	(void)state;
	/* node2 and node4 killed: DOWN and bad; five others are left for a job of five. */
	nodes_of("u-u-uuu", ".b.b...", v);
	phx_requeue_plan(v, N, 5, PHX_TOO_FEW_WAIT, ex, &p);
	assert_int_equal(p.verdict, PHX_REQUEUE_OK);
	assert_int_equal(p.usable, 5);
	excluded_are(ex, ".x.x...");
}

static void test_healthy_excluded_is_dead_end(void **state)
{
	struct phx_requeue_node v[N];
	struct phx_requeue_plan p;
	bool ex[N];

	(void)state;
	/*
	 * The race this guards: node2 and node4 DOWN, and node5 and node6
	 * (healthy in Slurm) excluded on top. Three usable nodes for a job of
	 * five, and only five even once 2 and 4 return: under either policy
	 * that requeue could never run.
	 */
	nodes_of("u-u-uuu", ".b.bbb.", v);
	phx_requeue_plan(v, N, 5, PHX_TOO_FEW_STOP, ex, &p);
	assert_int_equal(p.verdict, PHX_REQUEUE_DEAD_END);
	assert_int_equal(p.usable, 3);
	assert_non_null(strstr(p.why, "could never run"));
	phx_requeue_plan(v, N, 6, PHX_TOO_FEW_WAIT, ex, &p);
	assert_int_equal(p.verdict, PHX_REQUEUE_DEAD_END);
}

static void test_wait_for_down_nodes(void **state)
{
	struct phx_requeue_node v[N];
	struct phx_requeue_plan p;
	bool ex[N];

	(void)state;
	/* node2, node4 DOWN and bad, node5 bad but scheduled by Slurm: 4 usable for 5. */
	nodes_of("u-u-uuu", ".b.bb..", v);
	phx_requeue_plan(v, N, 5, PHX_TOO_FEW_WAIT, ex, &p);
	assert_int_equal(p.verdict, PHX_REQUEUE_WAIT);
	assert_int_equal(p.usable, 4);
	assert_int_equal(p.capacity, 6);
	/* Only node5 is excluded: Slurm keeps the job off the DOWN ones until they return. */
	excluded_are(ex, "....x..");
	assert_non_null(strstr(p.why, "waits"));
	/* The same under policy stop: no requeue, and the hint names the other policy. */
	phx_requeue_plan(v, N, 5, PHX_TOO_FEW_STOP, ex, &p);
	assert_int_equal(p.verdict, PHX_REQUEUE_DEAD_END);
	assert_non_null(strstr(p.why, "recovery.too_few_nodes: wait"));
}

static void test_down_not_bad_counts_later(void **state)
{
	struct phx_requeue_node v[N];
	struct phx_requeue_plan p;
	bool ex[N];

	(void)state;
	/* Two nodes DOWN for other reasons, none bad: no exclusion, the job waits. */
	nodes_of("--uuuuu", ".......", v);
	phx_requeue_plan(v, N, 5, PHX_TOO_FEW_WAIT, ex, &p);
	assert_int_equal(p.verdict, PHX_REQUEUE_OK);
	excluded_are(ex, ".......");
	/* A job larger than the partition can never run, whatever the policy. */
	phx_requeue_plan(v, N, 8, PHX_TOO_FEW_WAIT, ex, &p);
	assert_int_equal(p.verdict, PHX_REQUEUE_DEAD_END);
}

static void test_empty_partition(void **state)
{
	struct phx_requeue_plan p;
	bool ex[1];

	(void)state;
	phx_requeue_plan(NULL, 0, 1, PHX_TOO_FEW_WAIT, ex, &p);
	assert_int_equal(p.verdict, PHX_REQUEUE_DEAD_END);
	assert_int_equal(p.capacity, 0);
}

static void test_listed(void **state)
{
	(void)state;
	assert_true(phx_requeue_listed("node1,node12", "node12"));
	assert_true(phx_requeue_listed("node1,node12", "node1"));
	/* Whole names only, and an empty name is in no list. */
	assert_false(phx_requeue_listed("node12,node3", "node1"));
	assert_false(phx_requeue_listed("xnode1", "node1"));
	assert_false(phx_requeue_listed("node1", ""));
	assert_false(phx_requeue_listed("", "node1"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_room_left),
		cmocka_unit_test(test_healthy_excluded_is_dead_end),
		cmocka_unit_test(test_wait_for_down_nodes),
		cmocka_unit_test(test_down_not_bad_counts_later),
		cmocka_unit_test(test_empty_partition),
		cmocka_unit_test(test_listed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
