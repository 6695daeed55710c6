/* SPDX-License-Identifier: Apache-2.0 */
/* The agents' liveness watch and the lost line the driver reads. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "launcher/liveness.h"
#include "launcher/result.h"

#define MS 1000000ull

/*
 * Whatever the size: every agent is watched by min(WATCH, size-1) others,
 * and exactly the agents that beat to it are the ones it watches, so each
 * beat reaches a watcher and none is wasted.
 */
static void test_ring_beats_reach_the_watchers(void **state)
{
	(void)state;
	for (unsigned size = 1; size <= 70; size++) {
		unsigned watched_by[70] = { 0 };

		for (unsigned me = 0; me < size; me++) {
			struct phx_liveness l;

			phx_liveness_init(&l, me, size, 600 * MS, 0);
			assert_int_equal(l.n, size > 2 ? 2 : size - 1);
			for (unsigned i = 0; i < l.n; i++) {
				unsigned to = phx_liveness_target(&l, i);
				struct phx_liveness t;

				assert_int_not_equal(to, me);
				watched_by[me]++;
				/* The target watches me: my beat counts there. */
				phx_liveness_init(&t, to, size, 600 * MS, 0);
				assert_true(phx_liveness_heard(&t, me, PHX_BEAT_STEADY, 1));
			}
			/* A beat from an agent this one does not watch is not its business. */
			if (size > 3)
				assert_false(phx_liveness_heard(&l, (me + 1) % size,
								PHX_BEAT_STEADY, 1));
		}
		for (unsigned me = 0; me < size; me++)
			assert_int_equal(watched_by[me], size > 2 ? 2 : size - 1);
	}
}

static void test_silence_is_found_once(void **state)
{
	struct phx_liveness l;
	uint64_t quiet = 0;

	(void)state;
	phx_liveness_init(&l, 5, 8, 600 * MS, 1000 * MS);
	assert_int_equal(phx_liveness_interval(&l), 100 * MS);
	/* Settling at first: the first beat may take four timeouts. */
	assert_int_equal(phx_liveness_silent(&l, 3300 * MS, &quiet), -1);
	assert_true(phx_liveness_heard(&l, 4, PHX_BEAT_STEADY, 2000 * MS));
	assert_true(phx_liveness_heard(&l, 3, PHX_BEAT_STEADY, 2000 * MS));
	/* Beats keep both alive. */
	for (uint64_t t = 2000; t < 5000; t += 100) {
		phx_liveness_heard(&l, 4, PHX_BEAT_STEADY, t * MS);
		phx_liveness_heard(&l, 3, PHX_BEAT_STEADY, t * MS);
		assert_int_equal(phx_liveness_silent(&l, t * MS + 50 * MS, &quiet), -1);
	}
	/* Agent 4 stops at 4900 ms; agent 3 goes on. */
	for (uint64_t t = 5000; t < 5500; t += 100) {
		phx_liveness_heard(&l, 3, PHX_BEAT_STEADY, t * MS);
		assert_int_equal(phx_liveness_silent(&l, t * MS, &quiet), -1);
	}
	assert_int_equal(phx_liveness_silent(&l, 5500 * MS, &quiet), 4);
	assert_int_equal(quiet, 600 * MS);
	/* Once: a second look finds nothing new, though 4 is still silent. */
	assert_int_equal(phx_liveness_silent(&l, 9000 * MS, &quiet), 3);
	assert_int_equal(phx_liveness_silent(&l, 9000 * MS, &quiet), -1);
}

/*
 * An agent whose workers start (again) shares its CPUs with them: four
 * timeouts while its beats say so, one once they say its workers run.
 */
static void test_a_settling_agent_gets_longer(void **state)
{
	struct phx_liveness l;
	uint64_t quiet;

	(void)state;
	phx_liveness_init(&l, 0, 2, 600 * MS, 0);
	assert_true(phx_liveness_heard(&l, 1, PHX_BEAT_SETTLING, 100 * MS));
	assert_int_equal(phx_liveness_silent(&l, 2499 * MS, &quiet), -1);
	assert_true(phx_liveness_heard(&l, 1, PHX_BEAT_STEADY, 2400 * MS));
	assert_int_equal(phx_liveness_silent(&l, 2999 * MS, &quiet), -1);
	/* Its workers restart: settling again. */
	assert_true(phx_liveness_heard(&l, 1, PHX_BEAT_SETTLING, 2900 * MS));
	assert_int_equal(phx_liveness_silent(&l, 5200 * MS, &quiet), -1);
	assert_int_equal(phx_liveness_silent(&l, 5300 * MS, &quiet), 1);
	assert_int_equal(quiet, 2400 * MS);
}

