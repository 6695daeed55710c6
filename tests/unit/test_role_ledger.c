/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The role ledger record a job's driver sends phalanx-ckptd: what formats
 * parses back the same, and anything but the grammar is refused with why.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "checkpoint/proto/ckpt_wire.h"
#include "checkpoint/proto/role_ledger.h"

#define GOOD                                                                                       \
	"trainer run=2 ranks=16 productive=1000 waiting=20 restart=30 lost=4 detect=5 failures=1"

static void test_part_names(void **state)
{
	(void)state;
	assert_string_equal(phx_rl_part_name(PHX_RL_PRODUCTIVE), "productive");
	assert_string_equal(phx_rl_part_name(PHX_RL_WAITING), "waiting");
	assert_string_equal(phx_rl_part_name(PHX_RL_RESTART), "restart");
	assert_string_equal(phx_rl_part_name(PHX_RL_LOST), "lost_work");
	assert_string_equal(phx_rl_part_name(PHX_RL_DETECT), "detection");
}

static void test_round_trip(void **state)
{
	struct phx_role_ledger l, back;
	char buf[PHX_WIRE_REASON_MAX + 1], err[256];

	(void)state;
	assert_int_equal(phx_rl_parse(GOOD, &l, err, sizeof(err)), 0);
	assert_string_equal(l.name, "trainer");
	assert_int_equal(l.run, 2);
	assert_int_equal(l.ranks, 16);
	assert_int_equal(l.part_ms[PHX_RL_PRODUCTIVE], 1000);
	assert_int_equal(l.part_ms[PHX_RL_WAITING], 20);
	assert_int_equal(l.part_ms[PHX_RL_RESTART], 30);
	assert_int_equal(l.part_ms[PHX_RL_LOST], 4);
	assert_int_equal(l.part_ms[PHX_RL_DETECT], 5);
	assert_int_equal(l.failures, 1);
	assert_int_equal(phx_rl_format(&l, buf, sizeof(buf)), (int)strlen(GOOD));
	assert_string_equal(buf, GOOD);

	/* The largest record of every field fits the wire's reason, and comes back. */
	memset(&l, 0, sizeof(l));
	memset(l.name, 'r', PHX_RL_NAME_MAX);
	l.run = UINT64_MAX;
	l.ranks = UINT32_MAX;
	l.failures = UINT32_MAX;
	for (int i = 0; i < PHX_RL_PARTS; i++)
		l.part_ms[i] = PHX_RL_VALUE_MAX;
	assert_true(phx_rl_format(&l, buf, sizeof(buf)) > 0);
	assert_int_equal(phx_rl_parse(buf, &back, err, sizeof(err)), 0);
	assert_memory_equal(&l, &back, sizeof(l));
	/* Too small a buffer is -1, not a cut record. */
	assert_int_equal(phx_rl_format(&l, buf, 20), -1);

	/* Names take letters, digits, _ and -, after a letter. */
	assert_int_equal(phx_rl_parse("Roll-out_2 run=0 ranks=0 productive=0 waiting=0 restart=0 "
				      "lost=0 detect=0 failures=0",
				      &l, err, sizeof(err)),
			 0);
	assert_string_equal(l.name, "Roll-out_2");
}

/* Each refusal, and a word of its reason. */
static void refused(const char *text, const char *why)
{
	struct phx_role_ledger l;
	char err[256] = "";

	if (phx_rl_parse(text, &l, err, sizeof(err)) != -1)
		fail_msg("accepted: %s", text);
	if (!strstr(err, why))
		fail_msg("'%s': reason '%s' lacks '%s'", text, err, why);
	assert_non_null(strstr(err, "role record"));
}

#define TAIL " run=1 ranks=1 productive=1 waiting=1 restart=1 lost=1 detect=1 failures=1"

static void test_bad_name(void **state)
{
	char name[PHX_RL_NAME_MAX + 2 + sizeof(TAIL)];

	(void)state;
	refused("", "no role name");
	refused(" run=1", "no role name");
	refused("1trainer" TAIL, "start with a letter");
	refused("_trainer" TAIL, "start with a letter");
	refused("train.er" TAIL, "character 0x2e");
	refused("train\ter" TAIL, "character 0x09");
	refused("trainer=" TAIL, "character 0x3d");
	memset(name, 'a', PHX_RL_NAME_MAX + 1);
	memcpy(name + PHX_RL_NAME_MAX + 1, TAIL, sizeof(TAIL));
	refused(name, "at most 31");
	/* 31 is fine. */
	memcpy(name + PHX_RL_NAME_MAX, TAIL, sizeof(TAIL));
	{
		struct phx_role_ledger l;
		char err[256];

		assert_int_equal(phx_rl_parse(name, &l, err, sizeof(err)), 0);
		assert_int_equal(strlen(l.name), PHX_RL_NAME_MAX);
	}
}

static void test_missing_key(void **state)
{
	(void)state;
	refused("trainer", "ends before \"run=\"");
	refused("trainer run=1 ranks=1 productive=1 waiting=1 restart=1 lost=1 detect=1",
		"ends before \"failures=\"");
	refused("trainer run=1 ranks=1 productive=1 waiting=1 lost=1 detect=1 failures=1",
		"\"lost=\" where \"restart=\" belongs");
	refused("trainer run=1 ranks=1 productive=1 waiting=1 restart=1 lost=1 detect=1 failures=1 "
		"extra=2",
		"stray text");
	refused("trainer run=1 ranks=1 productive=1 waiting=1 restart=1 lost=1 detect=1 ",
		"ends before \"failures=\"");
	refused("trainer run ranks=1", "\"run\" where \"run=\"");
	refused("trainer bogus=1" TAIL, "\"bogus\" where \"run=\"");
}

