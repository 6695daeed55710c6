/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The roles' goodput ledger (launcher/driver/driver_ledger.h), on a clock
 * the test drives: a held node counts its ranks as restart until its
 * workers' first step, then as productive; the waits the agents report
 * leave productive time; a lost node's silence is detection (a hung one's
 * from its last step); steps a relaunch redoes are lost work; a stateless
 * role that starts again from step 0 redoes nothing; and the parts add up
 * to the rank-time the role held its nodes.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "launcher/driver/driver_ledger.h"

/* Node's agent reports its workers' lowest step (-1: none yet), their waits, the save resumed (-1:
 * none). */
static void resumed_report(struct phx_drv_ledger *l, size_t node, long step, uint64_t wait_ms,
			   long resumed, uint64_t now)
{
	struct phx_progress p = { .stepped = step >= 0,
				  .step = step >= 0 ? (uint64_t)step : 0,
				  .wait_ms = wait_ms,
				  .resumed = resumed >= 0,
				  .resumed_step = resumed >= 0 ? (uint64_t)resumed : 0 };

	phx_drv_ledger_progress(l, node, &p, now);
}

static void report(struct phx_drv_ledger *l, size_t node, long step, uint64_t wait_ms, uint64_t now)
{
	resumed_report(l, node, step, wait_ms, -1, now);
}

static uint64_t sum(const struct phx_role_ledger *r)
{
	uint64_t t = 0;

	for (int k = 0; k < PHX_RL_PARTS; k++)
		t += r->part_ms[k];
	return t;
}

