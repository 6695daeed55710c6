/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Roles of an MPMD job: the --role parser, the nodes each role gets, the
 * per-role restart decisions (group and self), preemption, and straggler
 * detection over the step rates the agents send.
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

#include "launcher/restart.h"
#include "launcher/role.h"
#include "launcher/straggler.h"

static char err[512];

static void parse_ok(const char *spec, struct phx_role *r)
{
	err[0] = '\0';
	if (phx_role_parse(spec, r, err, sizeof(err)) != 0)
		fail_msg("'%s' refused: %s", spec, err);
}

static void parse_bad(const char *spec, const char *why)
{
	struct phx_role r;

	err[0] = '\0';
	assert_int_equal(phx_role_parse(spec, &r, err, sizeof(err)), -1);
	if (!strstr(err, why))
		fail_msg("'%s': error '%s' lacks '%s'", spec, err, why);
}

static void test_parse_fields(void **state)
{
	struct phx_role r;

	parse_ok("trainer:tp=8,pp=2:nodes=6", &r);
	assert_string_equal(r.name, "trainer");
	assert_string_equal(r.layout, "tp=8,pp=2");
	assert_int_equal(r.nodes, 6);
	assert_int_equal(r.nproc, 0);
	assert_int_equal(r.restart, PHX_RESTART_GROUP);
	assert_int_equal(r.max_restarts, -1);
	assert_null(r.cmd);
	phx_role_free(&r);

	/* cmd= takes the rest, colons and '=' included. */
	parse_ok("rollout:nodes=2:restart=self:nproc=4:max-restarts=7:cmd=python r.py --a=b:c", &r);
	assert_string_equal(r.name, "rollout");
	assert_string_equal(r.layout, "");
	assert_int_equal(r.nodes, 2);
	assert_int_equal(r.nproc, 4);
	assert_int_equal(r.restart, PHX_RESTART_SELF);
	assert_int_equal(r.max_restarts, 7);
	assert_string_equal(r.cmd, "python r.py --a=b:c");
	phx_role_free(&r);

	parse_ok("a", &r);
	assert_string_equal(r.name, "a");
	assert_int_equal(r.nodes, 0);
	phx_role_free(&r);

	parse_ok("critic-2:layout=dp=*,order=tp-cp-ep-dp-pp:restart=group", &r);
	assert_string_equal(r.layout, "dp=*,order=tp-cp-ep-dp-pp");
	phx_role_free(&r);
}

static void test_parse_errors(void **state)
{
	parse_bad("", "has no name");
	parse_bad(":nodes=2", "has no name");
	parse_bad("9lives", "starts with a letter");
	parse_bad("a b", "letters, digits");
	parse_bad("averyveryveryveryveryverylongname", "longer than 31");
	parse_bad("t:nodes=0", "nodes='0' is not a whole number in 1..");
	parse_bad("t:nodes=-1", "nodes='-1'");
	parse_bad("t:nodes=", "nodes=''");
	parse_bad("t:nodes=99999999999", "nodes=");
	parse_bad("t:nodes=2:nodes=3", "nodes= is given twice");
	parse_bad("t:nproc=5000", "nproc='5000'");
	parse_bad("t:restart=always", "use group (the role restarts together) or self");
	parse_bad("t:restart=self:restart=group", "restart= is given twice");
	parse_bad("t:gpus=8", "unknown field 'gpus=8'");
	parse_bad("t:nodes", "unknown field 'nodes'");
	parse_bad("t:", "unknown field ''");
	parse_bad("t:tp=3x", "--role t:");
	parse_bad("t:tp=2:pp=2", "the layout is given twice");
	parse_bad("t:cmd=", "cmd= is empty");
	parse_bad("t:cmd=   ", "cmd= is empty");
	parse_bad("t:max-restarts=x", "max-restarts='x'");
}