static void test_wrong_order(void **state)
{
	(void)state;
	refused("trainer ranks=1 run=1 productive=1 waiting=1 restart=1 lost=1 detect=1 failures=1",
		"\"ranks=\" where \"run=\" belongs");
	refused("trainer run=1 ranks=1 productive=1 restart=1 waiting=1 lost=1 detect=1 failures=1",
		"\"restart=\" where \"waiting=\" belongs");
	refused("trainer run=1 ranks=1 productive=1 waiting=1 restart=1 lost=1 failures=1 detect=1",
		"\"failures=\" where \"detect=\" belongs");
	/* Single spaces only. */
	refused("trainer  run=1 ranks=1 productive=1 waiting=1 restart=1 lost=1 detect=1 "
		"failures=1",
		"more than one space");
	refused("trainer run=1  ranks=1 productive=1 waiting=1 restart=1 lost=1 detect=1 "
		"failures=1",
		"more than one space");
	refused("trainer run=1\tranks=1 productive=1 waiting=1 restart=1 lost=1 detect=1 "
		"failures=1",
		"after its digits");
}

static void test_overflow(void **state)
{
	char text[256];

	(void)state;
	/* At each bound, and one above it. */
	snprintf(text, sizeof(text),
		 "t run=18446744073709551615 ranks=4294967295 productive=%llu waiting=0 "
		 "restart=0 lost=0 detect=0 failures=4294967295",
		 (unsigned long long)PHX_RL_VALUE_MAX);
	{
		struct phx_role_ledger l;
		char err[256];

		assert_int_equal(phx_rl_parse(text, &l, err, sizeof(err)), 0);
		assert_true(l.run == UINT64_MAX && l.ranks == UINT32_MAX &&
			    l.failures == UINT32_MAX &&
			    l.part_ms[PHX_RL_PRODUCTIVE] == PHX_RL_VALUE_MAX);
	}
	refused("t run=18446744073709551616 ranks=1 productive=1 waiting=1 restart=1 lost=1 "
		"detect=1 failures=1",
		"run= is above");
	refused("t run=99999999999999999999999 ranks=1 productive=1 waiting=1 restart=1 lost=1 "
		"detect=1 failures=1",
		"run= is above");
	refused("t run=1 ranks=4294967296 productive=1 waiting=1 restart=1 lost=1 detect=1 "
		"failures=1",
		"ranks= is above");
	refused("t run=1 ranks=1 productive=1 waiting=1 restart=1 lost=1 detect=1 "
		"failures=4294967296",
		"failures= is above");
	snprintf(text, sizeof(text),
		 "t run=1 ranks=1 productive=1 waiting=1 restart=1 lost=%llu detect=1 failures=1",
		 (unsigned long long)PHX_RL_VALUE_MAX + 1);
	refused(text, "lost= is above");
}

static void test_sign_and_digits(void **state)
{
	(void)state;
	refused("t run=-1 ranks=1 productive=1 waiting=1 restart=1 lost=1 detect=1 failures=1",
		"run= has a sign");
	refused("t run=1 ranks=+1 productive=1 waiting=1 restart=1 lost=1 detect=1 failures=1",
		"ranks= has a sign");
	refused("t run=1 ranks=1 productive= waiting=1 restart=1 lost=1 detect=1 failures=1",
		"productive= has no decimal value");
	refused("t run=1 ranks=1 productive=1 waiting=0x10 restart=1 lost=1 detect=1 failures=1",
		"waiting= has \"x10");
	refused("t run=1 ranks=1 productive=1 waiting=1 restart=1e3 lost=1 detect=1 failures=1",
		"restart= has \"e3");
	refused("t run=1 ranks=1 productive=1 waiting=1 restart=1 lost=1 detect=1 failures=",
		"failures= has no decimal value");
}

static void test_trailing_garbage(void **state)
{
	(void)state;
	refused(GOOD " ", "stray text");
	refused(GOOD "x", "failures= has \"x\"");
	refused(GOOD "\n", "failures= has \"\n\"");
	refused(GOOD " trainer", "stray text \" trainer\"");
}

static void test_too_long(void **state)
{
	char text[400];
	int n;

	(void)state;
	/* Leading zeros are digits too, but no record is longer than the wire's reason. */
	n = snprintf(text, sizeof(text), "t run=");
	memset(text + n, '0', 240);
	snprintf(text + n + 240, sizeof(text) - (size_t)n - 240, "1%s", TAIL + 6);
	assert_true(strlen(text) > PHX_WIRE_REASON_MAX);
	refused(text, "longer than 255 bytes");
	/* The same zeros, fewer of them, fit. */
	n = snprintf(text, sizeof(text), "t run=");
	memset(text + n, '0', 100);
	snprintf(text + n + 100, sizeof(text) - (size_t)n - 100, "7%s", TAIL + 6);
	{
		struct phx_role_ledger l;
		char err[256];

		assert_int_equal(phx_rl_parse(text, &l, err, sizeof(err)), 0);
		assert_int_equal(l.run, 7);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_part_names),	cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_bad_name),	cmocka_unit_test(test_missing_key),
		cmocka_unit_test(test_wrong_order),	cmocka_unit_test(test_overflow),
		cmocka_unit_test(test_sign_and_digits), cmocka_unit_test(test_trailing_garbage),
		cmocka_unit_test(test_too_long),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
