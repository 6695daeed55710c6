/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Roles in steps of their own: the role fields (nodes=MIN-MAX, spares=,
 * max-relaunches=, fatal=) and the driver's rules for a role's nodes: a
 * node lost in one role leaves the others' nodes alone; a fixed role takes
 * its spare, a shared one, then a node of an elastic pool above its least;
 * a pool refills from a spare, else shrinks to its least; a fatal role
 * that cannot go on ends the job, another waits; nodes that come back go
 * to waiting roles first, then to pools below their most.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "launcher/role.h"
#include "launcher/driver/driver_roles.h"

#define NALLOC_MAX 16

struct job {
	struct phx_role roles[PHX_ROLE_MAX];
	size_t n;
	bool bad[NALLOC_MAX];
	struct phx_drv_roles j;
};

static void parse(struct job *t, const char *spec)
{
	char err[512];

	if (phx_role_parse(spec, &t->roles[t->n], err, sizeof(err)) < 0)
		fail_msg("%s: %s", spec, err);
	t->n++;
}

static void init(struct job *t, size_t nalloc)
{
	char err[512];

	if (phx_drv_roles_init(&t->j, t->roles, t->n, nalloc, t->bad, 3, err, sizeof(err)) < 0)
		fail_msg("%s", err);
}

static void done(struct job *t)
{
	phx_drv_roles_free(&t->j);
	for (size_t i = 0; i < t->n; i++)
		phx_role_free(&t->roles[i]);
}

/* The roles' owners of the allocation's nodes as a string: "001-1", '-' free. */
static const char *owners(const struct job *t)
{
	static char buf[NALLOC_MAX + 1];

	for (size_t i = 0; i < t->j.nalloc; i++)
		buf[i] = t->j.owner[i] < 0 ? '-' : (char)('0' + t->j.owner[i]);
	buf[t->j.nalloc] = '\0';
	return buf;
}

static void lost(struct job *t, size_t role, size_t node, struct phx_drv_role_decision *d)
{
	t->bad[node] = true;
	phx_drv_role_lost(&t->j, role, node, d);
}

static void test_role_fields(void **state)
{
	static const char *const bad[] = {
		"r:nodes=3-2", "r:nodes=2-",	      "r:nodes=-3",	     "r:fatal=maybe",
		"r:spares=x",  "r:spares=1:spares=2", "r:max-relaunches=-1", "r:nodes=0-2",
	};
	struct phx_role r;
	char err[512];

	assert_int_equal(phx_role_parse("rollout:nodes=2-3:spares=1:max-relaunches=4:fatal=no:"
					"restart=self",
					&r, err, sizeof(err)),
			 0);
	assert_int_equal(r.nodes, 2);
	assert_int_equal(r.nodes_max, 3);
	assert_int_equal(r.spares, 1);
	assert_int_equal(r.max_relaunches, 4);
	assert_int_equal(r.fatal, PHX_FATAL_NO);
	phx_role_free(&r);
	assert_int_equal(phx_role_parse("trainer:nodes=2", &r, err, sizeof(err)), 0);
	assert_int_equal(r.nodes_max, 0);
	assert_int_equal(r.max_relaunches, -1);
	assert_int_equal(r.fatal, PHX_FATAL_DEFAULT);
	phx_role_free(&r);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (phx_role_parse(bad[i], &r, err, sizeof(err)) == 0)
			fail_msg("%s was accepted", bad[i]);
		assert_non_null(strstr(err, "--role r"));
	}
	assert_int_equal(phx_role_parse("r:nodes=3-2", &r, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "e.g. nodes=2-3"));
	(void)state;
}

static void test_init(void **state)
{
	struct job t = { .n = 0 };
	char err[512];

	parse(&t, "trainer:nodes=2:spares=1");
	parse(&t, "rollout:nodes=2-3");
	init(&t, 6);
	/* Least first, then spares, then pools up to their most. */
	assert_string_equal(owners(&t), "0011-1");
	assert_int_equal(t.j.keep[4], 0);
	assert_true(t.j.role[0].fatal);
	assert_false(t.j.role[1].fatal);
	assert_int_equal(t.j.role[0].max_relaunches, 3);
	phx_drv_roles_free(&t.j);
	/* A bad node is left out; the pool stays at its least. */
	t.bad[1] = true;
	init(&t, 6);
	assert_string_equal(owners(&t), "0-011-");
	assert_int_equal(t.j.role[1].nodes, 2);
	phx_drv_roles_free(&t.j);
	t.bad[2] = true;
	assert_int_equal(phx_drv_roles_init(&t.j, t.roles, t.n, 6, t.bad, 3, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "need 5 node(s)"));
	done(&t);
	(void)state;
}