static void test_assign_nodes(void **state)
{
	struct phx_role r[3];

	parse_ok("trainer:nodes=6", &r[0]);
	parse_ok("rollout:nodes=2", &r[1]);
	assert_int_equal(phx_roles_assign(r, 2, 8, err, sizeof(err)), 0);
	assert_int_equal(r[0].first_node, 0);
	assert_int_equal(r[1].first_node, 6);
	assert_int_equal(phx_role_of_agent(r, 2, 0), 0);
	assert_int_equal(phx_role_of_agent(r, 2, 5), 0);
	assert_int_equal(phx_role_of_agent(r, 2, 6), 1);
	assert_int_equal(phx_role_of_agent(r, 2, 7), 1);
	/* Too few or too many nodes in the step. */
	assert_int_equal(phx_roles_assign(r, 2, 7, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "the roles ask for 8 node(s) and the step has 7"));
	assert_int_equal(phx_roles_assign(r, 2, 9, err, sizeof(err)), -1);

	/* A role without nodes= takes the rest, wherever it is in the list. */
	parse_ok("judge:nodes=1", &r[2]);
	r[0].nodes = 0;
	assert_int_equal(phx_roles_assign(r, 3, 10, err, sizeof(err)), 0);
	assert_int_equal(r[0].nodes, 7);
	assert_int_equal(r[1].first_node, 7);
	assert_int_equal(r[2].first_node, 9);
	r[0].nodes = 0;
	assert_int_equal(phx_roles_assign(r, 3, 3, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "plus at least one"));
	r[0].nodes = 0;
	r[2].nodes = 0;
	assert_int_equal(phx_roles_assign(r, 3, 10, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "roles trainer and judge both leave nodes= out"));
	for (int i = 0; i < 3; i++)
		phx_role_free(&r[i]);
}