static void test_steady_silence_is_one_timeout(void **state)
{
	struct phx_liveness l;
	uint64_t quiet;

	(void)state;
	phx_liveness_init(&l, 0, 2, 600 * MS, 0);
	assert_true(phx_liveness_heard(&l, 1, PHX_BEAT_STEADY, 100 * MS));
	assert_int_equal(phx_liveness_silent(&l, 699 * MS, &quiet), -1);
	assert_int_equal(phx_liveness_silent(&l, 700 * MS, &quiet), 1);
}

static void test_an_agent_that_ends_is_not_lost(void **state)
{
	struct phx_liveness l;
	uint64_t quiet;

	(void)state;
	phx_liveness_init(&l, 0, 2, 600 * MS, 0);
	assert_int_equal(l.n, 1);
	assert_true(phx_liveness_heard(&l, 1, PHX_BEAT_STEADY, 100 * MS));
	assert_true(phx_liveness_heard(&l, 1, PHX_BEAT_END, 200 * MS));
	assert_int_equal(phx_liveness_silent(&l, 60000 * MS, &quiet), -1);
	/* A late (reordered) beat does not bring it back. */
	phx_liveness_heard(&l, 1, PHX_BEAT_STEADY, 150 * MS);
	assert_int_equal(phx_liveness_silent(&l, 60000 * MS, &quiet), -1);
}

static void test_one_agent_watches_none(void **state)
{
	struct phx_liveness l;
	uint64_t quiet;

	(void)state;
	phx_liveness_init(&l, 0, 1, 600 * MS, 0);
	assert_int_equal(l.n, 0);
	assert_false(phx_liveness_heard(&l, 0, PHX_BEAT_STEADY, 1));
	assert_int_equal(phx_liveness_silent(&l, 60000 * MS, &quiet), -1);
}

static void test_lost_line(void **state)
{
	char line[512], node[64];
	int n;

	(void)state;
	n = phx_lost_format("gpu-a17", 612, "gpu-a18", line, sizeof(line));
	assert_true(n > 0 && (size_t)n < sizeof(line));
	assert_int_equal(line[n - 1], '\n');
	assert_non_null(strstr(line, "612 ms"));
	assert_int_equal(phx_lost_parse(line, (size_t)n, node, sizeof(node)), 0);
	assert_string_equal(node, "gpu-a17");
	/* Not lost lines: another prefix, no host, a host with a space, too long. */
	assert_int_equal(phx_lost_parse("phalanx: result 1", 17, node, sizeof(node)), -1);
	assert_int_equal(phx_lost_parse("phalanx: lost : x", 17, node, sizeof(node)), -1);
	assert_int_equal(phx_lost_parse("phalanx: lost a b: x", 20, node, sizeof(node)), -1);
	assert_int_equal(phx_lost_parse("phalanx: lost node1", 19, node, sizeof(node)), -1);
	assert_int_equal(phx_lost_parse(line, (size_t)n, node, 4), -1);
}

/* The datagram form: the step's key, a space, the line; anything else is dropped. */
static void test_lost_report(void **state)
{
	static const char key[] = "00112233445566778899aabbccddeeff";
	char d[1200], node[64];
	int n;

	(void)state;
	n = snprintf(d, sizeof(d), "%s ", key);
	n += phx_lost_format("node7", 650, "node8", d + n, sizeof(d) - (size_t)n);
	assert_int_equal(phx_lost_report_parse(d, (size_t)n, key, node, sizeof(node)), 0);
	assert_string_equal(node, "node7");
	/* Another step's key (one digit off), a cut key, no space, a bare line. */
	assert_int_equal(phx_lost_report_parse(d, (size_t)n, "00112233445566778899aabbccddeefe",
					       node, sizeof(node)),
			 -1);
	assert_int_equal(phx_lost_report_parse(d, (size_t)n, "0011", node, sizeof(node)), -1);
	d[32] = 'x';
	assert_int_equal(phx_lost_report_parse(d, (size_t)n, key, node, sizeof(node)), -1);
	assert_int_equal(phx_lost_report_parse(d + 33, (size_t)n - 33, key, node, sizeof(node)),
			 -1);
	/* Longer than any report: a flood of big datagrams costs no parse. */
	memset(d, 'a', sizeof(d));
	memcpy(d, key, 32);
	d[32] = ' ';
	assert_int_equal(phx_lost_report_parse(d, sizeof(d), key, node, sizeof(node)), -1);
}