static void test_trainer_and_rollouts(void **state)
{
	const char *names[] = { "trainer", "rollout" };
	struct phx_drv_ledger *l = phx_drv_ledger_new(names, 2, 4, 42);
	struct phx_role_ledger t, ro;

	(void)state;
	assert_non_null(l);
	/* trainer on node0-1 (1 rank each), rollout on node2 (2 ranks). */
	phx_drv_ledger_launch(l, 0, 0, 1, 0);
	phx_drv_ledger_launch(l, 1, 0, 1, 0);
	phx_drv_ledger_launch(l, 2, 1, 2, 0);
	report(l, 0, 1, 0, 1000);
	report(l, 1, 1, 0, 1000);
	report(l, 2, -1, 0, 1000); /* beating, no step yet: still starting */
	report(l, 2, 0, 0, 2000);
	report(l, 0, 10, 300, 10000); /* node0's worker waited 300 ms on the rollouts */
	report(l, 1, 10, 0, 10000);
	phx_drv_ledger_get(l, 0, 10000, &t);
	assert_string_equal(t.name, "trainer");
	assert_int_equal(t.run, 42);
	assert_int_equal(t.ranks, 2);
	assert_int_equal(t.part_ms[PHX_RL_RESTART], 2 * 1000);
	assert_int_equal(t.part_ms[PHX_RL_WAITING], 300);
	assert_int_equal(t.part_ms[PHX_RL_PRODUCTIVE], 2 * 9000 - 300);
	phx_drv_ledger_get(l, 1, 10000, &ro);
	assert_int_equal(ro.part_ms[PHX_RL_RESTART], 2 * 2000);
	assert_int_equal(ro.part_ms[PHX_RL_PRODUCTIVE], 2 * 8000);

	/* node1 dies at 11 s, last heard at 10 s; the trainer relaunches on node0 and node3. */
	phx_drv_ledger_fault(l, 0, 1, false, 11000);
	phx_drv_ledger_release(l, 1, 0, 11000);
	phx_drv_ledger_idle(l, 0, 0, 11000);
	phx_drv_ledger_launch(l, 0, 0, 1, 12000);
	phx_drv_ledger_launch(l, 3, 0, 1, 12000);
	/*
	 * Its workers restored the save of step 5; node0's first report says
	 * step 7: steps 6-10 are done again, at 1 s a step, on 2 ranks.
	 */
	resumed_report(l, 0, 7, 0, 5, 13000);
	phx_drv_ledger_get(l, 0, 13000, &t);
	assert_int_equal(t.failures, 1);
	assert_int_equal(t.part_ms[PHX_RL_DETECT], 1000);
	assert_int_equal(t.part_ms[PHX_RL_LOST], 5 * 1000 * 2);
	assert_int_equal(t.part_ms[PHX_RL_WAITING], 300);
	assert_int_equal(t.part_ms[PHX_RL_RESTART], 2000 + 1000 + 1000 + 1000);
	assert_int_equal(t.part_ms[PHX_RL_PRODUCTIVE], 20000 - 300 - 1000 - 10000);
	/* node0 13 s, node1 11 s, node3 1 s. */
	assert_int_equal(sum(&t), 13000 + 11000 + 1000);

	/*
	 * The rollout's worker fails after 12 steps; its new agent counts
	 * waits from 0 again, and its first report is at step 3 of a fresh
	 * start: no checkpoint, nothing it could have kept.
	 */
	report(l, 2, 12, 0, 14000);
	phx_drv_ledger_fault(l, 1, PHX_DRV_LEDGER_NO_NODE, false, 14000);
	phx_drv_ledger_idle(l, 2, 1, 14000);
	phx_drv_ledger_launch(l, 2, 1, 2, 15000);
	report(l, 2, 3, 50, 16000);
	phx_drv_ledger_get(l, 1, 16000, &ro);
	assert_int_equal(ro.failures, 1);
	assert_int_equal(ro.part_ms[PHX_RL_LOST], 0);
	assert_int_equal(ro.part_ms[PHX_RL_DETECT], 0);
	assert_int_equal(ro.part_ms[PHX_RL_WAITING], 50);
	assert_int_equal(ro.part_ms[PHX_RL_RESTART], 4000 + 2 * 2000);
	assert_int_equal(ro.part_ms[PHX_RL_PRODUCTIVE], 2 * 12000 - 50);
	assert_int_equal(sum(&ro), 2 * 16000);

	/* A released node counts no more; the trainer goes on with node0 and node3. */
	phx_drv_ledger_release(l, 2, 1, 16000);
	phx_drv_ledger_get(l, 1, 20000, &ro);
	assert_int_equal(sum(&ro), 2 * 16000);
	assert_int_equal(ro.ranks, 0);
	/* Calls about a node the role does not hold change nothing. */
	phx_drv_ledger_idle(l, 2, 0, 20000);
	phx_drv_ledger_release(l, 1, 0, 20000);
	phx_drv_ledger_get(l, 0, 20000, &t);
	assert_int_equal(sum(&t), 20000 + 11000 + 8000);
	phx_drv_ledger_free(l);
}

/* A hung node beats on with the same step: its detection runs from the step's last move. */
static void test_hang_detection(void **state)
{
	const char *names[] = { "rollout" };
	struct phx_drv_ledger *l = phx_drv_ledger_new(names, 1, 2, 1);
	struct phx_role_ledger ro;

	(void)state;
	phx_drv_ledger_launch(l, 0, 0, 1, 0);
	phx_drv_ledger_launch(l, 1, 0, 1, 0);
	for (uint64_t t = 1000; t <= 3000; t += 1000) {
		report(l, 0, 5, 0, t);
		report(l, 1, (long)t / 1000, 0, t);
	}
	phx_drv_ledger_fault(l, 0, 0, true, 4000);
	phx_drv_ledger_fault(l, 0, 1, false, 4000);
	phx_drv_ledger_get(l, 0, 4000, &ro);
	assert_int_equal(ro.part_ms[PHX_RL_DETECT], 3000 + 1000);
	assert_int_equal(ro.failures, 2);
	phx_drv_ledger_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trainer_and_rollouts),
		cmocka_unit_test(test_hang_detection),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