/* A rollout node lost: the pool refills from a shared spare, then shrinks, then waits. */
static void test_pool_loss(void **state)
{
	struct job t = { .n = 0 };
	struct phx_drv_role_decision d;

	parse(&t, "trainer:nodes=2:spares=1");
	parse(&t, "rollout:nodes=2-3");
	init(&t, 7);
	assert_string_equal(owners(&t), "0011-1-");
	lost(&t, 1, 3, &d);
	assert_int_equal(d.action, PHX_ROLE_GROW);
	assert_int_equal(d.node, 6); /* the shared spare, not the trainer's (4) */
	assert_string_equal(owners(&t), "001--11");
	assert_int_equal(t.j.role[0].epoch, 0);
	assert_int_equal(t.j.role[1].epoch, 1);
	lost(&t, 1, 5, &d);
	assert_int_equal(d.action, PHX_ROLE_SHRINK);
	assert_string_equal(owners(&t), "001---1");
	lost(&t, 1, 6, &d);
	assert_int_equal(d.action, PHX_ROLE_WAIT); /* not fatal: the trainer goes on */
	assert_int_equal(t.j.role[1].state, PHX_ROLE_WAITING);
	assert_string_equal(owners(&t), "001----");
	assert_int_equal(t.j.role[0].relaunches, 0);
	done(&t);
	(void)state;
}

/* A trainer node lost: its spare, then a node of the pool above its least, then the end. */
static void test_fixed_loss(void **state)
{
	struct job t = { .n = 0 };
	struct phx_drv_role_decision d;

	parse(&t, "trainer:nodes=2:spares=1");
	parse(&t, "rollout:nodes=2-3");
	init(&t, 6);
	lost(&t, 0, 0, &d);
	assert_int_equal(d.action, PHX_ROLE_RELAUNCH);
	assert_int_equal(d.node, 4);
	assert_int_equal(d.donor, -1);
	assert_string_equal(owners(&t), "-01101");
	lost(&t, 0, 1, &d);
	assert_int_equal(d.action, PHX_ROLE_RELAUNCH);
	assert_int_equal(d.donor, 1);
	assert_int_equal(d.node, 5); /* the pool's last node */
	assert_string_equal(owners(&t), "--1100");
	assert_int_equal(t.j.role[1].nodes, 2);
	assert_int_equal(t.j.role[1].epoch, 1);
	lost(&t, 0, 4, &d);
	assert_int_equal(d.action, PHX_ROLE_END_JOB); /* the pool is at its least */
	assert_non_null(strstr(d.why, "requeued"));
	assert_int_equal(t.j.role[0].relaunches, 2);
	done(&t);
	(void)state;
}

static void test_max_relaunches(void **state)
{
	struct job t = { .n = 0 };
	struct phx_drv_role_decision d;

	parse(&t, "trainer:nodes=1:max-relaunches=1");
	parse(&t, "reward:nodes=1:max-relaunches=0");
	init(&t, 5);
	lost(&t, 1, 1, &d);
	assert_int_equal(d.action, PHX_ROLE_WAIT); /* gave up; not fatal */
	assert_int_equal(t.j.role[1].state, PHX_ROLE_GAVE_UP);
	assert_string_equal(owners(&t), "0----");
	assert_int_equal(t.j.role[1].nodes, 0);
	lost(&t, 0, 0, &d);
	assert_int_equal(d.action, PHX_ROLE_RELAUNCH);
	lost(&t, 0, d.node, &d);
	assert_int_equal(d.action, PHX_ROLE_END_JOB);
	assert_non_null(strstr(d.why, "max-relaunches=1"));
	done(&t);
	(void)state;
}

/*
 * A fixed role, fatal or not, takes a node of a pool above its least; nodes
 * that come back go to a waiting role first, then to a pool below its most.
 */
static void test_returned(void **state)
{
	struct job t = { .n = 0 };
	struct phx_drv_role_decision d;

	parse(&t, "trainer:nodes=1");
	parse(&t, "rollout:nodes=2-3");
	parse(&t, "judge:nodes=1:fatal=no");
	init(&t, 5);
	assert_string_equal(owners(&t), "01121");
	lost(&t, 2, 3, &d);
	assert_int_equal(d.action, PHX_ROLE_RELAUNCH);
	assert_int_equal(d.donor, 1);
	assert_string_equal(owners(&t), "011-2");
	lost(&t, 1, 2, &d);
	assert_int_equal(d.action, PHX_ROLE_WAIT);
	assert_int_equal(t.j.role[1].state, PHX_ROLE_WAITING);
	t.bad[3] = false;
	assert_int_equal(phx_drv_role_returned(&t.j, 3, &d), 1);
	assert_int_equal(d.action, PHX_ROLE_GROW);
	assert_int_equal(t.j.role[1].state, PHX_ROLE_RUNNING);
	t.bad[2] = false;
	assert_int_equal(phx_drv_role_returned(&t.j, 2, &d), 1);
	assert_int_equal(d.action, PHX_ROLE_GROW);
	assert_string_equal(owners(&t), "01112");
	/* A node that is not free goes nowhere. */
	assert_int_equal(phx_drv_role_returned(&t.j, 3, &d), -1);
	done(&t);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_role_fields),    cmocka_unit_test(test_init),
		cmocka_unit_test(test_pool_loss),      cmocka_unit_test(test_fixed_loss),
		cmocka_unit_test(test_max_relaunches), cmocka_unit_test(test_returned),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
