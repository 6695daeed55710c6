/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "checkpoint/ckptd/recovery_policy.h"

static struct phx_recovery_conf conf(void)
{
	struct phx_recovery_conf c;

	phx_recovery_conf_default(&c);
	c.user_error_repeats = 3;
	c.drain_after = 2;
	c.fault_window_s = 100;
	c.max_requeues = 2;
	return c;
}

static void test_user_error(void **state)
{
	struct phx_recovery_conf c = conf();
	struct phx_recovery_job j = { 0 };
	struct phx_recovery_decision d;

	(void)state;
	phx_recovery_decide(&c, &j, NULL, "n1", PHX_FAULT_CRASH, "ValueError@step12", 0, &d);
	assert_true(d.restart && !d.stop && !d.requeue && !d.drain);
	phx_recovery_decide(&c, &j, NULL, "n1", PHX_FAULT_CRASH, "OSError@step40", 1, &d);
	assert_true(d.restart);
	phx_recovery_decide(&c, &j, NULL, "n2", PHX_FAULT_CRASH, "ValueError@step12", 2, &d);
	assert_true(d.restart && !d.stop);
	phx_recovery_decide(&c, &j, NULL, "n3", PHX_FAULT_CRASH, "ValueError@step12", 3, &d);
	assert_true(d.stop && !d.restart && !d.requeue);
	assert_non_null(strstr(d.reason, "user error"));
	assert_non_null(strstr(d.reason, "ValueError@step12"));
	/* Once stopped, nothing more is tried; the reason stays. */
	phx_recovery_decide(&c, &j, NULL, "n3", PHX_FAULT_LOST, NULL, 4, &d);
	assert_true(!d.stop && !d.requeue && !d.drain && !d.restart);
	assert_string_equal(d.reason, j.stop_reason);
	/* Crashes without a signature are never taken for a user error. */
	j = (struct phx_recovery_job){ 0 };
	for (int i = 0; i < 5; i++) {
		phx_recovery_decide(&c, &j, NULL, "n1", PHX_FAULT_CRASH, NULL, i, &d);
		assert_true(d.restart && !d.stop);
	}
}

static void test_node_faults(void **state)
{
	struct phx_recovery_conf c = conf();
	struct phx_recovery_job j = { 0 };
	struct phx_recovery_node n = { 0 };
	struct phx_recovery_decision d;

	(void)state;
	phx_recovery_decide(&c, &j, NULL, "n1", PHX_FAULT_HANG, NULL, 0, &d);
	assert_true(d.restart && !d.requeue);
	phx_recovery_decide(&c, &j, NULL, "n1", PHX_FAULT_STRAGGLER, NULL, 0, &d);
	assert_true(!d.restart && !d.requeue && !d.drain && !d.stop);
	/* One check failure drops the node; a second within the window drains it. */
	phx_recovery_decide(&c, &j, &n, "n4", PHX_FAULT_CHECK, "gpu 1 missing", 10, &d);
	assert_true(d.requeue && !d.drain && !n.untrusted);
	phx_recovery_requeued(&j);
	phx_recovery_decide(&c, &j, &n, "n4", PHX_FAULT_XID, "xid 79", 200, &d);
	assert_true(d.requeue && !d.drain); /* the first fell out of the window */
	phx_recovery_decide(&c, &j, &n, "n4", PHX_FAULT_CHECK, NULL, 250, &d);
	assert_true(d.requeue && d.drain && n.untrusted);
	assert_int_equal(phx_recovery_recent(&n, 100, 250), 2);
	assert_non_null(strstr(d.reason, "phalanx: node n4"));
}

static void test_lost_and_max_requeues(void **state)
{
	struct phx_recovery_conf c = conf();
	struct phx_recovery_job j = { 0 };
	struct phx_recovery_node n = { 0 };
	struct phx_recovery_decision d;

	(void)state;
	phx_recovery_decide(&c, &j, &n, "n2", PHX_FAULT_LOST, NULL, 0, &d);
	assert_true(d.drain && d.requeue && !d.stop && n.untrusted);
	assert_non_null(strstr(d.reason, "lost"));
	phx_recovery_requeued(&j);
	phx_recovery_decide(&c, &j, &n, "n3", PHX_FAULT_SLURM_DOWN, NULL, 1, &d);
	assert_true(d.drain && d.requeue && !d.stop);
	phx_recovery_requeued(&j);
	/* The third would pass max_requeues = 2: drain still, but stop. */
	phx_recovery_decide(&c, &j, &n, "n1", PHX_FAULT_LOST, NULL, 2, &d);
	assert_true(d.drain && !d.requeue && d.stop && j.stopped);
	assert_non_null(strstr(d.reason, "gave up after 2 requeues"));
}

static void test_trust(void **state)
{
	struct phx_recovery_node n = { .untrusted = 1 };

	(void)state;
	assert_int_equal(phx_recovery_node_checked(&n, 0), 0);
	assert_true(n.untrusted);
	assert_int_equal(phx_recovery_node_checked(&n, 1), 1);
	assert_false(n.untrusted);
	assert_int_equal(phx_recovery_node_checked(&n, 1), 0); /* trusted already */
	assert_int_equal(phx_fault_parse("xid"), PHX_FAULT_XID);
	assert_int_equal(phx_fault_parse("bogus"), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_user_error),
		cmocka_unit_test(test_node_faults),
		cmocka_unit_test(test_lost_and_max_requeues),
		cmocka_unit_test(test_trust),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