/* An agent alone in its step beats to the driver: node and state, with the key only. */
static void test_alive_report(void **state)
{
	const char *key = "00112233445566778899aabbccddeeff";
	char d[PHX_LOST_REPORT_MAX + 8], node[256];
	enum phx_beat b;
	int n;

	(void)state;
	for (enum phx_beat want = PHX_BEAT_STEADY; want <= PHX_BEAT_END; want++) {
		n = snprintf(d, sizeof(d), "%s ", key);
		n += phx_alive_format("node7", want, d + n, sizeof(d) - (size_t)n);
		assert_int_equal(phx_alive_report_parse(d, (size_t)n, key, node, sizeof(node), &b),
				 0);
		assert_string_equal(node, "node7");
		assert_int_equal(b, want);
		/* Not a lost report, whatever it names. */
		assert_int_equal(phx_lost_report_parse(d, (size_t)n, key, node, sizeof(node)), -1);
	}
	/* Another key, a state it does not know, a state cut short, trailing bytes. */
	assert_int_equal(phx_alive_report_parse(d, (size_t)n, "00112233445566778899aabbccddeefe",
						node, sizeof(node), &b),
			 -1);
	n = snprintf(d, sizeof(d), "%s phalanx: alive node7 dead", key);
	assert_int_equal(phx_alive_report_parse(d, (size_t)n, key, node, sizeof(node), &b), -1);
	n = snprintf(d, sizeof(d), "%s phalanx: alive node7 stead", key);
	assert_int_equal(phx_alive_report_parse(d, (size_t)n, key, node, sizeof(node), &b), -1);
	n = snprintf(d, sizeof(d), "%s phalanx: alive node7 steady\n", key);
	assert_int_equal(phx_alive_report_parse(d, (size_t)n, key, node, sizeof(node), &b), -1);
	n = snprintf(d, sizeof(d), "%s phalanx: alive node:7 steady", key);
	assert_int_equal(phx_alive_report_parse(d, (size_t)n, key, node, sizeof(node), &b), -1);
	/* A node name longer than the caller's room. */
	n = snprintf(d, sizeof(d), "%s phalanx: alive node7 steady", key);
	assert_int_equal(phx_alive_report_parse(d, (size_t)n, key, node, 5, &b), -1);
}

/* Every agent of a role's step reports its workers' lowest step and their waits. */
static void test_progress_report(void **state)
{
	const char *key = "00112233445566778899aabbccddeeff";
	const struct phx_progress cases[] = {
		{ .stepped = false, .wait_ms = 0 },
		{ .stepped = true, .step = 0, .wait_ms = 12, .resumed = true, .resumed_step = 0 },
		{ .stepped = true, .step = 9999999999999999999ull, .wait_ms = 1234567890123ull },
		{ .stepped = false, .wait_ms = 7, .resumed = true, .resumed_step = 40 },
	};
	const char *bad[] = {
		"phalanx: progress node7 -1 5 -",
		"phalanx: progress node7 1 -5 -",
		"phalanx: progress node7 1 5",
		"phalanx: progress node7 1 5 - ",
		"phalanx: progress node7 1  5 -",
		"phalanx: progress node7 +1 5 -",
		"phalanx: progress node7 1 5 -\n",
		"phalanx: progress node7 10000000000000000000 5 -",
		"phalanx: progress node:7 1 5 -",
		"phalanx: progress node7 - - -",
		"phalanx: progress  1 5 -",
		"phalanx: alive node7 steady",
		"phalanx: progress node7 1 5 --",
		"phalanx: progress node7 1 5 -3",
	};
	char d[PHX_LOST_REPORT_MAX + 8], node[256];
	struct phx_progress p;
	enum phx_beat b;
	int n;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		n = snprintf(d, sizeof(d), "%s ", key);
		n += phx_progress_format("node7", &cases[i], d + n, sizeof(d) - (size_t)n);
		assert_int_equal(
			phx_progress_report_parse(d, (size_t)n, key, node, sizeof(node), &p), 0);
		assert_string_equal(node, "node7");
		assert_int_equal(p.stepped, cases[i].stepped);
		assert_true(p.step == cases[i].step && p.wait_ms == cases[i].wait_ms);
		assert_int_equal(p.resumed, cases[i].resumed);
		assert_true(p.resumed_step == cases[i].resumed_step);
		/* Neither a beat nor a lost report. */
		assert_int_equal(phx_alive_report_parse(d, (size_t)n, key, node, sizeof(node), &b),
				 -1);
		assert_int_equal(phx_lost_report_parse(d, (size_t)n, key, node, sizeof(node)), -1);
		/* Another key. */
		assert_int_equal(phx_progress_report_parse(d, (size_t)n,
							   "00112233445566778899aabbccddeefe", node,
							   sizeof(node), &p),
				 -1);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		n = snprintf(d, sizeof(d), "%s %s", key, bad[i]);
		assert_int_equal(
			phx_progress_report_parse(d, (size_t)n, key, node, sizeof(node), &p), -1);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_beats_reach_the_watchers),
		cmocka_unit_test(test_silence_is_found_once),
		cmocka_unit_test(test_a_settling_agent_gets_longer),
		cmocka_unit_test(test_steady_silence_is_one_timeout),
		cmocka_unit_test(test_an_agent_that_ends_is_not_lost),
		cmocka_unit_test(test_one_agent_watches_none),
		cmocka_unit_test(test_lost_line),
		cmocka_unit_test(test_lost_report),
		cmocka_unit_test(test_alive_report),
		cmocka_unit_test(test_progress_report),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