/* The driver's step of one role: that role alone, over the step's nodes. */
static void test_keep_one_role(void **state)
{
	struct phx_role r[2];
	size_t n = 2;

	parse_ok("trainer:nodes=2:spares=1:cmd=python t.py", &r[0]);
	parse_ok("rollout:nodes=1-3:restart=self:cmd=python r.py", &r[1]);
	assert_int_equal(phx_roles_keep(r, &n, "judge", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--step-role judge: no --role of that name"));
	assert_int_equal(n, 2);
	assert_int_equal(phx_roles_keep(r, &n, "rollout", err, sizeof(err)), 0);
	assert_int_equal(n, 1);
	assert_string_equal(r[0].name, "rollout");
	assert_string_equal(r[0].cmd, "python r.py");
	assert_int_equal(r[0].restart, PHX_RESTART_SELF);
	/* Every agent of the step, whatever the pool's size in the allocation. */
	assert_int_equal(phx_roles_assign(r, n, 3, err, sizeof(err)), 0);
	assert_int_equal(r[0].nodes, 3);
	phx_role_free(&r[0]);
}

static void test_role_argv(void **state)
{
	char *argv[PHX_ROLE_ARGV_MAX + 1], *buf, many[2048] = "";

	assert_int_equal(phx_role_argv("  python3  r.py --a=b:c\t-x ", &buf, argv), 0);
	assert_string_equal(argv[0], "python3");
	assert_string_equal(argv[1], "r.py");
	assert_string_equal(argv[2], "--a=b:c");
	assert_string_equal(argv[3], "-x");
	assert_null(argv[4]);
	free(buf);
	/* Shell syntax goes to the shell, untouched. */
	assert_int_equal(phx_role_argv("cd /x && exec ./r \"$HOME\"", &buf, argv), 0);
	assert_string_equal(argv[0], "/bin/sh");
	assert_string_equal(argv[1], "-c");
	assert_string_equal(argv[2], "cd /x && exec ./r \"$HOME\"");
	assert_null(argv[3]);
	free(buf);
	/* More words than an argv holds: the shell splits them. */
	for (int i = 0; i < 300; i++)
		strcat(many, "w ");
	assert_int_equal(phx_role_argv(many, &buf, argv), 0);
	assert_string_equal(argv[0], "/bin/sh");
	assert_string_equal(argv[2], many);
	free(buf);
}

static struct phx_report rep(unsigned role, unsigned epoch, enum phx_node_state st, uint64_t when,
			     long rank)
{
	return (struct phx_report){ .role = role,
				    .epoch = epoch,
				    .state = st,
				    .fail_ns = when,
				    .fail_rank = st == PHX_NODE_FAILED ? rank : -1,
				    .kind = st == PHX_NODE_FAILED ? PHX_FAIL_EXIT : PHX_FAIL_NONE,
				    .code = 1 };
}

/* trainer (group, 2 restarts) on agents 0-1, rollout (self, 1 restart per worker) on 2-3. */
static const struct phx_role_state two[] = {
	{ PHX_RESTART_GROUP, 0, 2 },
	{ PHX_RESTART_SELF, 0, 1 },
};

static void test_group_role_restarts_alone(void **state)
{
	struct phx_report r[] = { rep(0, 0, PHX_NODE_RUNNING, 0, 0),
				  rep(0, 0, PHX_NODE_FAILED, 50, 9),
				  rep(1, 0, PHX_NODE_RUNNING, 0, 0),
				  rep(1, 0, PHX_NODE_RUNNING, 0, 0) };
	struct phx_decision d;

	phx_restart_decide(r, 4, two, 2, &d);
	assert_int_equal(d.action, PHX_ACT_RESTART);
	assert_int_equal(d.first, 1);
	assert_int_equal(d.role_action[0], PHX_ACT_RESTART);
	assert_int_equal(d.role_first[0], 1);
	assert_int_equal(d.role_action[1], PHX_ACT_CONTINUE);
	assert_int_equal(d.role_first[1], -1);
	assert_true(d.barrier);
	assert_false(d.preempt);
}

static void test_self_role_restarts_without_barrier(void **state)
{
	struct phx_report r[] = { rep(0, 0, PHX_NODE_RUNNING, 0, 0),
				  rep(0, 0, PHX_NODE_RUNNING, 0, 0),
				  rep(1, 0, PHX_NODE_FAILED, 70, 20),
				  rep(1, 0, PHX_NODE_FAILED, 60, 27) };
	struct phx_decision d;

	phx_restart_decide(r, 4, two, 2, &d);
	assert_int_equal(d.action, PHX_ACT_RESTART);
	assert_int_equal(d.role_action[1], PHX_ACT_RESTART);
	assert_int_equal(d.role_first[1], 3);
	assert_int_equal(d.role_action[0], PHX_ACT_CONTINUE);
	assert_false(d.barrier);
	/* A self report's epoch is its failed worker's restarts: out of them, the job ends. */
	r[2].epoch = 1;
	phx_restart_decide(r, 4, two, 2, &d);
	assert_int_equal(d.action, PHX_ACT_GIVE_UP);
	assert_int_equal(d.first, 2);
	assert_int_equal(d.role_action[1], PHX_ACT_GIVE_UP);
	/* Self reports are never stale: any epoch counts. */
	r[2] = rep(1, 0, PHX_NODE_RUNNING, 0, 0);
	r[3].epoch = 0;
	phx_restart_decide(r, 4, two, 2, &d);
	assert_int_equal(d.role_action[1], PHX_ACT_RESTART);
}

static void test_both_roles_fail_in_one_round(void **state)
{
	struct phx_role_state roles[2] = { { PHX_RESTART_GROUP, 1, 2 },
					   { PHX_RESTART_SELF, 0, 1 } };
	struct phx_report r[] = { rep(0, 0, PHX_NODE_FAILED, 10, 1), /* stale: epoch 0 */
				  rep(0, 1, PHX_NODE_FAILED, 90, 3),
				  rep(1, 0, PHX_NODE_FAILED, 40, 20),
				  rep(1, 0, PHX_NODE_DONE, 0, 0) };
	struct phx_decision d;

	phx_restart_decide(r, 4, roles, 2, &d);
	assert_int_equal(d.action, PHX_ACT_RESTART);
	assert_int_equal(d.role_first[0], 1);
	assert_int_equal(d.role_first[1], 2);
	/* The earliest failure names the round. */
	assert_int_equal(d.first, 2);
	assert_true(d.barrier);
	/* One role out of restarts ends the job even when another could restart. */
	roles[0].epoch = 2;
	r[1].epoch = 2;
	phx_restart_decide(r, 4, roles, 2, &d);
	assert_int_equal(d.action, PHX_ACT_GIVE_UP);
	assert_int_equal(d.first, 1);
	assert_int_equal(d.role_action[1], PHX_ACT_RESTART);
}

static void test_success_needs_every_role(void **state)
{
	struct phx_role_state roles[2] = { { PHX_RESTART_GROUP, 1, 2 },
					   { PHX_RESTART_SELF, 0, 1 } };
	struct phx_report r[] = { rep(0, 1, PHX_NODE_DONE, 0, 0), rep(0, 1, PHX_NODE_DONE, 0, 0),
				  rep(1, 0, PHX_NODE_DONE, 0, 0),
				  rep(1, 0, PHX_NODE_RUNNING, 0, 0) };
	struct phx_decision d;

	phx_restart_decide(r, 4, roles, 2, &d);
	assert_int_equal(d.action, PHX_ACT_CONTINUE);
	r[3].state = PHX_NODE_DONE;
	/* A self role's done reports count whatever their epoch. */
	r[3].epoch = 5;
	phx_restart_decide(r, 4, roles, 2, &d);
	assert_int_equal(d.action, PHX_ACT_SUCCESS);
	/* A group role's done report of an old epoch does not. */
	r[0].epoch = 0;
	phx_restart_decide(r, 4, roles, 2, &d);
	assert_int_equal(d.action, PHX_ACT_CONTINUE);
}

static void test_preemption(void **state)
{
	struct phx_report r[] = { rep(0, 0, PHX_NODE_RUNNING, 0, 0),
				  rep(0, 0, PHX_NODE_PREEMPTING, 0, 0),
				  rep(1, 0, PHX_NODE_FAILED, 5, 20),
				  rep(1, 0, PHX_NODE_DONE, 0, 0) };
	struct phx_decision d;

	/* One agent got the signal: all save, nothing restarts. */
	phx_restart_decide(r, 4, two, 2, &d);
	assert_int_equal(d.action, PHX_ACT_CONTINUE);
	assert_true(d.preempt);
	assert_false(d.barrier);
	assert_int_equal(d.role_action[1], PHX_ACT_CONTINUE);
	r[0].state = r[1].state = r[2].state = PHX_NODE_PREEMPTED;
	phx_restart_decide(r, 4, two, 2, &d);
	assert_int_equal(d.action, PHX_ACT_PREEMPTED);
	/* A shutdown still wins. */
	r[3].state = PHX_NODE_SHUTDOWN;
	phx_restart_decide(r, 4, two, 2, &d);
	assert_int_equal(d.action, PHX_ACT_SHUTDOWN);
}

static void test_rates_round_trip(void **state)
{
	struct phx_rate in[2] = { { .rank = 7, .step_ns = 123456000, .steps = 40 },
				  { .rank = 0, .step_ns = 999, .steps = 1 } },
			out[4];
	char buf[64];
	size_t off = 0, n = 0;

	assert_int_equal(phx_rate_format(&in[0], buf, sizeof(buf), &off), 0);
	assert_int_equal(phx_rate_format(&in[1], buf, sizeof(buf), &off), 0);
	assert_string_equal(buf, " 7:123456:40 0:0:1");
	/* A zero step time in microseconds parses. */
	assert_int_equal(phx_rates_parse(buf, 2, 5, 8, out, 4, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(out[0].rank, 7);
	assert_int_equal(out[0].role, 2);
	assert_int_equal(out[0].agent, 5);
	assert_true(out[0].step_ns == 123456000);
	assert_true(out[0].steps == 40);
	/* Full: the rest is not written, and it says so. */
	off = 0;
	assert_int_equal(phx_rate_format(&in[0], buf, 8, &off), -1);
	assert_int_equal(off, 0);
	assert_string_equal(buf, "");
}

static void test_rates_refusals(void **state)
{
	static const char *const bad[] = {
		"7:1:1",   " 7:1",    " 7:1:0",	       " 8:1:1",
		" -1:1:1", " 7:+1:1", " 7: 1:1",       " 7:1:1 ",
		" 7:1:1x", " a:1:1",  " 7:1:1  1:1:1", " 1:99999999999999999999:1"
	};
	struct phx_rate out[4];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t n = 0;

		if (phx_rates_parse(bad[i], 0, 0, 8, out, 4, &n) != -1)
			fail_msg("'%s' accepted", bad[i]);
	}
	{
		size_t n = 3;

		/* Room for one more only. */
		assert_int_equal(phx_rates_parse(" 1:1:1 2:1:1", 0, 0, 8, out, 4, &n), -1);
	}
}

static struct phx_rate rate(unsigned long rank, unsigned role, uint64_t ms)
{
	return (struct phx_rate){
		.rank = rank, .role = role, .step_ns = ms * 1000000, .steps = 10
	};
}

static void test_straggler_detect(void **state)
{
	struct phx_rate r[] = {
		rate(0, 0, 100), rate(1, 0, 104),  rate(2, 0, 99),  rate(3, 0, 210),
		rate(4, 1, 900), rate(5, 1, 1000), rate(6, 0, 101), rate(7, 2, 5000)
	};
	uint64_t median[8];
	unsigned peers[8];
	bool slow[8];

	/* 100% slower than the median (101 ms of role 0): rank 3 only. */
	assert_int_equal(phx_straggler_detect(r, 8, 100, median, peers, slow), 1);
	assert_true(slow[3]);
	assert_true(median[3] == 101000000);
	assert_int_equal(peers[3], 5);
	/* Role 1's ranks are compared among themselves; role 2 has no peer to compare with. */
	assert_false(slow[4] || slow[5] || slow[7]);
	assert_int_equal(peers[7], 1);
	/* A lower threshold also catches rank 5 (the lower median of two is 900). */
	assert_int_equal(phx_straggler_detect(r, 8, 10, median, peers, slow), 2);
	assert_true(slow[3] && slow[5]);
	/* Off. */
	assert_int_equal(phx_straggler_detect(r, 8, 0, median, peers, slow), 0);
	assert_false(slow[3]);
	/* Equal ranks: nobody. */
	for (int i = 0; i < 8; i++)
		r[i] = rate((unsigned long)i, 0, 50);
	assert_int_equal(phx_straggler_detect(r, 8, 1, median, peers, slow), 0);
	assert_int_equal(phx_straggler_detect(r, 0, 100, median, peers, slow), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_fields),
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_assign_nodes),
		cmocka_unit_test(test_keep_one_role),
		cmocka_unit_test(test_role_argv),
		cmocka_unit_test(test_group_role_restarts_alone),
		cmocka_unit_test(test_self_role_restarts_without_barrier),
		cmocka_unit_test(test_both_roles_fail_in_one_round),
		cmocka_unit_test(test_success_needs_every_role),
		cmocka_unit_test(test_preemption),
		cmocka_unit_test(test_rates_round_trip),
		cmocka_unit_test(test_rates_refusals),
		cmocka_unit_test(test_straggler_detect),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
